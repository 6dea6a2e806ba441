"""CTL path quantifiers `E [ψ]` and `A [ψ]` (without time bounds, as in
PRISM): a `Ctl` plan node (E/A of X, U, G, W) on the graph algorithms of
`jaxmc.numerics.ctl`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import numerics
from ..explore.model import ExplicitModel
from ..lang.ast import TemporalOp
from .plan import Ctl


def path_quantifier(
    q: Ctl, m: ExplicitModel, mask: Callable[[Any], np.ndarray]
) -> np.ndarray:
    """The states satisfying the CTL formula `q` on `m`; `mask` evaluates the
    plan's state formulas."""
    exists, op = q.exists, q.op
    right = mask(q.right)
    if op == TemporalOp.NEXT:
        return (numerics.exists_next if exists else numerics.forall_next)(m, right)
    if op == TemporalOp.GLOBALLY:
        fn = numerics.exists_globally if exists else numerics.forall_globally
        return fn(m, right)
    left = mask(q.left)
    if op == TemporalOp.UNTIL:
        fn = numerics.exists_until if exists else numerics.forall_until
        return fn(m, left, right)
    # φ W ψ = (φ U ψ) ∨ G φ
    if exists:
        return numerics.exists_until(m, left, right) | numerics.exists_globally(m, left)
    # A [φ W ψ] = ¬E [¬ψ U (¬φ ∧ ¬ψ)]
    return ~numerics.exists_until(m, ~right, ~left & ~right)
