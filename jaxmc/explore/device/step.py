"""The level loop of the device explorer: one `lax.while_loop` that takes
batches of states from the queue, expands them and deduplicates their
successors, with every capacity fixed; it stops and says why when a
capacity would overflow (the host grows it and resumes), on an evaluation
error, or when the queue is empty.

States are numbered in discovery order and the queue is the id range
`[done, found)` (as in the host builder). A step takes the longest prefix of
the queue, up to `batch` states, whose choices and entries fit the step's
buffers, and numbers new successors in the order of the entries (source
state, then choice, then update combination); taking the queue in any
prefixes gives the same numbering, BFS order.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ...lang.ast import ModelType
from ..expand import SUM_TOLERANCE
from . import table as T
from .program import Program, compiler_options


#: Why the loop stopped (`Carry.status`): the queue is empty (RUNNING);
#: the step's buffers are too small for the first queued state, or (where
#: they may grow) for `1 / NARROW` of a full step (NEED_STEP);
#: the state store may overflow (NEED_STORE); the output epoch is full
#: (FLUSH); an evaluation error (ERROR); the queue is wide enough for a
#: larger batch (NEED_BATCH); more than `max_states` states (TOO_MANY).
RUNNING, NEED_STEP, NEED_STORE, FLUSH, ERROR, NEED_BATCH, TOO_MANY = range(7)
#: A short step (`make_loop`'s `short`) could not take the queue's first
#: state: the full step takes over (never seen outside the loop).
SHORT_STUCK = 7
#: The loop without short steps has taken `NARROW_TRIPS` full steps in a row
#: on a queue a short step would hold: the host switches to the loop with
#: short steps (which compiles a second step, so only where it pays).
NARROW_LEVELS = 8
NARROW_TRIPS = 256
#: A step whose buffers hold fewer than `batch // NARROW` queued states asks
#: for larger ones (states with many successors would otherwise take
#: thousands of narrow steps).
NARROW = 16


class Caps(NamedTuple):
    """Static capacities: states per step, choices and entries per step,
    states in all, and the contributions (entries before merging) and
    choices of one output epoch (`contribs >= entries`,
    `all_choices >= choices`)."""

    batch: int
    choices: int
    entries: int
    states: int
    contribs: int
    all_choices: int


class Carry(NamedTuple):
    table: T.Table
    keys: jax.Array  # uint32 [states, w]: the key of each state id
    level: jax.Array  # int32 [states]: BFS level of each state
    done: jax.Array  # int32: states expanded
    choice_base: jax.Array  # int32: choices in the epochs before this one
    c_src: jax.Array  # int32 [contribs]
    c_dst: jax.Array  # int32 [contribs]
    c_prob: jax.Array  # float64 [contribs]
    c_choice: jax.Array  # int32 [contribs]
    c_code: jax.Array  # int64 [contribs]
    n_contrib: jax.Array  # int32
    h_src: jax.Array  # int32 [all_choices]: source state of each choice
    h_vec: jax.Array  # int32 [all_choices]: its vector (n_vectors: deadlock)
    n_choice: jax.Array  # int32
    status: jax.Array  # int32
    # int32 [6]: choices and entries the step's buffers must hold (through
    # the first state or, starved, `batch // NARROW` states); those of the
    # states it takes; those of the first state alone
    need: jax.Array
    narrow: jax.Array  # int32: full steps in a row on a short queue


def _counts(prog: Program, G, valid):
    """Per state and vector: number of choices and of entries `[b, V+1]`,
    and the enabled candidates `[b, V+1, K, L]`."""
    cands = jnp.asarray(prog.cands)
    pad = jnp.asarray(prog.part_module < 0)
    gc = G[:, jnp.maximum(cands, 0)] & (cands >= 0)
    upd = jnp.asarray(prog.n_upd)[jnp.maximum(cands, 0)]
    cnt = jnp.where(pad, 1, jnp.sum(gc, axis=-1, dtype=jnp.int32))
    ucnt = jnp.where(pad, 1, jnp.sum(jnp.where(gc, upd, 0), axis=-1, dtype=jnp.int32))
    nch = jnp.prod(cnt, axis=-1, dtype=jnp.int32)
    nent = jnp.prod(ucnt, axis=-1, dtype=jnp.int32)
    dead = jnp.sum(nch[:, :-1], axis=1) == 0
    nch = nch.at[:, -1].set(dead.astype(jnp.int32))
    nent = nent.at[:, -1].set(dead.astype(jnp.int32))
    keep = valid[:, None]
    return jnp.where(keep, nch, 0), jnp.where(keep, nent, 0), gc, cnt


def _choices(prog: Program, caps: Caps, nch, gc, cnt):
    """The step's choices, in order: source row, vector, and command per
    module (`-1`: the module takes no part)."""
    v1 = prog.n_vectors + 1
    flat = nch.reshape(-1)
    off = jnp.cumsum(flat, dtype=jnp.int32)
    total = off[-1]
    c = jnp.arange(caps.choices, dtype=jnp.int32)
    pair = jnp.minimum(jnp.searchsorted(off, c, side="right"), flat.size - 1)
    valid = c < total
    b, v = pair // v1, pair % v1
    q = c - (off[pair] - flat[pair])
    cands = jnp.asarray(prog.cands)
    part_module = jnp.asarray(prog.part_module)
    k = prog.n_modules
    cbm = jnp.full((caps.choices, k), -1, jnp.int32)
    for j in reversed(range(prog.max_parts)):
        cj = jnp.maximum(cnt[b, v, j], 1)
        d = q % cj
        q = q // cj
        en = gc[b, v, j]
        rank = jnp.cumsum(en, axis=-1, dtype=jnp.int32)
        sel = jnp.argmax(en & (rank == d[:, None] + 1), axis=-1)
        mod = part_module[v, j]
        cmd = cands[v, j, sel]
        cbm = cbm.at[c, jnp.where(mod >= 0, mod, k)].set(cmd, mode="drop")
    return valid, total, b, v, cbm


def _entries(prog: Program, caps: Caps, valid_c, b_c, cbm, P, D, BAD):
    """The step's entries (update combinations of each choice), in order."""
    n_upd = jnp.asarray(prog.n_upd)
    reps_cm = jnp.where(cbm >= 0, n_upd[jnp.maximum(cbm, 0)], 1)
    per = jnp.where(valid_c, jnp.prod(reps_cm, axis=1, dtype=jnp.int32), 0)
    off = jnp.cumsum(per, dtype=jnp.int32)
    total = off[-1]
    e = jnp.arange(caps.entries, dtype=jnp.int32)
    ch = jnp.minimum(jnp.searchsorted(off, e, side="right"), caps.choices - 1)
    valid = e < total
    r = e - (off[ch] - per[ch])
    b = b_c[ch]
    w = D.shape[2]
    prob = jnp.ones(caps.entries)
    delta = jnp.zeros((caps.entries, w), jnp.uint32)
    bad = jnp.zeros(caps.entries, bool)
    code = jnp.zeros(caps.entries, jnp.int64)
    first_gid = jnp.asarray(prog.first_gid)
    first_local = jnp.asarray(prog.first_local)
    for m in reversed(range(prog.n_modules)):
        cmd = cbm[ch, m]
        has = cmd >= 0
        cmd0 = jnp.maximum(cmd, 0)
        reps = reps_cm[ch, m]
        digit = r % reps
        r = r // reps
        gid = first_gid[cmd0] + digit
        prob = prob * jnp.where(has, P[b, gid], 1.0)
        delta = delta + jnp.where(has[:, None], D[b, gid], jnp.uint32(0))
        bad = bad | (has & BAD[b, gid])
        lcode = (first_local[cmd0] + digit + 1) * int(prog.radix[m])
        code = code + jnp.where(has, lcode, 0)
    return valid, total, ch, b, prob, delta, bad, code


