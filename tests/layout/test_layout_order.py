"""The windowed length order (`jaxmc.layout.window_order`) and its automatic
use: a permutation that keeps rows within their window, sorts them by length
(stable), removes most warp-segment padding, and leaves every product and
solve unchanged once undone (random stochastic matrices, the reference SpMV,
the Pallas kernel in interpret mode once, Jacobi, and `jaxmc.check` on
conformance models against CSR to 1e-12)."""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

import jaxmc
from jaxmc import solvers
from jaxmc.kernels import spmv
from jaxmc.layout import (
    CSR,
    CompactWarpELL,
    WarpELL,
    bandwidth,
    build as layout_build,
    choose_order,
    choose_ordered_layout,
    ordered_csr,
    padding,
    window_order,
)
from jaxmc.options import SolveOptions


MODELS = (
    Path(__file__).resolve().parents[2].parent / "shared" / "models" / "prism-examples"
)


def _random(n, seed, lengths=(1, 2, 3, 4, 5, 6), band=None):
    """A row-stochastic matrix whose row lengths are drawn from `lengths`
    (so the segments carry padding), columns within `band` of the row."""
    rng = np.random.default_rng(seed)
    rows, cols = [], []
    for r in range(n):
        k = int(rng.choice(lengths))
        lo, hi = (0, n) if band is None else (max(0, r - band), min(n, r + band + 1))
        c = rng.choice(np.arange(lo, hi), size=min(k, hi - lo), replace=False)
        rows += [r] * len(c)
        cols += list(c)
    # small integer weights: few distinct probabilities (the compact table)
    A = sp.csr_matrix(
        (rng.integers(1, 4, len(rows)).astype(float), (rows, cols)), shape=(n, n)
    )
    A = sp.diags(1.0 / np.asarray(A.sum(axis=1)).ravel()) @ A
    A = A.tocsr()
    A.sort_indices()
    return A


def _csr(A):
    return CSR.from_arrays(A.indptr, A.indices, A.data, A.shape)


