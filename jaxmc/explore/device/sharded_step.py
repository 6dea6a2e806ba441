"""The level loop of the partitioned explorer (`sharded`): one
`lax.while_loop` under `shard_map` over a 1-D mesh of `D` devices.

Each device owns the states whose packed key's hash selects it (`owner`)
and keeps them in its own find-or-put table shard, numbered locally
`0, 1, ...` in its order of discovery; a state's *handle* is
`local id * D + owner`, fixed for the exploration (growth keeps local ids).
The loop is level-synchronous: a device's frontier is the id range
`[done, level_end)` of its states of the current level. Per step each
device expands a prefix of its frontier with the single-device step's code
(`program.evaluate`, `step._counts`, `_choices`, `_entries`), buckets the
live successors by owner into `[D, xchg]` buffers, and one
`lax.all_to_all` delivers them; each owner puts the keys it receives into
its table (the new ones, level `lvl + 1`, join its next frontier) and a
second `all_to_all` returns their handles, which the sender records as the
destinations of its contributions (`c_dst`; `c_src` and `h_src` are local
ids of its own states). When every device has finished the level, the
next level starts (`level_end` = the table's size).

Every capacity is fixed, and the same on every device. A device that
cannot go on (its step's buffers, its store, an exchange bucket, the level
statistics, a full output epoch) says so in its `status` and `need`; then
no device commits the step (a `pmax` of the stop flags before anything is
written), the loop ends on every device, and the host grows what was short
and resumes (`sharded.explore_sharded`). States are numbered in global BFS
order only at the end (`sharded_order`).
"""

from __future__ import annotations

from functools import cache, partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from ...lang.ast import ModelType
from ..expand import SUM_TOLERANCE
from . import table as T
from ._table_pallas import hash_words
from .program import Program, compiler_options
from .step import (
    ERROR,
    FLUSH,
    NEED_BATCH,
    NEED_STEP,
    NEED_STORE,
    RUNNING,
    TOO_MANY,
    _choices,
    _counts,
    _entries,
    table_impl,
)  # fmt: skip


#: The mesh axis of the partitioned explorer.
AXIS = "states"
#: More statuses than the single-device loop's (`step`): an exchange
#: bucket would overflow (NEED_XCHG); the per-level statistics are full
#: (NEED_LEVELS).
NEED_XCHG, NEED_LEVELS = 7, 8


class PCaps(NamedTuple):
    """Per-device capacities: those of `step.Caps`, plus the successors one
    device sends another per step (`xchg`) and the BFS levels the
    statistics hold (`levels`)."""

    batch: int
    choices: int
    entries: int
    states: int
    contribs: int
    all_choices: int
    xchg: int
    levels: int


class PCarry(NamedTuple):
    """One device's loop state (outside `shard_map`, every leaf has a
    leading axis of `D`)."""

    table: object  # the device's table shard (`table.create`)
    keys: jax.Array  # uint32 [states, w]: the key of each local id
    level: jax.Array  # int32 [states]: BFS level of each local id
    done: jax.Array  # int32: local states expanded
    level_end: jax.Array  # int32: the end of this level's local ids
    lvl: jax.Array  # int32: the level being expanded (the same everywhere)
    choice_base: jax.Array  # int32: this device's choices of past epochs
    c_src: jax.Array  # int32 [contribs]: local id of the source
    c_dst: jax.Array  # int32 [contribs]: handle of the successor
    c_prob: jax.Array  # float64 [contribs]
    c_choice: jax.Array  # int32 [contribs]: this device's choice number
    c_code: jax.Array  # int64 [contribs]
    n_contrib: jax.Array  # int32
    h_src: jax.Array  # int32 [all_choices]: local id of the source
    h_vec: jax.Array  # int32 [all_choices]
    n_choice: jax.Array  # int32
    status: jax.Array  # int32: this device's reason to stop (or RUNNING)
    # int32 [4]: the first queued state's choices and entries, the largest
    # bucket, the keys received
    need: jax.Array
    go: jax.Array  # bool: the loop goes on (the same everywhere)
    lv_new: jax.Array  # int32 [levels]: states of level l + 1 put here
    lv_sent: jax.Array  # int32 [levels]: successors of level l sent away


