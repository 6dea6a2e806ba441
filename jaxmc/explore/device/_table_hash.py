"""The explorer's visited-state table on the device: find-or-put of batches
of keys, with ids in first-occurrence order.

A key is `w` uint32 words (a packed state). `find_or_put(table, keys,
valid)` looks every valid key of the batch `keys [m, w]` up in the table and
inserts the ones it lacks:

- a key already in the table gets its id back, `is_new` False;
- the keys new to the table are numbered `count, count + 1, ...` in the
  order of their first position among the valid keys of the batch (so ids
  continue the table's count, and a level-synchronous exploration that
  passes its successors in order gets BFS ids); every occurrence of a new
  key gets its id, only the first has `is_new` True;
- invalid positions get id -1, `is_new` False.

The table is open addressing with linear probing over `capacity` slots (a
power of two): per slot the key's words, a state word (empty / claimed /
ready) and the key's id. At most `max_fill = floor(capacity * max_load)`
keys are stored: when a batch would take the count past it, the call
returns the table as it was with `overflow` set (and ids -1, `is_new`
False); the caller grows the table (`grow`) and passes the batch again.

Two implementations with one result (ids, `is_new`, count, and the keys by
id; slot placement may differ):

- `"pallas"`: the lock-free kernel of `_table_pallas` (atomic test-and-set
  of a slot's state word, GPUexplore's find-or-put), on the GPU; in
  interpret mode elsewhere (tests);
- `"portable"`: the same probing done round-synchronously in XLA (each
  round every unsettled key looks at its slot; keys competing for an empty
  slot are settled by a scatter-max, the smallest batch position wins),
  on any backend.

`impl="auto"` takes the kernel on a GPU and the portable path elsewhere.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from . import _table_pallas as _tp


#: Default largest fraction of the slots in use.
MAX_LOAD = 0.5
IMPLS = ("auto", "pallas", "portable")
_BLOCK = 256  # keys per program of the kernel on the GPU
_INTERPRET_BLOCK = 32  # ... in interpret mode (emulated atomics are serial)
_LOWEST = -(2**31)


class Table(NamedTuple):
    """A find-or-put table (a pytree: pass it through jit and loops)."""

    keys: jax.Array  # uint32 [capacity, w]: the slot's key (any where empty)
    occ: jax.Array  # int32 [capacity]: 0 empty, 3 occupied
    ids: jax.Array  # int32 [capacity]: the slot key's id, -1 where empty
    count: jax.Array  # int32 []: keys stored, ids 0 .. count - 1
    overflow: jax.Array  # bool []: the last batch did not fit

    @property
    def capacity(self) -> int:
        return self.occ.shape[0]

    @property
    def width(self) -> int:
        return self.keys.shape[1]


def capacity_for(n: int, max_load: float = MAX_LOAD) -> int:
    """The smallest power-of-two capacity that stores `n` keys."""
    return max(8, 1 << max(0, math.ceil(math.log2(max(1, n) / max_load))))


def new_table(capacity: int, width: int) -> Table:
    """An empty table of `capacity` slots (a power of two) for keys of
    `width` uint32 words."""
    if capacity < 2 or capacity & (capacity - 1):
        raise ValueError(f"capacity must be a power of two >= 2, not {capacity}")
    if width < 1 or capacity * width >= 2**31:
        raise ValueError(f"unsupported table shape {capacity} x {width}")
    return Table(
        jnp.zeros((capacity, width), jnp.uint32),
        jnp.zeros((capacity,), jnp.int32),
        jnp.full((capacity,), -1, jnp.int32),
        jnp.int32(0),
        jnp.bool_(False),
    )


def max_fill(capacity: int, max_load: float = MAX_LOAD) -> int:
    """The most keys a table of `capacity` slots stores."""
    if not 0 < max_load < 1:
        raise ValueError(f"max_load must be in (0, 1), not {max_load}")
    return min(capacity - 1, int(capacity * max_load))


def on_gpu() -> bool:
    return jax.default_backend() == "gpu"


def find_or_put(
    table: Table,
    keys: jax.Array,
    valid: jax.Array,
    *,
    impl: str = "auto",
    max_load: float = MAX_LOAD,
):
    """`(table, ids, is_new)` for the batch `keys [m, w]` (uint32) where
    `valid [m]`; see the module docstring for the numbering and overflow."""
    if impl not in IMPLS:
        raise ValueError(f"`impl` must be one of {IMPLS}, not {impl!r}")
    keys = jnp.asarray(keys)
    if keys.ndim != 2 or keys.shape[1] != table.width:
        raise ValueError(
            f"keys must be [m, {table.width}] uint32 words, not {keys.shape}"
        )
    keys = keys.astype(jnp.uint32)
    valid = jnp.asarray(valid, bool)
    fill = max_fill(table.capacity, max_load)
    if keys.shape[0] == 0:
        return table._replace(overflow=jnp.bool_(False)), *_empty(0)
    if impl == "pallas" or (impl == "auto" and on_gpu()):
        return _kernel_path(table, keys, valid, fill, not on_gpu(), False)
    return _portable(table, keys, valid, fill)


def _empty(m):
    return jnp.full((m,), -1, jnp.int32), jnp.zeros((m,), bool)


def kernel_find_or_put(table, keys, valid, *, max_load=MAX_LOAD, reverse=False):
    """The kernel path in interpret mode whatever the backend, with the
    emulated atomics in lane order or its reverse (tests)."""
    fill = max_fill(table.capacity, max_load)
    keys = jnp.asarray(keys, jnp.uint32)
    return _kernel_path(table, keys, jnp.asarray(valid, bool), fill, True, reverse)


def _kernel_path(table, keys, valid, fill, interpret, reverse):
    block = _INTERPRET_BLOCK if interpret else _BLOCK
    slot, occ, ids, tkeys, total = _tp.probe(
        table.occ,
        table.ids,
        table.keys,
        table.count,
        keys,
        valid,
        max_fill=fill,
        block=block,
        interpret=interpret,
        reverse=reverse,
    )
    return _finish(table, slot, occ, ids, tkeys, total, valid, fill)


@functools.partial(jax.jit, static_argnames=("fill",))
def _finish(table, slot, occ, ids, tkeys, total, valid, fill):
    """Number the batch's new keys, or roll its claims back on overflow."""
    new_table, gid, is_new = number(table.count, slot, occ, ids, tkeys, valid)
    over = total > fill
    return lax.cond(
        over,
        lambda: _rollback(new_table, slot, table.count),
        lambda: (new_table, gid, is_new),
    )


