"""Renumbering the states of an `ExplicitModel`.

The builder numbers states in BFS order; PRISM's files list them in
lexicographic order of their valuations (the variables in `.sta` order, the
first most significant, `false < true`). `lexicographic(model)` gives the same
model in PRISM's numbering, which is what `-exportmodel` writes.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .model import ExplicitModel, RewardStructure


def lexicographic_order(model: ExplicitModel) -> np.ndarray:
    """The old index of each state in PRISM's lexicographic order."""
    states = np.asarray(model.states)
    if states.ndim != 2 or states.shape[1] == 0:
        return np.arange(model.num_states)
    return np.lexsort(states.T[::-1])


def lexicographic(model: ExplicitModel) -> ExplicitModel:
    """`model` with its states in PRISM's order (itself if already so)."""
    order = lexicographic_order(model)
    if np.array_equal(order, np.arange(model.num_states)):
        return _sorted_rows(model)
    return permuted(model, order)


def permuted(model: ExplicitModel, order: np.ndarray) -> ExplicitModel:
    """`model` with new state `i` being old state `order[i]`; each choice
    keeps its place among its state's choices, and its entries are sorted
    by (new) target state."""
    n = model.num_states
    order = np.asarray(order, dtype=np.int64)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)

    choice_ptr = np.asarray(model.choice_ptr, dtype=np.int64)
    counts = np.diff(choice_ptr)[order]
    new_choice_ptr = np.concatenate([[0], np.cumsum(counts)])
    old_choice = _ranges(choice_ptr[order], counts)

    row_ptr = np.asarray(model.row_ptr, dtype=np.int64)
    lengths = np.diff(row_ptr)[old_choice]
    new_row_ptr = np.concatenate([[0], np.cumsum(lengths)])
    old_entry = _ranges(row_ptr[old_choice], lengths)

    col = rank[np.asarray(model.col, dtype=np.int64)[old_entry]]
    new_row = np.repeat(np.arange(len(old_choice)), lengths)
    within = np.lexsort((col, new_row))
    old_entry = old_entry[within]
    col = col[within]

    def entries(a):
        return None if a is None else np.asarray(a)[old_entry]

    rewards = tuple(
        RewardStructure(
            r.name,
            None if r.state is None else np.asarray(r.state)[order],
            entries(r.transition),
            None if r.negative_items is None else np.asarray(r.negative_items)[order],
        )
        for r in model.rewards
    )

    def picked(labels, index):
        return None if labels is None else tuple(labels[i] for i in index)

    return dataclasses.replace(
        model,
        states=np.asarray(model.states)[order],
        initial_states=np.sort(rank[np.asarray(model.initial_states, dtype=np.int64)]),
        choice_ptr=new_choice_ptr,
        row_ptr=new_row_ptr,
        col=col,
        val=np.asarray(model.val)[old_entry],
        labels={k: np.asarray(v)[order] for k, v in model.labels.items()},
        rewards=rewards,
        choice_action=picked(model.choice_action, old_choice),
        entry_action=None
        if model.entry_action is None
        else model.entry_action[old_entry],
        provenance=None,
    )


def _sorted_rows(model: ExplicitModel) -> ExplicitModel:
    """`model` with each choice's entries sorted by target state."""
    row = model.row_of_entry()
    within = np.lexsort((np.asarray(model.col), row))
    if np.array_equal(within, np.arange(len(within))):
        return model
    return permuted(model, np.arange(model.num_states))


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of `range(s, s + l)` for each start and length."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.repeat(starts - offsets, lengths) + np.arange(total)
