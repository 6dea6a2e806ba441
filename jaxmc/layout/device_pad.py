"""Size buckets for the device builders: arrays padded up to one of a few
sizes per power of two, so that models of similar size share one
compilation of every jitted builder (`jaxmc.layout.device_warp`,
`jaxmc.numerics.graph_device`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def bucket(size: int) -> int:
    """`size` rounded up to one of eight sizes per power of two (at most
    12.5% more; 8 for the smallest)."""
    if size <= 8:
        return 8
    step = 1 << max(int(size).bit_length() - 4, 0)
    return -(-int(size) // step) * step


def pad_tail(a, size: int, fill, last=None):
    """`a` (numpy or JAX, 1-D) extended to length `size` with `fill`, the
    final element `last` where given; numpy stays numpy."""
    xp = jnp if isinstance(a, jax.Array) else np
    extra = size - a.shape[0] - (last is not None)
    if extra < 0:
        raise ValueError(f"cannot pad an array of {a.shape[0]} to {size}")
    tail = [xp.full(extra, fill, a.dtype)]
    if last is not None:
        tail.append(xp.full(1, last, a.dtype))
    return xp.concatenate([a, *tail])