def short_caps(caps: Caps, short: tuple[int, int, int] | None) -> Caps | None:
    """The step buffers for a short queue (`short`: states, choices,
    entries), None where they would not be smaller than `caps`' own."""
    if short is None:
        return None
    b, c, e = short
    if b >= caps.batch and c >= caps.choices and e >= caps.entries:
        return None
    return caps._replace(
        batch=min(b, caps.batch), choices=min(c, caps.choices),
        entries=min(e, caps.entries),
    )  # fmt: skip


def make_loop(
    prog: Program,
    caps: Caps,
    opts: tuple,
    short: Caps | None = None,
    watch: int | None = None,
):
    """The jitted loop `run(carry, values) -> carry` for these capacities
    (`values`: `prog.values` or those of a program with the same
    `signature`); `opts`:
    `(prob_checks, max_states or -1, may_grow_batch, bounded,
    may_grow_step)` (`bounded`: the state store holds every valuation of the
    variables, so it cannot overflow; `may_grow_step`: ask for larger step
    buffers where they hold less than `1 / NARROW` of a step).

    `short` (`short_caps`): smaller step buffers (the output and the state
    store as in `caps`) for a queue of at most `short.batch` states: a step
    costs in proportion to its buffers, so deep, narrow state spaces (a BFS
    level of a few states, as brp's) take a short step per level instead of
    a full one. Where the short buffers cannot hold the queue's first state
    the full step runs in the same trip. The numbering is the same (any
    prefix of the queue numbers its successors as one step would). `watch`
    (without `short`): stop with `NARROW_LEVELS` after `NARROW_TRIPS` full
    steps in a row on a queue of at most `watch` states."""
    prob_checks, max_states, may_grow_batch, bounded, may_grow_step = opts
    check_sums = prog.mt != ModelType.CTMC and prob_checks

    def step(values, s: Carry, caps: Caps = caps, full: bool = True):
        """One step with buffers `caps`; with `full` False (a short step)
        it never asks for larger buffers or batches, and stops with
        `SHORT_STUCK` where it cannot take the queue's first state."""
        B = caps.batch
        found = s.table.size
        rows = jnp.arange(B, dtype=jnp.int32)
        queued = rows < found - s.done
        kb = s.keys[jnp.minimum(s.done + rows, caps.states - 1)]
        G, P, D, BAD, gbad = prog.evaluate(kb, queued, values)
        nch, nent, gc, cnt = _counts(prog, G, queued)
        ch_s = jnp.cumsum(jnp.sum(nch, axis=1), dtype=jnp.int32)
        en_s = jnp.cumsum(jnp.sum(nent, axis=1), dtype=jnp.int32)
        fits = queued & (ch_s <= caps.choices) & (en_s <= caps.entries)
        take_local = jnp.sum(fits, dtype=jnp.int32)
        if not bounded:
            fits = fits & (found + en_s <= caps.states)
        take_store = jnp.sum(fits, dtype=jnp.int32)
        fits = fits & (s.n_contrib + en_s <= caps.contribs)
        fits = fits & (s.n_choice + ch_s <= caps.all_choices)
        take = jnp.sum(fits, dtype=jnp.int32)
        last = jnp.maximum(take_local - 1, 0)
        first = 0
        # (an empty queue: the full step after the short ones commits nothing)
        stuck = (take_local == 0) & (found > s.done)
        if full:
            status = jnp.where(stuck, NEED_STEP, RUNNING)
        else:
            status = jnp.where(stuck, SHORT_STUCK, RUNNING)
        if may_grow_step and full:
            n_queued = jnp.minimum(found - s.done, B)
            want = jnp.clip(jnp.minimum(n_queued, B // NARROW), 1, B)
            starved = (take_local < want) & (found > s.done)
            first = jnp.where(starved, want - 1, 0)
            status = jnp.where(starved, NEED_STEP, status)
        need = jnp.stack([ch_s[first], en_s[first], ch_s[last], en_s[last],
                          ch_s[0], en_s[0]])  # fmt: skip
        # (the full step after short ones that stopped the loop keeps their
        # outcome and commits nothing)
        held = s.status != RUNNING
        status = jnp.where(held, s.status, status)
        need = jnp.where(held, s.need, need)
        no_room = (status == RUNNING) & (take_store < take_local)
        status = jnp.where(no_room, NEED_STORE, status)
        status = jnp.where((status == RUNNING) & (take < take_local), FLUSH, status)
        if may_grow_batch and full:
            wide = found - s.done >= 4 * B
            status = jnp.where((status == RUNNING) & wide, NEED_BATCH, status)

        # Where the loop stops, the step commits nothing (`take` 0); a
        # branch-free body lets XLA update the loop's buffers in place.
        take = jnp.where(status == RUNNING, take, 0)

        def go(s: Carry) -> Carry:
            taken = rows < take
            nch_t = jnp.where(taken[:, None], nch, 0)
            valid_c, n_c, b_c, v_c, cbm = _choices(prog, caps, nch_t, gc, cnt)
            valid_e, _, ch_e, b_e, prob, delta, bad, code = _entries(
                prog, caps, valid_c, b_c, cbm, P, D, BAD
            )
            err = jnp.any(gbad & taken) | jnp.any(bad & valid_e)
            err = err | jnp.any(valid_e & ~jnp.isfinite(prob))
            err = err | jnp.any(valid_e & (prob < 0))
            if check_sums:
                sums = jax.ops.segment_sum(
                    jnp.where(valid_e, prob, 0.0), ch_e, caps.choices
                )
                err = err | jnp.any(valid_c & (jnp.abs(sums - 1.0) > SUM_TOLERANCE))
            live = valid_e & (prob != 0)
            succ = kb[b_e] + delta
            # (the step keeps `found + entries <= states`: no overflow)
            table, ids, is_new = T.find_or_put(s.table, succ, live, rollback=False)
            src = s.done + b_e
            at = jnp.where(is_new, ids, caps.states)
            keys = s.keys.at[at].set(succ, mode="drop")
            level = s.level.at[at].set(
                s.level[jnp.minimum(src, caps.states - 1)] + 1, mode="drop"
            )
            pos = s.n_contrib + jnp.cumsum(live, dtype=jnp.int32) - 1
            at = jnp.where(live, pos, caps.contribs)
            c_choice = s.choice_base + s.n_choice + ch_e
            hat = jnp.where(
                valid_c,
                s.n_choice + jnp.arange(caps.choices, dtype=jnp.int32),
                caps.all_choices,
            )
            after = jnp.where(err, ERROR, RUNNING)
            if max_states >= 0:
                after = jnp.where(table.size > max_states, TOO_MANY, after)
            after = jnp.where(status == RUNNING, after, status)
            narrow = s.narrow
            if watch is not None and full:
                few = (found - s.done <= watch) & (take > 0)
                narrow = jnp.where(few, s.narrow + 1, 0)
                trips = (after == RUNNING) & (narrow >= NARROW_TRIPS)
                after = jnp.where(trips, NARROW_LEVELS, after)
            return Carry(
                table, keys, level, s.done + take, s.choice_base,
                s.c_src.at[at].set(src, mode="drop"),
                s.c_dst.at[at].set(ids, mode="drop"),
                s.c_prob.at[at].set(prob, mode="drop"),
                s.c_choice.at[at].set(c_choice, mode="drop"),
                s.c_code.at[at].set(code, mode="drop"),
                s.n_contrib + jnp.sum(live, dtype=jnp.int32),
                s.h_src.at[hat].set(s.done + b_c, mode="drop"),
                s.h_vec.at[hat].set(v_c, mode="drop"),
                s.n_choice + n_c,
                after.astype(jnp.int32), need, narrow,
            )  # fmt: skip

        return go(s)

    def body(values, s: Carry) -> Carry:
        if short is None:
            return step(values, s)

        # Short steps while the queue is short (a loop of its own, not a
        # `lax.cond`, whose branches would copy the loop's buffers), then one
        # full step: for a wide queue, or a first state the short buffers
        # cannot hold (that short step committed nothing).
        def few(s):
            queue = s.table.size - s.done
            return (s.status == RUNNING) & (queue > 0) & (queue <= short.batch)

        s = jax.lax.while_loop(few, partial(step, values, caps=short, full=False), s)
        s = s._replace(status=jnp.where(s.status == SHORT_STUCK, RUNNING, s.status))
        return step(values, s)

    def cond(s: Carry):
        return (s.status == RUNNING) & (s.done < s.table.size)

    @partial(jax.jit, compiler_options=compiler_options())
    def run(s: Carry, values) -> Carry:
        return jax.lax.while_loop(cond, partial(body, values), s)

    return run


def table_impl() -> str:
    """The loop's find-or-put table: the Pallas hash table on a GPU, the
    hash table probed in XLA rounds elsewhere (a step then costs what its
    keys cost; with the sorted table it would cost the table's capacity)."""
    return "pallas" if jax.default_backend() == "gpu" else "rounds"


@partial(jax.jit, static_argnums=(0, 1))
def empty_carry(caps: Caps, w: int) -> Carry:
    z32 = jnp.zeros((), jnp.int32)
    return Carry(
        T.create(caps.states, w, table_impl()),
        jnp.zeros((caps.states, w), jnp.uint32),
        jnp.zeros(caps.states, jnp.int32),
        z32,
        z32,
        jnp.zeros(caps.contribs, jnp.int32),
        jnp.zeros(caps.contribs, jnp.int32),
        jnp.zeros(caps.contribs, jnp.float64),
        jnp.zeros(caps.contribs, jnp.int32),
        jnp.zeros(caps.contribs, jnp.int64),
        z32,
        jnp.zeros(caps.all_choices, jnp.int32),
        jnp.zeros(caps.all_choices, jnp.int32),
        z32,
        z32,
        jnp.zeros(6, jnp.int32),
        z32,
    )


@partial(jax.jit, static_argnums=1)
def regrow(s: Carry, new: Caps) -> Carry:
    """`s` with a new, empty output epoch for the capacities `new` and its
    state store padded to them (the table rebuilt: the keys put again in id
    order keep their ids). The caller keeps the old epoch (`epoch`)."""
    table, keys, level = s.table, s.keys, s.level
    if new.states != s.keys.shape[0]:
        extra = new.states - s.keys.shape[0]
        keys = jnp.concatenate([keys, jnp.zeros((extra, keys.shape[1]), keys.dtype)])
        level = jnp.concatenate([level, jnp.zeros(extra, level.dtype)])
        table = T.create(new.states, keys.shape[1], table_impl())
        valid = jnp.arange(new.states) < s.table.size
        table, _, _ = T.find_or_put(table, keys, valid)
    fresh = empty_carry(new, keys.shape[1])
    return fresh._replace(
        table=table, keys=keys, level=level, done=s.done,
        choice_base=s.choice_base + s.n_choice,
    )  # fmt: skip


class Epoch(NamedTuple):
    """The outputs of one epoch: contributions and choices, and their counts."""

    c_src: jax.Array
    c_dst: jax.Array
    c_prob: jax.Array
    c_choice: jax.Array
    c_code: jax.Array
    n_contrib: int
    h_src: jax.Array
    h_vec: jax.Array
    n_choice: int


def epoch(s: Carry) -> Epoch:
    """The output epoch of `s` (device arrays, not copied)."""
    return Epoch(s.c_src, s.c_dst, s.c_prob, s.c_choice, s.c_code,
                 int(s.n_contrib), s.h_src, s.h_vec, int(s.n_choice))  # fmt: skip


def seed(prog: Program, s: Carry, init_states: np.ndarray) -> Carry:
    """`s` with the initial states stored (ids 0.., in the given order)."""
    # (`device_put`, not `jnp.asarray`, which compiles a copy per shape)
    return _seed(s, jax.device_put(prog.pack.encode_host(init_states)))


@jax.jit
def _seed(s: Carry, keys) -> Carry:
    n = keys.shape[0]
    table, _, _ = T.find_or_put(s.table, keys, jnp.ones(n, bool))
    return s._replace(table=table, keys=s.keys.at[:n].set(keys))