def owner(keys: jax.Array, d: int) -> jax.Array:
    """The device that owns each key (`uint32 [m, w]`): the high half of the
    key's hash scaled to `[0, d)` (the table's slot takes the low bits, so
    a shard's keys still spread over its slots)."""
    h = hash_words([keys[:, j] for j in range(keys.shape[1])])
    return ((h >> jnp.uint32(16)) * jnp.uint32(d) >> jnp.uint32(16)).astype(jnp.int32)


def _shard_map(f, mesh: Mesh, in_specs, out_specs):
    sm = getattr(jax, "shard_map", None)
    if sm is not None:
        return sm(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                  check_vma=False)  # fmt: skip
    from jax.experimental.shard_map import shard_map as old  # pragma: no cover

    return old(f, mesh, in_specs, out_specs, check_rep=False)  # pragma: no cover


def _local(tree):
    return jax.tree.map(lambda x: x[0], tree)


def _stacked(tree):
    return jax.tree.map(lambda x: x[None], tree)


def make_loop(prog: Program, caps: PCaps, opts: tuple, mesh: Mesh):
    """The jitted loop `run(carry, values) -> carry` over `mesh`; `opts`:
    `(prob_checks, max_states or -1, may_grow_batch)`."""
    prob_checks, max_states, may_grow_batch = opts
    check_sums = prog.mt != ModelType.CTMC and prob_checks
    B, X = caps.batch, caps.xchg
    nd = int(mesh.devices.size)

    def step(values, s: PCarry) -> PCarry:
        me = lax.axis_index(AXIS)
        # A new level once every device has expanded its part of this one.
        level_done = lax.pmin((s.done == s.level_end).astype(jnp.int32), AXIS) == 1
        level_end = jnp.where(level_done, s.table.size, s.level_end)
        lvl = s.lvl + level_done.astype(jnp.int32)
        left = lax.pmax((level_end > s.done).astype(jnp.int32), AXIS) == 1
        rows = jnp.arange(B, dtype=jnp.int32)
        queued = rows < level_end - s.done
        kb = s.keys[jnp.minimum(s.done + rows, caps.states - 1)]
        G, Pr, Dl, BAD, gbad = prog.evaluate(kb, queued, values)
        nch, nent, gc, cnt = _counts(prog, G, queued)
        ch_s = jnp.cumsum(jnp.sum(nch, axis=1), dtype=jnp.int32)
        en_s = jnp.cumsum(jnp.sum(nent, axis=1), dtype=jnp.int32)
        fits = queued & (ch_s <= caps.choices) & (en_s <= caps.entries)
        take_local = jnp.sum(fits, dtype=jnp.int32)
        fits = fits & (s.n_contrib + en_s <= caps.contribs)
        fits = fits & (s.n_choice + ch_s <= caps.all_choices)
        take = jnp.sum(fits, dtype=jnp.int32)
        status = jnp.where((take_local == 0) & queued[0], NEED_STEP, RUNNING)
        status = jnp.where((status == RUNNING) & (take < take_local), FLUSH, status)
        if may_grow_batch:
            wide = level_end - s.done >= 4 * B
            status = jnp.where((status == RUNNING) & wide, NEED_BATCH, status)
        status = jnp.where(left & (lvl >= caps.levels), NEED_LEVELS, status)
        take = jnp.where(status == RUNNING, take, 0)

        taken = rows < take
        nch_t = jnp.where(taken[:, None], nch, 0)
        valid_c, n_c, b_c, v_c, cbm = _choices(prog, caps, nch_t, gc, cnt)
        valid_e, _, ch_e, b_e, prob, delta, bad, code = _entries(
            prog, caps, valid_c, b_c, cbm, Pr, Dl, BAD
        )
        live = valid_e & (prob != 0)
        succ = kb[b_e] + delta
        dest = owner(succ, nd)
        onehot = (dest[:, None] == jnp.arange(nd)) & live[:, None]
        counts = jnp.sum(onehot, axis=0, dtype=jnp.int32)
        rank = (
            jnp.take_along_axis(
                jnp.cumsum(onehot, axis=0, dtype=jnp.int32), dest[:, None], axis=1
            )[:, 0]
            - 1
        )
        status = jnp.where((status == RUNNING) & jnp.any(counts > X), NEED_XCHG, status)
        received = jnp.sum(lax.all_to_all(counts, AXIS, 0, 0), dtype=jnp.int32)
        short = s.table.size + received > caps.states
        status = jnp.where((status == RUNNING) & short, NEED_STORE, status)
        need = jnp.stack([ch_s[0], en_s[0], jnp.max(counts), received])
        # Commit only where no device stops (nothing written otherwise).
        commit = lax.pmax((status != RUNNING).astype(jnp.int32), AXIS) == 0
        commit = commit & left
        live = live & commit
        valid_c = valid_c & commit
        take = jnp.where(commit, take, 0)
        n_c = jnp.where(commit, n_c, 0)

        at = jnp.where(live, dest * X + rank, nd * X)
        w = succ.shape[1]
        send = jnp.zeros((nd * X, w), jnp.uint32).at[at].set(succ, mode="drop")
        sent = jnp.zeros(nd * X, bool).at[at].set(True, mode="drop")
        got = lax.all_to_all(send.reshape(nd, X, w), AXIS, 0, 0).reshape(nd * X, w)
        got_ok = lax.all_to_all(sent.reshape(nd, X), AXIS, 0, 0).reshape(nd * X)
        table, ids, is_new = T.find_or_put(s.table, got, got_ok, rollback=False)
        put = jnp.where(is_new, ids, caps.states)
        keys = s.keys.at[put].set(got, mode="drop")
        level = s.level.at[put].set(lvl + 1, mode="drop")
        handle = jnp.where(got_ok, ids * nd + me, -1).reshape(nd, X)
        back = lax.all_to_all(handle, AXIS, 0, 0).reshape(nd * X)
        dst = back[jnp.clip(at, 0, nd * X - 1)]

        err = jnp.any(gbad & taken & commit) | jnp.any(bad & valid_e & commit)
        ok_e = valid_e & commit
        err = err | jnp.any(ok_e & ~jnp.isfinite(prob)) | jnp.any(ok_e & (prob < 0))
        if check_sums:
            sums = jax.ops.segment_sum(jnp.where(ok_e, prob, 0.0), ch_e, caps.choices)
            err = err | jnp.any(valid_c & (jnp.abs(sums - 1.0) > SUM_TOLERANCE))
        after = jnp.where(err, ERROR, status)
        if max_states >= 0:
            total = lax.psum(table.size, AXIS)
            many = (after == RUNNING) & (total > max_states)
            after = jnp.where(many, TOO_MANY, after)
        go = commit & (lax.pmax((after != RUNNING).astype(jnp.int32), AXIS) == 0)

        pos = s.n_contrib + jnp.cumsum(live, dtype=jnp.int32) - 1
        at_c = jnp.where(live, pos, caps.contribs)
        hat = jnp.where(valid_c, s.n_choice + jnp.arange(caps.choices, dtype=jnp.int32),
                        caps.all_choices)  # fmt: skip
        at_l = jnp.where(commit, lvl, caps.levels)
        away = jnp.sum(live & (dest != me), dtype=jnp.int32)
        return PCarry(
            table, keys, level, s.done + take, level_end, lvl, s.choice_base,
            s.c_src.at[at_c].set(s.done + b_e, mode="drop"),
            s.c_dst.at[at_c].set(dst, mode="drop"),
            s.c_prob.at[at_c].set(prob, mode="drop"),
            s.c_choice.at[at_c].set(s.choice_base + s.n_choice + ch_e, mode="drop"),
            s.c_code.at[at_c].set(code, mode="drop"),
            s.n_contrib + jnp.sum(live, dtype=jnp.int32),
            s.h_src.at[hat].set(s.done + b_c, mode="drop"),
            s.h_vec.at[hat].set(v_c, mode="drop"),
            s.n_choice + n_c,
            after.astype(jnp.int32), need, go,
            s.lv_new.at[at_l].add(jnp.sum(is_new, dtype=jnp.int32), mode="drop"),
            s.lv_sent.at[at_l].add(away, mode="drop"),
        )  # fmt: skip

    def loop(s: PCarry, values) -> PCarry:
        s = _local(s)
        s = lax.while_loop(lambda s: s.go, partial(step, values), s)
        return _stacked(s)

    spec = P(AXIS)
    return jax.jit(_shard_map(loop, mesh, (spec, P()), spec),
                   compiler_options=compiler_options())  # fmt: skip


