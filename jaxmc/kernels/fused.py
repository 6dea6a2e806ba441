"""Fused solver steps: one iteration and its convergence measure in one pass.

Each step returns `(x_new, diff, finite)`: the new iterate, PRISM's
`sup_norm(x_new, x, relative)` and whether `x_new` is all finite. On the
warp-segment layouts with the Pallas kernel the three come out of the same
pass over the matrix and vectors; elsewhere they are computed in plain JAX
(XLA fuses the reduction into the elementwise epilogue, but the SpMV itself
is a separate pass).

- `jacobi_step`: `x' = (b + A x) * inv`, the Jacobi step for
  `(D - A) x = b` with `inv = 1 / D` (inverted once, outside the loop);
- `power_step`: `x' = A x + b`;
- `bellman_step`: `x'_s = opt_{c in s} (b_c + (A x)_c)` for a `SparseModel`
  (MDP choices grouped by state; the SpMV and `b` in the kernel, the group
  min/max and the measure in plain JAX).

`b` and `inv` may be arrays or `jaxmc.layout.CompactVector`s; `b` may also
be `None` for zero (the steady-state system), which the Pallas kernel then
does not read at all.
"""

from __future__ import annotations

import jax.numpy as jnp

from ..layout.compact import CompactVector
from .impl import on_gpu, use_pallas
from .norms import sup_norm
from .spmv import spmv


def _dense(v):
    return v.dense() if isinstance(v, CompactVector) else v


def _plus(y, b):
    return y if b is None else y + _dense(b)


def _finish(y, x, relative):
    return y, sup_norm(y, x, relative), jnp.all(jnp.isfinite(y))


def _pallas(A, x, b, inv, epilogue, relative, measure=True):
    from .spmv_pallas import fused

    if not measure:
        y = fused(A, x, b, inv, epilogue=epilogue, interpret=not on_gpu())
        return y.astype(x.dtype), None, None
    y, d, nf = fused(
        A,
        x,
        b,
        inv,
        epilogue=epilogue,
        relative=relative,
        diff=True,
        interpret=not on_gpu(),
    )
    return y.astype(x.dtype), d.astype(x.dtype), nf == 0


def jacobi_step(
    A, inv, b, x, relative: bool, *, impl: str = "auto", measure: bool = True
):
    """`(x', sup_norm(x', x), all finite)` with `x' = (b + A x) * inv`.
    With `measure=False`, `(x', None, None)`: the step alone (the fused
    kernel then neither reads `x` row-wise nor reduces)."""
    if use_pallas(A, impl):
        return _pallas(A, x, b, inv, "jacobi", relative, measure)
    y = _plus(spmv(A, x, impl=impl), b) * _dense(inv)
    return _finish(y, x, relative) if measure else (y, None, None)


def power_step(A, b, x, relative: bool, *, impl: str = "auto", measure: bool = True):
    """`(x', sup_norm(x', x), all finite)` with `x' = A x + b` (`measure` as
    in `jacobi_step`)."""
    if use_pallas(A, impl):
        return _pallas(A, x, b, None, "power", relative, measure)
    y = _plus(spmv(A, x, impl=impl), b)
    return _finish(y, x, relative) if measure else (y, None, None)


def bellman_step(M, b, x, opt: str, relative: bool, *, impl: str = "auto"):
    """`(x', sup_norm(x', x), all finite)` with `x'_s = opt_c (b_c + (A x)_c)`
    over the choices `c` of state `s` (identity for DTMCs/CTMCs).

    The group min/max is `SparseModel.group_reduce`: a gather (no scatter)
    when `M.groups` is set, so XLA can fuse it with the measure below
    (much faster per step than a scatter; see `jaxmc.layout.grouped`)."""
    A = M.matrix
    if not M.nondeterministic:
        return power_step(A, b, x, relative, impl=impl)
    if use_pallas(A, impl):
        from .spmv_pallas import fused

        v = fused(A, x, b, None, epilogue="power", interpret=not on_gpu())
    else:
        v = _plus(spmv(A, x, impl=impl), b)
    return _finish(M.group_reduce(v.astype(x.dtype), opt), x, relative)
