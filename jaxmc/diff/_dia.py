"""The diagonal layout of the Gauss-Seidel sweeps: where the states form
a box in PRISM's lexicographic order, the matrix is a few diagonals, and a
sweep is contiguous slices instead of gathers (`dia_layout`, `dia_sweep`).
Whether solves use it is `jaxmc._config.SETTINGS.diff_dia`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._config import SETTINGS
from ..kernels import sor_multi_pallas as _sor_kernel


#: The diagonal layout of the sweeps (`dia_layout`): at most this many
#: diagonals, holding all but at most `DIA_MAX_REMAINDER` of the
#: off-diagonal entries, padded to at most `DIA_MAX_FILL` times them, and at
#: most `DIA_MAX_COLORS` colours (a pass over the whole vector each). Where
#: the sweeps use it: `jaxmc._config.SETTINGS.diff_dia`.
DIA_MAX_DIAGS = 16
DIA_MAX_REMAINDER = 0.02
DIA_MAX_FILL = 3.0
DIA_MAX_COLORS = 3


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


def dia_layout(
    rows: np.ndarray,
    cols: np.ndarray,
    n: int,
    lex: np.ndarray,
    color: np.ndarray,
    order: np.ndarray | None = None,
):
    """The diagonal ("DIA") layout of the matrix in the states'
    lexicographic order, for sweeps without gathers, or None where it does
    not fit (the `DIA_*` limits).

    Why: a PRISM model's states are tuples of bounded variables, and most
    updates move one variable by a constant (`x'=x+1`). In the
    lexicographic order of the states (`lex`: PRISM's own order), such an
    update is a constant index offset wherever the reachable states form a
    box, so the matrix is a few diagonals: entry `(i, i + o)`. A sweep then
    reads `x` through contiguous shifted slices, which XLA fuses into one
    pass, instead of one gather per ELL slot, each a pass of its own on a
    CPU. The colours become masks: each colour's pass computes every row
    and keeps its own rows' values. (Colour blocks of diagonals, which
    skip the other colours' rows, were slower: XLA copies every slice that
    reads the buffer a block is written into, or, reading a concatenation
    of the blocks, compiles the slices to per-element selects.)

    The iterate order is `lex` restricted to the states with entries, then
    the others (`order`: given for the transposed layout, which shares it).
    Returns `(offsets, arrays)`: `offsets` the static tuple of diagonals;
    `arrays` `{"order", "mask"` `[C, n]` bool, `"idx"` `[D, n]` (the entry
    on diagonal `d` of row `i` of the iterate, or `nnz`), and the
    remainder, entries on no chosen diagonal (or a repeated `(row, col)`),
    scatter-added: `"r_ent", "r_rows", "r_cols"}`. Diagonal entries are
    left out (the solves divide by them)."""
    nnz = rows.size
    ncol = int(color.max(initial=-1)) + 1
    if nnz == 0 or n == 0 or ncol > DIA_MAX_COLORS:
        return None
    if order is None:
        active = np.zeros(n, bool)
        active[rows] = True
        active[cols] = True
        lex = np.asarray(lex, np.int64)
        order = np.concatenate([lex[active[lex]], lex[~active[lex]]])
    pos = np.empty(n, np.int64)
    pos[order] = np.arange(n)
    pr, pc = pos[rows], pos[cols]
    ent = np.flatnonzero(pr != pc)
    if ent.size == 0:
        return None
    u, inv, cnt = np.unique(pc[ent] - pr[ent], return_inverse=True, return_counts=True)
    by = np.argsort(-cnt, kind="stable")
    need = ent.size - int(np.floor(DIA_MAX_REMAINDER * ent.size))
    D = int(np.searchsorted(np.cumsum(cnt[by]), need)) + 1
    rows_used = int(np.count_nonzero(np.bincount(pr[ent], minlength=n)))
    if D > DIA_MAX_DIAGS or D * rows_used > DIA_MAX_FILL * ent.size:
        return None
    chosen = np.sort(u[by[:D]])
    d_of = np.full(u.size, -1, np.int64)
    d_of[np.searchsorted(u, chosen)] = np.arange(D)
    d = d_of[inv.reshape(-1)]
    on = np.flatnonzero(d >= 0)
    _, first = np.unique(d[on] * n + pr[ent[on]], return_index=True)
    keep = on[first]  # (a repeated (row, col) goes to the remainder)
    idx = np.full((D, n), nnz, np.int64)
    idx[d[keep], pr[ent[keep]]] = ent[keep]
    rest = ent[np.setdiff1d(np.arange(ent.size), keep)]
    mask = color[order][None, :] == np.arange(ncol)[:, None]
    return tuple(int(o) for o in chosen), {
        "order": order.astype(np.int32),
        "mask": mask,
        "idx": idx.astype(np.int32),
        "r_ent": rest.astype(np.int32),
        "r_rows": pr[rest].astype(np.int32),
        "r_cols": pc[rest].astype(np.int32),
    }


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
