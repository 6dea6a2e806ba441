"""Pallas (Triton) kernel: one colour block's SOR update of a batched
multicolour Gauss-Seidel sweep (`jaxmc.diff._linalg.gs_sweep`), in one
pass over the block, in place.

For the colour-sorted iterate `x` of shape `[n, k]` (batch last, row-major:
the `k` values of one state contiguous) and the block of rows `[lo, hi)`,

    acc_i = rp_i + sum_j x[cols[j, i], :] * weight_j(i) (+ extra_i)
    x_i  <- (1 - omega) x_i + omega acc_i            (omega `[k]`, or none)

where slot `j < w` of row `i` holds a column (or -1: padding) and its
weight is either `table[cls[j, i], :]` (a small `[C, k]` table gathered
by a class id per entry: a batched sweep then reads the shared indices,
the iterate and the table only) or `vals[j, i, :]` / `vals[j, i]`.
`extra` (`[n_c, k]`, optional) is added last: the block's scatter-added
overflow entries, summed by XLA.

Why a kernel: XLA fuses neither the row gathers `x[cols[j]]` nor the table
gather `table[cls]` into the update; it materialises an `[n_c, k]` array
per slot and blends in separate passes, ~20 passes over the iterate per
sweep where this kernel needs ~3 (gather the other colours' rows, read
`rp` and the block's rows, write them). One program handles an `(R, K)`
tile: `R` rows times `K` = `k` rounded up to a power of two (Triton's
tensor dimensions; the extra columns are masked and cost no traffic).
Each gathered row `x[col, :]` is `8 k` contiguous bytes.

In place (`input_output_aliases` on `x`) is safe only when the block reads
no row of its own colour other than each row's own (which the same program
reads before it writes): a proper colour block. The leftover colour of
`coloring` (entries within the colour, updated Jacobi-style) must not come
here; `gs_sweep` keeps the XLA path for it.

`MODE` (environment `JAXMC_SOR_KERNEL`, read at import; `gs_sweep` reads
the attribute at trace time, so set it before the first call of a jitted
function): `"auto"` (the kernel on a GPU backend, XLA elsewhere), `"off"`,
`"on"` (native, any backend), `"interpret"` (the kernel in Pallas'
interpret mode: CPU tests).
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from .spmv_pallas import _compiler_params, _load, _store


MODES = ("auto", "on", "off", "interpret")
MODE = os.environ.get("JAXMC_SOR_KERNEL", "auto")
if MODE not in MODES:
    raise ValueError(f"JAXMC_SOR_KERNEL must be one of {MODES}, not {MODE!r}")

#: Elements per `(R, K)` tile (`R = max(1, TILE // K)` rows) and warps per
#: program, unless given.
TILE = 2048
NUM_WARPS = 8
#: Slot counts up to this are unrolled (as the XLA path does); more run a
#: loop.
UNROLL = 16


def _pow2(k: int) -> int:
    return 1 << max(0, (k - 1).bit_length())


def active() -> str | None:
    """How `gs_sweep` runs eligible blocks now: `"native"`, `"interpret"`
    or None (the XLA path)."""
    mode = MODE
    if mode not in MODES:
        raise ValueError(f"`sor_multi_pallas.MODE` must be one of {MODES}, not {mode!r}")
    if mode == "off":
        return None
    if mode == "interpret":
        return "interpret"
    if mode == "on" or jax.default_backend() in ("gpu", "cuda", "rocm"):
        return "native"
    return None


def fits(n: int, k: int, w: int, n_c: int, dense: bool) -> bool:
    """Do the kernel's int32 flat indices fit?"""
    big = max(n * k, w * n_c * (k if dense else 1)) + TILE
    return big < 2**31


