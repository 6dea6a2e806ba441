"""One BFS batch expanded: guards, choices, update combinations, successors
(numbered as they are found) and the batch's merged transition rows, which
are appended to the `Builder`'s per-batch outputs (steps 1-5 of
`jaxmc.explore.builder`).

The updates of a command are evaluated once per (state, command) pair that
takes part in a choice (`compose.Pairs`), into one flat table per module:
the probability and key delta of update `j` of pair `p` at `uoff[p] + j *
ustride[p]`. A choice holds one pair per module (a sentinel pair, factor 1
and delta 0, where the module does not take part), so that the expansion
into update combinations is a few gathers per module, without masks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import ExplorationError
from ..lang.ast import ModelType
from . import memory
from .compile import Command, Update
from .rows import add_rows


if TYPE_CHECKING:
    from .builder import Builder


#: PRISM's default tolerance for probabilities summing to one.
SUM_TOLERANCE = 1e-5
#: Deadlock states named by the error of `deadlocks="error"`.
MAX_DEADLOCK_EXAMPLES = 5


class _Gather:
    """Columns of the states `idx` of a batch, gathered on first use."""

    def __init__(self, cols: list[np.ndarray], idx: np.ndarray):
        self.cols, self.idx, self.cache = cols, idx, {}

    def __getitem__(self, i: int) -> np.ndarray:
        c = self.cache.get(i)
        if c is None:
            c = self.cache[i] = self.cols[i][self.idx]
        return c


def as_float(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


class _Table:
    """One module's evaluated updates (see the module docstring): per pair
    (plus the sentinel, last) `uoff`, `ustride`, `nup` (updates) and `cmd`;
    per flat slot the probability `prob`, the key delta `delta` (`[slots]`
    for one-word keys, else `[slots, W]`) and `code`, the update's part of
    an entry's provenance code: its digit times the module's radix where
    the codes fit one word (`Compiled.code_fits`; 0 for the sentinel), else
    its global update id (-1 for the sentinel)."""

    __slots__ = ("uoff", "ustride", "nup", "prob", "delta", "code", "cmd", "max_up")


def _evaluate(bfs: Builder, m: int, pairs, cols, states, n_words: int) -> _Table:
    comp = bfs.comp
    blocks = pairs.blocks
    size = pairs.size
    t = _Table()
    cis = [b[0] for b in blocks]
    lens = np.array([b[2] - b[1] for b in blocks], dtype=np.int64)
    pos = comp.cmd_pos[cis] if cis else np.zeros(0, np.int64)
    nup_c = comp.n_upd[pos]
    base = np.zeros(len(blocks) + 1, dtype=np.int64)
    np.cumsum(nup_c * lens, out=base[1:])
    total = int(base[-1])
    # per pair, then the sentinel
    cmd_of = np.repeat(np.arange(len(blocks)), lens)
    first = np.array([b[1] for b in blocks], dtype=np.int64)
    t.uoff = np.empty(size + 1, dtype=np.int64)
    t.uoff[:size] = base[:-1][cmd_of] + np.arange(size) - first[cmd_of]
    t.uoff[size] = total
    t.ustride = np.empty(size + 1, dtype=np.int64)
    t.ustride[:size] = lens[cmd_of]
    t.ustride[size] = 0
    t.nup = np.empty(size + 1, dtype=np.int64)
    t.nup[:size] = nup_c[cmd_of]
    t.nup[size] = 1
    t.max_up = int(nup_c.max()) if len(blocks) else 1
    t.cmd = np.empty(size + 1, dtype=np.int64)
    t.cmd[:size] = np.asarray(cis, dtype=np.int64)[cmd_of]
    t.cmd[size] = -1
    prob = t.prob = np.empty(total + 1)
    prob[total] = 1.0
    if n_words == 1:
        delta = t.delta = np.empty(total + 1, dtype=np.int64)
    else:
        delta = t.delta = np.empty((total + 1, n_words), dtype=np.int64)
    delta[total] = 0
    code = t.code = np.empty(total + 1, dtype=np.int64)
    # the digit of update `j` of command `pos` is `first_local[pos] + 1 + j`
    if comp.code_fits:
        scale, shift = int(comp.radix[m]), 1
        code[total] = 0
    else:
        scale, shift = 1, int(comp.module_offset[m])
        code[total] = -1
    used = pairs.used
    src = pairs.src
    for b, (ci, a, z) in enumerate(blocks):
        active = None
        if used is not None:
            active = used[a:z]
            if active.all():
                active = None
            elif not active.any():
                continue
        cmd = comp.by_index[ci]
        rows = src[a:z]
        gat = _Gather(cols, rows)
        ln = z - a
        at = int(base[b])
        first_code = int(comp.first_local[pos[b]]) + shift
        for j, u in enumerate(cmd.updates):
            code[at : at + ln] = (first_code + j) * scale
            p, d, bad, new = u.fused(gat, active, ln)
            if bad is not False:
                if active is not None:
                    bad = bad & active
                if bad.any():
                    locate_range_error(bfs, cmd, u, new, rows, active, states)
            prob[at : at + ln] = p
            if n_words == 1:
                delta[at : at + ln] = d[0]
            else:
                for w, dw in enumerate(d):
                    delta[at : at + ln, w] = dw
            at += ln
    return t


def expand(bfs: Builder, lo: int, hi: int, max_entries: int | None = None) -> int:
    """Expand the states `[lo, hi)`, or a prefix of them where they make
    more than `max_entries` entries: their rows, their new successors.
    Returns the end of the states expanded."""
    comp = bfs.comp
    W = comp.enc.n_words
    got = _choices(bfs, lo, hi, max_entries)
    if isinstance(got, int):  # too many entries: the states up to `got`
        hi = got
        got = _choices(bfs, lo, hi)
    keys, cols, n, nc, prob, delta, code, e_src, e_choice, c_src, c_lab, per_state = got

    # 4. successors → ids (the keys made in `delta`'s place)
    if W == 1:
        delta += keys[:, 0][e_src]
        succ = delta[:, None]
    else:
        delta += keys[e_src]
        succ = delta
    del delta
    ids = bfs.table.find_or_add(succ, bfs.before_add)
    del succ

    # 5. rows, merging duplicates
    add_rows(bfs, lo, n, nc, cols, prob, ids, code, e_src, e_choice, c_src, c_lab,
             per_state)  # fmt: skip
    return hi


def check(bfs: Builder, lo: int, hi: int) -> None:
    """Raise the error (of a range, a sign or a sum) that expanding `[lo,
    hi)` as one batch raises before its successors are numbered, if any."""
    _choices(bfs, lo, hi)


def _choices(bfs: Builder, lo: int, hi: int, max_entries: int | None = None):
    """Steps 1-3 of `expand`: the batch's choices and their update
    combinations, checked; or, where they would be more than `max_entries`
    (and the batch more than one state), the end of the states whose
    entries fit 2/3 of `max_entries` (at least one): batches cut there make
    the same model and errors (`Builder.as_one_batch`). Nothing is recorded
    before that answer (the actions met are, but by their place in the
    level, `actions.ActionOrder`)."""
    comp = bfs.comp
    n = hi - lo
    W = comp.enc.n_words
    keys = bfs.table.keys[lo:hi]
    cols = comp.enc.decode_columns(keys)

    # 1. guards
    masks = {
        c.cmd.index: np.asarray(c.guard.unchecked(cols, n), dtype=bool)
        for c in comp.commands
    }
    # 2. composition into choices (pair indices per module)
    pairs, blocks = bfs.composer.run(masks, n)
    k = bfs.composer.k
    sentinel = [p.size for p in pairs]
    # Per block: its states, its modules' pair columns, its label.
    c_src_l, parts, labs = [], [], []
    for v, a, src, mods, pcols in blocks:
        c_src_l.append(src)
        parts.append(list(zip(mods, pcols)))
        labs.append(bfs.actions_order.id(bfs, a, v))
    has = np.zeros(n, dtype=bool)
    for src in c_src_l:
        has[src] = True
    dead = (~has).nonzero()[0]
    if dead.size:
        # Deadlock states get a choice with no command: a self-loop.
        c_src_l.append(dead)
        parts.append([])
        labs.append(-1)
    # Choices by state, in vector order within a state (a stable sort):
    # `dest`, the place of each block's choices (None: where they are).
    c_src = c_src_l[0] if len(c_src_l) == 1 else np.concatenate(c_src_l)
    dest = None
    if c_src.size > 1 and not (c_src[1:] >= c_src[:-1]).all():
        order = np.argsort(c_src, kind="stable")
        c_src = c_src[order]
        dest = np.empty_like(order)
        dest[order] = np.arange(order.size)
        del order
    # The pair of each module in each choice (the sentinel where the module
    # takes no part), in int32: `k` per choice, alive to the end.
    c_pair = np.empty((k, c_src.size), dtype=np.int32)
    for m in range(k):
        c_pair[m] = sentinel[m]
    c_lab = np.empty(c_src.size, dtype=np.int32)
    at = 0
    for src, pcols, lab in zip(c_src_l, parts, labs):
        where = slice(at, at + src.size) if dest is None else dest[at : at + src.size]
        for m, c in pcols:
            c_pair[m, where] = c
        c_lab[where] = lab
        at += src.size
    del c_src_l, parts, dest
    nc = c_src.size
    # None: one choice per state, in state order
    per_state = np.bincount(c_src, minlength=n) if nc != n else None

    # 3. updates of the pairs, then the update combinations of each choice
    tables = [_evaluate(bfs, m, pairs[m], cols, keys, W) for m in range(k)]
    reps = [
        np.take(t.nup, c_pair[m]) if t.max_up > 1 else None
        for m, t in enumerate(tables)
    ]
    total = None
    for r in reps:
        if r is not None:
            total = r.copy() if total is None else total * r
    ne = nc if total is None else int(total.sum())
    if max_entries is not None and ne > max_entries and n > 1:
        per = np.bincount(c_src, weights=total, minlength=n)
        fit = int(np.searchsorted(np.cumsum(per), max_entries * 2 // 3, side="right"))
        return lo + max(1, fit)
    room = MAX_DEADLOCK_EXAMPLES - len(bfs.dead_examples)
    if dead.size and bfs.deadlocks == "error" and room > 0:
        states = comp.enc.decode(keys)
        bfs.dead_examples += [states[i] for i in dead[:room]]
    bfs.deadlock.append(~has)
    if total is None:
        e_choice = r_in = None  # the identity
    else:
        e_choice = np.repeat(np.arange(nc), total)
        r_in = np.arange(ne)
        r_in -= np.repeat(np.cumsum(total) - total, total)
    bfs.last_entries = ne
    memory.ensure(ne * (56 + 16 * W), "the successors of a batch",
                  f"at {len(bfs.table):,} states")  # fmt: skip
    # Per entry: the product of its modules' probabilities, the sum of their
    # key deltas and its code; each module's temporaries are dropped as soon
    # as they are used (they are the batch's largest arrays). `np.take`: a
    # gather ~1.7x as fast as indexing (numpy 2.4), fastest with int64 indices.
    prob = delta = None
    code = None if comp.code_fits else np.full((ne, k), -1, dtype=np.int64)
    for m in range(k - 1, -1, -1):
        t = tables[m]
        if t.prob.size == 1:  # the module takes part in no choice
            continue
        if e_choice is None:
            pm = c_pair[m]
        else:
            pm = np.take(c_pair[m].astype(np.int64), e_choice)
        flat = np.take(t.uoff, pm)
        if reps[m] is not None:
            # the module's update in the entry: the next mixed-radix digit
            # of the entry's place among its choice's combinations
            r_in, digit = np.divmod(r_in, np.take(reps[m], e_choice))
            digit *= np.take(t.ustride, pm)
            flat += digit
            del digit
        del pm
        if prob is None:
            prob = np.take(t.prob, flat)
            delta = np.take(t.delta, flat, axis=0)
        else:
            prob *= np.take(t.prob, flat)
            delta += np.take(t.delta, flat, axis=0)
        if not comp.code_fits:
            code[:, m] = np.take(t.code, flat)
        elif code is None:
            code = np.take(t.code, flat)
        else:
            code += np.take(t.code, flat)
        del flat
    del r_in
    if prob is None:  # only deadlocks
        prob = np.ones(ne)
        delta = np.zeros(ne if W == 1 else (ne, W), dtype=np.int64)
    if code is None:
        code = np.zeros(ne, dtype=np.int64)
    e_src = c_src if e_choice is None else c_src[e_choice]

    def cmds_of(choice: int) -> list[int]:
        return [int(tables[m].cmd[c_pair[m][choice]]) for m in range(k)]

    positive = bool((prob > 0).all())
    if not positive:
        check_signs(bfs, prob, e_choice, cmds_of, c_src, keys)
    check_sums(bfs, prob, e_choice, cmds_of, c_src, keys, nc)
    # Zero-probability updates do not make their successors reachable.
    if not positive:
        keep = prob != 0
        if not keep.all():
            if e_choice is None:
                e_choice = np.arange(nc)
            e_choice, prob, delta = e_choice[keep], prob[keep], delta[keep]
            code, e_src = code[keep], e_src[keep]
    return (keys, cols, n, nc, prob, delta, code, e_src, e_choice, c_src, c_lab,
            per_state)  # fmt: skip


def locate_range_error(bfs: Builder, cmd, u, new, rows, active, keys) -> None:
    comp = bfs.comp
    for (vi, _), vals in zip(u.assigns, new):
        vals = np.broadcast_to(vals, rows.shape)
        bad = (vals < comp.lows[vi]) | (vals > comp.highs[vi])
        if active is not None:
            bad &= active
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            state = comp.enc.decode(keys[rows[r] : rows[r] + 1])[0]
            range_error(bfs, cmd, u, vi, int(vals[r]), state)


def range_error(
    bfs: Builder, cmd: Command, u: Update, vi: int, value: int, state
) -> None:
    comp = bfs.comp
    v = comp.vars[vi]
    c = cmd.cmd
    raise comp.error(
        f"update of command in module `{c.module}` assigns `{v.name}` = {value}, "
        f"outside its range [{v.low}..{v.high}], in state {comp.witness(state)}",
        c.span or u.span,
        hint=f"widen the range of `{v.name}` or guard the command",
    )


def fail(
    bfs: Builder, choice: int, what: str, cmds_of, c_src, keys
) -> ExplorationError:
    comp = bfs.comp
    cmds = tuple(comp.by_index[c].cmd for c in cmds_of(choice) if c >= 0)
    span = cmds[0].span if cmds else None
    names = ", ".join(
        f"`{c.module}`" + (f" [{c.action}]" if c.action else "") for c in cmds
    )
    s = int(c_src[choice])
    state = comp.enc.decode(keys[s : s + 1])[0]
    return comp.error(
        f"{what} in state {comp.witness(state)} (command(s) of module(s) {names})",
        span,
    )


def _choice(e_choice, e: int) -> int:
    return e if e_choice is None else int(e_choice[e])


def check_signs(bfs: Builder, prob, e_choice, cmds_of, c_src, keys):
    finite = np.isfinite(prob)
    if not finite.all():
        c = _choice(e_choice, int(np.argmin(finite)))
        raise fail(bfs, c, "probability/rate is not finite", cmds_of, c_src, keys)
    if (prob < 0).any():
        word = "rate" if bfs.mt == ModelType.CTMC else "probability"
        c = _choice(e_choice, int(np.argmax(prob < 0)))
        raise fail(bfs, c, f"negative {word}", cmds_of, c_src, keys)


def check_sums(bfs: Builder, prob, e_choice, cmds_of, c_src, keys, nc):
    if bfs.mt != ModelType.CTMC and bfs.prob_checks:
        if e_choice is None:
            sums = prob
        else:
            sums = np.bincount(e_choice, weights=prob, minlength=nc)
        bad = np.abs(sums - 1.0) > SUM_TOLERANCE
        if bad.any():
            c = int(np.argmax(bad))
            raise fail(
                bfs,
                c,
                f"probabilities sum to {float(sums[c])!r}, not 1",
                cmds_of,
                c_src,
                keys,
            )
