"""Qualitative precomputation: the graph fixed points of PRISM/Storm
(`utility/graph.h`: performProb0/1, performProb01Max/Min) and BSCC / maximal
end component decompositions.

They are boolean, data-dependent fixed points whose cost is one or a few
passes over the edges, and their results (masks) fix which states the
numerical solvers iterate on. Only edges of positive probability count.
The host versions (numpy/scipy: a breadth-first search, work proportional
to the edges) run by default; on a GPU, for large models, the prob0/prob1
family runs as jitted fixed points on the device (`graph_device`, chosen by
`graph_device.use_device`), with the same results. BSCCs and end components
stay on the host (scipy's strongly connected components).

All functions take an `ExplicitModel` and boolean numpy masks of shape [n].
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ..explore.model import ExplicitModel
from . import graph_device
from .transitions import cached, row_of_entry, state_of_entry


# ---------------------------------------------------------------------------
# helpers


def _entries(model: ExplicitModel):
    """(state, choice, col) of every positive entry (once per model; the
    model's own per-entry arrays where every entry is positive)."""
    if bool(cached(model, "all_positive", lambda: np.all(model.val > 0))):
        return state_of_entry(model), row_of_entry(model), model.col

    def choices():
        return row_of_entry(model)[model.val > 0]

    c = cached(model, "positive_choice", choices)
    return (
        cached(model, "positive_state", lambda: model.state_of_choice()[c]),
        c,
        cached(model, "positive_col", lambda: model.col[model.val > 0]),
    )


def _exists_reach(model, target, through, choice_ok=None) -> np.ndarray:
    """Least fixed point `Y = target ∪ {s ∈ through : ∃ choice c of s allowed by
    choice_ok with a successor in Y}` (backward BFS over a super-source)."""
    n = model.num_states
    src, ch, dst = _entries(model)
    keep = through[src]
    if choice_ok is not None:
        keep &= choice_ok[ch]
    return backward_reach(n, src[keep], dst[keep], target)


def exists_reach(model, target, through) -> np.ndarray:
    """The states with a path of positive entries into `target` (included)
    through `through`: on the device where `graph_device.use_device` says
    so, else a breadth-first search on the host."""
    n = model.num_states
    return _exists(model, _b(target, n), _b(through, n))


def backward_reach(n, src, dst, target) -> np.ndarray:
    """The states with a path of edges `src -> dst` into `target` (`target`
    included): a backward BFS from a super-source."""
    tgt = np.nonzero(target)[0]
    # Reverse edges dst -> src, plus super node n -> every target.
    rows = np.concatenate([dst, np.full(len(tgt), n)])
    cols = np.concatenate([src, tgt])
    g = sp.csr_matrix(
        (np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(n + 1, n + 1)
    )
    order = csgraph.breadth_first_order(g, n, directed=True, return_predecessors=False)
    out = np.zeros(n + 1, dtype=bool)
    out[order] = True
    return out[:n]


def _forall_reach(model, target, through) -> np.ndarray:
    """Least fixed point `Y = target ∪ {s ∈ through : every choice of s has a
    successor in Y}` (an attractor), by frontier rounds with counters."""
    n = model.num_states
    src, ch, dst = _entries(model)
    state_of_choice = model.state_of_choice()
    # Entries sorted by destination, to find the in-entries of a frontier.
    order = np.argsort(dst, kind="stable")
    in_ptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=n))])
    ch_sorted = ch[order]
    pending = np.diff(model.choice_ptr).astype(np.int64)  # choices not yet hit
    hit = np.zeros(model.num_choices, dtype=bool)
    inside = target.copy()
    frontier = np.nonzero(target)[0]
    # scratch for dropping repeats without sorting (`_distinct_in`)
    slot_c = np.empty(model.num_choices, dtype=np.int64)
    slot_s = np.empty(n, dtype=np.int64)
    while frontier.size:
        starts, ends = in_ptr[frontier], in_ptr[frontier + 1]
        lens = ends - starts
        if lens.sum() == 0:
            break
        idx = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(lens.sum())
        cs = ch_sorted[idx]
        cs = _distinct_in(cs[~hit[cs]], slot_c)
        hit[cs] = True
        ss = state_of_choice[cs]
        np.subtract.at(pending, ss, 1)
        new = ss[(pending[ss] == 0) & through[ss] & ~inside[ss]]
        new = _distinct_in(new, slot_s)
        inside[new] = True
        frontier = new
    return inside


