"""Layouts: warp-segment placement, compact encoding, stats, orderings,
automatic choice."""

import jax
import numpy as np
import pytest
import scipy.sparse as sp

from jaxmc.kernels import spmv
from jaxmc.layout import (
    CSR,
    CompactVector,
    CompactWarpELL,
    Permutation,
    VectorCSR,
    WarpELL,
    bfs_order,
    choose_layout,
    layout_kind,
    make_layout,
    rcm_order,
    row_layout_kind,
)


jax.config.update("jax_enable_x64", True)


def _random(n, density, seed, distinct=None):
    A = sp.random(n, n, density=density, random_state=seed, format="csr")
    if distinct:
        A.data = (np.floor(A.data * distinct) + 1) / distinct
    A.sort_indices()
    return A, CSR.from_arrays(A.indptr, A.indices, A.data, A.shape)


@pytest.mark.parametrize("lanes", [1, 2])
def test_warp_placement_is_column_major_per_segment(lanes):
    A, csr = _random(100, 0.05, 0)
    w = WarpELL.from_csr(csr, lanes=lanes, segs_per_block=2)
    seg_rows = 32 // lanes
    data, rows, slot = map(np.asarray, (w.data, w.rows, w.slot))
    seg_ptr, width = np.asarray(w.seg_ptr), np.asarray(w.seg_width)
    for s in range(len(width)):
        block = data[seg_ptr[s] : seg_ptr[s + 1]].reshape(width[s], lanes, seg_rows)
        r = rows[seg_ptr[s] : seg_ptr[s + 1]].reshape(width[s], lanes, seg_rows)
        assert (r == np.minimum(s * seg_rows + np.arange(seg_rows), 99)).all()
        for i in range(seg_rows):
            row = s * seg_rows + i
            if row < 100:
                got = block[:, :, i].reshape(-1)  # entry k at (k // lanes, k % lanes)
                want = A[row].data
                np.testing.assert_array_equal(got[: len(want)], want)
                assert (got[len(want) :] == 0).all()
    assert (slot < A.nnz).sum() == A.nnz
    # each segment is as wide as its longest row
    lengths = np.append(np.diff(A.indptr), np.zeros(len(width) * seg_rows - 100, int))
    np.testing.assert_array_equal(
        width, (-(-lengths // lanes)).reshape(-1, seg_rows).max(axis=1)
    )


def test_compact_encoding_and_stats():
    A, csr = _random(200, 0.03, 1, distinct=5)
    c = CompactWarpELL.from_csr(csr)
    assert c.vidx.dtype == np.uint8 and c.offs.dtype in (np.int8, np.int16)
    assert c.table.size <= 6
    np.testing.assert_array_equal(
        np.asarray(c.data), np.asarray(WarpELL.from_csr(csr).data)
    )
    s, w = c.stats(), WarpELL.from_csr(csr).stats()
    assert s["padding"] == w["padding"] >= 0
    assert s["bytes_per_nnz"] < w["bytes_per_nnz"] / 3
    assert csr.stats()["padding"] == 0
    # offsets too wide for int16 -> int32
    B = sp.csr_matrix(([1.0, 1.0], ([0, 70000], [70000, 0])), shape=(70001, 70001))
    cb = CompactWarpELL.from_csr(CSR.from_arrays(B.indptr, B.indices, B.data, B.shape))
    assert cb.offs.dtype == np.int32


def test_compact_rejects_many_values_and_new_values():
    A, csr = _random(400, 0.5, 2)
    with pytest.raises(ValueError, match="distinct values"):
        CompactWarpELL.from_csr(csr)
    _, small = _random(50, 0.1, 3, distinct=3)
    with pytest.raises(TypeError, match="rebuild"):
        CompactWarpELL.from_csr(small).with_values(small.data)


def test_compact_vector():
    v = np.array([0.5, 0.25, 0.5, 2.0])
    c = CompactVector.from_array(v)
    np.testing.assert_array_equal(np.asarray(c.dense()), v)
    np.testing.assert_array_equal(np.asarray(c.map(lambda t: 1 / t).dense()), 1 / v)
    assert c.idx.dtype == np.uint8


def test_permutations_roundtrip():
    A, csr = _random(120, 0.04, 4)
    x = np.random.default_rng(0).random(120)
    for p in (bfs_order(csr), rcm_order(csr), Permutation.identity(120)):
        assert sorted(p.order) == list(range(120))
        B = p.csr(csr)
        y = p.undo(np.asarray(spmv(B, p.apply(x))))
        np.testing.assert_allclose(y, A @ x, rtol=1e-13)


def test_bfs_order_starts_at_source():
    A = sp.csr_matrix(([1.0] * 3, ([0, 1, 2], [1, 2, 3])), shape=(5, 5))
    p = bfs_order(CSR.from_arrays(A.indptr, A.indices, A.data, A.shape), sources=(2,))
    assert list(p.order[:2]) == [2, 3] and sorted(p.order) == list(range(5))


def test_choice():
    _, csr = _random(300, 0.02, 5, distinct=4)
    assert layout_kind(csr, "cpu") == "csr"
    assert layout_kind(csr, "gpu") in ("warp", "warp2")
    assert layout_kind(csr, "gpu", fixed_values=True).startswith("compact")
    assert isinstance(choose_layout(csr, "gpu", kind="warp2"), WarpELL)
    assert choose_layout(csr, "gpu", kind="warp2").lanes == 2
    assert isinstance(make_layout(csr, "compact"), CompactWarpELL)
    with pytest.raises(ValueError, match="unknown layout"):
        make_layout(csr, "nope")


def test_vector_layout_rows_aligned_and_padded():
    A, csr = _random(90, 0.3, 6)
    v = VectorCSR.from_csr(csr, lanes=8, rows_per_block=4, align=8)
    ptr, data, cols, slot = map(np.asarray, (v.row_ptr, v.data, v.cols, v.slot))
    assert (ptr % 8 == 0).all()
    for r in range(90):
        row = A[r]
        got = data[ptr[r] : ptr[r + 1]]
        np.testing.assert_array_equal(got[: row.nnz], row.data)
        np.testing.assert_array_equal(cols[ptr[r] : ptr[r] + row.nnz], row.indices)
        assert (got[row.nnz :] == 0).all() and ptr[r + 1] - ptr[r] - row.nnz < 8
    steps = -(-np.diff(ptr) // 8)
    np.testing.assert_array_equal(
        np.asarray(v.block_width), np.append(steps, [0] * 2).reshape(-1, 4).max(axis=1)
    )
    assert (slot < A.nnz).sum() == A.nnz and len(data) >= ptr[-1] + 8
    s = v.stats()
    assert s["layout"] == "vector8" and 0 <= s["padding"] < 8 * 90 / A.nnz
    with pytest.raises(ValueError, match="power of two"):
        VectorCSR.from_csr(csr, lanes=3)


def test_choice_picks_vector_for_long_rows():
    # herman-like: few rows, hundreds of entries each
    A, csr = _random(300, 0.5, 7, distinct=4)
    assert layout_kind(csr, "gpu") == "vector"
    assert layout_kind(csr, "gpu", fixed_values=True) == "vector"
    assert layout_kind(csr, "cpu") == "csr"
    for L in (choose_layout(csr, "gpu"), make_layout(csr, "vector")):
        assert isinstance(L, VectorCSR) and L.lanes == 256  # mean row ~150
    x = np.random.default_rng(0).random(300)
    np.testing.assert_allclose(
        np.asarray(spmv(make_layout(csr, "vector"), x, impl="reference")),
        A @ x,
        rtol=1e-13,
    )


def test_regrouping_keeps_the_product():
    A, csr = _random(300, 0.03, 8, distinct=4)
    x = np.random.default_rng(1).random(300)
    for m in (WarpELL.from_csr(csr, segs_per_block=2), CompactWarpELL.from_csr(csr)):
        for spb in (1, 3, 16):
            g = m.with_segs_per_block(spb)
            assert g.segs_per_block == spb and len(g.seg_width) % spb == 0
            np.testing.assert_allclose(
                np.asarray(spmv(g, x, impl="pallas")), A @ x, rtol=1e-13
            )
    v = VectorCSR.from_csr(csr, lanes=8, rows_per_block=2)
    for lanes, rpb in ((32, 1), (4, 8)):
        g = v.with_tiling(lanes, rpb)
        assert (g.lanes, g.rows_per_block) == (lanes, rpb)
        np.testing.assert_allclose(
            np.asarray(spmv(g, x, impl="pallas")), A @ x, rtol=1e-13
        )


@pytest.mark.parametrize("lanes", [1, 2])
def test_sorted_rows_placement(lanes):
    rng = np.random.default_rng(3)
    n = 100
    lengths = rng.integers(0, 9, n)
    lengths[::17] = 40  # past the cap of lane_info's length field
    rows = np.repeat(np.arange(n), lengths)
    A = sp.csr_matrix(
        (np.ones(len(rows)), (rows, rng.integers(0, n, len(rows)))), shape=(n, n)
    )
    A.sum_duplicates()
    A.sort_indices()
    csr = CSR.from_arrays(A.indptr, A.indices, A.data, A.shape)
    w = WarpELL.from_csr(csr, lanes=lanes, segs_per_block=2, sort_rows=True)
    S = 32 // lanes
    bits = S.bit_length() - 1
    cap = (1 << (8 - bits)) - 1
    info = np.asarray(w.lane_info).astype(int)
    seg_ptr, width = np.asarray(w.seg_ptr), np.asarray(w.seg_width)
    data, srows = np.asarray(w.data), np.asarray(w.rows)
    steps_all = -(-np.diff(A.indptr) // lanes)
    for s in range(len(width)):
        lane_rows = s * S + (info[s * S : (s + 1) * S] & (S - 1))
        assert sorted(lane_rows) == list(range(s * S, (s + 1) * S))  # a permutation
        st = np.array([steps_all[r] if r < n else 0 for r in lane_rows])
        assert (np.diff(st) <= 0).all()  # longest rows first
        own = info[s * S : (s + 1) * S] >> bits
        assert (own == np.minimum(st, cap)).all()
        block = data[seg_ptr[s] : seg_ptr[s + 1]].reshape(width[s], lanes, S)
        rb = srows[seg_ptr[s] : seg_ptr[s + 1]].reshape(width[s], lanes, S)
        for lane, r in enumerate(lane_rows):
            if r < n:
                assert (rb[:, :, lane] == r).all()
                got = block[:, :, lane].reshape(-1)
                np.testing.assert_array_equal(got[: A[r].nnz], A[r].data)
                assert (got[A[r].nnz :] == 0).all()
    assert (
        w.stats()["matrix_bytes"]
        > WarpELL.from_csr(csr, lanes=lanes).stats()["matrix_bytes"]
    )


@pytest.mark.parametrize("density, seed", [(0.02, 5), (0.5, 7), (0.1, 3)])
def test_row_layout_kind_is_layout_kind_from_the_row_pointers(density, seed):
    # (the automatic choice of a model's device layout reads only its rows)
    _, csr = _random(300, density, seed)
    for device in ("cpu", "gpu"):
        assert row_layout_kind(csr.indptr, device) == layout_kind(csr, device)
    fan = np.concatenate([[0, 5000], 5000 + np.arange(1, 300)])  # one long row
    assert row_layout_kind(fan, "gpu") == "csr"
