"""Storm's reward-bounded until, `φ U^{rew{"r"}<=b} ψ`: its plan node and
its execution on `jaxmc.numerics.reward_bounded` (the accumulated reward
unfolded into the state space; see there for the semantics)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UnsupportedError
from ..explore.model import ExplicitModel
from ..lang import ast
from ..lang.ast import TimeBoundKind
from ..numerics import reward_bounded_until
from ..numerics.result import NumericResult
from ..options import SolveOptions


@dataclass(frozen=True)
class RewardBoundedUntil:
    """`φ U^{rew∈I} ψ`: `ψ` reached, `φ` before, with the reward of
    structure `reward` (an index into `model.rewards`) accumulated on the
    way in `I`, given by `low`/`high` (None: absent) and their strictness."""

    phi: Any
    psi: Any
    reward: int
    low: float | None
    high: float | None
    low_strict: bool
    high_strict: bool
    opt: str | None


def reward_bounded(
    phi: Any,
    psi: Any,
    bound: ast.TimeBound,
    opt: str | None,
    number: Callable[[ast.Expr, str], float],
    structure: Callable[[Any, Any], int],
) -> RewardBoundedUntil:
    """The plan node of `φ U^{bound} ψ` for a `rew` bound (or a `steps`
    bound on a CTMC, refused). `number(e, what)` evaluates a constant,
    `structure(key, span)` resolves a reward structure to its index."""
    if bound.ref is ast.BoundRef.STEPS:
        raise UnsupportedError(
            "a step bound (steps<=k) on a CTMC",
            bound.span,
            hint="use a time bound (F<=t or F^{time<=t}) on a CTMC, as Storm does",
        )
    ridx = structure(bound.structure, bound.span)
    low = high = None
    if bound.low is not None:
        low = float(number(bound.low, "a reward bound"))
    if bound.high is not None:
        high = float(number(bound.high, "a reward bound"))
    kind = bound.kind
    if kind == TimeBoundKind.EQ:  # =b is [b,b], as in Storm
        high = low
    for value, e in ((low, bound.low), (high, bound.high)):
        if value is not None and (value < 0 or not np.isfinite(value)):
            raise UnsupportedError(
                f"a reward bound of {value}: it must be a non-negative number",
                e.span or bound.span,
            )
    strict_low, strict_high = kind == TimeBoundKind.GT, kind == TimeBoundKind.LT
    return RewardBoundedUntil(phi, psi, ridx, low, high, strict_low, strict_high, opt)


def probabilities(
    model: ExplicitModel,
    node: RewardBoundedUntil,
    mask: Callable,
    options: SolveOptions,
) -> NumericResult:
    """Per-state values of the node (its masks from `mask`)."""
    return reward_bounded_until(
        model,
        mask(node.phi),
        mask(node.psi),
        model.rewards[node.reward],
        node.low,
        node.high,
        low_strict=node.low_strict,
        high_strict=node.high_strict,
        opt=node.opt,
        options=options,
    )
