"""Pallas (Triton) multi-vector kernel: `Y = A X` for `X` of shape `[n, k]`,
one pass over the matrix for all `k` columns, with the fused solver
epilogues of `spmv_pallas` and a per-column convergence measure.

Layouts: the full-warp segment layouts (`WarpELL` and `CompactWarpELL` with
`lanes=1`, rows in their stored order). One program handles one block of
`block_rows` rows as an `(R, K)` tile, `K` = `k` rounded up to a power of
two (Triton's tensor dimensions are powers of two; the extra columns are
masked and cost no memory traffic). At step `j` the block reads each row's
stored entry `j` once (32 consecutive entries per segment: coalesced, as in
the single-vector kernel), gathers the row `X[col, :]` and adds
`value * X[col, :]` into the row's `k` accumulators.

Why `[n, k]` row-major (the `k` values of one state contiguous): the gather
is the expensive access of SpMV. Row-major, one non-zero fetches `8 k`
contiguous bytes, i.e. `ceil(8 k / 32)` memory sectors (one sector up to
`k = 4` in f64, `k = 8` in f32), where the column-major `[k, n]` would fetch
`k` separate sectors per non-zero, each of them 1/4 used: the gather traffic
of `k` single-vector SpMVs. Row-major, the gather cost per vector falls as
`k` grows, and the matrix (the bulk of the bytes at small `k`) is read once
instead of `k` times. The output and the epilogue's row-wise reads of `X`,
`b` and `inv` are contiguous `[R, k]` tiles.

Epilogues as in `spmv_pallas.fused` (`"spmv"`, `"power"`, `"jacobi"`);
`b`/`inv` may be `None` (`b` only: zero, not read), `[n]` arrays or
`CompactVector`s (shared by all columns), or `[n, k]` arrays (one per
column). With `diff=True` each program also writes, per column, its largest
`|y - x|` (relative: `/ |y|`) and whether a row of the column is
non-finite; one small XLA reduction over the blocks gives the `[k]`
measures. `k` is part of the shapes, so each `k` (and dtype, epilogue, ...)
compiles once and new values never retrace.
"""

from __future__ import annotations

import functools as ft

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from ..layout.compact import CompactVector
from ..layout.warp import WARP, CompactWarpELL
from .impl import multi_supported as supported
from .pallas_ops import change, compiler_params, load, pow2, store


def _vec_kind(v, n, k):
    if v is None:
        return None
    if isinstance(v, CompactVector):
        return "compact"
    if v.ndim == 1:
        return "shared"
    if v.shape != (n, k):
        raise ValueError(
            f"`b`/`inv` must have shape ({n},) or ({n}, {k}), not {v.shape}"
        )
    return "columns"


#: Default settings (`num_warps` None: 4 up to k = 4, else 8; `by_k`: the
#: settings from `min_k` columns on, the largest `min_k` that applies).
#: Tuned on tandem c=2047 f64 (the "Multi-vector SpMV" benchmark): for the
#: full warp, 4 warps and 64 rows per program are fastest at k = 16 and 4
#: warps and 128 rows at k = 8 (8 warps and whole layout blocks are
#: slower); at k = 4 every setting is within a few percent. Compact: 2
#: warps and 64 rows per program at k = 8, 4 warps and 64 rows at k = 16.
TUNING = {
    "WarpELL": dict(
        num_warps=None,
        num_stages=2,
        evict=True,
        gate=True,
        load2d=False,
        by_k=(
            dict(min_k=16, num_warps=4, rows_per_program=64),
            dict(min_k=8, num_warps=4, rows_per_program=128),
        ),
    ),
    "CompactWarpELL": dict(
        num_warps=None,
        num_stages=1,
        evict=False,
        gate=True,
        load2d=False,
        by_k=(
            dict(min_k=16, num_warps=4, rows_per_program=64),
            dict(min_k=8, num_warps=2, rows_per_program=64),
        ),
    ),
}


def _by_k(tune: dict, K: int) -> dict | None:
    """The `by_k` settings for `K` columns (None: the defaults)."""
    for row in tune.get("by_k", ()):
        if K >= row["min_k"]:
            return row
    return None


