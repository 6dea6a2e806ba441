"""Pallas kernels (interpret mode on CPU) against the plain-JAX reference:
random stochastic matrices (hypothesis) and real models; fused steps."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st

import jaxmc
from jaxmc import solvers
from jaxmc.kernels import jacobi_step, power_step, spmv
from jaxmc.kernels.spmv_pallas import fused
from jaxmc.layout import CSR, CompactVector, CompactWarpELL, VectorCSR, WarpELL
from jaxmc.solvers import sup_norm


jax.config.update("jax_enable_x64", True)
settings.register_profile("kernels", max_examples=4, deadline=None, derandomize=True)
MODELS = (
    __import__("pathlib").Path(__file__).resolve().parents[2].parent
    / "shared"
    / "models"
)


def _stochastic(n, density, seed, distinct):
    A = sp.random(n, n, density=density, random_state=seed, format="csr")
    A = A + sp.eye(n, format="csr") * 0.0  # keep empty rows possible
    A.data = (np.floor(A.data * distinct) + 1) / distinct
    s = np.asarray(A.sum(1)).ravel()
    A = (sp.diags(1 / np.where(s > 0, s, 1)) @ A).tocsr()
    A.sort_indices()
    return A, CSR.from_arrays(A.indptr, A.indices, A.data, A.shape)


LAYOUTS = [(WarpELL, 1), (WarpELL, 2), (CompactWarpELL, 1), (CompactWarpELL, 2)]


@settings(settings.get_profile("kernels"))
@given(
    n=st.integers(1, 150),
    density=st.floats(0.0, 0.2),
    seed=st.integers(0, 10**6),
    spb=st.sampled_from([1, 2, 4]),
)
def test_pallas_spmv_matches_reference(n, density, seed, spb):
    A, csr = _stochastic(n, density, seed, distinct=7)
    x = np.random.default_rng(seed).random(n)
    for cls, lanes in LAYOUTS:
        m = cls.from_csr(csr, lanes=lanes, segs_per_block=spb)
        ref = np.asarray(spmv(m, jnp.asarray(x), impl="reference"))
        np.testing.assert_allclose(ref, A @ x, rtol=1e-13, atol=1e-15)
        got = np.asarray(spmv(m, jnp.asarray(x), impl="pallas"))
        np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-15)


def _long_rows(n, ncols, seed, mean):
    """Rows of very different lengths (0 to ~2 mean), some longer than a
    block's lanes several times over."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 2 * mean, n)
    lengths[rng.random(n) < 0.2] = 0
    rows = np.repeat(np.arange(n), lengths)
    cols = rng.integers(0, ncols, len(rows))
    vals = (rng.integers(1, 9, len(rows))) / 8.0
    A = sp.csr_matrix((vals, (rows, cols)), shape=(n, ncols))
    A.sum_duplicates()
    A.sort_indices()
    return A, CSR.from_arrays(A.indptr, A.indices, A.data, A.shape)


@settings(settings.get_profile("kernels"))
@given(
    n=st.integers(1, 70),
    ncols=st.integers(1, 90),
    seed=st.integers(0, 10**6),
    lanes=st.sampled_from([1, 4, 8, 32]),
    rpb=st.sampled_from([1, 2, 8]),
    mean=st.sampled_from([1, 20, 90]),
)
def test_vector_spmv_matches_reference(n, ncols, seed, lanes, rpb, mean):
    A, csr = _long_rows(n, ncols, seed, mean)
    x = np.random.default_rng(seed).random(ncols)
    m = VectorCSR.from_csr(csr, lanes=lanes, rows_per_block=rpb)
    ref = np.asarray(spmv(m, jnp.asarray(x), impl="reference"))
    np.testing.assert_allclose(ref, A @ x, rtol=1e-13, atol=1e-15)
    got = np.asarray(spmv(m, jnp.asarray(x), impl="pallas"))
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-15)


