"""The diagonal layout of the multicolour Gauss-Seidel sweeps
(`jaxmc.kernels.sweep_dia`): where the states form a box in PRISM's
lexicographic order, the matrix is a few diagonals, and a sweep is
contiguous slices instead of gathers (`dia_layout`, built on the host).
Whether solves use it is `jaxmc.kernels.sweep_dia.dia_active`."""

from __future__ import annotations

import numpy as np


#: The diagonal layout of the sweeps (`dia_layout`): at most this many
#: diagonals, holding all but at most `DIA_MAX_REMAINDER` of the
#: off-diagonal entries, padded to at most `DIA_MAX_FILL` times them, and at
#: most `DIA_MAX_COLORS` colours (a pass over the whole vector each). Where
#: the sweeps use it: `jaxmc._config.SETTINGS.diff_dia`.
DIA_MAX_DIAGS = 16
DIA_MAX_REMAINDER = 0.02
DIA_MAX_FILL = 3.0
DIA_MAX_COLORS = 3


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
    off = np.ones(ent.size, dtype=bool)
    off[keep] = False
    rest = ent[off]
    mask = color[order][None, :] == np.arange(ncol)[:, None]
    return tuple(int(o) for o in chosen), {
        "order": order.astype(np.int32),
        "mask": mask,
        "idx": idx.astype(np.int32),
        "r_ent": rest.astype(np.int32),
        "r_rows": pr[rest].astype(np.int32),
        "r_cols": pc[rest].astype(np.int32),
    }
