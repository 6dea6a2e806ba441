"""The per-device rows of a row-partitioned matrix
(`jaxmc.layout.partition`): each device's entries, given in CSR order as
local rows, local columns and global CSR slots, stacked into `[D, ...]`
arrays sharded along the mesh axis, in one of the local layouts:

- "csr": the entries as they are, summed by `segment_sum` (`Rows`);
- "ell": every row padded to the longest, `[D, W, R]` column-major
  (`Rows`; for the few edge rows, one ELL column per row that has entries);
- "warp": the warp-segment sliced ELL of `jaxmc.layout.warp` (`WarpRows`),
  so that each device runs the single-device Pallas kernel on its rows.
  Every device has the same number of local rows, hence the same segments
  and kernel blocks; only the number of stored entries differs, and the
  flat arrays are padded at their end, past the last segment, where the
  kernel never reads.
"""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jaxtyping import Array, Float, Int

from .._arrays import unique
from .warp import WarpELL, host_arrays


#: The mesh axis the rows are split along.
AXIS = "rows"


class Rows(eqx.Module):
    """One part of each device's rows (`PartitionedCSR.inner` or `edge`).

    - `data`, `cols`, `slot`: the values, the local columns and the CSR
      entry of each value (`nnz` for padding): `[D, L]` ("csr") or
      `[D, W, r]` ("ell": entry `k` of ELL column `j` at `[k, j]`).
    - `rows`: the local row of each entry (`[D, L]`, "csr") or of each ELL
      column (`[D, r]`, "ell" edge part), `R` for padding; None for the
      "ell" inner part, whose column `j` is local row `j`.
    """

    data: Float[Array, "d ..."]
    cols: Int[Array, "d ..."]
    slot: Int[Array, "d ..."]
    rows: Int[Array, "d ..."] | None


class WarpRows(eqx.Module):
    """One part of each device's rows in the warp-segment layout: the
    fields of `jaxmc.layout.WarpELL` stacked over the devices (`[D, ...]`;
    `slot`: the global CSR entry, `nnz` for padding), each device's a
    `[rows, cols]` matrix of `lanes` lanes per row."""

    data: Float[Array, "d t"]
    cols: Int[Array, "d t"]
    rows: Int[Array, "d t"]
    slot: Int[Array, "d t"]
    seg_ptr: Int[Array, "d s1"]
    seg_width: Int[Array, "d s"]
    block_width: Int[Array, "d b"]
    shape: tuple[int, int] = eqx.field(static=True)
    lanes: int = eqx.field(static=True)
    segs_per_block: int = eqx.field(static=True)

    def local(self) -> WarpELL:
        """This device's `WarpELL` (inside `shard_map`: the `[1, ...]` block
        of each field)."""
        return WarpELL(
            data=self.data[0],
            cols=self.cols[0],
            rows=self.rows[0],
            slot=self.slot[0],
            seg_ptr=self.seg_ptr[0],
            seg_width=self.seg_width[0],
            block_width=self.block_width[0],
            shape=self.shape,
            lanes=self.lanes,
            segs_per_block=self.segs_per_block,
            nnz=int(self.slot.shape[1]),
        )


def sharding(mesh: Mesh, ndim: int = 1) -> NamedSharding:
    """Arrays of `ndim` axes split along the first over `mesh`."""
    return NamedSharding(mesh, P(AXIS, *([None] * (ndim - 1))))


def put_sharded(mesh: Mesh, arr: np.ndarray):
    """`arr` (`[D, ...]`) sharded along its first axis over `mesh`."""
    return jax.device_put(arr, sharding(mesh, arr.ndim))


def slot_type(nnz: int):
    """The integer type of the `slot` arrays of a matrix of `nnz` entries
    (slots run to `nnz + 1`: padding and an extended matrix's identity)."""
    return np.int32 if nnz + 1 < 2**31 - 1 else np.int64


def stack_padded(parts, width: int, fill, dtype) -> np.ndarray:
    out = np.full((len(parts), max(width, 1)), fill, dtype=dtype)
    for d, p in enumerate(parts):
        out[d, : len(p)] = p
    return out


