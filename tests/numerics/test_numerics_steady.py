"""Steady state by linear solves: the three paths (sparse LU, GMRES on the
jump-chain scaling, PRISM's Jacobi as fallback) against dense references,
periodic chains included, and poll2's S=? against Storm's sound value."""

from pathlib import Path

import numpy as np
import pytest
from test_numerics_ctmc import test_steady_state_periodic_dtmc, test_steady_state_random
from test_numerics_helpers import make_model

from jaxmc import numerics as nm
from jaxmc.numerics import steady_solve
from jaxmc.options import SolveOptions
from jaxmc.solvers import Solution, Status


def _no_gmres(A, b, max_iters):
    """Host GMRES that fails (the Jacobi fallback takes over)."""
    return Solution(
        value=np.zeros(len(b)), status=Status.MAX_ITERS, iterations=0, residual=1.0
    )


@pytest.fixture(params=["direct", "gmres", "jacobi"])
def path(request, monkeypatch):
    if request.param != "direct":
        monkeypatch.setattr(steady_solve, "DIRECT_MAX_STATES", 0)
    if request.param == "jacobi":
        monkeypatch.setattr(steady_solve, "host_gmres", _no_gmres)
    return request.param


@pytest.mark.parametrize("kind", ["dtmc", "ctmc"])
@pytest.mark.parametrize("seed", range(3))
def test_random_chains_every_path(path, kind, seed):
    test_steady_state_random(kind, seed)


def test_periodic_every_path(path):
    test_steady_state_periodic_dtmc()
    # a periodic CTMC jump chain (ring 0 -> 1 -> 2 -> 0 of rates 1, 2, 4):
    # plain Jacobi would oscillate; pi ~ 1/rate.
    m = make_model("ctmc", [[{1: 1.0}], [{2: 2.0}], [{0: 4.0}]])
    pi, _, _, res = nm.stationary_distributions(m, options=SolveOptions(epsilon=1e-12))
    np.testing.assert_allclose(pi, np.array([1, 0.5, 0.25]) / 1.75, rtol=1e-9)
    assert res.method == path


def test_slowly_mixing_ctmc_accurate():
    # Two clusters joined by a slow rate: power iteration with a relative
    # step criterion of 1e-6 stops far from pi; the linear solve does not.
    fast, slow = 1000.0, 1e-3
    m = make_model(
        "ctmc",
        [[{1: fast}], [{0: fast, 2: slow}], [{3: fast, 1: 3 * slow}], [{2: fast}]],
    )
    pi, *_ = nm.stationary_distributions(m)
    np.testing.assert_allclose(pi, np.array([3, 3, 1, 1]) / 8, rtol=1e-9)


def test_poll2_against_dense_and_storm():
    model = (
        Path(__file__).resolve().parents[2].parent
        / "shared"
        / "models"
        / "prism-examples"
        / "ctmcs"
        / "polling"
        / "poll2.sm"
    )
    if not model.exists():
        pytest.skip("../shared/models not found")
    import jaxmc

    prop = "S=? [ s1=1 & !(s=1 & a=1) ]"
    m = jaxmc.load_model(str(model))
    ours = jaxmc.check(m, 0, properties=jaxmc.parse_properties(prop, m)).value
    # dense reference: least squares on [Q^T; 1] pi = [0; 1]
    em = m.build()
    n = em.num_states
    Q = np.zeros((n, n))
    np.add.at(Q, (em.row_of_entry(), em.col), em.val)
    Q -= np.diag(Q.sum(1))
    pi = np.linalg.lstsq(np.vstack([Q.T, np.ones(n)]), np.eye(n + 1)[-1], rcond=None)[0]
    names = [v.name for v in em.variables]
    s1, s, a = (em.states[:, names.index(k)] for k in ("s1", "s", "a"))
    ref = pi[(s1 == 1) & ~((s == 1) & (a == 1))].sum()
    assert abs(ours - ref) <= 1e-12  # power iteration was 2e-5 off
    pytest.importorskip("stormpy")
    from storm_oracle import storm_value

    theirs = storm_value(str(model), "", prop)  # sound to Storm's 1e-6
    assert abs(ours - theirs) <= 1e-6 * abs(theirs)


# ---------------------------------------------------------------------------
# the device path (GMRES on a device layout, Jacobi fallback), forced on CPU


