"""The optimal finite-memory scheduler of an MDP for an LTL property
(`Pmin/Pmax [ψ]`, co-safe `Rmin/Rmax [ψ]`), made from the product's solve
(`product.Solved`) and returned as a `memory.MemoryScheduler` whose memory
is the automaton's state.

1. On the product, the optimal memoryless scheduler of the product's own
   objective (`numerics.scheduler`, verified and repaired there): reaching
   the DFA's accepting states (co-safe `ψ`; a safe `ψ` through its negation,
   min and max swapped), their reachability reward (co-safe `R`), or
   reaching an accepting maximal end component of the LDBA product (`Pmax`;
   `Pmin [ψ]` is `1 - Pmax [¬ψ]`, so its scheduler is that of `Pmax [¬ψ]`).
2. Inside an accepting end component, reaching it is not enough: the run
   must stay and see every monitor's mark infinitely often (the trap of
   Storm's issue #940, where a scheduler circles without progress). A
   memoryless choice cannot always do that (two marks on either side of a
   state), so the memory also holds the monitor it heads for next (a
   phase): in phase `k` the scheduler takes a choice that stays in the end
   component and has a successor closer to a state with mark `k` (breadth-
   first attractor over the staying choices, which reaches it with
   probability 1 in an end component), and the phase moves on each time
   that mark is seen. With one monitor there is one phase.
3. The LDBA's ε-jumps are choices of the product, not of the model: a jump
   the scheduler takes is folded into the memory update (the memory after a
   step is the automaton's successor, then the jump taken there), and the
   initial memory is the best of the seeds (the jumps before the first
   letter included).
4. Once the automaton has decided the formula (accepting DFA state, dead
   state) the choice no longer matters (undefined); the run goes on with
   the state's first choice and the memory stays.

The induced chain's exact value is computed (accepting bottom SCCs, or the
DFA's accepting states, by a direct solve) and compared with the solve's
bounds; a scheduler that contradicts certified bounds is an error.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from .._arrays import union1d, unique
from ..errors import ModelCheckingError
from ..explore.model import ExplicitModel
from ..numerics import bsccs
from ..numerics.induced import reach_reward_values, until_values
from ..numerics.scheduler import Scheduler, reach_reward_scheduler, until_scheduler
from ..numerics.transitions import choice_rewards
from .memory import MemoryScheduler, induced_chain, ranges
from .product import Solved, _by_aut, _distinct, _lookup


def ltl_scheduler(
    model: ExplicitModel,
    solved: Solved,
    objective: str,
    *,
    tol: float = 1e-6,
    relative: bool = True,
) -> MemoryScheduler:
    """The optimal finite-memory scheduler of the MDP `model` for the LTL
    objective solved in `solved` (`tol`, `relative`: the solve's criterion,
    used where it certifies no bound)."""
    prod, pm = solved.prod, solved.prod.model
    base = _base(solved, tol, relative)
    cp = np.asarray(model.choice_ptr, np.int64)
    term = _by_aut(prod.aut, solved.aut.terminal)
    nch = np.where(term, 0, cp[prod.state + 1] - cp[prod.state])
    jump = ~term & (base.choice >= nch)
    resolve = _resolve(pm, base.choice, jump)
    phases = _Phases(solved) if solved.kind == "ldba" else None
    walk = _Walk(model, solved, base, resolve, term, phases)
    # the best seed of each model state (jumps before the first letter)
    seeds = prod.seeds
    best = np.argmax(np.asarray(base.values)[seeds], axis=0)
    p0 = resolve[seeds[best, np.arange(model.num_states)]]
    start = walk.node_of(p0, np.zeros_like(p0))
    nodes = walk.explore(start)
    return walk.finish(nodes, start, objective, tol, relative)


def _base(solved: Solved, tol: float, relative: bool) -> Scheduler:
    pm = solved.prod.model
    kw = dict(tol=tol, relative=relative)
    if solved.kind == "reward":
        reward = pm.rewards[solved.reward]
        return reach_reward_scheduler(
            pm, reward, solved.target, solved.opt, solved.res, **kw
        )
    ones = np.ones(pm.num_states, bool)
    return until_scheduler(pm, ones, solved.target, solved.opt, solved.res, **kw)


def _resolve(pm: ExplicitModel, choice: np.ndarray, jump: np.ndarray) -> np.ndarray:
    """The product state each one ends in after the jumps it chooses."""
    rows = np.asarray(pm.choice_ptr[:-1], np.int64) + choice
    to = np.asarray(pm.col, np.int64)[np.asarray(pm.row_ptr, np.int64)[rows]]
    r = np.arange(pm.num_states)
    for _ in range(pm.num_states + 1):
        nxt = np.where(jump[r], to[r], r)
        if np.array_equal(nxt, r):
            return r
        r = nxt
    raise ModelCheckingError(
        "the LTL scheduler chose a cycle of automaton jumps",
        hint="this is a bug in jaxmc; please report it",
    )


def _kth_bit(req: np.ndarray, k: int) -> np.ndarray:
    """The position of the `k`-th set bit of each `req` (-1 if none)."""
    out = np.full(req.shape, -1, np.int64)
    for v in unique(req).tolist():
        bits = [b for b in range(int(v).bit_length()) if v >> b & 1]
        if k < len(bits):
            out[req == v] = bits[k]
    return out


def _attractor(pm: ExplicitModel, allowed, goal, region) -> np.ndarray:
    """Per state of `region` outside `goal`, an allowed choice (index within
    the state) with a successor strictly closer to `goal` (breadth-first
    distance in the graph of allowed choices); -1 elsewhere."""
    n = pm.num_states
    soc, row = pm.state_of_choice(), pm.row_of_entry()
    col = np.asarray(pm.col, np.int64)
    pos = np.asarray(pm.val) > 0
    keep = pos & allowed[row] & region[soc[row]]
    src, dst = soc[row][keep], col[keep]
    tgt = np.flatnonzero(goal)
    rows = np.concatenate([dst, np.full(tgt.size, n)])
    cols = np.concatenate([src, tgt])
    g = sp.csr_matrix((np.ones(rows.size, np.int8), (rows, cols)), shape=(n + 1, n + 1))
    d = csgraph.dijkstra(g, indices=n, unweighted=True)[:n]
    closest = np.full(pm.num_choices, np.inf)
    np.minimum.at(closest, row[pos], d[col[pos]])
    good = np.flatnonzero(allowed & region[soc] & ~goal[soc] & (closest < d[soc]))
    first = np.asarray(pm.choice_ptr[:-1], np.int64)
    pick = np.full(n, -1, np.int64)
    states, at = np.unique(soc[good], return_index=True)
    pick[states] = good[at] - first[states]
    return pick


class _Phases:
    """The monitors of the accepting end components, visited in turn."""

    def __init__(self, solved: Solved):
        prod, aut, pm = solved.prod, solved.aut, solved.prod.model
        self.target, self.mec = solved.target, solved.mec
        q = prod.aut
        self.marks = _by_int(q, aut.marks)
        req = np.where(self.target, _by_int(q, aut.required), 0)
        self.count = np.array([bin(int(v)).count("1") for v in req.tolist()])
        self.k = max(1, int(self.count.max(initial=0)))
        self.bit = np.stack([_kth_bit(req, k) for k in range(self.k)])
        soc, row = pm.state_of_choice(), pm.row_of_entry()
        col = np.asarray(pm.col, np.int64)
        leaves = (self.mec[col] != self.mec[soc[row]]) & (np.asarray(pm.val) > 0)
        stay = (np.bincount(row[leaves], minlength=pm.num_choices) == 0) & (
            self.target[soc]
        )
        first = np.asarray(pm.choice_ptr[:-1], np.int64)
        idx = np.flatnonzero(stay)
        states, at = np.unique(soc[idx], return_index=True)
        anyone = np.full(pm.num_states, -1, np.int64)
        anyone[states] = idx[at] - first[states]
        self.choice = np.empty((self.k, pm.num_states), np.int64)
        for k in range(self.k):
            goal = self.target & (self.count <= k)  # (no monitor: anywhere)
            b = self.bit[k]
            goal |= self.target & (b >= 0) & ((self.marks >> np.maximum(b, 0)) & 1 > 0)
            toward = _attractor(pm, stay, goal, self.target)
            self.choice[k] = np.where(toward >= 0, toward, anyone)

    def advance(self, k: np.ndarray, p: np.ndarray) -> np.ndarray:
        """The phase after arriving in product state `p` in phase `k`: past
        every monitor in turn whose mark `p` carries (at most a round)."""
        k = np.where(self.target[p], k, 0)
        going = self.target[p] & (self.count[p] > 0)
        for _ in range(self.k):
            b = self.bit[np.minimum(k, self.k - 1), p]
            going &= (b >= 0) & ((self.marks[p] >> np.maximum(b, 0)) & 1 > 0)
            k = np.where(going, (k + 1) % np.maximum(self.count[p], 1), k)
        return k


def _by_int(q: np.ndarray, fn) -> np.ndarray:
    uq, inv = np.unique(q, return_inverse=True)
    return np.array([int(fn(int(x))) for x in uq], np.int64)[inv.reshape(-1)]


class _Walk:
    """The pairs (model state, automaton state, phase) the scheduler meets,
    explored breadth-first; `p` is the product state of a pair (-1 for a
    decided automaton state, which the product does not continue)."""

    def __init__(self, model, solved, base, resolve, term, phases):
        self.model, self.solved, self.base = model, solved, base
        self.resolve, self.term, self.phases = resolve, term, phases
        self.n = model.num_states
        self.kmax = phases.k if phases is not None else 1
        self.cp = np.asarray(model.choice_ptr, np.int64)
        self.rp = np.asarray(model.row_ptr, np.int64)

    def node_of(self, p, arrive):
        """Nodes (s, q, k, p) for product states `p` (resolved) entered in
        phase `arrive`."""
        prod = self.solved.prod
        s, q = prod.state[p], prod.aut[p]
        k = np.zeros_like(p)
        if self.phases is not None:
            k = self.phases.advance(arrive, p)
        p = np.where(self.term[p], -1, p)
        return s, q, k, p

    def key(self, s, q, k):
        return (q * self.kmax + k) * self.n + s

    def rows(self, s, q, k, p):
        """The model choice (global row) each node takes."""
        c = np.zeros(s.size, np.int64)
        live = p >= 0
        c[live] = self.base.choice[p[live]]
        ph = self.phases
        if ph is not None:
            inside = live & ph.target[np.maximum(p, 0)]
            c[inside] = ph.choice[k[inside], p[inside]]
        return self.cp[s] + c

    def successors(self, s, q, k, p):
        """(owner, entry, successor nodes) of every node's chosen row."""
        rows = self.rows(s, q, k, p)
        owner, e = ranges(self.rp[rows], self.rp[rows + 1] - self.rp[rows])
        s2 = np.asarray(self.model.col, np.int64)[e]
        q2 = q[owner].copy()
        k2 = np.zeros_like(s2)
        p2 = np.full_like(s2, -1)
        live = p[owner] >= 0
        if live.any():
            solved, prod = self.solved, self.solved.prod
            step = _lookup(solved.aut.step, q2[live], solved.letter[s2[live]])
            at = np.searchsorted(prod.keys, step * self.n + s2[live])
            at = self.resolve[at]
            same = np.zeros(at.size, bool)
            if self.phases is not None:
                ph, src = self.phases, p[owner][live]
                same = ph.target[at] & (ph.mec[at] == ph.mec[src]) & ph.target[src]
            arrive = np.where(same, k[owner][live], 0)
            _, q2[live], k2[live], p2[live] = self.node_of(at, arrive)
        return owner, e, (s2, q2, k2, p2)

    def explore(self, start):
        keys = _distinct(self.key(*start[:3]))
        seen = keys
        _, at = np.unique(self.key(*start[:3]), return_index=True)
        frontier = tuple(x[at] for x in start)
        found = [frontier]
        while frontier[0].size:
            _, _, nxt = self.successors(*frontier)
            kk = self.key(*nxt[:3])
            kk, at = np.unique(kk, return_index=True)
            new = ~np.isin(kk, seen)
            frontier = tuple(x[at[new]] for x in nxt)
            seen = union1d(seen, kk[new])
            found.append(frontier)
        return tuple(np.concatenate([f[i] for f in found]) for i in range(4))

    def finish(self, nodes, start, objective, tol, relative) -> MemoryScheduler:
        s, q, k, p = nodes
        qk = q * self.kmax + k
        mems, mem = np.unique(qk, return_inverse=True)
        mem = mem.reshape(-1)
        big = len(mems)
        order = np.argsort(s * big + mem, kind="stable")
        s, q, k, p, mem = s[order], q[order], k[order], p[order], mem[order]
        pair_keys = s * big + mem
        rows = self.rows(s, q, k, p)
        owner, e, (s2, q2, k2, _) = self.successors(s, q, k, p)
        dest = np.searchsorted(
            pair_keys, s2 * big + np.searchsorted(mems, q2 * self.kmax + k2)
        )
        s0, q0, k0, _ = start
        init_mem = np.searchsorted(mems, q0 * self.kmax + k0)
        first = np.searchsorted(pair_keys, np.arange(self.n) * big + init_mem)
        chain = induced_chain(
            self.model, s, mem, big, rows, e, owner, dest,
            first[np.asarray(self.model.initial_states, np.int64)],
        )  # fmt: skip
        w = _chain_values(self.solved, chain, q, k)[first]
        deviation = _verify(self.solved, w, objective, tol, relative)
        defined = np.zeros(s.size, bool)
        live = p >= 0
        defined[live] = self.base.defined[p[live]]
        if self.phases is not None:
            defined |= live & self.phases.target[np.maximum(p, 0)]
        acts = self.model.choice_action
        return MemoryScheduler(
            memory_states=big,
            memory_automaton=mems // self.kmax,
            memory_phase=mems % self.kmax,
            initial_memory=init_mem.astype(np.int64),
            state=s,
            memory=mem.astype(np.int64),
            choice=rows - self.cp[s],
            actions=tuple(acts[r] for r in rows.tolist()) if acts else (None,) * s.size,
            defined=defined,
            chain=chain,
            objective=objective,
            values=w,
            deviation=deviation,
        )


