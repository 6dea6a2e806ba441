"""The device matrices of a model: layouts built from host arrays.

Layouts (`SolveOptions.layout`): every iterative solve runs its SpMV on the
device matrix named by `layout`, one of `LAYOUTS`. `"auto"` is CSR on a CPU (XLA:CPU's
`segment_sum` is best there) and `jaxmc.layout.layout_kind` on a GPU (the
warp-segment layouts, which the solvers run through the fused Pallas
kernels). The compact layouts tabulate their values when they are built, so
they are rebuilt for each solve from the (host) masked values (on the device
where `jaxmc.layout.device_build()`: large matrices on a GPU; the warp and vector
layouts and the window reordering too); "auto" never picks them
(a host build costs seconds on large models), and where they cannot hold
the matrix (not square, more than 65536 distinct values) the warp layout with
the same lanes is used instead. `"dia"` (`jaxmc.layout.CompactDIA`) runs the
solve in PRISM's lexicographic state order, where a model whose reachable
states form a box is a few diagonals (a byte per row and diagonal, no
columns); it applies to the square systems of DTMCs and CTMCs (Jacobi,
power, BiCGStab, the steady-state solves) and falls back to `"compact"`
where the matrix is not a few diagonals in that order (`ordered_dia`) and
for MDPs. It is rebuilt for each solve (on the GPU where there is one:
`ordered_dia`); "auto" picks it on a GPU for the steady-state device solves,
whose system matrices are built per solve anyway (`steady_solve.system_kind`).
`NumericResult.extra["layout"]` says which layout a solve ran on. The
model's own matrix, its layout chosen once, is held by its `DeviceModel`
(`jaxmc.numerics.device`), which records a layout that could not hold a
system in the result (`note_layout`).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..explore.model import ExplicitModel
from ..layout import (
    CSR,
    ELL,
    CompactDIA,
    CompactWarpELL,
    PartitionedCSR,
    Sharded,
    SlicedELL,
    SparseModel,
    VectorCSR,
    WarpELL,
    build_layout,
    device_build,
    group_index,
    layout_kind,
    make_layout,
    ordered_csr,
    ordered_dia,
    partition,
)
from ..options import LAYOUTS, OptionsError


COMPACT = ("compact", "compact2")
#: Layouts built from each solve's values (the device matrix cached per
#: model holds the structure only).
HOST_BUILT = COMPACT + ("dia",)


def check_layout(layout: str) -> str:
    if layout not in LAYOUTS:
        raise OptionsError(
            f"unknown `layout` {layout!r}", hint=f"`layout` is one of {LAYOUTS}"
        )
    return layout


def on_gpu() -> bool:
    return jax.default_backend() == "gpu"


def host_csr(indptr, cols, vals, shape) -> CSR:
    """A `CSR` whose arrays stay numpy (the layouts' host-side builders read
    them without a round trip through the device)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return CSR(
        data=np.asarray(vals, dtype=np.float64),
        indices=np.asarray(cols, dtype=np.int32),
        row_ids=rows.astype(np.int32),
        indptr=indptr.astype(np.int32),
        shape=(int(shape[0]), int(shape[1])),
    )


def build_matrix(indptr, cols, vals, shape, kind: str):
    """Device layout `kind` (not "auto") of the host CSR `(indptr, cols,
    vals)`. A compact layout that cannot hold the matrix falls back to the
    warp layout with the same lanes. A `Sharded` kind: the rows split over
    its mesh (`jaxmc.layout.partition`)."""
    if isinstance(kind, Sharded):
        return partition(indptr, cols, vals, shape, kind.mesh, local=kind.local)
    if kind == "csr":
        return CSR.from_arrays(indptr, cols, vals, shape)
    host = host_csr(indptr, cols, vals, shape)
    if kind == "dia":  # (no state order given here: `build_ordered` takes one)
        kind = "compact"
    if kind in COMPACT:
        return _compact_or_warp(host, kind)
    return make_layout(host, kind)


def _compact_or_warp(csr: CSR, kind: str):
    """The compact layout `kind` of `csr`, or where it cannot hold the
    matrix the warp layout with the same lanes."""
    if csr.shape[0] == csr.shape[1]:
        try:
            return build_layout(csr, kind)
        except ValueError:  # too many distinct values for the table
            pass
    return build_layout(csr, kind.replace("compact", "warp"))


