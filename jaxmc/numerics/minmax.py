"""MDP solves: topological value iteration (`method="value_iteration"`) and
topological interval iteration (`"interval_iteration"`, PRISM's `-ii`),
and the fallback from the first to the second.

Both solve the strongly connected components of the maybe states bottom
first (`jaxmc.solvers.topological_iteration`). Value iteration stops on
PRISM's change criterion, which bounds the change, not the error; interval
iteration keeps a lower and an upper bound and stops on their gap, so its
result carries a certified `bound`. When value iteration fails (a level
out of iterations, stalled, non-finite), `with_fallback` solves again by
interval iteration and records the failed attempt in the result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ..errors import ConvergenceError, UnsupportedError
from ..solvers import Status, convergence_error, topological_iteration
from .bounds import reward_upper_bound
from .result import Attempt, NumericResult, from_solution


#: The MDP methods `solve_minmax` runs.
TOPOLOGICAL = ("value_iteration", "interval_iteration")


def solve_minmax(host, data, bb, maybe, fixed, upper, opt, method, kw) -> NumericResult:
    """Solve the masked system (`jaxmc.numerics.fixed_point`'s `data`, `bb`:
    rows of states off `maybe` zero, their constants their fixed values) by
    topological value or interval iteration.

    `host`: `(state of each choice, row of each entry, column of each entry,
    row pointers)`. `upper`: the upper start on `maybe` (interval iteration).
    `kw`: `epsilon`, `relative`, `max_iters`, `throw`."""
    soc, _, cols, indptr = host
    sound = method == "interval_iteration"
    if sound and upper is None:
        raise UnsupportedError(
            "interval iteration needs an upper bound, which jaxmc only has "
            "for probabilities and expected rewards",
            hint="use method='value_iteration'",
        )
    up = np.where(maybe, upper, fixed) if sound else None
    sol, lo, hi, info = topological_iteration(
        soc,
        indptr,
        cols,
        data,
        bb,
        maybe,
        fixed,
        opt or "max",
        upper=up,
        bound=reward_upper_bound,
        **dict(kw, throw=False),
    )
    attempts = tuple(Attempt(**a) for a in info.pop("attempts", ()))
    extra = dict(info, layout="host+device" if info["device_levels"] else "host")
    res = replace(from_solution(sol, method, extra), attempts=attempts)
    if res.status != Status.CONVERGED and kw.get("throw", True):
        raise chain_error(res)
    if not sound:
        return res
    lo = np.asarray(lo, np.float64)
    hi = np.asarray(hi, np.float64)
    extra.update(lower=lo, upper=hi)
    return replace(res, bound=certified_bound(lo, hi), lower=lo, upper=hi)


def chain_error(res: NumericResult) -> ConvergenceError:
    """The error of a topological solve whose every method failed on some
    level: the last one's status, and the hand-overs before it."""
    name = "topological " + res.method.replace("_", " ")
    if res.status == Status.MAX_ITERS and not np.isfinite(res.residual):
        # (an upper bound that stayed infinite: no finite start for it)
        err = ConvergenceError(
            f"{name}: the upper bound stayed infinite after {res.iterations} "
            "iterations",
            hint="use method='value_iteration' (no certified bound)",
        )
    else:
        err = convergence_error(name, res.status, res.iterations, res.residual)
    if not res.attempts:
        return err
    before = "; ".join(a.describe() for a in res.attempts)
    return ConvergenceError(f"{err.message}; before it, {before}", hint=err.hint)


def certified_bound(lo: np.ndarray, hi: np.ndarray) -> float:
    """The largest distance from the midpoint to the bounds (where both
    are finite and differ)."""
    with np.errstate(invalid="ignore"):
        gap = np.where(lo == hi, 0.0, hi - lo)
    return float(np.max(gap, initial=0.0)) / 2


def with_fallback(
    run: Callable[[str, bool], NumericResult], method: str, throw: bool
) -> NumericResult:
    """`run(method, throw)`, and if value iteration does not converge, again
    by interval iteration, the failed attempt recorded in the result's
    `attempts` (when that fallback cannot run, e.g. no finite upper bound,
    the first failure stands)."""
    if method != "value_iteration":
        return run(method, throw)
    first = run(method, False)
    if first.status == Status.CONVERGED:
        return first
    attempt = Attempt(
        method=first.method,
        status=first.status,
        iterations=first.iterations,
        residual=first.residual,
        layout=(first.extra or {}).get("layout"),
        note="interval iteration took over",
    )
    try:
        second = run("interval_iteration", throw)
    except UnsupportedError:
        second = None
    except ConvergenceError as err:
        raise ConvergenceError(
            f"{err.message}; before it, {attempt.describe()}", hint=err.hint
        ) from err
    if second is None:
        if throw:
            run(method, True)  # raises the first failure
        return first
    return replace(second, attempts=(attempt,) + tuple(second.attempts))


def solve_with_fallback(fn, model, *args, options=None, **kw) -> NumericResult:
    """`fn(model, *args, options=..., **kw)`; on an MDP whose value
    iteration does not converge, again by interval iteration
    (`with_fallback`), the options' method and throw applied to each run."""
    from ..options import check_options
    from .methods import check_type, default_method

    options = check_options(options)
    if not model.is_nondeterministic:
        return fn(model, *args, options=options, **kw)
    check_type(model, kw.get("opt"))
    method = default_method(model, options.method, options.criterion)

    def run(method, throw):
        o = replace(options, method=method, throw=throw)
        return fn(model, *args, options=o, **kw)

    return with_fallback(run, method, options.throw)
