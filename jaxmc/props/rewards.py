"""PRISM's rule for the rewards an `R` operator may use: none negative.

PRISM builds the reward structure of an `R` operator with negative values
refused, whatever the operator (`F`, `C`, `C<=k`, `I=k`, `S`; DTMC, CTMC
and MDP alike): "Reward structure is negative (-1.0) at state ..."
(`explicit.StateModelChecker.constructRewards(model, r)`, which passes
`allowNegativeRewards = false`; only multi-objective weights and reward
export accept them). jaxmc refuses them the same way, before any solve: with
negative rewards value iteration from 0 stops at a wrong value (Storm issue
#1061), and the interval-iteration bounds assume rewards of one sign.

The check covers the reward of every reachable state and every transition
reward, and, as PRISM checks each item of the structure where its guard
holds, the builder's record of negative items (`RewardStructure.
negative_items`): a negative item cancelled by positive ones in the same
state is refused too.
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelCheckingError
from ..explore.model import ExplicitModel, RewardStructure
from ..lang.ast import Span
from ..numerics.transitions import cached


def describe_state(model: ExplicitModel, s: int) -> str:
    """`(x=1, b=true)`: the valuation of state `s`."""
    parts = [
        f"{k}={str(v).lower() if isinstance(v, bool) else v}"
        for k, v in model.state(s).items()
    ]
    return "(" + ", ".join(parts) + ")"


def require_nonnegative(
    model: ExplicitModel, reward: RewardStructure, span: Span | None = None
) -> None:
    """Raise `ModelCheckingError` (located at `span`, the `R` operator) if
    `reward` has a negative state or transition reward in some state. A
    structure of the model found nonnegative is not scanned again (the
    model is immutable); a refused one is refused on every call."""
    i = next((i for i, own in enumerate(model.rewards) if own is reward), None)
    if i is None:  # (not one of the model's own: nothing to remember)
        return _scan(model, reward, span)

    def scan():
        _scan(model, reward, span)
        return True

    cached(model, f"reward_nonnegative_{i}", scan)


def _scan(model: ExplicitModel, reward: RewardStructure, span: Span | None) -> None:
    """`require_nonnegative`'s pass over the structure's rewards."""
    name = f'"{reward.name}"' if reward.name else "(unnamed)"
    hint = (
        "PRISM refuses negative rewards in every R operator; split the "
        "structure into a positive and a negative one and subtract the results"
    )
    if reward.state is not None:
        neg = np.asarray(reward.state) < 0
        if neg.any():
            s = int(np.argmax(neg))
            raise ModelCheckingError(
                f"reward structure {name} has a negative state reward "
                f"({float(reward.state[s])!r}) in state {describe_state(model, s)}",
                span, hint=hint,
            )  # fmt: skip
    if reward.transition is not None:
        neg = np.asarray(reward.transition) < 0
        if neg.any():
            e = int(np.argmax(neg))
            s = int(model.state_of_choice()[model.row_of_entry()[e]])
            raise ModelCheckingError(
                f"reward structure {name} has a negative transition reward "
                f"({float(reward.transition[e])!r}) in state "
                f"{describe_state(model, s)}",
                span, hint=hint,
            )  # fmt: skip
    if reward.negative_items is not None and np.any(reward.negative_items):
        s = int(np.argmax(reward.negative_items))
        raise ModelCheckingError(
            f"reward structure {name} has a negative reward item in state "
            f"{describe_state(model, s)} (the items' sum there may not be)",
            span, hint=hint,
        )  # fmt: skip
