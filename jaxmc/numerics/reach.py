"""Unbounded reachability: `P(φ U ψ)` (and so `F ψ`) for DTMCs, CTMCs (on the
embedded DTMC) and MDPs (min/max), precomputing the 0/1 states first so the
numerical solve runs on the "maybe" states only and the result is exactly 0
and 1 on the precomputed sets."""

from __future__ import annotations

import numpy as np

from ..explore.model import ExplicitModel
from . import graph
from .fixed_point import solve_fixed
from .methods import check_type, default_method
from .precision import check_precision
from .quotient import expand_result, quotient
from .result import NumericResult
from .timing import stage
from .transitions import probabilities


def prob01_sets(model: ExplicitModel, phi, psi, opt):
    """`(no, yes)`: states with probability exactly 0 and 1 (for `opt`)."""
    if not model.is_nondeterministic:
        return graph.prob01(model, phi, psi)
    if opt == "max":
        return graph.prob01_max(model, phi, psi)
    return graph.prob01_min(model, phi, psi)


def until_probabilities(
    model: ExplicitModel,
    phi,
    psi,
    *,
    opt: str | None = None,
    method: str | None = None,
    epsilon: float = 1e-6,
    relative: bool = True,
    max_iters: int = 10000,
    throw: bool = True,
    precompute: bool = True,
    layout: str = "auto",
    precision: str = "fp64",
    criterion: str = "sound",
) -> NumericResult:
    """Per-state `P(φ U ψ)` (`Pmin`/`Pmax` for MDPs).

    **Arguments:**
    - `model`: a DTMC, CTMC (uses the embedded DTMC) or MDP.
    - `phi`, `psi`: bool [n] masks.
    - `opt`: `"min"`/`"max"` (required for MDPs; ignored otherwise).
    - `method`: `"jacobi"`, `"gauss_seidel"`, `"power"`, `"bicgstab"`,
      `"value_iteration"` (default for MDPs), `"interval_iteration"`; for
      DTMC/CTMC the default `None` picks Gauss-Seidel in topological order
      or Jacobi by the system's components (`methods.AUTO`).
    - `epsilon`, `relative`, `max_iters`: PRISM's termination criterion.
    - `throw`: raise `ConvergenceError` on non-convergence.
    - `precompute`: use prob1 too (prob0 is always used: it makes the
      linear system nonsingular).
    - `layout`: the device matrix of the solve (`jaxmc.numerics.LAYOUTS`).
    - `precision`: `"fp64"` or `"fp32"`, the float type of the iterative
      solve (`jaxmc.numerics.PRECISIONS`; fp32 needs `epsilon >= 1e-6`).
    - `criterion`: `"sound"` (certified bounds within `epsilon`: the
      result's `bound`, `lower`, `upper`) or `"change"` (PRISM's criterion
      and default methods; `jaxmc.numerics.methods.CRITERIA`).

    For `interval_iteration` on an MDP with `max`, the maximal end components
    among the maybe states are collapsed first (Haddad & Monmege), so that the
    iteration from above converges to the right value.
    """
    check_type(model, opt)
    check_precision(precision, epsilon)
    method = default_method(model, method, criterion)
    n = model.num_states
    phi = np.asarray(phi, dtype=bool)
    psi = np.asarray(psi, dtype=bool)
    with stage("precompute"):
        if precompute:
            no, yes = prob01_sets(model, phi, psi, opt)
        else:
            prob0 = graph.prob0E if opt == "min" else graph.prob0
            no = prob0(model, phi, psi)
            yes = psi.copy()
    maybe = ~no & ~yes
    fixed = yes.astype(np.float64)
    probs = probabilities(model)
    b = np.zeros(model.num_choices)
    kw = dict(
        opt=opt,
        method=method,
        epsilon=epsilon,
        relative=relative,
        max_iters=max_iters,
        throw=throw,
        layout=layout,
        precision=precision,
        criterion=criterion,
    )
    upper = np.ones(n)
    if method == "interval_iteration" and model.is_nondeterministic and opt == "max":
        with stage("precompute"):
            labels, count, inside = graph.mecs(model, states=maybe)
            if count:
                M, rep, keep, _, qprobs = quotient(
                    model, probs, labels, count, inside, layout
                )
        if count:
            n2 = M.n_states
            maybe2 = np.zeros(n2, dtype=bool)
            maybe2[rep[maybe]] = True
            fixed2 = np.zeros(n2)
            fixed2[rep[~maybe]] = fixed[~maybe]
            res = solve_fixed(
                model, qprobs, maybe2, fixed2, b[keep], upper=np.ones(n2), M=M, **kw
            )
            return expand_result(res, rep, no=no, yes=yes)
    res = solve_fixed(model, probs, maybe, fixed, b, upper=upper, **kw)
    res.extra.update(no=no, yes=yes)
    return res
