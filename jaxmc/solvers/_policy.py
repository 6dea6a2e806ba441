"""Certified bounds for one level of topological interval iteration by
policy iteration: where a component mixes slowly (value iteration needs
~10^5 sweeps, e.g. the consensus protocol's shared counter), solve it
exactly for a policy instead, improve the policy until it is optimal, and
turn the solution into bounds that one Bellman step certifies.

The level's system is `x_s = opt_{c in s} (e_c + (A x)_c)` with `A` the
probabilities inside the level and `e` the constants (exits folded in).
With no end components among the enabled choices (what interval iteration
needs anyway), every policy leaves the level almost surely, so each policy's
system `(I - A_sigma) x = e_sigma` is nonsingular (sparse LU).

Bounds from the optimal `V`: `L = V - d h`, `U = V + d h`, where `h` is the
largest expected number of steps spent in the level (`h = 1 + max_c (A
h)_c`, by policy iteration too). Then for every choice `c`,
`(A h)_c <= h - 1`, so one Bellman step moves `L` up and `U` down by at least
`d` minus rounding: `B(L) >= L` and `B(U) <= U`, checked numerically before
the bounds are used. With a unique fixed point, `B(L) >= L` gives
`L <= x*` and `B(U) <= U` gives `U >= x*`. That needs `V` optimal and
solved to well within `d`: policy iteration compares choices relative to
the values, and the policy solves are refined to the rounding level. Where
the values span orders of magnitude, `d` (set by the smallest values) is
below the rounding of the largest ones; then the shifts are per state, of
the size of the values (`_shifted`). Anything that fails (a singular
system, a check not met) leaves the iteration as it was.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import splu

from ..kernels.spmv import spmv
from ..layout import from_arrays
from ._linear import bicgstab_loop
from ._results import Status


#: Rounds of policy improvement before giving up.
MAX_ROUNDS = 100

#: Bellman steps between two policy solves (`policy_values`).
SWEEPS = 100

#: Policy systems of at most this many states are solved by sparse LU on
#: the host; larger ones by BiCGStab on the device (LU's fill-in grows
#: too fast on the large strongly connected components of e.g. a shared
#: counter).
LU_MAX_STATES = 1 << 17

#: Corrections tried after each policy solve (iterative refinement: the
#: residual is recomputed on the host in float64 and the correction solved
#: again) until the residual is at the rounding level (`ROUNDING` of the
#: terms of each row), far below the margin `certify` leaves for it. A
#: correction that fails (a Krylov breakdown) or does not shrink the
#: residual counts as tried; the next one restarts from another shadow
#: residual.
REFINE = 6

#: Rounding level, relative to a row's terms `|rhs| + |S| |x|`, at which
#: refinement stops, and the relative tolerance under which policy
#: iteration treats two choices as equally good (both far below the
#: relative margin `certify` needs: `target / (2 h)`).
ROUNDING = 1e-14
IMPROVE = 1e-13

#: BiCGStab's iteration limit and relative tolerance for one device solve
#: of a policy's system (the refinement rounds take the error further: a
#: tighter tolerance only makes the recursive residual drift).
KRYLOV_MAX_ITERS = 20000
KRYLOV_EPSILON = 1e-10


def _solve_lu(S):
    try:
        lu = splu(S.tocsc())
    except RuntimeError:  # exactly singular: a policy that never leaves
        return None
    return lambda r, x0=None, seed=0: lu.solve(r)


@eqx.filter_jit
def _krylov(A, diag, b, x0, rhat0, epsilon, max_iters):
    def op(x):
        return diag * x - spmv(A, x)

    tol = epsilon * jnp.max(jnp.abs(b), initial=0.0)
    return bicgstab_loop(
        op, b, x0, tol, max_iters, lambda r: jnp.max(jnp.abs(r), initial=0.0), rhat0
    )


def _solve_krylov(S):
    """A solver `(rhs, x0, seed) -> x` for `S x = rhs` (`S = I - A_sigma`)
    by BiCGStab on the device, `S`'s diagonal as the Jacobi
    preconditioner's `diag` and a random shadow residual drawn from `seed`
    (the residual itself, the default, is as sparse as a model's
    right-hand side and breaks down on it). Where BiCGStab breaks down
    (a zero inner product, a non-finite step), the iterate of the step
    before is returned: the refinement goes on from it."""
    S = S.tocsr()
    n = S.shape[0]
    diag = S.diagonal()
    if np.any(diag <= 0):
        return None
    off = (sp.diags(diag) - S).tocsr()  # the off-diagonal part, nonnegative
    off.eliminate_zeros()
    # zero entries padding the count to a power of two: one compilation
    # serves the policies of a level (their entry counts differ)
    nnz = off.nnz
    pad = (1 << max(nnz - 1, 1).bit_length()) - nnz
    indptr = off.indptr.astype(np.int64)
    indptr[-1] += pad
    M = from_arrays(
        np.arange(n + 1),
        indptr,
        np.concatenate([off.indices, np.zeros(pad, off.indices.dtype)]),
        np.concatenate([off.data, np.zeros(pad)]),
        nondeterministic=False,
    )
    d = jnp.asarray(diag)

    def run(b, x0, rhat0, iters):
        return _krylov(
            M.matrix, d, b, x0, rhat0, jnp.asarray(KRYLOV_EPSILON),
            jnp.asarray(iters, jnp.int32),
        )  # fmt: skip

    def solve(r, x0=None, seed=0):
        scale = float(np.max(np.abs(r), initial=0.0))
        if scale == 0:
            return np.zeros(n)
        ok = x0 is not None and np.all(np.isfinite(x0))
        b = jnp.asarray(r / scale)
        x0 = jnp.asarray(x0 / scale if ok else np.zeros(n))
        rhat0 = jnp.asarray(np.random.default_rng(seed).uniform(0.5, 1.5, n))
        sol = run(b, x0, rhat0, KRYLOV_MAX_ITERS)
        it = int(sol.iterations)
        if int(sol.status) in (Status.BREAKDOWN, Status.NONFINITE) and it > 1:
            # the same iteration, stopped one step before its failure
            sol = run(b, x0, rhat0, it - 1)
        # (whatever the status, a finite iterate counts: the refinement,
        # policy iteration and the final Bellman checks judge the values)
        x = np.asarray(sol.value, np.float64) * scale
        return x if np.all(np.isfinite(x)) else None

    return solve


def solve_policy(S, rhs, x0=None):
    """`S^-1 rhs` for a policy's system `S = I - A_sigma` (sparse LU, or
    BiCGStab on the device from the guess `x0` beyond `LU_MAX_STATES`
    states), refined (up to `REFINE` corrections) until the float64
    residual is at the rounding level (Krylov) or no longer shrinks (LU);
    None where the system is singular
    (LU) or nothing finite came out. Where the first Krylov solve fails,
    the corrections start from `x0` (or 0): each is a full solve from
    another shadow residual, so one breakdown does not end the solve."""
    n = S.shape[0]
    krylov = n > LU_MAX_STATES
    solve = (_solve_krylov if krylov else _solve_lu)(S)
    if solve is None:
        return None
    x = solve(rhs, x0)
    if x is None or not np.all(np.isfinite(x)):
        if not krylov:
            return None
        ok = x0 is not None and np.all(np.isfinite(x0))
        x = np.array(x0, np.float64) if ok else np.zeros(n)
    absS = abs(S)
    r = rhs - S @ x
    for seed in range(1, REFINE + 1):
        # (a correction from the same LU is cheap: those go on while the
        # residual shrinks, often to 0)
        floor = ROUNDING * (np.abs(rhs) + absS @ np.abs(x)) if krylov else 0.0
        if np.all(np.abs(r) <= floor):
            break
        dx = solve(r, None, seed)
        if dx is None or not np.all(np.isfinite(dx)):
            continue
        y = x + dx
        ry = rhs - S @ y
        if np.max(np.abs(ry), initial=0.0) < np.max(np.abs(r), initial=0.0):
            x, r = y, ry
        elif not krylov:
            break  # (the same LU again would give the same correction)
    return x if np.all(np.isfinite(x)) else None


def _reduce(v, starts, opt):
    fn = np.maximum if opt == "max" else np.minimum
    return fn.reduceat(v, starts)


def greedy(q, starts, opt, k):
    """The first choice of each group attaining the group's min/max of `q`."""
    n = len(starts)
    best = _reduce(q, starts, opt)
    group = np.repeat(np.arange(n), np.diff(np.append(starts, k)))
    idx = np.where(q == best[group], np.arange(k), k)
    return np.minimum.reduceat(idx, starts)


