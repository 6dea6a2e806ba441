"""`solve_fixed`, the one engine behind unbounded reachability,
reachability/total rewards and BSCC absorption:

    x_s = opt_{c in s} (b_c + sum_t P(c, t) x_t)   for s in `maybe`,
    x_s = fixed_s                                  otherwise.

Rows of non-`maybe` states are masked by *values* (never by shape), so the
compiled solver is reused for every property on a model.

The system's matrix is on the layout of the model's `DeviceModel`
(`jaxmc.numerics.device`), in the precision `SolveOptions.precision` names
(`jaxmc.numerics.precision`); the method is `method=` or the automatic
choice (`jaxmc.numerics.methods`).
"""

from __future__ import annotations

from dataclasses import replace

import jax.numpy as jnp
import numpy as np

from ..errors import UnsupportedError
from ..explore.model import ExplicitModel
from ..layout import SparseModel, host_array
from ..options import SolveOptions
from ..solvers import (
    bicgstab,
    gauss_seidel,
    interval_iteration,
    jacobi,
    power,
    value_iteration,
)
from .device import DeviceModel, note_layout
from .host_system import host_system
from .matrices import (
    host_structure,
    layout_name,
    square_matrix,
    undo_order,
    valued,
)
from .methods import AUTO, host_matrix
from .minmax import TOPOLOGICAL, solve_minmax
from .precision import to_precision
from .result import NumericResult, from_solution
from .sound import solve_sound
from .timing import stage


def solve_fixed(
    model: ExplicitModel,
    probs: np.ndarray,
    maybe: np.ndarray,
    fixed: np.ndarray,
    b: np.ndarray,
    *,
    opt: str | None,
    method: str,
    options: SolveOptions,
    device_model: DeviceModel,
    upper: np.ndarray | None = None,
    M: SparseModel | None = None,
    positive: bool = False,
) -> NumericResult:
    """Solve `x = opt(b + P x)` on `maybe`, `x = fixed` elsewhere.

    `probs` are the entry probabilities of `model` (or of `M` if given), `b`
    the per-choice constants (±inf disables a choice of an MDP). `upper` is an
    upper bound on the solution for interval iteration (which also needs the
    maybe states free of end components; see `jaxmc.numerics.reach`).
    `options`: the criterion (resolved: `epsilon`, `max_iters` set; `criterion`:
    "change" stops the linear methods on PRISM's criterion, "sound"
    certifies DTMC/CTMC solves, `jaxmc.numerics.sound`: `bound`, `lower`,
    `upper` filled; MDP methods are as `method` says, interval iteration
    being sound), `throw` and the precision, the float type of the matrix
    and the iterate during the solve (`jaxmc.numerics.precision`; the values
    come back as float64). `device_model`: `model`'s device matrix, whose
    layout the SpMV runs on (`M`, if given, must have been built for the
    same layout). `positive`: every unknown's value is known to be positive
    (the caller's prob0 took the zeros out), so the certified solve skips its
    search for unknowns that are exactly 0 (`sound._zero_valued`).
    """
    epsilon, relative = options.epsilon, options.relative
    max_iters, throw = options.max_iters, options.throw
    precision, layout = options.precision, device_model.requested
    criterion = options.criterion
    if precision == "fp32" and method == "bicgstab":
        # In float32 BiCGStab can stop "converged" by its recursive residual
        # at a value of the wrong sign (brp, `benchmarks/RESULTS.md`): the
        # recursive residual drifts from the true one.
        raise UnsupportedError(
            "BiCGStab is not reliable in fp32: its recursive residual drifts "
            "from the true residual and it can stop at a wrong value",
            hint="use method='jacobi' or 'power' with fp32, or precision fp64",
        )
    kind = device_model.kind
    system = None
    if M is None and criterion == "sound" and not model.is_nondeterministic:
        # (the model's own system: what depends on the model alone is kept)
        system = host_system(model)
        if probs is not system.probs:
            system = None
    host = host_structure(model, M) if system is None else system.host
    if M is None:
        M = device_model.sparse()
    maybe = np.asarray(maybe, dtype=bool)
    fixed = np.where(maybe, 0.0, np.asarray(fixed, dtype=np.float64))
    if not maybe.any():
        return NumericResult(  # (nothing to solve: exact)
            values=fixed.copy(),
            method="jacobi" if method == AUTO else method,
            bound=0.0,
        )
    rank = None
    if kind == "dia":
        if M.nondeterministic or M.n_states != model.num_states:
            kind = "compact"  # (choices are not states: no square system)
        else:
            rank = device_model.lex_rank()
    with stage("solve"):
        kw = dict(epsilon=epsilon, relative=relative, max_iters=max_iters, throw=throw)
        out = _solve_masked(
            M,
            kind,
            host,
            probs,
            maybe,
            fixed,
            b,
            upper,
            opt,
            method,
            kw,
            precision,
            auto_ok=layout == "auto" and precision == "fp64",
            rank=rank,
            criterion=criterion,
            positive=positive,
            system=system,
        )
    return note_layout(out, device_model)


