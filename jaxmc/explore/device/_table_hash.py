"""The hash-table implementations of `table`'s contract: open addressing
with linear probing over a power-of-two number of slots, at most half of
them in use.

Per slot: the key's words, a state word (0 empty, 3 occupied; the kernel
sets 1, claimed, on the way) and the key's id (-1 where empty). Two ways to
probe a batch, one result:

- `"pallas"`: the lock-free kernel of `_table_pallas` (GPUexplore's
  find-or-put: each key's lane claims an empty slot by an atomic
  test-and-set of its state word or finds its key), on the GPU; in
  interpret mode elsewhere (tests);
- `"rounds"`: the same probing done round-synchronously in XLA, on any
  backend: each round every unsettled key looks at its slot, and keys
  competing for an empty slot are settled by a scatter-max (the smallest
  batch position wins).

Both leave in each slot claimed by the batch the batch position of one of
its keys, `-(position + 2)` in the id word; `number` lowers it to the key's
first position and hands out ids in first-position order (the contract's
numbering), so placement may differ between the two while ids, `is_new`,
size and the keys by id are equal. A batch that would pass the capacity is
rolled back: the table comes back as it was, with `overflow` set.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from . import _table_pallas as _tp


#: Largest fraction of the slots in use.
MAX_LOAD = 0.5
_BLOCK = 256  # keys per program of the kernel on the GPU
_INTERPRET_BLOCK = 32  # ... in interpret mode (emulated atomics are serial)
_LOWEST = -(2**31)


class HashTable(NamedTuple):
    """A hash table of `table`'s contract (`size`, `overflow` public)."""

    size: jax.Array  # int32[]
    overflow: jax.Array  # bool[]
    capacity: jax.Array  # int32[]: the most keys stored
    keys: jax.Array  # uint32[slots, w]: the slot's key (any where empty)
    occ: jax.Array  # int32[slots]: 0 empty, 3 occupied
    ids: jax.Array  # int32[slots]: the slot key's id, -1 where empty


def slots_for(capacity: int) -> int:
    """The power-of-two number of slots for `capacity` keys."""
    need = max(8, int(capacity / MAX_LOAD))
    return 1 << (need - 1).bit_length()


def create(capacity: int, width: int) -> HashTable:
    slots = slots_for(capacity)
    if slots * width >= 2**31:
        raise ValueError(
            f"a hash table of {capacity} keys of {width} words needs "
            f"{slots * width} words, past 2**31"
        )
    return HashTable(
        jnp.zeros((), jnp.int32),
        jnp.zeros((), bool),
        jnp.int32(capacity),
        jnp.zeros((slots, width), jnp.uint32),
        jnp.zeros((slots,), jnp.int32),
        jnp.full((slots,), -1, jnp.int32),
    )


def find_or_put(
    table: HashTable, keys, valid, *, impl: str, reverse=False, rollback=True
):
    """`table.find_or_put` on a hash table; `impl` "pallas" (interpret mode
    off the GPU, its emulated atomics in lane order or, `reverse`, the
    other way) or "rounds". Without `rollback` (for callers that never
    overflow the table) an overflowing batch leaves the table unspecified,
    `overflow` set, and the call has no conditional over the whole table."""
    if keys.shape[0] == 0:
        return table, jnp.zeros((0,), jnp.int32), jnp.zeros((0,), bool)
    if impl == "rounds":
        return _rounds(table, keys, valid, rollback)
    interpret = jax.default_backend() != "gpu"
    slot, occ, ids, tkeys, total = _tp.probe(
        table.occ,
        table.ids,
        table.keys,
        table.size,
        table.capacity,
        keys,
        valid,
        block=_INTERPRET_BLOCK if interpret else _BLOCK,
        interpret=interpret,
        reverse=reverse,
    )
    return _finish(table, slot, occ, ids, tkeys, total, valid, rollback)


