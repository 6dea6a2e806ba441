"""Multi-vector SpMV and fused solver steps: `k` right-hand sides per pass
over the matrix, the building block of batched Jacobi / power iterations
(several parameter points, initial vectors or reward structures at once).

Vectors are `[n, k]`, row-major: the `k` values of one state are
contiguous, so the gather `X[col, :]` of a non-zero is one contiguous read
(`spmv_multi_pallas` says why this order). `k` is static (a shape): each
`k` compiles once, and new values of the same shape never retrace.

- `spmv_multi(matrix, x)`: `A @ x` for every layout of `jaxmc.layout`;
  `jaxmc.kernels.spmv` forwards `[n, k]` inputs here.
- `power_step_multi(A, b, x, relative)`: `x' = A x + b`;
- `jacobi_step_multi(A, inv, b, x, relative)`: `x' = (b + A x) * inv`;

both return `(x', diff, finite)` with `diff[j]` PRISM's `sup_norm` of
column `j` (`max_i |x'_ij - x_ij|`, divided by `|x'_ij|` when relative)
and `finite[j]` whether column `j` of `x'` is all finite, so a batched
solver can stop (or freeze) each column on its own. `b` and `inv` are
`[n]` arrays or `CompactVector`s shared by all columns, `[n, k]` arrays
(one per column), or (`b` only) `None` for zero.

`impl` as in `spmv`: `"pallas"` runs the Triton kernel (full-warp
`WarpELL` / `CompactWarpELL` layouts; interpret mode off the GPU), where
the step and its per-column measures come out of one pass; `"reference"`
is plain JAX for every layout; `"auto"` takes the kernel on a GPU where
it exists and plain JAX otherwise (half-warp, row-sorted and CSR-vector
layouts have no multi-vector kernel yet).

Measured (the "Multi-vector SpMV" benchmark): the warp kernel's cost per
vector falls as `k` grows, but from k=4 on the plain-JAX path of the ELL
layout (`make_layout(csr, "ell")`, `impl="reference"`) is faster still;
prefer it for wide batches until the kernel's tiling is tuned.
"""

from __future__ import annotations

import functools as ft

import jax
import jax.numpy as jnp

from ..layout.compact import CompactVector
from ..layout.csr import CSR
from ..layout.ell import ELL, SlicedELL
from ..layout.partition import PartitionedCSR
from ..layout.vector import VectorCSR
from ..layout.warp import CompactWarpELL, WarpELL
from .impl import on_gpu, use_pallas_multi as use_pallas_multi
from .norms import sup_norm_columns as sup_norm_columns
from .sharded import partitioned_spmv


def fused_multi(*args, **kwargs):
    """`spmv_multi_pallas.fused_multi`, imported on first use (Pallas is
    not loaded with `jaxmc`)."""
    from .spmv_multi_pallas import fused_multi as f

    return f(*args, **kwargs)


def _as2d(x):
    x = jnp.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"`x` must have shape [n, k], not {x.shape}")
    return x


def _gathered(data, x, cols):
    """`data[..., None] * x[cols]`, padding (value 0) contributing exact
    zeros even where the gathered `x` is not finite."""
    g = x.astype(data.dtype)[cols]
    return jnp.where(data[..., None] == 0, 0, data[..., None] * g)


@ft.singledispatch
def _reference(matrix, x):
    raise TypeError(
        f"`spmv` has no multi-vector implementation for {type(matrix).__name__}"
    )


@_reference.register
def _(matrix: CSR, x):
    prod = matrix.data[:, None] * x[matrix.indices]
    return jax.ops.segment_sum(
        prod, matrix.row_ids, num_segments=matrix.shape[0], indices_are_sorted=True
    )


@_reference.register
def _(matrix: ELL, x):
    return jnp.sum(matrix.data[..., None] * x[matrix.cols], axis=0)


@_reference.register
def _(matrix: SlicedELL, x):
    k = x.shape[1]
    parts = [
        jnp.sum(d[..., None] * x[c], axis=1).reshape(-1, k)
        for d, c in zip(matrix.data, matrix.cols)
    ]
    return jnp.concatenate(parts)[matrix.perm]


def _segmented(matrix, x):
    prod = _gathered(matrix.data, x, matrix.cols)
    return jax.ops.segment_sum(prod, matrix.rows, num_segments=matrix.shape[0])


_reference.register(WarpELL, _segmented)
_reference.register(CompactWarpELL, _segmented)
_reference.register(VectorCSR, _segmented)
_reference.register(PartitionedCSR, partitioned_spmv)


def spmv_multi(matrix, x, *, impl: str = "auto"):
    """`Y = A X` for `X` of shape `[n, k]`: one pass over the matrix for all
    `k` columns (`k` accumulators per row). Returns `[rows, k]`."""
    x = _as2d(x)
    if use_pallas_multi(matrix, impl):
        return fused_multi(matrix, x, interpret=not on_gpu())
    return _reference(matrix, x)


# ---------------------------------------------------------------- fused steps


def _dense(v):
    if v is None:
        return None
    v = v.dense() if isinstance(v, CompactVector) else jnp.asarray(v)
    return v[:, None] if v.ndim == 1 else v


def _finish(y, x, relative, measure):
    if not measure:
        return y, None, None
    return y, sup_norm_columns(y, x, relative), jnp.all(jnp.isfinite(y), axis=0)


def _pallas(A, x, b, inv, epilogue, relative, measure):
    interpret = not on_gpu()
    if not measure:
        y = fused_multi(A, x, b, inv, epilogue=epilogue, interpret=interpret)
        return y.astype(x.dtype), None, None
    y, d, nb = fused_multi(
        A,
        x,
        b,
        inv,
        epilogue=epilogue,
        relative=relative,
        diff=True,
        interpret=interpret,
    )
    return y.astype(x.dtype), d.astype(x.dtype), nb == 0


def power_step_multi(
    A, b, x, relative: bool, *, impl: str = "auto", measure: bool = True
):
    """`(x', diff[k], finite[k])` with `x' = A x + b` for `x` of shape
    `[n, k]` (`measure=False`: `(x', None, None)`, the step alone)."""
    x = _as2d(x)
    if use_pallas_multi(A, impl):
        return _pallas(A, x, b, None, "power", relative, measure)
    y = _reference(A, x.astype(_dtype(A)))
    y = (y if b is None else y + _dense(b)).astype(x.dtype)
    return _finish(y, x, relative, measure)


def jacobi_step_multi(
    A, inv, b, x, relative: bool, *, impl: str = "auto", measure: bool = True
):
    """`(x', diff[k], finite[k])` with `x' = (b + A x) * inv` for `x` of
    shape `[n, k]`: the Jacobi step of `(D - A) x = b`, `inv = 1 / D`
    (`[n]`, `CompactVector` or `[n, k]`)."""
    x = _as2d(x)
    if use_pallas_multi(A, impl):
        return _pallas(A, x, b, inv, "jacobi", relative, measure)
    y = _reference(A, x.astype(_dtype(A)))
    y = ((y if b is None else y + _dense(b)) * _dense(inv)).astype(x.dtype)
    return _finish(y, x, relative, measure)


def _dtype(A):
    if isinstance(A, CompactWarpELL):
        return A.table.dtype
    if isinstance(A, SlicedELL):
        return A.data[0].dtype if A.data else jnp.float64
    return A.data.dtype
