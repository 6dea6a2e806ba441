"""Sound by default (issue 20): DTMC/CTMC reachability and rewards come with
certified bounds that contain the exact value and are at most epsilon wide
(relative or absolute); criterion "change" is PRISM's criterion, which can
stop far from the value. References: closed forms, dense numpy solves,
matrix powers, scipy's expm."""

import json

import numpy as np
import pytest
import scipy.linalg
from test_numerics_helpers import (
    dense,
    dense_trans_reward,
    dtmc_reach_reward,
    dtmc_until,
    embedded,
    random_model,
)

import jaxmc
from jaxmc import numerics as nm
from jaxmc.explore.model import RewardStructure
from jaxmc.options import SolveOptions
from jaxmc.solvers import Status


GAMBLER = """dtmc
module g
  x : [0..20] init 10;
  [] x>0 & x<20 -> 0.45 : (x'=x+1) + 0.55 : (x'=x-1);
endmodule
"""

FOUR = """dtmc
module m
  x : [0..3] init 0;
  [] x<3 -> 0.5 : (x'=x+1) + 0.5 : (x'=0);
  [] x=3 -> true;
endmodule
rewards "r2"
  true : 2;
endrewards
"""


def _walk(n):
    """A symmetric random walk on 0..n absorbed at both ends: slowly mixing
    (Jacobi's contraction 1 - O(1/n^2))."""
    return f"""dtmc
module w
  x : [0..{n}] init {n // 4};
  [] x>0 & x<{n} -> 0.5 : (x'=x+1) + 0.5 : (x'=x-1);
endmodule
"""


def _gambler_exact():
    r = 0.55 / 0.45
    return (r**10 - 1) / (r**20 - 1)


@pytest.mark.parametrize("relative", [True, False])
def test_gambler_within_certified_bound(relative):
    m = jaxmc.load_model_string(GAMBLER)
    exact = _gambler_exact()
    r = jaxmc.check(m, "P=? [ F x=20 ]", relative=relative)
    assert abs(r.value - exact) <= r.bound
    assert r.bound <= 1e-6 * (exact if relative else 1.0)
    i = jaxmc.build(m).initial_states[0]
    assert r.lower[i] <= exact <= r.upper[i]
    c = jaxmc.check(m, "P=? [ F x=20 ]", criterion="change", relative=relative)
    assert c.bound is None and c.method == "jacobi"


def test_four_state_reward_is_28():
    m = jaxmc.load_model_string(FOUR)
    r = jaxmc.check(m, 'R{"r2"}=? [ F x=3 ]')
    assert abs(r.value - 28.0) <= r.bound <= 1e-6 * 28.0
    c = jaxmc.check(m, 'R{"r2"}=? [ F x=3 ]', criterion="change")
    assert abs(c.value - 28.0) > 1e-6 * 28.0  # PRISM's criterion stops early


def test_slowly_mixing_change_stops_early_sound_does_not():
    m = jaxmc.load_model_string(_walk(60))
    exact = 1.0 - 15 / 60  # P(reach 0 from 15)
    c = jaxmc.check(m, "P=? [ F x=0 ]", criterion="change")
    assert abs(c.value - exact) / exact >= 1e-4
    s = jaxmc.check(m, "P=? [ F x=0 ]")
    assert abs(s.value - exact) <= s.bound <= 1e-6 * exact


@pytest.mark.parametrize(
    "method", ["jacobi", "power", "value_iteration", "gauss_seidel", "bicgstab", None]
)
def test_explicit_methods_still_certify(method):
    # (and the default: BiCGStab certified by the expected steps)
    m = jaxmc.load_model_string(GAMBLER)
    exact = _gambler_exact()
    r = jaxmc.check(m, "P=? [ F x=20 ]", method=method)
    assert r.bound is not None and abs(r.value - exact) <= r.bound <= 1e-6 * exact


