"""Reward-bounded until (`F^{rew{"r"}<=b}`, `U^{...}`) against closed forms,
PRISM's hand-unfolded firewire deadline model, and PRISM's own step bounds.

The coin model flips until heads (probability p); with K ~ Geometric(p)
tails before it, the reward accumulated when "done" is reached is w (K + 1)
for a reward w per flip, so P(F^{rew∈I} done) = sum of (1-p)^k p over the k
with w (k + 1) in I (computed here with exact rationals)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import jaxmc
from jaxmc.errors import JaxmcError, UnsupportedError


MODELS = Path(__file__).resolve().parents[2] / ".." / "shared" / "models"

COIN = """dtmc
const double p;
module m
  s : [0..1] init 0;
  [flip] s=0 -> p:(s'=1) + (1-p):(s'=0);
  [stay] s=1 -> (s'=1);
endmodule
rewards "r"
  s=0 : 1;
  s=1 : 5;
endrewards
rewards "two"
  [flip] true : 2;
endrewards
rewards "half"
  s=0 : 0.5;
endrewards
rewards "tenth"
  [flip] true : 0.1;
endrewards
label "done" = s=1;
"""

WEIGHT = {"two": Fraction(2), "half": Fraction(1, 2), "tenth": Fraction(1, 10)}


def coin(tmp_path, p: float):
    path = tmp_path / "coin.pm"
    path.write_text(COIN)
    return jaxmc.load_model(str(path), {"p": p})


def closed_form(p, w, lo=None, hi=None, lo_strict=False, hi_strict=False):
    total = 0.0
    for k in range(2000):
        acc = w * (k + 1)
        ok = lo is None or (acc > lo if lo_strict else acc >= lo)
        ok = ok and (hi is None or (acc < hi if hi_strict else acc <= hi))
        if ok:
            total += (1 - p) ** k * p
    return total


BOUNDS = [
    ("<=3", None, Fraction(3), False, False),
    ("<3", None, Fraction(3), False, True),
    ("<=0", None, Fraction(0), False, False),
    ("<=0.3", None, Fraction(3, 10), False, False),
    ("<=1.2", None, Fraction(6, 5), False, False),
    ("<=7", None, Fraction(7), False, False),
    (">=3", Fraction(3), None, False, False),
    (">3", Fraction(3), None, True, False),
    (">=0.25", Fraction(1, 4), None, False, False),
    ("[2,6]", Fraction(2), Fraction(6), False, False),
    ("[0.2,0.5]", Fraction(1, 5), Fraction(1, 2), False, False),
    ("=4", Fraction(4), Fraction(4), False, False),
]


@pytest.mark.parametrize("reward", sorted(WEIGHT))
@pytest.mark.parametrize("text, lo, hi, lo_strict, hi_strict", BOUNDS)
def test_coin_closed_form(tmp_path, reward, text, lo, hi, lo_strict, hi_strict):
    p = 0.55 if reward == "half" else 0.3
    model = coin(tmp_path, p)
    prop = f'P=? [ F^{{rew{{"{reward}"}}{text}}} "done" ]'
    want = closed_form(p, WEIGHT[reward], lo, hi, lo_strict, hi_strict)
    result = jaxmc.check(model, prop)
    assert result.value == pytest.approx(want, abs=1e-9), prop
    assert result.bound is not None and result.bound <= 1e-6


def test_target_reward_does_not_count_and_lower_bound_keeps_going(tmp_path):
    model = coin(tmp_path, 0.3)
    # "r" also rewards the (absorbing) target: not counted when reached ...
    r = jaxmc.check(model, 'P=? [ F^{rew{"r"}<=3} "done" ]').value
    assert r == pytest.approx(1 - 0.7**3)
    # ... but a path goes on accumulating it in "done" (Storm's semantics)
    assert jaxmc.check(model, 'P=? [ F^{rew{"r"}>=100} "done" ]').value == 1.0
    # left operand: s=0 must hold until then, so the path cannot wait
    v = jaxmc.check(model, 'P=? [ s=0 U^{rew{"r"}>=3} "done" ]').value
    assert v == pytest.approx(0.7**2)


def test_thirds_are_exact(tmp_path):
    third = tmp_path / "third.pm"
    third.write_text(COIN.replace(": 0.1;", ": 1/3;"))
    model = jaxmc.load_model(str(third), {"p": 0.3})
    # (k + 1) / 3 <= 1 for k <= 2: no rounding of 1/3 + 1/3 + 1/3
    v = jaxmc.check(model, 'P=? [ F^{rew{"tenth"}<=1} "done" ]').value
    assert v == pytest.approx(1 - 0.7**3, abs=1e-12)


def test_all_states_thresholds_and_duals(tmp_path):
    model = coin(tmp_path, 0.3)
    res = jaxmc.check(model, 'P=? [ F^{rew{"two"}<=4} "done" ]')
    np.testing.assert_allclose(res.values, [1 - 0.7**2, 1.0])
    # G is the dual: P(G^{I} !done) = 1 - P(F^{I} done)
    g = jaxmc.check(model, 'P=? [ G^{rew{"two"}<=4} !"done" ]')
    np.testing.assert_allclose(g.values, [0.7**2, 0.0], atol=1e-12)
    assert jaxmc.check(model, 'P>=0.5 [ F^{rew{"two"}<=4} "done" ]').value is True
    assert jaxmc.check(model, 'P>0.6 [ F rew{"two"}<=4 "done" ]').value is False
    nested = 'P=? [ F P>0.9 [ F^{rew{"half"}<=1.5} "done" ] ]'
    assert jaxmc.check(model, nested).value == 1.0


@pytest.mark.parametrize("k", [0, 1, 4])
def test_steps_and_time_are_prisms_step_bounds(tmp_path, k):
    model = coin(tmp_path, 0.3)
    want = jaxmc.check(model, f'P=? [ F<={k} "done" ]').value
    for text in (f"F^{{steps<={k}}}", f"F^{{time<={k}}}", f"F{{<={k}}}"):
        assert jaxmc.check(model, f'P=? [ {text} "done" ]').value == want
    assert want == pytest.approx(1 - 0.7**k)


MDP = """mdp
module m
  s : [0..2] init 0;
  [a] s=0 -> 0.5:(s'=1) + 0.5:(s'=2);
  [b] s=0 -> 0.9:(s'=0) + 0.1:(s'=2);
  [c] s=1 -> (s'=0);
  [d] s=2 -> (s'=2);
endmodule
rewards "t"
  [a] true : 1;
  [b] true : 1;
  [c] true : 2;
endrewards
label "done" = s=2;
"""


def _mdp_reference(budget: int, opt) -> float:
    """Optimal P(reach s=2 with accumulated reward <= budget) by dynamic
    programming over the remaining budget (every choice costs >= 1)."""
    v = {}
    for r in range(budget + 1):
        # a costs 1, then c (cost 2) from s=1 back to s=0
        back = v[(0, r - 3)] if r >= 3 else 0.0
        a = 0.5 * back + 0.5 if r >= 1 else 0.0
        b = 0.9 * v[(0, r - 1)] + 0.1 if r >= 1 else 0.0
        v[(0, r)] = opt(a, b)
    return v[(0, budget)]


@pytest.mark.parametrize("budget", [0, 1, 3, 6])
def test_mdp_min_max_against_dynamic_programming(tmp_path, budget):
    path = tmp_path / "m.nm"
    path.write_text(MDP)
    model = jaxmc.load_model(str(path))
    for opt, fn in (("max", max), ("min", min)):
        prop = f'P{opt}=? [ F^{{rew{{"t"}}<={budget}}} "done" ]'
        got = jaxmc.check(model, prop).value
        assert got == pytest.approx(_mdp_reference(budget, fn), abs=1e-9), prop


CTMC = """ctmc
module m
  s : [0..2] init 0;
  [a] s=0 -> 2:(s'=1) + 1:(s'=2);
  [b] s=1 -> 3:(s'=0);
endmodule
rewards "act"
  [a] true : 1;
endrewards
rewards "rate"
  s=0 : 1;
endrewards
label "done" = s=2;
"""


def test_ctmc_impulse_rewards_through_the_embedded_dtmc(tmp_path):
    path = tmp_path / "c.sm"
    path.write_text(CTMC)
    model = jaxmc.load_model(str(path))
    # every [a] jump earns 1 and ends in "done" with probability 1/3
    for b in range(4):
        want = 1 - (2 / 3) ** b
        got = jaxmc.check(model, f'P=? [ F^{{rew{{"act"}}<={b}}} "done" ]').value
        assert got == pytest.approx(want, abs=1e-9)
    t = jaxmc.check(model, 'P=? [ F^{time<=2} "done" ]').value
    assert t == pytest.approx(jaxmc.check(model, 'P=? [ F<=2 "done" ]').value)
    with pytest.raises(UnsupportedError, match="state rewards") as err:
        jaxmc.check(model, 'P=? [ F^{rew{"rate"}<=2} "done" ]')
    assert err.value.hint
    with pytest.raises(UnsupportedError, match="step bound") as err:
        jaxmc.check(model, 'P=? [ F^{steps<=2} "done" ]')
    assert err.value.span is not None


def test_refusals_have_hints(tmp_path):
    model = coin(tmp_path, 0.3)
    with pytest.raises(UnsupportedError, match="multiples") as err:
        jaxmc.check(model, 'P=? [ F^{rew{"tenth"}<=100000000} "done" ]')
    assert err.value.hint
    fine = tmp_path / "fine.pm"
    fine.write_text(COIN.replace("s=1 : 5;", "s=1 : 1e-7;"))
    mfine = jaxmc.load_model(str(fine), {"p": 0.3})
    with pytest.raises(UnsupportedError, match="multiples"):  # step 1e-7
        jaxmc.check(mfine, 'P=? [ F^{rew{"r"}<=3} "done" ]')
    with pytest.raises(JaxmcError, match="bounded reachability rewards"):
        jaxmc.check(model, 'R{"two"}=? [ F^{rew{"two"}<=2} "done" ]')
    neg = tmp_path / "neg.pm"
    neg.write_text(COIN.replace("s=1 : 5;", "s=1 : -5;"))
    mneg = jaxmc.load_model(str(neg), {"p": 0.3})
    with pytest.raises(JaxmcError, match="negative"):
        jaxmc.check(mneg, 'P=? [ F^{rew{"r"}<=2} "done" ]')


@pytest.mark.parametrize("width", [1, 2, 5])
def test_blocks_of_counter_values_agree_with_one_product(tmp_path, monkeypatch, width):
    """Solving the counter grid in blocks (Storm's epochs when a block is one
    counter value) gives the one-product values, in every state."""
    from jaxmc.numerics import reward_bounded

    mdp = tmp_path / "m.nm"
    mdp.write_text(MDP.replace("[c] true : 2;", "[c] true : 2;\n  s=1 : 0.5;"))
    cases = [
        (coin(tmp_path, 0.3), 'P=? [ F^{rew{"two"}[3,9]} "done" ]'),
        (coin(tmp_path, 0.3), 'P=? [ F^{rew{"half"}>=2} "done" ]'),
        (coin(tmp_path, 0.3), 'P=? [ s=0 U^{rew{"r"}<=6} "done" ]'),
        (jaxmc.load_model(str(mdp)), 'Pmax=? [ F^{rew{"t"}<=7.5} "done" ]'),
        (jaxmc.load_model(str(mdp)), 'Pmin=? [ F^{rew{"t"}>4} "done" ]'),
        (jaxmc.load_model(str(mdp)), 'Pmin=? [ s<2 U^{rew{"t"}[2,6]} "done" ]'),
    ]
    whole = [jaxmc.check(m, prop) for m, prop in cases]
    for (m, prop), want in zip(cases, whole):
        n = jaxmc.build(m).num_states
        monkeypatch.setattr(reward_bounded, "MAX_PRODUCT_STATES", width * n)
        got = jaxmc.check(m, prop)
        np.testing.assert_allclose(got.values, want.values, atol=1e-9, err_msg=prop)
        assert got.bound is not None and got.bound <= 1e-6


FIREWIRE = MODELS / "prism-examples" / "mdps" / "firewire" / "impl"


@pytest.mark.skipif(not FIREWIRE.is_dir(), reason="shared models not present")
def test_firewire_deadline_equals_prisms_unfolded_timer_model():
    """PRISM's deadline.nm is firewire.nm with the time unfolded by hand
    into a timer module: its `Pmin [true U done]` is firewire's
    `Pmin [F^{rew{"time"}<=deadline} done]`."""
    done = "((s1=8 & s2=7) | (s1=7 & s2=8))"
    unfolded = jaxmc.load_model(
        str(FIREWIRE / "deadline.nm"), "delay=3,fast=0.5,deadline=200"
    )
    want = jaxmc.check(unfolded, f"Pmin=? [ true U {done} ]").value
    model = jaxmc.load_model(str(FIREWIRE / "firewire.nm"), "delay=3,fast=0.5")
    got = jaxmc.check(model, f'Pmin=? [ F^{{rew{{"time"}}<=200}} {done} ]').value
    assert want == pytest.approx(0.5, abs=1e-6)
    assert got == pytest.approx(want, abs=1e-6)


#: QVBS's reward-bounded properties in the style of eajs and firewire: a
#: battery MDP with utility and time rewards, a properties file declaring
#: its bounds as undefined constants (given with -const), a lower bound
#: (`>=B`, eajs's `ProbUtil`) and firewire's unparenthesised target
#: (`F^{...} (a) | (b)`, which is `F^{...} ((a) | (b))` as in Storm).
BATTERY = """mdp
const int cap;
formula empty = battery=0;
module proc
  battery : [0..cap] init cap;
  job : [0..2] init 0;
  [work] battery>0 & job=0 -> 0.6:(job'=1)&(battery'=battery-1)
                            + 0.4:(job'=2)&(battery'=battery-1);
  [turbo] battery>1 & job=0 -> 0.9:(job'=1)&(battery'=battery-2)
                             + 0.1:(job'=2)&(battery'=battery-2);
  [done] job>0 -> (job'=0);
  [] battery=0 & job=0 -> true;
endmodule
rewards "util"
  [done] job=1 : 1;
endrewards
rewards "time"
  [work] true : 2;
  [turbo] true : 1;
  [done] true : 1;
endrewards
"""

BATTERY_PROPS = """const int B;
const int D;
"ExpUtil": R{"util"}max=? [ F empty ];
"ProbUtil": Pmax=? [ F^{rew{"util"}>=B} empty ];
"deadline": Pmin=? [ F^{rew{"time"}<=D} (job=1) | (battery=0)];
"deadline2": Pmin=? [ F^{rew{"time"}<=D} ((job=1) | (battery=0))];
"""


def test_qvbs_style_properties_file(tmp_path, capsys):
    """The properties parse with their constants from -const; the
    unparenthesised disjunction is the target. By hand (cap=6, D=5): the
    cheapest way to job=1 within time 5 is `work` twice (0.6 + 0.4 * 0.6);
    the most utility before the battery is empty is 5 works' 0.6 (the sixth
    empties the battery before its job is done)."""
    from jaxmc.cli.command import main

    model = tmp_path / "battery.prism"
    model.write_text(BATTERY)
    props = tmp_path / "battery.props"
    props.write_text(BATTERY_PROPS)
    code = main([str(model), str(props), "--const", "cap=6,B=3,D=5", "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    import json

    got = {p["name"]: p["value"] for p in json.loads(out)["runs"][0]["properties"]}
    assert got["deadline"] == pytest.approx(0.84, abs=1e-12)
    assert got["deadline2"] == got["deadline"]
    assert got["ExpUtil"] == pytest.approx(3.0, abs=1e-9)
    assert 0 < got["ProbUtil"] < 1
    # a lower bound of 0 is reaching `empty` at all; a path goes on past
    # the first `empty` state (the sixth job is done there, empty still
    # holds), so 6 jobs done takes six works that all succeed, 7 none
    m = jaxmc.load_model(str(model), "cap=6")
    assert jaxmc.check(m, 'Pmax=? [ F^{rew{"util"}>=0} empty ]').value == 1.0
    six = jaxmc.check(m, 'Pmax=? [ F^{rew{"util"}>=6} empty ]').value
    assert six == pytest.approx(0.6**6, rel=1e-12)
    assert jaxmc.check(m, 'Pmax=? [ F^{rew{"util"}>=7} empty ]').value == 0.0


@pytest.mark.parametrize(
    "text",
    ['Pmin=? [ F^{rew{"t"}<=19} "done" ]', 'Pmax=? [ s<2 U^{rew{"t"}[4,17]} "done" ]',
     'Pmin=? [ F^{rew{"t"}>=12} "done" ]'],
)  # fmt: skip
def test_blocks_from_a_cached_shape_are_the_blocks_built_afresh(tmp_path, text):
    """`reward_unfold.Shapes` builds the shape of the blocks between the top
    and the bottom once: every block it gives is the product built afresh,
    array for array, whatever the known values above it (0 and 1 included,
    which drop entries)."""
    from jaxmc.lang import parse_expression
    from jaxmc.numerics import reward_bounded as RB, reward_unfold as RU
    from jaxmc.props.check import state_formulas

    path = tmp_path / "m.nm"
    path.write_text(MDP.replace("[c] true : 2;", "[c] true : 2;\n  s=1 : 0.5;"))
    explicit = jaxmc.build(jaxmc.load_model(str(path)))
    op = parse_expression(text)
    b = op.path.bound
    scalar = state_formulas(explicit)
    low = None if b.low is None else float(np.asarray(scalar(b.low)).flat[0])
    high = None if b.high is None else float(np.asarray(scalar(b.high)).flat[0])
    inc = RB._increments(explicit, explicit.reward_structure("t"))
    step = RB.reward_step(inc)
    win = RB.window(step, low, high, b.kind.value == ">", b.kind.value == "<")
    values, where = np.unique(inc, return_inverse=True)
    steps = np.array([int(RB._fraction(v) / step) for v in values], np.int64)[where]
    n = explicit.num_states
    phi = np.ones(n, bool) if op.path.left is None else np.asarray(scalar(op.path.left))
    psi = np.asarray(scalar(op.path.right), bool)
    phi = np.broadcast_to(phi, (n,)).astype(bool)
    rng = np.random.default_rng(0)
    shapes = RU.Shapes(steps, win)
    reused = 0
    hi = win.cap
    while hi >= 0:
        lo = max(0, hi - 2)
        known = rng.choice([0.0, 1.0, 0.25, 0.7], size=(int(steps.max()) + 3, n))
        block = RU.Block(lo, hi, known)
        cached = shapes.key(lo, hi) in shapes.cache
        got = RU.unfold(explicit, phi, psi, steps, win, block, shapes)
        want = RU.unfold(explicit, phi, psi, steps, win, block)
        reused += cached
        for a, b_ in zip(got[1:], want[1:]):
            np.testing.assert_array_equal(a, b_)
        for field in (
            "states",
            "initial_states",
            "choice_ptr",
            "row_ptr",
            "col",
            "val",
        ):
            np.testing.assert_array_equal(
                getattr(got[0], field), getattr(want[0], field)
            )
        for name in ("init", "deadlock"):
            np.testing.assert_array_equal(got[0].labels[name], want[0].labels[name])
        hi = lo - 1
    assert reused >= 2
