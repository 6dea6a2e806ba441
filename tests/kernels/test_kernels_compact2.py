"""The warp kernels' issue-#5 variants (`tile`, `static`, `select`, `align`
in `spmv_pallas.TUNING`), in interpret mode on CPU, against the plain-JAX
reference: matrices whose blocks are all of one width (tiled), of mixed
widths (the masked loop) and wider than `static`; the fused Jacobi step with
its convergence measure; ungated padding next to an infinite `x`; a small
tandem in the windowed order."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

import jaxmc
from jaxmc.kernels import jacobi_step
from jaxmc.kernels.spmv_pallas import TUNING, fused
from jaxmc.layout import CSR, CompactVector, CompactWarpELL, WarpELL, window_order
from jaxmc.layout.warp import reference_spmv
from jaxmc.solvers import sup_norm


jax.config.update("jax_enable_x64", True)
MODELS = (
    __import__("pathlib").Path(__file__).resolve().parents[2].parent
    / "shared"
    / "models"
)

#: (static, tile, select, gate, align): the default and each new knob.
CONFIGS = [
    (0, True, 0, False, True),
    (0, True, 0, True, False),
    (4, True, 8, False, True),
    (4, False, 0, True, True),
    (0, False, 16, True, True),
]


def _banded(n, seed, lo, hi, band=20):
    """Rows of `lo..hi-1` entries near the diagonal, values from a small
    table (the compact layout's case)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(lo, hi, n)
    rows = np.repeat(np.arange(n), lengths)
    cols = np.clip(rows + rng.integers(-band, band, len(rows)), 0, n - 1)
    A = sp.csr_matrix((rng.integers(1, 5, len(rows)) / 4.0, (rows, cols)), shape=(n, n))
    A.sum_duplicates()
    A.sort_indices()
    return A, CSR.from_arrays(A.indptr, A.indices, A.data, A.shape)


def _check(m, A, x, inv, cfg):
    static, tile, select, gate, align = cfg
    want = (A @ x) * inv.dense()
    y, d, nf = fused(
        m,
        jnp.asarray(x),
        None,
        inv,
        epilogue="jacobi",
        diff=True,
        interpret=True,
        static=static,
        tile=tile,
        select=select,
        gate=gate,
        align=align,
    )
    np.testing.assert_allclose(
        np.asarray(y), want, rtol=1e-13, atol=1e-15, err_msg=str(cfg)
    )
    np.testing.assert_allclose(
        float(d), float(sup_norm(jnp.asarray(want), jnp.asarray(x), True)), rtol=1e-12
    )
    assert int(nf) == 0


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize(
    "n,seed,lo,hi,lanes,spb",
    [
        (256, 1, 4, 5, 1, 2),  # every block uniform and full: all tiled
        (300, 2, 3, 5, 1, 2),  # mixed widths, a partial last block
        (200, 3, 0, 12, 2, 2),  # half warp, empty rows, blocks wider than `static`
    ],
)
def test_variants_match_reference(cfg, n, seed, lo, hi, lanes, spb):
    A, csr = _banded(n, seed, lo, hi)
    x = np.random.default_rng(seed).random(n) + 0.1
    inv = CompactVector.from_array(1 / (1 + np.arange(n) % 3))
    m = CompactWarpELL.from_csr(csr, lanes=lanes, segs_per_block=spb)
    np.testing.assert_allclose(
        np.asarray(reference_spmv(m, jnp.asarray(x))), A @ x, rtol=1e-13
    )
    _check(m, A, x, inv, cfg)


def test_variants_on_warp_and_sorted_layouts():
    A, csr = _banded(160, 4, 2, 6)
    x = np.random.default_rng(4).random(160) + 0.1
    inv = CompactVector.from_array(1 / (1 + np.arange(160) % 2))
    for m in (
        WarpELL.from_csr(csr, segs_per_block=2),
        CompactWarpELL.from_csr(csr, segs_per_block=2, sort_rows=True),
    ):
        for cfg in CONFIGS[:3]:
            _check(m, A, x, inv, cfg)


def test_tile_is_compact_default_and_used():
    """The default takes the tiled path on uniform blocks (a wrong tile
    base would break this matrix, whose blocks are all uniform)."""
    assert TUNING["CompactWarpELL"]["tile"] and not TUNING["CompactWarpELL"]["gate"]
    A, csr = _banded(512, 5, 4, 5)
    m = CompactWarpELL.from_csr(csr, segs_per_block=4)
    sw = np.asarray(m.seg_width)
    assert (sw == 4).all()  # every segment width 4: every block tiled
    x = np.random.default_rng(5).random(512)
    y = fused(m, jnp.asarray(x), interpret=True)
    np.testing.assert_allclose(np.asarray(y), A @ x, rtol=1e-13)


def test_ungated_tiles_keep_padding_finite():
    """Padding in a tiled block gathers its own row's `x` ungated; an
    infinite entry there must not turn `0 * inf` into NaN elsewhere."""
    A, csr = _banded(256, 6, 2, 5)
    m = CompactWarpELL.from_csr(csr, segs_per_block=2)
    x = np.random.default_rng(6).random(256)
    x[7] = np.inf
    inv = np.ones(256)
    hit = np.asarray((A[:, 7] != 0).todense()).ravel()
    want = A @ np.where(np.isinf(x), 0, x)
    for cfg in CONFIGS:
        static, tile, select, gate, align = cfg
        y, d, nf = fused(
            m,
            jnp.asarray(x),
            None,
            jnp.asarray(inv),
            epilogue="jacobi",
            diff=True,
            interpret=True,
            static=static,
            tile=tile,
            select=select,
            gate=gate,
            align=align,
        )
        y = np.asarray(y)
        np.testing.assert_allclose(y[~hit], want[~hit], rtol=1e-13, err_msg=str(cfg))
        assert np.isinf(y[hit]).all() and int(nf) == int(hit.any())


def test_small_tandem_windowed_jacobi_step():
    f = MODELS / "prism-examples/ctmcs/tandem/tandem.sm"
    if not f.exists():
        pytest.skip("models not present")
    em = jaxmc.build(jaxmc.load_model(str(f), "c=7"))
    n = em.num_states
    R = sp.csr_matrix((em.val, em.col, em.row_ptr), shape=(n, n))
    diag = np.asarray(R.sum(axis=1)).ravel() - R.diagonal()
    A = (R - sp.diags(R.diagonal())).T.tocsr()
    A.eliminate_zeros()
    order = window_order(
        CSR.from_arrays(A.indptr, A.indices, A.data, A.shape), 32
    ).order
    A = A[order][:, order].tocsr()
    A.sort_indices()
    diag = np.where(diag[order] > 0, diag[order], 1.0)
    m = CompactWarpELL.from_csr(
        CSR.from_arrays(A.indptr, A.indices, A.data, A.shape), segs_per_block=1
    )
    inv = CompactVector.from_array(1 / diag)
    x = jnp.asarray(np.random.default_rng(7).random(n) + 0.5)
    want = (A @ np.asarray(x)) / diag
    for impl in ("pallas", "reference"):
        y, d, ok = jacobi_step(m, inv, None, x, True, impl=impl)
        np.testing.assert_allclose(np.asarray(y), want, rtol=1e-13)
        assert float(d) == pytest.approx(float(sup_norm(jnp.asarray(want), x, True)))
        assert bool(ok)
