"""The layouts of the multicolour Gauss-Seidel sweeps, built on the host:
the `Pattern` of a square matrix (its transpose, a colouring of the states
and the gather layouts of the sweeps, in both orientations; the diagonal
layout of `sweep_dia` where it fits) and the hybrid ELL layout the sweeps
gather through (`hybrid_ell`). The sweeps are `jaxmc.kernels.sweep`.

The loops never scatter: every sweep, forward or transposed, one vector or
many, is a sequence of row gathers in a hybrid ELL layout (slot-major ELL
plus a few scatter-added overflow entries for very long rows), because a
scatter-add (`segment_sum`) is much slower than a gather on a GPU.
"""

from __future__ import annotations

import numpy as np

from .._arrays import unique
from .._config import SETTINGS
from .sweep_dia import dia_layout


class Pattern:
    """The sparsity of a square matrix on the host: entry `e` is at
    `(rows[e], cols[e])`, rows sorted. Precomputes the transpose permutation,
    a colouring of the states (`coloring`) and, for both orientations, the
    gather layout of the Gauss-Seidel sweeps (`sweep_layout`).
    """

    def __init__(
        self,
        rows: np.ndarray,
        cols: np.ndarray,
        shape: tuple[int, int],
        lex: np.ndarray | None = None,
    ):
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        self.shape = (int(shape[0]), int(shape[1]))
        n = self.shape[0]
        perm = np.lexsort((rows, cols))
        color = coloring(rows, cols, n)
        order = np.argsort(color, kind="stable")
        #: Static: rows `[bounds[c], bounds[c+1])` of the colour-sorted order
        #: are colour `c`.
        self.bounds = tuple(
            int(v)
            for v in np.searchsorted(color[order], np.arange(color.max(initial=-1) + 2))
        )
        self.arrays = {
            "rows": rows.astype(np.int32),
            "cols": cols.astype(np.int32),
            "perm": perm.astype(np.int32),
            "t_rows": cols[perm].astype(np.int32),
            "t_cols": rows[perm].astype(np.int32),
            "order": order.astype(np.int32),
            "lay": sweep_layout(rows, cols, order, self.bounds),
            "t_lay": sweep_layout(cols[perm], rows[perm], order, self.bounds),
        }
        # each row's diagonal entry (nnz: none), in both orientations: the
        # solves then gather the diagonal instead of scatter-adding it (a
        # scatter over `[nnz, k]` values in batched solves)
        on = np.flatnonzero(rows == cols)
        if unique(rows[on]).size == on.size:
            diag = np.full(n, rows.size, np.int64)
            diag[rows[on]] = on
            inv = np.append(np.empty_like(perm), rows.size)  # (nnz stays nnz)
            inv[perm] = np.arange(perm.size)
            t_diag = inv[diag]
            self.arrays["diag"] = diag.astype(np.int32)
            self.arrays["t_diag"] = t_diag.astype(np.int32)
        #: Static: the diagonal sweep layout's offsets `(forward,
        #: transposed)`, or None where it does not apply (`dia_layout`).
        self.dia = None
        if lex is not None and SETTINGS.diff_dia != "off":
            fwd = dia_layout(rows, cols, n, lex, color)
            t = fwd and dia_layout(
                cols[perm], rows[perm], n, lex, color, order=fwd[1]["order"]
            )
            if t is not None:
                self.dia = (fwd[0], t[0])
                self.arrays["dia"] = {"fwd": fwd[1], "t": t[1]}


def coloring(
    rows: np.ndarray, cols: np.ndarray, n: int, max_colors: int = 32
) -> np.ndarray:
    """A colouring of the states for Gauss-Seidel sweeps: no off-diagonal
    entry joins two states of one colour (in either direction), except in
    a last colour of leftovers (updated Jacobi-style among themselves).

    Bipartite graphs (grids, random walks, birth-death chains) get 2 colours
    from the parity of a BFS depth; others a Jones-Plassmann greedy colouring
    (random priorities, vectorised). Why: a multicolour Gauss-Seidel sweep is
    as parallel as a Jacobi step (one gather pass per colour) and, for the
    M-matrices `I - A` solved here, converges at least as fast (Stein-
    Rosenberg); on a bipartite graph its rate is the square of Jacobi's, i.e.
    half the iterations."""
    if n == 0:
        return np.zeros(0, np.int64)
    import scipy.sparse as sp
    from scipy.sparse import csgraph

    off = rows != cols
    u = np.concatenate([rows[off], cols[off]])
    v = np.concatenate([cols[off], rows[off]])
    if u.size == 0:
        return np.zeros(n, np.int64)
    G = sp.csr_matrix((np.ones(u.size, np.int8), (u, v)), shape=(n, n))
    G.sum_duplicates()
    # 2 colours: BFS depth parity from one root per component (a virtual
    # super-root n joined to each component's first state).
    _, labels = csgraph.connected_components(G, directed=False)
    roots = np.unique(labels, return_index=True)[1]
    H = sp.csr_matrix(
        (
            np.ones(u.size + roots.size, np.int8),
            (np.concatenate([u, np.full(roots.size, n)]), np.concatenate([v, roots])),
        ),
        shape=(n + 1, n + 1),
    )
    _, pred = csgraph.breadth_first_order(
        H, n, directed=False, return_predecessors=True
    )
    anc = np.where(pred >= 0, pred, np.arange(n + 1))
    depth = (pred >= 0).astype(np.int64)
    while True:  # pointer jumping: depth to the super-root
        nxt = anc[anc]
        if np.array_equal(nxt, anc):
            break
        depth = depth + np.where(anc != nxt, depth[anc], 0)
        anc = nxt
    parity = depth[:n] % 2
    if np.all(parity[u] != parity[v]):
        return parity
    # Jones-Plassmann: a state whose priority beats all its uncoloured
    # neighbours' takes the smallest colour none of its neighbours has.
    ind, ptr = G.indices, G.indptr
    deg = np.diff(ptr)
    starts = np.minimum(ptr[:-1], max(ind.size - 1, 0))
    w = np.random.default_rng(0).permutation(n)
    color = np.full(n, -1, np.int64)
    for _ in range(10 * max_colors):
        todo = color < 0
        if not todo.any():
            break
        nb = np.where(todo[ind], w[ind], -1)
        best = np.where(deg > 0, np.maximum.reduceat(nb, starts), -1)
        pick = todo & (w > best)
        bits = np.where(
            color[ind] >= 0,
            np.left_shift(np.uint64(1), np.maximum(color[ind], 0).astype(np.uint64)),
            np.uint64(0),
        )
        used = np.where(deg > 0, np.bitwise_or.reduceat(bits, starts), np.uint64(0))[
            pick
        ]
        low = ~used & (used + np.uint64(1))
        c = np.round(np.log2(low.astype(np.float64))).astype(np.int64)
        color[np.flatnonzero(pick)] = np.where(c < max_colors, c, max_colors)
    color[color < 0] = max_colors
    # renumber the colours in use 0..C-1
    return np.unique(color, return_inverse=True)[1].astype(np.int64)


