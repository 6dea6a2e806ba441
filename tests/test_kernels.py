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
from jaxmc.layout import CSR, CompactVector, CompactWarpELL, WarpELL
from jaxmc.solvers import sup_norm


jax.config.update("jax_enable_x64", True)
settings.register_profile("kernels", max_examples=4, deadline=None, derandomize=True)
MODELS = __import__("pathlib").Path(__file__).resolve().parents[1].parent / "shared" / "models"


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
@given(n=st.integers(1, 150), density=st.floats(0.0, 0.2), seed=st.integers(0, 10**6),
       spb=st.sampled_from([1, 2, 4]))
def test_pallas_spmv_matches_reference(n, density, seed, spb):
    A, csr = _stochastic(n, density, seed, distinct=7)
    x = np.random.default_rng(seed).random(n)
    for cls, lanes in LAYOUTS:
        m = cls.from_csr(csr, lanes=lanes, segs_per_block=spb)
        ref = np.asarray(spmv(m, jnp.asarray(x), impl="reference"))
        np.testing.assert_allclose(ref, A @ x, rtol=1e-13, atol=1e-15)
        got = np.asarray(spmv(m, jnp.asarray(x), impl="pallas"))
        np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-15)


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
    for bb, ii in ((jnp.asarray(b), jnp.asarray(inv)),
                   (CompactVector.from_array(b), CompactVector.from_array(inv))):
        for impl in ("reference", "pallas"):
            y, d, ok = jacobi_step(m, ii, bb, x, relative, impl=impl)
            np.testing.assert_allclose(np.asarray(y), want, rtol=1e-13)
            assert float(d) == pytest.approx(float(sup_norm(jnp.asarray(want), x, relative)))
            assert bool(ok)
            y, d, ok = power_step(m, bb, x, relative, impl=impl)
            np.testing.assert_allclose(np.asarray(y), A @ np.asarray(x) + b, rtol=1e-13)


def test_fused_step_reports_nonfinite():
    A, csr = _stochastic(40, 0.2, 3, distinct=3)
    m = WarpELL.from_csr(csr)
    x = jnp.ones(40).at[0].set(jnp.inf)
    b = jnp.zeros(40).at[5].set(jnp.nan)
    _, _, ok = power_step(m, b, x, True, impl="pallas")
    assert not bool(ok)


def test_solvers_on_warp_layouts_match_csr():
    A, csr = _stochastic(60, 0.1, 4, distinct=4)
    A = A * 0.9
    csr = csr.with_values(csr.data * 0.9)
    b = np.random.default_rng(4).random(60)
    ref = solvers.power(csr, b, np.zeros(60), epsilon=1e-12, relative=False).value
    for m in (WarpELL.from_csr(csr), CompactWarpELL.from_csr(csr)):
        sol = solvers.power(m, b, np.zeros(60), epsilon=1e-12, relative=False)
        np.testing.assert_allclose(np.asarray(sol.value), np.asarray(ref), rtol=1e-10)
        sol = solvers.jacobi(m, CompactVector.from_array(np.ones(60)), b, np.zeros(60),
                             epsilon=1e-12, relative=False)
        np.testing.assert_allclose(np.asarray(sol.value), np.asarray(ref), rtol=1e-10)


@pytest.mark.parametrize("path,consts", [
    ("prism-examples/ctmcs/tandem/tandem.sm", "c=5"),
    ("prism-examples/dtmcs/herman/herman5.pm", None),
    ("prism-examples/mdps/consensus/coin2.nm", "K=2"),
])
def test_real_models(path, consts):
    f = MODELS / path
    if not f.exists():
        pytest.skip("models not present")
    em = jaxmc.build(jaxmc.load_model(str(f), consts))
    m_, n = len(em.row_ptr) - 1, em.num_states
    A = sp.csr_matrix((em.val, em.col, em.row_ptr), shape=(m_, n))
    csr = CSR.from_arrays(em.row_ptr, em.col, em.val, (m_, n))
    x = np.random.default_rng(0).random(n)
    layouts = [WarpELL.from_csr(csr, lanes=1), WarpELL.from_csr(csr, lanes=2)]
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
    for cls, lanes in LAYOUTS:
        m = cls.from_csr(csr, lanes=lanes)
        np.testing.assert_allclose(np.asarray(fused(m, jnp.asarray(x))), A @ x, rtol=1e-13)