def _chain_values(solved: Solved, chain: ExplicitModel, q, k) -> np.ndarray:
    """The exact value of every pair of the induced chain."""
    aut, n = solved.aut, chain.num_states
    ones = np.ones(n, bool)
    if solved.kind == "ldba":
        alive = _by_aut(q, lambda x: aut.in_accepting_component(x) and not aut.dead(x))
        labels, count = bsccs(chain)
        inside = labels >= 0
        ok = np.ones(count, bool)
        np.logical_and.at(ok, labels[inside], alive[inside])
        got = np.zeros(count, np.int64)
        np.bitwise_or.at(got, labels[inside], _by_int(q, aut.marks)[inside])
        want = np.zeros(count, np.int64)
        want[labels[inside]] = _by_int(q, aut.required)[inside]
        good = ok & ((got & want) == want)
        w = until_values(chain, ones, inside & good[np.maximum(labels, 0)])
    else:
        target = _by_aut(q, aut.accepting)
        if solved.kind == "reward":
            r = choice_rewards(chain, chain.rewards[solved.reward])
            return reach_reward_values(chain, r, target)
        w = until_values(chain, ones, target)
    return 1.0 - w if solved.complement else w


def _verify(solved: Solved, w, objective: str, tol: float, relative: bool) -> float:
    """The largest distance of `w` from the solve's values; an error where
    it leaves the solve's certified bounds."""
    res = solved.result()
    v = np.asarray(res.values, np.float64)
    lo, hi = res.lower, res.upper
    certified = lo is not None or res.bound is not None
    with np.errstate(invalid="ignore"):
        if lo is not None:
            err = np.maximum(np.asarray(hi) - v, v - np.asarray(lo))
        elif res.bound is not None:
            err = np.full(v.shape, float(res.bound))
        else:
            err = (
                tol * np.maximum(1.0, np.abs(v)) if relative else np.full(v.shape, tol)
            )
        err = np.where(np.isfinite(err), err, 0.0)
        finite = np.isfinite(v) & np.isfinite(w)
        diff = np.where(finite, np.abs(w - v), np.where(w == v, 0.0, np.inf))
        slack = 2 * err + 1e-9 * np.maximum(1.0, np.where(finite, np.abs(v), 0.0))
    bad = diff > slack
    if certified and bad.any():
        s = int(np.flatnonzero(bad)[0])
        raise ModelCheckingError(
            f"scheduler for {objective}: its exact value {w[s]!r} in state {s} "
            f"differs from the solve's {v[s]!r} by more than its bound",
            hint="this is a bug in jaxmc; please report it",
        )
    return float(np.max(np.where(np.isfinite(diff), diff, 0.0), initial=0.0))
