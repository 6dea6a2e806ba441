"""The Krylov methods of the long-run chain (`steady_longrun`): BiCGStab(ℓ)
or restarted GMRES on the bordered Poisson system (`krylov.Bordered`), run
in chunks of `KRYLOV_CHUNK` SpMVs with the best iterate certified after
each, and able to pause and go on later from where it stopped
(`KrylovRun`).

**Why a Krylov solve may pause and resume.** On slowly mixing chains
(cluster: a two-dimensional walk whose drift is weak near its equilibrium)
BiCGStab's true residual stays on a plateau for thousands of SpMVs and then
falls by orders of magnitude within a few chunks: the Krylov space needs
that many vectors before it resolves the slow modes, and the number grows
with the model. A rate measured over a few chunks on the plateau predicts
nothing, and a window of fixed length declares it stalled, so every method
of the chain could fail where BiCGStab, given more steps, would succeed.
So a stall first only pauses the run (its recurrences kept): the chain
tries the next method, and if that fails too, the paused run goes on from
its state with the rest of the budget (`steady_longrun.budget_for`),
stopped only by convergence, the budget or a non-finite step.

**The shadow vector.** A first run uses BiCGStab's usual shadow vector
(the initial residual) and stall window (`KRYLOV_STALL_CHUNKS` chunks
without the best residual halving), so a chain where the next method
(Jacobi) answers reaches it as soon as BiCGStab stalls. A resumed run
restarts from its latest iterate with the right-hand side `b = r / d` as
the shadow vector: the jump chain's stationary vector `y = pi d` is the
slowest left direction of `I - A`; `b . y = pi r = g`, while the residual
of a start whose gain is `g0` has `(r - g0) / d . y = g - g0`: the better
the start, the more nearly the initial residual is orthogonal to the slow
direction, which then stays unresolved (benchmarks/RESULTS.md, "Stiff
steady states").
"""

from __future__ import annotations

import jax
import numpy as np

from ..layout import host_array
from ..solvers import Status
from .krylov import bicgstab_l, gmres as device_gmres
from .steady_solve import GMRES_RESTART


#: Relative residual (2-norm) at which the Krylov methods stop.
KRYLOV_RTOL = 1e-14

#: SpMVs per Krylov chunk: the iterate is certified after each (and
#: BiCGStab restarted from its true residual where it stopped).
KRYLOV_CHUNK = 1000

#: The degree of BiCGStab's minimal-residual polynomial per cycle
#: (`solvers.bicgstab_l_loop`): 2 keeps the residual's growth on stiff
#: chains small where plain BiCGStab (1) loses its accuracy or overflows.
BICGSTAB_ELL = 2

#: A Krylov run is stalled (paused) when its best true residual has not
#: halved over this many chunks, or over as many SpMVs as it had spent when
#: it last halved, whichever is longer (a plateau as long as the progress
#: before it).
KRYLOV_STALL_CHUNKS = 4


