"""Device-side sparse matrices: structure static, values dynamic.

Every layout here is an `eqx.Module` whose *shape* fields are static (a change
recompiles) and whose arrays, index arrays included, are leaves. Each layout
also keeps `slot`, the CSR entry that every stored value comes from (`nnz` for
padding), so that `with_values(vals)` refreshes the numbers from new
entry-aligned values (e.g. new parameters, or a row mask) without touching the
structure and without recompiling.

Layouts are built on the host from concrete index arrays (`from_csr`); only
`with_values` and `spmv` run under `jit`.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int


#: Rows per slice of the sliced ELL layout (a warp).
SLICE = 32


class CSR(eqx.Module):
    """Compressed sparse rows, plus the row id of every entry (for
    `segment_sum`). Columns are sorted within each row."""

    data: Float[Array, " nnz"]
    indices: Int[Array, " nnz"]
    row_ids: Int[Array, " nnz"]
    indptr: Int[Array, " r1"]
    shape: tuple[int, int] = eqx.field(static=True)

    @property
    def nnz(self) -> int:
        return int(self.data.shape[0])

    @classmethod
    def from_arrays(cls, row_ptr, col, val, shape) -> CSR:
        """From host CSR arrays (`row_ptr`, `col`, `val`) and `(rows, cols)`."""
        row_ptr = np.asarray(row_ptr, dtype=np.int64)
        rows = np.repeat(np.arange(len(row_ptr) - 1), np.diff(row_ptr))
        return cls(
            data=jnp.asarray(val, dtype=jnp.float64),
            indices=jnp.asarray(np.asarray(col), dtype=jnp.int32),
            row_ids=jnp.asarray(rows, dtype=jnp.int32),
            indptr=jnp.asarray(row_ptr, dtype=jnp.int32),
            shape=(int(shape[0]), int(shape[1])),
        )

    def with_values(self, vals: Float[Array, " nnz"]) -> CSR:
        """The same structure with entry values `vals` (CSR order)."""
        return eqx.tree_at(lambda m: m.data, self, jnp.asarray(vals))

    def stats(self) -> dict:
        """Padding (none) and bytes per non-zero."""
        from ._warp import csr_stats

        return csr_stats(self)

    def transpose_perm(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Host: `(perm, indptr_t, cols_t)` such that the transpose has entry
        values `data[perm]`. Needs concrete index arrays."""
        rows = np.asarray(self.row_ids)
        cols = np.asarray(self.indices)
        perm = np.lexsort((rows, cols))
        counts = np.bincount(cols, minlength=self.shape[1])
        indptr_t = np.concatenate([[0], np.cumsum(counts)])
        return perm, indptr_t, rows[perm]

    def transpose(self) -> CSR:
        """The transposed matrix (structure on the host, values gathered, so
        the values may be traced)."""
        perm, indptr_t, cols_t = self.transpose_perm()
        t = CSR.from_arrays(
            indptr_t, cols_t, np.zeros(len(perm)), (self.shape[1], self.shape[0])
        )
        return t.with_values(self.data[jnp.asarray(perm)])


class ELL(eqx.Module):
    """Column-major ELLPACK: every row padded to the longest row; entry `k` of
    row `r` is `data[k, r]`. `y = sum(data * x[cols], axis=0)` is one fused
    gather and reduction, the fast path on GPUs for near-regular rows."""

    data: Float[Array, "w r"]
    cols: Int[Array, "w r"]
    slot: Int[Array, "w r"]
    shape: tuple[int, int] = eqx.field(static=True)

    @classmethod
    def from_csr(cls, csr: CSR) -> ELL:
        indptr = np.asarray(csr.indptr)
        lengths = np.diff(indptr)
        width = max(int(lengths.max(initial=0)), 1)
        nrows = csr.shape[0]
        k = np.arange(width)[:, None]
        valid = k < lengths[None, :]
        slot = np.where(valid, indptr[:-1][None, :] + k, csr.nnz)
        cols = np.where(valid, np.append(np.asarray(csr.indices), 0)[slot], 0)
        del nrows
        out = cls(
            data=jnp.zeros(slot.shape),
            cols=jnp.asarray(cols, dtype=jnp.int32),
            slot=jnp.asarray(slot, dtype=jnp.int32),
            shape=csr.shape,
        )
        return out.with_values(csr.data)

    def with_values(self, vals: Float[Array, " nnz"]) -> ELL:
        padded = jnp.append(jnp.asarray(vals), jnp.zeros((), vals.dtype))
        return eqx.tree_at(lambda m: m.data, self, padded[self.slot])

    def stats(self) -> dict:
        from ._warp import _stats

        stored = int(self.data.size)
        nnz = _real_entries([np.asarray(self.slot)])
        it = self.data.dtype.itemsize
        return _stats("ell", nnz, stored, stored * (it + 4), self.shape, it)


