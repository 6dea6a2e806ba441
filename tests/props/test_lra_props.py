"""`Smin/Smax=? [φ]` and `R{..}min/max=? [S]` on MDPs through the API: the
plan's direction (written, or from a threshold), errors, filters, the
certified bound, the traced path's refusal; and agreement with Storm (sound
mode) on random MDPs and on PRISM's example MDPs."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from lra_models import HAND_MDP

import jaxmc
from jaxmc.errors import ModelCheckingError, UnsupportedError


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

EXAMPLES = (
    Path(__file__).resolve().parents[2] / ".." / "shared" / "models"
    / "prism-examples" / "mdps"
)  # fmt: skip


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    path = tmp_path_factory.mktemp("lra") / "hand.nm"
    path.write_text(HAND_MDP)
    return jaxmc.load_model(str(path))


@pytest.mark.parametrize(
    "prop, want",
    [
        ('Smax=? [ "one" ]', 0.5),
        ('Smin=? [ "one" ]', 0.0),
        ('R{"r"}max=? [ S ]', 1.5),
        ('R{"r"}min=? [ S ]', 0.25),
        ("Rmin=? [ S ]", 0.25),
        ('filter(max, Smin=? [ "one" ], s>0)', 0.3 / 1.3),
        ('filter(min, R{"r"}max=? [ S ])', 1.5),
    ],
)
def test_hand_values(hand, prop, want):
    r = jaxmc.check(hand, prop)
    assert r.value == pytest.approx(want, rel=1e-6, abs=1e-9)
    assert r.status == "converged"
    assert r.bound is not None and r.bound <= 1e-6 * want + 1e-12


@pytest.mark.parametrize(
    "prop, want",
    [
        ('Smax>=0.4 [ "one" ]', True),
        ('S>=0.1 [ "one" ]', False),  # >= takes the minimum: 0
        ('S<=0.6 [ "one" ]', True),  # <= the maximum: 1/2
        ('S>0.2 [ "one" ]', False),
        ('filter(forall, S<=0.4 [ "one" ], s=0)', False),
    ],
)
def test_thresholds(hand, prop, want):
    assert bool(jaxmc.check(hand, prop).value) is want


def test_direction_required(hand):
    with pytest.raises(ModelCheckingError) as e:
        jaxmc.check(hand, 'S=? [ "one" ]')
    assert "Smin=?/Smax=?" in str(e.value)
    with pytest.raises(ModelCheckingError):
        jaxmc.check(hand, 'R{"r"}=? [ S ]')


def test_change_criterion(hand):
    r = jaxmc.check(hand, 'R{"r"}min=? [ S ]', criterion="change")
    assert r.value == pytest.approx(0.25, rel=1e-5)
    assert r.bound is None


def test_traced_path_refuses(tmp_path):
    path = tmp_path / "p.nm"
    path.write_text(HAND_MDP.replace("mdp\n", "mdp\nconst double q;\n").replace(
        "0.3:(s'=1) + 0.7:(s'=2)", "q:(s'=1) + (1-q):(s'=2)"
    ))  # fmt: skip
    model = jaxmc.load_model(str(path), parameters=("q",))
    with pytest.raises(UnsupportedError):
        jaxmc.solve(model, 'Smax=? [ "one" ]', params={"q": 0.3})


def test_dtmc_unchanged(tmp_path):
    # S keeps its meaning on a DTMC; Smax is plain S there
    path = tmp_path / "c.pm"
    path.write_text(
        "dtmc\nmodule m\n s:[0..1] init 0;\n [] s=0 -> 0.25:(s'=1) + 0.75:(s'=0);\n"
        " [] s=1 -> 0.5:(s'=0) + 0.5:(s'=1);\nendmodule\n"
    )
    model = jaxmc.load_model(str(path))
    # pi(1) = 0.25 / (0.25 + 0.5)
    assert jaxmc.check(model, "S=? [ s=1 ]").value == pytest.approx(1 / 3)
    assert jaxmc.check(model, "Smax=? [ s=1 ]").value == pytest.approx(1 / 3)


# ------------------------------------------------------------------- Storm


def random_mdp(rng: random.Random, n: int = 6) -> str:
    lines = ["mdp", "module m", f"  s : [0..{n - 1}] init 0;"]
    for s in range(n):
        for act in rng.sample(["x", "y", "z"], rng.randint(1, 2)):
            succ = rng.sample(range(n), rng.randint(1, 2))
            w = [rng.randint(1, 4) for _ in succ]
            upd = " + ".join(f"{wi}/{sum(w)} : (s'={t})" for wi, t in zip(w, succ))
            lines.append(f"  [{act}] s={s} -> {upd};")
    lines.append("endmodule")
    sub = [s for s in range(n) if rng.random() < 0.5] or [0]
    lines.append('label "a" = ' + " | ".join(f"s={x}" for x in sub) + ";")
    lines.append('rewards "r"')
    for s in range(n):
        lines.append(f"  s={s} : {rng.randint(0, 3)};")
    lines.append(f"  [x] s<{n // 2} : 1.5;")
    lines.append("  [y] true : 0.5;")
    lines.append("endrewards")
    return "\n".join(lines) + "\n"


@pytest.mark.storm
@pytest.mark.parametrize("seed", range(4))
def test_random_mdps_agree_with_storm(seed, tmp_path):
    pytest.importorskip("stormpy")
    from storm_oracle import storm_value

    path = tmp_path / "m.nm"
    path.write_text(random_mdp(random.Random(seed)))
    model = jaxmc.load_model(str(path))
    for prop in [
        'Smax=? [ "a" ]',
        'Smin=? [ "a" ]',
        'R{"r"}max=? [ S ]',
        'R{"r"}min=? [ S ]',
    ]:
        want = storm_value(str(path), "", prop)
        got = jaxmc.check(model, prop).value
        assert got == pytest.approx(want, rel=1e-6, abs=1e-9), prop


WALK = """mdp
const int N = 200;
module m
  s : [0..N-1] init 0;
  [fair] true -> 0.5:(s'=mod(s+N-1,N)) + 0.5:(s'=mod(s+1,N));
  [bias] true -> 0.4:(s'=mod(s+1,N)) + 0.6:(s'=mod(s+N-1,N));
