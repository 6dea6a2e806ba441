"""Pallas (Triton) kernel for the compact diagonal layout
(`jaxmc.layout.CompactDIA`), with the fused solver epilogues of
`spmv_pallas.fused` (`"spmv"`, `"power"`, `"jacobi"`, and `diff=True` for
the per-block convergence measure).

One program handles `block_rows` consecutive rows `i`. For each diagonal
`d` (static) it loads the value indices `vidx[d, i]` (contiguous bytes),
looks the values up in the small table, and loads `x[i + offsets[d]]`: a
contiguous, coalesced run, not a gather; most of it is still in L2 from the
neighbouring diagonals and blocks. Blocks whose every `i + offsets[d]`
lies inside the matrix (all but a few at the two ends) read with unmasked
contiguous slices (`tile`); the others with masked index loads.

Why: with no column indices stored and no gather, a step moves the value
indices (1 byte per row and diagonal), `x` about once, `y`, and the
epilogue's vectors: for tandem c=2047 ~190 MB against ~240 MB for the
compact warp layout, whose kernel is latency-bound on its gathers.
"""

from __future__ import annotations

import functools as ft

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from ..layout.dia import CompactDIA
from .pallas_ops import change, compiler_params, load, lookup, store, vec_spec


#: Kernel defaults (read at trace time): warps per program, software
#: pipelining stages, the unmasked interior path (`tile`), and alignment
#: hints (`align`: a program's rows start at a multiple of 16), and `skip`:
#: a program skips the diagonals its rows have no entry on (`active`).
TUNING = dict(num_warps=4, num_stages=1, tile=True, align=True, skip=True)


@ft.partial(
    jax.jit,
    static_argnames=(
        "epilogue",
        "relative",
        "diff",
        "interpret",
        "num_warps",
        "num_stages",
        "tile",
        "align",
        "skip",
    ),
)
def fused_dia(
    matrix: CompactDIA,
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
    tile=None,
    align=None,
    skip=None,
):
    """`spmv_pallas.fused` for a `CompactDIA`: returns `y`, or `(y, dmax,
    nonfinite)` with `diff` (same meaning)."""
    dtype = matrix.table.dtype
    n = matrix.shape[0]
    R = matrix.block_rows
    nblocks = -(-n // R)
    offsets = matrix.offsets
    lo_off = min(offsets + (0,))
    hi_off = max(offsets + (0,))
    num_warps = num_warps or TUNING["num_warps"]
    num_stages = num_stages or TUNING["num_stages"]
    tile = TUNING["tile"] if tile is None else tile
    align = TUNING["align"] if align is None else align
    skip = TUNING["skip"] if skip is None else skip
    D = len(offsets)
    if epilogue == "jacobi" and inv is None:
        raise ValueError("the Jacobi epilogue needs `inv`")
    x = x.astype(dtype)
    bkind, ikind = vec_spec(b), vec_spec(inv)
    npad = int(matrix.vidx.shape[1])  # each diagonal's stored rows
    ins = [matrix.table, matrix.vidx.reshape(-1), matrix.active, x]
    for v, k in ((b, bkind), (inv, ikind)):
        if k == "compact":
            ins += [v.table.astype(dtype), v.idx]
        elif k == "dense":
            ins.append(v.astype(dtype))

    def kernel(*refs):
        it = iter(refs)
        tab_ref, vidx_ref, act_ref, x_ref = next(it), next(it), next(it), next(it)
        vecs = []
        for k in (bkind, ikind):
            if k == "compact":
                vecs.append((next(it), next(it)))
            elif k == "dense":
                vecs.append((next(it),))
            else:
                vecs.append(None)
        y_ref = next(it)
        dmax_ref = next(it) if diff else None

        pid = pl.program_id(0).astype(jnp.int32)
        start = pl.multiple_of(pid * R, 16) if align else pid * R
        r = start + jnp.arange(R, dtype=jnp.int32)
        valid = r < n

        def add(acc, d, term):
            """`acc + term()` for diagonal `d`, skipped where the block has
            no entry on it."""
            if not skip:
                return acc + term()
            return lax.cond(
                act_ref[pid * D + d] != 0, lambda a: a + term(), lambda a: a, acc
            )

        def masked():
            acc = jnp.zeros((R,), dtype)
            for d, o in enumerate(offsets):

                def term(d=d, o=o):
                    vi = load(vidx_ref, d * npad + r, None, None)  # (padded: in bounds)
                    v = lookup(tab_ref, vi.astype(jnp.int32), None)
                    c = r + o
                    m = valid & (c >= 0) & (c < n)
                    xv = load(x_ref, jnp.where(m, c, 0), m, 0)
                    return jnp.where(v != 0, v * xv, 0)

                acc = add(acc, d, term)
            return acc

        def interior():
            acc = jnp.zeros((R,), dtype)
            for d, o in enumerate(offsets):

                def term(d=d, o=o):
                    base = d * npad + start
                    vi = load(
                        vidx_ref,
                        pl.ds(pl.multiple_of(base, 16) if align else base, R),
                        None,
                        None,
                    )
                    v = lookup(tab_ref, vi.astype(jnp.int32), None)
                    xv = load(x_ref, pl.ds(start + o, R), None, None)
                    return jnp.where(v != 0, v * xv, 0)

                acc = add(acc, d, term)
            return acc

        if tile:
            inside = (start + lo_off >= 0) & (start + R + hi_off <= n)
            y = lax.cond(inside, interior, masked)
        else:
            y = masked()

        rows = pl.ds(start, R)

        def vec(spec):
            if len(spec) == 2:
                vi = load(spec[1], rows, valid, 0).astype(jnp.int32)
                return lookup(spec[0], vi, None)
            return load(spec[0], rows, valid, 0)

        if epilogue in ("power", "jacobi") and vecs[0] is not None:
            y = y + vec(vecs[0])
        if epilogue == "jacobi":
            y = y * vec(vecs[1])
        store(y_ref, rows, y, valid)
        if diff:
            xo = load(x_ref, rows, valid, 0)
            dd, bad = change(y, xo, valid, relative)
            nbad = jnp.max(bad.astype(jnp.int32))
            dmax_ref[pid] = jnp.where(nbad > 0, jnp.nan, jnp.max(dd)).astype(dtype)

    out_shape = [jax.ShapeDtypeStruct((n,), dtype)]
    if diff:
        out_shape.append(jax.ShapeDtypeStruct((nblocks,), dtype))
    kw = {}
    params = compiler_params(num_warps, num_stages)
    if params is not None and not interpret:
        kw["compiler_params"] = params
    outs = pl.pallas_call(
        kernel,
        out_shape=out_shape,
        grid=(nblocks,),
        interpret=interpret,
        name=f"jaxmc_CompactDIA_{epilogue}",
        **kw,
    )(*ins)
    if diff:
        y, dm = outs
        dmax = jnp.max(dm, initial=0.0)
        return y, dmax, jnp.isnan(dmax).astype(jnp.int32)
    return outs[0]