@functools.partial(jax.jit, static_argnums=7)
def _finish(table, slot, occ, ids, tkeys, total, valid, rollback=True):
    """Number the batch's new keys, or roll its claims back on overflow."""
    done, gid, is_new = number(table, slot, occ, ids, tkeys, valid)
    if not rollback:
        return (
            done._replace(overflow=done.overflow | (total > table.capacity)),
            gid,
            is_new,
        )
    return lax.cond(
        total > table.capacity,
        lambda: _rollback(done, slot, table.size),
        lambda: (done, gid, is_new),
    )


def number(table, slot, occ, ids, tkeys, valid):
    """Ids in first-occurrence order from probed slots: `slot[i]` the slot of
    key `i` (-1 where invalid), the id words of slots claimed by the batch
    holding `-(position + 2)` of one of their keys. Returns the table with
    the new ids written, the batch's ids and `is_new`."""
    m = slot.shape[0]
    cap = occ.shape[0]
    ok = valid & (slot >= 0)
    s = jnp.where(ok, slot, 0)
    pos = jnp.arange(m, dtype=jnp.int32)
    tag = -(pos + 2)
    # Lower each claimed slot's tag to its key's first position.
    ids = ids.at[jnp.where(ok & (ids[s] <= -2), s, cap)].max(tag, mode="drop")
    v = jnp.where(ok, ids[s], -1)
    fresh = v <= -2
    first_pos = jnp.where(fresh, -(v + 2), 0)
    is_new = ok & fresh & (first_pos == pos)
    rank = jnp.cumsum(is_new, dtype=jnp.int32) - 1
    gid = jnp.where(fresh, table.size + rank[first_pos], v).astype(jnp.int32)
    gid = jnp.where(ok, gid, -1)
    ids = ids.at[jnp.where(is_new, s, cap)].set(gid, mode="drop")
    size = table.size + jnp.sum(is_new, dtype=jnp.int32)
    out = table._replace(size=size, keys=tkeys, occ=occ, ids=ids)
    return out, gid, is_new


def _rollback(table, slot, size):
    """The table before the batch (the slots it claimed emptied again), with
    `overflow` set; ids -1 and `is_new` false."""
    cap = table.occ.shape[0]
    ok = slot >= 0
    s = jnp.where(ok, slot, 0)
    # Claimed by this batch: numbered from the old size on, or still tagged.
    mine = ok & ((table.ids[s] >= size) | (table.ids[s] <= -2))
    idx = jnp.where(mine, s, cap)
    m = slot.shape[0]
    back = table._replace(
        size=size,
        overflow=jnp.bool_(True),
        occ=table.occ.at[idx].set(0, mode="drop"),
        ids=table.ids.at[idx].set(-1, mode="drop"),
    )
    return back, jnp.full((m,), -1, jnp.int32), jnp.zeros((m,), bool)


@functools.partial(jax.jit, static_argnums=3)
def _rounds(table, keys, valid, rollback=True):
    """Round-synchronous linear probing in XLA (see the module docstring)."""
    m, w = keys.shape
    cap = table.occ.shape[0]
    start = _tp.hash_words([keys[:, j] for j in range(w)])
    start = (start & jnp.uint32(cap - 1)).astype(jnp.int32)
    tag = -(jnp.arange(m, dtype=jnp.int32) + 2)

    def cond(c):
        active, *_, total = c
        return jnp.any(active) & (total <= table.capacity)

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
        table.size,
    )
    _, _, slot, occ, ids, tk, total = lax.while_loop(cond, body, init)
    return _finish(table, slot, occ, ids, tk, total, valid, rollback)


@functools.partial(jax.jit, static_argnames=("capacity",))
def keys_by_id(table: HashTable, capacity: int | None = None) -> jax.Array:
    """The stored keys in id order, `uint32[capacity, w]` (rows from `size`
    on are zero; `capacity` defaults to the number of slots)."""
    rows = table.occ.shape[0] if capacity is None else capacity
    dest = jnp.where(table.ids >= 0, table.ids, rows)
    out = jnp.zeros((rows, table.keys.shape[1]), jnp.uint32)
    return out.at[dest].set(table.keys, mode="drop")