def test_vector_fused_steps_and_new_values():
    A, csr = _long_rows(50, 50, 7, 40)
    rng = np.random.default_rng(7)
    x = jnp.asarray(rng.random(50))
    inv = 1 / (1 + np.arange(50) % 3)
    b = (np.arange(50) % 2) * 0.5
    m = VectorCSR.from_csr(csr, lanes=8, rows_per_block=4)
    for bb in (jnp.asarray(b), CompactVector.from_array(b), None):
        want_b = 0 if bb is None else b
        for impl in ("reference", "pallas"):
            y, d, ok = jacobi_step(
                m, CompactVector.from_array(inv), bb, x, True, impl=impl
            )
            want = (want_b + A @ np.asarray(x)) * inv
            np.testing.assert_allclose(np.asarray(y), want, rtol=1e-13)
            assert float(d) == pytest.approx(
                float(sup_norm(jnp.asarray(want), x, True))
            )
            assert bool(ok)
    vals = np.asarray(csr.data) * 0.5
    got = spmv(m.with_values(jnp.asarray(vals)), x, impl="pallas")
    np.testing.assert_allclose(np.asarray(got), 0.5 * (A @ np.asarray(x)), rtol=1e-13)
    xb = x.at[4].set(jnp.inf)
    if A[:, 4].nnz:
        _, d, ok = power_step(m, None, xb, True, impl="pallas")
        assert not bool(ok) and np.isnan(float(d))


@pytest.mark.parametrize("cls,lanes", LAYOUTS)
def test_pallas_fp32(cls, lanes):
    A, csr = _stochastic(97, 0.08, 1, distinct=5)
    m = cls.from_csr(csr, lanes=lanes).astype(jnp.float32)
    x = np.random.default_rng(1).random(97)
    y = fused(m, jnp.asarray(x, jnp.float32), interpret=True)
    assert y.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(y), A @ x, rtol=1e-5)


@pytest.mark.parametrize("relative", [True, False])
@pytest.mark.parametrize("cls,lanes", LAYOUTS)
def test_fused_steps_match_reference(cls, lanes, relative):
    A, csr = _stochastic(130, 0.05, 2, distinct=4)
    rng = np.random.default_rng(2)
    x = jnp.asarray(rng.random(130))
    x = x.at[3].set(0.0)
    inv = 1 / (1 + np.arange(130) % 3)
    b = (np.arange(130) % 2) * 0.5
    m = cls.from_csr(csr, lanes=lanes)
    want = (b + A @ np.asarray(x)) * inv
    for bb, ii in (
        (jnp.asarray(b), jnp.asarray(inv)),
        (CompactVector.from_array(b), CompactVector.from_array(inv)),
    ):
        for impl in ("reference", "pallas"):
            y, d, ok = jacobi_step(m, ii, bb, x, relative, impl=impl)
            np.testing.assert_allclose(np.asarray(y), want, rtol=1e-13)
            assert float(d) == pytest.approx(
                float(sup_norm(jnp.asarray(want), x, relative))
            )
            assert bool(ok)
            y, d, ok = power_step(m, bb, x, relative, impl=impl)
            np.testing.assert_allclose(np.asarray(y), A @ np.asarray(x) + b, rtol=1e-13)
    # b = None: the steady-state step, b not read
    for impl in ("reference", "pallas"):
        y, d, ok = jacobi_step(m, jnp.asarray(inv), None, x, relative, impl=impl)
        np.testing.assert_allclose(np.asarray(y), (A @ np.asarray(x)) * inv, rtol=1e-13)
        assert float(d) == pytest.approx(
            float(sup_norm(jnp.asarray((A @ np.asarray(x)) * inv), x, relative))
        )


