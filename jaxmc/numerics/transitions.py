"""Per-entry and per-choice host quantities of a model: the state of each
entry, exit rates, entry probabilities and one-step rewards.

The state of each entry, the exit rates and the entry probabilities depend
on the model alone: they are computed once per model and kept while it
lives (read-only arrays), so a second check does no O(transitions) pass for
them (a CTMC's embedded probabilities in particular)."""

from __future__ import annotations

import weakref

import numpy as np

from ..explore.model import ExplicitModel
from ..lang.ast import ModelType


#: Per model, its `{name: read-only array}` of the quantities above.
_PER_MODEL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def cached(model: ExplicitModel, name: str, make) -> np.ndarray:
    """`make()` the first time for `(model, name)`, kept (read-only) while
    the model lives."""
    got = _PER_MODEL.setdefault(model, {})
    if name not in got:
        a = np.asarray(make()).view()  # (never the model's own array)
        a.flags.writeable = False
        got[name] = a
    return got[name]


def row_of_entry(model: ExplicitModel) -> np.ndarray:
    """The row (choice) of every entry (once per model)."""
    return cached(model, "row_of_entry", model.row_of_entry)


def state_of_entry(model: ExplicitModel) -> np.ndarray:
    """The state of every entry (once per model)."""
    return cached(
        model, "state_of_entry", lambda: model.state_of_choice()[row_of_entry(model)]
    )


def state_sums(model: ExplicitModel, weights) -> np.ndarray:
    """Per state, the sum of `weights` (one per entry) over its entries: as
    `np.bincount(state_of_entry(model), weights)` up to the rounding of the
    sums' order, without the per-entry state array."""
    n = model.num_states
    out = np.zeros(n)
    ptr = model.row_ptr[model.choice_ptr]
    full = ptr[1:] > ptr[:-1]
    if full.any():
        w = np.asarray(weights, dtype=np.float64)
        out[full] = np.add.reduceat(w, ptr[:-1][full])
    return out


def exit_rates(model: ExplicitModel) -> np.ndarray:
    """E(s): the row sums of a CTMC's rate matrix (0 for absorbing states;
    once per model)."""
    return cached(
        model,
        "exit_rates",
        lambda: np.bincount(
            state_of_entry(model), weights=model.val, minlength=model.num_states
        ),
    )


def probabilities(model: ExplicitModel) -> np.ndarray:
    """Entry probabilities: `val` for DTMCs/MDPs; for a CTMC those of the
    embedded DTMC (`rate / E(s)`). An absorbing CTMC state has no entries;
    callers treat it as a self-loop (it is never a "maybe" state). Once per
    model (read-only)."""
    if model.model_type == ModelType.CTMC:
        return cached(
            model,
            "probabilities",
            lambda: model.val / exit_rates(model)[state_of_entry(model)],
        )
    return cached(
        model, "probabilities", lambda: np.asarray(model.val, dtype=np.float64)
    )


def choice_rewards(model: ExplicitModel, reward, probs=None) -> np.ndarray:
    """Expected one-step reward of each choice: `state[s] + sum_e P_e trans_e`."""
    m = model.num_choices
    r = np.zeros(m)
    if reward.state is not None:
        r += np.asarray(reward.state, dtype=np.float64)[model.state_of_choice()]
    if reward.transition is not None:
        p = probabilities(model) if probs is None else probs
        r += np.bincount(
            model.row_of_entry(), weights=p * np.asarray(reward.transition), minlength=m
        )
    return r
