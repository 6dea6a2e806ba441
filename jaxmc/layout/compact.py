"""Compact storage: the narrowest integer type for a range of indices or
offsets (`narrow_int`), and `CompactVector`, a vector stored as a table of
its distinct values and a narrow index per entry."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int


def narrow_int(lo: int, hi: int, signed: bool = True):
    """The narrowest integer dtype holding `[lo, hi]`."""
    kinds = (
        (np.int8, np.int16, np.int32) if signed else (np.uint8, np.uint16, np.uint32)
    )
    for t in kinds:
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max:
            return t
    return np.int64


class CompactVector(eqx.Module):
    """A vector stored as `table[idx]`: a table of its distinct values and a
    narrow index per entry. For the Jacobi diagonal and right-hand side, which
    usually take few distinct values."""

    table: Float[Array, " t"]
    idx: Int[Array, " n"]

    @classmethod
    def from_array(cls, v, dtype=jnp.float64) -> CompactVector:
        v = np.asarray(v)
        table, idx = np.unique(v, return_inverse=True)
        return cls(
            table=jnp.asarray(table, dtype=dtype),
            idx=jnp.asarray(idx.astype(narrow_int(0, max(len(table) - 1, 0), False))),
        )

    def dense(self):
        return self.table[self.idx.astype(jnp.int32)]

    def map(self, f) -> CompactVector:
        """`f` applied elementwise (on the table only)."""
        return eqx.tree_at(lambda c: c.table, self, f(self.table))

    @property
    def shape(self):
        return self.idx.shape

    def nbytes(self) -> int:
        return int(
            self.table.size * self.table.dtype.itemsize
            + self.idx.size * self.idx.dtype.itemsize
        )
