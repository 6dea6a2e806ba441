"""The multi-right-hand-side fixed-point loops of the linear solves that
are differentiated implicitly (`jaxmc.solvers.adjoint`): a plain loop
`x <- step(x)` to PRISM's relative criterion (`fixed_point_loop`, one
vector; `fixed_point_columns`, `[n, k]` with a flag per column; Jacobi,
Gauss-Seidel, value or power iteration, whatever `step` is), with the
`Relevance` floor of a gradient's adjoint solve, and over-relaxed
multicolour SOR with a guarded automatic `w` (`sor`; fewer sweeps on
slowly mixing chains), on batches that shrink as their columns converge
(`sor_shrinking`). `iterate` picks one. The sweeps are
`jaxmc.kernels.sweep`.

Every loop returns a `Solution`: the values as they stand (never NaN'd),
a `Status` per column (CONVERGED, MAX_ITERS, NONFINITE), the iterations
and the relative change of one more step (`residual`, measured after the
loop: a failed solve says how far it was)."""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from .._config import SETTINGS
from ..kernels import sor_multi_pallas as _sor_kernel
from ._results import Solution, Status


class Relevance:
    """The per-entry floor of the relative stop rule, `|x_new - x_old| <=
    eps * max(|x|, floor)`. Without weights (`w` None) the floor is 1e-300:
    every entry converges relative to itself (PRISM's rule).

    With weights `w` (`[n]`, or `[n, k]` per column; `w_s` bounds how much a
    unit of `x_s` can contribute to the quantity the solve is for), entries
    whose contribution `|x_s| w_s` is below `M / n`, `M` the largest
    contribution (per column, `measure`), are held to an absolute rule,
    `eps M / (n w_s)`, instead: together they cannot move the result by
    more than `eps M`, so the result keeps the relative accuracy `eps` while
    the loop no longer waits for entries that cannot matter to it. Entries
    with `w_s = 0` never hold it up. Used by the adjoint solve of a gradient
    (`linear_solve`), whose entries span hundreds of orders of magnitude (1
    at the initial state, 1e-200 far from it) while the gradient only weighs
    those near the paths that carry the probability."""

    def __init__(self, w=None):
        self.w = w
        if w is not None:
            self.nw = w.shape[0] * w

    def _b(self, v, x):
        return v if v.ndim == x.ndim else v[:, None]

    def measure(self, x):
        """`M`: the largest contribution `|x_s| w_s` (per column)."""
        if self.w is None:
            return jnp.zeros(x.shape[1:], x.dtype)
        return jnp.max(jnp.abs(x) * self._b(self.w, x), axis=0)

    def converged(self, d, x, eps, m=None, finite=False):
        """Per column: does every entry pass `d <= eps * max(|x|, floor)`
        (and, with `finite`, is every entry of `x` finite: one reduction
        for both)? (Weighted, as `d n w <= eps max(|x| n w, M)`: no
        division, and entries with `w = 0` pass.)"""
        if self.w is None:
            ok = d <= eps * jnp.maximum(jnp.abs(x), 1e-300)
        else:
            m = self.measure(x) if m is None else m
            nw = self._b(self.nw, x)
            ok = d * nw <= eps * jnp.maximum(jnp.abs(x) * nw, jnp.maximum(m, 1e-300))
        if finite:
            ok = ok & jnp.isfinite(x)
        return jnp.all(ok, axis=0)

    def floor(self, x, m=None):
        """The floor for iterate `x`, given `M` (measured on `x` if None;
        an earlier, smaller `M` gives a lower floor: a stricter rule)."""
        if self.w is None:
            return 1e-300
        m = self.measure(x) if m is None else m
        nw = self._b(self.nw, x)
        return jnp.maximum(
            jnp.where(nw > 0, m / jnp.where(nw > 0, nw, 1.0), jnp.inf), 1e-300
        )


