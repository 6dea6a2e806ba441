"""`spmv(matrix, x) -> y`: the one entry point for sparse matrix-vector
products, dispatching on the layout type. These are the plain-JAX reference
implementations; faster kernels (Pallas) register further layouts here."""

from __future__ import annotations

import functools as ft

import jax
import jax.numpy as jnp

from ..layout._matrix import CSR, ELL, SlicedELL


@ft.singledispatch
def spmv(matrix, x):
    """`y = matrix @ x` for a layout from `jaxmc.layout`."""
    raise TypeError(f"`spmv` has no implementation for {type(matrix).__name__}")


@spmv.register
def _(matrix: CSR, x):
    prod = matrix.data * x[matrix.indices]
    return jax.ops.segment_sum(
        prod, matrix.row_ids, num_segments=matrix.shape[0], indices_are_sorted=True
    )


@spmv.register
def _(matrix: ELL, x):
    return jnp.sum(matrix.data * x[matrix.cols], axis=0)


@spmv.register
def _(matrix: SlicedELL, x):
    parts = [
        jnp.sum(d * x[c], axis=1).reshape(-1) for d, c in zip(matrix.data, matrix.cols)
    ]
    return jnp.concatenate(parts)[matrix.perm]
