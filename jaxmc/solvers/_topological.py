"""Topological value iteration and topological interval iteration for
`x_s = opt_{c in s} (b_c + sum_t P(c, t) x_t)` (Storm's default for MDPs).

The strongly connected components of the iterated states' graph are solved
bottom first, a topological level at a time (`_scc_levels`): every component
sees the final values of the components it leads to, so a value that plain
value iteration propagates one step per sweep along a long acyclic stretch
is exact after one pass, and a slowly mixing component does not hold back
the rest of the system.

- A level of singleton components is one vectorised closed-form step: a
  state without self loop takes one Bellman backup; with a self loop of
  probability `p_aa` on choice `a`, choice `a` is worth
  `(b_a + sum_{t != s} P(a, t) x_t) / (1 - p_aa)` (the fixed point of that
  choice alone; the fixed point of the min/max of such lines is the min/max
  of their fixed points).
- A level's larger components are iterated together: on the host (numpy,
  scipy) when small, on the device (`_minmax`'s jitted loops) from
  `DEVICE_MIN_STATES` states on. A level whose iteration has not
  converged after `POLICY_AFTER` (host) or `POLICY_AFTER_DEVICE` sweeps
  hands over to policy iteration (`_policy`: its policy systems solved by
  sparse LU on the host or by BiCGStab on the device), whose bounds one
  Bellman step certifies (interval iteration) or whose optimal values
  replace the iterate (value iteration); without a certificate the
  iteration goes on to `max_iters`. The hand-overs are recorded
  (`info["attempts"]`).

Value iteration stops each level on PRISM's criterion. Interval iteration
(`sound=True`) advances a lower and an upper iterate together; since each
level inherits the gap of the levels below it (its fixed-point gap is at
most their largest gap), a level stops once its gap is at most the largest
gap so far plus `2 epsilon / D`, `D` the number of levels with components of
more than one state: the final gap is then at most `2 epsilon` (relative or
absolute) and the midpoint is within `epsilon` of the solution. The lower and
upper iterates stay bounds at every step, so the result's bound is certified
whatever the stopping point.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import UnsupportedError
from ..layout import from_arrays
from ._minmax import interval_iteration, sweeps, value_iteration
from ._policy import SWEEPS, certify, greedy, policy_values, steps_bound
from ._results import Solution, Status, check_solution
from ._scc_levels import LevelPlan, plan_levels


#: Levels with at least this many states in components of more than one
#: state are iterated on the device; smaller ones on the host, where one
#: sweep costs a few numpy calls and nothing compiles.
DEVICE_MIN_STATES = 1 << 14

#: Value or interval iteration on a host level that has not converged after
#: this many sweeps hands over to policy iteration (`_policy`: sparse LU
#: on the host, BiCGStab on the device for large levels), whose bounds one
#: Bellman step certifies; where that finds no certificate, the iteration
#: goes on to `max_iters`.
POLICY_AFTER = 200
#: The same for levels iterated on the device (a sweep costs less there).
POLICY_AFTER_DEVICE = 2000

#: A Baier et al. upper start above this (a product of small probabilities)
#: is replaced by one from the level's expected time (`_local_upper`).
HUGE_BOUND = 1e100
#: Relative margin over the rounding of `R h` (`_local_upper`).
ROUNDING = 1e-9

#: A host interval iteration whose total gap has not decreased over this
#: many sweeps stops as `Status.STALLED`.
STALL_WINDOW = 2000


def _measure(new, old, relative):
    """PRISM's change criterion per column, the largest over the states."""
    d = np.abs(new - old)
    if relative:
        with np.errstate(divide="ignore", invalid="ignore"):
            d = np.where(d == 0, 0.0, d / np.abs(new))
    return float(d.max(initial=0.0))


def gaps(lo, up, relative) -> np.ndarray:
    """Per-state gap between the bounds, relative to the midpoint's
    magnitude when `relative` (0 where the bounds agree; absolute where the
    lower bound is 0: a value of 0 approached from above never reaches a
    relative gap below 2)."""
    g = up - lo
    if relative:
        mid = 0.5 * np.abs(up + lo)
        with np.errstate(divide="ignore", invalid="ignore"):
            g = np.where((g == 0) | (lo == 0), g, g / mid)
    return g


