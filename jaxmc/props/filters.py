"""PRISM's filters: reduce a formula's values over a set of states to one
value (`min`, `max`, `sum`, `avg`, `count`, `forall`, `exists`, `first`,
`state`, `range`), or keep a vector (`argmin`, `argmax`, `print`,
`printall`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ModelCheckingError, UnsupportedError
from ..lang import ast


def reduce_filter(f: ast.Filter, values: np.ndarray, states: np.ndarray) -> Any:
    """Apply filter `f` to `values` (one per state) over the mask `states`
    (not empty)."""
    sel = values[states]
    op = f.op
    numeric = values.dtype != np.bool_
    if op in ("min", "max", "argmin", "argmax", "sum", "avg", "range") and not numeric:
        raise ModelCheckingError(f"filter `{op}` needs a numerical property", f.span)
    if op in ("forall", "exists") and numeric:
        raise ModelCheckingError(f"filter `{op}` needs a boolean property", f.span)
    if op == "min":
        return sel.min().item()
    if op == "max":
        return sel.max().item()
    if op in ("argmin", "argmax"):
        target = sel.min() if op == "argmin" else sel.max()
        return states & (values == target)
    if op == "count":
        return int(np.count_nonzero(sel))
    if op == "sum":
        return sel.sum().item()
    if op == "avg":
        return (sel.sum() / sel.size).item()
    if op == "first":
        return values[np.flatnonzero(states)[0]].item()
    if op == "range":
        return (sel.min().item(), sel.max().item())
    if op == "forall":
        return bool(sel.all())
    if op == "exists":
        return bool(sel.any())
    if op == "state":
        idx = np.flatnonzero(states)
        if idx.size != 1:
            raise ModelCheckingError(
                f"filter `state` needs exactly one state, the filter selects "
                f"{idx.size}",
                (f.states or f).span,
            )
        return values[idx[0]].item()
    if op in ("print", "printall"):
        return values
    raise UnsupportedError(f"filter operator `{op}`", f.span)


#: The filters whose result is a vector that PRISM prints.
PRINTING = ("print", "printall", "argmin", "argmax")


@dataclass(frozen=True)
class FilterOutput:
    """What PRISM prints for a top-level `filter(op, operand, states)` with
    `op` in `PRINTING` (`CheckResult.printed`).

    - `op`: the filter's operator; `filter`: its states formula (None: all
      states); `count`: how many states satisfy it.
    - `states`: the states listed, increasing indices of the model: for
      `print` the filter's states where the operand is non-zero (true), for
      `printall` all of them (the true ones for a Boolean operand), for
      `argmin`/`argmax` those where the operand takes its extreme value.
    - `values`: the operand's value in each of `states`.
    - `boolean`: whether the operand is Boolean; `extreme`: the minimum
      (argmin) or maximum (argmax) over the filter's states, else None.
    """

    op: str
    filter: ast.Expr | None
    count: int
    states: np.ndarray
    values: np.ndarray
    boolean: bool
    extreme: Any = None


def printout(f: ast.Filter, values: np.ndarray, states: np.ndarray) -> FilterOutput:
    """The `FilterOutput` of filter `f` with operand `values` over the mask
    `states`."""
    boolean = values.dtype == np.bool_
    extreme = None
    if f.op in ("argmin", "argmax"):
        sel = values[states]
        extreme = (sel.min() if f.op == "argmin" else sel.max()).item()
        shown = states & (values == extreme)
    elif f.op == "print" or boolean:
        shown = states & (values != 0)
    else:
        shown = states
    idx = np.flatnonzero(shown)
    return FilterOutput(
        f.op, f.states, int(np.count_nonzero(states)), idx, values[idx], boolean,
        extreme,
    )  # fmt: skip
