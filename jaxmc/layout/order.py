"""State orderings: which row is stored where.

On a GPU the state order matters more than the kernel: with a random column
order every layout is several times slower, because the gather `x[col]`
stops hitting cache lines that neighbouring threads just loaded. The
builder's BFS order is already good; an imported matrix (explicit files, a
model reordered by some other stage) can be reindexed here by BFS or reverse
Cuthill-McKee. A `Permutation` is applied to every vector going in and undone
on every vector coming out, so callers keep the model's state numbering.

`window_order` is the other way round: it keeps the given (BFS) order at
large and sorts rows by length only within short windows, so that the
warp-segment layouts, which pad every 32-row segment to its longest row,
store almost no padding (tandem c=2047: 14% of the non-zeros before).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from .csr import CSR


@dataclasses.dataclass(frozen=True)
class Permutation:
    """`order[i]` is the old index of new position `i`; `inverse` the other
    way round."""

    order: np.ndarray

    @property
    def inverse(self) -> np.ndarray:
        inv = np.empty_like(self.order)
        inv[self.order] = np.arange(len(self.order), dtype=self.order.dtype)
        return inv

    def apply(self, x):
        """A vector in old numbering -> new numbering (`x[order]`)."""
        return x[self.order]

    def undo(self, y):
        """A vector in new numbering -> old numbering."""
        return y[self.inverse]

    def csr(self, csr: CSR, host: bool = False) -> CSR:
        """`P A P^T` for a square CSR matrix (computed on the host; values
        carried). `host=True` keeps the arrays in numpy, for a host-side
        layout build next (no round trip through the device)."""
        A = _scipy(csr)
        B = A[self.order][:, self.order].tocsr()
        B.sort_indices()
        if not host:
            return CSR.from_arrays(B.indptr, B.indices, B.data, B.shape)
        indptr = B.indptr.astype(np.int32)
        rows = np.repeat(np.arange(B.shape[0], dtype=np.int32), np.diff(indptr))
        return CSR(
            data=B.data,
            indices=B.indices.astype(np.int32),
            row_ids=rows,
            indptr=indptr,
            shape=(int(B.shape[0]), int(B.shape[1])),
        )

    @staticmethod
    def identity(n: int) -> Permutation:
        return Permutation(np.arange(n, dtype=np.int64))


def _scipy(csr: CSR) -> sp.csr_matrix:
    return sp.csr_matrix(
        (np.asarray(csr.data), np.asarray(csr.indices), np.asarray(csr.indptr)),
        shape=csr.shape,
    )


def bfs_order(csr: CSR, sources=(0,)) -> Permutation:
    """Breadth-first order from `sources` along the matrix's edges (row ->
    column); states not reached follow in BFS order from the first unvisited
    state, so every state gets a place. This is the order the explicit
    builder produces for a model explored from its initial states."""
    A = _scipy(csr)
    n = A.shape[0]
    seen = np.zeros(n, dtype=bool)
    parts = []
    todo = list(sources) if len(sources) else []
    nxt = 0
    while True:
        for s in todo:
            if not seen[s]:
                o = csgraph.breadth_first_order(
                    A, int(s), directed=True, return_predecessors=False
                )
                o = o[~seen[o]]
                seen[o] = True
                parts.append(o)
        todo = []
        while nxt < n and seen[nxt]:
            nxt += 1
        if nxt >= n:
            break
        todo = [nxt]
    order = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return Permutation(order.astype(np.int64))


def rcm_order(csr: CSR) -> Permutation:
    """Reverse Cuthill-McKee order of the symmetrised pattern: a small band,
    so column offsets fit narrow integers (see `CompactWarpELL`)."""
    A = _scipy(csr)
    A = (A + A.T).tocsr()
    order = csgraph.reverse_cuthill_mckee(A, symmetric_mode=True)
    return Permutation(np.asarray(order, dtype=np.int64))


def window_order(csr: CSR, window: int = 1024) -> Permutation:
    """Rows sorted by length, longest first, within each window of `window`
    consecutive rows; a stable sort, so rows of equal length keep their
    order.

    Why: a warp-segment layout pads each segment of 32 rows to its longest
    row. After this order a segment holds rows of one length, except for at
    most (distinct lengths - 1) segments per window, so the padding nearly
    vanishes, while a row moves by less than `window` places: the columns a
    segment gathers stay within a few windows of each other (in cache), and
    column offsets from the row grow by less than `2 * window` (the compact
    layout's narrow offsets; check `bandwidth` after reordering). Apply the
    permutation symmetrically (`Permutation.csr`) and to every vector.

    `window` should be a multiple of 32 (the full-warp segment), so that no
    segment straddles two windows. The lengths sorted are those of `csr`
    itself: pass the matrix that is multiplied (for Jacobi on `A x = b`, the
    off-diagonal part of `A`, not the model's transition matrix).
    """
    if window < 1:
        raise ValueError(f"`window` must be positive, not {window}")
    lengths = np.diff(np.asarray(csr.indptr, dtype=np.int64))
    n = len(lengths)
    win = np.arange(n, dtype=np.int64) // window
    # lexsort is stable: the last key is the primary one.
    order = np.lexsort((-lengths, win))
    return Permutation(order.astype(np.int64))


def bandwidth(csr: CSR) -> int:
    """`max |col - row|` over the stored entries."""
    if csr.nnz == 0:
        return 0
    return int(
        np.abs(
            np.asarray(csr.indices, np.int64) - np.asarray(csr.row_ids, np.int64)
        ).max()
    )
