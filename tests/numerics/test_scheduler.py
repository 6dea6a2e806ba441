"""Optimal memoryless schedulers (`jaxmc.numerics.scheduler`): ties inside
end components (Storm's #940), where picking the first choice that attains
the optimum is wrong; verification and repair on the induced DTMC; random
MDPs against every memoryless scheduler."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import jaxmc
from jaxmc.numerics.induced import induced_dtmc, reach_reward_values, until_values
from jaxmc.numerics.result import NumericResult
from jaxmc.numerics.scheduler import reach_reward_scheduler, until_scheduler
from jaxmc.numerics.transitions import choice_rewards


# s=0: [loop] stays, [go] moves to s=1 (listed second: a naive pick of the
# first optimal choice loops). s=1: [back] to s=0, [exit] to the goal with
# probability q, else to a sink. Pmax(F goal) = q in s=0 and s=1 for both
# choices of s=0 and both of s=1 in the fixed point; only [go]+[exit] reach.
TIE = """
mdp
const double q;
module m
  s : [0..3] init 0;
  [loop] s=0 -> (s'=0);
  [go]   s=0 -> (s'=1);
  [back] s=1 -> (s'=0);
  [exit] s=1 -> q:(s'=2) + (1-q):(s'=3);
  [done] s>=2 -> true;
endmodule
label "goal" = s=2;
rewards "cost"
  [exit] true : 1;
endrewards
"""


def _naive(model, values, b=None, opt="max"):
    """The first choice attaining the optimum of `b + P values` (exactly)."""
    soc, row = model.state_of_choice(), model.row_of_entry()
    q = np.bincount(row, weights=model.val * values[model.col], minlength=len(soc))
    if b is not None:
        q = q + b
    choice = np.zeros(model.num_states, np.int64)
    for s in range(model.num_states):
        lo, hi = model.choice_ptr[s], model.choice_ptr[s + 1]
        seg = q[lo:hi]
        best = seg.max() if opt == "max" else seg.min()
        choice[s] = int(np.nonzero(np.isclose(seg, best, rtol=0, atol=1e-12))[0][0])
    return choice


@pytest.mark.parametrize("q", [1.0, 0.5])
def test_pmax_tie_in_end_component(q):
    model = jaxmc.load_model_string(TIE, {"q": q})
    explicit = jaxmc.build(model)
    goal = explicit.labels["goal"]
    result = jaxmc.check(model, 'Pmax=? [ F "goal" ]', scheduler=True)
    assert result.value == pytest.approx(q)
    sched = result.scheduler
    assert sched.actions[0] == "go" and sched.actions[1] == "exit"
    dtmc = jaxmc.induced_model(model, result)
    assert jaxmc.check(dtmc, 'P=? [ F "goal" ]').value == pytest.approx(q, abs=1e-12)
    # the naive pick from the exact values loops in s=0 forever
    naive = _naive(explicit, np.array([q, q, 1.0, 0.0]))
    true = np.ones(explicit.num_states, bool)
    wrong = until_values(induced_dtmc(explicit, naive), true, goal)
    assert wrong[0] == 0.0


def test_rmin_tie_in_zero_reward_end_component():
    model = jaxmc.load_model_string(TIE, {"q": 1.0})
    explicit = jaxmc.build(model)
    goal = explicit.labels["goal"]
    result = jaxmc.check(model, 'R{"cost"}min=? [ F "goal" ]', scheduler=True)
    assert result.value == pytest.approx(1.0)
    assert result.scheduler.actions[:2] == ("go", "exit")
    dtmc = jaxmc.induced_model(model, result)
    assert jaxmc.check(dtmc, 'R{"cost"}=? [ F "goal" ]').value == pytest.approx(1.0)
    r = choice_rewards(explicit, explicit.rewards[0])
    naive = _naive(explicit, np.array([1.0, 1.0, 0.0, np.inf]), r, opt="min")
    rows = explicit.choice_ptr[:-1] + naive
    wrong = reach_reward_values(induced_dtmc(explicit, naive), r[rows], goal)
    assert wrong[0] == np.inf  # [loop] at no cost, forever


def test_pmin_keeps_to_prob0e_and_rmax_infinite():
    model = jaxmc.load_model_string(TIE, {"q": 0.5})
    res = jaxmc.check(model, 'Pmin=? [ F "goal" ]', scheduler=True)
    assert res.value == 0.0
    s = res.scheduler
    assert s.actions[0] == "loop" and s.defined[0]
    assert jaxmc.check(jaxmc.induced_model(model, res), 'P=? [ F "goal" ]').value == 0
    res = jaxmc.check(model, 'R{"cost"}max=? [ F "goal" ]', scheduler=True)
    assert res.value == np.inf
    assert np.isinf(res.scheduler.values[0])


def _result(values, bound):
    v = np.asarray(values, np.float64)
    return NumericResult(values=v, bound=bound, lower=v - bound, upper=v + bound)


def test_wrong_pick_is_repaired():
    """Values (uncertified, as PRISM's criterion leaves them) that rank two
    choices the wrong way round: the induced DTMC shows the pick is not
    optimal, and policy iteration repairs it."""
    text = """
    mdp
    module m
      s : [0..4] init 0;
      [a] s=0 -> (s'=1);
      [b] s=0 -> (s'=2);
      [c] s=1 -> 0.5:(s'=3) + 0.5:(s'=4);
      [d] s=2 -> 0.5001:(s'=3) + 0.4999:(s'=4);
      [e] s>2 -> true;
    endmodule
    """
    explicit = jaxmc.build(jaxmc.load_model_string(text))
    n = explicit.num_states
    at = {int(v): i for i, v in enumerate(explicit.states[:, 0])}
    psi = np.zeros(n, bool)
    psi[at[3]] = True
    claimed = np.zeros(n)
    claimed[[at[0], at[1], at[2], at[3]]] = [0.5001, 0.5001, 0.5, 1.0]  # 1, 2 swapped
    res = NumericResult(values=claimed)
    sched = until_scheduler(
        explicit, np.ones(n, bool), psi, "max", res, tol=1e-7, relative=False
    )
    assert sched.actions[at[0]] == "b" and sched.repairs == 1
    assert sched.values[at[0]] == pytest.approx(0.5001, abs=1e-15)


def test_inconsistent_certificate_is_an_error():
    """Certified bounds that exclude the optimum: never a silent result."""
    text = """
    mdp
    module m
      s : [0..2] init 0;
      [a] s=0 -> 0.5:(s'=1) + 0.5:(s'=2);
      [c] s>0 -> true;
    endmodule
    """
    explicit = jaxmc.build(jaxmc.load_model_string(text))
    n = explicit.num_states
    psi = explicit.states[:, 0] == 1
    values = psi.astype(float)
    values[explicit.states[:, 0] == 0] = 0.4  # exact: 0.5
    with pytest.raises(jaxmc.ModelCheckingError, match="certified bounds"):
        until_scheduler(explicit, np.ones(n, bool), psi, "max", _result(values, 1e-6))


def _random_mdp(rng, n, k):
    """A random MDP with `k` choices per state (some self-loops, so end
    components), target state 0 absorbing, rewards in {0, 1}."""
    rows, cols, vals = [], [], []
    for s in range(n):
        for _ in range(k):
            if s == 0:
                succ, p = [0], [1.0]
            else:
                m = rng.integers(1, 3)
                succ = sorted(set(rng.integers(0, n, size=m).tolist()))
                p = rng.dirichlet(np.ones(len(succ)))
            rows.append(len(cols))
            cols.extend(succ)
            vals.extend(p)
    row_ptr = np.array(rows + [len(cols)], np.int64)
    reward = rng.integers(0, 2, size=len(cols)).astype(float)
    from jaxmc.explore.model import ExplicitModel, RewardStructure
    from jaxmc.lang.ast import ModelType

    return ExplicitModel(
        model_type=ModelType.MDP,
        variables=(),
        states=np.zeros((n, 0), np.int32),
        initial_states=np.array([n - 1]),
        choice_ptr=np.arange(0, n * k + 1, k, dtype=np.int64),
        row_ptr=row_ptr,
        col=np.array(cols, np.int64),
        val=np.array(vals),
        labels={"init": np.arange(n) == n - 1, "deadlock": np.zeros(n, bool)},
        rewards=(RewardStructure("r", transition=reward * (reward > 0)),),
        choice_action=tuple(f"c{i}" for i in range(k)) * n,
    )


@pytest.mark.parametrize("seed", range(6))
def test_random_mdps_against_every_scheduler(seed):
    """The scheduler's exact values equal the optimum over all memoryless
    deterministic schedulers (enumerated), for Pmax/Pmin and Rmin/Rmax."""
    rng = np.random.default_rng(seed)
    n, k = 5, 2
    model = _random_mdp(rng, n, k)
    target = np.arange(n) == 0
    true = np.ones(n, bool)
    r = choice_rewards(model, model.rewards[0])
    all_p, all_r = [], []
    for c in itertools.product(range(k), repeat=n):
        c = np.array(c)
        d = induced_dtmc(model, c)
        all_p.append(until_values(d, true, target))
        all_r.append(reach_reward_values(d, r[model.choice_ptr[:-1] + c], target))
    all_p, all_r = np.array(all_p), np.array(all_r)
    options = jaxmc.SolveOptions(epsilon=1e-9)
    for opt, best in (("max", all_p.max(0)), ("min", all_p.min(0))):
        res = jaxmc.numerics.until_probabilities(
            model, true, target, opt=opt, options=options
        )
        sched = until_scheduler(model, true, target, opt, res, tol=1e-9)
        np.testing.assert_allclose(sched.values, best, rtol=0, atol=1e-9)
    for opt, best in (("max", all_r.max(0)), ("min", all_r.min(0))):
        res = jaxmc.numerics.reachability_rewards(
            model, model.rewards[0], target, opt=opt, options=options
        )
        sched = reach_reward_scheduler(
            model, model.rewards[0], target, opt, res, tol=1e-9
        )
        finite = np.isfinite(best)
        assert np.array_equal(np.isfinite(sched.values), finite)
        np.testing.assert_allclose(sched.values[finite], best[finite], rtol=1e-8)


def test_step_bounded_and_dtmc_are_refused():
    model = jaxmc.load_model_string(TIE, {"q": 0.5})
    with pytest.raises(jaxmc.UnsupportedError, match="memory"):
        jaxmc.check(model, 'Pmax=? [ F<=3 "goal" ]', scheduler=True)
    # LTL: a finite-memory scheduler (tests/props/test_ltl_scheduler.py)
    ltl = jaxmc.check(model, 'Pmax=? [ F "goal" & X "goal" ]', scheduler=True)
    assert ltl.scheduler.memory_states >= 1
    dtmc = "dtmc module m s:[0..1]; [] s=0 -> (s'=1); endmodule"
    dtmc = jaxmc.load_model_string(dtmc)
    with pytest.raises(jaxmc.UnsupportedError, match="only MDPs"):
        jaxmc.check(dtmc, "P=? [ F s=1 ]", scheduler=True)


@pytest.mark.parametrize(
    "prop",
    [
        'Pmax=? [ G !"goal" ]',
        'Pmin=? [ G !"goal" ]',
        'Pmax=? [ s<2 W "goal" ]',
        'Pmin=? [ "goal" R s!=3 ]',
    ],
)
def test_dual_properties_scheduler_values_are_the_propertys(prop):
    """`G`, `W`, `R` are checked as 1 - an until: their scheduler is the
    until's, but its `values` (and objective) are the property's, so the
    scheduler's value at the initial state is the result's (it was the
    until's, 1 - the result, before)."""
    model = jaxmc.load_model_string(TIE, {"q": 0.5})
    r = jaxmc.check(model, prop, scheduler=True, all_states=True)
    np.testing.assert_allclose(r.scheduler.values, r.values, atol=1e-9)
    assert r.scheduler.objective.startswith(prop.split("=?")[0])
    induced = jaxmc.induced_model(model, r)
    plain = prop.replace("max", "").replace("min", "")
    got = jaxmc.check(induced, plain).value
    assert got == pytest.approx(r.values[int(r.initial_states[0])], abs=1e-9)
