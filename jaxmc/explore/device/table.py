"""Find-or-put of packed state keys on the device: the visited-state set of
the device explorer (`jaxmc.explore.device`).

Contract (every implementation of this module keeps it):

- A state key is a row of `uint32[w]` words (the packed state, `w >= 1`).
  Bit 31 of word 0 is never set in a valid key: implementations may use it
  (e.g. the all-ones row) as their empty marker.
- `create(capacity, width) -> Table`: an empty table that holds up to
  `capacity` keys (`1 <= capacity < 2**31`) of `width` words. `capacity`
  and `width` are static (Python ints); a table is a pytree of arrays, so it
  can be a `lax.while_loop` carry.
- `Table.size`: `int32[]`, the number of keys stored; `Table.overflow`:
  `bool[]`, set once a `find_or_put` found more new keys than fit. Other
  fields are private to the implementation.
- `find_or_put(table, keys, valid) -> (table, ids, is_new)` with `keys`
  `uint32[m, w]`, `valid` `bool[m]`; returns `ids` `int32[m]` and `is_new`
  `bool[m]`. For each valid row: its id, the id stored with an equal key if
  there is one, else a new id. New ids are `size, size + 1, ...` handed out
  in order of the *first position* among `keys` of each distinct new key
  (so numbering follows the order of the keys: BFS order when the keys are
  ordered by source state, then successor order). `is_new[i]` is true
  exactly at that first position of each new key; later duplicates in the
  same call get the same id with `is_new` false. Invalid rows: id `-1`,
  `is_new` false, and the table ignores them. Ids are stable: a key keeps
  its id for the table's lifetime.
- Overflow: if `size` plus the number of distinct new keys exceeds
  `capacity`, the returned table has `overflow` set and its contents and
  the returned ids are unspecified. Callers avoid it by keeping
  `size + count(valid) <= capacity`; to grow, create a larger table and put
  the stored keys again in id order (which gives them the same ids).
- `find_or_put` is a pure function, traceable under `jit` (shapes static).

Implementations (`impl`, chosen by `create`; `find_or_put` follows the
table it is given):

- `"sorted"`, the portable reference (plain XLA, any backend; below);
- `"pallas"`: a hash table (open addressing, linear probing, at most half
  the slots in use) filled by a lock-free Pallas kernel, GPUexplore's
  find-or-put (`_table_pallas`): on the GPU; in interpret mode elsewhere;
- `"rounds"`: the same hash table probed round-synchronously in XLA
  (`_table_hash`), any backend.

`"auto"` is `"pallas"` on a GPU and `"sorted"` elsewhere. Every
implementation gives the same ids, `is_new`, size and keys by id
(`keys_by_id`); the hash tables also roll an overflowing batch back (the
table comes back as it was, `overflow` set).

The sorted implementation keeps a sorted
copy of the stored keys with their ids. A call sorts its keys (stable, so
the first occurrence leads each run of equal keys), looks each run up by a
binary search (`log2(capacity)` gathers), numbers the new runs in order of
their first position, and merges them into the sorted copy with one scatter.
Its cost per call is `O(m log m + m log capacity + capacity)`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _table_hash
from ._table_hash import HashTable as HashTable


_FILL = np.uint32(0xFFFFFFFF)


class Table(NamedTuple):
    """The visited-state set (see the module docstring)."""

    size: jax.Array  # int32[]
    overflow: jax.Array  # bool[]
    sorted_keys: jax.Array  # uint32[capacity, w]: ascending, padding all-ones
    sorted_ids: jax.Array  # int32[capacity]: the id of each sorted key


IMPLS = ("auto", "sorted", "pallas", "rounds")


def resolve(impl: str) -> str:
    """The implementation `impl` means on this backend."""
    if impl not in IMPLS:
        raise ValueError(f"table impl must be one of {IMPLS}, not {impl!r}")
    if impl == "auto":
        return "pallas" if jax.default_backend() == "gpu" else "sorted"
    return impl


def create(capacity: int, width: int, impl: str = "auto") -> Table | HashTable:
    """An empty table for up to `capacity` keys of `width` words."""
    if not 1 <= capacity < 2**31:
        raise ValueError(f"table capacity {capacity} outside [1, 2**31)")
    if width < 1:
        raise ValueError(f"key width {width} must be at least 1")
    if resolve(impl) != "sorted":
        return _table_hash.create(capacity, width)
    return Table(
        jnp.zeros((), jnp.int32),
        jnp.zeros((), bool),
        jnp.full((capacity, width), _FILL, jnp.uint32),
        jnp.full((capacity,), -1, jnp.int32),
    )


def _less(a: jax.Array, b: jax.Array) -> jax.Array:
    """Row-wise lexicographic `a < b` of `uint32[m, w]` rows."""
    lt = jnp.zeros(a.shape[0], bool)
    eq = jnp.ones(a.shape[0], bool)
    for j in range(a.shape[1]):
        lt = lt | (eq & (a[:, j] < b[:, j]))
        eq = eq & (a[:, j] == b[:, j])
    return lt


def _lower_bound(sorted_keys: jax.Array, size: jax.Array, q: jax.Array) -> jax.Array:
    """Per row of `q`: the first index `i < size` with `sorted_keys[i] >= q`
    (`size` if none), by a vectorised binary search."""
    cap = sorted_keys.shape[0]
    lo = jnp.zeros(q.shape[0], jnp.int32)
    hi = jnp.broadcast_to(size, q.shape[:1]).astype(jnp.int32)
    steps = max(1, int(cap).bit_length())

    def body(_, lh):
        lo, hi = lh
        active = lo < hi
        mid = (lo + hi) // 2
        below = _less(sorted_keys[jnp.minimum(mid, cap - 1)], q)
        lo = jnp.where(active & below, mid + 1, lo)
        hi = jnp.where(active & ~below, mid, hi)
        return lo, hi

    lo, _ = jax.lax.fori_loop(0, steps, body, (lo, hi))
    return lo


def find_or_put(
    table, keys: jax.Array, valid: jax.Array, *, impl: str = "auto", rollback=True
):
    """Ids of `keys` (`uint32[m, w]`) where `valid`, storing the new ones
    (see the module docstring for the contract). On a hash table `impl`
    picks the kernel (`"pallas"`, `"auto"` on a GPU) or `"rounds"` (`"auto"`
    elsewhere); `rollback=False` lets a hash table skip the rollback of an
    overflowing batch (its contents are then unspecified), for callers that
    keep `size + count(valid) <= capacity`."""
    keys = jnp.asarray(keys).astype(jnp.uint32)
    valid = jnp.asarray(valid, bool)
    if isinstance(table, HashTable):
        if impl == "auto":
            impl = "pallas" if jax.default_backend() == "gpu" else "rounds"
        if impl not in ("pallas", "rounds"):
            raise ValueError(
                f"a hash table takes impl 'pallas' or 'rounds', not {impl!r}"
            )
        return _table_hash.find_or_put(table, keys, valid, impl=impl, rollback=rollback)
    return _sorted_find_or_put(table, keys, valid)


def keys_by_id(table) -> jax.Array:
    """The stored keys in id order, `uint32[capacity, w]` for a sorted table
    (rows from `size` on are all-ones), `uint32[slots, w]` for a hash table
    (zeros there). Growing a table puts these rows, `valid` below `size`,
    into a larger one."""
    if isinstance(table, HashTable):
        return _table_hash.keys_by_id(table)
    cap = table.sorted_ids.shape[0]
    dest = jnp.where(table.sorted_ids >= 0, table.sorted_ids, cap)
    out = jnp.full_like(table.sorted_keys, _FILL)
    return out.at[dest].set(table.sorted_keys, mode="drop")


def _sorted_find_or_put(
    table: Table, keys: jax.Array, valid: jax.Array
) -> tuple[Table, jax.Array, jax.Array]:
    m, w = keys.shape
    cap = table.sorted_keys.shape[0]
    keys = jnp.where(valid[:, None], keys.astype(jnp.uint32), _FILL)
    pos = jnp.arange(m, dtype=jnp.int32)
    # Stable sort by key: equal keys keep their order, so the first row of
    # each run is the key's first position.
    sorted_ops = jax.lax.sort(
        [keys[:, j] for j in range(w)] + [pos], num_keys=w, is_stable=True
    )
    sk = jnp.stack(sorted_ops[:w], axis=1)
    perm = sorted_ops[w]
    sval = valid[perm]
    first = jnp.ones(m, bool)
    if m > 1:
        first = first.at[1:].set(jnp.any(sk[1:] != sk[:-1], axis=1))
    run = jnp.cumsum(first, dtype=jnp.int32) - 1  # run of each sorted row
    lb = _lower_bound(table.sorted_keys, table.size, sk)
    hit = (lb < table.size) & jnp.all(
        table.sorted_keys[jnp.minimum(lb, cap - 1)] == sk, axis=1
    )
    found_id = table.sorted_ids[jnp.minimum(lb, cap - 1)]
    new_lead = first & sval & ~hit  # sorted rows that start a new key
    # Number new keys in order of their first position among `keys`.
    new_at_pos = jnp.zeros(m, bool).at[perm].set(new_lead)
    rank_at_pos = jnp.cumsum(new_at_pos, dtype=jnp.int32) - 1
    n_new = jnp.sum(new_at_pos, dtype=jnp.int32)
    run_id = jnp.where(hit, found_id, table.size + rank_at_pos[perm])
    # Every row of a run takes the id of its leader.
    lead_id = jnp.zeros(m, jnp.int32).at[run].max(jnp.where(first, run_id, 0))
    sorted_ids = jnp.where(sval, lead_id[run], -1)
    ids = jnp.zeros(m, jnp.int32).at[perm].set(sorted_ids)
    is_new = new_at_pos
    overflow = table.size + n_new > cap
    # Merge the new keys into the sorted copy: a stored key moves up by the
    # number of new keys sorting before it; new key k lands at its lower
    # bound plus its rank among the new keys in key order.
    before = jnp.zeros(cap + 1, jnp.int32).at[jnp.where(new_lead, lb, cap)].add(1)
    shift = jnp.cumsum(before, dtype=jnp.int32)[:cap]
    dest_old = jnp.arange(cap, dtype=jnp.int32) + shift
    key_rank = jnp.cumsum(new_lead, dtype=jnp.int32) - 1
    dest_new = jnp.where(new_lead, lb + key_rank, cap)
    merged_keys = (
        jnp.full_like(table.sorted_keys, _FILL)
        .at[dest_old]
        .set(table.sorted_keys, mode="drop")
        .at[dest_new]
        .set(sk, mode="drop")
    )
    merged_ids = (
        jnp.full_like(table.sorted_ids, -1)
        .at[dest_old]
        .set(table.sorted_ids, mode="drop")
        .at[dest_new]
        .set(lead_id[run], mode="drop")
    )
    new_table = Table(
        jnp.where(overflow, table.size, table.size + n_new),
        table.overflow | overflow,
        jnp.where(overflow, table.sorted_keys, merged_keys),
        jnp.where(overflow, table.sorted_ids, merged_ids),
    )
    return new_table, ids, is_new