def _times(p, X):
    """`p[:, None] * X`, 0 where `p` is 0 (an infinite upper start times a
    masked entry is 0, not NaN)."""
    with np.errstate(invalid="ignore"):
        return np.where(p[:, None] != 0, p[:, None] * X, 0.0)


def _reduce(v, starts, opt):
    fn = np.maximum if opt == "max" else np.minimum
    return fn.reduceat(v, starts, axis=0)


def device_sweep(M):
    """Policy iteration's improvement steps (`_policy.policy_values`'s
    `sweep`) on the device model `M` of a level."""

    def sweep(e, W, opt):
        return np.asarray(sweeps(M, e, W, SWEEPS, opt), np.float64)

    return sweep


class _Run:
    """The state of one topological solve: the iterate(s) `X` [n, 1 or 2]
    (lower and upper for interval iteration) and the accounting."""

    def __init__(self, plan, cols, data, b, opt, sound, kw, bound=None):
        self.plan, self.cols, self.data, self.b = plan, cols, data, b
        self.bound = bound
        self.opt, self.sound, self.kw = opt, sound, kw
        self.iterations = 0
        self.residual = 0.0
        self.status = Status.CONVERGED
        self.floor = 0.0
        self.device_levels = 0
        self.policy_levels = 0
        #: the methods of the levels that handed over (dicts of `Attempt`'s
        #: fields), oldest first
        self.attempts = []
        self.method = "interval_iteration" if sound else "value_iteration"

    def _slices(self, a, e):
        p = self.plan
        c0, c1 = int(p.choice_ptr[a]), int(p.choice_ptr[e])
        e0, e1 = int(p.entry_ptr[c0]), int(p.entry_ptr[c1])
        return c0, c1, e0, e1

    def singletons(self, X, a, s):
        """Closed-form values of the singleton components `states[a:s]`."""
        p = self.plan
        c0, c1, e0, e1 = self._slices(a, s)
        ent = p.entries[e0:e1]
        local = p.entry_choice[e0:e1] - c0
        w = np.where(p.entry_self[e0:e1], 0.0, self.data[ent])
        xs = _times(w, X[self.cols[ent]])
        k = c1 - c0
        rest = np.stack(
            [
                np.bincount(local, weights=xs[:, j], minlength=k)
                for j in range(X.shape[1])
            ],
            axis=1,
        )
        rest += self.b[p.choices[c0:c1]][:, None]
        q = (1.0 - p.self_prob[c0:c1])[:, None]
        cur = X[p.choice_state[c0:c1]]
        with np.errstate(divide="ignore", invalid="ignore"):
            val = np.where(
                q > 0, rest / np.where(q > 0, q, 1.0), np.where(rest > 0, np.inf, cur)
            )
        X[p.states[a:s]] = _reduce(val, p.choice_ptr[a:s] - c0, self.opt)

    def component_level(self, X, s, e, target):
        """Iterate the states `states[s:e]` (components of more than one
        state) to the criterion; `target` is the gap to reach (sound)."""
        p = self.plan
        c0, c1, e0, e1 = self._slices(s, e)
        ent = p.entries[e0:e1]
        local = p.entry_choice[e0:e1] - c0
        tgt = self.cols[ent]
        d = self.data[ent]
        where = p.pos[tgt]
        inside = (where >= s) & (where < e)
        out = ~inside
        k = c1 - c0
        xs = _times(d[out], X[tgt[out]])
        ext = np.stack(
            [
                np.bincount(local[out], weights=xs[:, j], minlength=k)
                for j in range(X.shape[1])
            ],
            axis=1,
        )
        ext += self.b[p.choices[c0:c1]][:, None]
        starts = p.choice_ptr[s:e] - c0
        Y = X[p.states[s:e]]
        li, ti, di = local[inside], where[inside] - s, d[inside]
        if self.sound and not np.all(np.isfinite(Y[:, 1])):
            Y[:, 1] = self._local_upper(ext[:, 1], starts, li, ti, di)
        size = e - s
        A = M = None
        if size >= DEVICE_MIN_STATES:
            M = self._device_model(starts, k, li, ti, di)
            self.device_levels += 1

            def run(Y, limit):
                return self._device(Y, ext, M, target, limit)

            after = POLICY_AFTER_DEVICE
        else:
            A = sp.csr_matrix((di, (li, ti)), shape=(k, size))

            def run(Y, limit):
                return self._host(Y, ext, starts, A, target, limit)

            after = POLICY_AFTER
        max_iters = int(self.kw["max_iters"])
        Y, it, res, status = run(Y, min(after, max_iters))
        where = "device" if A is None else "host"
        if status != Status.CONVERGED:
            # the next method of the chain: policy iteration, whatever the
            # first method's iterations (its own budget is `MAX_ROUNDS`)
            if A is None:
                A = sp.csr_matrix((di, (li, ti)), shape=(k, size))
            first = dict(
                method=self.method, status=status, iterations=it, residual=res,
                layout=where, note=f"level of {size} states: policy iteration "
            )  # fmt: skip
            # (on a device level, the improvement steps run there too)
            sweep = None if M is None else device_sweep(M)
            C = self._certify(Y, ext, starts, A, target, sweep)
            if C is not None:
                first["note"] += "took over"
                self.attempts.append(first)
                Y, status = C, Status.CONVERGED
                res = self._gap(Y) if self.sound else 0.0
            elif status == Status.MAX_ITERS and it < max_iters:
                Y, more, res, status = run(Y, max_iters - it)
                it += more
                first["note"] += "found no certificate"
                if status != Status.CONVERGED:
                    self.attempts.append(first)
            else:
                first["note"] += "found no certificate"
                self.attempts.append(first)
        X[p.states[s:e]] = Y
        self.iterations += it
        self.residual = max(self.residual, res)
        if status != Status.CONVERGED:
            self.status = status

    def _gap(self, Y):
        return float(gaps(Y[:, 0], Y[:, 1], self.kw["relative"]).max(initial=0.0))

    def _local_upper(self, ext, starts, li, ti, di):
        """An upper bound on the level's solution from `self.bound` (the
        Baier et al. bound, `jaxmc.numerics.bounds.reward_upper_bound`) on
        the level alone: its exits folded into one state of value 0, their
        upper values into the choices' constants. Where that overflows (or
        exceeds `HUGE_BOUND`), `R h` with `h` from `_policy.steps_bound`."""
        if self.bound is None:
            raise ValueError("interval iteration needs a finite upper start")
        k, n = len(ext), len(starts)
        soc = np.repeat(np.arange(n), np.diff(np.append(starts, k)))
        leave = 1.0 - np.bincount(li, weights=di, minlength=k)
        out = leave > 0
        rows = np.concatenate([li, np.flatnonzero(out)])
        cols = np.concatenate([ti, np.full(int(out.sum()), n)])
        probs = np.concatenate([di, leave[out]])
        order = np.argsort(rows, kind="stable")
        maybe = np.append(np.ones(n, bool), False)
        u = self.bound(
            soc, rows[order], cols[order], probs[order], ext, maybe,
            np.zeros(n + 1), self.opt,
        )  # fmt: skip
        if np.isfinite(u) and u <= HUGE_BOUND:
            return np.full(n, u)
        # R h, `h` the largest expected time in the level (`_policy`) and `R`
        # the largest constant: one Bellman step from it stays below it
        A = sp.csr_matrix((di, (li, ti)), shape=(k, n))
        enabled = np.isfinite(ext)
        h = steps_bound(A, starts, ~enabled)
        top = float(np.max(np.where(enabled, ext, 0.0), initial=0.0))
        if h is not None and top >= 0 and np.isfinite(top * h.max()):
            return np.minimum(top * h * (1 + ROUNDING), u)
        raise UnsupportedError(
            "interval iteration: no finite upper bound on the expected reward "
            "(probabilities too small along the paths to the exits of a strongly "
            "connected component, and policy iteration found no bound either)",
            hint="use method='value_iteration'",
        )

    def _certify(self, Y, ext, starts, A, target, sweep=None):
        """From policy iteration (`_policy`), or None: for interval iteration
        bounds it certifies, for value iteration the optimal policy's
        values (a fixed point that value iteration from below reaches
        too: a policy's value is below the optimum for max, and above it
        for min, where no end components are left; where some are, a
        policy that stays in one has a singular system and nothing
        changes)."""
        if not self.sound:
            e = ext[:, 0]
            sigma = greedy(e + A @ Y[:, 0], starts, self.opt, len(e))
            r = policy_values(A, e, starts, self.opt, sigma, sweep)
            if r is None:
                return None
            V = r[0]
            # a fixed point (up to rounding) above the iterate from below,
            # else (a nearly singular system) keep iterating
            tol = 1e-9 * np.maximum(np.abs(V), 1.0)
            fixed = np.abs(_reduce(e + A @ V, starts, self.opt) - V) <= tol
            if not (np.all(fixed) and np.all(V >= Y[:, 0] - tol)):
                return None
            self.policy_levels += 1
            return V[:, None]
        rel = self.kw["relative"]
        C = certify(
            A, ext[:, 0], ext[:, 1], starts, self.opt, Y, target, rel, gaps, sweep
        )
        if C is not None:
            self.policy_levels += 1
        return C

    def _host(self, Y, ext, starts, A, target, limit=None):
        relative = self.kw["relative"]
        eps = self.kw["epsilon"]
        max_iters = int(self.kw["max_iters"] if limit is None else limit)
        best, best_at = np.inf, 0
        res = np.inf
        for it in range(1, max_iters + 1):
            new = _reduce(ext + A @ Y, starts, self.opt)
            if self.sound:
                res = float(gaps(new[:, 0], new[:, 1], relative).max(initial=0.0))
                done = res <= target
                total = float(np.sum(new[:, 1] - new[:, 0]))
            else:
                res = _measure(new, Y, relative)
                done = res < eps
            Y = new
            if not np.all(np.isfinite(Y)):
                return Y, it, res, Status.NONFINITE
            if done:
                return Y, it, res, Status.CONVERGED
            if not self.sound:
                continue
            # the bounds only move towards each other: a total gap that no
            # longer shrinks is held open (an end component, rounding)
            if total < best:
                best, best_at = total, it
            elif it - best_at >= STALL_WINDOW:
                return Y, it, res, Status.STALLED
        return Y, max_iters, res, Status.MAX_ITERS

    @staticmethod
    def _device_model(starts, k, li, ti, di):
        choice_ptr = np.append(starts, k)
        row_ptr = np.concatenate([[0], np.cumsum(np.bincount(li, minlength=k))])
        return from_arrays(choice_ptr, row_ptr, ti, di, nondeterministic=True)

    def _device(self, Y, ext, M, target, limit):
        n = Y.shape[0]
        kw = dict(relative=self.kw["relative"], max_iters=limit, throw=False)
        if self.sound:
            sol, lo, up = interval_iteration(
                M,
                ext[:, 0],
                Y[:, 0],
                Y[:, 1],
                self.opt,
                epsilon=target / 2,
                b_upper=ext[:, 1],
                **kw,
            )
            Y = np.stack([np.asarray(lo), np.asarray(up)], axis=1)
        else:
            sol = value_iteration(
                M, ext[:, 0], Y[:, 0], self.opt, epsilon=self.kw["epsilon"], **kw
            )
            Y = np.asarray(sol.value).reshape(n, 1)
        status = Status(int(sol.status))
        return Y, int(sol.iterations), float(sol.residual), status


