"""Certified long-run averages of the BSCCs of a DTMC or CTMC: the gain
`g_B = pi_B . r` of each BSCC `B` for a reward rate `r` (`S=? [phi]` is the
reward `r = 1_phi`), with a bound on its error that does not depend on how
the solve stopped.

**The certificate.** For any vector `h` over a BSCC, `D = r + Q h` (`Q` the
generator, `P - I` for a DTMC) satisfies `pi D = pi r + (pi Q) h = g`: the
gain is a convex combination of the `D_s`, so `min_B D <= g_B <= max_B D`.
The bracket is computed on the host in float64 from the model's own rates
with a rounding allowance (`certify`), so it holds however `h` was found
(any method, any layout, float32 included); its width is the residual of
the Poisson equation `Q h = g - r`, which every method below drives to 0.
A gain is reported as the bracket's midpoint and `bound` is its half-width:
a certified bound on the absolute error (up to the model's rates being
what the floats hold). Stopping on the change between iterates, PRISM's
criterion, bounds nothing: on slowly mixing chains it stops far from `g`.

**The methods** (`chain`), each handing its best `h` to the next; each
attempt is certified (the Krylov methods every chunk of SpMVs), the
first whose bracket meets `epsilon` (relative to the gain's magnitude, or
absolute; or float64's floor, `ROUNDING_FLOOR`) wins, and failed ones are
recorded as `Attempt`s:
- "direct": sparse LU of the bordered Poisson system (`_poisson_matrix`)
  on the host, for systems up to `DIRECT_MAX_STATES` first (not on a device
  layout), and as the last resort up to `DIRECT_FALLBACK_MAX_STATES`;
- "bicgstab": BiCGStab(2) on the bordered system (`krylov.Bordered`), in
  the jump-chain scaling (rows divided by the exit rate, Jacobi
  preconditioning), restarted from its true residual where it stops
  (`steady_krylov`; `BICGSTAB_ELL` there: why not plain BiCGStab); on a
  plateau it pauses, and goes on from its state after the next method
  ("resume", with the default `max_iters` only) up to the budget;
- "jacobi": the stationary and the Poisson Jacobi iterations together
  (`krylov.pair_jacobi`), stopping on the certificate; what converges on
  stiff chains where the Krylov methods break down (tandem);
- "gmres": restarted GMRES from the best iterate so far;
- "power": relative value iteration on the uniformised chain
  (`krylov.relative_value_iteration`), stopping on the certificate.
Default order: direct (small), bicgstab, jacobi, bicgstab resumed, gmres,
power, direct (if it fits); `method="jacobi"` (and "gauss_seidel", which
runs as Jacobi, noted in the attempt) or `"power"` put that method first
(a paused BiCGStab resumes after the method that follows it); with
`precision="fp32"` the value iteration runs first in float32 (certified in
float64 all the same). All but "direct" run on the device layout (or plain
JAX CSR on the host), `max_iters` matrix-vector products (steps) each;
with the default `max_iters` (not given), a method whose certified bracket
shrinks at a rate that reaches epsilon within `BUDGET_FACTOR` times that
goes on (`budget_for`), and a paused BiCGStab resumes with what is left of
that budget (`steady_krylov`: why a Krylov plateau is no stall).
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..errors import ConvergenceError
from ..layout import host_array, make_layout
from ..solvers import Status
from .krylov import Bordered, pair_jacobi, relative_value_iteration
from .matrices import build_matrix, build_ordered, host_csr, layout_name
from .result import Attempt
from .steady_bsccs import Bsccs, certify
from .steady_krylov import KrylovRun
from .steady_solve import canonical, system_kind


#: Systems up to this many unknowns go to sparse LU first.
DIRECT_MAX_STATES = 1000

#: The chain's last resort: sparse LU up to this many unknowns (its fill-in
#: on lattice-like chains makes larger ones slow or too big).
DIRECT_FALLBACK_MAX_STATES = 200_000

#: With the default `max_iters` (not given by the caller) a method may run
#: up to this many times as long while the rate of its certified bracket
#: predicts convergence within that (`budget_for`).
BUDGET_FACTOR = 10

#: The certified iterations (Jacobi, power) are stalled when their bracket
#: stays within 1% over this many steps (`krylov._progress`).
STALL_WINDOW = 2000

#: Uniformisation rate of the value iteration: this factor times the largest
#: exit rate of the BSCC (above 1: a self-loop everywhere, so aperiodic).
UNIFORM_FACTOR = 1.02

_U = np.finfo(np.float64).eps

__all__ = ["Bsccs", "budget_for", "certify", "chain", "gains"]


def _poisson_matrix(B: Bsccs):
    """The bordered Poisson system of `krylov.Bordered` as a scipy matrix:
    `I - A` without the representatives' columns, and each BSCC's gain in
    its representative's column with weight `1/d`."""
    is_rep = np.zeros(B.k, dtype=bool)
    is_rep[B.reps] = True
    keep = ~is_rep[B.dst]
    diag = np.arange(B.k)
    rows = np.concatenate([B.src[keep], diag[~is_rep], diag])
    cols = np.concatenate([B.dst[keep], diag[~is_rep], B.reps[B.lab]])
    vals = np.concatenate(
        [-B.val[keep] / B.d[B.src[keep]], np.ones(B.k - len(B.reps)), 1.0 / B.d]
    )
    return sp.csc_matrix((vals, (rows, cols)), shape=(B.k, B.k))