def _solve_masked(
    M,
    kind,
    host,
    probs,
    maybe,
    fixed,
    b,
    upper,
    opt,
    method,
    kw,
    precision="fp64",
    auto_ok=False,
    rank=None,
    criterion="change",
    positive=False,
    system=None,
):
    soc, rows, cols, indptr = host
    n = M.n_states
    state_row = soc[rows] if system is None else system.state_row
    # (with the model's system the sound solve makes them where it needs
    # them: on the device for its Krylov solves)
    data = np.where(maybe[state_row], probs, 0.0) if system is None else None
    bb = np.where(maybe[soc], b, fixed[soc])
    x0 = fixed
    extra = {"precision": precision}
    # `vec` puts a host vector on the device and `mat` a device matrix in
    # `precision` (for fp64: `jnp.asarray` and the matrix as it is).
    if precision == "fp64":
        vec, mat = jnp.asarray, (lambda A: A)
    else:

        def vec(v):
            return jnp.asarray(v, jnp.float32)

        def mat(A):
            return to_precision(A, precision)

    if (
        criterion == "sound"
        and not M.nondeterministic
        and method != "interval_iteration"
    ):
        return solve_sound(
            M, kind, host, probs, data, maybe, fixed, bb, method,
            dict(kw, precision=precision, positive=positive), vec, mat, rank,
            auto_ok, system,
        )  # fmt: skip
    if data is None:
        data = np.where(maybe[state_row], probs, 0.0)
    if method == "gauss_seidel":
        sol = gauss_seidel(host_matrix(n, data, state_row, cols), bb, x0, **kw)
        extra.update(layout="host", precision="fp64")  # a host solve, in float64
    if M.nondeterministic and method in TOPOLOGICAL and auto_ok:
        # MDPs: component by component on the host, large components on the
        # device (`jaxmc.numerics.minmax`), in float64; a layout or precision
        # asked for explicitly keeps the whole-system device iteration below
        res = solve_minmax(host, data, bb, maybe, fixed, upper, opt, method, kw)
        res.extra.update(precision="fp64")
        return res
    if method == "gauss_seidel":
        pass  # solved above
    elif method in ("jacobi", "power", "bicgstab"):
        # (in the layout's numbering: `at` for every vector in, `undo_order`
        # on the result; the identity but for "dia")
        if method == "jacobi":
            on_diag = cols == state_row
            diag = 1.0 - np.bincount(rows[on_diag], weights=data[on_diag], minlength=n)
            off = np.where(on_diag, 0.0, data)
            A, order = square_matrix(M, kind, off, indptr, cols, rank)
        else:
            diag = np.ones(n)
            A, order = square_matrix(M, kind, data, indptr, cols, rank)
        at = (lambda v: v) if order is None else order.apply
        A = mat(A)
        if method == "jacobi":
            sol = jacobi(A, vec(at(diag)), vec(at(bb)), vec(at(x0)), **kw)
        elif method == "power":
            sol = power(A, vec(at(bb)), vec(at(x0)), **kw)
        else:
            sol = bicgstab(A, vec(diag), vec(at(bb)), vec(at(x0)), **kw)
        sol = undo_order(sol, order)
    elif method == "value_iteration":
        A = mat(valued(M, kind, data, indptr, cols))
        sol = value_iteration(A, vec(bb), vec(x0), opt or "max", **kw)
    elif method == "interval_iteration":
        if upper is None:
            raise UnsupportedError(
                "interval iteration needs an upper bound, which jaxmc only has "
                "for probabilities",
                hint="use method='value_iteration'",
            )
        A = mat(valued(M, kind, data, indptr, cols))
        up = np.where(maybe, upper, fixed)
        sol, lo, hi = interval_iteration(
            A, vec(bb), vec(x0), vec(up), opt or "max", **kw
        )
        lo, hi = host_array(lo, np.float64), host_array(hi, np.float64)
        extra["layout"] = layout_name(A)
        res = from_solution(sol, method, extra)
        with np.errstate(invalid="ignore"):  # inf - inf where both are inf
            half = np.where(lo == hi, 0.0, 0.5 * (hi - lo))
        bound = float(np.max(half, initial=0.0))
        return replace(res, lower=lo, upper=hi, bound=bound)
    else:  # pragma: no cover - validated by default_method
        raise ValueError(method)
    if "layout" not in extra:
        extra["layout"] = layout_name(A)
    return from_solution(sol, method, extra)
