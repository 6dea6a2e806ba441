"""ELLPACK layouts: `ELL` (every row padded to the longest) and `SlicedELL`
(rows in slices of `SLICE`, each slice padded to its own longest row).
Plain-JAX gathers and reductions, no kernel of their own."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .csr import CSR
from .stats import layout_stats, real_entries


#: Rows per slice of the sliced ELL layout (a warp).
SLICE = 32


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
        stored = int(self.data.size)
        nnz = real_entries([np.asarray(self.slot)])
        it = self.data.dtype.itemsize
        return layout_stats("ell", nnz, stored, stored * (it + 4), self.shape, it)


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
        slots = [np.asarray(s).ravel() for s in self.slot]
        stored = sum(s.size for s in slots)
        nnz = real_entries(slots)
        it = self.data[0].dtype.itemsize if self.data else 8
        return layout_stats(
            "sell", nnz, stored, stored * (it + 4) + 4 * self.shape[0], self.shape, it
        )
