"""The product of an explicit model with an LTL automaton, and the
probabilities (and co-safe rewards) of LTL formulas computed on it.

A product state `(s, q)` is a model state and the automaton state after
reading the labels of the path up to and including `s` (PRISM's convention,
so that a co-safe reward stops accumulating at the first state where the
prefix is a good prefix). Its choices are the model's choices of `s`, each
leading to `(s', step(q, L(s')))`, and, for the LDBA, one Dirac choice per
ε-jump of `q` to `(s, j)`. The product is explored from every model state,
so that the values of all states come out (nested and filtered properties
need them); the value of `s` is that of `(s, step(q0, L(s)))`, or for the
LDBA the best of that and of the jumps taken before the first letter.

Acceptance: a co-safe formula is the probability (or expected reward) of
reaching an accepting state of its DFA; a safe one the complement of the
co-safe one of its negation; any other formula the maximal probability of
reaching an accepting maximal end component of the LDBA product (one in the
accepting component whose states carry every monitor's mark); a minimum on
an MDP is one minus the maximum of the negation. A CTMC is checked through
its embedded DTMC, as PRISM does (LTL without time bounds does not depend on
the sojourn times).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..explore.model import ExplicitModel, RewardStructure, StateVar
from ..lang.ast import ModelType
from ..numerics import (
    NumericResult,
    bsccs,
    embedded_dtmc,
    mecs,
    prob0A,
    reachability_rewards,
    until_probabilities,
)
from .automaton import LDBA, Residual
from .formula import is_cosafe, is_safe, negate


@dataclasses.dataclass
class Product:
    """A product model with, per product state, its model state `state` and
    automaton state `aut`; `seeds[s]` are the product states whose best
    value is that of model state `s` (one row per seed kind)."""

    model: ExplicitModel
    state: np.ndarray
    aut: np.ndarray
    seeds: np.ndarray  # int64 [k, n]
    keys: np.ndarray  # sorted `aut * n + state` of every product state


def letters(masks: np.ndarray) -> np.ndarray:
    """The letter (bit mask of true propositions) of every state, from the
    propositions' masks (bool [k, n])."""
    masks = np.asarray(masks, dtype=bool)
    out = np.zeros(masks.shape[1], dtype=np.int64)
    for i, m in enumerate(masks):
        out |= m.astype(np.int64) << i
    return out


