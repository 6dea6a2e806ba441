"""The device builders of the warp-segment layouts (`jaxmc.layout.device_warp`)
against the host builders: the same arrays, dtypes and static fields, bit for
bit, on random matrices (empty rows, long rows, few and many distinct
values, wide and narrow bands, rows not a multiple of a segment) and on the
transition matrices of example models."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

import jaxmc
from jaxmc.layout import CSR, CompactWarpELL, VectorCSR, WarpELL, layout_kind
from jaxmc.layout.device_vector import vector_from_device
from jaxmc.layout.device_warp import (
    compact_from_device,
    device_layout_kind,
    long_rows,
    warp_from_device,
    warp_stats,
)


jax.config.update("jax_enable_x64", True)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "models"
SHARED = ROOT / ".." / "shared" / "models" / "prism-examples"

WARP_FIELDS = ("data", "cols", "rows", "slot", "seg_ptr", "seg_width", "block_width")
COMPACT_FIELDS = (
    "table",
    "vidx",
    "offs",
    "rows",
    "seg_ptr",
    "seg_width",
    "block_width",
)
STATIC = ("shape", "lanes", "segs_per_block", "nnz")


def _same(host, dev, fields):
    for f in fields:
        a, b = np.asarray(getattr(host, f)), np.asarray(getattr(dev, f))
        assert a.dtype == b.dtype, (f, a.dtype, b.dtype)
        assert a.shape == b.shape, (f, a.shape, b.shape)
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), f
    for f in STATIC:
        assert getattr(host, f) == getattr(dev, f), f
    assert dev.lane_info is None and host.lane_info is None


VECTOR_FIELDS = ("data", "cols", "rows", "slot", "row_ptr", "block_width")


def _same_vector(csr, **kw):
    host = VectorCSR.from_csr(csr, **kw)
    dev = vector_from_device(csr.indptr, csr.indices, csr.data, csr.shape, **kw)
    for f in VECTOR_FIELDS:
        a, b = np.asarray(getattr(host, f)), np.asarray(getattr(dev, f))
        assert a.dtype == b.dtype and a.shape == b.shape, f
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), f
    for f in ("shape", "lanes", "rows_per_block", "nnz"):
        assert getattr(host, f) == getattr(dev, f), f


def _random(seed: int, n: int, m: int | None = None, distinct: int | None = None):
    rng = np.random.default_rng(seed)
    m = n if m is None else m
    lengths = rng.choice(
        [0, 1, 2, 3, 5, 9, 40], size=n, p=[0.1, 0.3, 0.2, 0.2, 0.1, 0.07, 0.03]
    )
    lengths = np.minimum(lengths, m)
    band = int(rng.choice([3, 200, m]))
    rows, cols = [], []
    for r, k in enumerate(lengths):
        lo = min(max(0, r - band), m - 1)
        hi = min(m, max(r + band + 1, lo + 1))
        k = min(k, hi - lo)
        rows.append(np.full(k, r))
        cols.append(np.sort(rng.choice(np.arange(lo, hi), size=k, replace=False)))
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    if distinct is None:
        vals = rng.random(len(rows))
    else:
        vals = rng.choice(rng.random(distinct) - 0.3, size=len(rows))
    A = sp.csr_matrix((vals, (rows, cols)), shape=(n, m))
    A.sort_indices()
    return A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data, (n, m)


def _check(indptr, cols, vals, shape, lanes):
    csr = CSR.from_arrays(indptr, cols, vals, shape)
    host = WarpELL.from_csr(csr, lanes=lanes)
    dev = warp_from_device(csr.indptr, csr.indices, csr.data, shape, lanes=lanes)
    _same(host, dev, WARP_FIELDS)
    if lanes == 1:
        _same_vector(csr)
    for fixed in (False, True):
        got = device_layout_kind(
            csr.indptr, csr.indices, csr.data, shape, fixed_values=fixed
        )
        assert got == layout_kind(csr, "gpu", fixed_values=fixed)
    if shape[0] != shape[1]:
        with pytest.raises(ValueError):
            compact_from_device(csr.indptr, csr.indices, csr.data, shape, lanes)
        return
    try:
        host_c = CompactWarpELL.from_csr(csr, lanes=lanes)
    except ValueError:
        with pytest.raises(ValueError):
            compact_from_device(csr.indptr, csr.indices, csr.data, shape, lanes)
        return
    dev_c = compact_from_device(csr.indptr, csr.indices, csr.data, shape, lanes)
    _same(host_c, dev_c, COMPACT_FIELDS)
    assert host_c.zero == dev_c.zero


@pytest.mark.parametrize("lanes", [1, 2])
@pytest.mark.parametrize(
    "seed,n,m,distinct",
    [
        (0, 1, None, 3),
        (1, 31, None, 4),
        (3, 1000, None, None),
        (4, 1500, 700, 5),
        (6, 517, None, 70000),
    ],
)
def test_device_warp_layouts_match_the_host_builders(seed, n, m, distinct, lanes):
    _check(*_random(seed, n, m, distinct), lanes)


def test_long_rows_vector_layout_and_choice():
    """Rows of ~100 entries: the vector layout (several lane counts) and
    `layout_kind`'s choice of it."""
    rng = np.random.default_rng(5)
    n = 300
    A = sp.random(n, n, density=0.33, random_state=rng, format="csr")
    A.sort_indices()
    csr = CSR.from_arrays(A.indptr, A.indices, A.data, A.shape)
    for kw in ({}, {"lanes": 32}, {"lanes": 256, "align": 4}):
        _same_vector(csr, **kw)
    assert device_layout_kind(csr.indptr, csr.indices, csr.data, A.shape) == "vector"


