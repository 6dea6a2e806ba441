"""Time and step bounds of path formulas (`U<=k`, `F[t1,t2]`, `C<=t`, `I=k`),
checked and normalised as PRISM does."""

from __future__ import annotations

from ..errors import ModelCheckingError
from ..lang import ast
from ..lang.ast import TimeBoundKind


def normalise_time_bound(
    bound: ast.TimeBound, low: float, high: float, is_ctmc: bool
) -> tuple[float, float]:
    """(low, high) of `bound`, whose expressions evaluate to `low` (0 if
    absent) and `high` (inf if absent), checked: not negative, not an empty
    interval; discrete bounds integers, normalised to inclusive bounds
    (`<k` is `<=k-1`, `>k` is `>=k+1`); continuous `<t` is `<=t`."""
    kind = bound.kind
    if kind == TimeBoundKind.EQ:
        high = low
    for v, e in ((low, bound.low), (high, bound.high)):
        if e is not None and v < 0:
            raise ModelCheckingError(f"negative time bound {v}", e.span)
    if bound.kind == TimeBoundKind.INTERVAL and high < low:
        raise ModelCheckingError(f"empty time interval [{low}, {high}]", bound.span)
    if not is_ctmc:
        if any(
            e is not None and float(v) != int(v)
            for v, e in ((low, bound.low), (high, bound.high))
        ):
            raise ModelCheckingError(
                "step bounds of a discrete-time model must be integers",
                bound.span,
            )
        if kind == TimeBoundKind.LT:
            high = high - 1
            if high < 0:
                raise ModelCheckingError(
                    "the bound <0 admits no step", bound.span,
                    hint="a strict upper bound must be at least 1",
                )  # fmt: skip
        elif kind == TimeBoundKind.GT:
            low = low + 1
    elif kind == TimeBoundKind.LT and high <= 0:
        raise ModelCheckingError("the time bound <0 is empty", bound.span)
    return low, high