def policy_values(A, e, starts, opt, sigma, sweep=None):
    """Policy iteration from `sigma` (a choice per state): the optimal
    values and policy (optimal up to `IMPROVE` relative and the policy
    solves' residuals), or None (a singular system, non-finite values, no
    convergence).

    Modified policy iteration: between two solves, `SWEEPS` Bellman steps
    from the policy's values (monotone towards the optimum: from below for
    max, from above for min) pick the next policy, so an improvement
    travels through a slowly mixing component in one round instead of one
    state per round. `sweep(e, W, opt)`, if given, does those steps (on
    the device); else they run on the host."""
    k, n = A.shape
    eye = sp.identity(n, format="csr")
    W = prev = None
    for _ in range(MAX_ROUNDS):
        V = solve_policy((eye - A[sigma]).tocsr(), e[sigma], W)
        if V is None or not np.all(np.isfinite(V)):
            return None
        q = e + A @ V
        cur = q[sigma]
        new = greedy(q, starts, opt, k)
        # an improvement counts beyond the rounding of the choices' terms
        # and the policy solve's residual at the state (`cur - V`), both of
        # the size of the values: a tolerance in absolute terms keeps a
        # worse choice among small values, which `certify`'s check rejects
        with np.errstate(invalid="ignore"):
            mag = np.where(np.isfinite(e), np.abs(e), 0.0) + A @ np.abs(V)
        tol = IMPROVE * np.maximum(mag[sigma], mag[new]) + np.abs(cur - V)
        better = (q[new] > cur + tol) if opt == "max" else (q[new] < cur - tol)
        # (a round whose switches moved no value beyond that tolerance
        # switched between choices equal up to the solves' errors: done)
        gain = None if prev is None else (V - prev if opt == "max" else prev - V)
        if not better.any() or (gain is not None and not np.any(gain > tol)):
            return V, sigma
        prev = V
        W = _reduce(q, starts, opt)
        if sweep is not None:
            W = sweep(e, W, opt)
        else:
            for _ in range(SWEEPS):
                W = _reduce(e + A @ W, starts, opt)
        q = e + A @ W
        new = greedy(q, starts, opt, k)
        # (keep the current choice where it is as good: no cycling on ties)
        keep = q[sigma] >= q[new] if opt == "max" else q[sigma] <= q[new]
        sigma = np.where(keep, sigma, new)
    return None