def build_ordered(
    indptr, cols, vals, shape, kind: str, rank=None, fallback: str = "compact"
):
    """`(matrix, order)`: `build_matrix` of the host CSR, reordered first by
    `jaxmc.layout.ordered_csr` where that pays for `kind` (a warp-segment
    layout of a square matrix whose segments carry much padding; the rows
    sorted by length within short windows). `order` is that `Permutation`,
    or None: the caller applies it to every vector of the solve
    (`order.apply`) and undoes it on the result (`order.undo`).

    `kind` "dia": the compact diagonal layout in the order of `rank` (each
    row's lexicographic rank), where the matrix is a few diagonals in it;
    else (or without `rank`) `fallback` ("auto": `layout_kind`'s choice on
    a GPU)."""
    host = None
    if kind == "dia":
        host = host_csr(indptr, cols, vals, shape)
        got = None if rank is None else ordered_dia(host, rank)
        if got is not None:
            return got
        kind = layout_kind(host, "gpu") if fallback == "auto" else fallback
    if kind in COMPACT + ("warp", "warp2") and shape[0] == shape[1]:
        if host is None:
            host = host_csr(indptr, cols, vals, shape)
        B, order = ordered_csr(host, kind)
        if order is not None and device_build(host.nnz):  # (B is on the device)
            return _compact_or_warp(B, kind), order
        if order is not None:
            B = host_csr(B.indptr, B.indices, B.data, shape)
            return build_matrix(B.indptr, B.indices, B.data, shape, kind), order
    return build_matrix(indptr, cols, vals, shape, kind), None


def layout_name(matrix) -> str:
    """The layout name of a device matrix (for a partitioned one its
    `Sharded` kind, which names it and can build another like it)."""
    if isinstance(matrix, SparseModel):
        matrix = matrix.matrix
    if isinstance(matrix, PartitionedCSR):
        return matrix.kind
    if isinstance(matrix, WarpELL):
        return "warp" if matrix.lanes == 1 else "warp2"
    if isinstance(matrix, CompactWarpELL):
        return "compact" if matrix.lanes == 1 else "compact2"
    if isinstance(matrix, VectorCSR):
        return "vector"
    if isinstance(matrix, CompactDIA):
        return "dia"
    names = {CSR: "csr", ELL: "ell", SlicedELL: "sell"}
    return names.get(type(matrix), type(matrix).__name__)


def sparse_model(
    choice_ptr, row_ptr, col, val, *, nondeterministic: bool, kind: str = "csr"
) -> SparseModel:
    """A `SparseModel` from host arrays with its matrix in layout `kind`
    (for a compact kind the structure only: `valued` builds the matrix)."""
    choice_ptr = np.asarray(choice_ptr, dtype=np.int64)
    n, m = len(choice_ptr) - 1, len(row_ptr) - 1
    csr = CSR.from_arrays(row_ptr, col, val, (m, n))
    if isinstance(kind, Sharded):
        matrix = partition(
            row_ptr, col, val, (m, n), kind.mesh, choice_ptr, local=kind.local
        )
    elif kind in HOST_BUILT + ("csr",):
        matrix = csr
    elif kind in ("warp", "warp2", "vector") and device_build(csr.nnz):
        matrix = build_layout(csr, kind)  # from the CSR already on the device
    else:
        matrix = build_matrix(row_ptr, col, val, (m, n), kind)
    return SparseModel(
        csr=csr,
        matrix=matrix,
        group_ids=jnp.asarray(
            np.repeat(np.arange(n), np.diff(choice_ptr)), dtype=jnp.int32
        ),
        n_states=n,
        n_choices=m,
        nondeterministic=nondeterministic,
        groups=group_index(choice_ptr) if nondeterministic else None,
    )


def host_structure(model: ExplicitModel, M: SparseModel | None = None):
    """`(state of each choice, row of each entry, column of each entry,
    row pointers)` on the host: from the model's arrays, or from `M`."""
    if M is None:
        return (
            model.state_of_choice(),
            model.row_of_entry(),
            np.asarray(model.col),
            np.asarray(model.row_ptr),
        )
    return (
        np.asarray(M.group_ids),
        np.asarray(M.csr.row_ids),
        np.asarray(M.csr.indices),
        np.asarray(M.csr.indptr),
    )


def valued(M: SparseModel, kind: str, vals, indptr=None, cols=None) -> SparseModel:
    """`M` with entry values `vals` (host, CSR order) on layout `kind`: the
    compact layouts are built from them on the host (`indptr`, `cols`: the
    host structure), the others take them by `with_values` on the device."""
    if kind not in HOST_BUILT:
        return M.with_values(jnp.asarray(vals))
    kind = "compact" if kind == "dia" else kind  # (a non-square or MDP system)
    if indptr is None:
        _, _, cols, indptr = host_structure(None, M)
    mat = build_matrix(indptr, cols, vals, M.csr.shape, kind)
    return eqx.tree_at(
        lambda m: (m.csr, m.matrix), M, (M.csr.with_values(jnp.asarray(vals)), mat)
    )


def square_matrix(M: SparseModel, kind: str, vals, indptr, cols, rank=None):
    """`(matrix, order)` of a DTMC/CTMC system with entry values `vals`:
    `valued`'s matrix and None, or for "dia" `build_ordered`'s diagonal
    layout in the lexicographic order of `rank` and that `Permutation`."""
    if kind == "dia":
        return build_ordered(indptr, cols, vals, M.csr.shape, "dia", rank)
    return valued(M, kind, vals, indptr, cols).matrix, None


def undo_order(sol, order):
    """A solver's solution with its value back in the model's numbering
    (`order` a `Permutation`, or None)."""
    if order is None:
        return sol
    return eqx.tree_at(lambda s: s.value, sol, order.undo(sol.value))
