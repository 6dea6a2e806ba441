"""The `ExplicitModel` of a parsed DRN file (`jaxmc.explore.drn`): choices
in state order, entries sorted by target, the checks of a built model
(probabilities sum to one within PRISM's tolerance, an exit rate is the sum
of its rates, no duplicate transitions, an initial state), deadlocks fixed
with a self-loop and labelled, reward models, labels and valuations."""

from __future__ import annotations

import numpy as np

from ..lang.ast import ModelType
from .drn_format import parse_valuations
from .expand import SUM_TOLERANCE
from .model import ExplicitModel, RewardStructure, StateVar


def assemble(p) -> ExplicitModel:
    """The `ExplicitModel` of parsed DRN lines (`p`: `drn._Parser` after its
    `body`; its `error` locates a problem at a line)."""
    n, mt = p.n, p.model_type
    nd = mt == ModelType.MDP
    m = p.choice_state.size
    if nd and p.nr_choices and p.nr_choices != m:
        raise p.error(f"{m} choices, but @nr_choices is {p.nr_choices}", line=0)
    counts = np.bincount(p.rows, minlength=m)
    if m and (counts == 0).any():
        c = int(np.argmin(counts))
        raise p.error("a choice without transitions", line=p.choice_lines[c])
    # States without choices are deadlocks: a self-loop, as PRISM does.
    has = np.zeros(n, dtype=bool)
    has[p.choice_state] = True
    dead = np.flatnonzero(~has)
    choice_state = np.concatenate([p.choice_state, dead])
    rows = np.concatenate([p.rows, np.arange(m, m + dead.size)])
    cols = np.concatenate([p.cols, dead])
    vals = np.concatenate([p.vals, np.ones(dead.size)])
    entry = np.concatenate([np.arange(p.rows.size), np.full(dead.size, -1)])
    actions = p.actions + [None] * dead.size
    # Choices in state order (stable: a state's choices keep their order).
    corder = np.argsort(choice_state, kind="stable")
    new_of_old = np.empty_like(corder)
    new_of_old[corder] = np.arange(corder.size)
    rows = new_of_old[rows]
    order = np.lexsort((cols, rows))
    rows, cols, vals, entry = rows[order], cols[order], vals[order], entry[order]
    dup = (rows[1:] == rows[:-1]) & (cols[1:] == cols[:-1])
    if dup.any():
        j = int(np.argmax(dup)) + 1
        line = p.transition_line(int(entry[j]))
        raise p.error(f"a second transition to state {cols[j]}", line=line)
    mm = corder.size
    row_ptr = np.zeros(mm + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=mm), out=row_ptr[1:])
    choice_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(choice_state, minlength=n), out=choice_ptr[1:])
    sums = np.add.reduceat(vals, row_ptr[:-1]) if mm else np.zeros(0)
    choice_lines = np.concatenate([p.choice_lines, np.zeros(dead.size, np.int64)])
    if mt == ModelType.CTMC:
        given = p.exit[choice_state[corder]]
        bad = np.abs(sums - given) > SUM_TOLERANCE * np.maximum(1.0, np.abs(given))
        bad[np.isin(choice_state[corder], dead)] = False
        if bad.any():
            s = int(choice_state[corder][np.argmax(bad)])
            raise p.error(
                f"the exit rate of state {s} is {float(given[np.argmax(bad)])!r}, but "
                f"its rates sum to {float(sums[np.argmax(bad)])!r}",
                line=int(p.state_lines[s]),
            )
    else:
        bad = np.abs(sums - 1.0) > SUM_TOLERANCE
        if bad.any():
            c = int(corder[np.argmax(bad)])
            raise p.error(
                f"probabilities sum to {float(sums[np.argmax(bad)])!r}, not 1",
                line=int(choice_lines[c]),
            )
    actions = [actions[c] for c in corder.tolist()]
    for i, a in enumerate(actions):  # Storm numbers unlabelled choices 0, 1, ...
        if a is not None and a.isdigit():
            actions[i] = None
    choice_action = tuple(actions) if nd else None
    entry_action, action_names = None, (None,)
    if not nd and any(actions):
        action_names = (None, *sorted({a for a in actions if a is not None}))
        index = {a: i for i, a in enumerate(action_names)}
        per_choice = np.array([index[a] for a in actions], dtype=np.int32)
        entry_action = per_choice[rows]

    labels: dict[str, np.ndarray] = {}
    for name, states in p.labels.items():
        mask = np.zeros(n, dtype=bool)
        mask[states] = True
        labels[name] = mask
    init = labels.pop("init", None)
    if init is None or not init.any():
        raise p.error(
            "no initial state", line=0, hint="label the initial states `init`"
        )
    deadlock = np.zeros(n, dtype=bool)
    deadlock[dead] = True
    given_dead = labels.pop("deadlock", None)
    if given_dead is not None:
        deadlock |= given_dead
    labels = {"init": init, "deadlock": deadlock, **labels}

    rewards = _rewards(p, n, corder, rows, choice_ptr)
    vv = parse_valuations(p.valuations)
    warnings: tuple[str, ...] = ()
    if vv is None:
        variables = (StateVar("x", 0, max(n - 1, 0)),)
        states_arr = np.arange(n, dtype=np.int64)[:, None]
        if any(v is not None for v in p.valuations):
            warnings = (
                "the state valuations of the file were not read (not all "
                "integers and booleans); the states are numbered by `x`",
            )
    else:
        variables, states_arr = vv
    return ExplicitModel(
        model_type=mt,
        variables=variables,
        states=states_arr.astype(np.int32),
        initial_states=np.flatnonzero(init).astype(np.int64),
        choice_ptr=choice_ptr,
        row_ptr=row_ptr,
        col=cols,
        val=vals,
        labels=labels,
        rewards=rewards,
        choice_action=choice_action,
        entry_action=entry_action,
        action_names=action_names,
        warnings=warnings,
    )


def _rewards(p, n, corder, rows, choice_ptr) -> tuple[RewardStructure, ...]:
    """The reward structures: state rewards per state, action rewards given
    to every entry of their choice (`corder`: the choices in state order)."""
    srew, arew = p.state_rew, p.action_rew
    k = max(srew.shape[1], arew.shape[1], len(p.reward_names))
    mm = corder.size
    out = []
    for i in range(k):
        name = p.reward_names[i] if i < len(p.reward_names) else None
        state = trans = None
        negative = np.zeros(n, dtype=bool)
        if i < srew.shape[1] and srew[:, i].any():
            state = srew[:, i].copy()
            negative |= state < 0
        if i < arew.shape[1] and arew[:, i].any():
            per_choice = np.zeros(mm)
            per_choice[: arew.shape[0]] = arew[:, i]
            per_choice = per_choice[corder]  # deadlock self-loops earn nothing
            trans = per_choice[rows]
            neg_c = np.flatnonzero(per_choice < 0)
            negative[np.searchsorted(choice_ptr, neg_c, side="right") - 1] = True
        out.append(
            RewardStructure(name, state, trans, negative if negative.any() else None)
        )
    return tuple(out)