def test_out_of_iterations_falls_back_to_a_certified_direct_solve():
    # (Jacobi's sound value iteration: the default's BiCGStab needs fewer
    # than 100 iterations here)
    m = jaxmc.load_model_string(_walk(40))
    r = jaxmc.check(m, "P=? [ F x=0 ]", max_iters=100, method="jacobi")
    exact = 0.75
    assert r.method == "direct" and abs(r.value - exact) <= r.bound <= 1e-6 * exact
    e = jaxmc.build(m)
    psi = e.labels.get("x0") if "x0" in e.labels else e.states[:, 0] == 0
    res = nm.until_probabilities(
        e, np.ones(e.num_states, bool), psi,
        options=SolveOptions(max_iters=100, method="jacobi"),
    )  # fmt: skip
    assert [a.status for a in res.attempts] == [Status.MAX_ITERS]
    assert res.attempts[0].method == "jacobi"  # (its sound value iteration)


def test_direct_fallback_certified_by_its_expected_steps():
    # (a 400-state walk: the layered bound on the expected steps is far too
    # loose to certify the direct solve; the expected steps solved with the
    # same LU factors certify it)
    m = jaxmc.load_model_string(_walk(400))
    r = jaxmc.check(m, "P=? [ F x=0 ]", max_iters=100, method="jacobi")
    assert r.method == "direct" and r.iterations == 100
    assert abs(r.value - 0.75) <= r.bound <= 1e-9


def test_krylov_breakdown_on_a_long_chain_falls_back_to_topological(monkeypatch):
    # (the GPU's path: no host decomposition up front, BiCGStab on the
    # device; on a long nearly acyclic chain it breaks down, as on brp's on
    # the GPU (benchmarks/RESULTS.md); sound value iteration would need as
    # many sweeps as the chain is long and the direct solve is beyond its
    # size: Gauss-Seidel in topological order must take over)
    from jaxmc.numerics import methods, sound

    monkeypatch.setattr(methods, "TOPOLOGICAL_MAX_ENTRIES", 10)
    monkeypatch.setattr(methods, "BACK_EDGE_MAX_ROWS", -1.0)  # (a hint missed)
    monkeypatch.setattr(sound, "DIRECT_MAX_STATES", 10)
    n = 20000
    m = jaxmc.load_model_string(_chain(n))
    r = jaxmc.check(m, f"P=? [ F x={n} ]")
    assert [a.method for a in r.attempts] == ["bicgstab"]
    assert r.attempts[0].status != Status.CONVERGED
    assert r.method == "gauss_seidel"
    exact = 0.999**n
    assert abs(r.value - exact) <= r.bound + 1e-12 * exact
    assert r.bound <= 1e-6 * exact


def _chain(n):
    return f"""dtmc
module m
  x : [0..{n}] init 0;
  f : bool init false;
  [] x<{n} & !f -> 0.999 : (x'=x+1) + 0.001 : (f'=true);
  [] x={n} | f -> true;
endmodule
"""


def test_large_systems_decomposed_where_few_back_edges(monkeypatch):
    # (above the size where the decomposition is paid for every system,
    # the chain, whose unknowns have no entry to an earlier one, still goes
    # to Gauss-Seidel in topological order; the gambler's ruin, whose
    # unknowns all have one, to the Krylov solve)
    from jaxmc.numerics import methods

    monkeypatch.setattr(methods, "TOPOLOGICAL_MAX_ENTRIES", 10)
    r = jaxmc.check(jaxmc.load_model_string(_chain(300)), "P=? [ F x=300 ]")
    assert r.method == "gauss_seidel" and not r.attempts
    assert abs(r.value - 0.999**300) <= r.bound + 1e-15
    r = jaxmc.check(jaxmc.load_model_string(GAMBLER), "P=? [ F x=20 ]")
    assert r.method == "bicgstab"


def test_gauss_seidel_certified_by_its_expected_steps():
    # (a 20,000-step chain that stays put with probability 0.99: the
    # layered bound on the expected steps underflows to infinity, sound
    # value iteration would need more than max_iters sweeps and the direct
    # solve stops at its size limit on larger models; the expected steps by
    # Gauss-Seidel in the same order certify the result)
    n = 20000
    m = jaxmc.load_model_string(
        f"""dtmc
module m
  x : [0..{n}] init 0;
  [] x<{n} -> 0.01 : (x'=x+1) + 0.99 : true;
  [] x={n} -> true;
endmodule
rewards "steps" x<{n} : 1; endrewards
"""
    )
    r = jaxmc.check(m, f"R=? [ F x={n} ]")
    assert r.method == "gauss_seidel" and not r.attempts and r.iterations <= 3
    exact = n / 0.01
    assert abs(r.value - exact) <= r.bound + 1e-12 * exact
    assert r.bound <= 1e-6 * exact