def _lookup(fn, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`fn(a[i], b[i])` for every i (non-negative ints), calling `fn` once
    per distinct pair."""
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    width = int(b.max()) + 1
    if int(a.max()) >= (1 << 62) // width:  # a * width would overflow
        pairs, inv = np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)
        vals = np.array([fn(int(x), int(y)) for x, y in pairs], dtype=np.int64)
        return vals[inv.reshape(-1)]
    pairs, inv = np.unique(a * width + b, return_inverse=True)
    vals = np.array(
        [fn(int(x // width), int(x % width)) for x in pairs], dtype=np.int64
    )
    return vals[inv.reshape(-1)]


def _member(a: np.ndarray, sorted_b: np.ndarray) -> np.ndarray:
    """Whether each `a[i]` is in the sorted array `sorted_b`."""
    if sorted_b.size == 0:
        return np.zeros(a.size, dtype=bool)
    i = np.minimum(np.searchsorted(sorted_b, a), sorted_b.size - 1)
    return sorted_b[i] == a


def _distinct(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values of `a` (by sorting: faster here than
    `np.unique`'s hashing)."""
    a = np.sort(a)
    return a[np.concatenate([[True], a[1:] != a[:-1]])] if a.size else a


def _ranges(start: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(owner, index): `start[i] + 0..count[i]-1` for every i, flattened."""
    owner = np.repeat(np.arange(start.size), count)
    offs = np.arange(owner.size) - np.repeat(np.cumsum(count) - count, count)
    return owner, np.repeat(start, count) + offs


def build_product(
    model: ExplicitModel, aut, letter: np.ndarray, jump_from: np.ndarray | None = None
) -> Product:
    """The reachable product of `model` and `aut` (`Residual` or `LDBA`)
    from every model state. `jump_from`: the product states (sorted keys
    `aut * n + state`) from which the LDBA may jump; None: from every state,
    and before the first letter."""
    n = model.num_states
    jumping = isinstance(aut, LDBA)
    allstates = np.arange(n, dtype=np.int64)
    firsts = [np.full(n, aut.initial, dtype=np.int64)]
    if jumping and jump_from is None:
        firsts += [np.full(n, j, dtype=np.int64) for j in aut.jumps(aut.initial)]
    seed_q = [_lookup(aut.step, f, letter) for f in firsts]
    seed_keys = np.stack([q * n + allstates for q in seed_q])

    def may_jump(keys):
        if not jumping:
            return np.zeros(keys.size, dtype=bool)
        if jump_from is None:
            return np.ones(keys.size, dtype=bool)
        return _member(keys, jump_from)

    cp, rp = model.choice_ptr, model.row_ptr

    def successors(keys):
        keys = keys[~_by_aut(keys // n, aut.terminal)]
        s, q = keys % n, keys // n
        lo, hi = rp[cp[s]], rp[cp[s + 1]]
        owner, e = _ranges(lo, hi - lo)
        s2 = model.col[e]
        q2 = _lookup(aut.step, q[owner], letter[s2])
        out = [q2 * n + s2]
        ok = may_jump(keys)
        if ok.any():
            js = [(int(x), aut.jumps(int(x))) for x in _distinct(q[ok])]
            jump = {x: np.array(t, dtype=np.int64) for x, t in js if t}
            for x, t in jump.items():
                ss = s[ok & (q == x)]
                out.append((t[:, None] * n + ss[None, :]).reshape(-1))
        return np.concatenate(out)

    # visited pairs: one bool vector over the model's states per automaton
    # state met so far (automata are small next to models)
    visited: dict[int, np.ndarray] = {}

    def fresh(keys):
        keys = _distinct(keys)
        q = keys // n
        out = []
        for x in _distinct(q):
            ss = keys[q == x] % n
            seen = visited.setdefault(int(x), np.zeros(n, dtype=bool))
            ss = ss[~seen[ss]]
            seen[ss] = True
            out.append(ss + int(x) * n)
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    frontier = fresh(seed_keys.reshape(-1))
    while frontier.size:
        frontier = fresh(successors(frontier))
    known = np.sort(
        np.concatenate([np.flatnonzero(v) + q * n for q, v in visited.items()])
    )
    return _assemble(model, aut, letter, known, seed_keys, may_jump(known))


def _assemble(model, aut, letter, keys, seed_keys, jumps) -> Product:
    n, cp, rp = model.num_states, model.choice_ptr, model.row_ptr
    ps, pq = keys % n, keys // n
    N = keys.size
    # model choices of every product state, then its jumps; a terminal
    # automaton state (decided: accepting or dead) makes a self-loop instead
    term = _by_aut(pq, aut.terminal)
    nch = np.where(term, 0, cp[ps + 1] - cp[ps])
    owner, rows = _ranges(cp[ps], nch)
    nj = np.zeros(N, dtype=np.int64)
    jumping = bool(jumps.any())
    if jumping:  # the jumps of each automaton state, flattened
        uq = _distinct(pq)
        table = [aut.jumps(int(x)) for x in uq]
        counts = np.array([len(t) for t in table], dtype=np.int64)
        flat = np.array([j for t in table for j in t], dtype=np.int64)
        first = np.cumsum(counts) - counts
        where = np.searchsorted(uq, pq)
        nj = np.where(jumps, counts[where], 0)
    per_state = nch + nj + term
    choice_ptr = np.concatenate([[0], np.cumsum(per_state)]).astype(np.int64)
    # model rows: entries
    rlen = rp[rows + 1] - rp[rows]
    row_owner, ents = _ranges(rp[rows], rlen)
    p = owner[row_owner]
    s2 = model.col[ents]
    q2 = _lookup(aut.step, pq[p], letter[s2])
    dest = np.searchsorted(keys, q2 * n + s2)
    new_row = (
        choice_ptr[p]
        + (np.arange(rows.size) - np.repeat(np.cumsum(nch) - nch, nch))[row_owner]
    )
    cols, vals, erow, eidx = [dest], [model.val[ents]], [new_row], [ents]
    actions = None
    if model.choice_action is not None:
        actions = np.full(int(choice_ptr[-1]), None, dtype=object)
        actions[choice_ptr[owner] + _local(nch)] = np.array(
            model.choice_action, dtype=object
        )[rows]
    if jumping and nj.sum():
        jp, _ = _ranges(np.zeros(N, dtype=np.int64), nj)
        local = _local(nj)
        jq = flat[first[where[jp]] + local]
        cols.append(np.searchsorted(keys, jq * n + ps[jp]))
        vals.append(np.ones(jp.size))
        erow.append(choice_ptr[jp] + nch[jp] + local)
        eidx.append(np.full(jp.size, -1, dtype=np.int64))
    loops = np.flatnonzero(term)
    cols.append(loops)
    vals.append(np.ones(loops.size))
    erow.append(choice_ptr[loops])
    eidx.append(np.full(loops.size, -1, dtype=np.int64))
    col, val = np.concatenate(cols), np.concatenate(vals)
    erow, eidx = np.concatenate(erow), np.concatenate(eidx)
    order = np.lexsort((col, erow))
    col, val, erow, eidx = col[order], val[order], erow[order], eidx[order]
    m = int(choice_ptr[-1])
    row_ptr = np.concatenate([[0], np.cumsum(np.bincount(erow, minlength=m))])
    mdp = model.model_type == ModelType.MDP or jumping
    kind = ModelType.MDP if mdp else model.model_type
    rewards = tuple(
        RewardStructure(
            r.name,
            None if r.state is None else r.state[ps],
            None if r.transition is None else _entry_values(r.transition, eidx),
        )
        for r in model.rewards
    )
    seeds = np.searchsorted(keys, seed_keys)
    init = _distinct(seeds[:, model.initial_states].reshape(-1))
    states = np.concatenate(
        [model.states[ps], pq[:, None].astype(model.states.dtype)], axis=1
    )
    variables = model.variables + (StateVar("_automaton", 0, int(pq.max(initial=0))),)
    mask = np.zeros(N, dtype=bool)
    mask[init] = True
    product = ExplicitModel(
        model_type=kind,
        variables=variables,
        states=states,
        initial_states=init.astype(np.int64),
        choice_ptr=choice_ptr,
        row_ptr=row_ptr.astype(np.int64),
        col=col.astype(np.int64),
        val=val.astype(np.float64),
        labels={"init": mask, "deadlock": np.zeros(N, dtype=bool)},
        rewards=rewards,
        choice_action=tuple(actions) if (actions is not None and mdp) else None,
    )
    return Product(product, ps, pq, seeds, keys)


def _local(count: np.ndarray) -> np.ndarray:
    """`0..count[i]-1` for every i, flattened."""
    return np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)


def _entry_values(values: np.ndarray, eidx: np.ndarray) -> np.ndarray:
    out = np.zeros(eidx.size)
    ok = eidx >= 0
    out[ok] = values[eidx[ok]]
    return out


# ------------------------------------------------------------------ values


def _per_state(prod: Product, res: NumericResult) -> NumericResult:
    """The product's values (and per-state bounds) mapped back to the
    model's states: the best of each state's seeds."""

    def back(v):
        return None if v is None else np.asarray(v)[prod.seeds].max(axis=0)

    extra = dict(res.extra or {})
    if "lower" in extra:
        extra["lower"], extra["upper"] = back(extra["lower"]), back(extra["upper"])
    return dataclasses.replace(
        res,
        values=back(res.values),
        lower=back(res.lower),
        upper=back(res.upper),
        extra=extra,
    )


def _complement(res: NumericResult) -> NumericResult:
    """`1 - values`, with the per-state bounds swapped."""

    def flip(v):
        return None if v is None else 1.0 - np.asarray(v)

    extra = dict(res.extra or {})
    if "lower" in extra:
        extra["lower"], extra["upper"] = flip(extra["upper"]), flip(extra["lower"])
    return dataclasses.replace(
        res,
        values=flip(res.values),
        lower=flip(res.upper),
        upper=flip(res.lower),
        extra=extra,
    )


def as_markov(model: ExplicitModel) -> ExplicitModel:
    return embedded_dtmc(model) if model.model_type == ModelType.CTMC else model


@dataclasses.dataclass
class Solved:
    """A product and its solve, kept for the optimal scheduler
    (`jaxmc.automata.strategy`): `kind` is "reach" (the DFA's accepting
    states), "ldba" (accepting maximal end components, `mec` their labels,
    -1 elsewhere) or "reward" (co-safe rewards); `opt` the direction of the
    product's solve `res`; `complement` whether the model's value is one
    minus the product's (safe formulas; `Pmin` through the negation)."""

    prod: Product
    aut: object
    letter: np.ndarray
    kind: str
    target: np.ndarray
    opt: str | None
    complement: bool
    res: NumericResult
    mec: np.ndarray | None = None
    reward: int | None = None  # "reward": the reward structure's index

    def result(self) -> NumericResult:
        """The values of the model's states."""
        res = _per_state(self.prod, self.res)
        return _complement(res) if self.complement else res


def ltl_probabilities(
    model: ExplicitModel,
    formula: tuple,
    masks: np.ndarray,
    opt: str | None = None,
    **kw,
) -> NumericResult:
    """Per-state probability (`Pmin`/`Pmax` on an MDP, by `opt`) that a path
    satisfies the LTL `formula`, whose proposition `i` holds where
    `masks[i]` does; `kw` go to `numerics.until_probabilities`."""
    return ltl_solve(model, formula, masks, opt, **kw).result()


def ltl_solve(
    model: ExplicitModel,
    formula: tuple,
    masks: np.ndarray,
    opt: str | None = None,
    **kw,
) -> Solved:
    """`ltl_probabilities` with its product kept (`Solved`)."""
    model = as_markov(model)
    letter = letters(masks)
    mdp = model.model_type == ModelType.MDP
    flip = {None: None, "min": "max", "max": "min"}
    if is_cosafe(formula):
        return _reach(model, Residual(formula), letter, opt, kw, False)
    if is_safe(formula):
        return _reach(model, Residual(negate(formula)), letter, flip[opt], kw, True)
    if mdp and opt == "min":
        return _ldba(model, negate(formula), letter, kw, True)
    return _ldba(model, formula, letter, kw, False)


def _reach(model, aut: Residual, letter, opt, kw, complement) -> Solved:
    prod = build_product(model, aut, letter)
    target = _by_aut(prod.aut, aut.accepting)
    ones = np.ones(prod.model.num_states, dtype=bool)
    res = until_probabilities(prod.model, ones, target, opt=opt, **kw)
    return Solved(prod, aut, letter, "reach", target, opt, complement, res)


def ldba_product(model: ExplicitModel, aut: LDBA, letter: np.ndarray) -> Product:
    """The product with the LDBA whose accepting end components decide.

    On a Markov chain the LDBA jumps only from the bottom SCCs of the initial
    component's (deterministic) product: a path ends in one, where the
    probability that a jump is accepted depends only on the product state;
    along a path that satisfies the formula a jump at almost every step is
    accepted, so some state of that BSCC jumps to acceptance with
    probability 1."""
    jump_from = None
    if model.model_type != ModelType.MDP:
        base = build_product(model, aut, letter, np.zeros(0, dtype=np.int64))
        labels, _ = bsccs(base.model)
        jump_from = base.keys[labels >= 0]
    return build_product(model, aut, letter, jump_from)


def _ldba(model, formula, letter, kw, complement) -> Solved:
    aut = LDBA(formula)
    prod = ldba_product(model, aut, letter)
    target, mec = accepting_mecs(prod, aut, labels=True)
    ones = np.ones(prod.model.num_states, dtype=bool)
    res = until_probabilities(prod.model, ones, target, opt="max", **kw)
    return Solved(prod, aut, letter, "ldba", target, "max", complement, res, mec)


def _by_aut(aut_states: np.ndarray, fn) -> np.ndarray:
    uq, inv = np.unique(aut_states, return_inverse=True)
    return np.array([bool(fn(int(q))) for q in uq], dtype=bool)[inv.reshape(-1)]


def accepting_mecs(prod: Product, aut: LDBA, labels: bool = False):
    """The product states in accepting maximal end components: alive, in the
    accepting component, and marked by every monitor somewhere (with
    `labels`, also each one's MEC, -1 outside them)."""
    alive = _by_aut(
        prod.aut, lambda q: aut.in_accepting_component(q) and not aut.dead(q)
    )
    target = np.zeros(prod.model.num_states, dtype=bool)
    mec = np.full(prod.model.num_states, -1, dtype=np.int64)
    if not alive.any():
        return (target, mec) if labels else target
    found, count, _ = mecs(prod.model, states=alive)
    marks = np.array([aut.marks(int(q)) for q in prod.aut], dtype=np.int64)
    need = np.array([aut.required(int(q)) for q in prod.aut], dtype=np.int64)
    inside = found >= 0
    got = np.zeros(count, dtype=np.int64)
    np.bitwise_or.at(got, found[inside], marks[inside])
    want = np.zeros(count, dtype=np.int64)
    want[found[inside]] = need[inside]
    good = (got & want) == want
    target[inside] = good[found[inside]]
    mec[target] = found[target]
    return (target, mec) if labels else target


def cosafe_rewards(
    model: ExplicitModel,
    reward_index: int,
    formula: tuple,
    masks: np.ndarray,
    opt: str | None = None,
    **kw,
) -> NumericResult:
    """Per-state expected reward (`Rmin`/`Rmax` on an MDP) accumulated until
    a path's prefix satisfies the co-safe LTL `formula` (the reachability
    reward of the DFA's accepting states in the product)."""
    return cosafe_solve(model, reward_index, formula, masks, opt, **kw).result()


def cosafe_solve(
    model: ExplicitModel,
    reward_index: int,
    formula: tuple,
    masks: np.ndarray,
    opt: str | None = None,
    **kw,
) -> Solved:
    """`cosafe_rewards` with its product kept (`Solved`)."""
    letter = letters(masks)
    aut = Residual(formula)
    prod = build_product(model, aut, letter)
    target = _by_aut(prod.aut, aut.accepting)
    reward = prod.model.rewards[reward_index]
    res = reachability_rewards(prod.model, reward, target, opt=opt, **kw)
    return Solved(
        prod, aut, letter, "reward", target, opt, False, res, None, reward_index
    )


def ltl_exists(model: ExplicitModel, formula: tuple, masks: np.ndarray) -> np.ndarray:
    """Per state: whether some path from it satisfies the LTL `formula`
    (`E [ψ]`; `A [ψ]` is `¬E [¬ψ]`): the product of the model's graph, every
    transition a choice of its own, reaches an accepting end component."""
    nnz = model.num_transitions
    graph = dataclasses.replace(
        model,
        model_type=ModelType.MDP,
        choice_ptr=model.row_ptr[model.choice_ptr].astype(np.int64),
        row_ptr=np.arange(nnz + 1, dtype=np.int64),
        val=np.ones(nnz),
        rewards=(),
        choice_action=None,
        entry_action=None,
        provenance=None,
    )
    aut = LDBA(formula)
    prod = build_product(graph, aut, letters(masks))
    target = accepting_mecs(prod, aut)
    ones = np.ones(prod.model.num_states, dtype=bool)
    reach = ~prob0A(prod.model, ones, target)
    return reach[prod.seeds].any(axis=0)
