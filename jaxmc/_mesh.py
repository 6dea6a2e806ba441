"""The one-axis device mesh that `devices=` names, shared by the stages
that split work over devices (the partitioned explorer, the partitioned
layouts and solves)."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import Mesh

from .options import OptionsError


def make_mesh(devices, axis: str) -> Mesh | None:
    """The 1-D mesh (axis `axis`) of `devices`: a count (the first `devices`
    of `jax.devices()`), a sequence of `jax.Device`s or a `Mesh` (flattened
    to one axis). None (one device, no partition) for None. A count or
    sequence jaxmc cannot use is an `OptionsError` (a `ValueError`); another
    type a `TypeError`."""
    if devices is None:
        return None
    if isinstance(devices, Mesh):
        flat = tuple(devices.devices.reshape(-1))
    elif isinstance(devices, (int, np.integer)) and not isinstance(devices, bool):
        have = jax.devices()
        if not 1 <= int(devices) <= len(have):
            raise OptionsError(
                f"{int(devices)} devices asked for, {len(have)} available "
                f"({jax.default_backend()}; simulated CPU devices: "
                "XLA_FLAGS=--xla_force_host_platform_device_count=N before "
                "JAX starts)",
                hint="devices=N with N at most len(jax.devices())",
            )
        flat = tuple(have[: int(devices)])
    elif isinstance(devices, Sequence) and all(
        isinstance(d, jax.Device) for d in devices
    ):
        flat = tuple(devices)
        if not flat or len(set(flat)) != len(flat):
            raise OptionsError("`devices` must be distinct devices, at least one")
    else:
        raise TypeError(
            "`devices` is a count, a sequence of jax.Device or a jax.sharding.Mesh, "
            f"not {type(devices).__name__}"
        )
    return Mesh(np.array(flat, dtype=object), (axis,))
