"""Negative rewards: PRISM refuses them in every R operator (reachability,
cumulative, instantaneous, total, long-run; DTMC, CTMC, MDP), as soon as
the structure the operator uses has one in some reachable state; other
structures of the same model stay usable."""

import subprocess
import sys

import pytest

import jaxmc
from jaxmc.errors import ModelCheckingError


DTMC = """
dtmc
module die
  s : [0..3] init 0;
  [] s=0 -> 0.5 : (s'=1) + 0.5 : (s'=2);
  [] s=1 -> 0.5 : (s'=0) + 0.5 : (s'=3);
  [] s>=2 -> true;
endmodule
rewards "pos"
  s<2 : 1;
endrewards
rewards "neg"
  s<2 : 1-2;
endrewards
rewards "negtrans"
  [] s=1 : -0.5;
endrewards
"""

CTMC = """
ctmc
module q
  s : [0..2] init 0;
  [] s=0 -> 2 : (s'=1);
  [] s=1 -> 3 : (s'=2) + 1 : (s'=0);
endmodule
rewards "neg"
  s=1 : -1;
endrewards
"""

MDP = """
mdp
module m
  s : [0..2] init 0;
  [a] s=0 -> (s'=1);
  [b] s=0 -> 0.5 : (s'=1) + 0.5 : (s'=2);
  [] s>0 -> true;
endmodule
rewards "negtrans"
  [b] true : -3;
endrewards
"""


def _load(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return jaxmc.load_model(str(path))


OPERATORS = ["F s>=2", "C<=3", "I=2", "C", "S"]


@pytest.mark.parametrize("path", OPERATORS)
def test_negative_state_rewards_are_refused_by_every_operator(tmp_path, path):
    model = _load(tmp_path, "d.pm", DTMC)
    with pytest.raises(ModelCheckingError) as info:
        jaxmc.check(model, f'R{{"neg"}}=? [ {path} ]')
    text = str(info.value)
    assert '"neg"' in text and "negative state reward (-1.0)" in text
    assert "(s=0)" in text
    assert info.value.span is not None  # located at the R operator


@pytest.mark.parametrize("path", ["F s>=2", "C<=3", "I=2", "C"])
def test_negative_transition_rewards_are_refused(tmp_path, path):
    model = _load(tmp_path, "d.pm", DTMC)
    match = r"negative transition reward.*\(s=1\)"
    with pytest.raises(ModelCheckingError, match=match):
        jaxmc.check(model, f'R{{"negtrans"}}=? [ {path} ]')


def test_other_structures_of_the_model_still_work(tmp_path):
    model = _load(tmp_path, "d.pm", DTMC)
    # From s=0: 1 + 0.5 (1 + 0.5 R)  ->  R = 2.
    assert jaxmc.solve(model, 'R{"pos"}=? [ F s>=2 ]') == pytest.approx(2.0, rel=1e-5)


@pytest.mark.parametrize("path", ["F s=2", "C<=1.5", "I=1", "C", "S"])
def test_ctmc_negative_rewards_are_refused(tmp_path, path):
    model = _load(tmp_path, "q.sm", CTMC)
    with pytest.raises(ModelCheckingError, match=r"negative state reward.*\(s=1\)"):
        jaxmc.check(model, f"R=? [ {path} ]")


@pytest.mark.parametrize(
    "prop", ["Rmin=? [ F s>0 ]", "Rmax=? [ C<=2 ]", "Rmax=? [ I=0 ]"]
)
def test_mdp_negative_transition_rewards_are_refused(tmp_path, prop):
    model = _load(tmp_path, "m.nm", MDP)
    with pytest.raises(ModelCheckingError, match=r"negative transition reward \(-3"):
        jaxmc.check(model, prop, method="interval_iteration" if "F" in prop else None)


def test_negative_rewards_inside_a_nested_operator(tmp_path):
    model = _load(tmp_path, "d.pm", DTMC)
    with pytest.raises(ModelCheckingError, match="negative"):
        jaxmc.check(model, 'P>=0 [ F R{"neg"}<0 [ C<=1 ] ]')


def test_cli_reports_the_error_and_exits_1(tmp_path):
    model = tmp_path / "d.pm"
    model.write_text(DTMC)
    proc = subprocess.run(
        [sys.executable, "-m", "jaxmc", str(model), "--prop", 'R{"neg"}=? [ F s>=2 ]'],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "negative state reward" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_differentiable_solve_refuses_them_too(tmp_path):
    model = _load(
        tmp_path, "p.pm",
        "dtmc\nconst double p = 0.3;\nmodule m\n  s : [0..1] init 0;\n"
        "  [] s=0 -> p : (s'=1) + 1-p : (s'=0);\n  [] s=1 -> true;\nendmodule\n"
        "rewards\n  s=0 : -1;\nendrewards\n",
    )  # fmt: skip
    with pytest.raises(ModelCheckingError, match="negative state reward"):
        jaxmc.solve(model, "R=? [ F s=1 ]", params={"p": 0.5})


@pytest.mark.parametrize(
    "items",
    ["true : 2; s<2 : -1;", "[] true : 2; [] s=1 : -0.5;"],
)
def test_a_negative_item_is_refused_even_where_the_sum_is_not(tmp_path, items):
    # PRISM checks each reward item where its guard holds, not their sum.
    text = DTMC + f'rewards "mixed"\n  {items}\nendrewards\n'
    model = jaxmc.load_model_string(text)
    explicit = jaxmc.build(model)
    mixed = explicit.reward_structure("mixed")
    total = mixed.state if mixed.state is not None else mixed.transition
    assert (total >= 0).all()
    with pytest.raises(ModelCheckingError, match="negative reward item"):
        jaxmc.check(model, 'R{"mixed"}=? [ C<=3 ]')
    assert jaxmc.check(model, 'R{"pos"}=? [ C<=3 ]').value > 0


def test_refused_on_every_check_and_nonnegative_ones_scanned_once(monkeypatch):
    """A structure is scanned for negative rewards once per model: a refused
    one is refused again on every check, a nonnegative one is remembered."""
    from jaxmc.props import rewards

    scanned = []
    real = rewards._scan

    def counting(model, reward, span):
        scanned.append(reward.name)
        return real(model, reward, span)

    monkeypatch.setattr(rewards, "_scan", counting)
    m = jaxmc.load_model_string(DTMC)
    for _ in range(2):
        with pytest.raises(ModelCheckingError, match="negative"):
            jaxmc.check(m, 'R{"neg"}=? [ F s=3 ]')
    first = jaxmc.check(m, 'R{"pos"}=? [ F s=3 ]').value
    assert jaxmc.check(m, 'R{"pos"}=? [ F s=3 ]').value == first
    assert scanned == ["neg", "neg", "pos"]
