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

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .._arrays import unique
from .compact import narrow_int
from .csr import CSR
from .order import Permutation
from .stats import layout_stats


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
    #: Rows per kernel program (`jaxmc.kernels.dia_pallas`; 256 was the
    #: fastest measured, see the benchmark notes).
    block_rows: int = eqx.field(static=True, default=256)

    @classmethod
    def from_csr(
        cls,
        csr: CSR,
        dtype=None,
        max_diags: int | None = None,
        max_fill: float | None = None,
        block_rows: int = 256,
    ) -> CompactDIA:
        """The layout of a square `csr`, in its own row order. Raises
        `ValueError` where the matrix is not a few diagonals (`MAX_DIAGS`,
        `MAX_FILL`) or has more than 65536 distinct values; `fits` says so
        without building."""
        n, m = csr.shape
        if n != m:
            raise ValueError("the diagonal layout needs a square matrix")
        _check_no_repeats(csr)
        rows, cols, data = _entries(csr)
        return cls._from_entries(
            rows, cols, data, n, dtype, max_diags, max_fill, block_rows
        )

    @classmethod
    def _from_entries(cls, rows, cols, data, n, dtype, max_diags, max_fill, block_rows):
        """The layout of the entries `(rows, cols, data)` (non-zero, no
        repeated `(row, column)`) of an `n x n` matrix. Every pass is O(nnz)
        or over the few diagonals and distinct values: no sort of the
        entries (tandem c=2047, 29M entries, is built in seconds)."""
        where, offs = _diagonal_index(cols - rows, n)
        why = _misfit(offs.size, n, rows.size, max_diags, max_fill)
        if why:
            raise ValueError(f"not a diagonal matrix: {why}")
        table, vi = _value_table(data)
        zero = int(np.searchsorted(table, 0.0))
        vt = narrow_int(0, len(table) - 1, signed=False)
        if vt not in (np.uint8, np.uint16):
            raise ValueError(
                f"the matrix has {len(table)} distinct values; the diagonal layout "
                "holds at most 65536"
            )
        # rows padded to a multiple of `PAD`: every program's slice of a
        # diagonal starts aligned and lies inside
        vidx = np.full((offs.size, -(-max(n, 1) // PAD) * PAD), zero, dtype=vt)
        vidx[where, rows] = vi.astype(vt)
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
    def fits(
        csr: CSR, max_diags: int | None = None, max_fill: float | None = None
    ) -> bool:
        """Whether `from_csr` would take `csr` (diagonal count and fill)."""
        indptr = np.asarray(csr.indptr, dtype=np.int64)
        n, m = csr.shape
        if n != m:
            return False
        rows = np.repeat(np.arange(n), np.diff(indptr))
        nd = unique(np.asarray(csr.indices, dtype=np.int64) - rows).size
        return not _misfit(nd, n, rows.size, max_diags, max_fill)

    def astype(self, dtype) -> CompactDIA:
        return eqx.tree_at(lambda m: m.table, self, self.table.astype(dtype))

    def with_block_rows(self, block_rows: int) -> CompactDIA:
        """The same layout, `block_rows` rows per kernel program (a power
        of two, at most `PAD`)."""
        import dataclasses

        if block_rows & (block_rows - 1) or not 16 <= block_rows <= PAD:
            raise ValueError(
                f"`block_rows` must be a power of two in [16, {PAD}], not {block_rows}"
            )
        act = _active(np.asarray(self.vidx), self.zero, block_rows)
        return dataclasses.replace(
            self, block_rows=int(block_rows), active=jnp.asarray(act)
        )

    def stats(self) -> dict:
        stored = len(self.offsets) * self.shape[0]
        mbytes = (
            stored * self.vidx.dtype.itemsize
            + self.table.size * self.table.dtype.itemsize
        )
        s = layout_stats(
            "dia", self.nnz, stored, mbytes, self.shape, self.table.dtype.itemsize
        )
        s.update(
            table=int(self.table.size),
            vidx=str(self.vidx.dtype),
            diagonals=len(self.offsets),
        )
        return s


def _entries(csr: CSR):
    """`(rows, cols, data)` of the non-zero entries of `csr` (int64 indices)."""
    indptr = np.asarray(csr.indptr, dtype=np.int64)
    rows = np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(indptr))
    cols = np.asarray(csr.indices, dtype=np.int64)
    data = np.asarray(csr.data)
    keep = data != 0
    if keep.all():
        return rows, cols, data
    return rows[keep], cols[keep], data[keep]


def _check_no_repeats(csr: CSR) -> None:
    """Raise where a `(row, column)` occurs twice (the caller sums them
    first: scipy's `sum_duplicates`). Columns strictly increasing within
    every row prove it in one pass; else the keys are sorted."""
    indptr = np.asarray(csr.indptr, dtype=np.int64)
    cols = np.asarray(csr.indices, dtype=np.int64)
    if cols.size < 2:
        return
    step = np.diff(cols) > 0
    step[indptr[1:-1][(indptr[1:-1] > 0) & (indptr[1:-1] < cols.size)] - 1] = (
        True  # row starts
    )
    if step.all():
        return
    rows = np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(indptr))
    keys = np.sort(rows * csr.shape[1] + cols)
    if (np.diff(keys) == 0).any():
        raise ValueError("the matrix has repeated entries; sum them first")


def _diagonal_index(off: np.ndarray, n: int):
    """`(where, offsets)`: the sorted distinct offsets `col - row` and each
    entry's index among them, by a count over the `2n - 1` possible offsets
    (no sort of the entries)."""
    if off.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    present = np.bincount(off + (n - 1), minlength=2 * n - 1) > 0
    offs = np.flatnonzero(present) - (n - 1)
    if offs.size > 4096:  # (not a diagonal matrix: a sort costs no more)
        offs, where = np.unique(off, return_inverse=True)
        return where.reshape(-1), offs
    lookup = np.zeros(2 * n - 1, dtype=np.int16 if offs.size > 127 else np.int8)
    lookup[offs + (n - 1)] = np.arange(offs.size)
    return lookup[off + (n - 1)], offs


def _value_table(data: np.ndarray):
    """`(table, index)`: the sorted distinct values with 0 among them, and
    each entry's index in it. A table from every 64th entry is checked
    against all of them by binary search (few distinct values: one pass);
    the values it misses are added and looked up again."""
    table = np.unique(np.append(data[::64], 0.0))
    for _ in range(3):
        if table.size > 65536:
            break
        idx = np.minimum(np.searchsorted(table, data), table.size - 1)
        miss = table[idx] != data
        if not miss.any():
            return table, idx
        table = np.union1d(table, data[miss])
    table, idx = np.unique(np.append(data, 0.0), return_inverse=True)
    return table, idx.reshape(-1)[:-1]


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
        return (
            f"{ndiag} diagonals of {n} rows store {ndiag * n / max(nnz, 1):.1f}x the "
            f"entries (at most {max_fill}x)"
        )
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


def _rank_order(rank, n: int):
    """`(order, pos)` for the rows sorted by `rank`: `order[i]` the row at
    new place `i`, `pos` the inverse. A `rank` that is already a
    permutation of `0..n-1` costs one scatter, not a sort."""
    rank = np.asarray(rank, dtype=np.int64)
    if (
        rank.size
        and rank.min() == 0
        and rank.max() == n - 1
        and np.bincount(rank, minlength=n).max() == 1
    ):
        order = np.empty(n, np.int64)
        order[rank] = np.arange(n)
        return order, rank
    order = np.argsort(rank, kind="stable")
    pos = np.empty(n, np.int64)
    pos[order] = np.arange(n)
    return order, pos


def dia_order(
    csr: CSR, rank, max_diags: int | None = None, max_fill: float | None = None
) -> Permutation | None:
    """The permutation that sorts the rows (and columns) of the square
    matrix `csr` by `rank` (for a model: each state's place in PRISM's
    lexicographic order, `lex_order`), if the matrix is a few diagonals in
    that order (`CompactDIA`'s limits, or `max_diags`/`max_fill`); else
    None. One pass over the entries (a `bincount` of their offsets), so the
    answer is cheap next to building the layout."""
    n, m = csr.shape
    if n != m or n == 0 or rank is None or len(rank) != n:
        return None
    order, pos = _rank_order(rank, n)
    rows, cols, _ = _entries(csr)
    off = pos[cols] - pos[rows]
    ndiag = int(np.count_nonzero(np.bincount(off + (n - 1), minlength=2 * n - 1)))
    if ndiag == 0 or _misfit(ndiag, n, int(off.size), max_diags, max_fill):
        return None
    return Permutation(order)


def ordered_dia(
    csr: CSR,
    rank,
    *,
    dtype=None,
    max_diags: int | None = None,
    max_fill: float | None = None,
    on_device: bool | None = None,
):
    """`(CompactDIA of P A P^T, P)` for `P` the permutation that sorts the
    rows of the square `csr` by `rank` (`dia_order`), or None where the
    matrix is no few diagonals in that order, has repeated entries or
    more than 65536 distinct values. The caller runs its solve in the new
    numbering (`P.apply` on every vector in, `P.undo` on the result).

    The entries are renumbered, not permuted into a new CSR. On a GPU
    (`on_device`, default: JAX's default backend is one) the passes over the
    entries run there: the host's numpy takes seconds per build of tandem
    c=2047's 29M entries, the device milliseconds."""
    n, m = csr.shape
    if n != m or n == 0 or rank is None or len(rank) != n:
        return None
    order, pos = _rank_order(rank, n)
    if _too_many_offsets(csr, pos, max_diags):  # (first: the cheapest refusal)
        return None
    try:
        _check_no_repeats(csr)
    except ValueError:
        return None
    if on_device is None:
        on_device = jax.default_backend() == "gpu"
    build = _build_on_device if on_device else _build_on_host
    got = build(csr, pos, n, dtype, max_diags, max_fill)
    return None if got is None else (got, Permutation(order))


def _too_many_offsets(csr: CSR, pos, max_diags, sample: int = 1 << 16) -> bool:
    """Whether a sample of about `sample` entries, spread over the matrix,
    already has more distinct offsets than the layout allows: most
    matrices are no few diagonals, and this says so in milliseconds,
    before a full pass (or, on a GPU, a compiled one) is spent on them."""
    indptr = np.asarray(csr.indptr, dtype=np.int64)
    nnz = int(indptr[-1])
    if nnz <= sample:
        return False
    at = np.arange(0, nnz, nnz // sample, dtype=np.int64)
    rows = np.searchsorted(indptr, at, side="right") - 1
    live = np.asarray(csr.data)[at] != 0
    at, rows = at[live], rows[live]
    off = pos[np.asarray(csr.indices, dtype=np.int64)[at]] - pos[rows]
    return unique(off).size > (MAX_DIAGS if max_diags is None else max_diags)


def _build_on_host(csr, pos, n, dtype, max_diags, max_fill):
    rows, cols, data = _entries(csr)
    try:
        return CompactDIA._from_entries(
            pos[rows], pos[cols], data, n, dtype, max_diags, max_fill, 256
        )
    except ValueError:
        return None


@functools.partial(jax.jit, static_argnums=(3,))
def _device_offsets(indptr, cols, pos, n):
    """Each entry's row (renumbered) and offset, and which of the `2n - 1`
    offsets occur."""
    nnz = cols.shape[0]
    rows = jnp.repeat(
        jnp.arange(n, dtype=jnp.int32), jnp.diff(indptr), total_repeat_length=nnz
    )
    r = pos[rows]
    off = pos[cols] - r
    present = jnp.zeros(2 * n - 1, jnp.int32).at[off + (n - 1)].add(1, mode="drop") > 0
    return r, off, present


@functools.partial(jax.jit, static_argnums=(5, 6, 7, 8))
def _device_vidx(r, off, data, table, lookup, n, n_pad, ndiag, zero):
    """`(vidx [ndiag, n_pad], active, every value found in table)`: each
    entry's value index (uint8, or uint16 for a larger table) at its
    diagonal and renumbered row, and `_active`'s block flags."""
    idx = jnp.clip(jnp.searchsorted(table, data), 0, table.shape[0] - 1)
    found = jnp.all(table[idx] == data)
    vt = jnp.uint8 if table.shape[0] <= 256 else jnp.uint16
    where = lookup[off + (n - 1)].astype(jnp.int32)
    vidx = jnp.full((ndiag, n_pad), zero, vt).at[where, r].set(idx.astype(vt))
    used = (vidx != zero).reshape(ndiag, n_pad // PAD * (PAD // 256), 256).any(axis=2)
    return vidx, used.T.reshape(-1).astype(jnp.int8), found


def _build_on_device(csr, pos, n, dtype, max_diags, max_fill):
    indptr = np.asarray(csr.indptr)
    data_h = np.asarray(csr.data)
    keep = data_h != 0
    if not keep.all():  # (explicit zeros: drop them on the host first)
        return _build_on_host(csr, pos, n, dtype, max_diags, max_fill)
    cols = jnp.asarray(np.asarray(csr.indices), jnp.int32)
    r, off, present = _device_offsets(
        jnp.asarray(indptr, jnp.int32), cols, jnp.asarray(pos, jnp.int32), n
    )
    offs = np.flatnonzero(np.asarray(present)) - (n - 1)
    if offs.size == 0 or _misfit(offs.size, n, data_h.size, max_diags, max_fill):
        return None
    table = np.unique(np.append(data_h[::64], 0.0))
    data = jnp.asarray(data_h)
    lookup = np.zeros(2 * n - 1, np.int8 if offs.size <= 127 else np.int16)
    lookup[offs + (n - 1)] = np.arange(offs.size)
    lookup = jnp.asarray(lookup)
    for _ in range(2):
        if table.size > 65536:
            return None
        zero = int(np.searchsorted(table, 0.0))
        vidx, active, found = _device_vidx(
            r,
            off,
            data,
            jnp.asarray(table),
            lookup,
            n,
            -(-n // PAD) * PAD,
            int(offs.size),
            zero,
        )
        if bool(found):
            break
        table = np.unique(np.append(data_h, 0.0))  # the sample missed some: all of them
    else:
        return None
    return CompactDIA(
        table=jnp.asarray(table, dtype=data_h.dtype if dtype is None else dtype),
        vidx=vidx,
        active=active,
        offsets=tuple(int(o) for o in offs),
        shape=(int(n), int(n)),
        nnz=int(data_h.size),
        zero=zero,
        block_rows=256,
    )