def outcome(done, x, iterations, step, rel) -> Solution:
    """The `Solution` of a loop that stopped at `x` after `iterations`
    steps, `done` (per column) whether its stop rule held: the status
    (CONVERGED; else NONFINITE where `x` has a non-finite entry, else
    MAX_ITERS) and, as the residual, the largest change of one more
    `step`, relative to `max(|x|, rel.floor(x))` (the stop rule's scale)."""
    finite = jnp.all(jnp.isfinite(x), axis=0)
    status = jnp.where(
        done,
        Status.CONVERGED,
        jnp.where(finite, Status.MAX_ITERS, Status.NONFINITE),
    ).astype(jnp.int32)
    d = jnp.abs(step(x) - x) / jnp.maximum(jnp.abs(x), rel.floor(x))
    residual = jnp.max(jnp.where(jnp.isnan(d), jnp.inf, d), axis=0)
    return Solution(x, status, jnp.asarray(iterations, jnp.int32), residual)


def fixed_point_loop(step, x0, eps, max_iters, rel=None) -> Solution:
    """Iterate `x <- step(x)` until every entry changes by at most `eps`
    relative to itself (PRISM's relative criterion, so that small values,
    such as a tiny probability at the initial state, are accurate too;
    entries below 1e-300 count as converged; `rel`: a `Relevance` floor),
    or `max_iters`. The loop's flag is one for all of `x` (`[n]`, or `[n,
    k]` converging together)."""
    rel = rel or Relevance()

    def cond(c):
        _, it, done = c
        return (~done) & (it < max_iters)

    def body(c):
        x, it, _ = c
        x1 = step(x)
        x2 = step(x1)
        d = jnp.abs(x2 - x1)
        ok = rel.converged(d, x2, eps, finite=True)
        return x2, it + 2, ok

    x, it, ok = lax.while_loop(
        cond, body, (x0, jnp.zeros((), jnp.int32), jnp.zeros((), bool))
    )
    return outcome(ok, x, it, step, rel)


def fixed_point_columns(step, x0, eps, max_iters, rel=None) -> Solution:
    """`fixed_point_loop` for `x0` of shape `[n, k]`: each column has its
    own convergence flag (and status) and stops changing once converged
    (so it ends exactly where a single-vector loop would); the loop runs
    until every column has converged or `max_iters`."""
    rel = rel or Relevance()

    def cond(c):
        _, it, done, _ = c
        return (~jnp.all(done)) & (it < max_iters)

    def body(c):
        x, it, done, its = c
        x1 = step(x)
        x2 = step(x1)
        d = jnp.abs(x2 - x1)
        ok = rel.converged(d, x2, eps, finite=True)
        its = jnp.where(done, its, it + 2)
        return jnp.where(done, x, x2), it + 2, done | ok, its

    done0 = jnp.zeros(x0.shape[1:], bool)
    its0 = jnp.zeros(x0.shape[1:], jnp.int32)
    x, _, done, its = lax.while_loop(
        cond, body, (x0, jnp.zeros((), jnp.int32), done0, its0)
    )
    return outcome(done, x, its, step, rel)


#: Automatic over-relaxation (`sor`): sweeps per measuring/judging window,
#: sweeps of plain Gauss-Seidel before `omega` is chosen, and the largest
#: `omega` tried.
SOR_WINDOW = 16
SOR_WARMUP = 32
SOR_MAX_OMEGA = 1.9


def _window_stats(p, q):
    """The combiner of `sor`'s window statistics: max, max, max, sum, sum,
    sum (any non-finite)."""
    return (
        jnp.maximum(p[0], q[0]),
        jnp.maximum(p[1], q[1]),
        jnp.maximum(p[2], q[2]),
        p[3] + q[3],
        p[4] + q[4],
        p[5] + q[5],
    )


def young_omega(rho):
    """Young's optimal over-relaxation `2 / (1 + sqrt(1 - rho))` for a
    Gauss-Seidel contraction rate `rho` per sweep (exact for consistently
    ordered matrices with real Jacobi eigenvalues, e.g. red-black orderings
    of symmetrizable chains)."""
    return 2.0 / (1.0 + jnp.sqrt(jnp.maximum(1.0 - rho, 0.0)))


def sor(sweep, x0, eps, max_iters, omega=None, rel=None):
    """Multicolour SOR to the relative criterion: `(Solution, w)`, the final
    `w` per column (`_sor_run`, which says how `w` is chosen)."""
    rel = rel or Relevance()
    out = _sor_run(sweep, x0, eps, max_iters, omega, rel)
    return outcome(out[3], out[0], out[11], sweep, rel), out[4]