def test_empty_and_degenerate_matrices():
    for lanes in (1, 2):
        _check(np.zeros(6, np.int64), np.zeros(0, np.int64), np.zeros(0), (5, 5), lanes)
        _check(np.array([0, 1]), np.array([0]), np.array([0.5]), (1, 1), lanes)


def test_stats_pass_reports_the_stored_size():
    indptr, cols, vals, shape = _random(9, 700)
    total = warp_stats(jnp.asarray(indptr), jnp.asarray(cols), jnp.asarray(vals))[0]
    host = WarpELL.from_csr(CSR.from_arrays(indptr, cols, vals, shape))
    assert total == host.data.shape[0]


MODELS = [
    (EXAMPLES / "die.pm", None),
    (EXAMPLES / "robot.nm", None),
    (SHARED / "mdps" / "consensus" / "coin2.nm", "K=2"),
    (SHARED / "ctmcs" / "tandem" / "tandem.sm", "c=15"),
]


@pytest.mark.parametrize("path,consts", MODELS, ids=lambda p: getattr(p, "name", p))
def test_device_layouts_match_on_model_matrices(path, consts):
    if not path.exists():
        pytest.skip(f"{path} not present")
    em = jaxmc.build(jaxmc.load_model(str(path), consts))
    shape = (em.num_choices, em.num_states)
    for lanes in (1, 2):
        _check(em.row_ptr, em.col, em.val, shape, lanes)


@pytest.mark.parametrize("kind", ["warp", "warp2", "compact", "compact2", "vector"])
def test_build_layout_on_the_device_is_the_host_layout(kind, monkeypatch):
    from jaxmc.layout import build as build_mod
    from jaxmc.numerics import matrices

    indptr, cols, vals, shape = _random(12, 400, distinct=6)
    monkeypatch.setattr(build_mod, "DEVICE_BUILD", "off")
    assert not build_mod.device_build()
    want = matrices.build_matrix(indptr, cols, vals, shape, kind)
    monkeypatch.setattr(build_mod, "DEVICE_BUILD", "on")
    got = matrices.build_matrix(indptr, cols, vals, shape, kind)
    assert type(got) is type(want)
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    M = matrices.sparse_model(
        np.arange(401), indptr, cols, vals, nondeterministic=False, kind=kind
    )
    if kind.startswith("warp"):  # (compact: built per solve, from values)
        _same(want, M.matrix, WARP_FIELDS)
    if kind == "vector":
        for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(M.matrix)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _tridiagonal(n):
    A = sp.diags(
        [np.full(n - 1, 0.25), np.full(n, 0.5), np.full(n - 1, 0.25)], [-1, 0, 1]
    )
    A = A.tocsr()
    A.sort_indices()
    return A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data, (n, n)


def test_matrices_of_similar_size_share_one_compilation():
    from jaxmc.layout import device_warp

    for lanes in (1, 2):
        _check(*_tridiagonal(1000), lanes)
        before = device_warp._warp_arrays._cache_size()
        compact_before = device_warp._compact_arrays._cache_size()
        _check(*_tridiagonal(1003), lanes)
        assert device_warp._warp_arrays._cache_size() == before
        assert device_warp._compact_arrays._cache_size() == compact_before


def _uneven(seed, n=2000):
    """Rows of very mixed lengths within every segment, in a band: the
    warp layouts pad much, and `window_order` removes most of it."""
    rng = np.random.default_rng(seed)
    lengths = rng.choice([1, 2, 12], size=n, p=[0.5, 0.3, 0.2])
    rows, cols = [], []
    for r, k in enumerate(lengths):
        lo, hi = max(0, r - 40), min(n, r + 41)
        rows.append(np.full(k, r))
        cols.append(np.sort(rng.choice(np.arange(lo, hi), size=k, replace=False)))
    vals = rng.choice([0.25, 0.5, 1.0], size=int(lengths.sum()))
    A = sp.csr_matrix((vals, (np.concatenate(rows), np.concatenate(cols))), (n, n))
    A.sort_indices()
    return A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data, (n, n)


