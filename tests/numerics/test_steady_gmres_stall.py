"""Host GMRES of the steady-state systems gives up when it stagnates
(`steady_solve.GMRES_STALL_ITERS`) instead of running to `max_iters`."""

import time

import numpy as np
import scipy.sparse as sp

from jaxmc.numerics import steady_solve


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
    assert steady_solve.host_gmres(Z, b, 10_000) is None
    assert len(seen) <= steady_solve.GMRES_STALL_ITERS + 2 * steady_solve.GMRES_RESTART
    assert time.perf_counter() - t < 10


def test_gmres_still_solves_what_it_can():
    rng = np.random.default_rng(0)
    n = 300
    A = sp.eye(n) * 4 + sp.random(n, n, density=0.02, random_state=rng)
    b = rng.random(n)
    x = steady_solve.host_gmres(sp.csr_matrix(A), b, 10_000)
    assert x is not None
    np.testing.assert_allclose(A @ x, b, rtol=1e-10)
