"""CTL path quantifiers `E [ψ]` and `A [ψ]` (without time bounds, as in
PRISM), reduced to the graph algorithms of `jaxmc.numerics.ctl`."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import numerics
from ..errors import UnsupportedError
from ..explore.model import ExplicitModel
from ..lang import ast
from ..lang.ast import TemporalOp


def path_quantifier(
    q: ast.PathQuantifier, m: ExplicitModel, bool_of: Callable[[ast.Expr], np.ndarray]
) -> np.ndarray:
    """The states satisfying CTL `E [path]` / `A [path]` on `m`, reduced to
    E X, E U, E G, A X, A U, A G by the usual dualities (`jaxmc.numerics.ctl`);
    `bool_of` evaluates the state sub-formulas."""
    path = q.path
    exists = q.quantifier == ast.Quantifier.EXISTS
    if not isinstance(path, ast.Temporal):
        return bool_of(path)
    if path.bound is not None:
        raise UnsupportedError(
            "time-bounded path formulas under E [...] / A [...] are not "
            "supported (as in PRISM)",
            path.bound.span or path.span,
        )
    op = path.op
    true = np.ones(m.num_states, dtype=bool)
    right = bool_of(path.right)
    left = bool_of(path.left) if path.left is not None else true
    if op == TemporalOp.NEXT:
        return (numerics.exists_next if exists else numerics.forall_next)(m, right)
    if op == TemporalOp.EVENTUALLY:
        left = true
    if op in (TemporalOp.EVENTUALLY, TemporalOp.UNTIL):
        fn = numerics.exists_until if exists else numerics.forall_until
        return fn(m, left, right)
    if op == TemporalOp.GLOBALLY:
        fn = numerics.exists_globally if exists else numerics.forall_globally
        return fn(m, right)
    # φ W ψ = (φ U ψ) ∨ G φ, and φ R ψ = ψ W (φ ∧ ψ).
    if op == TemporalOp.RELEASE:
        left, right = right, left & right
    if exists:
        return numerics.exists_until(m, left, right) | numerics.exists_globally(m, left)
    # A [φ W ψ] = ¬E [¬ψ U (¬φ ∧ ¬ψ)]
    return ~numerics.exists_until(m, ~right, ~left & ~right)