def _sor_run(
    sweep,
    x0,
    eps,
    max_iters,
    omega=None,
    rel=None,
    state=None,
    min_active=0,
):
    """Iterate `x <- sweep(x, w)` (multicolour SOR) until every entry changes
    by at most `eps` relative to itself (`fixed_point_loop`'s criterion),
    or `max_iters` sweeps. `x0` is `[n]` or `[n, k]`; every column has its
    own relaxation `w`, state and convergence flag, and stops changing once
    converged (so a column ends where a one-vector solve would). Returns
    the loop's state: `(x, snapshot, sweeps, done, w, ..., its)`, `done`,
    the final `w` and the sweeps until convergence `its` per column (`sor`
    makes it a `Solution`).

    Why: the chains solved here mix slowly (rates ~0.95-0.99 per sweep), so
    Gauss-Seidel needs ~10^3 sweeps per point; over-relaxation needs
    several times fewer (`benchmarks/sweep.py`). The best `w` is
    not known in advance and too large a `w` fails in two ways on these
    nonsymmetric (strongly non-normal) chains: the iterate grows by many
    orders of magnitude before it would converge, or the absolute error
    converges but tiny entries (1e-20 and below) stall under the relative
    criterion. Hence, with `omega=None`:

    1. plain Gauss-Seidel for `SOR_WARMUP` sweeps; the contraction rate
       `rho` of the largest absolute change over the last window of
       `SOR_WINDOW` sweeps gives `w = young_omega(rho)` (the early `rho`
       underestimates the asymptotic one, so this `w` is below Young's);
    2. at every later window end the column must show progress: the largest
       absolute change halved, or the largest relative change at a new low,
       or fewer zero entries (a front still spreading), or fewer entries
       failing the stop rule (a front of relative accuracy still spreading:
       tiny entries converge long after the absolute change has reached
       rounding level); and its absolute change must not have doubled
       (unless at rounding level). If not, `w <- 1 + (w - 1)/2`
       and the iterate goes back to the snapshot taken at the last good
       window end (any start converges for a convergent `w`; the snapshot
       saves the sweeps a blow-up would cost). Below `w = 1.02` it is plain
       Gauss-Seidel for good.

    A fixed `omega` skips step 1 and keeps the guard; `omega=1.0` is plain
    Gauss-Seidel (`fixed_point_loop`). Non-convergence shows as `done =
    False`. `rel`: the stop rule's `Relevance` floor (also used by the
    guard's counts), its `M` measured at window ends.

    `min_active` > 0: stop as soon as at most that many columns are still
    running. `state` resumes a returned state (`x0` is then ignored;
    `sor_shrinking`)."""
    rel = rel or Relevance()
    L = SOR_WINDOW
    auto = omega is None
    cshape = x0.shape[1:]
    f64 = x0.dtype

    def full(v, dt=f64):
        return jnp.full(cshape, v, dt)

    w0 = full(1.0 if auto else float(omega))
    phase0 = full(0 if auto else 1, jnp.int32)  # 0 measure, 1 SOR (guarded), 2 plain GS

    def window(s, d, done):
        """At a window end: choose `w` (phase 0) or judge it (phase 1), from
        the last step's change `d`."""
        x2, snap, w, phase, a_ref, r_min, z_ref, u_ref, it = s
        scale = jnp.maximum(jnp.abs(x2), rel.floor(x2))
        # one variadic reduction: one pass over the vectors, not six
        a, r, top, z, u, nonfinite = lax.reduce(
            (
                d,
                d / scale,
                jnp.abs(x2),
                (x2 == 0).astype(jnp.int32),
                (d > eps * scale).astype(jnp.int32),
                (~jnp.isfinite(x2)).astype(jnp.int32),
            ),
            (
                jnp.asarray(-jnp.inf, d.dtype),
                jnp.asarray(-jnp.inf, d.dtype),
                jnp.asarray(-jnp.inf, d.dtype),
                jnp.int32(0),
                jnp.int32(0),
                jnp.int32(0),
            ),
            _window_stats,
            (0,),
        )
        finite = nonfinite == 0
        at = ~done
        first = a_ref < 0  # no reference since the last change of w
        # 1. choose w from the Gauss-Seidel rate
        rate = (a / jnp.where(first, 1.0, a_ref)) ** (1.0 / L)
        tiny = a <= 1e-13 * top  # at rounding level
        est = at & ~first & (phase == 0) & (it >= SOR_WARMUP) & finite
        pick = est & (rate < 1) & ~tiny
        w_est = jnp.clip(young_omega(rate), 1.0, SOR_MAX_OMEGA)
        # 2. guard
        progress = (a < 0.5 * a_ref) | (r < r_min) | (z < z_ref) | (u < u_ref)
        grew = (a > 2.0 * a_ref) & ~tiny
        bad = at & ~first & (phase == 1) & (grew | ~progress | ~finite)
        w_back = 1.0 + 0.5 * (w - 1.0)
        w_back = jnp.where(w_back < 1.02, 1.0, w_back)
        w_new = jnp.where(pick, w_est, jnp.where(bad, w_back, w))
        phase = jnp.where(
            pick, 1, jnp.where((est & tiny) | (bad & (w_new == 1.0)), 2, phase)
        )
        changed = pick | bad
        x_new = jnp.where(bad, snap, x2)
        snap = jnp.where(at & ~bad, x2, snap)
        a_ref = jnp.where(at, jnp.where(changed, -1.0, a), a_ref)
        r_min = jnp.where(at, jnp.where(changed, jnp.inf, jnp.minimum(r_min, r)), r_min)
        z_ref = jnp.where(at, z, z_ref)
        u_ref = jnp.where(at, u, u_ref)
        return x_new, snap, w_new, phase, a_ref, r_min, z_ref, u_ref, rel.measure(x_new)

    def step_cond(c):
        _, _, it, done, _, i, _ = c
        return (i < L // 2) & ~jnp.all(done) & (it < max_iters)

    def step(c, m):
        """Two sweeps and the convergence check (with the floor of the
        window's `M`), which the second sweep computes as it writes (one
        fused pass on a GPU: `gs_sweep`). Converged columns stop changing:
        they sweep with `w = 0`, which leaves them exactly as they are (so
        a column ends where a one-vector solve would, and no select pass
        over the iterate is needed). The first sweep's result is carried
        out for the window's bookkeeping; `its` counts each column's
        sweeps until it converged."""
        x, _, it, done, w, i, its = c
        we = jnp.where(done, 0.0, w)  # (one vector: the loop stops instead)
        x1 = sweep(x, we)
        x2, ok = sweep(x1, we, check=(rel, eps, m))
        its = jnp.where(done, its, it + 2)
        return x2, x1, it + 2, done | ok, w, i + 1, its

    def cond(c):
        go = (~jnp.all(c[3])) & (c[2] < max_iters)
        if min_active:
            go = go & (jnp.sum(~c[3], dtype=jnp.int32) > min_active)
        return go

    def body(c):
        # Windows of SOR_WINDOW sweeps: an inner loop of sweeps, then the
        # bookkeeping once (not masks on every iteration, nor a `cond` per
        # iteration, which costs a host round trip per step on a GPU).
        x, snap, it, done, w, phase, a_ref, r_min, z_ref, u_ref, m, its = c
        x, x1, it, done, w, _, its = lax.while_loop(
            step_cond,
            lambda c: step(c, m),
            (x, x, it, done, w, jnp.zeros((), jnp.int32), its),
        )
        x, snap, w, phase, a_ref, r_min, z_ref, u_ref, m = window(
            (x, snap, w, phase, a_ref, r_min, z_ref, u_ref, it), jnp.abs(x - x1), done
        )
        return x, snap, it, done, w, phase, a_ref, r_min, z_ref, u_ref, m, its

    init = (
        state
        if state is not None
        else (
            x0,
            x0,
            jnp.zeros((), jnp.int32),
            full(False, bool),
            w0,
            phase0,
            full(-1.0),
            full(jnp.inf),
            full(0, jnp.int32),
            full(0, jnp.int32),
            rel.measure(x0),
            full(0, jnp.int32),
        )
    )
    return lax.while_loop(cond, body, init)


#: `sor_shrinking`: the narrowest batch it shrinks to, and when batched
#: solves shrink: `"auto"` where the fused SOR kernel runs (a GPU: there a
#: sweep's time is proportional to the batch's width; on a CPU the extra
#: compiled loops cost more than they save on the small batches it runs),
#: `"on"`, `"off"`: `jaxmc._config.SETTINGS.diff_shrink`.
SHRINK_MIN = 64


def shrinks(k: int, omega) -> bool:
    """Whether a batched solve of `k` columns shrinks (`sor_shrinking`)."""
    shrink = SETTINGS.diff_shrink
    if (
        shrink == "off"
        or k // 2 < SHRINK_MIN
        or (omega is not None and float(omega) == 1.0)
    ):
        return False
    return shrink == "on" or _sor_kernel.active(k) is not None


def sor_shrinking(
    build, x0, eps, max_iters, omega=None, weights=None, min_width=None
) -> Solution:
    """`sor` of an `[n, k]` batch whose width halves whenever at most half
    of its columns still run: the running columns move to a batch of half
    the width (a new `sweep` from `build(columns)`, `columns` the original
    indices, or None for all), the finished ones leave with their values.
    Returns the `Solution` in the original column order.

    Why: a batch runs to its slowest column (in `benchmarks/sweep.py`'s
    grid the points need 334 sweeps at the median and up to 584), and a
    sweep's cost is proportional to the batch's width, so a batch of fixed
    width costs `k * max(sweeps)`; shrinking costs about `k * median +
    k/2 * (p75 - median) + ...`. Every column still takes exactly the
    sweeps, `w`s and values it would take in the full batch (a column's
    update never reads another column). `weights`: the `Relevance`
    weights, `[n]` or `[n, k]`."""
    n, k = x0.shape
    lo = SHRINK_MIN if min_width is None else min_width
    if k // 2 < lo:
        return sor(build(None), x0, eps, max_iters, omega, Relevance(weights))[0]
    cols = jnp.arange(k, dtype=jnp.int32)
    x_out = jnp.zeros_like(x0)
    done_out = jnp.zeros((k,), bool)
    it_out = jnp.zeros((k,), jnp.int32)
    state, width = None, k
    while True:  # static: one compiled loop per width
        full = state is None or weights is None or weights.ndim == 1
        rel = Relevance(weights if full else weights[:, cols])
        half = width // 2
        if half < lo:  # the last width runs to the end
            state = _sor_run(build(cols), x0, eps, max_iters, omega, rel, state)
            break
        state = _sor_run(
            build(None if state is None else cols),
            x0,
            eps,
            max_iters,
            omega,
            rel,
            state,
            min_active=half,
        )
        x, it, done = state[0], state[11], state[3]
        # running columns first (at most `half` of them: or the loop hit
        # `max_iters`, and the others stay not done), then the finished
        keep = jnp.argsort(done, stable=True)
        gone = keep[half:]
        x_out = x_out.at[:, cols[gone]].set(x[:, gone])
        done_out = done_out.at[cols[gone]].set(done[gone])
        it_out = it_out.at[cols[gone]].set(it[gone])
        keep = keep[:half]
        state = tuple(v if v.ndim == 0 else v[..., keep] for v in state)
        cols, width = cols[keep], half
    x_out = x_out.at[:, cols].set(state[0])
    done_out = done_out.at[cols].set(state[3])
    it_out = it_out.at[cols].set(state[11])
    return outcome(done_out, x_out, it_out, build(None), Relevance(weights))


def iterate(sweep, x0, eps, max_iters, omega, weights=None) -> Solution:
    """`sor` (`omega` None: automatic, or a fixed guarded `w`), or plain
    Gauss-Seidel (`fixed_point_loop` / `fixed_point_columns`) when `omega
    == 1`; `weights` (in the iterate's order) give the stop rule's
    `Relevance` floor."""
    rel = Relevance(weights)
    if omega is not None and float(omega) == 1.0:
        if x0.ndim > 1:
            return fixed_point_columns(sweep, x0, eps, max_iters, rel)
        return fixed_point_loop(sweep, x0, eps, max_iters, rel)
    return sor(sweep, x0, eps, max_iters, omega, rel)[0]


def method_name(omega) -> str:
    """The name (`jaxmc.solvers.METHOD_NAMES`) of the method `iterate` runs
    for `omega`."""
    return "gauss_seidel" if omega is not None and float(omega) == 1.0 else "sor"


def flag(sol: Solution):
    """`sol.value` with the columns that did not converge NaN: how a failed
    solve shows where only values can leave (inside `jax.grad`'s tangent and
    adjoint solves, or a caller that does not ask for the status)."""
    return jnp.where(sol.status == Status.CONVERGED, sol.value, jnp.nan)