class SlicedELL(eqx.Module):
    """Sliced ELLPACK: rows in slices of `SLICE` rows, each slice padded to its
    own longest row. Slices of equal width are stacked into one block
    `[slices, width, SLICE]` (column-major within a slice), so each block is
    one gather and reduction; `perm` puts the block outputs back in row order.
    """

    data: tuple[Float[Array, "s w l"], ...]
    cols: tuple[Int[Array, "s w l"], ...]
    slot: tuple[Int[Array, "s w l"], ...]
    perm: Int[Array, " r"]
    shape: tuple[int, int] = eqx.field(static=True)

    @classmethod
    def from_csr(cls, csr: CSR) -> SlicedELL:
        indptr = np.asarray(csr.indptr)
        ind = np.append(np.asarray(csr.indices), 0)
        nrows = csr.shape[0]
        nslices = -(-nrows // SLICE)
        lengths = np.zeros(nslices * SLICE, dtype=np.int64)
        lengths[:nrows] = np.diff(indptr)
        starts = np.zeros(nslices * SLICE, dtype=np.int64)
        starts[:nrows] = indptr[:-1]
        widths = np.maximum(lengths.reshape(nslices, SLICE).max(axis=1), 1)
        cols, slots, order = [], [], []
        for w in np.unique(widths):
            sl = np.nonzero(widths == w)[0]
            rows = sl[:, None] * SLICE + np.arange(SLICE)[None, :]  # [s, l]
            k = np.arange(w)[None, :, None]
            valid = k < lengths[rows][:, None, :]
            slot = np.where(valid, starts[rows][:, None, :] + k, csr.nnz)
            slots.append(jnp.asarray(slot, dtype=jnp.int32))
            cols.append(jnp.asarray(np.where(valid, ind[slot], 0), dtype=jnp.int32))
            order.append(rows.reshape(-1))
        order = np.concatenate(order)
        perm = np.empty(nslices * SLICE, dtype=np.int64)
        perm[order] = np.arange(len(order))
        out = cls(
            data=tuple(jnp.zeros(s.shape) for s in slots),
            cols=tuple(cols),
            slot=tuple(slots),
            perm=jnp.asarray(perm[:nrows], dtype=jnp.int32),
            shape=csr.shape,
        )
        return out.with_values(csr.data)

    def with_values(self, vals: Float[Array, " nnz"]) -> SlicedELL:
        padded = jnp.append(jnp.asarray(vals), jnp.zeros((), vals.dtype))
        data = tuple(padded[s] for s in self.slot)
        return eqx.tree_at(lambda m: m.data, self, data)

    def stats(self) -> dict:
        from ._warp import _stats

        slots = [np.asarray(s).ravel() for s in self.slot]
        stored = sum(s.size for s in slots)
        nnz = _real_entries(slots)
        it = self.data[0].dtype.itemsize if self.data else 8
        return _stats("sell", nnz, stored, stored * (it + 4) + 4 * self.shape[0], self.shape, it)


def _real_entries(slots) -> int:
    """Stored entries that are not padding: padding repeats the largest slot
    (`nnz`), real entries hold each slot once. (A single padding entry cannot
    be told apart from a real one; it is counted as real.)"""
    s = np.concatenate([np.ravel(a) for a in slots]) if slots else np.zeros(0)
    if s.size == 0:
        return 0
    mx = s.max()
    pads = int(np.count_nonzero(s == mx))
    return int(s.size - pads) if pads > 1 else int(s.size)


Layout = CSR | ELL | SlicedELL


def make_layout(csr: CSR, kind: str = "csr") -> Layout:
    """Build layout `kind` from a CSR matrix: `"csr"`, `"ell"`, `"sell"`,
    the warp-segment layouts `"warp"` (full warp), `"warp2"` (half warp),
    `"compact"`/`"compact2"` (their compact variants, fixed values only),
    `"vector"` (CSR-vector, a warp per row, for long rows), `"dia"` (the
    compact diagonal layout, `CompactDIA`: few diagonals only), or `"auto"`
    (`jaxmc.layout.choose_layout` for the default device)."""
    if kind in ("auto", "warp", "warp2", "compact", "compact2", "vector"):
        from ._choose import build_layout

        return build_layout(csr, kind)
    if kind == "csr":
        return csr
    if kind == "ell":
        return ELL.from_csr(csr)
    if kind == "sell":
        return SlicedELL.from_csr(csr)
    if kind == "dia":
        from ._dia import CompactDIA

        return CompactDIA.from_csr(csr)
    raise ValueError(
        f"unknown layout `{kind}`; expected 'csr', 'ell', 'sell', 'warp', "
        "'warp2', 'compact', 'compact2', 'vector', 'dia' or 'auto'"
    )