def _empty_local(caps: PCaps, w: int) -> PCarry:
    z32 = jnp.zeros((), jnp.int32)
    return PCarry(
        T.create(caps.states, w, table_impl()),
        jnp.zeros((caps.states, w), jnp.uint32),
        jnp.zeros(caps.states, jnp.int32),
        z32, z32, z32, z32,
        jnp.zeros(caps.contribs, jnp.int32),
        jnp.zeros(caps.contribs, jnp.int32),
        jnp.zeros(caps.contribs, jnp.float64),
        jnp.zeros(caps.contribs, jnp.int32),
        jnp.zeros(caps.contribs, jnp.int64),
        z32,
        jnp.zeros(caps.all_choices, jnp.int32),
        jnp.zeros(caps.all_choices, jnp.int32),
        z32, z32,
        jnp.zeros(4, jnp.int32),
        jnp.ones((), bool),
        jnp.zeros(caps.levels, jnp.int32),
        jnp.zeros(caps.levels, jnp.int32),
    )  # fmt: skip


def _pad(x: jax.Array, n: int) -> jax.Array:
    if x.shape[0] == n:
        return x
    return jnp.concatenate([x, jnp.zeros((n - x.shape[0], *x.shape[1:]), x.dtype)])


def _regrow_local(s: PCarry, new: PCaps) -> PCarry:
    table, keys, level = s.table, s.keys, s.level
    w = keys.shape[1]
    if new.states != keys.shape[0]:
        keys, level = _pad(keys, new.states), _pad(level, new.states)
        table = T.create(new.states, w, table_impl())
        valid = jnp.arange(new.states) < s.table.size
        table, _, _ = T.find_or_put(table, keys, valid)
    fresh = _empty_local(new, w)
    return fresh._replace(
        table=table, keys=keys, level=level, done=s.done, level_end=s.level_end,
        lvl=s.lvl, choice_base=s.choice_base + s.n_choice,
        lv_new=_pad(s.lv_new, new.levels), lv_sent=_pad(s.lv_sent, new.levels),
    )  # fmt: skip


