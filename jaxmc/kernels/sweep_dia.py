"""One multicolour Gauss-Seidel sweep on the diagonal layout of
`jaxmc.layout.sweep_dia` (`dia_sweep`), and whether solves use that layout
(`dia_active`, `jaxmc._config.SETTINGS.diff_dia`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from .._config import SETTINGS
from . import sor_multi_pallas as _sor_kernel


def dia_active() -> bool:
    """Whether solves use the diagonal layout where their `Pattern` has one
    (`SETTINGS.diff_dia`). Why only the CPU by default: there XLA runs each
    gather as its own pass (a gathered slot is written and read back), and contiguous
    slices fuse; the GPU's sweeps are tuned on the gather layout and its
    fused kernel (also where it is asked for: `jaxmc._config.SOR_KERNEL`)."""
    dia = SETTINGS.diff_dia
    if dia == "auto" and _sor_kernel.mode() in ("on", "interpret"):
        return False  # the fused kernel was asked for: it reads the gather layout
    return dia == "on" or (dia == "auto" and jax.default_backend() == "cpu")


def dia_sweep(off, dg, rhs, lay: dict, order, offsets: tuple, n: int, classes=None):
    """`gs_sweep` on the diagonal layout (`dia_layout`): the same multicolour
    sweep of `x = (rhs + off x) / dg`, colour by colour, and the same
    contract (`sweep(x, omega, check=None)`, `to_perm`, `from_perm`), with
    the iterate in the layout's order. Each colour is one pass: `rhs +
    sum_d w_d * x[i + o_d]` for every row `i` from shifted slices of the
    zero-padded iterate, plus the scatter-added remainder, kept where the
    row has the colour (`mask`). The weights (`off / dg`, or the points'
    `classes` table) are laid out once, here. Sums run in diagonal order, so
    values agree with `gs_sweep`'s to rounding."""
    pos = jnp.zeros(n, jnp.int32).at[order].set(jnp.arange(n, dtype=jnp.int32))

    def to_perm(v):
        return v[order]

    def from_perm(v):
        return v[pos]

    multi = rhs.ndim > 1
    dgp = to_perm(dg if dg.ndim == rhs.ndim else dg[:, None])
    rp = to_perm(rhs) / dgp
    idx, r_ent, r_rows, r_cols = lay["idx"], lay["r_ent"], lay["r_rows"], lay["r_cols"]
    if classes is not None:  # weights per class and point: `[C, k]`
        table = jnp.concatenate(
            [classes["table"], jnp.zeros((1,) + classes["table"].shape[1:])]
        )
        clsp = jnp.concatenate(
            [classes["cls"], jnp.full((1,), classes["table"].shape[0], jnp.int32)]
        )
        vals, rv = table[clsp[idx]], table[clsp[r_ent]]
    else:
        offp = jnp.concatenate([off, jnp.zeros((1,) + off.shape[1:], off.dtype)])
        vals, rv = offp[idx], offp[r_ent]  # [D, n(, k)], [m(, k)]
        if multi and vals.ndim == 2:
            vals, rv = vals[..., None], rv[:, None]
        vals, rv = vals / dgp, rv / dgp[r_rows]
    pad = max(abs(o) for o in offsets)
    masks = lay["mask"]
    widths = tuple((0, 0) for _ in range(rp.ndim - 1))

    def _pass(x, c, omega):
        xp = jnp.pad(x, ((pad, pad),) + widths)
        acc = rp
        for j, o in enumerate(offsets):
            acc = acc + lax.slice_in_dim(xp, pad + o, pad + o + n) * vals[j]
        if r_ent.shape[0]:
            acc = acc + jax.ops.segment_sum(rv * x[r_cols], r_rows, num_segments=n)
        if omega is not None:
            acc = (1.0 - omega) * x + omega * acc
        return jnp.where(masks[c] if not multi else masks[c][:, None], acc, x)

    def sweep(x, omega=None, check=None):
        y = x
        for c in range(masks.shape[0]):
            y = _pass(y, c, omega)
        if check is None:
            return y
        rel, eps, m = check
        ok = rel.converged(jnp.abs(y - x), y, eps, m, finite=True)
        return y, ok

    return sweep, to_perm, from_perm
