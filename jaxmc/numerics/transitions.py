"""Per-entry and per-choice host quantities of a model: the state of each
entry, exit rates, entry probabilities and one-step rewards."""

from __future__ import annotations

import numpy as np

from ..explore.model import ExplicitModel
from ..lang.ast import ModelType


def state_of_entry(model: ExplicitModel) -> np.ndarray:
    return model.state_of_choice()[model.row_of_entry()]


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
    """E(s): the row sums of a CTMC's rate matrix (0 for absorbing states)."""
    return np.bincount(
        state_of_entry(model), weights=model.val, minlength=model.num_states
    )


def probabilities(model: ExplicitModel) -> np.ndarray:
    """Entry probabilities: `val` for DTMCs/MDPs; for a CTMC those of the
    embedded DTMC (`rate / E(s)`). An absorbing CTMC state has no entries;
    callers treat it as a self-loop (it is never a "maybe" state)."""
    if model.model_type == ModelType.CTMC:
        e = exit_rates(model)
        return model.val / e[state_of_entry(model)]
    return np.asarray(model.val, dtype=np.float64)


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
