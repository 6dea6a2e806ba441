"""Row-partitioned matrices over the devices of a 1-D mesh
(`PartitionedCSR`), the layout of the multi-device solves.

The states (and so the iterate) are split in BFS order into `D` equal
blocks of `B = ceil(n / D)` states, the last padded; device `d` owns states
`d B .. (d + 1) B - 1` and the matrix rows of those states (for an MDP all
the choices of its states, so that a state's min/max stays on its device).
Each device keeps its rows as a local CSR whose columns are renumbered:
its own states first (`0 .. B - 1`), then its *halo*, the remote entries of
the iterate that its rows read (`B ..`). BFS order puts most columns in the
device's own block, and the remote ones mostly in the neighbouring blocks.

The exchange plan (`Halo`) says how the halo arrives each product:

- "neighbour" (every remote column lies in block `d - 1` or `d + 1`): each
  device sends its neighbours exactly the entries they read, by two
  `ppermute`s (the halo is then `[from the left | from the right]`);
- "gather" (otherwise): the iterate is all-gathered and the halo picked
  from it by global index (correct for any matrix; moves every block to
  every device);
- "none": one device, or no remote columns.

Each device's rows are in one of two local layouts (`local`): "csr" (a
`segment_sum` over its entries; the CPU's choice) or "ell" (every row padded
to the longest, `[W, R]` column-major: a gather and a sum along an axis,
no scatter; the GPU's choice). Every per-device array is stacked as
`[D, ...]` and sharded along the mesh axis, padded to the largest device's
size (CSR padding entries: value 0, row `R`, a dummy row that is dropped).
Entries keep their CSR order within each row, so a device's row sums are
the single-device product's in the same local layout, bit for bit. `slot`
maps each stored entry to its CSR entry (`nnz` for padding), so
`with_values` refreshes the values without rebuilding.

`Sharded` is the layout *kind* of such a matrix: a layout name (the string
"sharded") carrying the mesh, so that the builders that take a layout kind
by name (`jaxmc.numerics.matrices`) build this one. The product is
`jaxmc.kernels.sharded`.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jaxtyping import Array, Float, Int

from .._arrays import unique
from .._mesh import make_mesh as _make_mesh
from .partition_rows import (
    AXIS as AXIS,
    Rows as Rows,
    WarpRows as WarpRows,
    local_rows,
    put_sharded,
    sharding as sharding,
    stack_padded,
)
from .stats import layout_stats


SHARDED = "sharded"


#: The local layouts of a device's rows.
LOCAL = ("csr", "ell", "warp")


class Sharded(str):
    """The layout kind "sharded" with its mesh (`mesh`, 1-D over `AXIS`)
    and the devices' local layout (`local`, one of `LOCAL`). Equal to
    another only with the same mesh and local layout (so caches keyed by
    the kind keep them apart); `str(kind)` is the name."""

    mesh: Mesh
    local: str

    def __new__(cls, mesh: Mesh, local: str = "csr"):
        if local not in LOCAL:
            raise ValueError(f"local layout {local!r}: expected one of {LOCAL}")
        self = super().__new__(cls, SHARDED)
        self.mesh = mesh
        self.local = local
        return self

    def __eq__(self, other):
        if isinstance(other, Sharded):
            return (self.mesh, self.local) == (other.mesh, other.local)
        return str.__eq__(self, other)

    def __hash__(self):
        return hash((SHARDED, self.mesh, self.local))

    def __reduce__(self):  # (a str subclass with state: pickle it too)
        return (Sharded, (self.mesh, self.local))

    @property
    def size(self) -> int:
        return int(self.mesh.devices.size)


def host_array(x, dtype=None) -> np.ndarray:
    """`np.asarray(x, dtype)`, also for a `jax.Array` split over the
    devices of several processes (`jax.distributed`): that one is gathered
    to every process (a collective: every process reads the same arrays in
    the same order, as they run the same check)."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        from jax.experimental import multihost_utils

        x = multihost_utils.process_allgather(x, tiled=True)
    return np.asarray(x, dtype)


