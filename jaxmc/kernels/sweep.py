"""One multicolour Gauss-Seidel sweep of `x = (rhs + off x) / dg`, on one
vector or a batch (`[n, k]`): in the gather layout of
`jaxmc.layout.sweep` (`gs_sweep`) or the diagonal one
(`jaxmc.kernels.sweep_dia.dia_sweep`), chosen by `make_sweep`. The loops
around them are `jaxmc.solvers.sor`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from . import sor_multi_pallas as _sor_kernel
from .sweep_dia import dia_sweep


def gs_sweep(
    off, dg, rhs, lay: dict, order, bounds, n: int, classes=None, rhs_rows=None
):
    """`(sweep, to_perm, from_perm)`: one multicolour Gauss-Seidel sweep of
    `x = (rhs + off x) / dg` on the colour-sorted iterate, colour by colour
    (each block's new values use the other blocks' latest ones), in the
    layout of `sweep_layout`. `sweep(x, omega)` over-relaxes each block's
    update, `x_c <- (1 - omega) x_c + omega GS_c(x)` (SOR; `omega` a scalar
    or `[k]`, one per column; `None` is plain Gauss-Seidel);
    `sweep(x, omega, check=(rel, eps, m))` returns `(x', ok)`, `ok` (per
    column) whether every entry passes the stop rule `rel.converged(|x' -
    x|, x', eps, m)` and is finite (the kernel computes it in the same
    pass). `off` is `[nnz]` or `[nnz, k]`, `dg` and `rhs` `[n]` or `[n, k]`
    (`k` columns at once: one pass over the shared indices). Values are
    divided by the diagonal and laid out once, here; each block's update
    is `w_c` row gathers `x[cols_j]` times values (no scatter, except a
    few overflow entries of very long rows) written back as one
    contiguous slice.

    With `classes` (`{"cls": [nnz], "table": [C, k]}`: entry `e`'s weight
    `off[e] / dg[row e]` is `table[cls[e]]`), the weights are gathered from
    the small table inside each sweep instead of being stored `[w, n, k]`:
    a batched sweep then reads the shared indices, the iterate and the table
    only, not `nnz x k` values (it is memory-bound).

    On a GPU (`sor_multi_pallas.active(k)`), an `[n, k]` sweep runs the
    fused Pallas kernel instead, one call per colour block (the gathers,
    weights, blend and write-back in one pass; XLA's fusions make ~4
    passes over the iterate per sweep, the kernel ~2), with the same reads
    in the same order, so the same values; single vectors and other
    backends take the XLA path. `rhs_rows` (optional, int `[m]`): the only
    rows where `rhs` can be non-zero (e.g. the states next to a
    reachability's target); the kernel then reads those rows of the
    right-hand side only (the XLA path ignores it)."""
    multi = rhs.ndim > 1
    pos = jnp.zeros(n, jnp.int32).at[order].set(jnp.arange(n, dtype=jnp.int32))

    def to_perm(v):
        return v[order]

    def from_perm(v):
        return v[pos]

    dgp = to_perm(dg if dg.ndim == rhs.ndim else dg[:, None])
    rp = to_perm(rhs) / dgp
    pad = jnp.zeros((1,) + off.shape[1:], off.dtype)
    offp = jnp.concatenate([off, pad])
    pcols = jnp.concatenate([lay["pcols"], jnp.zeros((1,), jnp.int32)])
    if classes is not None:
        table = jnp.concatenate(
            [classes["table"], jnp.zeros((1,) + classes["table"].shape[1:])]
        )
        clsp = jnp.concatenate(
            [classes["cls"], jnp.full((1,), classes["table"].shape[0], jnp.int32)]
        )
    kmode = _sor_kernel.active(rp.shape[1]) if multi and rp.ndim == 2 else None
    krp, krows = rp, None
    if kmode is not None and rhs_rows is not None:
        ppos = pos[rhs_rows]  # their positions in the iterate's order
        krp = rp[ppos]
        krows = (
            jnp.full((n,), -1, jnp.int32)
            .at[ppos]
            .set(jnp.arange(ppos.shape[0], dtype=jnp.int32))
        )
    blocks, kblocks = [], []
    for c, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        ell, ovf, orow = lay["ell"][c], lay["ovf"][c], lay["ovf_rows"][c]
        d = dgp[lo:hi]
        if classes is not None:
            vals, ov = clsp[ell], table[clsp[ovf]]  # class ids; weights
        else:
            vals = offp[ell]  # [w, n_c] or [w, n_c, k]
            if multi and vals.ndim == 2:
                vals = vals[..., None]
            vals = vals / d
            ov = offp[ovf]
            if multi and ov.ndim == 1:
                ov = ov[:, None]
            ov = ov / d[orow]
        blocks.append((lo, hi, vals, pcols[ell], ov, pcols[ovf], orow))
        if (
            kmode is not None
        ):  # the kernel's columns (-1: padding, not gathered) and weights
            if classes is not None:
                kw = {"cls": vals, "table": table}
            else:
                kw = {
                    "vals": vals[..., 0]
                    if vals.ndim == 3 and vals.shape[2] == 1
                    else vals
                }
            kcols = jnp.where(ell < lay["pcols"].shape[0], pcols[ell], -1)
            kblocks.append(
                (lo, hi, kcols, kw, (ov, pcols[ovf], orow) if ovf.shape[0] else None)
            )
    if kmode is not None:  # shapes the kernel takes (else the XLA path)
        k = rp.shape[1]
        for lo, hi, kcols, kw, _ in kblocks:
            v = kw["vals"] if "vals" in kw else kw["table"]
            dense = "vals" in kw and v.ndim == 3
            ok = (
                v.shape[-1] == k
                if dense
                else v.ndim == 2 and ("vals" in kw or v.shape[1] == k)
            )
            if not ok or not _sor_kernel.fits(n, k, kcols.shape[0], hi - lo, dense):
                kmode = None

    def weight(vals, j):
        return vals[j] if classes is None else table[vals[j]]

    def sweep(x, omega=None, check=None):
        if kmode is not None and x.shape == rp.shape and x.dtype == rp.dtype:
            kcheck = None
            if check is not None:
                rel, eps, m = check
                if rel.w is None:
                    kcheck = (eps, None, None)
                else:
                    kcheck = (eps, rel.nw, rel.measure(x) if m is None else m)
            return _sor_kernel.sweep(
                x,
                krp,
                kblocks,
                omega,
                check=kcheck,
                rp_rows=krows,
                interpret=kmode == "interpret",
            )
        y = _xla_sweep(x, omega)
        if check is None:
            return y
        rel, eps, m = check
        ok = rel.converged(jnp.abs(y - x), y, eps, m, finite=True)
        return y, ok

    def _xla_sweep(x, omega):
        for lo, hi, vals, ecols, ov, ocols, orow in blocks:
            w = vals.shape[0]
            acc = rp[lo:hi]
            if w <= 32:
                for j in range(w):
                    acc = acc + x[ecols[j]] * weight(vals, j)
            else:
                acc = lax.fori_loop(
                    0, w, lambda j, a: a + x[ecols[j]] * weight(vals, j), acc
                )
            if ocols.shape[0]:
                acc = acc + jax.ops.segment_sum(
                    ov * x[ocols], orow, num_segments=hi - lo, indices_are_sorted=True
                )
            if omega is not None:  # SOR: (1 - w) x + w GS(x); exactly GS(x) at w = 1
                acc = (1.0 - omega) * x[lo:hi] + omega * acc
            x = (
                acc
                if (lo, hi) == (0, n)
                else lax.dynamic_update_slice_in_dim(x, acc, lo, 0)
            )
        return x

    return sweep, to_perm, from_perm


def make_sweep(
    off,
    dg,
    rhs,
    lay: dict,
    order,
    bounds,
    n: int,
    classes=None,
    rhs_rows=None,
    dia=None,
):
    """`dia_sweep` where `dia` (the layout's static offsets) is given and
    `lay`/`order` are that layout's, else `gs_sweep`."""
    if dia is not None:
        return dia_sweep(off, dg, rhs, lay, order, dia, n, classes)
    return gs_sweep(off, dg, rhs, lay, order, bounds, n, classes, rhs_rows)
