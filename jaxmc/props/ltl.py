"""The LTL plan nodes (`LtlPath`, `LtlExists`, `CosafeReward`) run on
`jaxmc.automata`'s products. The product is a model of its own, so its
solves get the options but not the device model of the checked one.
`probabilities` and `rewards` return the product with its solve
(`automata.product.Solved`: `.result()` the model's values), which the
optimal finite-memory scheduler is made from (`jaxmc.props.strategy`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..automata.formula import negate
from ..automata.product import Solved, cosafe_solve, ltl_exists, ltl_solve
from ..explore.model import ExplicitModel
from ..options import SolveOptions
from . import plan as P


def masks(node, mask: Callable, n: int) -> np.ndarray:
    """The propositions of an LTL node as bool [k, n]."""
    out = [mask(p) for p in node.props]
    return np.stack(out) if out else np.zeros((0, n), dtype=bool)


def probabilities(
    model: ExplicitModel, node: P.LtlPath, mask: Callable, options: SolveOptions
) -> Solved:
    props = masks(node, mask, model.num_states)
    return ltl_solve(model, node.formula, props, node.opt, options=options)


def exists(model: ExplicitModel, node: P.LtlExists, mask: Callable) -> np.ndarray:
    """`E [ψ]`, or `A [ψ] = ¬E [¬ψ]` (graph only, no numerics)."""
    f = node.formula if node.exists else negate(node.formula)
    found = ltl_exists(model, f, masks(node, mask, model.num_states))
    return found if node.exists else ~found


def rewards(
    model: ExplicitModel, node: P.CosafeReward, mask: Callable, options: SolveOptions
) -> Solved:
    props = masks(node, mask, model.num_states)
    return cosafe_solve(
        model, node.reward, node.formula, props, node.opt, options=options
    )
