"""`SparseModel`: the transition matrix of an `ExplicitModel` on the device.

Rows are choices (one per state for DTMCs/CTMCs), columns states. An MDP's
choices are grouped by state: they are consecutive rows, `group_ids` gives
the state of each choice and `groups` (a `GroupIndex`, `jaxmc.layout.grouped`)
the same grouping as row pointers, for the per-state min/max.

Static: `n_states`, `n_choices`, the layout kind and its block shapes, the
group width. Dynamic: values, index arrays. `with_values` swaps the entry
values (e.g. a row mask or new parameters) without recompiling.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ..explore.model import ExplicitModel
from .build import Layout, make_layout
from .csr import CSR
from .grouped import GroupIndex, group_index, group_reduce


class SparseModel(eqx.Module):
    """Device transition structure.

    - `csr`: the matrix in CSR (always kept: masks and diagonals use it).
    - `matrix`: the layout used by `spmv` (may be `csr` itself).
    - `group_ids`: the state of each choice (row).
    - `groups`: the same grouping for `group_reduce`'s gather (`GroupIndex`,
      from `group_index(choice_ptr)`), or `None`: `segment_min`/`segment_max`
      over `group_ids`.
    """

    csr: CSR
    matrix: Layout
    group_ids: Int[Array, " m"]
    n_states: int = eqx.field(static=True)
    n_choices: int = eqx.field(static=True)
    nondeterministic: bool = eqx.field(static=True)
    groups: GroupIndex | None = None

    def with_values(self, vals: Float[Array, " nnz"]) -> SparseModel:
        """Same structure, new entry values (CSR order)."""
        csr = self.csr.with_values(vals)
        matrix = csr if isinstance(self.matrix, CSR) else self.matrix.with_values(vals)
        return eqx.tree_at(lambda m: (m.csr, m.matrix), self, (csr, matrix))

    def group_reduce(self, v: Float[Array, " m"], op: str) -> Float[Array, " n"]:
        """Min or max (`op`) of per-choice values over each state's choices;
        the identity for DTMC/CTMC."""
        if not self.nondeterministic:
            return v
        return group_reduce(v, self.group_ids, self.n_states, op, groups=self.groups)


def from_arrays(
    choice_ptr, row_ptr, col, val, *, nondeterministic: bool, kind: str = "csr"
) -> SparseModel:
    """From raw row-grouped CSR host arrays."""
    choice_ptr = np.asarray(choice_ptr, dtype=np.int64)
    n = len(choice_ptr) - 1
    m = len(row_ptr) - 1
    csr = CSR.from_arrays(row_ptr, col, val, (m, n))
    groups = np.repeat(np.arange(n), np.diff(choice_ptr))
    return SparseModel(
        csr=csr,
        matrix=make_layout(csr, kind),
        group_ids=jnp.asarray(groups, dtype=jnp.int32),
        n_states=n,
        n_choices=m,
        nondeterministic=nondeterministic,
        groups=group_index(choice_ptr) if nondeterministic else None,
    )


def from_model(model: ExplicitModel, kind: str = "csr") -> SparseModel:
    """The device matrix of `model` (rates for a CTMC)."""
    return from_arrays(
        model.choice_ptr,
        model.row_ptr,
        model.col,
        model.val,
        nondeterministic=model.is_nondeterministic,
        kind=kind,
    )
