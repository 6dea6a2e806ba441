"""Comparing a computed value against an operator's bound (`P>=p`, `R<r`, ...).

With interval iteration a solve certifies, for every state, an interval
`[lower, upper]` that contains the exact value. A comparison is *decided* in a
state when it gives the same answer at both ends of the interval; otherwise
the answer depends on digits the solve did not compute, and PRISM refuses
("Accuracy of value ... is not enough to compare to bound ...",
`prism.OpRelOpBound.apply`). So does jaxmc, with `UndecidedError`, but only
for the states whose answer is needed (see `jaxmc.props.check`): the initial
states at the top level, a filter's states for its operand, every state
inside another operator.

Without certified bounds (value iteration, Jacobi, uniformisation, ...) the
approximate value is compared as it is, as PRISM's `-valiter` does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import ModelCheckingError
from ..lang import ast
from ..lang.ast import BinaryOp


COMPARE: dict[BinaryOp, Callable[[np.ndarray, float], np.ndarray]] = {
    BinaryOp.LT: np.less,
    BinaryOp.LE: np.less_equal,
    BinaryOp.GT: np.greater,
    BinaryOp.GE: np.greater_equal,
}


class UndecidedError(ModelCheckingError):
    """A bounded operator (`P>=p [...]`, `R<r [...]`, ...) whose bound lies
    inside the certified interval of the value, in a state whose answer is
    needed: the comparison cannot be decided at this accuracy.

    Attributes: `lower`, `upper` (the interval, in the first such state),
    `bound`, `state` (its index), `count` (how many needed states are
    undecided)."""

    def __init__(self, message, span=None, *, lower, upper, bound, state, count, **kw):
        self.lower, self.upper, self.bound = lower, upper, bound
        self.state, self.count = state, count
        super().__init__(message, span, **kw)


def compare(
    values: np.ndarray,
    cmp: BinaryOp,
    bound: float,
    bounds: tuple[np.ndarray, np.ndarray] | None,
    needed: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """`values ~ bound` in every state, and the mask of needed states where the
    certified interval `bounds` (if any) does not decide it."""
    fn = COMPARE[cmp]
    result = fn(values, bound)
    if bounds is None:
        return result, np.zeros(len(values), dtype=bool)
    lo, hi = (np.asarray(b, dtype=np.float64) for b in bounds)
    undecided = (fn(lo, bound) != fn(hi, bound)) & needed
    return result, undecided


def undecided_error(
    op: ast.Expr,
    text: str,
    bound: float,
    bounds: tuple[np.ndarray, np.ndarray],
    undecided: np.ndarray,
    describe_state: Callable[[int], str],
    epsilon: float,
    relative: bool,
) -> UndecidedError:
    """The error for an undecided comparison (`undecided` has a True entry)."""
    idx = np.flatnonzero(undecided)
    s = int(idx[0])
    lo, hi = float(bounds[0][s]), float(bounds[1][s])
    where = f"in state {describe_state(s)}"
    if idx.size > 1:
        where = f"in {idx.size} states that matter, e.g. {describe_state(s)}"
    kind = "relative" if relative else "absolute"
    return UndecidedError(
        f"the accuracy is not enough to decide {text}: {where} the value lies in "
        f"[{lo!r}, {hi!r}], which contains the bound {bound!r} (interval "
        f"iteration, {kind} epsilon {epsilon:g})",
        op.span,
        hint="a smaller -epsilon may decide it, unless the value equals the bound",
        lower=lo, upper=hi, bound=bound, state=s, count=int(idx.size),
    )  # fmt: skip