def test_fused_step_reports_nonfinite():
    A, csr = _stochastic(40, 0.2, 3, distinct=3)
    m = WarpELL.from_csr(csr)
    x = jnp.ones(40).at[0].set(jnp.inf)
    b = jnp.zeros(40).at[5].set(jnp.nan)
    _, _, ok = power_step(m, b, x, True, impl="pallas")
    assert not bool(ok)
    # a NaN start entry with finite results is a difference, not a non-finite y
    y, d, ok = power_step(
        m, jnp.zeros(40), jnp.ones(40).at[0].set(jnp.nan), True, impl="pallas"
    )
    assert bool(ok) == bool(np.isfinite(np.asarray(y)).all())


def test_solvers_on_warp_layouts_match_csr():
    A, csr = _stochastic(60, 0.1, 4, distinct=4)
    A = A * 0.9
    csr = csr.with_values(csr.data * 0.9)
    b = np.random.default_rng(4).random(60)
    ref = solvers.power(csr, b, np.zeros(60), epsilon=1e-12, relative=False).value
    for m in (
        WarpELL.from_csr(csr),
        CompactWarpELL.from_csr(csr),
        VectorCSR.from_csr(csr, lanes=4),
    ):
        sol = solvers.power(m, b, np.zeros(60), epsilon=1e-12, relative=False)
        np.testing.assert_allclose(np.asarray(sol.value), np.asarray(ref), rtol=1e-10)
        sol = solvers.jacobi(
            m,
            CompactVector.from_array(np.ones(60)),
            b,
            np.zeros(60),
            epsilon=1e-12,
            relative=False,
        )
        np.testing.assert_allclose(np.asarray(sol.value), np.asarray(ref), rtol=1e-10)


@pytest.mark.parametrize(
    "path,consts",
    [
        ("prism-examples/ctmcs/tandem/tandem.sm", "c=5"),
        ("prism-examples/dtmcs/herman/herman5.pm", None),
        ("prism-examples/mdps/consensus/coin2.nm", "K=2"),
    ],
)
def test_real_models(path, consts):
    f = MODELS / path
    if not f.exists():
        pytest.skip("models not present")
    em = jaxmc.build(jaxmc.load_model(str(f), consts))
    m_, n = len(em.row_ptr) - 1, em.num_states
    A = sp.csr_matrix((em.val, em.col, em.row_ptr), shape=(m_, n))
    csr = CSR.from_arrays(em.row_ptr, em.col, em.val, (m_, n))
    x = np.random.default_rng(0).random(n)
    layouts = [
        WarpELL.from_csr(csr, lanes=1),
        WarpELL.from_csr(csr, lanes=2),
        VectorCSR.from_csr(csr, lanes=8),
    ]
    if m_ == n:
        layouts += [CompactWarpELL.from_csr(csr, lanes=1)]
    for m in layouts:
        got = np.asarray(spmv(m, jnp.asarray(x), impl="pallas"))
        np.testing.assert_allclose(got, A @ x, rtol=1e-13)


def test_pallas_rejects_other_layouts():
    _, csr = _stochastic(10, 0.3, 5, distinct=2)
    with pytest.raises(TypeError, match="no Pallas kernel"):
        spmv(csr, jnp.ones(10), impl="pallas")
    with pytest.raises(ValueError, match="impl"):
        spmv(csr, jnp.ones(10), impl="cuda")


@pytest.mark.gpu
def test_gpu_pallas_matches_reference():
    if jax.default_backend() != "gpu":
        pytest.skip("needs a GPU")
    A, csr = _stochastic(5000, 0.002, 6, distinct=9)
    x = np.random.default_rng(6).random(5000)
    for cls, lanes in LAYOUTS + [(VectorCSR, 32)]:
        m = cls.from_csr(csr, lanes=lanes)
        np.testing.assert_allclose(
            np.asarray(fused(m, jnp.asarray(x))), A @ x, rtol=1e-13
        )


