"""Krylov solvers on the device (restarted GMRES, BiCGStab) for the linear
systems of steady-state analysis (`jaxmc.numerics.steady`, which says when
it uses which), with the SpMV on any `jaxmc.layout` matrix (the
warp-segment Pallas kernel on a GPU).

The systems are `(I - A) x = b` with `A` sparse, some rows optionally
replaced by a normalisation `sum_{s in group g} w_s x_s` (one per BSCC): those
rows are dense, so they are not stored in the layout but computed by a
reduction beside the SpMV (`Operator`).

Why Krylov methods and not the stationary iterations of `jaxmc.solvers`: on
slowly mixing chains a Jacobi or power iteration stopped by PRISM's
relative-step criterion can be orders of magnitude further from the
solution than epsilon (see `steady.py`), and it may need 10^5 steps or never
converge (cluster N=256). Both methods here report the true residual, a
bound on what is left, and nothing of size n leaves the device during a
solve. `jaxmc.solvers.bicgstab` cannot be used as is: its operator is
`diag x - A x`, with no room for the dense normalisation rows.

GMRES: Arnoldi by modified Gram-Schmidt, the least-squares problem by Givens
rotations (so the residual norm is known at every step and a cycle stops as
soon as it is small enough), and the true residual recomputed after every
cycle, which is what the convergence test uses. `iterations` counts the
Arnoldi steps (one SpMV each; plus one per cycle for the true residual).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Bool, Float, Int

from ..kernels.spmv import spmv
from ..solvers import (
    RUNNING,
    Solution,
    Status,
    bicgstab_l_loop,
    bicgstab_l_start,
    bicgstab_loop,
    check_solution,
)
from ..solvers.progress import report


class Operator(eqx.Module):
    """`x -> x - A x`, except in the rows where `norm` is set, which hold
    `sum_{s: group[s] = group[r]} weight[s] x[s]` (rows `r` with `norm[r]`)."""

    A: object
    norm: Bool[Array, " n"] | None = None
    group: Int[Array, " n"] | None = None
    weight: Float[Array, " n"] | None = None
    n_groups: int = eqx.field(static=True, default=0)

    def __call__(self, x):
        y = x - spmv(self.A, x).astype(x.dtype)
        if self.norm is None:
            return y
        wx = self.weight * x
        if self.n_groups == 1:
            # A tree reduction: its rounding grows with log(n), where the
            # scatter-add of `segment_sum` may grow with n (8M-state BSCCs).
            sums = jnp.sum(wx)[None]
        else:
            sums = jax.ops.segment_sum(wx, self.group, num_segments=self.n_groups)
        return jnp.where(self.norm, sums[self.group], y)


def _norm(v):
    return jnp.sqrt(jnp.vdot(v, v).real)


@eqx.filter_jit
def _gmres(op, b, x0, rtol, max_iters, restart: int):
    m = restart
    n = b.shape[0]
    dt = b.dtype
    tol = rtol * _norm(b)

    def cycle(carry):
        x, it, _, _ = carry
        r = b - op(x)
        beta = _norm(r)
        V = jnp.zeros((m + 1, n), dt).at[0].set(r / jnp.where(beta > 0, beta, 1.0))
        g = jnp.zeros(m + 1, dt).at[0].set(beta)
        H = jnp.zeros((m + 1, m), dt)
        cs = jnp.zeros(m, dt)
        sn = jnp.zeros(m, dt)

        def cond(c):
            j, _, _, _, _, g = c
            return (j < m) & (jnp.abs(g[j]) > tol) & (it + j < max_iters)

        def body(c):
            j, V, H, cs, sn, g = c
            w = op(V[j])

            def mgs(i, wh):
                w, h = wh
                hi = jnp.vdot(V[i], w)
                return w - hi * V[i], h.at[i].set(hi)

            w, h = lax.fori_loop(0, j + 1, mgs, (w, jnp.zeros(m + 1, dt)))
            hn = _norm(w)
            V = V.at[j + 1].set(w / jnp.where(hn > 0, hn, 1.0))
            h = h.at[j + 1].set(hn)

            def rotate(i, h):
                a, c2 = h[i], h[i + 1]
                return (
                    h.at[i]
                    .set(cs[i] * a + sn[i] * c2)
                    .at[i + 1]
                    .set(-sn[i] * a + cs[i] * c2)
                )

            h = lax.fori_loop(0, j, rotate, h)
            a, c2 = h[j], h[j + 1]
            den = jnp.hypot(a, c2)
            safe = jnp.where(den > 0, den, 1.0)
            c_, s_ = (
                jnp.where(den > 0, a / safe, 1.0),
                jnp.where(den > 0, c2 / safe, 0.0),
            )
            h = h.at[j].set(den).at[j + 1].set(0.0)
            g = g.at[j + 1].set(-s_ * g[j]).at[j].set(c_ * g[j])
            return j + 1, V, H.at[:, j].set(h), cs.at[j].set(c_), sn.at[j].set(s_), g

        j, V, H, _, _, g = lax.while_loop(
            cond, body, (jnp.zeros((), jnp.int32), V, H, cs, sn, g)
        )
        used = jnp.arange(m) < j
        R = jnp.where(used[:, None] & used[None, :], H[:m, :m], jnp.eye(m, dtype=dt))
        # Unused columns are the identity; a zero pivot (exact breakdown)
        # cannot happen on a used column of a nonsingular system.
        y = jax.scipy.linalg.solve_triangular(
            R, jnp.where(used, g[:m], 0.0), lower=False
        )
        x = x + V[:m].T @ y
        it = it + j
        res = _norm(b - op(x))
        status = jnp.where(
            ~jnp.all(jnp.isfinite(x)),
            Status.NONFINITE,
            jnp.where(
                res <= tol,
                Status.CONVERGED,
                jnp.where(
                    it >= max_iters,
                    Status.MAX_ITERS,
                    jnp.where(j == 0, Status.BREAKDOWN, RUNNING),
                ),
            ),
        ).astype(jnp.int32)
        return x, it, res, status

    res0 = _norm(b - op(x0))
    s0 = jnp.where(res0 <= tol, Status.CONVERGED, RUNNING).astype(jnp.int32)
    x, it, res, status = lax.while_loop(
        lambda c: c[3] == RUNNING, cycle, (x0, jnp.zeros((), jnp.int32), res0, s0)
    )
    return Solution(
        value=x,
        status=status,
        iterations=it,
        residual=res / jnp.where(tol > 0, tol / rtol, 1.0),
    )


def gmres(
    op: Operator, b, x0=None, *, rtol=1e-13, restart=40, max_iters=10000, throw=False
) -> Solution:
    """Restarted GMRES for `op(x) = b` on the device.

    **Arguments:**
    - `op`: an `Operator` (its matrix in any `jaxmc.layout`).
    - `b`, `x0`: right-hand side and start vector (default 0).
    - `rtol`: stop when `||b - op(x)||_2 <= rtol ||b||_2` (true residual).
    - `restart`: Krylov vectors per cycle (memory: `restart + 1` vectors).
    - `max_iters`: Arnoldi steps in all.
    - `throw`: raise `ConvergenceError` unless converged.

    **Returns:** a `jaxmc.solvers.Solution`; `residual` is the relative
    residual `||b - op(x)|| / ||b||`.
    """
    b = jnp.asarray(b, jnp.float64)
    x0 = jnp.zeros_like(b) if x0 is None else jnp.asarray(x0, jnp.float64)
    sol = _gmres(
        op,
        b,
        x0,
        jnp.asarray(rtol, b.dtype),
        jnp.asarray(max_iters, jnp.int32),
        int(restart),
    )
    return check_solution(sol, throw, "GMRES")


@eqx.filter_jit
def _bicgstab(op, b, x0, rtol, max_iters, shadow):
    tol = rtol * _norm(b)
    sol = bicgstab_loop(op, b, x0, tol, max_iters, _norm, shadow)
    true = _norm(b - op(sol.value)) / jnp.where(tol > 0, tol / rtol, 1.0)
    return Solution(
        value=sol.value, status=sol.status, iterations=sol.iterations, residual=true
    )


def bicgstab(
    op: Operator, b, x0=None, *, rtol=1e-13, max_iters=10000, shadow=None, throw=False
) -> Solution:
    """BiCGStab for `op(x) = b` on the device, stopped when its recursive
    residual is below `rtol ||b||_2`. `residual` is the *true* relative
    residual of the result, which rounding may leave well above `rtol`:
    the caller decides whether that is good enough. `iterations` counts
    BiCGStab iterations (two SpMVs each). `shadow`: the shadow residual
    (default: the initial residual)."""
    b = jnp.asarray(b, jnp.float64)
    x0 = jnp.zeros_like(b) if x0 is None else jnp.asarray(x0, jnp.float64)
    sol = _bicgstab(
        op,
        b,
        x0,
        jnp.asarray(rtol, b.dtype),
        jnp.asarray(max_iters, jnp.int32),
        None if shadow is None else jnp.asarray(shadow, b.dtype),
    )
    return check_solution(sol, throw, "BiCGStab")


@eqx.filter_jit
def _bicgstab_l(op, b, state, rtol, max_spmv, ell: int, shadow=None):
    tol = rtol * _norm(b)
    if not isinstance(state, tuple):  # a start vector
        state = bicgstab_l_start(op, b, state, shadow)
    sol, state = bicgstab_l_loop(op, state, tol, max_spmv, _norm, ell)
    true = _norm(b - op(sol.value)) / jnp.where(tol > 0, tol / rtol, 1.0)
    sol = Solution(
        value=sol.value, status=sol.status, iterations=sol.iterations, residual=true
    )
    return sol, state


def bicgstab_l(op, b, start=None, *, ell=2, rtol=1e-13, max_spmv=10000, shadow=None):
    """BiCGStab(`ell`) for `op(x) = b` on the device (`solvers.
    bicgstab_l_loop`) from `start`, a vector (default 0; its residual is
    the shadow vector unless `shadow` is given) or the state a previous
    call returned (the iteration goes on), stopped when its recursive
    residual is below `rtol ||b||_2`.
    Returns `(solution, state)`; `residual` is the true relative residual,
    `iterations` counts SpMVs. On a non-finite step the solution holds the
    last finite iterate with status `NONFINITE`."""
    b = jnp.asarray(b, jnp.float64)
    if not isinstance(start, tuple):
        start = jnp.zeros_like(b) if start is None else jnp.asarray(start, b.dtype)
    return _bicgstab_l(
        op,
        b,
        start,
        jnp.asarray(rtol, b.dtype),
        jnp.asarray(max_spmv, jnp.int32),
        int(ell),
        None if shadow is None else jnp.asarray(shadow, b.dtype),
    )


class Bordered(eqx.Module):
    """The Poisson system of a long-run average in the jump-chain scaling,
    `h - A h + w g = b` per BSCC (`A` the jump chain, `w = 1/d`, `b = r/d`),
    with `h` pinned to 0 at each BSCC's representative and that unknown's
    slot holding the BSCC's gain `g` instead: `z -> z_m - A z_m + w z[rep]`,
    `z_m` being `z` with the representatives zeroed (`jaxmc.numerics.
    steady_longrun`). Nonsingular on irreducible BSCCs."""

    A: object
    is_rep: Bool[Array, " n"]
    group: Int[Array, " n"]
    rep_pos: Int[Array, " g"]
    weight: Float[Array, " n"]

    def __call__(self, z):
        zm = jnp.where(self.is_rep, 0.0, z)
        y = zm - spmv(self.A, zm).astype(z.dtype)
        return y + self.weight * z[self.rep_pos][self.group]


def _span(D, group, n_groups: int):
    if n_groups == 1:
        return jnp.min(D)[None], jnp.max(D)[None]
    lo = jax.ops.segment_min(D, group, num_segments=n_groups)
    hi = jax.ops.segment_max(D, group, num_segments=n_groups)
    return lo, hi


def _progress(finite, half, tol, it, max_iters, budget, prog, window):
    """`(status, prog)` after a trip of the certified iterations, `prog =
    (ref, ref_it, steady)` the largest half-width at the last checkpoint
    (every `window` steps), its step, and whether the rate measured over the
    last window predicts convergence within `budget` steps. Converged when
    every half-width is within `tol`; STALLED when the largest one has
    stayed within 1% of `ref` over `window` steps (a plateau: growing and
    shrinking brackets both count as progress, as Jacobi's grows before it
    shrinks); MAX_ITERS at `max_iters` steps unless `steady` (then at
    `budget`: `budget_policy`)."""
    ref, ref_it, steady = prog
    worst = jnp.max(half)
    check = it - ref_it >= window
    plateau = check & jnp.isfinite(ref) & (jnp.abs(worst - ref) <= 0.01 * ref)
    # Steps still needed at the rate of the last window (the worst BSCC's
    # distance to its tolerance, at the worst BSCC's rate).
    rate = worst / jnp.where(jnp.isfinite(ref) & (ref > 0), ref, jnp.inf)
    gap = jnp.max(half / jnp.maximum(tol, jnp.finfo(half.dtype).tiny))
    need = window * jnp.log(jnp.maximum(gap, 1.0)) / -jnp.log(jnp.minimum(rate, 1.0))
    steady = jnp.where(check, (rate < 1.0) & (it + need <= budget), steady)
    ref = jnp.where(check, worst, ref)
    ref_it = jnp.where(check, it, ref_it)
    out_of_steps = (it >= budget) | ((it >= max_iters) & ~steady)
    status = jnp.where(
        ~finite,
        Status.NONFINITE,
        jnp.where(
            jnp.all(half <= tol),
            Status.CONVERGED,
            jnp.where(
                out_of_steps,
                Status.MAX_ITERS,
                jnp.where(plateau, Status.STALLED, RUNNING),
            ),
        ),
    ).astype(jnp.int32)
    return status, (ref, ref_it, steady)


def _prog0(dtype):
    inf = jnp.asarray(jnp.inf, dtype)
    return (inf, jnp.zeros((), jnp.int32), jnp.zeros((), bool))


@eqx.filter_jit
def _rvi(A, d, r, q, group, rep_pos, h0, eps, max_iters, budget, window, relative, ng):
    trip = 16

    def delta(h):
        return r + d * (spmv(A, h).astype(h.dtype) - h)

    def cond(c):
        return c[-1] == RUNNING

    def body(c):
        h, _, it, _, prog, _ = c
        for i in range(trip):
            D = delta(h)
            if i == trip - 1:
                lo, hi = _span(D, group, ng)
                hcert = h
            h = h + (D - D[rep_pos][group]) / q
        it = it + trip
        half = 0.5 * (hi - lo)
        tol = eps * jnp.abs(0.5 * (hi + lo)) if relative else eps
        finite = jnp.all(jnp.isfinite(h))
        status, prog = _progress(finite, half, tol, it, max_iters, budget, prog, window)
        worst = jnp.max(half)
        report(it, worst, h.shape[0], trip)
        return h, hcert, it, worst, prog, status

    inf = jnp.asarray(jnp.inf, h0.dtype)
    zero = jnp.zeros((), jnp.int32)
    init = (h0, h0, zero, inf, _prog0(h0.dtype), jnp.asarray(RUNNING, jnp.int32))
    _, hcert, it, worst, _, status = lax.while_loop(cond, body, init)
    return Solution(value=hcert, status=status, iterations=it, residual=worst)


def relative_value_iteration(
    A, d, r, q, group, rep_pos, n_groups, h0, *, epsilon, relative, max_iters,
    window, budget=None,
) -> Solution:  # fmt: skip
    """Relative value iteration for the gain of each BSCC of a Markov chain
    with off-diagonal jump matrix `A` (rows: `A(s,t) = Q(s,t) / d_s`), exit
    rates (or probabilities) `d` and reward `r`: the chain uniformised at
    rate `q` per state (`q > max d` over its BSCC: aperiodic),
    `h' = h + (D - D[rep]) / q` with `D = r + d (A h - h) = r + Q h`.

    For any `h`, every BSCC's gain lies in `[min D, max D]` over its states
    (`pi D = pi r` for the stationary `pi`), so the loop stops on that
    bracket (each BSCC's half-width at most `epsilon`, times the midpoint's
    magnitude if `relative`), measured every 16 steps; `STALLED` on a
    plateau of the largest half-width (`_progress`) over `window` steps;
    past `max_iters` steps only while the rate measured over the last
    window predicts convergence within `budget` steps (default
    `max_iters`: a hard cap).
    `value` is the measured `h`, `residual` the largest half-width;
    `iterations` counts steps (one SpMV each). The caller certifies the
    bracket again on the host (`steady_longrun.certify`)."""
    dt = jnp.asarray(h0).dtype
    return _rvi(
        A,
        jnp.asarray(d, dt),
        jnp.asarray(r, dt),
        jnp.asarray(q, dt),
        jnp.asarray(group, jnp.int32),
        jnp.asarray(rep_pos, jnp.int32),
        jnp.asarray(h0, dt),
        jnp.asarray(epsilon, dt),
        jnp.asarray(max_iters, jnp.int32),
        jnp.asarray(max_iters if budget is None else budget, jnp.int32),
        jnp.asarray(window, jnp.int32),
        bool(relative),
        int(n_groups),
    )


def _segment_sum(v, group, n_groups: int):
    if n_groups == 1:
        return jnp.sum(v)[None]
    return jax.ops.segment_sum(v, group, num_segments=n_groups)


@eqx.filter_jit
def _pair(A, AT, d, r, group, rep_pos, h0, y0, w, eps, max_iters, budget, window,
          rel, ng):  # fmt: skip
    trip = 16

    def cond(c):
        return c[-1] == RUNNING

    def body(c):
        h, y, _, it, _, prog, _ = c
        for i in range(trip):
            Ph = spmv(A, h).astype(h.dtype)
            D = r + d * (Ph - h)
            x = y / d
            gain = _segment_sum(x * D, group, ng) / _segment_sum(x, group, ng)
            if i == trip - 1:
                lo, hi = _span(D, group, ng)
                hcert = h
            h = h + w * (D - gain[group]) / d
            h = h - h[rep_pos][group]
            y = (1 - w) * y + w * spmv(AT, y).astype(y.dtype)
        y = y / _segment_sum(y, group, ng)[group]
        it = it + trip
        half = 0.5 * (hi - lo)
        tol = eps * jnp.abs(0.5 * (hi + lo)) if rel else eps
        finite = jnp.all(jnp.isfinite(h)) & jnp.all(jnp.isfinite(y))
        status, prog = _progress(finite, half, tol, it, max_iters, budget, prog, window)
        worst = jnp.max(half)
        report(it, worst, h.shape[0], trip)
        return h, y, hcert, it, worst, prog, status

    inf = jnp.asarray(jnp.inf, h0.dtype)
    zero = jnp.zeros((), jnp.int32)
    init = (h0, y0, h0, zero, inf, _prog0(h0.dtype), jnp.asarray(RUNNING, jnp.int32))
    out = lax.while_loop(cond, body, init)
    return Solution(value=out[2], status=out[-1], iterations=out[3], residual=out[4])


def pair_jacobi(
    A, AT, d, r, group, rep_pos, n_groups, h0, *, epsilon, relative, max_iters,
    window, damped=True, budget=None,
) -> Solution:  # fmt: skip
    """The gain of each BSCC by two damped Jacobi iterations run together,
    for a chain with jump matrix `A` (`AT` its transpose), exit rates `d`
    and reward `r`: the stationary side `y' = (y + A^T y) / 2` (`y = pi d`
    up to a factor), and the Poisson side `h' = h + (D - g) / (2 d)` with
    `D = r + d (A h - h) = r + Q h` and the gain estimate `g = sum pi D`
    from the current `y` (exact for the true `pi`, whatever `h`). Jacobi's
    per-state scaling is what the uniformised iteration lacks on chains
    whose rates differ by orders of magnitude. Undamped (`y' = A^T y`,
    `h' = h + (D - g) / d`, twice as fast) with `damped=False`, for an
    aperiodic jump chain.

    Stops on the certified bracket `[min D, max D]` of every BSCC (see
    `relative_value_iteration`, also for `STALLED`, `budget`, `value`,
    `residual`);
    `iterations` counts steps (two SpMVs each)."""
    dt = jnp.asarray(h0).dtype
    group = jnp.asarray(group, jnp.int32)
    y0 = jnp.asarray(d, dt)
    y0 = y0 / _segment_sum(y0, group, int(n_groups))[group]
    return _pair(
        A,
        AT,
        jnp.asarray(d, dt),
        jnp.asarray(r, dt),
        group,
        jnp.asarray(rep_pos, jnp.int32),
        jnp.asarray(h0, dt),
        y0,
        jnp.asarray(0.5 if damped else 1.0, dt),
        jnp.asarray(epsilon, dt),
        jnp.asarray(max_iters, jnp.int32),
        jnp.asarray(max_iters if budget is None else budget, jnp.int32),
        jnp.asarray(window, jnp.int32),
        bool(relative),
        int(n_groups),
    )
