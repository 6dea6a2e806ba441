"""PRISM's convergence measure, for one iterate (`sup_norm`) and for the
columns of a batch of iterates (`sup_norm_columns`). It lives with the
kernels because the fused steps compute it in the same pass as the step;
`jaxmc.solvers` re-exports `sup_norm`."""

from __future__ import annotations

import jax.numpy as jnp


def sup_norm(x_new, x_old, relative: bool):
    """PRISM's convergence measure: `max_i |x'_i - x_i|`, divided by `|x'_i|`
    when relative. As in PRISM's sparse engine, a coordinate with no change
    (0/0, including both zero) counts 0, and one that changes to 0 counts
    infinite; identical infinities count 0."""
    diff = jnp.abs(x_new - x_old)
    diff = jnp.where(x_new == x_old, 0.0, diff)
    if relative:
        diff = jnp.where(diff == 0, 0.0, diff / jnp.abs(x_new))
    return jnp.max(diff, initial=0.0)


def sup_norm_columns(x_new, x_old, relative: bool):
    """`[k]`: `sup_norm` of each column of `[n, k]` iterates."""
    diff = jnp.abs(x_new - x_old)
    diff = jnp.where(x_new == x_old, 0.0, diff)
    if relative:
        diff = jnp.where(diff == 0, 0.0, diff / jnp.abs(x_new))
    return jnp.max(diff, axis=0, initial=0.0)
