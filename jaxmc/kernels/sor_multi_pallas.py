"""Pallas (Triton) kernel: one colour block's SOR update of a batched
multicolour Gauss-Seidel sweep (`jaxmc.kernels.sweep.gs_sweep`), in one
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

Why a kernel: XLA does fuse each block's gathers into one fusion, but a
sweep still costs it ~4 passes over the iterate (the "Fused batched SOR
kernel" benchmark); this kernel needs ~2 (gather the other colours'
rows, read `rp` and the block's rows, write them). One program handles
an `(R, K)` tile: `R` rows times `K` = `k` rounded up to a power of two
(Triton's tensor dimensions; the extra columns are masked and cost no
traffic).
Each gathered row `x[col, :]` is `8 k` contiguous bytes.

Two more savings, both for `_sor`'s steps: a reachability's right-hand
side is zero but next to its target, so `rp` may come as its non-zero rows
only (`rp_rows`), and the second sweep of a step evaluates the solver's
stop rule on the values it writes (`check`: per-column flags, no extra
pass over the iterate). With both, a sweep of the `benchmarks/sweep.py`
walk at `k = 1024` reads the other colour's rows and the block's own and
writes the block, `3 x 8 n k` bytes in all, at about the device's copy
bandwidth.

Where the rows come from: a sweep writes a new buffer (`sweep`). Block
`c`'s call gathers the columns below its `lo` (blocks already updated in
this sweep) from the new buffer and all others (its own colour, later
colours) from the sweep's input, then writes its rows into the new buffer
in place (`input_output_aliases`; no race: it reads only rows it does not
write, or each row's own, which the same program reads first). This is
exactly the XLA path's order, so a leftover colour of `coloring` (entries
within the colour, updated Jacobi-style) is handled too, and the input
stays intact: `_sor` compares the two sweeps of a step, and an in-place
update of the input would cost XLA a full copy of it per step.

`jaxmc._config.SOR_KERNEL` (environment `JAXMC_SOR_KERNEL`, read at
import; `gs_sweep` reads it at trace time through `mode()`, so set it
before the first call of a jitted function): `"auto"` (the kernel on a GPU
backend for batches of `AUTO_MIN_K` or more columns, a power of two; XLA
elsewhere), `"off"`, `"on"` (native, any backend), `"interpret"` (the
kernel in Pallas' interpret mode: CPU tests).
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from .. import _config
from .pallas_ops import compiler_params, load, pow2, store


MODES = _config.SOR_KERNEL_MODES

#: Elements per `(R, K)` tile (`R = max(1, TILE // K)` rows) and warps per
#: program, unless given.
TILE = 1024
NUM_WARPS = 4
#: Slot counts up to this are unrolled (as the XLA path does); more run a
#: loop.
UNROLL = 16
#: Row tiles per program in a checking call (`block_update(check=...)`):
#: each program writes one `[K]` row of flags, so `[n / (R CHECK_TILES),
#: K]` in all.
CHECK_TILES = int(os.environ.get("JAXMC_SOR_CHECK_TILES", 2))
#: ... but no fewer programs than this per call (enough to fill the GPU).
CHECK_MIN_PROGRAMS = 4096
#: Warps per program of a checking call (8 measured fastest against 4 and
#: 12, with 1-2 tiles per program).
CHECK_NUM_WARPS = 8


#: `"auto"` takes the kernel for batches of these widths only: powers of
#: two from `AUTO_MIN_K` on. Measured (the "Fused batched SOR kernel"
#: benchmark): whole `jaxmc.sweep` runs faster with the kernel at k = 256
#: and k = 1024, but slower at k = 134 (the default chunk there, whose
#: `(R, 256)` tiles are half masked), not yet understood.
AUTO_MIN_K = 256


def mode() -> str:
    """The setting now: `jaxmc._config.SOR_KERNEL`, checked."""
    m = _config.SOR_KERNEL
    if m not in MODES:
        raise ValueError(
            f"`jaxmc._config.SOR_KERNEL` must be one of {MODES}, not {m!r}"
        )
    return m


def active(k: int | None = None) -> str | None:
    """How `gs_sweep` runs a sweep of `k` columns now: `"native"`,
    `"interpret"` or None (the XLA path)."""
    mode_ = mode()
    if mode_ == "off":
        return None
    if mode_ == "interpret":
        return "interpret"
    if mode_ == "on":
        return "native"
    if jax.default_backend() not in ("gpu", "cuda", "rocm"):
        return None
    if k is not None and (k < AUTO_MIN_K or k & (k - 1)):
        return None
    return "native"


def fits(n: int, k: int, w: int, n_c: int, dense: bool) -> bool:
    """Do the kernel's int32 flat indices fit?"""
    big = max(n * k, w * n_c * (k if dense else 1)) + TILE
    return big < 2**31


