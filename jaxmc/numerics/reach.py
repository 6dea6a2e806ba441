"""Unbounded reachability: `P(φ U ψ)` (and so `F ψ`) for DTMCs, CTMCs (on the
embedded DTMC) and MDPs (min/max), precomputing the 0/1 states first so the
numerical solve runs on the "maybe" states only and the result is exactly 0
and 1 on the precomputed sets."""

from __future__ import annotations

import numpy as np

from ..explore.model import ExplicitModel
from ..options import SolveOptions, check_options
from . import graph
from .device import DeviceModel, device_model_for
from .fixed_point import solve_fixed
from .methods import check_type, default_method
from .minmax import solve_with_fallback
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


def until_probabilities(model: ExplicitModel, phi, psi, **kw) -> NumericResult:
    """Per-state `P(φ U ψ)` (`Pmin`/`Pmax` for MDPs); the arguments are
    `_until_probabilities`'s. On an MDP, value iteration that does not
    converge hands over to interval iteration (`jaxmc.numerics.minmax`)."""
    return solve_with_fallback(_until_probabilities, model, phi, psi, **kw)


def _until_probabilities(
    model: ExplicitModel,
    phi,
    psi,
    *,
    opt: str | None = None,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
    precompute: bool = True,
) -> NumericResult:
    """Per-state `P(φ U ψ)` (`Pmin`/`Pmax` for MDPs), one method.

    **Arguments:**
    - `model`: a DTMC, CTMC (uses the embedded DTMC) or MDP.
    - `phi`, `psi`: bool [n] masks.
    - `opt`: `"min"`/`"max"` (required for MDPs; ignored otherwise).
    - `options`: a `jaxmc.SolveOptions` (default: PRISM's): `method`
      (`"jacobi"`, `"gauss_seidel"`, `"power"`, `"bicgstab"`,
      `"value_iteration"` (default for MDPs), `"interval_iteration"` (on
      MDPs both topological: `jaxmc.numerics.minmax`); for
      DTMC/CTMC the default `None` picks Gauss-Seidel in topological order
      or Jacobi by the system's components, `methods.AUTO`), PRISM's
      termination criterion (`epsilon`, `relative`, `max_iters`), `throw`
      (raise `ConvergenceError` on non-convergence) and `precision`.
    - `device_model`: `model`'s `DeviceModel` (made from `options` if not
      given), whose layout the solve runs on.
    - `precompute`: use prob1 too (prob0 is always used: it makes the
      linear system nonsingular).

    For `interval_iteration` on an MDP with `max`, the maximal end components
    among the maybe states are collapsed first (Haddad & Monmege), so that the
    iteration from above converges to the right value.
    """
    check_type(model, opt)
    options = check_options(options)
    device_model = device_model_for(model, options, device_model)
    method = default_method(model, options.method, options.criterion)
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
    kw = dict(opt=opt, method=method, options=options, device_model=device_model)
    upper = np.ones(n)
    if method == "interval_iteration" and model.is_nondeterministic and opt == "max":
        with stage("precompute"):
            labels, count, inside = graph.mecs(model, states=maybe)
            if count:
                M, rep, keep, _, qprobs = quotient(
                    model, probs, labels, count, inside, device_model.kind
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
    # (prob0 took every state of probability 0 out of `maybe`)
    res = solve_fixed(model, probs, maybe, fixed, b, upper=upper, positive=True, **kw)
    res.extra.update(no=no, yes=yes)
    return res