@pytest.fixture(params=["device", "device_jacobi"])
def device_path(request, monkeypatch):
    """As on a GPU: every system goes to the device, on the layout that
    `layout_kind` picks for a GPU (a warp layout; the plain-JAX SpMV here).
    `device_jacobi`: the device Krylov solve reports failure, so PRISM's
    Jacobi runs on the device."""
    monkeypatch.setattr(steady_solve, "on_gpu", lambda: True)
    monkeypatch.setattr(steady_solve, "DEVICE_MIN_STATES", 0)
    if request.param == "device_jacobi":
        from jaxmc.solvers import Solution, Status

        def fail(op, b, max_iters):
            return Solution(np.zeros(len(b)), Status.MAX_ITERS, 1, 1.0), "bicgstab"

        monkeypatch.setattr(steady_solve, "device_krylov", fail)
    return request.param


@pytest.mark.parametrize("kind", ["dtmc", "ctmc"])
def test_device_random_chains(device_path, kind):
    test_steady_state_random(kind, 1)
    m, _ = __import__("test_numerics_ctmc").random_model(kind, 15, 1, absorbing=1)
    *_, res = nm.stationary_distributions(m, options=SolveOptions(epsilon=1e-12))
    assert res.method == ("bicgstab" if device_path == "device" else "jacobi")
    assert res.extra["layout"] in ("warp", "warp2") and res.iterations > 0


def test_device_periodic(device_path):
    m = make_model("ctmc", [[{1: 1.0}], [{2: 2.0}], [{0: 4.0}]])
    pi, _, _, res = nm.stationary_distributions(m, options=SolveOptions(epsilon=1e-12))
    np.testing.assert_allclose(pi, np.array([1, 0.5, 0.25]) / 1.75, rtol=1e-9)


def test_device_gmres_slowly_mixing_matches_host():
    """Device GMRES reaches the host's accuracy where a stopped iteration
    would not (the slowly mixing chain of `test_slowly_mixing_ctmc_accurate`,
    and a longer chain of such clusters), on several layouts."""
    fast, slow = 1000.0, 1e-3
    m = make_model(
        "ctmc",
        [[{1: fast}], [{0: fast, 2: slow}], [{3: fast, 1: 3 * slow}], [{2: fast}]],
    )
    for layout in ("csr", "warp", "ell"):
        pi, _, _, res = nm.stationary_distributions(
            m, device=True, options=SolveOptions(layout=layout)
        )
        np.testing.assert_allclose(pi, np.array([3, 3, 1, 1]) / 8, rtol=1e-9)
        assert res.method == "bicgstab" and res.extra["layout"] == layout
    rng = np.random.default_rng(3)
    n = 60
    rows = [
        [
            {
                (s + 1) % n: (slow if s % 10 == 9 else fast) * rng.uniform(0.5, 2),
                (s - 1) % n: fast * rng.uniform(0.5, 2),
            }
        ]
        for s in range(n)
    ]
    m = make_model("ctmc", rows)
    host, *_ = nm.stationary_distributions(m, device=False)
    dev, _, _, res = nm.stationary_distributions(
        m, device=True, options=SolveOptions(layout="warp")
    )
    np.testing.assert_allclose(dev, host, rtol=1e-9, atol=1e-15)
    assert res.method == "bicgstab" and res.residual < 1e-9


def test_device_krylov_solvers():
    """Device GMRES and BiCGStab on a random nonsymmetric system with a
    normalisation row, against a direct solve."""
    import jax.numpy as jnp
    import scipy.sparse as sp
    import scipy.sparse.linalg as spla

    from jaxmc.numerics import krylov
    from jaxmc.numerics.matrices import build_matrix

    n = 300
    A = sp.random(n, n, density=0.02, random_state=7, format="csr")
    s = np.asarray(A.sum(0)).ravel()
    A = (A @ sp.diags(1 / np.where(s > 0, s, 1))).tocsr()  # column-stochastic
    A = steady_solve.canonical(
        A.multiply(np.arange(n)[:, None] != 0)
    )  # row 0: normalisation
    norm = np.zeros(n, bool)
    norm[0] = True
    w = np.random.default_rng(7).uniform(0.5, 2, n)
    full = (sp.eye(n) - A).tolil()
    full[0, :] = w
    b = np.eye(n)[0]
    want = spla.spsolve(full.tocsc(), b)
    for layout in ("csr", "warp"):
        op = krylov.Operator(
            build_matrix(A.indptr, A.indices, A.data, A.shape, layout),
            jnp.asarray(norm),
            jnp.zeros(n, jnp.int32),
            jnp.asarray(w),
            1,
        )
        for solve in (krylov.gmres, krylov.bicgstab):
            sol = solve(op, b, rtol=1e-12, max_iters=3000)
            assert int(sol.status) == 0 and float(sol.residual) < 1e-9, solve
            np.testing.assert_allclose(
                np.asarray(sol.value), want, rtol=1e-8, atol=1e-12
            )