def make_mesh(devices) -> Mesh | None:
    """The 1-D mesh of `devices` over `AXIS` (`jaxmc._mesh.make_mesh`): a
    count, a sequence of `jax.Device`s or a `Mesh`; None for None."""
    return _make_mesh(devices, AXIS)


class Halo(eqx.Module):
    """The exchange plan of a `PartitionedCSR` (module docstring).

    - `mode`: "none", "neighbour" or "gather" (static).
    - `send_left`, `send_right`: `[D, SL]`, `[D, SR]` local indices of the
      entries each device sends to device `d - 1` / `d + 1` ("neighbour").
    - `index`: `[D, H]` global (padded) indices of each device's halo in
      the all-gathered iterate ("gather").
    - `needed`: per device, the number of distinct remote entries it reads
      (host ints, static: what an exchange must move at least).
    """

    send_left: Int[Array, "d sl"] | None
    send_right: Int[Array, "d sr"] | None
    index: Int[Array, "d h"] | None
    mode: str = eqx.field(static=True)
    needed: tuple[int, ...] = eqx.field(static=True)


class PartitionedCSR(eqx.Module):
    """A `[rows, n]` matrix split by rows over `mesh` (module docstring).

    Each device's rows are in two parts, so that the exchange can overlap
    the product: `inner`, the rows that read only the device's own block
    (their product needs no halo), and `edge`, the rows that read at least
    one remote entry (columns into `[own block | halo]`). A row is in one
    part only, with all its entries in CSR order: its sum is the same
    either way.

    - `inner`, `edge`: `Rows` (the other part's rows are absent from each).
      *Extended* (a square matrix in the "warp" local layout: `extended`):
      `inner` holds all the device's rows as one `[E, E]` warp-segment
      matrix over the extended iterate `[own block | halo]` (`E = B + H`),
      its last `H` rows the identity (each halo entry copies itself), and
      `edge` is None. A fused solver step then runs the single-device
      kernel on the extended iterate as it is, measure included (the
      identity rows change nothing), and refreshes the halo after it
      (`jaxmc.kernels.sharded_fused`).
    - `out_pos`: `[rows]` the place of each global row in the `[D R]`
      stacked output, or None when the rows are the states (square, `R = B`:
      the output is the stacked output's first `rows` entries).
    - `halo`: the exchange plan.
    - `block` (`B`), `local_rows` (`R`), `shape`, `mesh`, `nnz`, `local`
      ("csr" or "ell"): static.
    """

    inner: Rows | WarpRows
    edge: Rows | None
    out_pos: Int[Array, " m"] | None
    halo: Halo
    block: int = eqx.field(static=True)
    local_rows: int = eqx.field(static=True)
    shape: tuple[int, int] = eqx.field(static=True)
    mesh: Mesh = eqx.field(static=True)
    nnz: int = eqx.field(static=True)
    local: str = eqx.field(static=True, default="csr")
    extended: bool = eqx.field(static=True, default=False)

    @property
    def num_devices(self) -> int:
        return int(self.mesh.devices.size)

    @property
    def kind(self) -> Sharded:
        return Sharded(self.mesh, self.local)

    def with_values(self, vals: Float[Array, " nnz"]) -> PartitionedCSR:
        """The same structure with entry values `vals` (CSR order)."""
        vals = jnp.asarray(vals)
        # slot nnz: padding (0); nnz + 1: an extended matrix's identity rows
        padded = jnp.append(vals, jnp.asarray([0.0, 1.0], vals.dtype))

        def put(slot):
            return jax.device_put(padded[slot], sharding(self.mesh, slot.ndim))

        if self.edge is None:
            return eqx.tree_at(lambda m: m.inner.data, self, put(self.inner.slot))
        new = (put(self.inner.slot), put(self.edge.slot))
        return eqx.tree_at(lambda m: (m.inner.data, m.edge.data), self, new)

    @property
    def dtype(self):
        return self.inner.data.dtype

    def halo_bytes(self, itemsize: int | None = None) -> dict:
        """Bytes of the iterate exchanged per product: `needed` (the
        distinct remote entries the devices read) and `moved` (what the
        exchange sends, padding and, for "gather", whole blocks included)."""
        it = int(itemsize or self.dtype.itemsize)
        D = self.num_devices
        h = self.halo
        needed = int(sum(h.needed)) * it
        if h.mode == "neighbour":
            per = int(h.send_left.shape[1]) + int(h.send_right.shape[1])
            moved = (D - 1) * per * it
        elif h.mode == "gather":
            moved = D * (D - 1) * self.block * it
        else:
            moved = 0
        return {"mode": h.mode, "needed": needed, "moved": moved, "devices": D}

    def stats(self) -> dict:
        stored = int(self.inner.data.size)
        stored += 0 if self.edge is None else int(self.edge.data.size)
        it = self.dtype.itemsize
        per = it + (8 if self.local == "csr" else 4)
        out = layout_stats(SHARDED, self.nnz, stored, stored * per, self.shape, it)
        out.update(halo=self.halo_bytes())
        return out


