"""The strongly connected components of an MDP system's graph, grouped into
topological levels, and the system's arrays regrouped level by level: the
plan that topological value iteration (`_topological`) follows.

The graph has an edge `s -> t` when some enabled choice of the iterated
state `s` reaches the iterated state `t` with positive probability (the
union over choices). A component's level is the length of the longest path
from it to a bottom component in the condensed graph (bottom components are
level 0), so the components of one level depend only on lower levels and are
solved together: one batch per level, not one Python step per component.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from .._arrays import unique, unique_counts


@dataclass(frozen=True)
class LevelPlan:
    """The iterated states, their choices and entries, ordered by level.

    - `states`: the iterated states, level by level; within a level the
      singleton components first, then the others (grouped by component).
    - `state_ptr`: level `k`'s states are `states[state_ptr[k]:state_ptr[k+1]]`;
      `split[k]` is where its non-singleton states start.
    - `choices`: the choices of `states`, in that order; `choice_ptr` [len(states)+1]
      the positions of each state's choices in `choices`.
    - `entries`: the entries of `choices` in order; `entry_ptr`
      [len(choices)+1] the positions of each choice's entries.
    - `pos`: position of every state of the model in `states` (-1 if not iterated).
    - `self_prob`: per choice (in `choices` order), the probability of its
      self loop.
    - `entry_choice`: per entry (in `entries` order), its choice's position
      in `choices`; `entry_self`: whether the entry is a self loop.
    - `choice_state`: the state of each choice in `choices`.
    - `components`, `largest`: how many components there are and the size of
      the largest.
    """

    states: np.ndarray
    state_ptr: np.ndarray
    split: np.ndarray
    choices: np.ndarray
    choice_ptr: np.ndarray
    entries: np.ndarray
    entry_ptr: np.ndarray
    pos: np.ndarray
    self_prob: np.ndarray
    entry_choice: np.ndarray
    entry_self: np.ndarray
    choice_state: np.ndarray
    components: int
    largest: int

    @property
    def levels(self) -> int:
        return len(self.state_ptr) - 1


def ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The concatenation of `arange(starts[i], ends[i])` over `i`."""
    lens = ends - starts
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offs = np.repeat(starts - np.cumsum(lens) + lens, lens)
    return offs + np.arange(total, dtype=np.int64)


def component_levels(count: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Level of every component of an acyclic graph given by its edges
    `src -> dst`: 0 for components without successors, else one more than
    the largest level of a successor (Kahn's algorithm from the sinks, one
    vectorised round per level)."""
    g = sp.csr_matrix(
        (np.ones(src.size, np.int8), (dst, src)), shape=(count, count)
    )  # row v: the predecessors of v
    g.sum_duplicates()
    out_deg = np.bincount(g.indices, minlength=count)
    level = np.full(count, -1, np.int64)
    front = np.flatnonzero(out_deg == 0)
    indptr, indices = g.indptr, g.indices
    k = 0
    while front.size:
        level[front] = k
        k += 1
        preds = indices[ranges(indptr[front], indptr[front + 1])]
        if not preds.size:
            break
        cand, times = unique_counts(preds)
        out_deg[cand] -= times
        front = cand[(out_deg[cand] == 0) & (level[cand] < 0)]
    if (level < 0).any():  # pragma: no cover - the condensed graph is acyclic
        raise AssertionError("a cycle among strongly connected components")
    return level


def plan_levels(
    soc: np.ndarray,
    indptr: np.ndarray,
    cols: np.ndarray,
    data: np.ndarray,
    enabled: np.ndarray,
    maybe: np.ndarray,
) -> LevelPlan:
    """The `LevelPlan` of the system on the `maybe` states.

    **Arguments:** `soc` the state of each choice (sorted), `indptr` the
    entries of each choice, `cols`/`data` each entry's successor and
    probability, `enabled` the choices that can be taken (their edges count
    in the graph), `maybe` the iterated states."""
    n = len(maybe)
    m = len(soc)
    rows = np.repeat(np.arange(m), np.diff(indptr))
    live = enabled[rows] & maybe[soc[rows]] & maybe[cols] & (data != 0)
    src, dst = soc[rows[live]], cols[live]
    graph = sp.csr_matrix(
        (np.ones(src.size, np.int8), (src, dst)), shape=(n, n), dtype=np.int8
    )
    count, lab = csgraph.connected_components(graph, directed=True, connection="strong")
    size = np.bincount(lab[maybe], minlength=count)
    cross = lab[src] != lab[dst]
    level = component_levels(count, lab[src[cross]], lab[dst[cross]])
    it = np.flatnonzero(maybe)
    big = size[lab[it]] > 1
    # by (level, big, component, state): `it` is ascending and the sort
    # stable, so one key (< 2 count^2 + count) does what a four-key lexsort
    # does, with one sort instead of four
    lab_it = lab[it].astype(np.int64)
    key = (level[lab_it] * 2 + big) * np.int64(count) + lab_it
    order = np.argsort(key, kind="stable")
    states = it[order]
    lev = level[lab[states]]
    nlev = int(lev.max()) + 1 if states.size else 0
    state_ptr = np.searchsorted(lev, np.arange(nlev + 1))
    split = np.searchsorted(lev * 2 + big[order], 2 * np.arange(nlev) + 1)
    pos = np.full(n, -1, np.int64)
    pos[states] = np.arange(states.size)

    cptr_model = np.searchsorted(soc, np.arange(n + 1))
    starts, ends = cptr_model[states], cptr_model[states + 1]
    choices = ranges(starts, ends)
    choice_ptr = np.concatenate([[0], np.cumsum(ends - starts)])
    estart, eend = indptr[choices], indptr[choices + 1]
    entries = ranges(estart, eend)
    entry_ptr = np.concatenate([[0], np.cumsum(eend - estart)])
    local = np.repeat(np.arange(choices.size), eend - estart)
    is_self = cols[entries] == soc[choices][local]
    self_prob = np.bincount(
        local, weights=np.where(is_self, data[entries], 0.0), minlength=choices.size
    )
    comps = unique(lab[states]).size
    return LevelPlan(
        states=states,
        state_ptr=state_ptr,
        split=split,
        choices=choices,
        choice_ptr=choice_ptr,
        entries=entries,
        entry_ptr=entry_ptr,
        pos=pos,
        self_prob=self_prob,
        entry_choice=local,
        entry_self=is_self,
        choice_state=soc[choices],
        components=comps,
        largest=int(size.max(initial=0)) if states.size else 0,
    )
