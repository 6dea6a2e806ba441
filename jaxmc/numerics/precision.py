"""Precision (`SolveOptions.precision`, one of `PRECISIONS`): "fp64" (the default) or
"fp32", the float type of the matrix values and the iterate during the
iterative solves of `solve_fixed` (the SpMV and the Jacobi, power, value
and interval iteration loops; BiCGStab is refused in fp32, see
`solve_fixed`). fp32 halves the bytes the SpMV moves; the graph
precomputation, the masking and the results stay float64. fp32 rounds at
~6e-8 relative, so its values agree with fp64 to ~1e-5 relative, not to
PRISM's 1e-6, and it takes no `epsilon` below `FP32_MIN_EPSILON`.
Gauss-Seidel runs on the host in float64 whatever the precision.
`NumericResult.extra["precision"]` says which precision a solve ran in.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..options import (
    FP32_MIN_EPSILON as FP32_MIN_EPSILON,
    PRECISIONS as PRECISIONS,
    OptionsError,
    check_fp32_epsilon,
)


def check_precision(precision: str, epsilon: float | None = None) -> str:
    """Validate `precision` and, for "fp32", that `epsilon` is reachable
    (`SolveOptions` does this once; this is for the direct callers)."""
    if precision not in PRECISIONS:
        raise OptionsError(
            f"unknown `precision` {precision!r}", hint=f"one of {PRECISIONS}"
        )
    if precision == "fp32" and epsilon is not None:
        check_fp32_epsilon(epsilon)
    return precision


def to_precision(tree, precision: str):
    """`tree` (an array, a layout matrix, a `SparseModel`) with its floating
    arrays in `precision`; unchanged (the same object) for "fp64"."""
    if precision == "fp64":
        return tree

    def cast(leaf):
        is_array = isinstance(leaf, (jax.Array, np.ndarray))
        if is_array and jnp.issubdtype(leaf.dtype, jnp.floating):
            return jnp.asarray(leaf, jnp.float32)
        return leaf

    return jax.tree_util.tree_map(cast, tree)