@ft.partial(
    jax.jit,
    static_argnames=(
        "epilogue",
        "relative",
        "diff",
        "interpret",
        "num_warps",
        "num_stages",
        "evict",
        "gate",
        "load2d",
        "rows_per_program",
    ),
)
def fused_multi(
    matrix,
    x,
    b=None,
    inv=None,
    *,
    epilogue="spmv",
    relative=True,
    diff=False,
    interpret=False,
    num_warps=None,
    num_stages=None,
    evict=None,
    gate=None,
    load2d=None,
    rows_per_program=None,
):
    """Run the kernel on `x` of shape `[n, k]`: returns `y` (`[n, k]`), or
    `(y, dmax, nonfinite)` with `diff` (both `[k]`; `dmax[j]` NaN and
    `nonfinite[j]` nonzero where column `j` of `y` has a NaN or infinite
    entry). Values are computed in the matrix's dtype. Knobs as in
    `spmv_pallas.fused` (`None` takes `TUNING[layout class]`), and
    `load2d`: load each stored entry in the `(R, K)` tile's own layout (the
    `K` threads of a row load the same address, merged into one access)
    instead of loading an `(R,)` vector and broadcasting it, which Triton
    may route through shared memory; and `rows_per_program`: split each
    layout block into programs of this many rows (a power of two, a
    multiple of 32 dividing `block_rows`; default: the whole block), so
    that a large `k` keeps the tile per thread small (an `(R, K)` tile of
    f64 accumulators, gathered values and addresses lives in registers)."""
    if not supported(matrix):
        raise TypeError(
            "the multi-vector Pallas kernel handles full-warp "
            "`WarpELL`/`CompactWarpELL` "
            "layouts (lanes=1, sort_rows=False); use impl='reference'"
        )
    if x.ndim != 2:
        raise ValueError(f"`x` must have shape [n, k], not {x.shape}")
    compact = isinstance(matrix, CompactWarpELL)
    dtype = matrix.table.dtype if compact else matrix.data.dtype
    n, ncols = matrix.shape
    k = int(x.shape[1])
    if x.shape[0] != ncols:
        raise ValueError(f"`x` has {x.shape[0]} rows; the matrix has {ncols} columns")
    if diff and n != ncols:
        raise ValueError("`diff=True` needs a square matrix")
    if epilogue == "jacobi" and inv is None:
        raise ValueError("the Jacobi epilogue needs `inv`")
    tune = TUNING[type(matrix).__name__]
    K = pow2(k)
    wide = _by_k(tune, K)
    if wide:
        num_warps = num_warps or wide["num_warps"]
        if (
            rows_per_program is None
            and matrix.block_rows % wide["rows_per_program"] == 0
        ):
            rows_per_program = wide["rows_per_program"]
    num_warps = num_warps or tune["num_warps"] or (4 if K <= 4 else 8)
    num_stages = num_stages or tune["num_stages"]
    evict = tune["evict"] if evict is None else evict
    gate = tune["gate"] if gate is None else gate
    load2d = tune["load2d"] if load2d is None else load2d
    R = rows_per_program or matrix.block_rows
    if R % WARP or R & (R - 1) or matrix.block_rows % R:
        raise ValueError(
            f"`rows_per_program` must be a power of two, a multiple of {WARP} and "
            f"divide the layout's block_rows ({matrix.block_rows}), not {R}"
        )
    nsub = matrix.block_rows // R  # programs per layout block
    nsegs = R // WARP  # segments per program
    nblocks = int(matrix.block_width.shape[0]) * nsub  # programs
    zero = matrix.zero if compact else 0
    ev_m = "evict_first" if (evict and not interpret) else None
    ev_x = "evict_last" if (evict and not interpret) else None
    bkind, ikind = _vec_kind(b, n, k), _vec_kind(inv, n, k)

    ins = [matrix.seg_ptr, matrix.seg_width, matrix.block_width]
    ins += (
        [matrix.table, matrix.vidx, matrix.offs]
        if compact
        else [matrix.data, matrix.cols]
    )
    ins.append(x.astype(dtype).reshape(-1))  # row-major: X[c, :] contiguous
    for v, kind in ((b, bkind), (inv, ikind)):
        if kind == "compact":
            ins += [v.table.astype(dtype), v.idx]
        elif kind == "shared":
            ins.append(v.astype(dtype))
        elif kind == "columns":
            ins.append(v.astype(dtype).reshape(-1))

    def kernel(*refs):
        it = iter(refs)
        seg_ptr_ref, seg_w_ref, blk_w_ref = next(it), next(it), next(it)
        if compact:
            tab_ref, vidx_ref, offs_ref = next(it), next(it), next(it)
        else:
            data_ref, cols_ref = next(it), next(it)
        x_ref = next(it)
        vecs = []
        for kind in (bkind, ikind):
            if kind == "compact":
                vecs.append((kind, next(it), next(it)))
            elif kind is not None:
                vecs.append((kind, next(it)))
            else:
                vecs.append(None)
        y_ref = next(it)
        if diff:
            dmax_ref, bad_ref = next(it), next(it)

        pid = pl.program_id(0).astype(jnp.int32)
        r = pid * R + jnp.arange(R, dtype=jnp.int32)
        valid = r < n
        seg = r // WARP
        base = seg_ptr_ref[seg] + r % WARP
        ws = seg_w_ref[seg]
        col = lax.broadcasted_iota(jnp.int32, (R, K), 1)
        cmask = col < k

        if load2d:
            r2 = jnp.broadcast_to(r[:, None], (R, K))
            base2 = jnp.broadcast_to(base[:, None], (R, K))
            ws2 = jnp.broadcast_to(ws[:, None], (R, K))

        def step(j, acc):
            if load2d:  # every (row, column) thread loads its row's entry
                m = (j < ws2) & cmask
                idx = jnp.where(m, base2 + j * WARP, 0)
                rr = r2
            else:
                m = j < ws
                idx = jnp.where(m, base + j * WARP, 0)
                rr = r
            if compact:
                v = tab_ref[load(vidx_ref, idx, m, zero, ev_m).astype(jnp.int32)]
                c = rr + load(offs_ref, idx, m, 0, ev_m).astype(jnp.int32)
            else:
                v = load(data_ref, idx, m, 0, ev_m)
                c = load(cols_ref, idx, m, 0, ev_m)
            g = m & (v != 0) if gate else m
            if not load2d:  # the gate on (R,), then broadcast
                g, v, c = g[:, None] & cmask, v[:, None], c[:, None]
            xi = jnp.where(g, c * k + col, 0)
            xv = load(x_ref, xi, g, 0, ev_x)
            prod = v * xv
            return acc + (prod if gate else jnp.where(v != 0, prod, 0))

        if nsub == 1:
            wb = blk_w_ref[pid]
        elif nsegs == 1:
            wb = seg_w_ref[pid]
        else:  # the program's widest segment
            wb = jnp.max(seg_w_ref[pid * nsegs + jnp.arange(nsegs, dtype=jnp.int32)])
        acc = lax.fori_loop(0, wb, step, jnp.zeros((R, K), dtype))

        ymask = valid[:, None] & cmask
        yidx = jnp.where(ymask, r[:, None] * k + col, 0)
        # Interpret mode stores masked lanes too (their old value), so
        # duplicate indices race: there each masked lane gets its own slot
        # past the end (sliced off below; on a GPU nothing is spare).
        sidx = (
            jnp.where(ymask, yidx, n * k + (r % R)[:, None] * K + col)
            if interpret
            else yidx
        )
        rc = jnp.where(valid, r, 0)

        def vec(spec):
            kind, ref = spec[0], spec[1]
            if kind == "compact":
                return spec[1][load(spec[2], rc, valid, 0).astype(jnp.int32)][:, None]
            if kind == "shared":
                return load(ref, rc, valid, 0)[:, None]
            return load(ref, yidx, ymask, 0)

        y = acc
        if epilogue in ("power", "jacobi") and vecs[0] is not None:
            y = y + vec(vecs[0])
        if epilogue == "jacobi":
            y = y * vec(vecs[1])
        store(y_ref, sidx, y, ymask)
        if diff:
            d, bad = change(y, load(x_ref, yidx, ymask, 0), ymask, relative)
            # Per column: the block's largest measure and non-finite flag.
            out = pid * K + jnp.arange(K, dtype=jnp.int32)
            store(dmax_ref, out, jnp.max(d, axis=0).astype(dtype), None)
            store(bad_ref, out, jnp.max(bad.astype(jnp.int32), axis=0), None)

    spare = R * K if interpret else 0
    out_shape = [jax.ShapeDtypeStruct((n * k + spare,), dtype)]
    if diff:
        out_shape += [
            jax.ShapeDtypeStruct((nblocks * K,), dtype),
            jax.ShapeDtypeStruct((nblocks * K,), jnp.int32),
        ]
    kw = {}
    params = compiler_params(num_warps, num_stages)
    if params is not None and not interpret:
        kw["compiler_params"] = params
    outs = pl.pallas_call(
        kernel,
        out_shape=out_shape,
        grid=(nblocks,),
        interpret=interpret,
        name=f"jaxmc_{type(matrix).__name__}_multi_{epilogue}",
        **kw,
    )(*ins)
    y = (outs[0][: n * k] if spare else outs[0]).reshape(n, k)
    if not diff:
        return y
    dm = outs[1].reshape(nblocks, K)[:, :k]
    nb = jnp.max(outs[2].reshape(nblocks, K)[:, :k], axis=0, initial=0)
    dmax = jnp.where(nb > 0, jnp.nan, jnp.max(dm, axis=0, initial=0.0))
    return y, dmax, nb
