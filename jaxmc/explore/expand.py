"""One BFS batch expanded: guards, choices, update combinations, successors
(numbered as they are found) and the batch's merged transition rows, which
are appended to the `Builder`'s per-batch outputs (steps 1-5 of
`jaxmc.explore.builder`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import ExplorationError
from ..lang.ast import ModelType
from . import memory
from .compile import Command, Update


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


def _first_occurrence_unique(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of `keys` in order of first occurrence, and the inverse."""
    if keys.shape[1] == 1:
        u, first, inv = np.unique(keys[:, 0], return_index=True, return_inverse=True)
        u = u[:, None]
    else:
        u, first, inv = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    perm = np.argsort(first, kind="stable")
    rank = np.empty_like(perm)
    rank[perm] = np.arange(perm.size)
    return u[perm], rank[inv]


def expand(bfs: Builder, lo: int, hi: int) -> None:
    comp, mt = bfs.comp, bfs.mt
    n = hi - lo
    keys = bfs.table.keys[lo:hi]
    states = comp.enc.decode(keys)
    bfs.growth.expanded(states)
    cols = [np.ascontiguousarray(states[:, i]) for i in range(states.shape[1])]

    # 1. guards
    masks = {
        c.cmd.index: np.asarray(c.guard.unchecked(cols, n), dtype=bool)
        for c in comp.commands
    }
    # 2. composition into choices
    blocks = bfs.composer.run(masks, n)
    k = bfs.composer.k
    c_src_l, c_cmds_l, c_lab_l = [], [], []
    for a, src, mods, cmd_cols in blocks:
        if a not in bfs.label_id:
            bfs.label_id[a] = len(bfs.label_names)
            bfs.label_names.append(a)
        cmds = np.full((src.size, k), -1, dtype=np.int64)
        for m, c in zip(mods, cmd_cols):
            cmds[:, m] = c
        c_src_l.append(src)
        c_cmds_l.append(cmds)
        c_lab_l.append(np.full(src.size, bfs.label_id[a], dtype=np.int64))
    has = np.zeros(n, dtype=bool)
    for s in c_src_l:
        has[s] = True
    dead = np.flatnonzero(~has)
    room = MAX_DEADLOCK_EXAMPLES - len(bfs.dead_examples)
    if dead.size and bfs.deadlocks == "error" and room > 0:
        bfs.dead_examples += [states[i] for i in dead[:room]]
    bfs.deadlock.append(~has)
    # Deadlock states get a synthetic choice with no command: a self-loop.
    c_src_l.append(dead)
    c_cmds_l.append(np.full((dead.size, k), -1, dtype=np.int64))
    c_lab_l.append(np.full(dead.size, -1, dtype=np.int64))
    c_src = np.concatenate(c_src_l)
    order = np.argsort(c_src, kind="stable")
    c_src = c_src[order]
    c_cmds = np.concatenate(c_cmds_l)[order]
    c_lab = np.concatenate(c_lab_l)[order]
    nc = c_src.size
    per_state = np.bincount(c_src, minlength=n)

    # 3. update combinations of each choice. Probabilities and key deltas
    # are evaluated once per (choice, update) on the choice's source state,
    # then gathered into the expanded rows (one row per combination).
    reps = np.ones((k, nc), dtype=np.int64)
    tables = []  # per module: (P [nc, U], D [nc, U, W], local [nc]) or None
    for m in range(k):
        cm = c_cmds[:, m]
        part = np.flatnonzero(cm >= 0)
        if part.size == 0:
            tables.append(None)
            continue
        pos = comp.cmd_pos[cm[part]]
        reps[m, part] = comp.n_upd[pos]
        width = int(reps[m].max())
        P = np.ones((nc, width))
        D = np.zeros((nc, width, comp.enc.n_words), dtype=np.int64)
        local = np.full(nc, -1, dtype=np.int64)
        local[part] = comp.first_local[pos]
        order = np.argsort(pos, kind="stable")
        ps = pos[order]
        bounds = np.flatnonzero(np.diff(ps)) + 1
        for a, b in zip(
            np.concatenate([[0], bounds]).tolist(),
            np.concatenate([bounds, [ps.size]]).tolist(),
        ):
            rows = part[order[a:b]]
            cmd = comp.commands[int(ps[a])]
            gat = _Gather(cols, c_src[rows])
            for j, u in enumerate(cmd.updates):
                p, d, bad, new = u.fused(gat)
                if bad is not False and np.any(bad):
                    locate_range_error(bfs, cmd, u, new, rows, c_src, states)
                P[rows, j] = p
                for w, dw in enumerate(d):
                    D[rows, j, w] = dw
        tables.append((P, D, local))
    total = reps.prod(axis=0) if k else np.ones(nc, dtype=np.int64)
    ne = int(total.sum())
    # Per expanded entry: probability, choice, combination index, code,
    # successor id, sort key, order (8 bytes each) and two key copies.
    memory.ensure(ne * (56 + 16 * comp.enc.n_words), "the successors of a batch",
                  f"at {len(bfs.table):,} states")  # fmt: skip
    if ne == nc:  # one update per choice: no expansion
        e_choice = np.arange(nc)
        r = np.zeros(nc, dtype=np.int64)
    else:
        e_choice = np.repeat(np.arange(nc), total)
        r = np.arange(ne) - np.repeat(np.cumsum(total) - total, total)
    prob = np.ones(ne)
    delta = np.zeros((ne, comp.enc.n_words), dtype=np.int64)
    code = np.zeros(ne, dtype=np.int64)
    gids = None if comp.code_fits else np.full((ne, k), -1, dtype=np.int64)
    stride = np.ones(nc, dtype=np.int64)
    for m in range(k - 1, -1, -1):
        if tables[m] is None:
            continue
        P, D, local = tables[m]
        if P.shape[1] == 1:
            digit = 0
            if ne == nc:
                prob *= P[:, 0]
                delta += D[:, 0]
            else:
                prob *= P[e_choice, 0]
                delta += D[e_choice, 0]
        else:
            digit = (r // stride[e_choice]) % reps[m][e_choice]
            stride = stride * reps[m]
            prob *= P[e_choice, digit]
            delta += D[e_choice, digit]
        lu = local if ne == nc else local[e_choice]
        inside = lu >= 0
        if gids is None:
            code += np.where(inside, lu + digit + 1, 0) * comp.radix[m]
        else:
            gids[:, m] = np.where(inside, comp.module_offset[m] + lu + digit, -1)
    positive = bool((prob > 0).all())
    if not positive:
        check_signs(bfs, prob, e_choice, c_cmds, c_src, states)
    check_sums(bfs, prob, e_choice, c_cmds, c_src, states, nc)
    # Zero-probability updates do not make their successors reachable.
    keep = None if positive else prob != 0
    if keep is not None and not keep.all():
        e_choice, prob, delta = e_choice[keep], prob[keep], delta[keep]
        code = code[keep] if gids is None else gids[keep]
        ne = e_choice.size
    elif gids is not None:
        code = gids
    e_src = c_src[e_choice]

    # 4. successors → ids
    succ = keys[e_src] + delta
    ids = bfs.table.find(succ)
    miss = np.flatnonzero(ids < 0)
    if miss.size:
        uniq, inv = _first_occurrence_unique(succ[miss])
        ids[miss] = bfs.add_states(uniq)[inv]

    # 5. rows, merging duplicates
    if mt == ModelType.DTMC:
        many = per_state > 1
        bfs.nondet_states += int(many.sum())
        if bfs.prob_checks:
            weight = 1.0 / per_state[e_src]
        else:
            weight = (
                1.0 / np.bincount(c_src[e_choice], weights=prob, minlength=n)[e_src]
            )
        row = e_src
    else:
        weight = np.ones(ne)
        row = e_choice if bfs.nd else e_src
    val = prob * weight
    sort_key = (row << 32) | ids
    order = np.argsort(sort_key, kind="stable")
    sk = sort_key[order]
    start = np.ones(ne, dtype=bool)
    start[1:] = sk[1:] != sk[:-1]
    starts = np.flatnonzero(start)
    merged = np.add.reduceat(val[order], starts) if ne else val[:0]
    bfs.cols.append(ids[order][starts])
    bfs.vals.append(merged)
    n_rows = nc if bfs.nd else n
    bfs.row_len.append(np.bincount(row[order][starts], minlength=n_rows))
    bfs.n_choices.append(per_state if bfs.nd else np.ones(n, dtype=np.int64))
    if bfs.nd:
        bfs.actions.append(c_lab)
    elif ne:
        # a DTMC/CTMC entry has the action of its commands where they
        # agree on one (PRISM writes it in .tra files), else none
        if (c_lab > 0).any():
            lab = np.maximum(c_lab[e_choice][order], 0).astype(np.int32)
            low = np.minimum.reduceat(lab, starts)
            same = low == np.maximum.reduceat(lab, starts)
            bfs.actions.append(np.where(same, low, 0))
        else:  # no labelled command in this batch
            bfs.actions.append(np.zeros(starts.size, dtype=np.uint8))
    bfs.contrib_per_entry.append(np.diff(np.append(starts, ne)).astype(np.int32))
    if mt == ModelType.DTMC:  # weights are 1 otherwise (made on demand)
        bfs.contrib_weight.append(weight[order])
    bfs.contrib_code.append(code[order])
    # transition rewards: per choice, then per merged entry (weighted mean)
    for slot, ri in enumerate(bfs.trew_structs):
        r_choice = np.zeros(nc)
        for item in comp.rewards[ri]:
            if not item.transition:
                continue
            lab = bfs.label_id.get(item.action)
            if lab is None:
                continue
            match = c_lab == lab
            if not match.any():
                continue
            g = np.asarray(item.guard.unchecked(cols, n), dtype=bool)[c_src]
            hit = match & g
            if hit.any():
                active = np.zeros(n, dtype=bool)
                active[c_src[hit]] = True
                v = as_float(item.value.unchecked(cols, n, active))[c_src]
                r_choice[hit] += v[hit]
                if (v[hit] < 0).any():
                    bad = hit & (v < 0)
                    bfs.negative_at.setdefault(ri, []).append(lo + c_src[bad])
        contrib = (val * r_choice[e_choice])[order]
        num = np.add.reduceat(contrib, starts) if ne else contrib[:0]
        with np.errstate(all="ignore"):
            bfs.trews[slot].append(np.where(merged != 0, num / merged, 0.0))


def locate_range_error(bfs: Builder, cmd, u, new, rows, c_src, states) -> None:
    comp = bfs.comp
    for (vi, _), vals in zip(u.assigns, new):
        vals = np.broadcast_to(vals, rows.shape)
        bad = (vals < comp.lows[vi]) | (vals > comp.highs[vi])
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            range_error(bfs, cmd, u, vi, int(vals[r]), states[c_src[rows[r]]])


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
    bfs: Builder, choice: int, what: str, c_cmds, c_src, states
) -> ExplorationError:
    comp = bfs.comp
    cmds = tuple(comp.by_index[int(c)].cmd for c in c_cmds[choice] if c >= 0)
    span = cmds[0].span if cmds else None
    names = ", ".join(
        f"`{c.module}`" + (f" [{c.action}]" if c.action else "") for c in cmds
    )
    return comp.error(
        f"{what} in state {comp.witness(states[c_src[choice]])} "
        f"(command(s) of module(s) {names})",
        span,
    )


def check_signs(bfs: Builder, prob, e_choice, c_cmds, c_src, states):
    finite = np.isfinite(prob)
    if not finite.all():
        c = int(e_choice[np.argmin(finite)])
        raise fail(bfs, c, "probability/rate is not finite", c_cmds, c_src, states)
    if (prob < 0).any():
        word = "rate" if bfs.mt == ModelType.CTMC else "probability"
        c = int(e_choice[np.argmax(prob < 0)])
        raise fail(bfs, c, f"negative {word}", c_cmds, c_src, states)


def check_sums(bfs: Builder, prob, e_choice, c_cmds, c_src, states, nc):
    if bfs.mt != ModelType.CTMC and bfs.prob_checks:
        sums = np.bincount(e_choice, weights=prob, minlength=nc)
        bad = np.abs(sums - 1.0) > SUM_TOLERANCE
        if bad.any():
            c = int(np.argmax(bad))
            raise fail(
                bfs,
                c,
                f"probabilities sum to {float(sums[c])!r}, not 1",
                c_cmds,
                c_src,
                states,
            )
