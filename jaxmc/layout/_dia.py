"""The compact diagonal layout: a square matrix stored as a few diagonals,
each a narrow index per row into a table of the distinct values.

Why: a PRISM model's states are tuples of bounded variables, and most
updates move a variable by a constant (`sc'=sc+1`). In the lexicographic
order of the states (PRISM's own order; `jaxmc.layout.lex_order`) such an
update is a constant index offset wherever the reachable states form a box,
so the matrix is a handful of diagonals, entry `(i, i + o)`. Then no column
is stored at all, only one value index per row and diagonal (1 byte where
the matrix has at most 256 distinct values), and a kernel reads `x` in
contiguous, coalesced runs `x[i + o]` instead of gathering it. tandem
c=2047 (8.4 M states, 29.3 M entries) is 6 diagonals in that order, about
50 MB, against 103 MB for the compact warp layout (`CompactWarpELL`: a
value index and an int16 column offset per entry, plus 14% padding).

Entry `(i, i + offsets[d])` has the value `table[vidx[d, i]]`; rows without
an entry on diagonal `d` point at a 0 in the table (`zero`), and so do the
positions where `i + offsets[d]` falls outside the matrix.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ._matrix import CSR
from ._order import Permutation
from ._warp import _stats, narrow_int


#: `CompactDIA.from_csr`'s limits: at most this many diagonals, storing at
#: most `MAX_FILL` times the entries (a diagonal costs a byte per row, even
#: where it holds only a few entries).
MAX_DIAGS = 16
MAX_FILL = 3.0
#: The stored rows of each diagonal are padded to a multiple of this (the
#: largest `block_rows`).
PAD = 4096


class CompactDIA(eqx.Module):
    """A square matrix as diagonals with tabulated values (module docstring).

    `vidx` `[D, n']` (uint8/uint16; `n'` is `n` padded to a multiple of
    `PAD`), `table` the distinct values, `offsets`
    the diagonals' column offsets (static), `zero` the table's 0."""

    table: Float[Array, " v"]
    vidx: Int[Array, "d n"]
    #: `[blocks, D]` flattened: whether block `b` of `block_rows` rows has
    #: an entry on diagonal `d` (the kernel skips the others: in tandem's
    #: order whole runs of rows, those of one phase, use only some diagonals).
    active: Int[Array, " bd"]
    offsets: tuple[int, ...] = eqx.field(static=True)
    shape: tuple[int, int] = eqx.field(static=True)
    nnz: int = eqx.field(static=True)
    zero: int = eqx.field(static=True)
    #: Rows per kernel program (`jaxmc.kernels.dia_pallas`; 256 measured
    #: best on an H200, RESULTS.md).
    block_rows: int = eqx.field(static=True, default=256)

    @classmethod
    def from_csr(cls, csr: CSR, dtype=None, max_diags: int | None = None,
                 max_fill: float | None = None, block_rows: int = 256) -> CompactDIA:
        """The layout of a square `csr`, in its own row order. Raises
        `ValueError` where the matrix is not a few diagonals (`MAX_DIAGS`,
        `MAX_FILL`) or has more than 65536 distinct values; `fits` says so
        without building."""
        indptr = np.asarray(csr.indptr, dtype=np.int64)
        cols = np.asarray(csr.indices, dtype=np.int64)
        data = np.asarray(csr.data)
        n, m = csr.shape
        if n != m:
            raise ValueError("the diagonal layout needs a square matrix")
        rows = np.repeat(np.arange(n), np.diff(indptr))
        keep = data != 0
        rows, cols, data = rows[keep], cols[keep], data[keep]
        offs, where = np.unique(cols - rows, return_inverse=True)
        why = _misfit(offs.size, n, rows.size, max_diags, max_fill)
        if why:
            raise ValueError(f"not a diagonal matrix: {why}")
        table, vi = np.unique(np.append(data, 0.0), return_inverse=True)
        zero = int(vi[-1])
        vt = narrow_int(0, len(table) - 1, signed=False)
        if vt not in (np.uint8, np.uint16):
            raise ValueError(
                f"the matrix has {len(table)} distinct values; the diagonal layout holds at most 65536"
            )
        # rows padded to a multiple of `PAD`: every program's slice of a
        # diagonal starts aligned and lies inside
        vidx = np.full((offs.size, -(-max(n, 1) // PAD) * PAD), zero, dtype=vt)
        where = where.reshape(-1)
        # a repeated (row, column) is summed first (the caller's CSR should
        # not have any; scipy's sum_duplicates removes them)
        if rows.size and np.bincount(where * n + rows, minlength=offs.size * n).max() > 1:
            raise ValueError("the matrix has repeated entries; sum them first")
        vidx[where, rows] = vi[:-1].astype(vt)
        return cls(
            table=jnp.asarray(table, dtype=data.dtype if dtype is None else dtype),
            vidx=jnp.asarray(vidx),
            active=jnp.asarray(_active(vidx, zero, block_rows)),
            offsets=tuple(int(o) for o in offs),
            shape=(int(n), int(n)),
            nnz=int(rows.size),
            zero=zero,
            block_rows=int(block_rows),
        )

    @staticmethod
    def fits(csr: CSR, max_diags: int | None = None, max_fill: float | None = None) -> bool:
        """Whether `from_csr` would take `csr` (diagonal count and fill)."""
        indptr = np.asarray(csr.indptr, dtype=np.int64)
        n, m = csr.shape
        if n != m:
            return False
        rows = np.repeat(np.arange(n), np.diff(indptr))
        nd = np.unique(np.asarray(csr.indices, dtype=np.int64) - rows).size
        return not _misfit(nd, n, rows.size, max_diags, max_fill)

    def astype(self, dtype) -> CompactDIA:
        return eqx.tree_at(lambda m: m.table, self, self.table.astype(dtype))

    def with_block_rows(self, block_rows: int) -> CompactDIA:
        """The same layout, `block_rows` rows per kernel program (a power
        of two, at most `PAD`)."""
        import dataclasses

        if block_rows & (block_rows - 1) or not 16 <= block_rows <= PAD:
            raise ValueError(f"`block_rows` must be a power of two in [16, {PAD}], not {block_rows}")
        act = _active(np.asarray(self.vidx), self.zero, block_rows)
        return dataclasses.replace(self, block_rows=int(block_rows), active=jnp.asarray(act))

    def stats(self) -> dict:
        stored = len(self.offsets) * self.shape[0]
        mbytes = stored * self.vidx.dtype.itemsize + self.table.size * self.table.dtype.itemsize
        s = _stats("dia", self.nnz, stored, mbytes, self.shape, self.table.dtype.itemsize)
        s.update(table=int(self.table.size), vidx=str(self.vidx.dtype), diagonals=len(self.offsets))
        return s


def _active(vidx: np.ndarray, zero: int, block_rows: int) -> np.ndarray:
    """`[blocks, D]` int8, flattened: block `b` has an entry on diagonal `d`."""
    D, npad = vidx.shape
    used = (vidx != zero).reshape(D, npad // block_rows, block_rows).any(axis=2)
    return used.T.reshape(-1).astype(np.int8)


def _misfit(ndiag: int, n: int, nnz: int, max_diags, max_fill) -> str:
    max_diags = MAX_DIAGS if max_diags is None else max_diags
    max_fill = MAX_FILL if max_fill is None else max_fill
    if ndiag > max_diags:
        return f"{ndiag} diagonals (at most {max_diags})"
    if ndiag * n > max_fill * max(nnz, 1):
        return f"{ndiag} diagonals of {n} rows store {ndiag * n / max(nnz, 1):.1f}x the entries (at most {max_fill}x)"
    return ""


def dia_reference_spmv(matrix: CompactDIA, x):
    """Plain-JAX `y = A x` (the reference the Pallas kernel is tested
    against): one shifted slice of the zero-padded `x` per diagonal."""
    n = matrix.shape[0]
    x = x.astype(matrix.table.dtype)
    pad = max([abs(o) for o in matrix.offsets] + [0])
    xp = jnp.pad(x, (pad, pad))
    y = jnp.zeros(n, matrix.table.dtype)
    for d, o in enumerate(matrix.offsets):
        v = matrix.table[matrix.vidx[d, :n].astype(jnp.int32)]
        y = y + jnp.where(v == 0, 0, v * jax.lax.slice_in_dim(xp, pad + o, pad + o + n))
    return y


def lex_order(states) -> np.ndarray:
    """PRISM's state order: the permutation sorting the states (rows of
    `states`, one column per variable) lexicographically, first variable
    most significant."""
    st = np.asarray(states)
    if st.ndim != 2 or st.shape[1] == 0:
        return np.arange(st.shape[0] if st.ndim else 0)
    return np.lexsort(st.T[::-1])


def dia_order(csr: CSR, rank, max_diags: int | None = None,
              max_fill: float | None = None) -> Permutation | None:
    """The permutation that sorts the rows (and columns) of the square
    matrix `csr` by `rank` (for a model: each state's place in PRISM's
    lexicographic order, `lex_order`), if the matrix is a few diagonals in
    that order (`CompactDIA`'s limits, or `max_diags`/`max_fill`); else
    None. One pass over the entries (a `bincount` of their offsets), so the
    answer is cheap next to building the layout."""
    n, m = csr.shape
    if n != m or n == 0 or rank is None or len(rank) != n:
        return None
    order = np.argsort(np.asarray(rank), kind="stable")
    pos = np.empty(n, np.int64)
    pos[order] = np.arange(n)
    indptr = np.asarray(csr.indptr, dtype=np.int64)
    rows = np.repeat(np.arange(n), np.diff(indptr))
    keep = np.asarray(csr.data) != 0
    off = pos[np.asarray(csr.indices, dtype=np.int64)[keep]] - pos[rows[keep]]
    ndiag = int(np.count_nonzero(np.bincount(off + (n - 1), minlength=2 * n - 1)))
    if ndiag == 0 or _misfit(ndiag, n, int(off.size), max_diags, max_fill):
        return None
    return Permutation(order)


def ordered_dia(csr: CSR, rank, *, dtype=None, max_diags: int | None = None,
                max_fill: float | None = None):
    """`(CompactDIA of P A P^T, P)` with `P = dia_order(csr, rank, ...)`,
    or None where the matrix is no few diagonals in that order or its
    values do not fit the table. The caller runs its solve in the new
    numbering (`P.apply` on every vector in, `P.undo` on the result)."""
    perm = dia_order(csr, rank, max_diags, max_fill)
    if perm is None:
        return None
    try:
        return CompactDIA.from_csr(perm.csr(csr, host=True), dtype=dtype, max_diags=max_diags,
                                   max_fill=max_fill), perm
    except ValueError:  # too many distinct values, or repeated entries
        return None
