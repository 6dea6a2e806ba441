"""The solution methods `method=` names, the default of each model type,
and the automatic choice (`AUTO`) between Gauss-Seidel in topological order
and Jacobi for DTMC/CTMC linear systems."""

from __future__ import annotations

import jax
import numpy as np

from ..errors import ModelCheckingError, UnsupportedError
from ..explore.model import ExplicitModel
from ..lang.ast import ModelType
from ..options import LINEAR_METHODS, MINMAX_METHODS
from ..solvers import scc_labels, topological_order


def check_type(model: ExplicitModel, opt):
    """Validate `opt` against the model type."""
    if model.model_type not in (ModelType.DTMC, ModelType.CTMC, ModelType.MDP):
        raise UnsupportedError(f"model type {model.model_type.value} is not supported")
    if model.is_nondeterministic:
        if opt not in ("min", "max"):
            raise ModelCheckingError(
                "an MDP property needs `min` or `max`",
                hint="write Pmin=?/Pmax=? or Rmin=?/Rmax=?",
            )
    elif opt not in (None, "min", "max"):
        raise ValueError(f"`opt` must be None, 'min' or 'max', not {opt!r}")


LINEAR = LINEAR_METHODS
MINMAX = MINMAX_METHODS


#: The default method of DTMC/CTMC linear systems: `solve_fixed` picks
#: Gauss-Seidel in topological order (on the host) where the system's graph
#: is nearly acyclic (at most `TOPOLOGICAL_MAX_CYCLIC` of the unknowns in
#: strongly connected components of more than one state), and Jacobi (on
#: the device layout) otherwise.
AUTO = "auto"

#: See `AUTO`. Why: where the graph is acyclic a Gauss-Seidel sweep in
#: topological order is a back-substitution (a couple of sweeps give the
#: exact value, where Jacobi takes thousands of iterations and stops
#: epsilon off); inside a cyclic component it is a plain Gauss-Seidel sweep
#: on the host, sequential and slower per sweep than Jacobi's vectorised
#: step. Small cyclic systems stay with Jacobi too, although its first
#: solve compiles: a host sweep has a fixed Python and scipy overhead
#: however small the system. Measurements: `benchmarks/RESULTS.md`
#: ("Steady-state and linear-solve choices").
TOPOLOGICAL_MAX_CYCLIC = 0.1

#: See `AUTO`: the host Gauss-Seidel chosen for the structure stops after
#: this many sweeps and hands its iterate to Jacobi (cyclic components that
#: mix slowly would otherwise cost a host sweep's overhead per iteration).
AUTO_GS_MAX_SWEEPS = 200

#: Systems with more entries than this are decomposed (`auto_linear`)
#: only where the graph looks nearly acyclic (`BACK_EDGE_MAX_ROWS`) or as
#: the fallback of a failed Krylov solve: on other graphs the host's
#: decomposition would cost seconds for nothing. On an accelerator the
#: bound is `TOPOLOGICAL_DEVICE_MAX_ENTRIES` (Jacobi's and BiCGStab's loops
#: are fast there, and the host's work would add to every property).
TOPOLOGICAL_MAX_ENTRIES = 1 << 24
TOPOLOGICAL_DEVICE_MAX_ENTRIES = 1 << 20

#: No system with more entries than this is decomposed on the host.
TOPOLOGICAL_LIMIT_ENTRIES = 1 << 27

#: A cheap hint of a nearly acyclic graph, read before paying for the
#: decomposition of a large system: the share of the unknowns with an
#: entry to an unknown numbered before them (states are numbered in BFS
#: order, so an acyclic graph has few; benchmarks/RESULTS.md, session 16).
BACK_EDGE_MAX_ROWS = 0.2


def default_method(model, method, criterion="sound"):
    """The method to run: `method` validated, or the default of the model
    type under `criterion`. "change" is PRISM's default exactly (Jacobi for
    DTMC/CTMC linear systems, value iteration for MDPs); "sound" takes
    `AUTO` for DTMC/CTMC (certified by `jaxmc.numerics.sound`) and interval
    iteration for MDPs (`criterion` validated by `SolveOptions`)."""
    if method is None:
        if model.is_nondeterministic:
            return "interval_iteration" if criterion == "sound" else "value_iteration"
        return AUTO if criterion == "sound" else "jacobi"
    if method not in LINEAR + MINMAX:
        raise ValueError(
            f"unknown `method` {method!r}; expected one of {LINEAR + MINMAX}"
        )
    if model.is_nondeterministic and method in LINEAR:
        raise ModelCheckingError(
            f"method {method!r} solves linear systems and cannot solve an MDP",
            hint="use method='value_iteration' or 'interval_iteration'",
        )
    return method


def back_edge_rows(n, data, state_row, cols, maybe) -> int:
    """How many unknowns have an entry to an unknown numbered before them."""
    back = (data != 0) & (cols < state_row)
    back &= maybe[state_row] & maybe[cols]
    rows = np.zeros(n, dtype=bool)
    rows[state_row[back]] = True
    return int(np.count_nonzero(rows))


def host_matrix(n, data, state_row, cols):
    """The masked system as a scipy matrix (the host Gauss-Seidel's input)."""
    import scipy.sparse as scipy_sparse

    live = data != 0
    return scipy_sparse.csr_matrix(
        (data[live], (state_row[live], cols[live])), shape=(n, n)
    )


def auto_linear(n, data, state_row, cols, maybe, auto_ok, fallback=False, system=None):
    """`(A, order)` for `AUTO`: the host matrix and its topological order
    if at most `TOPOLOGICAL_MAX_CYCLIC` of the unknowns lie in components of
    more than one state (Gauss-Seidel), else `(None, None)` (Krylov or
    Jacobi). Systems above the backend's bound (`TOPOLOGICAL_MAX_ENTRIES`)
    are decomposed only if they have few back edges, or with `fallback`
    (asked after the device's Krylov solve failed). `system`: the model's
    `host_system.HostSystem` where `data` are its probabilities masked to
    `maybe`'s rows: the same outcome from its cached decomposition
    (`HostSystem.auto`)."""
    k = int(maybe.sum())
    if not auto_ok or data.size > TOPOLOGICAL_LIMIT_ENTRIES or k == 0:
        return None, None
    small = TOPOLOGICAL_MAX_ENTRIES
    if jax.default_backend() != "cpu":
        small = TOPOLOGICAL_DEVICE_MAX_ENTRIES
    if system is not None:
        return system.auto(maybe, gate=data.size > small and not fallback)
    if data.size > small and not fallback:
        if back_edge_rows(n, data, state_row, cols, maybe) > BACK_EDGE_MAX_ROWS * k:
            return None, None
    A = host_matrix(n, data, state_row, cols)
    scc = scc_labels(A)
    size = np.bincount(scc[1])
    cyclic = int(np.count_nonzero(size[scc[1][maybe]] > 1))
    if cyclic > TOPOLOGICAL_MAX_CYCLIC * k:
        return None, None
    return A, topological_order(A, scc)
