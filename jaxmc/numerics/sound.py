"""Certified solves of DTMC/CTMC linear systems, the `criterion="sound"`
branch of `solve_fixed`: every value comes with per-state bounds that
contain the exact solution, and the loop stops on those bounds, never on
the change between iterates (PRISM's criterion, `criterion="change"`).

The system is `x = b + P x` on the `maybe` states, which leave `maybe`
almost surely (the 0/1 and infinite-reward precomputations make it so).

- By default (`AUTO`): where the graph is nearly acyclic, Gauss-Seidel in
  topological order on the host (a back-substitution on the acyclic part)
  and its result certified; otherwise BiCGStab on the device to a residual
  far below epsilon, certified by a second BiCGStab solve that bounds the
  expected number of steps (below), and where that certificate is not good
  enough, sound value iteration on the Jacobi splitting
  (`jaxmc.solvers.sound_value_iteration`, one fused device loop) from its
  iterate. Where BiCGStab fails (it breaks down on long nearly acyclic
  chains), Gauss-Seidel in topological order takes over on any backend if
  the graph is nearly acyclic.
- `jacobi` / `power` (`value_iteration`, the same on a DTMC): sound value
  iteration on that splitting (the method asked for, with a certified
  stopping rule).
- `gauss_seidel` / `bicgstab`: the method as asked (BiCGStab to the tight
  residual of `AUTO`), its result then certified.

A warm start `x` (from Gauss-Seidel or BiCGStab) is certified first from
its residual (`jaxmc.numerics.certificate`: on the host, or for a model's
own large system on an accelerator on the device, reading the model's
whole system kept with it, `jaxmc.numerics.host_system`): the error
`e = v - x` solves `e = r + P e` with `r = b + P x - x`, so
`|e| <= max|r| * T` where `T` bounds the expected number of steps to
leave `maybe`: the Baier et al. bound of `jaxmc.numerics.bounds` with
reward 1 per step, or, after a BiCGStab
solve, a super-solution `s >= 1 + P s` made from the solution `w` of
`(I - P) w = 1` (`certificate.steps_supersolution`: `s = alpha w`, the
inequality checked with a rounding allowance; then `T <= s` per state,
and the bound is per state too: `|e| <= max|r| s`); after Gauss-Seidel,
where the layered bound is too loose (it underflows on long chains), `w`
by Gauss-Seidel in the same order. Where the bound is
not good enough, sound value iteration runs from `x`.

If sound value iteration reaches `max_iters` on a system small enough,
a sparse direct solve (scipy's LU) takes over, certified the same way;
the attempt is recorded in `NumericResult.attempts`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import ModelCheckingError
from ..layout import host_array
from ..solvers import (
    Status,
    bicgstab,
    check_solution,
    gauss_seidel,
    sound_value_iteration,
    topological_order,
)
from .bounds import reward_upper_bound
from .certificate import (
    HostRows,
    certify_steps,
    residual_bounds,
    residual_max,
    within,
)
from .graph import backward_reach, exists_reach
from .matrices import HOST_BUILT, layout_name, square_matrix, undo_order
from .methods import AUTO, AUTO_GS_MAX_SWEEPS, auto_linear, host_matrix
from .result import Attempt, NumericResult


#: Systems of at most this many unknowns fall back to a sparse direct solve
#: when sound value iteration runs out of iterations.
DIRECT_MAX_STATES = 1 << 18

#: The certified Krylov solve: BiCGStab stops at a residual of `epsilon`
#: times `KRYLOV_TIGHT` (relative to max|b|; at least `KRYLOV_FLOOR`, near
#: float64's floor), far below epsilon so that the residual certificate
#: holds; each of its two solves gets at most `KRYLOV_MAX_ITERS` iterations
#: (within `max_iters`) before sound value iteration takes over.
KRYLOV_TIGHT = 1e-6
KRYLOV_FLOOR = 1e-14
KRYLOV_MAX_ITERS = 2000


def _steps_bound(soc, rows, cols, probs, maybe) -> float:
    """An upper bound on the expected number of steps to leave `maybe`
    (inf if the layered bound does not reach every state)."""
    n = len(maybe)
    try:
        with np.errstate(over="ignore", divide="ignore"):  # (inf: no bound)
            return reward_upper_bound(
                soc,
                rows,
                cols,
                probs,
                np.ones(len(soc)),
                maybe,
                np.zeros(n),
                None,
                give_up=True,
            )
    except ModelCheckingError:
        return float(np.inf)


def solve_sound(
    M, kind, host, probs, data, maybe, fixed, bb, method, kw, vec, mat, rank, auto_ok,
    system=None,
) -> NumericResult:  # fmt: skip
    """The certified solve of `x = bb + P x` on `maybe` (`fixed`
    elsewhere); arguments as `fixed_point._solve_masked` prepares them
    (`data`: the masked entry values, or None: made here where needed,
    `bb`: per-state constants; `system`: the model's
    `host_system.HostSystem` where `probs` are its probabilities, whose
    model-level data the host passes then use, and whose device values the
    device matrices take)."""
    soc, rows, cols, indptr = host
    kw = dict(kw)
    precision = kw.pop("precision", "fp64")
    positive = kw.pop("positive", False)  # (no unknown is 0: nothing to search)
    n = M.n_states
    state_row = soc[rows] if system is None else system.state_row
    built = {} if data is None else {"data": data}

    def values():
        """The masked entry values on the host, made once per solve."""
        if "data" not in built:
            built["data"] = np.where(maybe[state_row], probs, 0.0)
        return built["data"]

    def device_values(kind):
        """The masked entry values for a device matrix of layout `kind`:
        made on the device from the model's where there is a system and
        the layout takes its values there."""
        if system is not None and kind not in HOST_BUILT:
            return system.device_values(maybe)
        return values()

    zero = (
        np.zeros(n, dtype=bool)
        if positive
        else _zero_valued(n, values, state_row, cols, maybe, soc, bb, fixed, system)
    )
    if zero.any():
        # (exactly 0: no positive constant is reachable; as unknowns they
        # would leave the relative criterion no room)
        maybe = maybe & ~zero
        if "data" in built:
            built["data"] = np.where(maybe[state_row], built["data"], 0.0)
        if not maybe.any():
            name = "jacobi" if method == AUTO else method  # (as `solve_fixed`)
            return NumericResult(values=fixed.copy(), method=name, bound=0.0)

    def host_A():
        """The masked system's host matrix (`methods.host_matrix`), made
        once per solve (from the model's cached one where there is one)."""
        if "A" not in built:
            built["A"] = (
                host_matrix(n, values(), state_row, cols)
                if system is None
                else system.masked(maybe)
            )
        return built["A"]

    def cert_rows():
        """The rows the certificate reads (those of `maybe` are the masked
        system's; from the model's, kept with it, where there is a system),
        once per solve."""
        if "rows" not in built:
            built["rows"] = HostRows(host_A()) if system is None else system.rows(maybe)
        return built["rows"]

    attempts: list[Attempt] = []
    name = method
    warm = None
    pre_iters = 0
    A_host = None
    krylov = None
    gs_order = None  # the order of a Gauss-Seidel solve that converged
    if method == AUTO:
        # (with `system` it reads the entries' count only: no values made)
        entries = probs if system is not None else values()
        A_host, order = auto_linear(
            n, entries, state_row, cols, maybe, auto_ok, system=system
        )
        name = "sound_value_iteration"
        if A_host is None and precision == "fp64":
            krylov = _krylov(M, kind, device_values(kind), indptr, cols, maybe,
                             fixed, bb, kw, vec, mat, rank, attempts,
                             cert_rows)  # fmt: skip
            if krylov is not None:
                warm, pre_iters = krylov[0], krylov[1]
            if krylov is None or (attempts and attempts[-1].method == "bicgstab"):
                # BiCGStab failed (no finite iterate, stalled, out of
                # iterations; e.g. on long nearly acyclic chains, where it
                # breaks down): Gauss-Seidel in topological order where the
                # graph allows it, whatever the backend, before sound value
                # iteration (which needs as many sweeps as the chains are long).
                A_host, order = auto_linear(
                    n, entries, state_row, cols, maybe, auto_ok, fallback=True,
                    system=system,
                )  # fmt: skip
                if A_host is not None:
                    krylov = None
                    attempts[-1] = dataclasses.replace(
                        attempts[-1], note="Gauss-Seidel in topological order "
                        "took over (the graph is nearly acyclic)"
                    )  # fmt: skip
        if A_host is not None:
            budget = min(int(kw["max_iters"]), AUTO_GS_MAX_SWEEPS)
            sol = gauss_seidel(
                A_host,
                bb,
                fixed,
                order=order,
                **dict(kw, max_iters=budget, throw=False),
            )
            warm, pre_iters = np.asarray(sol.value), int(sol.iterations)
            if Status(int(sol.status)) == Status.CONVERGED:
                name = "gauss_seidel"  # (else it only gave the start)
                gs_order = order
    elif method in ("gauss_seidel", "bicgstab"):
        if method == "gauss_seidel":
            A_host = host_A()
            order = topological_order(A_host)
            sol = gauss_seidel(A_host, bb, fixed, order=order, **dict(kw, throw=False))
            status = Status(int(sol.status))
            warm, pre_iters = np.asarray(sol.value, np.float64), int(sol.iterations)
            if status == Status.CONVERGED:
                gs_order = order
            else:
                attempts.append(
                    Attempt(method, status, pre_iters, float(sol.residual),
                            note="its iterate is the start of sound value "
                            "iteration")
                )  # fmt: skip
                name = "sound_value_iteration"
        else:
            krylov = _krylov(M, kind, device_values(kind), indptr, cols, maybe,
                             fixed, bb, kw, vec, mat, rank, attempts,
                             cert_rows)  # fmt: skip
            name = "sound_value_iteration"
            if krylov is not None:
                warm, pre_iters = krylov[0], krylov[1]
    if warm is not None and not np.all(np.isfinite(warm)):
        warm = None
    extra = {"precision": precision, "criterion": "sound"}
    if krylov is not None and krylov[2] is not None and warm is not None:
        res = certify_steps(krylov[4], bb, warm, maybe, krylov[2], kw)
        if res is not None:
            extra.update(layout=krylov[3], certificate="residual")
            return _result(warm, *res, maybe, pre_iters, "bicgstab", extra, attempts)
        attempts.append(
            Attempt("bicgstab", Status.CONVERGED, pre_iters, 0.0, note="its residual "
                    "bound is above epsilon; its iterate is the start of sound "
                    "value iteration")
        )  # fmt: skip
    if warm is not None:
        res = _certify_host(
            A_host if A_host is not None else cert_rows(), bb, warm, maybe, host,
            probs, kw,
        )  # fmt: skip
        if res is None and gs_order is not None:
            # (the layered bound on the expected steps is loose on long
            # chains; Gauss-Seidel in the same order solves them too)
            w = _gs_steps(A_host, maybe, gs_order, kw)
            res = certify_steps(A_host, bb, warm, maybe, w, kw)
        if res is not None:
            lo, hi = res
            extra.update(layout="host", precision="fp64", certificate="residual")
            return _result(warm, lo, hi, maybe, pre_iters, name, extra, attempts)
    sol, lo, hi, A = _svi(M, kind, values(), indptr, cols, state_row, maybe, fixed, bb,
                          warm, method, kw, vec, mat, rank)  # fmt: skip
    status = Status(int(sol.status))
    if status == Status.MAX_ITERS and int(maybe.sum()) <= DIRECT_MAX_STATES:
        attempts.append(
            Attempt(name, status, int(sol.iterations), float(sol.residual),
                    layout_name(A), note="a sparse direct solve took over")
        )  # fmt: skip
        pre_iters += int(sol.iterations)
        A_host = host_A()
        x, w = _direct(A_host, bb, maybe, fixed)
        res = certify_steps(A_host, bb, x, maybe, w, kw)
        if res is None:
            res = _certify_host(A_host, bb, x, maybe, host, probs, kw)
        if res is not None:
            extra.update(layout="host", precision="fp64", certificate="residual")
            return _result(x, *res, maybe, pre_iters, "direct", extra, attempts)
        sol, lo, hi, A = _svi(M, kind, values(), indptr, cols, state_row, maybe, fixed,
                              bb, x, method, kw, vec, mat, rank)  # fmt: skip
        name = "direct"
    sol = check_solution(sol, kw["throw"], "Sound value iteration")
    extra.update(layout=layout_name(A), certificate="sound_value_iteration")
    out = _result(
        host_array(sol.value, np.float64), host_array(lo, np.float64),
        host_array(hi, np.float64), maybe, pre_iters + int(sol.iterations), name,
        extra, attempts,
    )  # fmt: skip
    return NumericResult(
        out.values, Status(int(sol.status)), out.iterations, float(sol.residual),
        out.method, out.extra, out.attempts, out.bound, out.lower, out.upper,
    )  # fmt: skip


def _krylov(M, kind, data, indptr, cols, maybe, fixed, bb, kw, vec, mat, rank,
            attempts, cert_rows):  # fmt: skip
    """BiCGStab on the device for `x` (`(I - P) x = bb`, to the tight
    residual) and, where its residual leaves room for a certificate, for
    `w` (`(I - P) w = 1` on `maybe`: the expected steps to leave it);
    `cert_rows()` gives the rows the certificate reads
    (`certificate.Rows`).
    `(x, iterations, w or None, layout, certificate rows)`, or None where the
    first solve gave no finite iterate; a solve that stops short is
    recorded in `attempts` (and `w` is then None)."""
    n = M.n_states
    A_dev, order = square_matrix(M, kind, data, indptr, cols, rank)
    at = (lambda v: v) if order is None else order.apply
    budget = min(int(kw["max_iters"]), KRYLOV_MAX_ITERS)
    tight = max(float(kw["epsilon"]) * KRYLOV_TIGHT, KRYLOV_FLOOR)
    A, ones, lay = mat(A_dev), vec(np.ones(n)), layout_name(A_dev)

    def solve(rhs, start, tol):
        sol = bicgstab(A, ones, vec(at(rhs)), vec(at(start)), epsilon=tol,
                       relative=True, max_iters=budget, throw=False)  # fmt: skip
        sol = undo_order(sol, order)
        return (host_array(sol.value, np.float64), int(sol.iterations),
                Status(int(sol.status)), float(sol.residual))  # fmt: skip

    x, iters, status, res = solve(bb, fixed, tight)
    if not np.all(np.isfinite(x)):
        attempts.append(Attempt("bicgstab", status, iters, res, note="no "
                                "finite iterate; sound value iteration"))  # fmt: skip
        return None
    x = np.where(maybe, x, fixed)  # (exact outside `maybe`)
    if status != Status.CONVERGED:
        attempts.append(Attempt("bicgstab", status, iters, res, note="its iterate "
                                "is the start of sound value iteration"))  # fmt: skip
        return x, iters, None, lay, None
    H = cert_rows()
    # (every state needs at least one step: where even that cannot meet
    # the criterion, the expected steps are not worth a solve)
    rho = residual_max(H, bb, x, maybe)
    room = float(kw["epsilon"]) * (np.abs(x[maybe]) if kw["relative"] else 1.0)
    if not np.all(rho <= room):
        return x, iters, None, lay, H
    w, w_iters, w_status, w_res = solve(maybe.astype(np.float64), np.zeros(n), 1e-8)
    iters += w_iters
    if w_status != Status.CONVERGED or not np.all(np.isfinite(w)):
        attempts.append(Attempt("bicgstab", w_status, w_iters, w_res, note="the "
                                "expected steps did not converge"))  # fmt: skip
        w = None
    return x, iters, w, lay, H


def _zero_valued(n, data, state_row, cols, maybe, soc, bb, fixed, system=None):
    """The unknowns whose value is exactly 0: no positive constant (`bb`,
    per choice) and no entry into a known positive value (`fixed`) is
    reachable from them through the unknowns (all False if a constant or
    a known value is negative or NaN). `data`: the masked values, or a
    function that makes them. With `system` (the model's
    `HostSystem`): the model's graph search (`graph.exists_reach`: on the
    device where the graph searches run there), no pass over the entries
    where the known values are all non-negative."""
    none = np.zeros(n, dtype=bool)
    if not (bb[maybe[soc]] >= 0).all():
        return none  # (negative or NaN: errors are raised downstream)
    if system is not None and (fixed[~maybe] >= 0).all():
        target = np.zeros(n, dtype=bool)
        target[soc[(bb > 0) & maybe[soc]]] = True
        if target[maybe].all():
            return none
        target |= ~maybe & (fixed > 0)
        return maybe & ~exists_reach(system.model, target, maybe)
    data = data() if callable(data) else data
    live = data != 0
    out = live & ~maybe[cols]
    if not (fixed[cols[out]] >= 0).all():
        return none
    src = np.zeros(n, dtype=bool)
    src[soc[(bb > 0) & maybe[soc]]] = True
    src[state_row[out & (fixed[cols] > 0)]] = True
    src &= maybe
    if src[maybe].all():
        return none
    inner = live & maybe[state_row] & maybe[cols]
    return maybe & ~backward_reach(n, state_row[inner], cols[inner], src)


def _gs_steps(A, maybe, order, kw):
    """The expected steps to leave `maybe` (`w = 1 + P w` there) by
    Gauss-Seidel in `order`, the candidate of `certify_steps`, or None if
    it does not converge within the budget of `AUTO`'s Gauss-Seidel."""
    budget = min(int(kw["max_iters"]), AUTO_GS_MAX_SWEEPS)
    one = maybe.astype(np.float64)
    sol = gauss_seidel(A, one, np.zeros_like(one), order=order, epsilon=1e-8,
                       relative=True, max_iters=budget, throw=False)  # fmt: skip
    if Status(int(sol.status)) != Status.CONVERGED:
        return None
    return np.asarray(sol.value, np.float64)


def _certify_host(A_host, bb, x, maybe, host, probs, kw):
    """Residual bounds on `x` if they meet the criterion, else None."""
    soc, rows, hcols, _ = host
    steps = _steps_bound(soc, rows, hcols, probs, maybe)
    res = residual_bounds(A_host, bb, x, maybe, steps)
    if res is None or not within(*res, maybe, kw["epsilon"], kw["relative"]):
        return None
    return res


def _direct(P, bb, maybe, fixed):
    """`x` by a sparse LU of the system on `maybe` (`P` its host matrix)
    and `w` (the expected steps to leave `maybe`, the certificate's
    candidate, or None) from the same factors."""
    import scipy.sparse as sp
    import scipy.sparse.linalg as spla

    n = len(maybe)
    idx = np.nonzero(maybe)[0]
    rhs = bb[idx] + P[idx][:, ~maybe] @ fixed[~maybe]
    S = sp.identity(len(idx), format="csc") - P[idx][:, idx].tocsc()
    x, w = fixed.copy(), np.zeros(n)
    try:
        lu = spla.splu(S)
    except RuntimeError:  # (exactly singular: no certificate from it)
        x[idx] = spla.spsolve(S, rhs)
        return x, None
    x[idx] = lu.solve(rhs)
    w[idx] = lu.solve(np.ones(len(idx)))
    return x, w


def _svi(M, kind, data, indptr, cols, state_row, maybe, fixed, bb, warm, method, kw,
         vec, mat, rank):  # fmt: skip
    """Sound value iteration on the Jacobi splitting (the power splitting
    for `method="power"`), from `warm` or from `fixed`."""
    n = M.n_states
    if method in ("power", "value_iteration"):  # (the same on a DTMC)
        diag = np.ones(n)
        A, order = square_matrix(M, kind, data, indptr, cols, rank)
    else:
        on_diag = cols == state_row
        diag = 1.0 - np.bincount(state_row[on_diag], weights=data[on_diag], minlength=n)
        off = np.where(on_diag, 0.0, data)
        A, order = square_matrix(M, kind, off, indptr, cols, rank)
    at = (lambda v: v) if order is None else order.apply
    x0 = fixed if warm is None else np.where(maybe, warm, fixed)
    nonneg = bool(np.all(bb >= 0) and np.all(fixed >= 0))
    sol, lo, hi = sound_value_iteration(
        mat(A), vec(at(1.0 / diag)), vec(at(bb)), vec(at(x0)), at(maybe),
        epsilon=kw["epsilon"], relative=kw["relative"], max_iters=kw["max_iters"],
        throw=False, nonneg=nonneg,
    )  # fmt: skip
    sol = undo_order(sol, order)
    if order is not None:
        lo, hi = order.undo(lo), order.undo(hi)
    return sol, lo, hi, A


def _result(x, lo, hi, maybe, iters, name, extra, attempts) -> NumericResult:
    with np.errstate(invalid="ignore"):  # inf - inf: an infinite reward, exact
        half = np.where(maybe & (lo != hi), 0.5 * (hi - lo), 0.0)
    return NumericResult(
        values=np.asarray(x, np.float64),
        iterations=iters,
        residual=0.0,
        method=name,
        extra=extra,
        attempts=tuple(attempts),
        bound=float(np.max(half, initial=0.0)),
        lower=np.asarray(lo, np.float64),
        upper=np.asarray(hi, np.float64),
    )