def empty_carry(caps: PCaps, w: int, mesh: Mesh) -> PCarry:
    """Empty tables and buffers on every device of `mesh`."""
    nd = int(mesh.devices.size)
    ticks = jax.device_put(np.zeros(nd, np.int32), NamedSharding(mesh, P(AXIS)))
    return _empty_fn(caps, w, mesh)(ticks)


@cache
def _empty_fn(caps: PCaps, w: int, mesh: Mesh):
    def make(_):
        return _stacked(_empty_local(caps, w))

    return jax.jit(_shard_map(make, mesh, P(AXIS), P(AXIS)))


def regrow(s: PCarry, new: PCaps, mesh: Mesh) -> PCarry:
    """`s` with new, empty output epochs for the capacities `new`, the
    stores padded to them (each table rebuilt: its keys put again in id
    order keep their ids), ready to resume (`go` set). The caller keeps the
    old epochs."""
    return _regrow_fn(new, mesh)(s)


@cache
def _regrow_fn(new: PCaps, mesh: Mesh):
    def grow(s):
        return _stacked(_regrow_local(_local(s), new))

    return jax.jit(_shard_map(grow, mesh, P(AXIS), P(AXIS)))


def seed(s: PCarry, keys: np.ndarray, mesh: Mesh) -> tuple[PCarry, np.ndarray]:
    """`s` with the initial states (`keys`, packed) put on their owners, and
    the handle of each."""
    s, handles = _seed_fn(mesh)(s, jax.device_put(keys, NamedSharding(mesh, P())))
    return s, np.asarray(handles).max(axis=0)


@cache
def _seed_fn(mesh: Mesh):
    nd = int(mesh.devices.size)

    def put(s, keys):
        s = _local(s)
        me = lax.axis_index(AXIS)
        mine = owner(keys, nd) == me
        table, ids, is_new = T.find_or_put(s.table, keys, mine)
        at = jnp.where(is_new, ids, s.keys.shape[0])
        s = s._replace(table=table, keys=s.keys.at[at].set(keys, mode="drop"),
                       level_end=table.size)  # fmt: skip
        return _stacked(s), jnp.where(mine, ids * nd + me, -1)[None]

    return jax.jit(_shard_map(put, mesh, (P(AXIS), P()), (P(AXIS), P(AXIS))))