def steps_bound(A, starts, disabled, sweep=None):
    """`h` with `1 + (A h)_c <= h_s` for every enabled choice `c` of every
    state `s` (checked): the largest expected number of steps in the level
    before leaving it, over all schedulers, by policy iteration; or None
    (a scheduler that never leaves: an end component)."""
    k, n = A.shape
    ones = np.where(disabled, -np.inf, 1.0)
    sigma = greedy(ones + A @ np.ones(n), starts, "max", k)
    hr = policy_values(A, ones, starts, "max", sigma, sweep)
    if hr is None:
        return None
    h = hr[0] * (1 + 1e-9)  # (a margin over the solve's rounding)
    if not np.all(_reduce(ones + A @ h, starts, "max") <= h):
        return None
    return h


def _shifted(A, e, starts, opt, V, sigma, eta, upper, sweep=None):
    """`V` moved up (`upper`) or down by a per-state `g >= 0` such that one
    Bellman step moves the result strictly inwards (by `eta`), or None.

    On the side where the bound must hold against every choice (the lower
    bound of a min, the upper bound of a max), `g` is the largest expected
    sum of `r_c = sgn (q_c - V_s) + eta_s` (`q = e + A V`, `sgn` the
    shift's sign) over all schedulers, by policy iteration: then `g_s >=
    r_c + (A g)_c` for every choice, and `q_c - sgn (A g)_c` is at least
    (upper: at most) `V_s - sgn g_s + sgn eta_s`. Choices far from optimal
    have `r_c` very negative, so `g` accumulates only the near-optimal
    choices' errors, of the size of the values where they are visited. On
    the other side one choice per state suffices: `sigma`'s, `g = (I -
    A_sigma)^-1 (max(sgn (q_sigma - V), 0) + eta)`."""
    k, n = A.shape
    sgn = 1.0 if upper else -1.0
    with np.errstate(invalid="ignore"):
        q = e + A @ V
    if (opt == "max") == upper:
        soc = np.repeat(np.arange(n), np.diff(np.append(starts, k)))
        with np.errstate(invalid="ignore"):
            r = sgn * (q - V[soc]) + eta[soc]
        r = np.where(np.isfinite(r), r, -np.inf)
        out = policy_values(A, r, starts, "max", sigma, sweep)
        g = None if out is None else out[0]
    else:
        rho = np.maximum(sgn * (q[sigma] - V), 0.0) + eta
        g = solve_policy((sp.identity(n, format="csr") - A[sigma]).tocsr(), rho)
    if g is None or not np.all(np.isfinite(g)):
        return None
    return V + sgn * np.maximum(g, 0.0)


