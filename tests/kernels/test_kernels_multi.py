"""Multi-vector SpMV (`x` of shape [n, k]) and the fused multi-vector steps:
the plain-JAX path of every layout against scipy, the Pallas kernel
(interpret mode on CPU) against it, per-column measures, compile counts."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

import jaxmc
from jaxmc.kernels import (
    jacobi_step,
    jacobi_step_multi,
    power_step_multi,
    spmv,
    spmv_multi,
    sup_norm_columns,
)
from jaxmc.kernels.spmv_multi_pallas import fused_multi
from jaxmc.layout import CSR, CompactVector, CompactWarpELL, WarpELL, make_layout
from jaxmc.solvers import sup_norm


jax.config.update("jax_enable_x64", True)
MODELS = Path(__file__).resolve().parents[2].parent / "shared" / "models"
KS = [1, 2, 3, 8]
ALL_KINDS = ["csr", "ell", "sell", "warp", "warp2", "compact", "compact2", "vector"]


def _stochastic(n, density, seed, distinct=4):
    A = sp.random(n, n, density=density, random_state=seed, format="csr")
    A.data = (np.floor(A.data * distinct) + 1) / distinct
    s = np.asarray(A.sum(1)).ravel()
    A = (sp.diags(1 / np.where(s > 0, s, 1)) @ A).tocsr()
    A.sort_indices()
    return A, CSR.from_arrays(A.indptr, A.indices, A.data, A.shape)


def _layout(csr, kind):
    if kind == "vector":
        from jaxmc.layout import VectorCSR

        return VectorCSR.from_csr(csr, lanes=4)
    return make_layout(csr, kind)


def test_reference_all_layouts_match_scipy():
    A, csr = _stochastic(157, 0.06, 1)
    layouts = {kind: _layout(csr, kind) for kind in ALL_KINDS}
    for k in KS:
        X = np.random.default_rng(k).random((157, k))
        for kind, L in layouts.items():
            Y = np.asarray(spmv(L, jnp.asarray(X), impl="reference"))
            assert Y.shape == (157, k), kind
            np.testing.assert_allclose(Y, A @ X, rtol=1e-13, atol=1e-16, err_msg=kind)
    Y = spmv_multi(layouts["sell"], jnp.asarray(X), impl="reference")
    np.testing.assert_allclose(np.asarray(Y), A @ X, rtol=1e-13, atol=1e-16)


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("cls", [WarpELL, CompactWarpELL])
def test_pallas_matches_reference(cls, k):
    A, csr = _stochastic(203, 0.04, 10 + k, distinct=5)
    X = np.random.default_rng(k).random((203, k))
    for spb in (1, 8):  # the last block partly past the end / several segments
        L = cls.from_csr(csr, segs_per_block=spb)
        want = np.asarray(spmv_multi(L, jnp.asarray(X), impl="reference"))
        got = np.asarray(spmv(L, jnp.asarray(X), impl="pallas"))
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-16)
        np.testing.assert_allclose(got, A @ X, rtol=1e-13, atol=1e-16)


@pytest.mark.parametrize("cls", [WarpELL, CompactWarpELL])
def test_pallas_fp32_and_ungated(cls):
    A, csr = _stochastic(120, 0.07, 3, distinct=5)
    X = np.random.default_rng(3).random((120, 3))
    L = cls.from_csr(csr).astype(jnp.float32)
    Y = fused_multi(L, jnp.asarray(X, jnp.float32), interpret=True)
    assert Y.dtype == jnp.float32 and Y.shape == (120, 3)
    np.testing.assert_allclose(np.asarray(Y), A @ X, rtol=1e-5)
    # without the value gate padding is gathered; an inf in x must still
    # not turn padding (0 * inf) into NaN
    X[7, 1] = np.inf
    Y = np.asarray(
        fused_multi(cls.from_csr(csr), jnp.asarray(X), gate=False, interpret=True)
    )
    hit = np.asarray((A[:, 7] != 0).todense()).ravel()
    Xf = np.where(np.isinf(X), 0, X)
    np.testing.assert_allclose(
        Y[:, [0, 2]], (A @ Xf)[:, [0, 2]], rtol=1e-13, atol=1e-16
    )
    np.testing.assert_allclose(Y[~hit, 1], (A @ Xf)[~hit, 1], rtol=1e-13, atol=1e-16)
    assert np.isinf(Y[hit, 1]).all()


@pytest.mark.parametrize("cls", [WarpELL, CompactWarpELL])
def test_pallas_load2d_variant(cls):
    A, csr = _stochastic(150, 0.05, 12, distinct=5)
    X = np.random.default_rng(12).random((150, 3))
    L = cls.from_csr(csr, segs_per_block=2)
    for gate in (True, False):
        Y = fused_multi(L, jnp.asarray(X), load2d=True, gate=gate, interpret=True)
        np.testing.assert_allclose(np.asarray(Y), A @ X, rtol=1e-13, atol=1e-16)
    y, d, nb = fused_multi(
        L,
        jnp.asarray(X),
        jnp.ones(150),
        epilogue="power",
        diff=True,
        relative=False,
        load2d=True,
        interpret=True,
    )
    np.testing.assert_allclose(
        np.asarray(d), np.abs(A @ X + 1 - X).max(axis=0), rtol=1e-13
    )


@pytest.mark.parametrize("rpp", [32, 64])
def test_pallas_rows_per_program(rpp):
    A, csr = _stochastic(300, 0.03, 13, distinct=5)
    X = np.random.default_rng(13).random((300, 5))
    L = WarpELL.from_csr(csr, segs_per_block=4)
    Y = fused_multi(L, jnp.asarray(X), rows_per_program=rpp, interpret=True)
    np.testing.assert_allclose(np.asarray(Y), A @ X, rtol=1e-13, atol=1e-16)
    y, d, nb = fused_multi(
        L,
        jnp.asarray(X),
        None,
        epilogue="power",
        diff=True,
        relative=False,
        rows_per_program=rpp,
        interpret=True,
    )
    np.testing.assert_allclose(np.asarray(d), np.abs(A @ X - X).max(axis=0), rtol=1e-13)
    with pytest.raises(ValueError, match="rows_per_program"):
        fused_multi(L, jnp.asarray(X), rows_per_program=48, interpret=True)


def _vectors(n, k, rng):
    b = (np.arange(n) % 2) * 0.5
    inv = 1 / (1 + np.arange(n) % 3)
    B = rng.random((n, k))
    Inv = 1 / (1 + rng.random((n, k)))
    return [
        (None, jnp.asarray(inv), None, inv[:, None]),
        (jnp.asarray(b), jnp.asarray(inv), b[:, None], inv[:, None]),
        (
            CompactVector.from_array(b),
            CompactVector.from_array(inv),
            b[:, None],
            inv[:, None],
        ),
        (jnp.asarray(B), jnp.asarray(Inv), B, Inv),
    ]


@pytest.mark.parametrize("cls", [WarpELL, CompactWarpELL])
def test_fused_steps_per_column(cls):
    n, k = 140, 3
    A, csr = _stochastic(n, 0.05, 5, distinct=4)
    rng = np.random.default_rng(k)
    X = rng.random((n, k))
    X[3, 0] = 0.0
    L = cls.from_csr(csr)
    for i, (b, inv, bd, invd) in enumerate(_vectors(n, k, rng)):
        relative = i % 2 == 0
        want_j = ((0 if bd is None else bd) + A @ X) * invd
        want_p = (0 if bd is None else bd) + A @ X
        # (the reference on the per-column vectors only: it is plain JAX)
        for impl in ("reference", "pallas") if i == 3 else ("pallas",):
            y, d, ok = jacobi_step_multi(L, inv, b, jnp.asarray(X), relative, impl=impl)
            np.testing.assert_allclose(np.asarray(y), want_j, rtol=1e-13)
            assert d.shape == (k,) and ok.shape == (k,) and bool(ok.all())
            for j in range(k):  # the measure of each column is PRISM's sup_norm
                sj = float(
                    sup_norm(jnp.asarray(want_j[:, j]), jnp.asarray(X[:, j]), relative)
                )
                assert float(d[j]) == pytest.approx(sj, rel=1e-12)
            if i not in (1, 3):
                continue
            y, d, ok = power_step_multi(L, b, jnp.asarray(X), not relative, impl=impl)
            np.testing.assert_allclose(np.asarray(y), want_p, rtol=1e-13)
            np.testing.assert_allclose(
                np.asarray(d),
                np.asarray(
                    sup_norm_columns(jnp.asarray(want_p), jnp.asarray(X), not relative)
                ),
                rtol=1e-12,
            )
    y2, d2, ok2 = power_step_multi(
        L, b, jnp.asarray(X), True, impl="pallas", measure=False
    )
    assert d2 is None and ok2 is None
    np.testing.assert_allclose(np.asarray(y2), want_p, rtol=1e-13)


def test_single_column_agrees_with_single_vector_step():
    A, csr = _stochastic(90, 0.08, 4)
    L = WarpELL.from_csr(csr)
    x = np.random.default_rng(4).random(90)
    inv = jnp.asarray(1 / (1 + np.arange(90) % 3))
    y1, d1, _ = jacobi_step(L, inv, None, jnp.asarray(x), True, impl="pallas")
    yk, dk, _ = jacobi_step_multi(
        L, inv, None, jnp.asarray(x)[:, None], True, impl="pallas"
    )
    np.testing.assert_allclose(np.asarray(yk[:, 0]), np.asarray(y1), rtol=1e-15)
    assert float(dk[0]) == pytest.approx(float(d1), rel=1e-15)
    # the 1-D entry points are unchanged
    np.testing.assert_allclose(
        np.asarray(spmv(L, jnp.asarray(x), impl="reference")), A @ x, rtol=1e-13
    )


@pytest.mark.parametrize("impl", ["reference", "pallas"])
def test_nonfinite_reported_per_column(impl):
    A, csr = _stochastic(64, 0.1, 7)
    L = CompactWarpELL.from_csr(csr)
    X = np.ones((64, 3))
    B = np.zeros((64, 3))
    B[5, 1] = np.nan
    y, d, ok = power_step_multi(L, jnp.asarray(B), jnp.asarray(X), False, impl=impl)
    assert list(np.asarray(ok)) == [True, False, True]
    assert np.isnan(float(d[1])) and np.isfinite(np.asarray(d)[[0, 2]]).all()


def test_each_k_compiles_once():
    _, csr = _stochastic(50, 0.1, 8)
    L = WarpELL.from_csr(csr)
    before = fused_multi._cache_size()
    for k in (2, 5):
        for seed in range(3):  # new values, same shape: no retrace
            X = np.random.default_rng(seed).random((50, k))
            fused_multi(L, jnp.asarray(X), interpret=True)
    assert fused_multi._cache_size() - before == 2


def test_rejects_unsupported():
    _, csr = _stochastic(20, 0.2, 9)
    X = jnp.ones((20, 2))
    with pytest.raises(TypeError, match="multi-vector Pallas"):
        spmv(WarpELL.from_csr(csr, lanes=2), X, impl="pallas")
    with pytest.raises(TypeError, match="multi-vector Pallas"):
        spmv(csr, X, impl="pallas")
    with pytest.raises(ValueError, match=r"\[n, k\]"):
        spmv_multi(csr, jnp.ones(20))
    with pytest.raises(ValueError, match="shape"):
        power_step_multi(
            WarpELL.from_csr(csr), jnp.ones((20, 3)), X, True, impl="pallas"
        )


def test_batched_jacobi_loop_converges_per_column():
    """The step as the body of a batched solve: 3 right-hand sides of
    `(I - 0.9 A) x = b`, each column frozen once its own measure is small."""
    n = 80
    A, csr = _stochastic(n, 0.08, 11)
    L = CompactWarpELL.from_csr(csr.with_values(csr.data * 0.9))
    B = np.random.default_rng(11).random((n, 3)) * np.array([1.0, 10.0, 0.1])
    inv = jnp.ones(n)

    def body(c):
        x, done, it = c
        y, d, ok = jacobi_step_multi(L, inv, jnp.asarray(B), x, False, impl="pallas")
        y = jnp.where(done[None, :], x, y)
        return y, done | (d < 1e-12), it + 1

    x, done, it = jax.lax.while_loop(
        lambda c: ~jnp.all(c[1]) & (c[2] < 2000),
        body,
        (jnp.zeros((n, 3)), jnp.zeros(3, bool), 0),
    )
    assert bool(done.all())
    want = np.linalg.solve(np.eye(n) - 0.9 * A.toarray(), B)
    np.testing.assert_allclose(np.asarray(x), want, rtol=1e-9)


@pytest.mark.parametrize(
    "path,consts",
    [
        ("prism-examples/ctmcs/tandem/tandem.sm", "c=5"),
        ("prism-examples/dtmcs/herman/herman5.pm", None),
    ],
)
def test_real_models(path, consts):
    f = MODELS / path
    if not f.exists():
        pytest.skip("models not present")
    em = jaxmc.build(jaxmc.load_model(str(f), consts))
    n = em.num_states
    A = sp.csr_matrix((em.val, em.col, em.row_ptr), shape=(len(em.row_ptr) - 1, n))
    csr = CSR.from_arrays(em.row_ptr, em.col, em.val, A.shape)
    X = np.random.default_rng(0).random((n, 3))
    for kind in ("csr", "sell", "warp2", "vector"):
        got = np.asarray(spmv(_layout(csr, kind), jnp.asarray(X), impl="reference"))
        np.testing.assert_allclose(got, A @ X, rtol=1e-13, err_msg=kind)
    for L in (WarpELL.from_csr(csr), CompactWarpELL.from_csr(csr)):
        got = np.asarray(spmv(L, jnp.asarray(X), impl="pallas"))
        np.testing.assert_allclose(got, A @ X, rtol=1e-13)


@pytest.mark.gpu
def test_gpu_pallas_multi_matches_reference():
    if jax.default_backend() != "gpu":
        pytest.skip("needs a GPU")
    A, csr = _stochastic(5000, 0.002, 6, distinct=9)
    for k in (1, 3, 16):
        X = np.random.default_rng(k).random((5000, k))
        for cls in (WarpELL, CompactWarpELL):
            Y = fused_multi(cls.from_csr(csr), jnp.asarray(X))
            np.testing.assert_allclose(np.asarray(Y), A @ X, rtol=1e-13)


@pytest.mark.parametrize("k,rows", [(16, 64), (8, 128)])
def test_pallas_wide_batches(k, rows):
    """From k = 8 and k = 16 the warp kernel runs its `by_k` settings (4
    warps, 128 or 64 rows per program where the layout's blocks allow):
    same values."""
    from jaxmc.kernels import spmv_multi_pallas as P

    assert P._by_k(P.TUNING["WarpELL"], k)["rows_per_program"] == rows
    assert P._by_k(P.TUNING["WarpELL"], 4) is None
    assert P._by_k(P.TUNING["CompactWarpELL"], k)["rows_per_program"] == 64
    A, csr = _stochastic(203, 0.04, 26, distinct=5)
    X = np.random.default_rng(k).random((203, k))
    for cls in (WarpELL, CompactWarpELL):
        for spb in (1, 8):  # block_rows 32 (rows unchanged) and 256 (split per program)
            L = cls.from_csr(csr, segs_per_block=spb)
            got = np.asarray(spmv(L, jnp.asarray(X), impl="pallas"))
            np.testing.assert_allclose(got, A @ X, rtol=1e-13, atol=1e-16)
