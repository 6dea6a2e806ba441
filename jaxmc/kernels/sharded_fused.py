"""Fused solver steps on an extended row-partitioned matrix
(`jaxmc.layout.PartitionedCSR` with `extended`: a square matrix whose
devices' rows are each one warp-segment matrix over the extended iterate
`[own block | halo]`, the halo rows the identity).

The iterate of such a solve is kept *extended*: `[D E]`, device `d`'s `E =
B + H` entries its own block followed by its halo, split over the mesh.
A step is then, on each device, the single-device fused kernel of one GPU
(`spmv_pallas.fused`: `x' = A x + b` or `(b + A x) * inv` and PRISM's
change measure in one pass over the matrix and the vectors) on the
extended iterate as it is, followed by the halo's refresh: each device
sends the entries of its new block that its neighbours read (`ppermute`,
or an all-gather for the "gather" plan) and writes what it receives over
its halo in place. The identity rows copy the halo, so they neither change
it nor count in the measure; the measure is one `pmax` over the devices.

Against the split product of `jaxmc.kernels.sharded` (the kernel writes
`A x`, then XLA adds `b`, scales and measures in a second pass over the
vectors), a step reads and writes each vector once, as on one device; the
exchange (the halo's few entries at BFS-ordered models' block boundaries)
waits for the step instead of overlapping it.

`extend(A, v, fill)` makes an extended vector (the halo exchanged, or
`fill`), `restrict(A, ve)` takes the states' entries back, and
`step(A, b, inv, x, epilogue, relative)` is one step (`b`, `inv` and `x`
extended). The solvers (`jaxmc.solvers._linear`) use them for Jacobi and
power iteration when `is_extended(A)`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from ..layout.partition import AXIS, PartitionedCSR, sharding
from .fused import jacobi_step, power_step
from .impl import use_pallas
from .sharded import halo_fn, shard_map


EPILOGUES = ("power", "jacobi")


def is_extended(A) -> bool:
    """Whether `A` is an extended `PartitionedCSR` (module docstring)."""
    return isinstance(A, PartitionedCSR) and A.extended


def uses_pallas(A: PartitionedCSR) -> bool:
    """Whether each device's step is the Pallas kernel (on a GPU)."""
    return use_pallas(A.inner.local(), "auto")


def width(A: PartitionedCSR) -> int:
    """`E`: each device's entries of an extended vector."""
    return int(A.inner.shape[0])


def _split(a) -> P:
    """The `shard_map` spec of a `[D, ...]` array split by device."""
    return P(AXIS, *([None] * (a.ndim - 1)))


def extend(A: PartitionedCSR, v, fill=None):
    """The extended vector (`[D E]`, split) of the state vector `v` (`[n]`):
    each device's block, then its halo, exchanged from the other devices
    (`fill` None) or `fill` everywhere (for `b` and `inv`, whose halo
    entries the identity rows must see as 0 and 1)."""
    D, B, E = A.num_devices, A.block, width(A)
    n = A.shape[1]
    v = jnp.asarray(v)
    vp = lax.with_sharding_constraint(jnp.pad(v, (0, D * B - n)), sharding(A.mesh))
    plan, halo = halo_fn(A)

    def local(vb, *arrays):
        h = halo(vb, *arrays) if fill is None else jnp.zeros((0,), vb.dtype)
        # (a plan without exchange, e.g. switched off to time one: `fill`)
        pad = jnp.full((E - B - h.shape[0],), 0.0 if fill is None else fill, vb.dtype)
        return jnp.concatenate([vb, h, pad])

    specs = (P(AXIS),) + tuple(_split(a) for a in plan)
    return shard_map(local, A.mesh, in_specs=specs, out_specs=P(AXIS))(vp, *plan)


def restrict(A: PartitionedCSR, ve):
    """The state vector (`[n]`) of the extended vector `ve`."""
    D, B = A.num_devices, A.block
    return ve.reshape(D, width(A))[:, :B].reshape(-1)[: A.shape[1]]


def step(A: PartitionedCSR, b, inv, x, epilogue: str, relative: bool, measure=True):
    """`(x', sup_norm(x', x), all finite)` of one step on the extended
    iterate `x`: `x' = A x + b` ("power") or `(b + A x) * inv` ("jacobi");
    `b` (None: zero) and `inv` extended vectors. With `measure=False`,
    `(x', None, None)`."""
    if epilogue not in EPILOGUES:
        raise ValueError(f"epilogue {epilogue!r}: expected one of {EPILOGUES}")
    if epilogue == "jacobi" and inv is None:
        raise ValueError("the Jacobi step needs `inv`")
    B = A.block
    plan, halo = halo_fn(A)
    pallas = uses_pallas(A)
    vecs = tuple(v for v in (b, inv) if v is not None)

    impl = "pallas" if pallas else "reference"

    def local(inner, xe, *rest):
        W = inner.local()
        bl = rest[0] if b is not None else None
        il = rest[len(vecs) - 1] if inv is not None else None
        arrays = rest[len(vecs) :]
        # one device's fused step (`jaxmc.kernels.fused`) on its rows
        if epilogue == "jacobi":
            y, d, ok = jacobi_step(W, il, bl, xe, relative, impl=impl, measure=measure)
        else:
            y, d, ok = power_step(W, bl, xe, relative, impl=impl, measure=measure)
        h = halo(y[:B], *arrays).astype(y.dtype)
        if h.shape[0]:  # the halo of the new iterate, over the identity rows' copy
            y = lax.dynamic_update_slice(y, h, (B,))
        if not measure:
            return y
        return y, lax.pmax(d, AXIS), lax.pmin(ok.astype(jnp.int32), AXIS)

    vec = P(AXIS)
    specs = (jax.tree.map(_split, A.inner), vec) + (vec,) * len(vecs)
    specs += tuple(_split(a) for a in plan)
    out_specs = (vec, P(), P()) if measure else vec
    f = shard_map(local, A.mesh, in_specs=specs, out_specs=out_specs)
    out = f(A.inner, x, *vecs, *plan)
    if not measure:
        return out, None, None
    y, d, ok = out
    return y, d, ok == 1