def number(count, slot, occ, ids, tkeys, valid):
    """Ids in first-occurrence order from probed slots: `slot[i]` the slot of
    key `i` (-1 where invalid), the id words of slots new in the batch
    holding `-(position + 2)` of one of their keys. Returns the table with the new ids
    written, the batch's ids and `is_new`."""
    m = slot.shape[0]
    cap = occ.shape[0]
    ok = valid & (slot >= 0)
    s = jnp.where(ok, slot, 0)
    pos = jnp.arange(m, dtype=jnp.int32)
    # A slot new in the batch holds its owner's position tag; lower it to
    # the key's first position.
    ids = ids.at[jnp.where(ok & (ids[s] <= -2), s, cap)].max(-(pos + 2), mode="drop")
    v = jnp.where(ok, ids[s], -1)
    fresh = v <= -2
    first_pos = jnp.where(fresh, -(v + 2), 0)
    is_new = ok & fresh & (first_pos == pos)
    rank = jnp.cumsum(is_new, dtype=jnp.int32) - 1
    gid = jnp.where(fresh, count + rank[first_pos], v).astype(jnp.int32)
    gid = jnp.where(ok, gid, -1)
    ids = ids.at[jnp.where(is_new, s, cap)].set(gid, mode="drop")
    n_new = jnp.sum(is_new, dtype=jnp.int32)
    table = Table(tkeys, occ, ids, (count + n_new).astype(jnp.int32), jnp.bool_(False))
    return table, gid, is_new


def _rollback(table, slot, count):
    """The table before the batch: the slots it claimed emptied again."""
    cap = table.capacity
    ok = slot >= 0
    s = jnp.where(ok, slot, 0)
    # Claimed in this batch: ids >= the old count (after `number`) or still
    # a position tag where the count passed the fill before numbering.
    mine = ok & ((table.ids[s] >= count) | (table.ids[s] <= -2))
    idx = jnp.where(mine, s, cap)
    occ = table.occ.at[idx].set(0, mode="drop")
    ids = table.ids.at[idx].set(-1, mode="drop")
    m = slot.shape[0]
    return Table(table.keys, occ, ids, count, jnp.bool_(True)), *_empty(m)


@functools.partial(jax.jit, static_argnames=("fill",))
def _portable(table, keys, valid, fill):
    """Round-synchronous linear probing in XLA (see the module docstring)."""
    m, w = keys.shape
    cap = table.capacity
    words = [keys[:, j] for j in range(w)]
    start = (_tp.hash_words(words) & jnp.uint32(cap - 1)).astype(jnp.int32)
    tag = -(jnp.arange(m, dtype=jnp.int32) + 2)

    def cond(c):
        active, *_, total = c
        return jnp.any(active) & (total <= fill)

    def body(c):
        active, s, slot, occ, ids, tk, total = c
        here = jnp.where(active, s, 0)
        empty = active & (occ[here] == 0)
        # Keys at an empty slot compete for it; the smallest position wins.
        race = jnp.where(empty, here, cap)
        ids = ids.at[race].set(_LOWEST, mode="drop").at[race].max(tag, mode="drop")
        own = empty & (ids[here] == tag)
        put = jnp.where(own, here, cap)
        occ = occ.at[put].set(3, mode="drop")
        tk = tk.at[put].set(keys, mode="drop")
        seen = active & ~empty
        eq = seen & jnp.all(tk[here] == keys, axis=1)
        done = own | eq
        slot = jnp.where(done, here, slot)
        s = jnp.where(seen & ~eq, (s + 1) & (cap - 1), s)
        total = total + jnp.sum(own, dtype=jnp.int32)
        return active & ~done, s, slot, occ, ids, tk, total

    init = (
        valid,
        start,
        jnp.full((m,), -1, jnp.int32),
        table.occ,
        table.ids,
        table.keys,
        table.count,
    )
    _, _, slot, occ, ids, tk, total = lax.while_loop(cond, body, init)
    return _finish(table, slot, occ, ids, tk, total, valid, fill)


def keys_by_id(table: Table) -> jax.Array:
    """The stored keys in id order, `[capacity, w]` (rows from `count` on
    are zero)."""
    cap = table.capacity
    dest = jnp.where(table.ids >= 0, table.ids, cap)
    out = jnp.zeros_like(table.keys)
    return out.at[dest].set(table.keys, mode="drop")


def grow(table: Table, capacity: int, *, impl: str = "auto") -> Table:
    """The table's keys, with their ids, in a table of `capacity` slots."""
    if max_fill(capacity, (capacity - 1) / capacity) < int(table.count):
        raise ValueError(f"capacity {capacity} < {int(table.count)} stored keys")
    keys = keys_by_id(table)
    valid = jnp.arange(table.capacity) < table.count
    big, _, _ = find_or_put(
        new_table(capacity, table.width),
        keys,
        valid,
        impl=impl,
        max_load=(capacity - 1) / capacity,
    )
    return big