ZERO_BRANCH = """dtmc
module m
  x : [0..3] init 0;
  [] x=0 -> 0.5 : (x'=1) + 0.5 : (x'=2);
  [] x=1 -> (x'=3);
  [] x=2 -> 0.5 : (x'=2) + 0.5 : (x'=3);
  [] x=3 -> true;
endmodule
rewards "r" x=1 : 1; endrewards
rewards "none" x=3 : 1; endrewards
"""


def test_zero_valued_unknowns_are_exact():
    # (x=2 earns nothing before the target: its value is exactly 0, which a
    # relative certificate of the iterate cannot reach; it is taken out of
    # the unknowns, and Gauss-Seidel's two sweeps are certified as they are)
    m = jaxmc.load_model_string(ZERO_BRANCH)
    r = jaxmc.check(m, 'R{"r"}=? [ F x=3 ]', all_states=True)
    assert np.array_equal(r.values, [0.5, 1.0, 0.0, 0.0])
    assert r.method == "gauss_seidel" and r.iterations == 2
    assert r.lower[2] == r.upper[2] == 0.0
    r = jaxmc.check(m, 'R{"none"}=? [ F x=3 ]', all_states=True)
    assert np.array_equal(r.values, [0.0, 0.0, 0.0, 0.0]) and r.bound == 0.0


def _check_sound(res, ref, eps, relative=True):
    fin = np.isfinite(ref)
    assert (np.isinf(res.values) == ~fin).all()
    assert res.bound is not None
    if res.lower is None:  # (nothing solved: exact)
        assert res.bound == 0.0
        lower = upper = res.values
    else:
        lower, upper = res.lower, res.upper
    v, lo, hi = res.values[fin], lower[fin], upper[fin]
    tol = 1e-12 * np.maximum(1.0, np.abs(ref[fin]))
    assert (lo <= ref[fin] + tol).all() and (ref[fin] <= hi + tol).all()
    err = np.abs(v - ref[fin])
    assert (err <= 0.5 * (hi - lo) + tol).all()
    scale = np.abs(ref[fin]) if relative else 1.0
    assert (err <= eps * scale + tol).all()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("relative", [True, False])
def test_random_dtmc_reach_and_rewards(seed, relative):
    m, rng = random_model("dtmc", 30, seed, absorbing=3)
    P = dense(m)
    psi = rng.random(30) < 0.15
    psi[-1] = True
    phi = rng.random(30) < 0.85
    eps = 1e-7
    res = nm.until_probabilities(
        m, phi, psi, options=SolveOptions(epsilon=eps, relative=relative)
    )
    _check_sound(res, dtmc_until(P, phi, psi), eps, relative)
    # rewards (state rewards 0..2, some zero-reward loops; inf where the
    # target is missed with positive probability)
    r1 = m.rewards[0].state + (P * dense_trans_reward(m)).sum(1)
    ref = dtmc_reach_reward(P, r1, psi)
    res = nm.reachability_rewards(
        m, m.rewards[0], psi, options=SolveOptions(epsilon=eps, relative=relative)
    )
    _check_sound(res, ref, eps, relative)


def test_until_skips_the_exact_zero_search(monkeypatch):
    """An until's unknowns all have positive probability (prob0 took the
    zeros out), so its certified solve does not search for exact zeros (an
    O(transitions) pass per check); a reward's still does."""
    from jaxmc.numerics import sound

    calls = []
    real = sound._zero_valued

    def spy(*a):
        calls.append(1)
        return real(*a)

    monkeypatch.setattr(sound, "_zero_valued", spy)
    m, rng = random_model("dtmc", 30, 1, absorbing=3)
    P = dense(m)
    psi = rng.random(30) < 0.15
    psi[-1] = True
    phi = rng.random(30) < 0.85
    res = nm.until_probabilities(m, phi, psi, options=SolveOptions(epsilon=1e-7))
    _check_sound(res, dtmc_until(P, phi, psi), 1e-7, True)
    assert calls == []
    r = jaxmc.check(jaxmc.load_model_string(ZERO_BRANCH), 'R{"r"}=? [ F x=3 ]')
    assert calls == [1] and r.value == 0.5