def certify(A, e_lo, e_up, starts, opt, Y, target, relative, gaps, sweep=None):
    """Bounds `[L, U]` on the level's solution, checked by one Bellman step
    each, with a gap (`gaps(L, U, relative)`) at most `target`; or None.

    `e_lo`, `e_up`: the constants of the lower and the upper system (the
    exits at their lower and upper bounds); `Y`: the current iterates
    (their greedy policies start the policy iteration); `sweep`: as for
    `policy_values`.

    First a uniform shift `d h` (cheap: `h` is known); where the values
    span orders of magnitude that shift, set by the smallest values, is
    below the rounding of the largest ones (or the check fails), and
    per-state shifts (`_shifted`, of the size of the values) take over."""
    k, n = A.shape
    disabled = ~np.isfinite(e_lo) | ~np.isfinite(e_up)
    h = steps_bound(A, starts, disabled, sweep)
    if h is None:
        return None
    out = []
    for j, e in enumerate((e_lo, e_up)):
        if j and np.array_equal(e_lo, e_up):
            out.append(out[0])  # (exact exits: one system)
            break
        sigma = greedy(e + A @ Y[:, j], starts, opt, k)
        r = policy_values(A, e, starts, opt, sigma, sweep)
        if r is None:
            return None
        out.append(r)
    (V_lo, s_lo), (V_up, s_up) = out
    scale = np.maximum(np.abs(V_lo), np.abs(V_up)) if relative else np.ones(n)
    scale = np.where(scale > 0, scale, 1.0)
    # the largest shift that keeps the gap within `target`, with a margin
    # (the gap is measured relative to the midpoint, not to `scale`)
    slack = target * scale - np.abs(V_up - V_lo)
    d = 0.4 * float(np.min(slack / h))
    if not d > 0:
        return None
    nonneg = np.all(np.where(disabled, 0.0, e_lo) >= 0)  # (so is the solution)

    def bounds(L, U):
        C = _checked(A, e_lo, e_up, starts, opt, L, U)
        if C is None:
            return None, np.inf
        L = np.maximum(C[0], 0.0) if nonneg else C[0]
        return np.stack([L, U], axis=1), float(gaps(L, U, relative).max(initial=0.0))

    # (a shift below the rounding of the values proves nothing in floating
    # point, even where the check happens to hold)
    big = np.maximum(np.abs(V_lo), np.abs(V_up))
    C, gap = None, np.inf
    if np.all(d * h >= ROUNDING * big):
        C, gap = bounds(V_lo - d * h, V_up + d * h)
    if C is None:
        # per-state shifts; their size is proportional to `eta` (the
        # solves' errors are far smaller), so a gap too wide is scaled once
        eta = target / (8 * float(h.max())) * scale
        for _ in range(2):
            L = _shifted(A, e_lo, starts, opt, V_lo, s_lo, eta, False, sweep)
            U = None if L is None else (
                _shifted(A, e_up, starts, opt, V_up, s_up, eta, True, sweep)
            )  # fmt: skip
            if U is None:
                return None
            C, gap = bounds(L, U)
            if C is None or gap <= target:
                break
            eta = eta * (target / (2 * gap))
    return C if gap <= target else None


def _checked(A, e_lo, e_up, starts, opt, L, U):
    """`(L, U)` if one Bellman step moves neither outwards (`B(L) >= L`,
    `B(U) <= U`: with a unique fixed point, bounds on it), else None."""
    with np.errstate(invalid="ignore"):
        ok_lo = np.all(_reduce(e_lo + A @ L, starts, opt) >= L)
        ok_up = np.all(_reduce(e_up + A @ U, starts, opt) <= U)
    return (L, U) if ok_lo and ok_up else None
