"""A batch's transition entries merged into rows (step 5 of
`jaxmc.explore.builder`): entries sorted by (row, successor), duplicates
summed, and the batch's chunk of every per-entry output appended to the
`Builder` (columns, values, actions, provenance, transition rewards).

Chunks are stored in the smallest type that holds them, and a run of ones
(the row length of a state with one choice, a contribution count of an
entry made by one update, a weight of 1) as its length only: `join` makes
the arrays of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..lang.ast import ModelType


if TYPE_CHECKING:
    from .builder import Builder


def join(chunks: list, dtype, fill=1) -> np.ndarray:
    """The chunks (arrays, or ints: that many `fill`s) as one array of
    `dtype`, emptying `chunks` as it goes (each chunk is freed once copied)."""
    total = sum(c if isinstance(c, int) else c.shape[0] for c in chunks)
    shape = (total,)
    for c in chunks:
        if not isinstance(c, int):
            shape = (total,) + c.shape[1:]
            break
    out = np.empty(shape, dtype=dtype)
    row = out[:1].nbytes
    at = written = 0
    chunks.reverse()
    while chunks:
        c = chunks.pop()
        size = c if isinstance(c, int) else c.shape[0]
        out[at : at + size] = fill if isinstance(c, int) else c
        at += size
        written += size * row
        del c
        if written >= TRIM_BYTES:  # the freed chunks' pages for `out`'s next
            trim()
            written = 0
    trim()
    return out


#: `join` gives the freed chunks' memory back every this many bytes of
#: `out` written: `out`'s pages become resident as they are written, so the
#: join's peak is then the chunks or `out` (plus this), not both.
TRIM_BYTES = 4 << 20


def _malloc_trim():
    """glibc's `malloc_trim(0)` (None elsewhere)."""
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()


def trim() -> None:
    """Give the heap's free pages back to the operating system: the chunks
    that `join` frees are small arrays in the middle of the heap, which
    glibc keeps (resident) otherwise."""
    if _TRIM is not None:
        _TRIM(0)


def all_fill(chunks: list) -> bool:
    """Whether every chunk is a run of fills (an int)."""
    return all(isinstance(c, int) for c in chunks)


def _take(a: np.ndarray, order: np.ndarray | None) -> np.ndarray:
    return a if order is None else a[order]


def add_rows(bfs: Builder, lo, n, nc, cols, prob, ids, code, e_src, e_choice,
             c_src, c_lab, per_state) -> None:  # fmt: skip
    """Append the batch's rows. `e_choice` None: entry `e` is choice `e`;
    `per_state` None: one choice per state."""
    comp, mt = bfs.comp, bfs.mt
    ne = prob.shape[0]
    dtmc = mt == ModelType.DTMC
    weight = None  # None: all ones
    if dtmc:
        if per_state is not None:
            bfs.nondet_states += int((per_state > 1).sum())
        if not bfs.prob_checks:
            c_of = c_src if e_choice is None else c_src[e_choice]
            weight = 1.0 / np.bincount(c_of, weights=prob, minlength=n)[e_src]
        elif per_state is not None:
            weight = 1.0 / per_state[e_src]
        row = e_src
    else:
        row = (np.arange(ne) if e_choice is None else e_choice) if bfs.nd else e_src
    val = prob if weight is None else prob * weight
    # `row` is non-decreasing: sort within rows by successor
    sort_key = (row << 32) | ids
    if ne < 2 or (sort_key[1:] > sort_key[:-1]).all():
        order = None  # sorted, no duplicates
        sk = sort_key
    else:
        order = np.argsort(sort_key, kind="stable")
        sk = sort_key[order]
    starts = None  # None: every entry starts a merged entry
    if order is not None:
        start = np.empty(ne, dtype=bool)
        start[0] = True
        np.not_equal(sk[1:], sk[:-1], out=start[1:])
        if not start.all():
            starts = start.nonzero()[0]
    v = _take(val, order)
    if starts is None:
        merged = v
        col = _take(ids, order)
        ent_row = row
    else:
        merged = np.add.reduceat(v, starts)
        col = _take(ids, order)[starts]
        ent_row = row[starts]
    n_ent = merged.shape[0]
    col = col.astype(bfs.col_dtype)
    bfs.cols.append(col)
    bfs.vals.append(merged)
    if bfs.nd:
        bfs.row_len.append(np.bincount(ent_row, minlength=nc).astype(np.int32))
        bfs.n_choices.append(per_state.astype(np.int32) if per_state is not None else n)
        bfs.actions.append(c_lab.astype(np.int32))
    else:
        if n_ent == n:
            bfs.row_len.append(n)  # one entry per state
        else:
            bfs.row_len.append(np.bincount(ent_row, minlength=n).astype(np.int32))
        bfs.n_choices.append(n)
        if ne and (c_lab > 0).any():
            # an entry has the action of its commands where they agree on
            # one (PRISM writes it in .tra files), else none
            lab = np.maximum(c_lab if e_choice is None else c_lab[e_choice], 0)
            lab = _take(lab, order).astype(bfs.action_dtype)
            if starts is None:
                bfs.actions.append(lab)
            else:
                low = np.minimum.reduceat(lab, starts)
                same = low == np.maximum.reduceat(lab, starts)
                bfs.actions.append(np.where(same, low, 0).astype(bfs.action_dtype))
        else:  # no labelled command in this batch
            bfs.actions.append(np.zeros(n_ent, dtype=bfs.action_dtype))
    if starts is None:
        bfs.contrib_per_entry.append(n_ent)
    else:
        counts = np.diff(starts, append=ne)
        bfs.contrib_per_entry.append(counts.astype(np.min_scalar_type(counts.max())))
    if dtmc:  # weights are 1 otherwise (made on demand)
        bfs.contrib_weight.append(ne if weight is None else _take(weight, order))
    code = _take(code, order).astype(bfs.code_dtype, copy=False)
    bfs.contrib_code.append(code)
    bfs.held += col.nbytes + merged.nbytes + code.nbytes
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
                rv = np.asarray(item.value.unchecked(cols, n, active), np.float64)
                rv = rv[c_src]
                r_choice[hit] += rv[hit]
                if (rv[hit] < 0).any():
                    bad = hit & (rv < 0)
                    bfs.negative_at.setdefault(ri, []).append(lo + c_src[bad])
        contrib = _take(val * (r_choice if e_choice is None else r_choice[e_choice]),
                        order)  # fmt: skip
        num = contrib if starts is None else np.add.reduceat(contrib, starts)
        with np.errstate(all="ignore"):
            bfs.trews[slot].append(np.where(merged != 0, num / merged, 0.0))