def sweep_layout(rows: np.ndarray, cols: np.ndarray, order: np.ndarray, bounds) -> dict:
    """Per colour block `c` (states `order[bounds[c]:bounds[c+1]]`), the
    hybrid ELL layout (`hybrid_ell`) of its rows, with columns renumbered to
    positions in `order`: `pcols` `[nnz]`, `ell` a tuple of `[w_c, n_c]`
    entry indices, `ovf` a tuple of overflow entry indices and `ovf_rows`
    their rows within the block."""
    n = order.size
    pos = np.empty(n, np.int64)
    pos[order] = np.arange(n)
    prow = pos[rows] if rows.size else rows
    by_row = np.lexsort((np.arange(rows.size), prow))  # entries by permuted row
    ells, ovfs, ovf_rows = [], [], []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        a, b = np.searchsorted(prow[by_row], [lo, hi])
        ent = by_row[a:b]
        ell, ovf = hybrid_ell(prow[ent] - lo, hi - lo)
        ells.append(
            np.where(
                ell < ent.size, ent[np.minimum(ell, max(ent.size - 1, 0))], rows.size
            ).astype(np.int32)
        )
        ovfs.append(ent[ovf].astype(np.int32))
        ovf_rows.append((prow[ent[ovf]] - lo).astype(np.int32))
    return {
        "pcols": pos[cols].astype(np.int32) if cols.size else cols.astype(np.int32),
        "ell": tuple(ells),
        "ovf": tuple(ovfs),
        "ovf_rows": tuple(ovf_rows),
    }


#: Relative cost of one scatter-added entry against one gathered ELL slot
#: when choosing the ELL width (a scatter-add is much slower than a gather,
#: on a GPU most).
SCATTER_COST = 4


def hybrid_ell(rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The hybrid ELL + COO layout ("HYB") of sorted `rows`.

    Returns `(ell, ovf)`: `ell` `[w, n]` holds, slot-major (column-major ELL:
    slot `j` of every row is contiguous, so that step `j` is one coalesced
    gather), the entry indices of the first `w` entries of each row, padded
    with `nnz` (a zero entry appended by the user); `ovf` `[m]` the entries
    beyond slot `w` (in row order), which are scatter-added. `w` is the
    longest row (no scatter at all) unless that pads the matrix more than
    4x; then `w` minimises `w n + SCATTER_COST m` (a few very long rows).

    Why: `segment_sum` is a scatter-add, much slower than a gather on a GPU
    and slower on CPU too for `[nnz, k]` values (many right-hand sides)."""
    nnz = rows.size
    if nnz == 0 or n == 0:
        return np.zeros((0, n), np.int32), np.zeros(0, np.int32)
    counts = np.bincount(rows, minlength=n)
    w = int(counts.max())
    if w * n > 4 * (nnz + n):  # padding > 4x: move the long rows' tails out
        srt = np.sort(counts)
        cand = unique(np.concatenate([[0], srt]))
        # overflow(w) = sum over rows of max(count - w, 0)
        idx = np.searchsorted(srt, cand, side="right")
        tail = np.concatenate([np.cumsum(srt[::-1])[::-1], [0]])
        over = tail[idx] - cand * (n - idx)
        w = int(cand[np.argmin(cand * n + SCATTER_COST * over)])
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slot = np.arange(nnz) - start[rows]
    inside = slot < w
    ell = np.full((w, n), nnz, np.int64)
    ell[slot[inside], rows[inside]] = np.flatnonzero(inside)
    return ell.astype(np.int32), np.flatnonzero(~inside).astype(np.int32)