def test_window_order_and_permutation_on_the_device():
    from jaxmc.layout import window_order
    from jaxmc.layout.device_order import window_permuted

    for seed, window in ((0, 1024), (1, 64), (2, 7)):
        indptr, cols, vals, shape = _uneven(seed)
        csr = CSR.from_arrays(indptr, cols, vals, shape)
        perm = window_order(csr, window)
        want = perm.csr(csr, host=True)
        got_perm, got = window_permuted(csr, window)
        np.testing.assert_array_equal(got_perm.order, perm.order)
        assert got_perm.order.dtype == perm.order.dtype
        for f in ("indptr", "indices", "data", "row_ids"):
            a, b = np.asarray(getattr(want, f)), np.asarray(getattr(got, f))
            assert a.dtype == b.dtype, f
            np.testing.assert_array_equal(a, b, err_msg=f)


@pytest.mark.parametrize("kind", ["warp", "warp2", "compact"])
def test_ordered_build_on_the_device_is_the_host_build(kind, monkeypatch):
    from jaxmc.layout import build as build_mod
    from jaxmc.numerics import matrices

    indptr, cols, vals, shape = _uneven(3)
    out = {}
    for mode in ("off", "on"):
        monkeypatch.setattr(build_mod, "DEVICE_BUILD", mode)
        out[mode] = matrices.build_ordered(indptr, cols, vals, shape, kind)
    (want, want_order), (got, got_order) = out["off"], out["on"]
    # warp: reordering pays on this matrix; compact: it would widen the
    # column offsets (int8 -> int16), so the order is kept
    assert (want_order is None) == (kind == "compact")
    assert (got_order is None) == (want_order is None)
    if want_order is not None:
        np.testing.assert_array_equal(want_order.order, got_order.order)
    assert type(want) is type(got)
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_auto_builds_large_matrices_on_a_gpu_only(monkeypatch):
    from jaxmc.layout import build as build_mod

    monkeypatch.setattr(build_mod, "DEVICE_BUILD", "auto")
    monkeypatch.setattr(build_mod.jax, "default_backend", lambda: "gpu")
    assert not build_mod.device_build(build_mod.DEVICE_MIN_NNZ - 1)
    assert build_mod.device_build(build_mod.DEVICE_MIN_NNZ)
    monkeypatch.setattr(build_mod.jax, "default_backend", lambda: "cpu")
    assert not build_mod.device_build(build_mod.DEVICE_MIN_NNZ)


def test_one_row_far_longer_than_the_rest_picks_csr():
    """leader_sync's shape: an initial state with K^N successors beside rows
    of one entry. A warp (or vector) layout walks that row with one thread
    (warp) per SpMV; CSR's segment sum does not (`layout.build.long_rows`)."""
    n, fan = 20_000, 5_000
    rows = np.concatenate([np.zeros(fan, np.int64), np.arange(1, n)])
    cols = np.concatenate([np.arange(1, fan + 1), np.arange(1, n) - 1])
    A = sp.csr_matrix((np.full(len(rows), 0.5), (rows, cols)), shape=(n, n))
    A.sort_indices()
    csr = CSR.from_arrays(A.indptr, A.indices, A.data, A.shape)
    for fixed in (False, True):
        assert layout_kind(csr, "gpu", fixed_values=fixed) == "csr"
        got = device_layout_kind(
            csr.indptr, csr.indices, csr.data, A.shape, fixed_values=fixed
        )
        assert got == "csr"
    # a row as long, but in a matrix of rows nearly as long: not the case
    assert not long_rows(fan, 200.0)
    assert long_rows(fan, 1.5)
    # the CPU's choice is CSR whatever the rows
    assert layout_kind(csr, "cpu") == "csr"


def test_warp_past_int32_offsets_is_an_error(monkeypatch):
    """A warp-segment matrix of more stored entries than its int32 offsets
    hold is refused with a hint (host and device builders alike), instead of
    wrapping around; the partition's slots widen past 2**31 entries."""
    import scipy.sparse as sp

    from jaxmc.errors import UnsupportedError
    from jaxmc.layout import CSR, warp
    from jaxmc.layout.device_warp import warp_from_device
    from jaxmc.layout.partition_rows import slot_type

    A = sp.csr_matrix(sp.random(300, 300, 0.05, random_state=0))
    csr = CSR.from_arrays(A.indptr, A.indices, A.data, A.shape)
    warp.WarpELL.from_csr(csr)  # fits
    monkeypatch.setattr(warp, "MAX_STORED", A.nnz)  # fewer than it stores
    with pytest.raises(UnsupportedError, match="int32 offsets") as e:
        warp.WarpELL.from_csr(csr)
    assert "devices" in e.value.hint
    with pytest.raises(UnsupportedError, match="int32 offsets"):
        warp_from_device(A.indptr, A.indices, A.data, A.shape)
    assert slot_type(2**31 - 3) == np.int32 and slot_type(2**31) == np.int64
