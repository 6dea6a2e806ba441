"""Topological value and interval iteration for MDPs (issue 20): a chain that
plain value iteration needs more than 10^4 sweeps for, random small MDPs
(with end components) against every memoryless scheduler solved densely,
the consensus protocol against Storm's sound engine, and the fallback from
value iteration to interval iteration."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import jaxmc
from jaxmc.errors import ConvergenceError
from jaxmc.numerics import Attempt
from jaxmc.options import SolveOptions
from jaxmc.solvers import Status, _policy, _topological, plan_levels


ROOT = Path(__file__).resolve().parents[2]
CONSENSUS = ROOT / "../shared/models/prism-examples/mdps/consensus/coin2.nm"

CHAIN = """mdp
const int N;
const double f;
module chain
  x : [0..N+1];
  [a] x<N -> 0.9:(x'=x+1) + 0.1:(x'=x);
  [b] x<N -> 0.5:(x'=x+1) + (0.5-f):(x'=x) + f:(x'=N+1);
  [] x>=N -> true;
endmodule
init true endinit
rewards "steps" x<N : 1; endrewards
label "goal" = x=N;
"""


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    path = tmp_path_factory.mktemp("chain") / "chain.nm"
    path.write_text(CHAIN)
    return path


def _at_zero(model, res):
    m = jaxmc.build(model)
    i = int(np.flatnonzero(np.asarray(m.states)[:, 0] == 0)[0])
    return float(res.values[i])


def test_chain_beyond_plain_value_iteration(chain):
    """12,000 states in a row, each with a self loop: plain value iteration
    moves the target's value one state per sweep (> 10^4 sweeps); the
    topological solve is a closed form per state, exact. (Every state is
    initial: the build is one breadth-first level.)"""
    n, f = 12000, 1e-4
    model = jaxmc.load_model(str(chain), f"N={n},f={f}")
    p_b = 0.5 / (0.5 + f)  # choice b: reach x+1 before failing
    for prop, expect in [
        ('Pmin=? [ F "goal" ]', p_b**n),
        ('Pmax=? [ F "goal" ]', 1.0),
    ]:
        for method in ("value_iteration", "interval_iteration"):
            res = jaxmc.check(model, prop, method=method)
            assert _at_zero(model, res) == pytest.approx(expect, rel=1e-9)
    model = jaxmc.load_model(str(chain), f"N={n},f=0")
    for prop, expect in [
        ('R{"steps"}min=? [ F "goal" ]', n / 0.9),
        ('R{"steps"}max=? [ F "goal" ]', 2.0 * n),
    ]:
        for method in ("value_iteration", "interval_iteration"):
            res = jaxmc.check(model, prop, method=method)
            assert _at_zero(model, res) == pytest.approx(expect, rel=1e-9)
            assert not res.iterations  # no sweeps: closed forms only


def test_levels_batch_singletons(chain):
    """The chain is 20,001 singleton components in as many levels, the
    whole system ordered bottom first."""
    m = jaxmc.build(jaxmc.load_model(str(chain), "N=200,f=0.1"))
    soc = m.state_of_choice()
    maybe = np.ones(m.num_states, bool)
    plan = plan_levels(soc, m.row_ptr, m.col, m.val, np.ones(len(soc), bool), maybe)
    assert plan.components == m.num_states
    assert plan.largest == 1
    # every entry leads to the same or a lower level
    level = np.empty(m.num_states, np.int64)
    for k in range(plan.levels):
        level[plan.states[plan.state_ptr[k] : plan.state_ptr[k + 1]]] = k
    rows = m.row_of_entry()
    assert np.all(level[m.col] <= level[soc[rows]])


# ----------------------------------------------------- random small MDPs


def _random_mdp(rng, n):
    """PRISM text of a random MDP on `x : [0..n-1]`, target x=0, state
    rewards 0..2 (zero-reward end components for Rmin), and its choices as
    `(state, {successor: probability})`."""
    lines, choices = [], []
    for s in range(n):
        for _ in range(rng.integers(1, 3)):
            k = int(rng.integers(1, 4))
            succ = rng.choice(n, size=k, replace=False)
            w = rng.integers(1, 5, size=k)
            probs = {int(t): float(v) / float(w.sum()) for t, v in zip(succ, w)}
            upd = " + ".join(f"{v}/{int(w.sum())}:(x'={t})" for t, v in zip(succ, w))
            lines.append(f"  [] x={s} -> {upd};")
            choices.append((s, probs))
    rew = rng.integers(0, 3, size=n)
    text = (
        f"mdp\nmodule m\n  x : [0..{n - 1}] init {n - 1};\n"
        + "\n".join(lines)
        + "\nendmodule\n"
        + 'rewards "r"\n'
        + "".join(f"  x={s} : {int(r)};\n" for s, r in enumerate(rew) if r)
        + "endrewards\n"
        + 'label "t" = x=0;\n'
    )
    return text, choices, rew.astype(float)


def _dtmc_values(P, target, rew):
    """Reachability probability and expected reward to `target` of the
    DTMC `P` (dense), by graph analysis and a dense solve."""
    reach = target.copy()
    while True:  # states that can reach the target
        new = reach | ((P[:, reach] > 0).any(axis=1))
        if (new == reach).all():
            break
        reach = new
    q = reach & ~target
    prob = target.astype(float)
    A = np.eye(q.sum()) - P[np.ix_(q, q)]
    prob[q] = np.linalg.solve(A, P[np.ix_(q, target)].sum(axis=1))
    bad = ~reach  # never reach the target: probability < 1 from whoever can get there
    can_bad = bad.copy()
    while True:
        new = can_bad | (((P[:, can_bad] > 0).any(axis=1)) & ~target)
        if (new == can_bad).all():
            break
        can_bad = new
    fin = ~can_bad & ~target
    rw = np.where(can_bad, np.inf, 0.0)
    if fin.any():
        A = np.eye(fin.sum()) - P[np.ix_(fin, fin)]
        rw[fin] = np.linalg.solve(A, rew[fin])
    return prob, rw


def _reference(n, choices, rew):
    """Min and max over all memoryless deterministic schedulers (enough
    for reachability and expected reachability rewards) of both."""
    by_state = [[c for s2, c in choices if s2 == s] for s in range(n)]
    target = np.zeros(n, bool)
    target[0] = True
    out = {k: [] for k in ("p", "r")}
    for pick in itertools.product(*[range(len(c)) for c in by_state]):
        P = np.zeros((n, n))
        for s, i in enumerate(pick):
            for t, p in by_state[s][i].items():
                P[s, t] += p
        P[0] = 0.0
        P[0, 0] = 1.0
        prob, rw = _dtmc_values(P, target, rew)
        out["p"].append(prob)
        out["r"].append(rw)
    p, r = np.array(out["p"]), np.array(out["r"])
    return {
        'Pmin=? [ F "t" ]': p.min(0),
        'Pmax=? [ F "t" ]': p.max(0),
        'R{"r"}min=? [ F "t" ]': r.min(0),
        'R{"r"}max=? [ F "t" ]': r.max(0),
    }


@pytest.mark.parametrize(
    "seed,policy,device",
    [(seed, False, False) for seed in range(12)]
    + [(seed, True, False) for seed in range(12)]
    + [(seed, p, True) for seed, p in [(0, False), (1, True), (2, False)]],
)
def test_random_mdps_against_all_schedulers(
    tmp_path, monkeypatch, seed, policy, device
):
    """Both methods against the dense reference; with `policy`, every
    level of components switches to policy iteration after one sweep
    (certified bounds for interval iteration); with `device`, every level
    of components is iterated by the jitted device loops."""
    if policy:
        monkeypatch.setattr(_topological, "POLICY_AFTER", 1)
        monkeypatch.setattr(_topological, "POLICY_AFTER_DEVICE", 2)
    if device:
        monkeypatch.setattr(_topological, "DEVICE_MIN_STATES", 1)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 8))
    text, choices, rew = _random_mdp(rng, n)
    path = tmp_path / "r.nm"
    path.write_text(text)
    model = jaxmc.load_model(str(path))
    explicit = jaxmc.build(model)
    xs = np.asarray(explicit.states)[:, 0]
    ref = _reference(n, choices, rew)
    for prop, want in ref.items():
        want = want[xs]
        for method in ("value_iteration", "interval_iteration"):
            res = jaxmc.check(model, prop, method=method, epsilon=1e-9, relative=False)
            got = np.asarray(res.values, float)
            fin = np.isfinite(want)
            assert np.array_equal(np.isfinite(got), fin), (prop, method, text)
            assert np.allclose(got[fin], want[fin], atol=1e-7), (prop, method, text)
            if method == "interval_iteration" and res.lower is not None:
                lo, up = np.asarray(res.lower), np.asarray(res.upper)
                assert np.all(lo[fin] <= want[fin] + 1e-12), (prop, text)
                assert np.all(up[fin] >= want[fin] - 1e-12), (prop, text)
                assert np.all(up[fin] - lo[fin] <= 2e-9 + 1e-15), (prop, text)


# ----------------------------------------------------------- consensus


@pytest.mark.storm
@pytest.mark.skipif(not CONSENSUS.is_file(), reason="../shared/models absent")
@pytest.mark.parametrize(
    "prop",
    [
        'Pmin=? [ F "finished"&"all_coins_equal_1" ]',
        'Pmax=? [ F "finished"&!"agree" ]',
        'R{"steps"}min=? [ F "finished" ]',
        'R{"steps"}max=? [ F "finished" ]',
    ],
)
@pytest.mark.parametrize("K", [2, 16])
def test_consensus_against_storm_sound(prop, K):
    """coin2: interval iteration's bounds contain Storm's sound value and
    the midpoint is within 1e-6 (relative) of it; value iteration too. K=16
    mixes slowly (~10^5 sweeps of value iteration): policy iteration
    takes over."""
    pytest.importorskip("stormpy")
    from storm_oracle import storm_value

    want = float(storm_value(str(CONSENSUS), f"K={K}", prop))
    model = jaxmc.load_model(str(CONSENSUS), f"K={K}")
    res = jaxmc.check(model, prop, method="interval_iteration", epsilon=1e-8)
    assert res.value == pytest.approx(want, rel=1e-6)
    i = int(res.initial_states[0])
    # Storm's own value is within its 1e-6 (relative) of the truth
    assert res.lower[i] <= want * (1 + 1e-6) and res.upper[i] >= want * (1 - 1e-6)
    if K == 16:
        assert jaxmc.check(model, prop).value == pytest.approx(want, rel=1e-6)


# ------------------------------------------------------------ fallback


def test_value_iteration_falls_back_to_interval_iteration(tmp_path, monkeypatch):
    """A slowly leaking two-state loop: with a tiny iteration budget policy
    iteration takes over the level (recorded); without it (no rounds of
    policy iteration allowed) value iteration stops, interval iteration
    takes over and the first attempt is recorded; when that fails too, the
    error names both."""
    path = tmp_path / "leak.nm"
    path.write_text(
        "mdp\nmodule m\n  x : [0..3] init 0;\n"
        "  [] x=0 -> 0.999:(x'=1) + 0.001:(x'=2);\n"
        "  [] x=1 -> 0.999:(x'=0) + 0.0005:(x'=2) + 0.0005:(x'=3);\n"
        "  [] x>=2 -> true;\nendmodule\n"
    )
    model = jaxmc.load_model(str(path))
    explicit = jaxmc.build(model)
    from jaxmc.numerics import until_probabilities

    xs = np.asarray(explicit.states)[:, 0]
    psi = xs == 2
    phi = np.ones_like(psi)
    res = until_probabilities(
        explicit,
        phi,
        psi,
        opt="max",
        options=SolveOptions(max_iters=100000, epsilon=1e-8),
    )
    assert res.status == Status.CONVERGED
    assert all("policy iteration took over" in a.note for a in res.attempts)
    # exact: x0 = 0.001 + 0.999 x1, x1 = 0.999 x0 + 0.0005
    x0 = (0.001 + 0.999 * 0.0005) / (1 - 0.999**2)
    i0 = int(np.flatnonzero(xs == 0)[0])
    o = SolveOptions(method="value_iteration", max_iters=50, throw=False)
    res = until_probabilities(explicit, phi, psi, opt="max", options=o)
    assert res.status == Status.CONVERGED and res.method == "value_iteration"
    assert res.values[i0] == pytest.approx(x0, rel=1e-12)
    (first,) = res.attempts
    assert first.status == Status.MAX_ITERS and first.iterations == 50
    assert "policy iteration took over" in first.note
    res = until_probabilities(
        explicit, phi, psi, opt="max", options=replace(o, method=None)
    )
    assert res.lower[i0] <= x0 <= res.upper[i0] and res.bound <= 1e-6
    monkeypatch.setattr(_policy, "MAX_ROUNDS", 0)
    res = until_probabilities(explicit, phi, psi, opt="max", options=o)
    assert res.method == "interval_iteration" and res.status != Status.CONVERGED
    assert len(res.attempts) >= 1 and isinstance(res.attempts[0], Attempt)
    assert res.attempts[0].status == Status.MAX_ITERS
    assert res.attempts[0].method == "value_iteration"
    with pytest.raises(ConvergenceError, match="interval iteration.*value_iter"):
        until_probabilities(
            explicit, phi, psi, opt="max", options=replace(o, throw=True)
        )
    monkeypatch.undo()
    # the slow leak: after a few hundred sweeps both switch to policy
    # iteration, value iteration to the optimal policy's values, interval
    # iteration to bounds it certifies
    vi = until_probabilities(
        explicit, phi, psi, opt="max", options=SolveOptions(max_iters=20000)
    )
    ii = until_probabilities(
        explicit,
        phi,
        psi,
        opt="max",
        options=SolveOptions(method="interval_iteration", max_iters=20000),
    )
    assert vi.extra["policy_levels"] == 1 and ii.extra["policy_levels"] == 1
    assert vi.values[i0] == pytest.approx(x0, rel=1e-12)
    assert ii.lower[i0] <= x0 <= ii.upper[i0]
    assert ii.values[i0] == pytest.approx(x0, rel=1e-6)
    assert ii.bound is not None and ii.bound <= 1e-6


# ------------------------------------------------- slowly mixing component

RUIN = """mdp
const int N;
module walk
  x : [0..N] init floor(N/2);
  [fair] x>0 & x<N -> 0.5 : (x'=x+1) + 0.5 : (x'=x-1);
  [down] x>0 & x<N -> 0.45 : (x'=x+1) + 0.55 : (x'=x-1);
  [] x=0 | x=N -> true;
endmodule
label "won" = x=N;
label "over" = x=0 | x=N;
rewards "steps" x>0 & x<N : 1; endrewards
"""


def _ruin_reference(n):
    """Gambler's ruin with a fair and an unfavourable bet, by dense policy
    iteration (numpy): the win probabilities (max, min) and the expected
    numbers of bets (max, min) from every `x`."""
    p = np.array([0.5, 0.45])
    inner = np.arange(1, n)

    def solve(sigma, target_reward):
        A = np.zeros((n + 1, n + 1))
        b = np.zeros(n + 1)
        for x in inner:
            A[x, x + 1], A[x, x - 1] = p[sigma[x]], 1 - p[sigma[x]]
            b[x] = 1.0 if target_reward else 0.0
        if not target_reward:
            b[n] = 1.0  # (absorbing, value 1)
            A[n, n] = 0.0
        return np.linalg.solve(np.eye(n + 1) - A, b)

    out = []
    for reward in (False, True):
        for better in (np.greater, np.less):
            sigma = np.zeros(n + 1, int)
            for _ in range(50):
                v = solve(sigma, reward)
                q = np.stack(
                    [(1.0 if reward else 0.0) + p[a] * np.roll(v, -1)
                     + (1 - p[a]) * np.roll(v, 1) for a in (0, 1)]
                )  # fmt: skip
                new = np.where(better(q[1], q[0] + 1e-13), 1, 0)
                new[[0, n]] = 0
                if np.array_equal(new, sigma):
                    break
                sigma = new
            out.append(v)
    return out


@pytest.mark.parametrize(
    "krylov,huge,device",
    [(False, False, False), (True, False, False), (False, True, False)]
    + [(True, False, True)],
)
def test_slowly_mixing_component_finishes_with_a_certified_bound(
    tmp_path, monkeypatch, krylov, huge, device
):
    """One strongly connected component that value and interval iteration
    need ~10^5 sweeps for: with an iteration budget of 100, policy
    iteration takes the level over (its policy systems by sparse LU, or,
    with `krylov`, by BiCGStab as on the device for large levels) and the
    bounds it certifies contain the exact values. With `huge`, the rewards'
    upper start comes from the expected time in the level (as where the
    Baier et al. bound overflows). With `device`, the level is iterated by
    the jitted loops and policy iteration's sweeps run there too."""
    if device:
        monkeypatch.setattr(_topological, "DEVICE_MIN_STATES", 1)
        monkeypatch.setattr(_topological, "POLICY_AFTER_DEVICE", 100)
    if krylov:
        monkeypatch.setattr(_policy, "LU_MAX_STATES", 0)
    if huge:
        monkeypatch.setattr(_topological, "HUGE_BOUND", 0.0)
    n = 40
    path = tmp_path / "ruin.nm"
    path.write_text(RUIN)
    model = jaxmc.load_model(str(path), f"N={n}")
    xs = np.asarray(jaxmc.build(model).states)[:, 0]
    pmax, pmin, rmax, rmin = (v[xs] for v in _ruin_reference(n))
    for prop, want in [
        ('Pmax=? [ F "won" ]', pmax),
        ('Pmin=? [ F "won" ]', pmin),
        ('R{"steps"}max=? [ F "over" ]', rmax),
        ('R{"steps"}min=? [ F "over" ]', rmin),
    ]:
        res = jaxmc.check(model, prop, max_iters=100)
        assert res.status == "converged", prop
        lo, up = np.asarray(res.lower), np.asarray(res.upper)
        assert np.all(lo <= want + 1e-12 * np.abs(want)), prop
        assert np.all(up >= want - 1e-12 * np.abs(want)), prop
        i = int(res.initial_states[0])
        assert res.value == pytest.approx(want[i], rel=1e-6), prop
        assert res.bound <= 1e-6 * abs(want[i]) * 1.01, prop
        (handover,) = res.attempts
        assert handover.iterations == 100 and "policy iteration" in handover.note


def test_policy_iteration_sweeps_on_the_device_match_the_host():
    """The improvement sweeps of policy iteration on the device
    (`solvers._minmax.sweeps`) are the host's Bellman steps, for the
    problem's min/max and for the expected-time bound's max whatever the
    problem's (the bound is a max over all schedulers)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(3)
    n, k = 30, 75
    starts = np.concatenate([[0], np.sort(rng.choice(np.arange(1, k), n - 1, False))])
    li = np.repeat(np.arange(k), 2)
    ti = rng.integers(0, n, li.size)
    di = np.full(li.size, 0.45)  # (each choice leaves with probability 0.1)
    M = _topological._Run._device_model(starts, k, li, ti, di)
    A = sp.csr_matrix((di, (li, ti)), shape=(k, n))
    e = rng.random(k)
    seen = []
    device = _topological.device_sweep(M)

    def sweep(e, W, opt):
        seen.append(opt)
        return device(e, W, opt)

    for opt in ("min", "max"):
        W = rng.random(n)
        host = W
        for _ in range(_policy.SWEEPS):
            host = _policy._reduce(e + A @ host, starts, opt)
        np.testing.assert_allclose(sweep(e, W, opt), host, rtol=1e-12)
        sigma = _policy.greedy(e + A @ W, starts, opt, k)
        seen.clear()
        got = _policy.policy_values(A, e, starts, opt, sigma, sweep)
        want = _policy.policy_values(A, e, starts, opt, sigma)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
        assert set(seen) <= {opt}
        seen.clear()
        h = _policy.steps_bound(A, starts, np.zeros(k, bool), sweep)
        assert set(seen) <= {"max"} and h is not None
        np.testing.assert_allclose(h, _policy.steps_bound(A, starts, np.zeros(k, bool)))
