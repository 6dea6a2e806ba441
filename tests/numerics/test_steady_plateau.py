"""A Krylov plateau is no stall (`jaxmc.numerics.steady_krylov`): on a slowly
mixing CTMC BiCGStab's residual stays flat for longer than the stall window
and then converges; a stall only pauses it, and the long-run chain resumes
it from its state with the default budget after the next method failed.

The chain here is a near-critical birth-death walk (the slow mode of the
workstation cluster at N=464: a walk whose drift is weak near equilibrium).
Small enough for a dense reference, it is scaled down with the solver's
window: chunks of 100 SpMVs instead of 1000 (the plateau outlasts the
four-chunk stall window, as cluster N=464's does at full size), no sparse
LU fallback (which a model of millions of states cannot afford) and a
default `max_iters` of 1000 (a budget of 10,000)."""

import numpy as np
import pytest
from test_numerics_helpers import make_model

from jaxmc import numerics as nm, options as opts
from jaxmc.numerics import steady_krylov, steady_longrun
from jaxmc.options import SolveOptions
from jaxmc.solvers import Status


L = 2000


def _walk(down=1.0005):
    """The walk on `0..L-1` (up at rate 1, down at rate `down`), the set of
    its upper half, and the long-run probability of that set by a dense
    solve of `pi Q = 0, sum pi = 1`."""
    choices = []
    for s in range(L):
        dist = {}
        if s < L - 1:
            dist[s + 1] = 1.0
        if s > 0:
            dist[s - 1] = down
        choices.append([dist])
    em = make_model("ctmc", choices)
    Q = np.zeros((L, L))
    i = np.arange(L - 1)
    Q[i, i + 1] = 1.0
    Q[i + 1, i] = down
    Q -= np.diag(Q.sum(1))
    A = Q.T.copy()
    A[0] = 1.0
    rhs = np.zeros(L)
    rhs[0] = 1.0
    pi = np.linalg.solve(A, rhs)
    phi = np.arange(L) >= L // 2
    return em, phi, float(pi[phi].sum())


@pytest.fixture
def scaled(monkeypatch):
    monkeypatch.setattr(steady_krylov, "KRYLOV_CHUNK", 100)
    monkeypatch.setattr(steady_longrun, "DIRECT_FALLBACK_MAX_STATES", 0)
    monkeypatch.setitem(opts.DEFAULTS["check"], "max_iters", 1000)


def test_plateau_resumed_to_a_certified_value(scaled):
    em, phi, exact = _walk()
    res = nm.steady_state_values(em, phi, options=SolveOptions(throw=False))
    v = float(res.values[0])
    assert res.status == Status.CONVERGED
    assert res.bound <= 1e-6 * v
    assert abs(v - exact) <= res.bound
    first, *_ = res.attempts
    assert first.method == "bicgstab" and first.status == Status.STALLED
    assert "paused" in first.note and first.iterations < 1000
    last = res.extra["stationary_attempt"]
    assert last.method == "bicgstab" and "resumed" in last.note
    assert first.iterations + last.iterations > 1000  # past max_iters


def test_given_max_iters_is_a_hard_cap(scaled):
    """`max_iters` given: no budget, so no resume; the chain fails, and its
    best bracket still contains the exact value."""
    em, phi, exact = _walk()
    res = nm.steady_state_values(
        em, phi, options=SolveOptions(throw=False, max_iters=1000)
    )
    assert res.status != Status.CONVERGED
    assert all("resumed" not in a.note for a in res.attempts)
    assert abs(float(res.values[0]) - exact) <= res.bound
