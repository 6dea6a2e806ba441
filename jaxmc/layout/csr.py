"""Compressed sparse rows (`CSR`): the matrix every other layout is built
from, and the one `jaxmc.kernels.spmv` runs as a `segment_sum` on a CPU.

Every layout of `jaxmc.layout` is an `eqx.Module` whose *shape* fields are
static (a change recompiles) and whose arrays, index arrays included, are
leaves. Each layout also keeps `slot`, the CSR entry that every stored value
comes from (`nnz` for padding), so that `with_values(vals)` refreshes the
numbers from new entry-aligned values (e.g. new parameters, or a row mask)
without touching the structure and without recompiling.

Layouts are built on the host from concrete index arrays (`from_csr`); only
`with_values` and `spmv` run under `jit`.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .stats import layout_stats


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


def csr_stats(csr: CSR) -> dict:
    """Stats of the CSR layout (entries, columns, row pointers)."""
    it = csr.data.dtype.itemsize
    mbytes = csr.nnz * (it + 4) + 4 * (csr.shape[0] + 1)
    return layout_stats("csr", csr.nnz, csr.nnz, mbytes, csr.shape, it)