def _summary(attempts):
    """The levels' hand-overs, one entry per kind (method, status, where,
    outcome): iterations summed, the largest residual, how many levels."""
    out = {}
    for a in attempts:
        size, note = a["note"].split(": ", 1)
        key = (a["method"], a["status"], a["layout"], note)
        if key not in out:
            out[key] = dict(a, note=note, levels=0, largest=0)
        o = out[key]
        if o["levels"]:
            o["iterations"] += a["iterations"]
            o["residual"] = max(o["residual"], a["residual"])
        o["levels"] += 1
        o["largest"] = max(o["largest"], int(size.split()[2]))
    for o in out.values():
        levels, largest = o.pop("levels"), o.pop("largest")
        where = f"level of {largest} states" if levels == 1 else (
            f"{levels} levels, the largest of {largest} states"
        )  # fmt: skip
        o["note"] = f"{where}: {o['note']}"
    return list(out.values())


def topological_iteration(
    soc: np.ndarray,
    indptr: np.ndarray,
    cols: np.ndarray,
    data: np.ndarray,
    b: np.ndarray,
    maybe: np.ndarray,
    x0: np.ndarray,
    opt: str = "max",
    *,
    upper: np.ndarray | None = None,
    epsilon: float = 1e-6,
    relative: bool = True,
    max_iters: int = 10000,
    throw: bool = True,
    plan: LevelPlan | None = None,
    bound=None,
):
    """Solve `x_s = opt_{c in s} (b_c + sum_t P(c,t) x_t)` on `maybe` (`x =
    x0` elsewhere) component by component, bottom first.

    **Arguments:**
    - `soc`: the state of each choice (sorted); `indptr`, `cols`, `data`:
      the choices' entries (row-grouped CSR on the host).
    - `b`: per-choice constants; `+inf` (min) or `-inf` (max) disables a
      choice.
    - `x0`: the start (and the values off `maybe`); value iteration from
      below the solution converges to the least fixed point.
    - `upper`: with it, interval iteration from `x0` below and `upper`
      above (sound when the Bellman operator has a unique fixed point on
      `maybe`: the caller removes end components, as for
      `jaxmc.solvers.interval_iteration`).
    - `epsilon`, `relative`, `max_iters`: the criterion (per level; the
      limit too).
    - `bound`: where `upper` is infinite, the upper start of each level of
      components comes from `bound(soc, rows, cols, probs, b, maybe, fixed,
      opt)` applied to the level alone (its exits at their upper values):
      a bound per component, where one bound for the whole system would
      overflow (a product of probabilities along a long path).

    **Returns:** `(solution, lower, upper, info)`: the `Solution` (for
    interval iteration the midpoint and the final gap), the bounds (None
    for value iteration) and a dict (`levels`, `components`, `largest`,
    `device_levels`).
    """
    if opt not in ("min", "max"):
        raise ValueError(f"`opt` must be 'min' or 'max', not {opt!r}")
    maybe = np.asarray(maybe, dtype=bool)
    b = np.asarray(b, dtype=np.float64)
    data = np.asarray(data, dtype=np.float64)
    soc, indptr, cols = (np.asarray(a, dtype=np.int64) for a in (soc, indptr, cols))
    disabled = np.inf if opt == "min" else -np.inf
    if plan is None:
        plan = plan_levels(soc, indptr, cols, data, b != disabled, maybe)
    sound = upper is not None
    x0 = np.asarray(x0, dtype=np.float64)
    X = np.stack([x0, np.asarray(upper, np.float64)], 1) if sound else x0[:, None]
    X = X.copy()
    kw = dict(epsilon=float(epsilon), relative=bool(relative), max_iters=max_iters)
    run = _Run(plan, cols, data, b, opt, sound, kw, bound)
    sp_, split = plan.state_ptr, plan.split
    deep = max(int(np.count_nonzero(split < sp_[1:])), 1)
    step = 2.0 * float(epsilon) / deep
    for k in range(plan.levels):
        a, s, e = int(sp_[k]), int(split[k]), int(sp_[k + 1])
        if s > a:
            run.singletons(X, a, s)
        if e > s:
            run.component_level(X, s, e, run.floor + step)
            if run.status != Status.CONVERGED:
                break
        if sound:
            g = gaps(X[plan.states[a:e], 0], X[plan.states[a:e], 1], relative)
            run.floor = max(run.floor, float(g.max(initial=0.0)))
    info = dict(
        levels=plan.levels,
        components=plan.components,
        largest=plan.largest,
        device_levels=run.device_levels,
        policy_levels=run.policy_levels,
        attempts=_summary(run.attempts),
    )
    if sound:
        lo, up = X[:, 0], X[:, 1]
        value = 0.5 * (lo + up)
        residual = float(gaps(lo[maybe], up[maybe], relative).max(initial=0.0))
    else:
        lo = up = None
        value = X[:, 0]
        residual = run.residual
    sol = Solution(
        value=value,
        status=np.int32(run.status),
        iterations=np.int32(run.iterations),
        residual=residual,
    )
    name = "Topological interval iteration" if sound else "Topological value iteration"
    return check_solution(sol, throw, name), lo, up, info