def _ell(lrows, lcols, lslot, R: int, nnz: int, W: int):
    """`(cols, slot)`, `[D, W, R]`: each device's CSR-ordered entries as
    ELL (entry `k` of local row `r` at `[k, r]`; padding column 0, slot
    `nnz`). Each device's `lrows` are sorted (CSR order)."""
    D = len(lrows)
    cols = np.zeros((D, W, R), np.int32)
    slot = np.full((D, W, R), nnz, slot_type(nnz))
    for d in range(D):
        rows = lrows[d]
        counts = np.bincount(rows, minlength=R)
        start = np.cumsum(counts) - counts
        k = np.arange(len(rows), dtype=np.int64) - np.repeat(start, counts)
        at = k * R + rows  # flat place of each entry in [W, R]
        cols[d].reshape(-1)[at] = lcols[d]
        slot[d].reshape(-1)[at] = lslot[d]
    return cols, slot


def local_rows(
    entries, local, mesh, data, R: int, B: int, nnz: int, W: int, compact: bool
):
    """The `Rows` (or `WarpRows`) of `entries` (per device: local rows,
    columns, CSR slots, in CSR order). `compact` (the edge rows, few: ELL,
    also for "warp"): one ELL column per row that has entries, else one
    per local row. `data`: the CSR values with a 0 appended (slot `nnz`)."""
    rows, cols, slots = (list(x) for x in zip(*entries))
    if local == "warp" and not compact:
        return _warp(rows, cols, slots, mesh, data, R, B, nnz)
    if local == "csr":
        L = max((len(r) for r in rows), default=0)
        slot = stack_padded(slots, L, nnz, slot_type(nnz))
        return Rows(
            data=put_sharded(mesh, data[slot]),
            cols=put_sharded(mesh, stack_padded(cols, L, 0, np.int32)),
            slot=put_sharded(mesh, slot),
            rows=put_sharded(mesh, stack_padded(rows, L, R, np.int32)),
        )
    which = None
    width = R
    if compact:
        which = [unique(r) for r in rows]
        width = max((len(u) for u in which), default=0) or 1
        rows = [np.searchsorted(u, r) for u, r in zip(which, rows)]
    ec, slot = _ell(rows, cols, slots, width, nnz, W)
    return Rows(
        data=put_sharded(mesh, data[slot]),
        cols=put_sharded(mesh, ec),
        slot=put_sharded(mesh, slot),
        rows=None
        if which is None
        else put_sharded(mesh, stack_padded(which, width, R, np.int32)),
    )


def _warp(rows, cols, slots, mesh, data, R: int, B: int, nnz: int) -> WarpRows:
    """`WarpRows` of each device's entries (local rows `< R`, sorted; local
    columns `< B`; global slots), full warp."""
    hs = []
    for r, c, sl in zip(rows, cols, slots):
        indptr = np.zeros(R + 1, dtype=np.int64)
        np.cumsum(np.bincount(r, minlength=R), out=indptr[1:])
        h = host_arrays(indptr, c, (R, B))
        h["slot"] = np.append(np.asarray(sl, np.int64), nnz)[h["slot"]]
        hs.append(h)
    T = max(len(h["slot"]) for h in hs)
    flat = {
        k: stack_padded([h[k] for h in hs], T, fill, dt)
        for k, fill, dt in (
            ("cols", 0, np.int32),
            ("rows", 0, np.int32),
            ("slot", nnz, slot_type(nnz)),
        )
    }
    return WarpRows(
        data=put_sharded(mesh, data[flat["slot"]]),
        cols=put_sharded(mesh, flat["cols"]),
        rows=put_sharded(mesh, flat["rows"]),
        slot=put_sharded(mesh, flat["slot"]),
        seg_ptr=put_sharded(mesh, np.stack([h["seg_ptr"] for h in hs])),
        seg_width=put_sharded(mesh, np.stack([h["seg_width"] for h in hs])),
        block_width=put_sharded(mesh, np.stack([h["block_width"] for h in hs])),
        shape=(R, B),
        lanes=1,
        segs_per_block=hs[0]["segs_per_block"],
    )
