"""Parameter values as the differentiable path takes them: checked to be
numbers (`check_values`), and read as floats where they are concrete
(`concrete`: where to build the state space)."""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import SemanticError


def concrete(v) -> float | None:
    """`float(v)` for a concrete scalar, None for an abstract tracer. Under
    eager `jax.grad`/`jax.jvp` the tracer's primal is concrete and used (only
    to choose where to build the state space; nothing is differentiated
    through it)."""
    for _ in range(16):
        try:
            return float(np.asarray(v))
        except (
            TypeError,
            jax.errors.ConcretizationTypeError,
            jax.errors.TracerArrayConversionError,
        ):
            pass
        v = getattr(v, "primal", None)
        if v is None:
            return None
    return None


def check_values(params, batch: bool = False) -> None:
    """Every value of `params` is a number (or, with `batch`, an array of
    numbers), a JAX tracer included."""
    if not isinstance(params, Mapping):
        raise SemanticError(
            f"`params` should be a mapping name -> value, not {type(params).__name__}",
            hint='e.g. params={"p": 0.3}',
        )
    for k, v in params.items():
        if isinstance(v, jax.core.Tracer):
            ok = jnp.issubdtype(v.dtype, jnp.number) and not jnp.issubdtype(
                v.dtype, jnp.bool_
            )
        elif isinstance(v, (str, bytes, bool, np.bool_)) or v is None:
            ok = False
        else:
            try:
                a = np.asarray(v)
            except Exception:  # noqa: BLE001 - anything numpy cannot read is not a number
                ok = False
            else:
                ok = a.dtype.kind in "iuf" and (batch or a.ndim == 0)
        if not ok:
            what = "a number or an array of numbers" if batch else "a number"
            raise SemanticError(f"parameter `{k}`: expected {what}, got {v!r}")
