"""The DTMC a memoryless scheduler induces on an MDP, and its exact values.

`induced_dtmc(model, choice)` keeps every state of the MDP (same numbering,
variables, labels and initial states) and, in each state, only the chosen
choice's distribution; state rewards are kept and transition rewards follow
the chosen entries, so that every property of the MDP can be checked again
on the induced chain (`jaxmc.induced_model`).

`until_values` and `reach_reward_values` evaluate the chain directly: the
0/1 (and infinite) states from the graph, the rest by one sparse LU solve on
the host. They are the scheduler's exact values (up to the rounding of the
factorisation), independent of the iterative solvers whose bounds they are
compared with (`jaxmc.numerics.scheduler`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp
from scipy.sparse import linalg as spla

from ..explore.model import ExplicitModel
from ..lang.ast import ModelType
from . import graph


def chosen_rows(model: ExplicitModel, choice: np.ndarray) -> np.ndarray:
    """The global choice (row) index of each state's chosen choice."""
    return np.asarray(model.choice_ptr[:-1], np.int64) + np.asarray(choice, np.int64)


def induced_dtmc(model: ExplicitModel, choice: np.ndarray) -> ExplicitModel:
    """The DTMC of `model` (an MDP) under the memoryless scheduler `choice`
    (the index of the chosen choice within each state's row group)."""
    n = model.num_states
    choice = np.asarray(choice, np.int64)
    counts = np.diff(model.choice_ptr)
    if choice.shape != (n,) or (choice < 0).any() or (choice >= counts).any():
        raise ValueError("choice must pick one of each state's choices")
    rows = chosen_rows(model, choice)
    starts, ends = model.row_ptr[rows], model.row_ptr[rows + 1]
    lengths = ends - starts
    row_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    entries = np.repeat(starts - row_ptr[:-1], lengths) + np.arange(row_ptr[-1])
    rewards = tuple(
        dataclasses.replace(
            r, transition=None if r.transition is None else r.transition[entries]
        )
        for r in model.rewards
    )
    acts = model.choice_action
    chosen = tuple(acts[r] for r in rows.tolist()) if acts is not None else None
    entry_action, names = None, (None,)
    if chosen is not None and any(a is not None for a in chosen):
        names = (None,) + tuple(sorted({a for a in chosen if a is not None}))
        index = {a: i for i, a in enumerate(names)}
        per_state = np.array([index[a] for a in chosen], dtype=np.int32)
        entry_action = np.repeat(per_state, lengths)
    return ExplicitModel(
        model_type=ModelType.DTMC,
        variables=model.variables,
        states=model.states,
        initial_states=model.initial_states,
        choice_ptr=np.arange(n + 1, dtype=np.int64),
        row_ptr=row_ptr,
        col=np.asarray(model.col)[entries],
        val=np.asarray(model.val)[entries],
        labels=dict(model.labels),
        rewards=rewards,
        choice_action=chosen,
        entry_action=entry_action,
        action_names=names,
        warnings=model.warnings,
    )


def _solve_on(dtmc: ExplicitModel, maybe: np.ndarray, fixed: np.ndarray, b):
    """`x = b + P x` on `maybe`, `x = fixed` elsewhere, by sparse LU."""
    x = np.array(fixed, dtype=np.float64)
    idx = np.nonzero(maybe)[0]
    if not idx.size:
        return x
    n = dtmc.num_states
    row = dtmc.row_of_entry()
    P = sp.csr_matrix((dtmc.val, (row, dtmc.col)), shape=(n, n))
    A = P[idx][:, idx]
    rhs = np.asarray(b, np.float64)[idx] + P[idx][:, ~maybe] @ x[~maybe]
    system = (sp.identity(len(idx), format="csc") - A).tocsc()
    x[idx] = np.atleast_1d(spla.spsolve(system, rhs))
    return x


def until_values(dtmc: ExplicitModel, phi, psi) -> np.ndarray:
    """`P(φ U ψ)` in every state of a DTMC, by a direct solve."""
    no, yes = graph.prob01(dtmc, phi, psi)
    maybe = ~no & ~yes
    return _solve_on(dtmc, maybe, yes.astype(np.float64), np.zeros(dtmc.num_states))


def reach_reward_values(dtmc: ExplicitModel, r: np.ndarray, target) -> np.ndarray:
    """`R(F target)` in every state of a DTMC whose state `s` earns `r[s]`
    per step (its expected one-step reward; `inf` where the target is not
    reached almost surely), by a direct solve."""
    n = dtmc.num_states
    target = np.asarray(target, bool)
    finite = graph.prob1(dtmc, np.ones(n, bool), target)
    maybe = finite & ~target
    x = _solve_on(dtmc, maybe, np.zeros(n), r)
    return np.where(finite, x, np.inf)