def _distinct_in(a: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """`a` without repeats (first occurrences, in order), using `slot` (an
    int array indexable by `a`'s values) as scratch: an assignment with a
    repeated index keeps the last value, so each value's slot names one
    position, and exactly that position is kept. Linear, unlike sorting."""
    pos = np.arange(a.size)
    slot[a[::-1]] = pos[::-1]
    return a[slot[a] == pos]


def _exists(model, target, through) -> np.ndarray:
    """`_exists_reach`, on the device where `graph_device.use_device` says
    so (the host finishing a search that needs too many rounds there)."""
    if graph_device.use_device(model):
        y, done = graph_device.exists_reach(model, target, through)
        if done:
            return y
        target = y
    return _exists_reach(model, target, through)


def _forall(model, target, through) -> np.ndarray:
    """`_forall_reach`, on the device where `graph_device.use_device` says
    so (as `_exists`)."""
    if graph_device.use_device(model):
        y, done = graph_device.forall_reach(model, target, through)
        if done:
            return y
        target = y
    return _forall_reach(model, target, through)


def _b(mask, n) -> np.ndarray:
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != (n,):
        raise ValueError(f"state mask has shape {mask.shape}, expected ({n},)")
    return mask


# ---------------------------------------------------------------------------
# DTMC / CTMC


def prob0(model: ExplicitModel, phi, psi) -> np.ndarray:
    """States where P(φ U ψ) = 0 (for an MDP: under every scheduler, = prob0A)."""
    n = model.num_states
    phi, psi = _b(phi, n), _b(psi, n)
    return ~_exists(model, psi, phi & ~psi)


def prob1(model: ExplicitModel, phi, psi, no=None) -> np.ndarray:
    """States where P(φ U ψ) = 1 (DTMC/CTMC): those that cannot reach a
    `prob0` state through φ∧¬ψ states."""
    n = model.num_states
    phi, psi = _b(phi, n), _b(psi, n)
    if no is None:
        no = prob0(model, phi, psi)
    return ~_exists(model, no, phi & ~psi)


def prob01(model: ExplicitModel, phi, psi) -> tuple[np.ndarray, np.ndarray]:
    """`(prob0, prob1)` for a DTMC/CTMC."""
    no = prob0(model, phi, psi)
    return no, prob1(model, phi, psi, no=no)


# ---------------------------------------------------------------------------
# MDP


def prob0A(model: ExplicitModel, phi, psi) -> np.ndarray:
    """States where Pmax(φ U ψ) = 0, i.e. P = 0 for all schedulers."""
    return prob0(model, phi, psi)


def prob0E(model: ExplicitModel, phi, psi) -> np.ndarray:
    """States where Pmin(φ U ψ) = 0: some scheduler never reaches ψ via φ."""
    n = model.num_states
    phi, psi = _b(phi, n), _b(psi, n)
    return ~_forall(model, psi, phi & ~psi)


def prob1E(model: ExplicitModel, phi, psi) -> np.ndarray:
    """States where Pmax(φ U ψ) = 1: νZ. μY. ψ ∪ (φ ∧ ∃c: succ(c) ⊆ Z ∧
    succ(c) ∩ Y ≠ ∅)."""
    n = model.num_states
    phi, psi = _b(phi, n), _b(psi, n)
    if graph_device.use_device(model):
        z, done = graph_device.prob1E(model, phi, psi)
        if done:
            return z
    src, ch, dst = _entries(model)
    z = np.ones(n, dtype=bool)
    while True:
        leaves = np.bincount(ch[~z[dst]], minlength=model.num_choices)
        y = _exists_reach(model, psi, phi & ~psi & z, choice_ok=leaves == 0)
        if np.array_equal(y, z):
            return z
        z = y


def prob1A(model: ExplicitModel, phi, psi, no=None) -> np.ndarray:
    """States where Pmin(φ U ψ) = 1: those from which no scheduler can reach a
    `prob0E` state through φ∧¬ψ."""
    n = model.num_states
    phi, psi = _b(phi, n), _b(psi, n)
    if no is None:
        no = prob0E(model, phi, psi)
    return ~_exists(model, no, phi & ~psi)


def prob01_max(model, phi, psi):
    """`(Pmax = 0, Pmax = 1)`: prob0A and prob1E."""
    return prob0A(model, phi, psi), prob1E(model, phi, psi)


def prob01_min(model, phi, psi):
    """`(Pmin = 0, Pmin = 1)`: prob0E and prob1A."""
    no = prob0E(model, phi, psi)
    return no, prob1A(model, phi, psi, no=no)


# ---------------------------------------------------------------------------
# decompositions


def bsccs(model: ExplicitModel) -> tuple[np.ndarray, int]:
    """Bottom strongly connected components of the state graph (all choices).

    **Returns:** `(labels, count)`: `labels[s]` is the BSCC of `s` in
    `0..count-1`, or -1 if `s` is in no BSCC.
    """
    n = model.num_states
    if np.all(model.val > 0):
        # (the state graph's CSR straight from the pointers: a state's
        # choices are contiguous, so its entries are; no COO sort)
        ptr = model.row_ptr[model.choice_ptr]
        src = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
        dst = model.col
        ones = np.ones(len(dst), dtype=np.int8)
        g = sp.csr_matrix((ones, dst, ptr), shape=(n, n))
    else:
        src, _, dst = _entries(model)
        g = sp.csr_matrix((np.ones(len(src), dtype=np.int8), (src, dst)), shape=(n, n))
    ncomp, comp = csgraph.connected_components(g, directed=True, connection="strong")
    leaving = np.zeros(ncomp, dtype=bool)
    leaving[comp[src][comp[src] != comp[dst]]] = True
    bottom = ~leaving
    ids = -np.ones(ncomp, dtype=np.int64)
    ids[bottom] = np.arange(bottom.sum())
    return ids[comp], int(bottom.sum())


def mecs(model: ExplicitModel, states=None, choices=None):
    """Maximal end components of the sub-MDP of `states` (default all) using
    `choices` (bool [m], default all).

    **Returns:** `(labels, count, inside)`: `labels[s]` the MEC of `s` (or -1),
    and `inside[c]` whether choice `c` stays in its state's MEC.
    """
    n, m = model.num_states, model.num_choices
    st = np.ones(n, dtype=bool) if states is None else _b(states, n).copy()
    ok = np.ones(m, dtype=bool) if choices is None else np.asarray(choices).copy()
    src, ch, dst = _entries(model)
    soc = model.state_of_choice()
    while True:
        ok &= st[soc]
        # a choice leaving the candidate states is removed
        out = np.bincount(ch[~st[dst]], minlength=m) > 0
        ok &= ~out
        e = ok[ch]
        g = sp.csr_matrix(
            (np.ones(int(e.sum()), dtype=np.int8), (src[e], dst[e])), shape=(n, n)
        )
        _, comp = csgraph.connected_components(g, directed=True, connection="strong")
        leaves = np.bincount(ch[e & (comp[src] != comp[dst])], minlength=m) > 0
        new_ok = ok & ~leaves
        new_st = st & (np.bincount(soc[new_ok], minlength=n) > 0)
        if np.array_equal(new_ok, ok) and np.array_equal(new_st, st):
            break
        ok, st = new_ok, new_st
    labels = -np.ones(n, dtype=np.int64)
    uniq, inv = np.unique(comp[st], return_inverse=True)
    labels[st] = inv
    return labels, len(uniq), ok
