"""The product of a row-partitioned matrix (`jaxmc.layout.PartitionedCSR`)
with a global vector, under `shard_map` over the matrix's mesh.

`partitioned_spmv(A, x)` takes `x` as a global array (`[n]` or `[n, k]`;
any sharding: inside a jitted solver loop XLA's partitioner keeps it split
by rows as the product's output is), pads it to `D` blocks of `B` rows and
hands each device its block. Each device multiplies its inner rows
(those that read only its own block, so they need not wait for the
exchange), gathers its halo as the matrix's exchange plan says (two
`ppermute`s of exactly the entries the neighbours read, or an `all_gather`
of the whole iterate), multiplies its edge rows and returns its `R` output
rows. Each row's entries are summed in CSR order, as the single-device
product in the same local layout sums them: the same bits.
The global output is the stacked output's first `rows` entries (states as
rows), or for an MDP's choices their places `out_pos`.

So the solvers stay as they are: their `lax.while_loop`s run on global
vectors, the products are partitioned here, and the reductions of the
convergence measure and of Krylov's dot products are partitioned by XLA
(one all-reduce each). With the "warp" local layout each device runs the
single-device warp-segment kernel (`jaxmc.kernels.spmv`: Pallas on a GPU)
on its inner rows, the edge rows in ELL (an MDP's choices), or on all its
rows over the extended iterate `[own block | halo]` (a square matrix:
`PartitionedCSR.extended`; the fused solver steps on it are
`jaxmc.kernels.sharded_fused`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from ..layout.partition import AXIS, PartitionedCSR, sharding
from ..layout.warp import reference_spmv
from .impl import on_gpu, use_pallas


def shard_map(f, mesh, in_specs, out_specs):
    """`jax.shard_map` (or, on a jax without it, the experimental one),
    without the replication check (the halo exchange is by construction
    per device)."""
    sm = getattr(jax, "shard_map", None)
    if sm is not None:
        return sm(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    from jax.experimental.shard_map import shard_map as old  # pragma: no cover

    return old(f, mesh, in_specs, out_specs, check_rep=False)  # pragma: no cover


def halo_fn(A: PartitionedCSR):
    """`(arrays, fn)`: the plan's arrays and `fn(xb, *local arrays) -> the
    device's halo` (`[H]`, the entries after its own block in the extended
    iterate `[own block | halo]`; inside `shard_map`)."""
    h, D = A.halo, A.num_devices
    if h.mode == "neighbour":
        right = [(i, i + 1) for i in range(D - 1)]
        left = [(i + 1, i) for i in range(D - 1)]

        def fn(xb, sl, sr):
            from_left = lax.ppermute(xb[sr[0]], AXIS, right)
            from_right = lax.ppermute(xb[sl[0]], AXIS, left)
            return jnp.concatenate([from_left, from_right])

        return (h.send_left, h.send_right), fn
    if h.mode == "gather":

        def fn(xb, index):
            return lax.all_gather(xb, AXIS, tiled=True)[index[0]]

        return (h.index,), fn
    return (), lambda xb: xb[:0]


def _extend_fn(A: PartitionedCSR):
    """`(arrays, fn)`: as `halo_fn`, `fn` returning `[own block | halo]`."""
    plan, halo = halo_fn(A)
    return plan, lambda xb, *arrays: jnp.concatenate([xb, halo(xb, *arrays)])


def warp_product(w, x):
    """`w @ x` for a device's `WarpELL` (`jaxmc.kernels.spmv`'s product,
    which dispatches to this module: not imported from there)."""
    if x.ndim == 1 and use_pallas(w, "auto"):
        from .spmv_pallas import fused

        return fused(w, x, interpret=not on_gpu())
    if x.ndim == 2:
        return jax.vmap(lambda v: reference_spmv(w, v), in_axes=1, out_axes=1)(x)
    return reference_spmv(w, x)


def partitioned_spmv(A: PartitionedCSR, x):
    """`y = A @ x` for `x` of shape `[n]` or `[n, k]` (module docstring)."""
    x = jnp.asarray(x)
    D, B, R = A.num_devices, A.block, A.local_rows
    m, n = A.shape
    tail = ((0, 0),) * (x.ndim - 1)
    xp = jnp.pad(x, ((0, D * B - n),) + tail)
    xp = lax.with_sharding_constraint(xp, sharding(A.mesh, x.ndim))
    plan, extend = _extend_fn(A)
    two = x.ndim == 2

    def csr(part, x, rows):
        d = part.data[0][:, None] if two else part.data[0]
        prod = d * x[part.cols[0]]
        y = jax.ops.segment_sum(prod, rows, num_segments=R + 1, indices_are_sorted=True)
        return y[:R]

    def ell(part, x):
        # (as `jaxmc.kernels.spmv`'s ELL product: the same sums)
        d = part.data[0][..., None] if two else part.data[0]
        return jnp.sum(d * x[part.cols[0]], axis=0)

    def local(inner, edge, xb, *plan_arrays):
        # The inner rows need no halo: XLA can run them while the halo is
        # exchanged. Each row is in one part, so adding the parts is exact.
        if A.local == "warp":  # the single-device kernel on the own rows
            y = warp_product(inner.local(), xb)
        elif A.local == "ell":
            y = ell(inner, xb)
        else:
            y = csr(inner, xb, inner.rows[0])
        xl = extend(xb, *plan_arrays)
        if A.local in ("ell", "warp"):
            return y.at[edge.rows[0]].add(ell(edge, xl), mode="drop")
        return y + csr(edge, xl, edge.rows[0])

    if A.extended:  # one product over the extended iterate

        def local(inner, xb, *plan_arrays):
            return warp_product(inner.local(), extend(xb, *plan_arrays))[:R]

    mat = P(AXIS, None)
    vec = P(AXIS, *([None] * (x.ndim - 1)))
    arrays = (A.inner,) if A.extended else (A.inner, A.edge)
    specs = tuple(jax.tree.map(lambda a: P(AXIS, *([None] * (a.ndim - 1))), p)
                  for p in arrays)  # fmt: skip
    f = shard_map(
        local, A.mesh, in_specs=specs + (vec,) + (mat,) * len(plan), out_specs=vec
    )
    y = f(*arrays, xp, *plan)
    return y[:m] if A.out_pos is None else y[A.out_pos]