def block_update(
    old,
    cols,
    rp,
    omega=None,
    *,
    lo: int,
    hi: int,
    new=None,
    cls=None,
    table=None,
    vals=None,
    extra=None,
    check=None,
    rp_rows=None,
    interpret: bool = False,
    block_rows: int | None = None,
    num_warps: int | None = None,
):
    """One colour block `[lo, hi)` of a sweep: returns the flat buffer
    `new` (`[n k (+ spare)]`, see `sweep`) with the block's rows updated
    (module docstring), in place where XLA can donate it; `new` None: a
    fresh buffer holding only the block's rows. Entries read their column
    from `new` where it lies below `lo` (blocks already updated in this
    sweep) and from `old` (`[n, k]`, the sweep's input) elsewhere: the
    block's own colour and later ones (Gauss-Seidel between colours,
    Jacobi within one: exactly the XLA path's order, also for a leftover
    colour with entries inside it).

    `cols` `[w, n_c]` int32 (column positions, -1 for padding); weights
    from `cls` `[w, n_c]` and `table` `[C, k]`, or from `vals` `[w, n_c,
    k]` or `[w, n_c]` (shared by the columns); `rp` `[n, k]` (rows `lo:hi`
    read), or with `rp_rows` (`[n]` int32: each row's row of `rp`, -1 for
    a zero row) the `[m, k]` non-zero rows only (a reachability's right-hand
    side is zero but next to the target: it then costs no traffic); `omega`
    None (plain Gauss-Seidel), a scalar or `[k]`; `extra` None or `[n_c,
    k]`. Values in `old`'s dtype. `block_rows` (a power of
    two) and `num_warps` default from `TILE`/`NUM_WARPS`.

    `check` (optional, `(eps, nw, m)`): also test the block's rows against
    the solver's stop rule as they are written, `d <= eps max(|x'|,
    1e-300)` with `d = |x' - x|`, or with weights `nw` (`[n]` or `[n, k]`,
    in row order) and `m` (`[k]`) `d nw <= eps max(|x'| nw, max(m,
    1e-300))` (`jaxmc.solvers.sor.Relevance.converged`, the same
    operations), and `x'` finite. Each program then loops over up to
    `CHECK_TILES` row tiles and writes one row of `[K]` flags (non-zero:
    some entry of that column failed); returns `(buffer, flags)`, flags
    `[programs, K]` int8."""
    if old.ndim != 2:
        raise ValueError(f"`x` must have shape [n, k], not {old.shape}")
    n, k = (int(s) for s in old.shape)
    w, nc = (int(s) for s in cols.shape)
    if nc != hi - lo:
        raise ValueError(f"`cols` has {nc} rows; the block [{lo}, {hi}) has {hi - lo}")
    if (cls is None) == (vals is None) or (cls is None) != (table is None):
        raise ValueError("give either `cls` and `table`, or `vals`")
    dt = old.dtype
    K = pow2(k)
    R = block_rows or max(1, TILE // K)
    if R & (R - 1):
        raise ValueError(f"`block_rows` must be a power of two, not {R}")
    wkind = "table" if cls is not None else ("dense" if vals.ndim == 3 else "shared")
    if not fits(n, k, w, nc, wkind == "dense"):
        raise ValueError("`x` or the values are too large for int32 indices")
    # Interpret mode stores masked lanes too (their current value), so
    # duplicate indices race: there every masked lane writes its own spare
    # slot past the end (sliced off by `sweep`; on a GPU masked lanes write
    # nothing and there is no spare).
    spare = _spare(k, R) if interpret else 0
    size = n * k + spare
    if new is not None and new.shape != (size,):
        raise ValueError(f"`new` must have shape ({size},), not {new.shape}")
    ins = [
        old.reshape(-1),
        cols.astype(jnp.int32).reshape(-1),
        rp.astype(dt).reshape(-1),
    ]
    if rp_rows is not None:
        ins.append(rp_rows.astype(jnp.int32).reshape(-1))
    if wkind == "table":
        ins += [cls.astype(jnp.int32).reshape(-1), table.astype(dt).reshape(-1)]
    else:
        ins.append(vals.astype(dt).reshape(-1))
    if omega is not None:
        ins.append(jnp.broadcast_to(jnp.asarray(omega, dt), (k,)))
    if extra is not None:
        ins.append(extra.astype(dt).reshape(-1))
    G = 1
    if check is not None:
        eps, nw, mm = check
        G = max(1, min(CHECK_TILES, pl.cdiv(nc, R) // CHECK_MIN_PROGRAMS))
        ins.append(jnp.reshape(jnp.asarray(eps, dt), (1,)))
        if nw is not None:
            wdense = nw.ndim == 2
            ins += [
                nw.astype(dt).reshape(-1),
                jnp.broadcast_to(jnp.asarray(mm, dt), (k,)),
            ]
    weighted = check is not None and check[1] is not None
    n_prog = pl.cdiv(pl.cdiv(nc, R), G)
    if new is not None:
        ins.append(new)

    def kernel(*refs):
        it = iter(refs)
        x_ref, c_ref, rp_ref = next(it), next(it), next(it)
        ri_ref = next(it) if rp_rows is not None else None
        if wkind == "table":
            cls_ref, tab_ref = next(it), next(it)
        else:
            val_ref = next(it)
        om_ref = next(it) if omega is not None else None
        ex_ref = next(it) if extra is not None else None
        eps_ref = next(it) if check is not None else None
        nw_ref, m_ref = (next(it), next(it)) if weighted else (None, None)
        y_ref = next(it) if new is not None else None
        o_ref = next(it)
        f_ref = next(it) if check is not None else None
        cv = jnp.arange(K, dtype=jnp.int32)
        ck = cv < k
        om = (
            load(om_ref, jnp.where(ck, cv, 0), ck, 0)[None, :]
            if om_ref is not None
            else None
        )

        def tile(t, flags):
            """Rows `t R .. t R + R - 1` of the block; with `check`, also
            OR its stop-rule failures (per column) into `flags`."""
            i = t * R + jnp.arange(R, dtype=jnp.int32)  # rows within the block
            valid = i < nc
            ic = jnp.where(valid, i, 0)
            col = lax.broadcasted_iota(jnp.int32, (R, K), 1)
            m2 = valid[:, None] & (col < k)
            own = jnp.where(m2, (lo + ic)[:, None] * k + col, 0)

            def slot(j, acc):
                e = j * nc + ic
                c = load(c_ref, e, valid, -1)
                real = valid & (c >= 0)
                g = real[:, None] & m2
                xi = jnp.where(g, c[:, None] * k + col, 0)
                if y_ref is None:
                    xv = load(x_ref, xi, g, 0)
                else:  # rows below lo: this sweep's values
                    gn = g & (c < lo)[:, None]
                    go = g & (c >= lo)[:, None]
                    xv = jnp.where(gn, load(y_ref, xi, gn, 0), load(x_ref, xi, go, 0))
                if wkind == "table":
                    cl = load(cls_ref, e, real, 0)
                    wt = load(tab_ref, jnp.where(g, cl[:, None] * k + col, 0), g, 0)
                elif wkind == "dense":
                    wt = load(val_ref, jnp.where(g, e[:, None] * k + col, 0), g, 0)
                else:
                    wt = load(val_ref, e, real, 0)[:, None]
                return acc + xv * wt

            if ri_ref is None:
                acc = load(rp_ref, own, m2, 0)
            else:
                ri = load(ri_ref, lo + ic, valid, -1)
                has = (ri >= 0)[:, None] & m2
                acc = load(rp_ref, jnp.where(has, ri[:, None] * k + col, 0), has, 0)
            if w <= UNROLL:
                for j in range(w):
                    acc = slot(j, acc)
            else:
                acc = lax.fori_loop(0, w, slot, acc)
            if ex_ref is not None:
                acc = acc + load(ex_ref, jnp.where(m2, ic[:, None] * k + col, 0), m2, 0)
            xo = (
                load(x_ref, own, m2, 0)
                if (om is not None or check is not None)
                else None
            )
            if om is not None:
                acc = (1.0 - om) * xo + om * acc
            dst = own
            if spare:
                dst = jnp.where(
                    m2, own, n * k + jnp.arange(R, dtype=jnp.int32)[:, None] * K + col
                )
            store(o_ref, dst, acc, m2)
            if flags is None:
                return None
            # the stop rule, as `Relevance.converged` computes it (NaN fails)
            d = jnp.abs(acc - xo)
            eps_v = load(eps_ref, jnp.zeros((1,), jnp.int32), None, 0)[:, None]
            ax = jnp.abs(acc)
            if nw_ref is None:
                ok = d <= eps_v * jnp.maximum(ax, 1e-300)
            else:
                if wdense:
                    nwv = load(nw_ref, own, m2, 0)
                else:
                    nwv = load(nw_ref, lo + ic, valid, 0)[:, None]
                mv = load(m_ref, jnp.where(ck, cv, 0), ck, 0)[None, :]
                ok = d * nwv <= eps_v * jnp.maximum(ax * nwv, jnp.maximum(mv, 1e-300))
            ok = ok & (ax < jnp.inf)
            bad = jnp.where(m2 & ~ok, 1, 0).astype(jnp.int32)
            return jnp.maximum(flags, jnp.max(bad, axis=0))

        pid = pl.program_id(0).astype(jnp.int32)
        if check is None:
            tile(pid, None)
            return
        flags = jnp.zeros((K,), jnp.int32)
        if G == 1:
            flags = tile(pid, flags)
        else:
            flags = lax.fori_loop(0, G, lambda g, f: tile(pid * G + g, f), flags)
        store(f_ref, pid * K + cv, flags.astype(jnp.int8), None)

    kw = {}
    params = compiler_params(
        num_warps or (CHECK_NUM_WARPS if check is not None else NUM_WARPS), 1
    )
    if params is not None and not interpret:
        kw["compiler_params"] = params
    if new is not None:
        kw["input_output_aliases"] = {len(ins) - 1: 0}
    out_shape = jax.ShapeDtypeStruct((size,), dt)
    if check is not None:
        out_shape = (out_shape, jax.ShapeDtypeStruct((n_prog * K,), jnp.int8))
    out = pl.pallas_call(
        kernel,
        out_shape=out_shape,
        grid=(n_prog,),
        interpret=interpret,
        name=f"jaxmc_sor_block_{wkind}{'_check' if check is not None else ''}",
        **kw,
    )(*ins)
    if check is None:
        return out
    return out[0], out[1].reshape(n_prog, K)


def _spare(k: int, R: int | None = None) -> int:
    K = pow2(k)
    return (R or max(1, TILE // K)) * K


def sweep(
    x,
    rp,
    blocks,
    omega=None,
    *,
    check=None,
    rp_rows=None,
    interpret: bool = False,
    block_rows: int | None = None,
    num_warps: int | None = None,
):
    """One multicolour SOR sweep of `x` (`[n, k]`) with one kernel call per
    colour block, into a new buffer (the first block's call allocates it,
    the others update it in place; `x` itself is never written, so a
    caller that still needs `x`, as `_sor`'s convergence check does, costs
    no copy).

    `blocks`: `(lo, hi, cols, weights, ovf)` for blocks covering `[0, n)`
    in order, `weights` a dict of `block_update`'s `cls`/`table` or `vals`,
    `ovf` None or `(values, cols, rows)` of overflow entries (values `[m,
    k]` or `[m, 1]`, already weights), which are scatter-added by XLA from
    the current iterate and added in the kernel (as the XLA path adds
    them: after the slots).

    `rp_rows`: `rp` holds the non-zero rows only (see `block_update`).
    `check` (`(eps, nw, m)`, see `block_update`): returns `(x', ok)`, `ok`
    `[k]` whether every entry of the column passed the stop rule; the
    blocks compute it as they write (no extra pass over `x` or `x'`)."""
    n, k = (int(s) for s in x.shape)
    y = None
    bad = jnp.zeros((k,), bool)
    for lo, hi, cols, wts, ovf in blocks:
        if hi == lo:
            continue
        extra = None
        if ovf is not None:
            ov, oc, orow = ovf
            g = x[oc]
            if y is not None:
                g = jnp.where((oc < lo)[:, None], y[: n * k].reshape(n, k)[oc], g)
            extra = jax.ops.segment_sum(
                ov * g, orow, num_segments=hi - lo, indices_are_sorted=True
            )
        y = block_update(
            x,
            cols,
            rp,
            omega,
            lo=lo,
            hi=hi,
            new=y,
            extra=extra,
            check=check,
            rp_rows=rp_rows,
            interpret=interpret,
            block_rows=block_rows,
            num_warps=num_warps,
            **wts,
        )
        if check is not None:
            y, flags = y
            bad = bad | jnp.any(flags[:, :k] != 0, axis=0)
    if y is None:
        return x if check is None else (x, ~bad & jnp.all(jnp.isfinite(x), axis=0))
    y = y[: n * k].reshape(n, k)
    return y if check is None else (y, ~bad)