@pytest.mark.parametrize("seed", range(4))
def test_random_dtmc_total_rewards(seed):
    m, rng = random_model("dtmc", 25, seed, absorbing=4)
    P = dense(m)
    r1 = m.rewards[0].state + (P * dense_trans_reward(m)).sum(1)
    res = nm.total_rewards(m, m.rewards[0], options=SolveOptions(epsilon=1e-8))
    # reference: fundamental matrix on the transient states; inf where a
    # BSCC with positive reward is reachable
    n = len(P)
    labels, count = nm.graph.bsccs(m)
    inb = labels >= 0
    pos = np.zeros(count, bool)
    for b in range(count):
        pos[b] = r1[labels == b].sum() > 0
    bad = inb & pos[np.maximum(labels, 0)]
    from test_numerics_helpers import reach_set

    inf = reach_set(P, bad, np.ones(n, bool))
    ref = np.zeros(n)
    ref[inf] = np.inf
    idx = np.nonzero(~inf & ~inb)[0]
    if len(idx):
        A = np.eye(len(idx)) - P[np.ix_(idx, idx)]
        ref[idx] = np.linalg.solve(A, r1[idx])
    _check_sound(res, ref, 1e-8)


def test_random_ctmc_reach_sound():
    m, rng = random_model("ctmc", 25, 3, absorbing=2)
    psi = np.zeros(25, bool)
    psi[-1] = True
    res = nm.until_probabilities(
        m, np.ones(25, bool), psi, options=SolveOptions(epsilon=1e-8)
    )
    _check_sound(res, dtmc_until(embedded(m), np.ones(25, bool), psi), 1e-8)


@pytest.mark.parametrize("k", [0, 1, 7, 40])
def test_bounded_dtmc_exact_bound_zero(k):
    m, rng = random_model("dtmc", 20, 5, absorbing=2)
    P = dense(m)
    psi = rng.random(20) < 0.2
    phi = np.ones(20, bool)
    res = nm.bounded_until(m, phi, psi, k)
    x = psi.astype(float)
    for _ in range(k):
        x = np.where(psi, 1.0, P @ x)
    np.testing.assert_allclose(res.values, x, rtol=1e-12, atol=1e-14)
    assert res.bound == 0.0
    r = m.rewards[0]
    cum = nm.cumulative_rewards(m, r, k)
    r1 = r.state + (P * dense_trans_reward(m)).sum(1)
    y = np.zeros(20)
    for _ in range(k):
        y = r1 + P @ y
    np.testing.assert_allclose(cum.values, y, rtol=1e-12, atol=1e-12)
    assert cum.bound == 0.0


@pytest.mark.parametrize("t", [0.3, 2.0, 15.0])
def test_ctmc_time_bounded_within_fox_glynn_bound(t):
    m, rng = random_model("ctmc", 15, 2, absorbing=2)
    Q = dense(m)
    psi = np.zeros(15, bool)
    psi[-1] = True
    eps = 1e-6
    res = nm.ctmc_bounded_until(
        m, np.ones(15, bool), psi, t, options=SolveOptions(epsilon=eps)
    )
    Qa = np.where(psi[:, None], 0.0, Q)  # target absorbing
    ref = scipy.linalg.expm((Qa - np.diag(Qa.sum(1))) * t) @ psi.astype(float)
    assert res.bound is not None and res.bound <= eps
    assert np.abs(res.values - ref).max() <= res.bound + 1e-12
    # instantaneous and cumulative rewards (state rewards only)
    st = np.asarray(m.rewards[0].state, float)
    R = RewardStructure("s", st, None)
    G = Q - np.diag(Q.sum(1))
    inst = nm.ctmc_instantaneous_rewards(m, R, t, options=SolveOptions(epsilon=eps))
    assert np.abs(inst.values - scipy.linalg.expm(G * t) @ st).max() <= inst.bound
    cum = nm.ctmc_cumulative_rewards(m, R, t, options=SolveOptions(epsilon=eps))
    # int_0^t e^{Gs} ds st by the augmented-matrix exponential
    n = len(st)
    aug = np.zeros((n + 1, n + 1))
    aug[:n, :n] = G
    aug[:n, n] = st
    ref = scipy.linalg.expm(aug * t)[:n, n]
    assert np.abs(cum.values - ref).max() <= cum.bound + 1e-12
    assert cum.bound <= eps * max(1.0, np.abs(ref).max())