def _host_h(B: Bsccs, z) -> np.ndarray:
    """`h` of the bordered unknowns `z` (on the device or the host), on the
    host."""
    return _split(B, host_array(z, np.float64))[0]


def _split(B: Bsccs, z):
    """`(h, g)` from the bordered unknowns `z`."""
    g = np.asarray(z)[B.reps].copy()
    h = np.asarray(z, dtype=np.float64).copy()
    h[B.reps] = 0.0
    return h, g


class _Device:
    """The jump chain on `dm`'s layout (CSR for None), and the bordered
    operator on it, built on first use (the "direct" method needs
    neither)."""

    def __init__(self, B: Bsccs, dm, rank):
        self.B, self.dm, self.rank = B, dm, rank
        self._built = None
        self._t = None
        self._inverse = None
        self._order = None

    def get(self):
        if self._built is None:
            import jax.numpy as jnp

            B = self.B
            A = canonical(
                sp.csr_matrix((B.val / B.d[B.src], (B.src, B.dst)), shape=(B.k, B.k))
            )
            kind, fallback = system_kind(A, self.dm, self.rank)
            mat, order = build_ordered(
                A.indptr, A.indices, A.data, A.shape, kind, self.rank, fallback
            )
            at = (lambda v: v) if order is None else order.apply
            back = (lambda v: v) if order is None else order.undo
            is_rep = np.zeros(B.k, dtype=bool)
            is_rep[B.reps] = True
            lab = at(B.lab)
            pos = np.nonzero(at(is_rep))[0]
            rep_pos = np.empty(B.nb, dtype=np.int64)
            rep_pos[lab[pos]] = pos
            op = Bordered(
                mat,
                jnp.asarray(at(is_rep)),
                jnp.asarray(lab, jnp.int32),
                jnp.asarray(rep_pos, jnp.int32),
                jnp.asarray(at(1.0 / B.d), jnp.float64),
            )
            self._built = (mat, op, at, back, lab, rep_pos)
            self._order = order
        return self._built

    def transposed(self):
        """The jump chain's transpose on the layout, in the same numbering."""
        if self._t is None:
            B = self.B
            mat, _, at, _, _, _ = self.get()
            AT = canonical(
                sp.csr_matrix((B.val / B.d[B.src], (B.dst, B.src)), shape=(B.k, B.k))
            )
            perm = np.asarray(at(np.arange(B.k)))  # layout slot -> state
            if not np.array_equal(perm, np.arange(B.k)):
                AT = canonical(AT[perm][:, perm])
            self._t = _same_layout(AT, layout_name(mat))
        return self._t

    def device_vector(self, v):
        """The host vector `v` (the BSCCs' numbering) on the device, in the
        layout's order."""
        import jax.numpy as jnp

        return jnp.asarray(self.get()[2](v), jnp.float64)

    def back_device(self, y):
        """A device vector in the layout's order back in the BSCCs'
        numbering, on the device (the inverse order moved there once)."""
        import jax.numpy as jnp

        self.get()
        if self._order is None:
            return y
        if not isinstance(y, jnp.ndarray):
            return self._order.undo(y)
        if self._inverse is None:
            self._inverse = jnp.asarray(self._order.inverse, jnp.int32)
        return y[self._inverse]

    @property
    def name(self) -> str:
        return layout_name(self.get()[0])