@pytest.mark.parametrize("gate,prefetch", [(False, True), (True, True), (False, False)])
def test_kernel_tuning_variants(monkeypatch, gate, prefetch):
    from jaxmc.kernels import spmv_pallas

    for k in spmv_pallas.TUNING:
        monkeypatch.setitem(
            spmv_pallas.TUNING,
            k,
            dict(spmv_pallas.TUNING[k], gate=gate, prefetch=prefetch),
        )
    jax.clear_caches()
    A, csr = _long_rows(70, 70, 9, 6)
    x = np.random.default_rng(9).random(70)
    x[5] = np.inf  # padding must not turn 0 * inf into NaN
    inv = 1 / (1 + np.arange(70) % 3)
    want = (A @ np.where(np.isinf(x), 0, x)) * inv
    hit = np.asarray((A[:, 5] != 0).todense()).ravel()
    for m in (
        WarpELL.from_csr(csr),
        CompactWarpELL.from_csr(csr, lanes=2),
        VectorCSR.from_csr(csr, lanes=4),
    ):
        y, d, nf = fused(
            m,
            jnp.asarray(x),
            None,
            jnp.asarray(inv),
            epilogue="jacobi",
            diff=True,
            interpret=True,
        )
        y = np.asarray(y)
        np.testing.assert_allclose(y[~hit], want[~hit], rtol=1e-13)
        assert np.isinf(y[hit]).all() and int(nf) == int(hit.any())
    jax.clear_caches()


def test_solver_measures_last_step_of_trip():
    A, csr = _stochastic(80, 0.08, 10, distinct=4)
    csr = csr.with_values(csr.data * 0.95)
    b = np.random.default_rng(10).random(80)
    m = WarpELL.from_csr(csr)
    every = solvers.power(m, b, np.zeros(80), epsilon=1e-9, measure="every")
    for k in (2, 4, 5):
        last = solvers.power(
            m, b, np.zeros(80), epsilon=1e-9, measure="last", steps_per_trip=k
        )
        its = int(last.iterations)
        assert its % k == 0 and int(every.iterations) <= its
        # the returned iterate passes the criterion against its predecessor
        prev = np.zeros(80)
        for _ in range(its - 1):
            prev = 0.95 * (A @ prev) + b
        x = np.asarray(last.value)
        np.testing.assert_allclose(x, 0.95 * (A @ prev) + b, rtol=1e-12)
        assert float(sup_norm(jnp.asarray(x), jnp.asarray(prev), True)) < 1e-9
    with pytest.raises(ValueError, match="measure"):
        solvers.jacobi(m, np.ones(80), b, np.zeros(80), measure="sometimes")


@pytest.mark.parametrize("n,seed,spb", [(37, 11, 3), (120, 12, 1)])
def test_sorted_rows_match_reference(n, seed, spb):
    # rows of 0..11 entries and a few of 40: lane lengths below and above
    # the cap of `lane_info`
    A, csr = _long_rows(n, n, seed, 6)
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.random(n) + 0.1)
    inv = 1 / (1 + np.arange(n) % 3)
    b = (np.arange(n) % 2) * 0.5
    want = (b + A @ np.asarray(x)) * inv
    for cls, lanes in ((WarpELL, 1), (WarpELL, 2), (CompactWarpELL, 1)):
        m = cls.from_csr(csr, lanes=lanes, segs_per_block=2, sort_rows=True)
        m = m.with_segs_per_block(spb)
        ref = np.asarray(spmv(m, x, impl="reference"))
        np.testing.assert_allclose(ref, A @ np.asarray(x), rtol=1e-13, atol=1e-15)
        y, d, ok = jacobi_step(
            m, CompactVector.from_array(inv), jnp.asarray(b), x, True, impl="pallas"
        )
        np.testing.assert_allclose(np.asarray(y), want, rtol=1e-13)
        assert float(d) == pytest.approx(float(sup_norm(jnp.asarray(want), x, True)))
    w = WarpELL.from_csr(csr, sort_rows=True)
    got = spmv(w.with_values(jnp.asarray(csr.data) * 2), x, impl="pallas")
    np.testing.assert_allclose(np.asarray(got), 2 * (A @ np.asarray(x)), rtol=1e-13)