def block_update(
    x, cols, rp, omega=None, *, lo: int, hi: int, cls=None, table=None, vals=None,
    extra=None, interpret: bool = False, block_rows: int | None = None,
    num_warps: int | None = None,
):
    """Rows `[lo, hi)` of `x` (`[n, k]`) after one SOR block update (module
    docstring), all other rows unchanged; `x`'s buffer is updated in place
    where XLA can donate it.

    `cols` `[w, n_c]` int32 (column positions in `x`, -1 for padding);
    weights from `cls` `[w, n_c]` and `table` `[C, k]`, or from `vals`
    `[w, n_c, k]` or `[w, n_c]` (shared by the columns); `rp` `[n, k]` (rows
    `lo:hi` read); `omega` None (plain Gauss-Seidel), a scalar or `[k]`;
    `extra` None or `[n_c, k]`. Values in `x`'s dtype. `block_rows` (a power
    of two) and `num_warps` default from `TILE`/`NUM_WARPS`."""
    if x.ndim != 2:
        raise ValueError(f"`x` must have shape [n, k], not {x.shape}")
    n, k = (int(s) for s in x.shape)
    w, nc = (int(s) for s in cols.shape)
    if nc != hi - lo:
        raise ValueError(f"`cols` has {nc} rows; the block [{lo}, {hi}) has {hi - lo}")
    if (cls is None) == (vals is None) or (cls is None) != (table is None):
        raise ValueError("give either `cls` and `table`, or `vals`")
    dt = x.dtype
    K = _pow2(k)
    R = block_rows or max(1, TILE // K)
    if R & (R - 1):
        raise ValueError(f"`block_rows` must be a power of two, not {R}")
    wkind = "table" if cls is not None else ("dense" if vals.ndim == 3 else "shared")
    if not fits(n, k, w, nc, wkind == "dense"):
        raise ValueError("`x` or the values are too large for int32 indices")
    # Interpret mode stores masked lanes too (their current value), so
    # duplicate indices race: there every masked lane writes its own spare
    # slot past the end (sliced off below; on a GPU masked lanes write
    # nothing and there is no spare).
    spare = R * K if interpret else 0
    xf = x.reshape(-1)
    if spare:
        xf = jnp.concatenate([xf, jnp.zeros((spare,), dt)])
    ins = [xf, cols.astype(jnp.int32).reshape(-1), rp.astype(dt).reshape(-1)]
    if wkind == "table":
        ins += [cls.astype(jnp.int32).reshape(-1), table.astype(dt).reshape(-1)]
    else:
        ins.append(vals.astype(dt).reshape(-1))
    if omega is not None:
        ins.append(jnp.broadcast_to(jnp.asarray(omega, dt), (k,)))
    if extra is not None:
        ins.append(extra.astype(dt).reshape(-1))

    def kernel(*refs):
        it = iter(refs)
        x_ref, c_ref, rp_ref = next(it), next(it), next(it)
        if wkind == "table":
            cls_ref, tab_ref = next(it), next(it)
        else:
            val_ref = next(it)
        om_ref = next(it) if omega is not None else None
        ex_ref = next(it) if extra is not None else None
        o_ref = next(it)

        pid = pl.program_id(0).astype(jnp.int32)
        i = pid * R + jnp.arange(R, dtype=jnp.int32)  # rows within the block
        valid = i < nc
        ic = jnp.where(valid, i, 0)
        col = lax.broadcasted_iota(jnp.int32, (R, K), 1)
        m2 = valid[:, None] & (col < k)
        own = jnp.where(m2, (lo + ic)[:, None] * k + col, 0)

        def slot(j, acc):
            e = j * nc + ic
            c = _load(c_ref, e, valid, -1)
            real = valid & (c >= 0)
            g = real[:, None] & m2
            xv = _load(x_ref, jnp.where(g, c[:, None] * k + col, 0), g, 0)
            if wkind == "table":
                t = _load(cls_ref, e, real, 0)
                wt = _load(tab_ref, jnp.where(g, t[:, None] * k + col, 0), g, 0)
            elif wkind == "dense":
                wt = _load(val_ref, jnp.where(g, e[:, None] * k + col, 0), g, 0)
            else:
                wt = _load(val_ref, e, real, 0)[:, None]
            return acc + xv * wt

        acc = _load(rp_ref, own, m2, 0)
        if w <= UNROLL:
            for j in range(w):
                acc = slot(j, acc)
        else:
            acc = lax.fori_loop(0, w, slot, acc)
        if ex_ref is not None:
            acc = acc + _load(ex_ref, jnp.where(m2, ic[:, None] * k + col, 0), m2, 0)
        if om_ref is not None:
            cv = jnp.arange(K, dtype=jnp.int32)
            om = _load(om_ref, jnp.where(cv < k, cv, 0), cv < k, 0)[None, :]
            acc = (1.0 - om) * _load(x_ref, own, m2, 0) + om * acc
        sidx = jnp.where(m2, own, n * k + (jnp.arange(R, dtype=jnp.int32)[:, None] * K + col)) if spare else own
        _store(o_ref, sidx, acc, m2)

    kw = {}
    params = _compiler_params(num_warps or NUM_WARPS, 1)
    if params is not None and not interpret:
        kw["compiler_params"] = params
    out = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(xf.shape, dt), grid=(pl.cdiv(nc, R),),
        input_output_aliases={0: 0}, interpret=interpret, name=f"jaxmc_sor_block_{wkind}", **kw,
    )(*ins)
    return (out[: n * k] if spare else out).reshape(n, k)