@pytest.mark.parametrize("window", [32, 64, 1000])
def test_window_order_sorts_within_windows_stably(window):
    A = _random(2500, 0)
    order = window_order(_csr(A), window).order
    n = A.shape[0]
    assert np.array_equal(np.sort(order), np.arange(n))
    # every row stays in its window
    assert np.array_equal(order // window, np.arange(n) // window)
    lengths = np.diff(A.indptr)[order]
    for w in range(0, n, window):
        seg = lengths[w : w + window]
        assert np.all(np.diff(seg) <= 0)  # longest first
        o = order[w : w + window]
        for k in np.unique(seg):  # equal lengths keep their order
            assert np.all(np.diff(o[seg == k]) > 0)
    with pytest.raises(ValueError):
        window_order(_csr(A), 0)


def test_padding_falls_and_bandwidth_grows_by_less_than_two_windows():
    A = _random(4096, 1, band=40)
    csr = _csr(A)
    perm = window_order(csr, 256)
    B = perm.csr(csr)
    assert padding(csr) > 0.3
    # at most (distinct lengths - 1) mixed segments per window
    assert padding(B) < 0.1
    assert padding(window_order(csr, 1024).csr(csr)) < 0.03
    # stored entries agree with scipy's reordering
    ref = A[perm.order][:, perm.order].toarray()
    got = sp.csr_matrix(
        (np.asarray(B.data), np.asarray(B.indices), np.asarray(B.indptr)), shape=B.shape
    ).toarray()
    np.testing.assert_array_equal(got, ref)
    assert bandwidth(B) < bandwidth(csr) + 2 * 256
    # the layout stores what `padding` counts (plus its one spare warp)
    st = WarpELL.from_csr(B).stats()
    assert (st["stored"] - 32) / st["nnz"] - 1 == pytest.approx(padding(B))


def test_choose_order_only_when_it_pays(monkeypatch):
    csr = _csr(_random(3000, 2))
    assert padding(csr) > layout_build.ORDER_MIN_PADDING
    assert choose_order(csr, "warp") is not None
    assert choose_order(csr, "csr") is None and choose_order(csr, "vector") is None
    # equal row lengths: no padding, no reordering
    even = _csr(_random(3008, 3, lengths=(3,)))  # whole segments
    assert padding(even) == 0.0 and choose_order(even, "warp") is None
    B, order = ordered_csr(even, "compact")
    assert order is None and B is even
    # the threshold is read at call time
    monkeypatch.setattr(layout_build, "ORDER_MIN_PADDING", float("inf"))
    assert choose_order(csr, "warp") is None
    assert choose_order(csr, "warp", min_padding=0.0) is not None


def test_compact_keeps_its_offset_width():
    """A band just inside int16 that a window of 1024 would push past it:
    the compact layout keeps the given order, the warp layout reorders."""
    n = 40000
    A = _random(n, 4, lengths=(1, 2, 3, 4), band=2)
    A = A.tolil()
    # offset 32767 (int16's largest) from the window's last row, which is
    # now its longest row and moves to the window's start
    A[1023, 1023 + 32767] = 0.5
    A[1023, 1000:1010] = 0.5
    A = A.tocsr()
    A.sort_indices()
    csr = _csr(A)
    assert np.asarray(CompactWarpELL.from_csr(csr).offs).dtype == np.int16
    assert choose_order(csr, "compact", window=1024) is None
    assert choose_order(csr, "warp", window=1024) is not None


@pytest.mark.parametrize("kind", ["warp", "warp2", "compact"])
@pytest.mark.parametrize("seed", [0, 1])
def test_ordered_spmv_and_jacobi_match_csr(kind, seed):
    A = _random(3000, 10 + seed)
    csr = _csr(A)
    L, perm = choose_ordered_layout(csr, "gpu", kind=kind, fixed_values=True)
    assert perm is not None
    x = np.random.default_rng(seed).random(A.shape[0])
    y = perm.undo(np.asarray(spmv(L, jnp.asarray(perm.apply(x)), impl="reference")))
    np.testing.assert_allclose(y, A @ x, rtol=1e-13, atol=1e-15)
    # Jacobi on (2 I - A) x = b: same iterate sequence in either numbering
    b = np.random.default_rng(seed + 5).random(A.shape[0])
    diag = np.full(A.shape[0], 2.0)
    kw = dict(epsilon=1e-12, max_iters=500, throw=True)
    ref = solvers.jacobi(
        csr, jnp.asarray(diag), jnp.asarray(b), jnp.zeros_like(b), **kw
    )
    got = solvers.jacobi(
        L,
        jnp.asarray(perm.apply(diag)),
        jnp.asarray(perm.apply(b)),
        jnp.zeros_like(b),
        **kw,
    )
    np.testing.assert_allclose(
        perm.undo(np.asarray(got.value)), np.asarray(ref.value), rtol=1e-12
    )
    assert int(got.iterations) == int(ref.iterations)


def test_ordered_pallas_interpret_matches_scipy():
    A = _random(700, 7)
    L, perm = choose_ordered_layout(_csr(A), "gpu", kind="warp")
    assert perm is not None and padding(perm.csr(_csr(A))) < padding(_csr(A))
    x = np.random.default_rng(3).random(A.shape[0])
    y = perm.undo(np.asarray(spmv(L, jnp.asarray(perm.apply(x)), impl="pallas")))
    np.testing.assert_allclose(y, A @ x, rtol=1e-13, atol=1e-15)


def test_auto_rechooses_lanes_on_the_reordered_matrix():
    """Half warp where full-warp padding is high; after the order the full
    warp's padding is gone and auto takes it."""
    A = _random(4096, 8, lengths=(1, 2, 8, 9))
    csr = _csr(A)
    L, perm = choose_ordered_layout(csr, "gpu")
    assert perm is not None
    assert isinstance(L, WarpELL)
    assert L.stats()["padding"] < 0.05


# ---------------------------------------------------------------------------
# through the public API


def _model(fname, consts):
    path = MODELS / fname
    if not path.exists():
        pytest.skip(f"{path} not available")
    return jaxmc.load_model(str(path), consts)


CASES = [
    ("ctmcs/tandem/tandem.sm", "c=15", ["S=? [ sm=c ]", 'R{"customers"}=? [ S ]']),
    ("ctmcs/kanban/kanban.sm", "t=1", ["S=? [ w1=0 & z4=1 ]"]),
    ("ctmcs/cluster/cluster.sm", "N=2", ['S=? [ "premium" ]']),
]


@pytest.mark.parametrize(
    "layout", ["warp", pytest.param("compact", marks=pytest.mark.slow)]
)
@pytest.mark.parametrize(
    "fname,consts,props", CASES, ids=[c[0].split("/")[1] for c in CASES]
)
def test_check_with_the_order_matches_csr(monkeypatch, fname, consts, props, layout):
    import jaxmc.numerics.matrices as common

    # these small models pad less than the default threshold
    monkeypatch.setattr(layout_build, "ORDER_MIN_PADDING", 0.05)
    used = []
    real = common.ordered_csr

    def spy(csr, kind, **kw):
        B, order = real(csr, kind, **kw)
        used.append(order is not None)
        return B, order

    monkeypatch.setattr(common, "ordered_csr", spy)
    m = _model(fname, consts)
    for p in props:
        # (both certified within epsilon, or float64's floor for a tiny
        # value: the host's LU and the device's Krylov solve stop at
        # different points inside their bounds)
        ref = jaxmc.check(m, p, layout="csr", epsilon=1e-11)
        got = jaxmc.check(m, p, layout=layout, epsilon=1e-11)
        assert abs(got.value - ref.value) <= got.bound + ref.bound, p
        assert got.value == pytest.approx(ref.value, rel=1e-7), p
    if layout == "warp":  # (compact: int8 offsets would widen on these small models)
        assert any(used), "the windowed order was never chosen"


def test_jacobi_steady_state_with_the_order(monkeypatch):
    """The Jacobi fallback of the steady-state solve (the device Krylov
    solve forced to fail) on the reordered system: PRISM's criterion, same
    iteration count as on CSR, values agree to the tolerance."""
    import jaxmc.numerics.steady as steady

    m = jaxmc.build(_model("ctmcs/tandem/tandem.sm", "c=15"))
    monkeypatch.setattr(layout_build, "ORDER_MIN_PADDING", 0.05)
    calls = []
    real = steady.build_ordered

    def spy(*a, **kw):
        mat, order = real(*a, **kw)
        calls.append(order is not None)
        return mat, order

    monkeypatch.setattr(steady, "build_ordered", spy)
    monkeypatch.setattr(
        steady,
        "_stationary_linear",
        lambda *a, **k: (None, dict(method="none", layout="none")),
    )
    kw = dict(epsilon=1e-10, max_iters=100000)
    ref = steady.stationary_distributions(
        m, device=True, options=SolveOptions(layout="csr", **kw)
    )[3]
    got = steady.stationary_distributions(
        m, device=True, options=SolveOptions(layout="warp", **kw)
    )[3]
    assert calls == [False, True]
    assert got.method == ref.method == "jacobi"
    assert got.iterations == ref.iterations
    np.testing.assert_allclose(got.values, ref.values, rtol=1e-12, atol=1e-15)