class KrylovRun:
    """One Krylov solve of the bordered system of `dev`
    (`steady_longrun._Device`) for the reward `r` from `z0` (global
    numbering), `method` "bicgstab" or "gmres"; `gap(z)` the largest ratio
    of a certified half-width to its tolerance (at most 1: done).

    `run` advances it; between two calls it keeps BiCGStab's recurrences,
    so a second call goes on with the same Krylov sequence. `total` counts
    all SpMVs, `best()` is the best iterate so far (global numbering, or
    None)."""

    def __init__(self, dev, r, z0, method, gap):
        B = dev.B
        _, self.op, at, _, _, _ = dev.get()
        self.back = dev.back_device
        # (the right-hand side on the device once per reward vector; `r` is
        # never written to: `Bsccs.per_reward`)
        self.b = B.per_reward(r, ("rhs", id(dev)), lambda: dev.device_vector(r / B.d))
        self.x = None if z0 is None else z0 if isinstance(z0, jax.Array) else at(z0)
        self.method, self.gap = method, gap
        self.state = None
        self.shadow = None  # None: the initial residual (BiCGStab's own)
        self.total = 0
        self._best = None  # (layout-ordered iterate, true residual)
        self._best_back = None  # `back` of the best iterate, made once
        self.halved_at = 0  # SpMVs when the best residual last halved
        self.gaps: list[tuple[int, float]] = []

    def best(self):
        """The best iterate (the BSCCs' numbering; a device array where the
        iterates are fully on this process's devices, else on the host)."""
        if self._best is None:
            return None
        if self._best_back is None:
            self._best_back = self.back(self._best[0])
        return self._best_back

    def _chunk(self, left: int):
        if self.method == "gmres":
            return device_gmres(
                self.op,
                self.b,
                self.x,
                rtol=KRYLOV_RTOL,
                restart=GMRES_RESTART,
                max_iters=left,
            )
        sol, self.state = bicgstab_l(
            self.op,
            self.b,
            self.x if self.state is None else self.state,
            ell=BICGSTAB_ELL,
            rtol=KRYLOV_RTOL,
            max_spmv=left,
            shadow=self.shadow,
        )
        if Status(int(sol.status)) != Status.MAX_ITERS:
            self.state = None  # stopped: restart from the true residual
        return sol

    def resume_with_rhs_shadow(self) -> None:
        """Restart from the latest iterate with the right-hand side as the
        shadow vector (see the module docstring), for a resumed run."""
        self.state, self.shadow = None, self.b

    def stalled(self) -> bool:
        return self.total - self.halved_at >= KRYLOV_STALL_CHUNKS * KRYLOV_CHUNK

    def run(self, max_iters: int, budget: int, stall: bool = True) -> Status:
        """Go on to `max_iters` SpMVs in all (counting earlier calls), and
        past it up to `budget` while the certified gaps of the last
        `KRYLOV_STALL_CHUNKS` chunks shrink at a rate that reaches 1 within
        `budget` (`_steady_rate`); with `stall=False` (a resumed run) to
        `budget` whatever the rate, and never STALLED. CONVERGED when the
        best iterate's bracket is within its tolerance (or the residual at
        `KRYLOV_RTOL`); STALLED (`stall`) on a plateau (`stalled`); BREAKDOWN
        on a non-finite step after a finite iterate, else NONFINITE;
        MAX_ITERS out of steps."""
        cap = max_iters if stall else budget
        status = Status.MAX_ITERS
        while self.total < cap or (stall and _steady_rate(self.gaps, budget)):
            limit = cap if self.total < cap else budget
            sol = self._chunk(min(limit - self.total, KRYLOV_CHUNK))
            spmv = int(sol.iterations)
            self.total += max(spmv, 1)
            res = float(sol.residual)
            if not np.isfinite(res):
                status = Status.NONFINITE
                self.state = None
                break
            best = self._best
            if best is None or res < 0.5 * best[1]:
                self.halved_at = self.total
            if best is None or res < best[1]:
                value = sol.value
                if not (isinstance(value, jax.Array) and value.is_fully_addressable):
                    value = host_array(value)
                self._best, self._best_back = (value, res), None
            self.x = sol.value
            self.gaps.append((self.total, self.gap(self.best())))
            if self.gaps[-1][1] <= 1.0 or res <= KRYLOV_RTOL:
                return Status.CONVERGED
            if spmv == 0:
                self.state = None
                status = Status.STALLED
                break
            if stall and self.stalled():
                status = Status.STALLED
                break
            status = Status.MAX_ITERS
        if self._best is not None and status == Status.NONFINITE:
            self.x = self._best[0]  # go on (if resumed) from the last good iterate
            status = Status.BREAKDOWN
        return status


def _steady_rate(gaps, budget) -> bool:
    """Whether the gaps `(iterations, gap)` measured after the last
    `KRYLOV_STALL_CHUNKS` chunks shrink at a rate that reaches 1 within
    `budget` iterations."""
    if len(gaps) <= KRYLOV_STALL_CHUNKS:
        return False
    (i0, g0), (i1, g1) = gaps[-1 - KRYLOV_STALL_CHUNKS], gaps[-1]
    if not (0 < g1 < g0) or i1 >= budget:
        return False
    need = (i1 - i0) * np.log(max(g1, 1.0)) / np.log(g0 / g1)
    return i1 + need <= budget