def test_cli_prints_the_bound(tmp_path, capsys):
    from jaxmc import cli

    f = tmp_path / "g.pm"
    f.write_text(GAMBLER)
    assert cli.main([str(f), "--prop", "P=? [ F x=20 ]"]) == 0
    out = capsys.readouterr().out
    assert "Result: 0.1185005" in out and "(±" in out
    assert cli.main([str(f), "--prop", "P=? [ F x=20 ]", "--criterion", "change"]) == 0
    out = capsys.readouterr().out
    assert "Result: 0.11849873873959205\n" in out
    assert cli.main([str(f), "--prop", "P=? [ F x=20 ]", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    entry = doc["runs"][0]["properties"][0] if "runs" in doc else doc
    text = json.dumps(entry)
    assert '"bound"' in text


def test_mdp_default_is_interval_iteration_with_a_bound():
    m = jaxmc.load_model_string(
        """mdp
module m
  x : [0..3] init 0;
  [a] x<3 -> 0.5 : (x'=x+1) + 0.5 : (x'=0);
  [b] x<3 -> 0.9 : (x'=x) + 0.1 : (x'=3);
endmodule
"""
    )
    r = jaxmc.check(m, "Pmin=? [ F x=3 ]")
    assert r.method == "interval_iteration" and r.value == pytest.approx(1.0)
    c = jaxmc.check(m, "Pmin=? [ F x=3 ]", criterion="change")
    assert c.method == "value_iteration" and c.bound is None


def test_criterion_is_validated():
    m = jaxmc.load_model_string(GAMBLER)
    with pytest.raises(ValueError, match="criterion"):
        jaxmc.check(m, "P=? [ F x=20 ]", criterion="exact")


def test_steps_supersolution_bounds_the_expected_steps():
    """`steps_supersolution` on a symmetric walk on 0..n absorbed at both
    ends, whose expected steps are `T_i = i (n - i)`: from the exact `T`
    and from a perturbed one, `s >= T` (and close to it); a candidate that
    is no super-solution after scaling (zero somewhere) is refused."""
    import scipy.sparse as sp

    from jaxmc.numerics.certificate import steps_supersolution

    n = 50
    i = np.arange(n + 1)
    maybe = (i > 0) & (i < n)
    rows = np.concatenate([i[maybe], i[maybe]])
    cols = np.concatenate([i[maybe] + 1, i[maybe] - 1])
    A = sp.csr_matrix((np.full(len(rows), 0.5), (rows, cols)), shape=(n + 1, n + 1))
    T = (i * (n - i)).astype(float)
    rng = np.random.default_rng(0)
    for w in (T, T * (1 + 1e-6 * rng.standard_normal(n + 1))):
        s = steps_supersolution(A, maybe, w)
        assert s is not None
        assert np.all(s[maybe] >= T[maybe]) and np.all(s[maybe] <= 1.01 * T[maybe])
    assert steps_supersolution(A, maybe, np.where(i == 7, 0.0, T)) is None


def test_default_is_certified_krylov_on_a_slow_chain():
    """The default on a slowly mixing chain: BiCGStab certified by its
    residual and the expected steps, far fewer iterations than Jacobi's
    sound value iteration, the exact value inside the bound."""
    m = jaxmc.load_model_string(_walk(60))
    exact = 1.0 - 15 / 60
    r = jaxmc.check(m, "P=? [ F x=0 ]")
    j = jaxmc.check(m, "P=? [ F x=0 ]", method="jacobi")
    assert r.method == "bicgstab" and r.attempts == ()
    assert abs(r.value - exact) <= r.bound <= 1e-6 * exact
    assert r.iterations * 10 < j.iterations
