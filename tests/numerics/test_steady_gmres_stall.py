"""Host GMRES of the steady-state systems gives up when it stagnates
(`steady_solve.GMRES_STALL_ITERS`) instead of running to `max_iters`."""

import time

import numpy as np
import scipy.sparse as sp

from jaxmc.numerics import steady_solve
from jaxmc.solvers import Status


def test_gmres_stops_on_stagnation(monkeypatch):
    # The cyclic shift: restarted GMRES(40) makes no progress at all on it
    # (its Krylov spaces miss the solution until dimension n).
    n = 500
    Z = sp.csr_matrix(
        (np.ones(n), (np.arange(n), (np.arange(n) + 1) % n)), shape=(n, n)
    )
    b = np.zeros(n)
    b[0] = 1.0
    seen = []
    real = steady_solve.spla.gmres

    def counting(*a, **kw):
        cb = kw["callback"]
        kw["callback"] = lambda r: (seen.append(r), cb(r))
        return real(*a, **kw)

    monkeypatch.setattr(steady_solve.spla, "gmres", counting)
    t = time.perf_counter()
    assert steady_solve.host_gmres(Z, b, 10_000).status == Status.STALLED
    assert len(seen) <= steady_solve.GMRES_STALL_ITERS + 2 * steady_solve.GMRES_RESTART
    assert time.perf_counter() - t < 10


def test_gmres_still_solves_what_it_can():
    rng = np.random.default_rng(0)
    n = 300
    A = sp.eye(n) * 4 + sp.random(n, n, density=0.02, random_state=rng)
    b = rng.random(n)
    sol = steady_solve.host_gmres(sp.csr_matrix(A), b, 10_000)
    assert sol.status == Status.CONVERGED and 0 < sol.iterations < 300
    np.testing.assert_allclose(A @ sol.value, b, rtol=1e-10)


def test_gmres_reports_max_iters():
    # One cycle of GMRES(40) on the cyclic shift: no progress, and too few
    # iterations for the stagnation test.
    n = 500
    Z = sp.csr_matrix(
        (np.ones(n), (np.arange(n), (np.arange(n) + 1) % n)), shape=(n, n)
    )
    b = np.zeros(n)
    b[0] = 1.0
    sol = steady_solve.host_gmres(Z, b, steady_solve.GMRES_RESTART)
    assert sol.status == Status.MAX_ITERS and sol.residual > 0.5
    assert sol.iterations == steady_solve.GMRES_RESTART
