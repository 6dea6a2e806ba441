"""The product of a row-partitioned matrix (`jaxmc.layout.PartitionedCSR`)
with a global vector, under `shard_map` over the matrix's mesh.

`partitioned_spmv(A, x)` takes `x` as a global array (`[n]` or `[n, k]`;
any sharding: inside a jitted solver loop XLA's partitioner keeps it split
by rows as the product's output is), pads it to `D` blocks of `B` rows and
hands each device its block. Each device then gathers its halo as the
matrix's exchange plan says (two `ppermute`s of exactly the entries the
neighbours read, or an `all_gather` of the whole iterate), multiplies its
local CSR rows (a `segment_sum` over its entries in CSR order: the
single-device product's sums, bit for bit) and returns its `R` output rows.
The global output is the stacked output's first `rows` entries (states as
rows), or for an MDP's choices their places `out_pos`.

So the solvers stay as they are: their `lax.while_loop`s run on global
vectors, the products are partitioned here, and the reductions of the
convergence measure and of Krylov's dot products are partitioned by XLA
(one all-reduce each). The Pallas kernels are single-device only.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from ..layout.partition import AXIS, PartitionedCSR, sharding


def shard_map(f, mesh, in_specs, out_specs):
    """`jax.shard_map` (or, on a jax without it, the experimental one),
    without the replication check (the halo exchange is by construction
    per device)."""
    sm = getattr(jax, "shard_map", None)
    if sm is not None:
        return sm(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    from jax.experimental.shard_map import shard_map as old  # pragma: no cover

    return old(f, mesh, in_specs, out_specs, check_rep=False)  # pragma: no cover


def _halo_fn(A: PartitionedCSR):
    """`(arrays, fn)`: the plan's arrays and `fn(xb, *local arrays) -> the
    device's extended iterate [own block | halo]` (inside `shard_map`)."""
    h, D = A.halo, A.num_devices
    if h.mode == "neighbour":
        right = [(i, i + 1) for i in range(D - 1)]
        left = [(i + 1, i) for i in range(D - 1)]

        def fn(xb, sl, sr):
            from_left = lax.ppermute(xb[sr[0]], AXIS, right)
            from_right = lax.ppermute(xb[sl[0]], AXIS, left)
            return jnp.concatenate([xb, from_left, from_right])

        return (h.send_left, h.send_right), fn
    if h.mode == "gather":

        def fn(xb, index):
            xg = lax.all_gather(xb, AXIS, tiled=True)
            return jnp.concatenate([xb, xg[index[0]]])

        return (h.index,), fn
    return (), lambda xb: xb


def partitioned_spmv(A: PartitionedCSR, x):
    """`y = A @ x` for `x` of shape `[n]` or `[n, k]` (module docstring)."""
    x = jnp.asarray(x)
    D, B, R = A.num_devices, A.block, A.local_rows
    m, n = A.shape
    tail = ((0, 0),) * (x.ndim - 1)
    xp = jnp.pad(x, ((0, D * B - n),) + tail)
    xp = lax.with_sharding_constraint(xp, sharding(A.mesh, x.ndim))
    plan, extend = _halo_fn(A)
    two = x.ndim == 2

    def local_csr(data, cols, rows, xb, *plan_arrays):
        xl = extend(xb, *plan_arrays)
        d = data[0][:, None] if two else data[0]
        g = xl[cols[0]]
        y = jax.ops.segment_sum(
            d * g, rows[0], num_segments=R + 1, indices_are_sorted=True
        )
        return y[:R]

    def local_ell(data, cols, xb, *plan_arrays):
        # (as `jaxmc.kernels.spmv`'s ELL product: the same sums)
        xl = extend(xb, *plan_arrays)
        d = data[0][..., None] if two else data[0]
        return jnp.sum(d * xl[cols[0]], axis=0)

    mat = P(AXIS, None)
    vec = P(AXIS, *([None] * (x.ndim - 1)))
    if A.local == "ell":
        fn, arrays = local_ell, (A.data, A.cols)
        specs = (P(AXIS, None, None),) * 2
    else:
        fn, arrays = local_csr, (A.data, A.cols, A.rows)
        specs = (mat,) * 3
    f = shard_map(
        fn, A.mesh, in_specs=specs + (vec,) + (mat,) * len(plan), out_specs=vec
    )
    y = f(*arrays, xp, *plan)
    return y[:m] if A.out_pos is None else y[A.out_pos]
