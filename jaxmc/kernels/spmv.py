"""`spmv(matrix, x) -> y`: the one entry point for sparse matrix-vector
products, dispatching on the layout type.

`impl` picks the implementation: `"reference"` (plain JAX, every layout),
`"pallas"` (the Triton kernel of `spmv_pallas`, warp-segment and CSR-vector
layouts only; run in interpret mode when JAX's backend is not a GPU, as the
tests do) or
`"auto"` (Pallas on a GPU, plain JAX elsewhere). The choice is static: it is
made at trace time, so the solvers' loops compile one kernel.

`x` of shape `[n, k]` (k right-hand sides, row-major) goes to
`jaxmc.kernels.multi.spmv_multi`: one pass over the matrix for all columns."""

from __future__ import annotations

import functools as ft

import jax
import jax.numpy as jnp

from ..layout.csr import CSR
from ..layout.dia import CompactDIA, dia_reference_spmv
from ..layout.ell import ELL, SlicedELL
from ..layout.partition import PartitionedCSR
from ..layout.vector import VectorCSR, vector_reference_spmv
from ..layout.warp import CompactWarpELL, WarpELL, reference_spmv
from .impl import IMPLS as IMPLS, on_gpu as on_gpu, use_pallas as use_pallas
from .multi import spmv_multi
from .sharded import partitioned_spmv


@ft.singledispatch
def spmv(matrix, x, *, impl: str = "auto"):
    """`y = matrix @ x` for a layout from `jaxmc.layout`; `x` is `[n]` or
    `[n, k]` (then `y` is `[rows, k]`)."""
    raise TypeError(f"`spmv` has no implementation for {type(matrix).__name__}")


def _multi(matrix, x, impl):
    return spmv_multi(matrix, x, impl=impl)


@spmv.register
def _(matrix: CSR, x, *, impl: str = "auto"):
    if jnp.ndim(x) == 2:
        return _multi(matrix, x, impl)
    use_pallas(matrix, impl)
    prod = matrix.data * x[matrix.indices]
    return jax.ops.segment_sum(
        prod, matrix.row_ids, num_segments=matrix.shape[0], indices_are_sorted=True
    )


@spmv.register
def _(matrix: ELL, x, *, impl: str = "auto"):
    if jnp.ndim(x) == 2:
        return _multi(matrix, x, impl)
    use_pallas(matrix, impl)
    return jnp.sum(matrix.data * x[matrix.cols], axis=0)


@spmv.register
def _(matrix: SlicedELL, x, *, impl: str = "auto"):
    if jnp.ndim(x) == 2:
        return _multi(matrix, x, impl)
    use_pallas(matrix, impl)
    parts = [
        jnp.sum(d * x[c], axis=1).reshape(-1) for d, c in zip(matrix.data, matrix.cols)
    ]
    return jnp.concatenate(parts)[matrix.perm]


def _warp(matrix, x, *, impl: str = "auto"):
    if jnp.ndim(x) == 2:
        return _multi(matrix, x, impl)
    if use_pallas(matrix, impl):
        from .spmv_pallas import fused

        return fused(matrix, x, interpret=not on_gpu())
    if isinstance(matrix, VectorCSR):
        return vector_reference_spmv(matrix, x)
    if isinstance(matrix, CompactDIA):
        return dia_reference_spmv(matrix, x)
    return reference_spmv(matrix, x)


spmv.register(WarpELL, _warp)
spmv.register(CompactWarpELL, _warp)
spmv.register(VectorCSR, _warp)
spmv.register(CompactDIA, _warp)


@spmv.register
def _(matrix: PartitionedCSR, x, *, impl: str = "auto"):
    use_pallas(matrix, impl)  # (no Pallas kernel: only "pallas" refuses)
    return partitioned_spmv(matrix, x)
