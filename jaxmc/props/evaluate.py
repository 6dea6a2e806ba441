"""Evaluate the non-probabilistic parts of a property over all states at once.

Sub-formulas that need model checking (`P`, `R`, `S`, filters, labels) are
handed back to the caller through `operator`, so arithmetic on their results
works too: `ceil(Pmax=? [ F s=2 ]) + 1`, `P>0.5 [F a] & !"deadlock"`.

The arithmetic is the builder's (`jaxmc.explore.lower`), so it is PRISM's in
properties exactly as in the model: `/` is real division, `floor`/`ceil`/
`round` return ints, `mod` is non-negative, int `+ - * pow` are 32-bit with
located errors, and `| & => ? :` are lazy per state, as PRISM's model checker
does with its states of interest: `filter(forall, s=0 | pow(2, s-1) > 0)`
never evaluates `pow(2, -1)`. It is done on the host with numpy; the state
matrix of a built model is small next to its transition matrix.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import ModelCheckingError
from ..explore.lower import lower
from ..explore.model import ExplicitModel
from ..lang import ast
from ..numerics.transitions import cached


class _Columns:
    """The state variables' columns as int64, each made on first use and
    kept with the model (read-only): a property reads a few of the
    variables, and checking it again converts none."""

    def __init__(self, model: ExplicitModel):
        self.model = model

    def __getitem__(self, i: int) -> np.ndarray:
        states = self.model.states
        return cached(
            self.model,
            f"state_column_{i}",
            lambda: np.asarray(states[:, i], dtype=np.int64),
        )


def evaluate_plain(
    e: ast.Expr,
    model: ExplicitModel,
    operator: Callable[[ast.Expr], np.ndarray],
    active: np.ndarray | None = None,
) -> np.ndarray:
    """The value of `e` in each of the model's states (a vector of length n);
    evaluation errors count only in the `active` states (default: all), as with
    PRISM's states of interest (elsewhere the values are meaningless)."""
    n = model.num_states
    index = {v.name: i for i, v in enumerate(model.variables)}
    bools = frozenset(v.name for v in model.variables if v.is_bool)
    ranges = {v.name: (v.low, v.high) for v in model.variables if not v.is_bool}

    def opaque(x: ast.Expr) -> np.ndarray:
        if isinstance(x, ast.Ident):
            raise ModelCheckingError(f"unknown identifier `{x.name}`", x.span)
        if x is e:  # not an operator the caller knows either
            raise ModelCheckingError(
                f"`{type(x).__name__}` cannot be evaluated in a property", x.span
            )
        return np.broadcast_to(np.asarray(operator(x)), (n,))

    cols = _Columns(model)
    lowered = lower(
        e, index, bools=bools, ranges=ranges, error=ModelCheckingError, opaque=opaque
    )
    return lowered.on_columns(cols, n, active)