endmodule
label "low" = s<10;
"""


@pytest.mark.storm
@pytest.mark.parametrize("prop", ['Smax=? [ "low" ]', 'Smin=? [ "low" ]'])
def test_slowly_mixing_component_agrees_with_storm(prop, tmp_path):
    # value iteration cannot meet epsilon in its sweeps: linear programming
    pytest.importorskip("stormpy")
    from storm_oracle import storm_value

    path = tmp_path / "walk.nm"
    path.write_text(WALK)
    r = jaxmc.check(jaxmc.load_model(str(path)), prop)
    assert r.status == "converged" and "linear programming" in r.attempts[0].note
    assert r.value == pytest.approx(storm_value(str(path), "", prop), rel=1e-6)


@pytest.mark.storm
@pytest.mark.parametrize(
    "file, consts, prop",
    [
        ("consensus/coin2.nm", "K=2", 'Smin=? [ "agree" ]'),
        ("mutual/mutual3.nm", "", 'Smax=? [ "some_14" ]'),
        ("rabin/rabin3.nm", "", 'Smin=? [ "one_critical" ]'),
        ("wlan/wlan0.nm", "TRANS_TIME_MAX=10", 'R{"cost"}max=? [ S ]'),
    ],
)
def test_examples_agree_with_storm(file, consts, prop):
    pytest.importorskip("stormpy")
    from storm_input import program_text
    from storm_oracle import storm_value

    path = EXAMPLES / file
    if not path.exists():
        pytest.skip("PRISM's examples are not in ../shared")
    model = jaxmc.load_model(str(path), consts or None)
    r = jaxmc.check(model, prop)
    want = storm_value(str(path), consts, prop, program_text(path))
    assert r.value == pytest.approx(want, rel=1e-6, abs=1e-9)
    assert abs(r.value - want) <= r.bound + 1e-7 * abs(want)  # Storm's own error
