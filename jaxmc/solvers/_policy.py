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
`L <= x*` and `B(U) <= U` gives `U >= x*`. Anything that fails (a singular
system, a check not met) leaves the iteration as it was.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import splu


#: Rounds of policy improvement before giving up.
MAX_ROUNDS = 100


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


def policy_values(A, e, starts, opt, sigma):
    """Policy iteration from `sigma` (a choice per state): the optimal
    values and policy, or None (a singular system, non-finite values, no
    convergence)."""
    k, n = A.shape
    eye = sp.identity(n, format="csc")
    for _ in range(MAX_ROUNDS):
        try:
            V = splu((eye - A[sigma]).tocsc()).solve(e[sigma])
        except RuntimeError:  # exactly singular: a policy that never leaves
            return None
        if not np.all(np.isfinite(V)):
            return None
        q = e + A @ V
        cur = q[sigma]
        new = greedy(q, starts, opt, k)
        tol = 1e-12 * np.maximum(np.abs(cur), 1.0)
        better = (q[new] > cur + tol) if opt == "max" else (q[new] < cur - tol)
        if not better.any():
            return V, sigma
        sigma = np.where(better, new, sigma)
    return None


def certify(A, e_lo, e_up, starts, opt, Y, target, relative, gaps):
    """Bounds `[L, U]` on the level's solution, checked by one Bellman step
    each, with a gap (`gaps(L, U, relative)`) at most `target`; or None.

    `e_lo`, `e_up`: the constants of the lower and the upper system (the
    exits at their lower and upper bounds); `Y`: the current iterates
    (their greedy policies start the policy iteration)."""
    k, n = A.shape
    disabled = ~np.isfinite(e_lo) | ~np.isfinite(e_up)
    ones = np.where(disabled, -np.inf, 1.0)
    sigma = greedy(ones + A @ np.ones(n), starts, "max", k)
    hr = policy_values(A, ones, starts, "max", sigma)
    if hr is None:
        return None
    h = hr[0]
    out = []
    for j, e in enumerate((e_lo, e_up)):
        r = policy_values(A, e, starts, opt, greedy(e + A @ Y[:, j], starts, opt, k))
        if r is None:
            return None
        out.append(r[0])
    V_lo, V_up = out
    scale = np.maximum(np.abs(V_lo), np.abs(V_up)) if relative else np.ones(n)
    scale = np.where(scale > 0, scale, 1.0)
    d = 0.1 * target * float(np.min(scale / h))
    L = V_lo - d * h
    U = V_up + d * h
    with np.errstate(invalid="ignore"):
        ok_lo = np.all(_reduce(e_lo + A @ L, starts, opt) >= L)
        ok_up = np.all(_reduce(e_up + A @ U, starts, opt) <= U)
    if not (ok_lo and ok_up):
        return None
    if np.all(np.where(disabled, 0.0, e_lo) >= 0):
        L = np.maximum(L, 0.0)  # (the solution is nonnegative)
    if float(gaps(L, U, relative).max(initial=0.0)) > target:
        return None
    return np.stack([L, U], axis=1)