def _same_layout(A, name: str):
    """`A` on the layout `name` (of the jump chain's matrix), in the given
    numbering; the diagonal layout, where `A` is no few diagonals, as
    compact."""
    if name == "dia":
        try:
            return make_layout(host_csr(A.indptr, A.indices, A.data, A.shape), "dia")
        except ValueError:
            name = "compact"
    return build_matrix(A.indptr, A.indices, A.data, A.shape, name)


def _window(max_iters: int) -> int:
    """The certified iterations' measuring window: `STALL_WINDOW`, or a
    quarter of a smaller `max_iters` (so that a rate is measured before
    it)."""
    return max(min(STALL_WINDOW, int(max_iters) // 4), 16)


def _power(dev: _Device, r, h0, epsilon, relative, max_iters, budget, fp32=False):
    """Relative value iteration from `h0` (matrix and iterate in float32 if
    `fp32`); `(h, status, iterations)`."""
    import jax.numpy as jnp

    B = dev.B
    mat, _, at, back, lab, rep_pos = dev.get()
    dt = jnp.float32 if fp32 else jnp.float64
    if fp32:
        from .precision import to_precision

        mat = to_precision(mat, "fp32")
    q = UNIFORM_FACTOR * B.segment(np.maximum, B.d)[B.lab]
    h0 = np.zeros(B.k) if h0 is None else h0
    sol = relative_value_iteration(
        mat,
        at(B.d),
        at(r),
        at(q),
        lab,
        rep_pos,
        B.nb,
        jnp.asarray(at(h0), dt),
        epsilon=epsilon,
        relative=relative,
        max_iters=max_iters,
        window=_window(max_iters),
        budget=budget,
    )
    h = back(np.asarray(sol.value, dtype=np.float64))
    return h, Status(int(sol.status)), int(sol.iterations)


def _jacobi(dev: _Device, r, h0, epsilon, relative, max_iters, budget):
    """`krylov.pair_jacobi` from `h0`; `(h, status, iterations)`."""
    import jax.numpy as jnp

    B = dev.B
    mat, _, at, back, lab, rep_pos = dev.get()
    AT = dev.transposed()
    h0 = np.zeros(B.k) if h0 is None else h0
    sol = pair_jacobi(
        mat,
        AT,
        at(B.d),
        at(r),
        lab,
        rep_pos,
        B.nb,
        jnp.asarray(at(h0), jnp.float64),
        epsilon=epsilon,
        relative=relative,
        max_iters=max_iters,
        window=_window(max_iters),
        damped=not B.aperiodic(),
        budget=budget,
    )
    h = back(np.asarray(sol.value, dtype=np.float64))
    return h, Status(int(sol.status)), int(sol.iterations)


def budget_for(max_iters: int, given: bool) -> int:
    """The most SpMVs (steps) a method of the chain may take: `max_iters`
    where the caller gave it (a hard cap, as PRISM's `-maxiters`), else
    `BUDGET_FACTOR` times the default, spent only while the method's
    measured rate predicts convergence within it: the largest chains
    (tandem) converge steadily but need more steps than the default, and a
    cut there would fail a solve that is a constant factor from done."""
    return int(max_iters) if given else BUDGET_FACTOR * int(max_iters)


def chain(method, k: int, precision: str, host: bool = True, resume: bool = False):
    """The methods tried, in order, and the note on the first (see the
    module docstring; `host`: the system is not on a device layout, where
    small systems go to LU first; `resume`: the budget exceeds `max_iters`,
    so a paused BiCGStab may go on, "resume")."""
    iterative = ["bicgstab", "jacobi", "gmres", "power"]
    if method in ("jacobi", "gauss_seidel"):
        iterative = ["jacobi", "bicgstab", "gmres", "power"]
    if method == "power" or precision == "fp32":
        iterative = ["power", "bicgstab", "jacobi", "gmres"]
    if precision == "fp32":
        iterative = ["power32"] + iterative
    if resume and "bicgstab" in iterative[:-1]:
        # A paused BiCGStab goes on after the method that follows it.
        at = iterative.index("bicgstab") + 2
        iterative = iterative[:at] + ["resume"] + iterative[at:]
    small = host and k <= DIRECT_MAX_STATES and precision != "fp32"
    first = ["direct"] if small and method in (None, "auto") else []
    last = ["direct"] if k <= DIRECT_FALLBACK_MAX_STATES and not first else []
    note = ""
    if method == "gauss_seidel":
        note = "gauss_seidel runs as Jacobi here (no device Gauss-Seidel)"
    return first + iterative + last, note


def gains(
    B: Bsccs,
    r,
    *,
    method=None,
    epsilon=1e-6,
    relative=True,
    max_iters=10000,
    throw=True,
    dm=None,
    rank=None,
    precision="fp64",
    budget=None,
):
    """The certified gain of every BSCC of `B` for the reward `r` (local).
    Each method runs `max_iters` SpMVs (steps), or up to `budget` (default
    `max_iters`) while its measured rate predicts convergence within it
    (`budget_for`). `rank`: None, or a function giving the unknowns'
    lexicographic ranks, called only when the system's layout is built.

    **Returns:** `(mid, half, attempts, final)`: midpoints and half-widths
    of the certified brackets per BSCC, the failed `Attempt`s (oldest first)
    and the last `Attempt` (the one that produced the result). Raises
    `ConvergenceError` listing every attempt when the whole chain fails and
    `throw`; else the best bracket found is returned (its `half` is still
    certified, only above `epsilon`)."""
    r = np.asarray(r, dtype=np.float64)
    budget = max(max_iters, max_iters if budget is None else int(budget))
    # (the system's layout, built once per layout asked for: `Bsccs.device`)
    key = None if dm is None else dm.requested
    dev = B.device(key, lambda: _Device(B, dm, None if rank is None else rank()))
    methods, note = chain(method, B.k, precision, dm is None, budget > max_iters)
    paused = None  # a stalled BiCGStab run, to go on with the budget
    attempts: list[Attempt] = []
    # (h = 0: the reward's own range; the same for every check of `r`)
    lo, hi, _ = B.per_reward(r, "zero", lambda: certify(B, r, np.zeros(B.k)))
    zero = lambda: np.zeros(B.k)  # noqa: E731
    best = (0.5 * (lo + hi), 0.5 * (hi - lo), zero)  # (mid, half, h on the host)
    last_z: list = [None, None]  # the last iterate certified, and its bracket

    def bracket(z):
        """`certify` of the bordered iterate `z` (a device array stays
        there), kept for the same `z` asked again."""
        if last_z[0] is not z:
            last_z[:] = [z, certify(B, r, z, bordered=True)]
        return last_z[1]

    def gap(z):
        lo, hi, floor = bracket(z)
        return _gap(0.5 * (lo + hi), 0.5 * (hi - lo), epsilon, relative, floor)

    def start(best):
        """The bordered start of a Krylov run from `best`; the first run's
        (from h = 0) on the device, once per reward vector and layout."""
        if best[2] is zero:
            return B.per_reward(r, ("z0", id(dev)), lambda: dev.device_vector(z0()))
        return z0()

    def z0():
        z = best[2]().copy()
        z[B.reps] = best[0][B.lab[B.reps]]
        return z

    for i, m in enumerate(methods):
        where = "host"
        z = h_new = None
        if m == "direct":
            h_new, status, iters = _direct(B, r), Status.CONVERGED, 0
            status = Status.BREAKDOWN if h_new is None else status
        elif m == "resume":
            if paused is None:
                continue
            run, paused = paused, None
            run.resume_with_rhs_shadow()
            done = run.total
            status = run.run(max_iters, budget, stall=False)
            z, iters, m = run.best(), run.total - done, "bicgstab"
            where = dev.name
        elif m in ("bicgstab", "gmres"):
            run = KrylovRun(dev, r, start(best), m, gap)
            status = run.run(max_iters, budget)
            z, iters = run.best(), run.total
            where = dev.name
            stopped = status in (Status.STALLED, Status.MAX_ITERS)
            if m == "bicgstab" and stopped and run.total < budget:
                paused = run
        elif m == "jacobi":
            h_new, status, iters = _jacobi(
                dev, r, best[2](), epsilon, relative, max_iters, budget
            )
            where = dev.name
        else:
            h_new, status, iters = _power(
                dev, r, best[2](), epsilon, relative, max_iters, budget, m == "power32"
            )
            where = dev.name
        residual, ok = float("inf"), False
        if z is not None or h_new is not None:
            if z is not None:
                lo, hi, floor = bracket(z)
                h = functools.partial(_host_h, B, z)
            else:
                lo, hi, floor = certify(B, r, h_new)
                h = functools.partial(np.asarray, h_new)
            mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
            half = half + _U * np.abs(mid)
            if np.max(half) < np.max(best[1]):
                best = (mid, half, h)
            residual = float(np.max(half))
            ok = _within(mid, half, epsilon, relative, floor)
        name = "power" if m == "power32" else m
        if ok:
            why = note if i == 0 else ""
            if methods[i] == "resume":
                why = "resumed from its state"
            last = Attempt(name, Status.CONVERGED, iters, residual, where, why)
            return best[0], best[1], attempts, last
        if status == Status.CONVERGED:
            status = Status.STALLED  # the solve stopped, the bracket is too wide
        got = z is not None or h_new is not None
        why = "bracket above epsilon" if got else "no iterate"
        if paused is not None and m == "bicgstab":
            why = f"{why}; paused"
        elif methods[i] == "resume":
            why = f"{why}; resumed"
        if i == 0 and note:
            why = f"{note}; {why}"
        attempts.append(Attempt(name, status, iters, residual, where, why))
    if throw:
        listing = "; ".join(a.describe() for a in attempts)
        raise ConvergenceError(
            f"the long-run average did not converge: every method failed ({listing})",
            hint="increase max_iters or use -epsilon with a larger value",
        )
    last = attempts.pop()
    return best[0], best[1], attempts, last


def _direct(B: Bsccs, r):
    """`h` by sparse LU of the bordered system, or None if LU fails."""
    try:
        lu = spla.splu(_poisson_matrix(B), permc_spec="COLAMD")
    except (RuntimeError, MemoryError):  # singular to working precision; fill-in
        return None
    return _split(B, lu.solve(r / B.d))[0]


#: A bracket within this many times its rounding allowance is accepted
#: whatever epsilon asks: no float64 evaluation of `D` certifies a tighter one
#: (a relative epsilon on a gain near 0, say). Its half-width is still reported.
ROUNDING_FLOOR = 8


def _gap(mid, half, epsilon, relative, floor) -> float:
    """The largest ratio of a half-width to what it must reach (at most 1:
    within epsilon)."""
    tol = epsilon * np.abs(mid) if relative else np.full_like(mid, epsilon)
    tol = np.maximum(tol, ROUNDING_FLOOR * floor)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(half <= tol, 0.0, half / tol)
    return float(np.max(ratio, initial=0.0))


def _within(mid, half, epsilon, relative, floor) -> bool:
    return _gap(mid, half, epsilon, relative, floor) <= 1.0