def partition(
    indptr, cols, vals, shape, mesh: Mesh, choice_ptr=None, local: str = "csr"
) -> PartitionedCSR:
    """The `PartitionedCSR` of the host CSR `(indptr, cols, vals)` of
    `shape = (rows, n)` over `mesh`, each device's rows in `local` ("csr"
    or "ell"). `choice_ptr` (`[n + 1]`): the rows of each state (an MDP's
    choices), else the rows are the states (square)."""
    if local not in LOCAL:
        raise ValueError(f"local layout {local!r}: expected one of {LOCAL}")
    indptr = np.asarray(indptr, dtype=np.int64)
    m, n = int(shape[0]), int(shape[1])
    nnz = int(indptr[-1]) if len(indptr) else 0
    # local indices fit int32 (the device arrays are int32): half the
    # memory traffic of int64 on the host passes below
    ix = np.int32 if max(m, n, nnz) < 2**31 - 1 else np.int64
    cols = np.asarray(cols, dtype=ix)
    D = int(mesh.devices.size)
    B = max(-(-n // D), 1)
    if choice_ptr is None:
        if m != n:
            raise ValueError(f"a matrix of {m} rows and {n} columns needs choice_ptr")
        choice_ptr = np.arange(n + 1, dtype=np.int64)
    choice_ptr = np.asarray(choice_ptr, dtype=np.int64)
    square = bool(np.array_equal(choice_ptr, np.arange(n + 1)))
    bounds = np.minimum(np.arange(D + 1) * B, n)
    rstart, rend = choice_ptr[bounds[:-1]], choice_ptr[bounds[1:]]
    R = max(int((rend - rstart).max(initial=0)), 1)
    estart, eend = indptr[rstart], indptr[rend]

    lcols, lrows, lslot, remote = [], [], [], []
    for d in range(D):
        # a device's entries are one contiguous run of the CSR: views
        e = slice(int(estart[d]), int(eend[d]))
        c = cols[e]
        counts = np.diff(indptr[rstart[d] : rend[d] + 1])
        lrows.append(np.repeat(np.arange(rend[d] - rstart[d], dtype=ix), counts))
        lslot.append(np.arange(e.start, e.stop, dtype=ix))
        lo, hi = d * B, (d + 1) * B
        remote.append(unique(c[(c < lo) | (c >= hi)]))
        lcols.append(c)
    needed = tuple(int(len(r)) for r in remote)
    neighbour = D > 1 and all(
        np.all(np.abs(r // B - d) == 1) for d, r in enumerate(remote)
    )
    mode = "none" if sum(needed) == 0 else ("neighbour" if neighbour else "gather")

    send_left = send_right = index = None
    if mode == "neighbour":
        # halo of d: [what d-1 sends right | what d+1 sends left]
        left = [r[r // B == d - 1] for d, r in enumerate(remote)]
        right = [r[r // B == d + 1] for d, r in enumerate(remote)]
        SR = max((len(x) for x in left), default=0)
        SL = max((len(x) for x in right), default=0)
        sr = [left[d + 1] - d * B if d + 1 < D else [] for d in range(D)]
        sl = [right[d - 1] - d * B if d > 0 else [] for d in range(D)]
        send_right = put_sharded(mesh, stack_padded(sr, SR, 0, np.int32))
        send_left = put_sharded(mesh, stack_padded(sl, SL, 0, np.int32))
        SR = max(SR, 1)
        for d in range(D):
            c = lcols[d]
            loc = c - d * B
            isl = c < d * B
            isr = c >= (d + 1) * B
            loc[isl] = B + np.searchsorted(left[d], c[isl])
            loc[isr] = B + SR + np.searchsorted(right[d], c[isr])
            lcols[d] = loc
    elif mode == "gather":
        H = max(needed)
        index = put_sharded(mesh, stack_padded(remote, H, 0, np.int32))
        for d in range(D):
            c = lcols[d]
            loc = c - d * B
            away = (c < d * B) | (c >= (d + 1) * B)
            loc[away] = B + np.searchsorted(remote[d], c[away])
            lcols[d] = loc
    else:
        lcols = [c - d * B for d, c in enumerate(lcols)]

    halo = Halo(send_left, send_right, index, mode, needed)
    if local == "warp" and square:  # one extended matrix: no edge part
        return _extended(lrows, lcols, lslot, vals, halo, mesh, B, (m, n), nnz)
    out_pos = None
    if not square:
        state = np.repeat(np.arange(n), np.diff(choice_ptr))
        dev = state // B
        out_pos = jnp.asarray(dev * R + (np.arange(m) - rstart[dev]), dtype=jnp.int32)
    data = np.append(np.asarray(vals, np.float64), 0.0)
    W = max(int(np.diff(indptr).max(initial=0)), 1)
    inner, edge = [], []
    for d in range(D):
        at_edge = np.zeros(R + 1, dtype=bool)
        at_edge[lrows[d][lcols[d] >= B]] = True
        e = at_edge[lrows[d]]
        edge.append((lrows[d][e], lcols[d][e], lslot[d][e]))
        inner.append((lrows[d][~e], lcols[d][~e], lslot[d][~e]))
    parts = [local_rows(p, local, mesh, data, R, B, nnz, W, compact=p is edge)
             for p in (inner, edge)]  # fmt: skip
    return PartitionedCSR(
        inner=parts[0],
        edge=parts[1],
        out_pos=out_pos,
        halo=halo,
        block=B,
        local_rows=R,
        shape=(m, n),
        mesh=mesh,
        nnz=nnz,
        local=local,
    )


def halo_width(halo: Halo) -> int:
    """`H`: the entries of each device's halo (padded to the widest)."""
    if halo.mode == "neighbour":
        return int(halo.send_left.shape[1]) + int(halo.send_right.shape[1])
    if halo.mode == "gather":
        return int(halo.index.shape[1])
    return 0


def _extended(lrows, lcols, lslot, vals, halo, mesh, B, shape, nnz) -> PartitionedCSR:
    """The extended `PartitionedCSR` (class docstring) of the devices' local
    entries: rows `< B`, columns into `[own block | halo]`, CSR slots."""
    E = B + halo_width(halo)
    ident = np.arange(B, E, dtype=np.int64)
    rows, cols, slots = [], [], []
    for r, c, sl in zip(lrows, lcols, lslot):
        rows.append(np.concatenate([r, ident]))
        cols.append(np.concatenate([c, ident]))
        slots.append(np.concatenate([sl, np.full(E - B, nnz + 1)]))
    data = np.append(np.asarray(vals, np.float64), [0.0, 1.0])
    entries = list(zip(rows, cols, slots))
    inner = local_rows(entries, "warp", mesh, data, E, E, nnz, 1, compact=False)
    return PartitionedCSR(
        inner=inner,
        edge=None,
        out_pos=None,
        halo=halo,
        block=B,
        local_rows=B,
        shape=shape,
        mesh=mesh,
        nnz=nnz,
        local="warp",
        extended=True,
    )
