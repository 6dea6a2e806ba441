"""Shared machinery of the numerics helpers: the result type, the device
matrix cache, one-step rewards, and `solve_fixed`, the one engine behind
unbounded reachability, reachability/total rewards and BSCC absorption:

    x_s = opt_{c in s} (b_c + sum_t P(c, t) x_t)   for s in `maybe`,
    x_s = fixed_s                                  otherwise.

Rows of non-`maybe` states are masked by *values* (never by shape), so the
compiled solver is reused for every property on a model.

Layouts (`layout=`): every iterative solve runs its SpMV on the device matrix
named by `layout`, one of `LAYOUTS`. `"auto"` is CSR on a CPU (XLA:CPU's
`segment_sum` is best there) and `jaxmc.layout.layout_kind` on a GPU (the
warp-segment layouts, which the solvers run through the fused Pallas
kernels). The compact layouts tabulate their values on the host, so they are
rebuilt for each solve from the (host) masked values; "auto" never picks them
(the host build costs seconds on large models), and where they cannot hold
the matrix (not square, more than 65536 distinct values) the warp layout with
the same lanes is used instead. `"dia"` (`jaxmc.layout.CompactDIA`) runs the
solve in PRISM's lexicographic state order, where a model whose reachable
states form a box is a few diagonals (a byte per row and diagonal, no
columns); it applies to the square systems of DTMCs and CTMCs (Jacobi,
power, BiCGStab, the steady-state solves) and falls back to `"compact"`
where the matrix is not a few diagonals in that order (`ordered_dia`) and
for MDPs. It is rebuilt for each solve (on the GPU where there is one:
`ordered_dia`); "auto" picks it on a GPU for the steady-state device solves,
whose system matrices are built per solve anyway (`steady._system_kind`).
`NumericResult.extra["layout"]` says which layout a solve ran on.

Precision (`precision=`, one of `PRECISIONS`): "fp64" (the default) or
"fp32", the float type of the matrix values and the iterate during the
iterative solves of `solve_fixed` (the SpMV and the Jacobi, power, value
and interval iteration loops; BiCGStab is refused in fp32, see
`solve_fixed`). fp32 halves the bytes the
SpMV moves (on an H200, a warp-full f32 SpMV of tandem c=2047: 108 µs
against 144 µs in f64); the graph precomputation, the masking and the
results stay float64. fp32 rounds at ~6e-8 relative, so its values agree
with fp64 to ~1e-5 relative, not to PRISM's 1e-6, and it takes no `epsilon`
below `FP32_MIN_EPSILON`. Gauss-Seidel runs on the host in float64 whatever
the precision. `NumericResult.extra["precision"]` says which precision a
solve ran in.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ModelCheckingError, UnsupportedError
from ..explore.model import ExplicitModel
from ..lang.ast import ModelType
from ..layout import (
    CSR,
    ELL,
    CompactDIA,
    CompactWarpELL,
    SlicedELL,
    SparseModel,
    VectorCSR,
    WarpELL,
    group_index,
    layout_kind,
    lex_order,
    make_layout,
    ordered_csr,
    ordered_dia,
)
from ..solvers import (
    Status,
    bicgstab,
    check_solution,
    gauss_seidel,
    interval_iteration,
    jacobi,
    power,
    value_iteration,
)
from ._timing import stage


@dataclass(frozen=True)
class NumericResult:
    """Per-state values plus how they were obtained.

    - `values`: float64 [n] (may hold `inf` for rewards).
    - `status`: the solver `Status` (CONVERGED for direct computations).
    - `iterations`, `residual`: from the iterative solver (0 if none ran).
    - `method`: the method used.
    """

    values: np.ndarray
    status: Status = Status.CONVERGED
    iterations: int = 0
    residual: float = 0.0
    method: str = "none"
    extra: dict = field(default_factory=dict, repr=False)


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

#: The names `layout=` takes (see the module docstring).
LAYOUTS = (
    "auto", "csr", "ell", "sell", "warp", "warp2", "compact", "compact2", "vector",
    "dia",
)  # fmt: skip
COMPACT = ("compact", "compact2")
#: Layouts built on the host from each solve's values (the device matrix
#: cached per model holds the structure only).
HOST_BUILT = COMPACT + ("dia",)


#: The names `precision=` takes (see the module docstring).
PRECISIONS = ("fp64", "fp32")

#: The smallest `epsilon` accepted with "fp32": about 8 float32 ulps (2^-23
#: = 1.2e-7 relative), so that PRISM's criterion `sup_norm < epsilon` can hold
#: above the rounding noise of an fp32 step instead of iterating to
#: `max_iters`.
FP32_MIN_EPSILON = 1e-6


def check_precision(precision: str, epsilon: float | None = None) -> str:
    """Validate `precision` and, for "fp32", that `epsilon` is reachable."""
    if precision not in PRECISIONS:
        raise ValueError(
            f"unknown `precision` {precision!r}; expected one of {PRECISIONS}"
        )
    if precision == "fp32" and epsilon is not None and epsilon < FP32_MIN_EPSILON:
        raise UnsupportedError(
            f"epsilon {epsilon:g} is below what fp32 can reach (float32 rounds at "
            f"~6e-8 relative; the smallest epsilon with fp32 is {FP32_MIN_EPSILON:g})",
            hint=f"use epsilon >= {FP32_MIN_EPSILON:g} with fp32, or precision fp64",
        )
    return precision


def to_precision(tree, precision: str):
    """`tree` (an array, a layout matrix, a `SparseModel`) with its floating
    arrays in `precision`; unchanged (the same object) for "fp64"."""
    if precision == "fp64":
        return tree

    def cast(leaf):
        is_array = isinstance(leaf, (jax.Array, np.ndarray))
        if is_array and jnp.issubdtype(leaf.dtype, jnp.floating):
            return jnp.asarray(leaf, jnp.float32)
        return leaf

    return jax.tree_util.tree_map(cast, tree)


def check_layout(layout: str) -> str:
    if layout not in LAYOUTS:
        raise ValueError(f"unknown `layout` {layout!r}; expected one of {LAYOUTS}")
    return layout


def on_gpu() -> bool:
    return jax.default_backend() == "gpu"


def resolve_layout(model: ExplicitModel, layout: str = "auto") -> str:
    """The concrete layout for `layout` on `model` ("auto": see the module
    docstring; the choice is cached per model)."""
    check_layout(layout)
    if layout != "auto":
        return layout
    if not on_gpu():
        return "csr"
    per = _CACHE.setdefault(model, {})
    if "auto" not in per:
        host = _host_csr(model.row_ptr, model.col, model.val,
                         (model.num_choices, model.num_states))
        per["auto"] = layout_kind(host, "gpu")
    return per["auto"]


def _host_csr(indptr, cols, vals, shape) -> CSR:
    """A `CSR` whose arrays stay numpy (the layouts' host-side builders read
    them without a round trip through the device)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return CSR(
        data=np.asarray(vals, dtype=np.float64),
        indices=np.asarray(cols, dtype=np.int32),
        row_ids=rows.astype(np.int32),
        indptr=indptr.astype(np.int32),
        shape=(int(shape[0]), int(shape[1])),
    )


def build_matrix(indptr, cols, vals, shape, kind: str):
    """Device layout `kind` (not "auto") of the host CSR `(indptr, cols,
    vals)`. A compact layout that cannot hold the matrix falls back to the
    warp layout with the same lanes."""
    if kind == "csr":
        return CSR.from_arrays(indptr, cols, vals, shape)
    host = _host_csr(indptr, cols, vals, shape)
    if kind == "dia":  # (no state order given here: `build_ordered` takes one)
        kind = "compact"
    if kind in COMPACT:
        lanes = 2 if kind == "compact2" else 1
        if shape[0] == shape[1]:
            try:
                return CompactWarpELL.from_csr(host, lanes=lanes)
            except ValueError:  # too many distinct values for the table
                pass
        return WarpELL.from_csr(host, lanes=lanes)
    return make_layout(host, kind)


def lex_rank(model: ExplicitModel, states=None) -> np.ndarray:
    """Each state's place in PRISM's lexicographic state order (the order
    of the diagonal layout), or with `states` (indices) each one's place
    among them: a permutation of `0..len(states)-1`, found in O(n) from the
    model's order (cached per model)."""
    per = _CACHE.setdefault(model, {})
    if "lex_order" not in per:
        per["lex_order"] = np.asarray(lex_order(model.states), dtype=np.int64)
    order = per["lex_order"]
    if states is None:
        states = np.arange(len(order))
    states = np.asarray(states, dtype=np.int64)
    local = np.full(len(order), -1, dtype=np.int64)
    local[states] = np.arange(len(states))
    sub = local[order]
    sub = sub[sub >= 0]  # the states, in lexicographic order
    rank = np.empty(len(states), dtype=np.int64)
    rank[sub] = np.arange(len(states))
    return rank


def build_ordered(
    indptr, cols, vals, shape, kind: str, rank=None, fallback: str = "compact"
):
    """`(matrix, order)`: `build_matrix` of the host CSR, reordered first by
    `jaxmc.layout.ordered_csr` where that pays for `kind` (a warp-segment
    layout of a square matrix whose segments carry much padding; the rows
    sorted by length within short windows). `order` is that `Permutation`,
    or None: the caller applies it to every vector of the solve
    (`order.apply`) and undoes it on the result (`order.undo`).

    `kind` "dia": the compact diagonal layout in the order of `rank` (each
    row's lexicographic rank), where the matrix is a few diagonals in it;
    else (or without `rank`) `fallback` ("auto": `layout_kind`'s choice on
    a GPU)."""
    host = None
    if kind == "dia":
        host = _host_csr(indptr, cols, vals, shape)
        got = None if rank is None else ordered_dia(host, rank)
        if got is not None:
            return got
        kind = layout_kind(host, "gpu") if fallback == "auto" else fallback
    if kind in COMPACT + ("warp", "warp2") and shape[0] == shape[1]:
        if host is None:
            host = _host_csr(indptr, cols, vals, shape)
        B, order = ordered_csr(host, kind)
        if order is not None:
            B = _host_csr(B.indptr, B.indices, B.data, shape)
            return build_matrix(B.indptr, B.indices, B.data, shape, kind), order
    return build_matrix(indptr, cols, vals, shape, kind), None


def layout_name(matrix) -> str:
    """The layout name of a device matrix."""
    if isinstance(matrix, SparseModel):
        matrix = matrix.matrix
    if isinstance(matrix, WarpELL):
        return "warp" if matrix.lanes == 1 else "warp2"
    if isinstance(matrix, CompactWarpELL):
        return "compact" if matrix.lanes == 1 else "compact2"
    if isinstance(matrix, VectorCSR):
        return "vector"
    if isinstance(matrix, CompactDIA):
        return "dia"
    names = {CSR: "csr", ELL: "ell", SlicedELL: "sell"}
    return names.get(type(matrix), type(matrix).__name__)


def sparse_model(choice_ptr, row_ptr, col, val, *, nondeterministic: bool,
                 kind: str = "csr") -> SparseModel:
    """A `SparseModel` from host arrays with its matrix in layout `kind`
    (for a compact kind the structure only: `valued` builds the matrix)."""
    choice_ptr = np.asarray(choice_ptr, dtype=np.int64)
    n, m = len(choice_ptr) - 1, len(row_ptr) - 1
    csr = CSR.from_arrays(row_ptr, col, val, (m, n))
    if kind in HOST_BUILT + ("csr",):
        matrix = csr
    else:
        matrix = build_matrix(row_ptr, col, val, (m, n), kind)
    return SparseModel(
        csr=csr,
        matrix=matrix,
        group_ids=jnp.asarray(
            np.repeat(np.arange(n), np.diff(choice_ptr)), dtype=jnp.int32
        ),
        n_states=n,
        n_choices=m,
        nondeterministic=nondeterministic,
        groups=group_index(choice_ptr) if nondeterministic else None,
    )


def sparse(model: ExplicitModel, kind: str = "csr") -> SparseModel:
    """The device matrix of `model` (cached per model and layout kind;
    `kind` may be "auto")."""
    kind = resolve_layout(model, kind)
    key = "csr" if kind in HOST_BUILT else kind
    per = _CACHE.setdefault(model, {})
    if key not in per:
        with stage("layout"):
            per[key] = jax.block_until_ready(sparse_model(
                model.choice_ptr, model.row_ptr, model.col, model.val,
                nondeterministic=model.is_nondeterministic, kind=key,
            ))
    return per[key]


def host_structure(model: ExplicitModel, M: SparseModel | None = None):
    """`(state of each choice, row of each entry, column of each entry,
    row pointers)` on the host: from the model's arrays, or from `M`."""
    if M is None:
        return (model.state_of_choice(), model.row_of_entry(), np.asarray(model.col),
                np.asarray(model.row_ptr))
    return (np.asarray(M.group_ids), np.asarray(M.csr.row_ids),
            np.asarray(M.csr.indices), np.asarray(M.csr.indptr))


def valued(M: SparseModel, kind: str, vals, indptr=None, cols=None) -> SparseModel:
    """`M` with entry values `vals` (host, CSR order) on layout `kind`: the
    compact layouts are built from them on the host (`indptr`, `cols`: the
    host structure), the others take them by `with_values` on the device."""
    if kind not in HOST_BUILT:
        return M.with_values(jnp.asarray(vals))
    kind = "compact" if kind == "dia" else kind  # (a non-square or MDP system)
    if indptr is None:
        _, _, cols, indptr = host_structure(None, M)
    mat = build_matrix(indptr, cols, vals, M.csr.shape, kind)
    return eqx.tree_at(lambda m: (m.csr, m.matrix), M,
                       (M.csr.with_values(jnp.asarray(vals)), mat))


def square_matrix(M: SparseModel, kind: str, vals, indptr, cols, rank=None):
    """`(matrix, order)` of a DTMC/CTMC system with entry values `vals`:
    `valued`'s matrix and None, or for "dia" `build_ordered`'s diagonal
    layout in the lexicographic order of `rank` and that `Permutation`."""
    if kind == "dia":
        return build_ordered(indptr, cols, vals, M.csr.shape, "dia", rank)
    return valued(M, kind, vals, indptr, cols).matrix, None


def undo_order(sol, order):
    """A solver's solution with its value back in the model's numbering
    (`order` a `Permutation`, or None)."""
    if order is None:
        return sol
    return eqx.tree_at(lambda s: s.value, sol, order.undo(sol.value))


def state_of_entry(model: ExplicitModel) -> np.ndarray:
    return model.state_of_choice()[model.row_of_entry()]


def exit_rates(model: ExplicitModel) -> np.ndarray:
    """E(s): the row sums of a CTMC's rate matrix (0 for absorbing states)."""
    return np.bincount(
        state_of_entry(model), weights=model.val, minlength=model.num_states
    )


def probabilities(model: ExplicitModel) -> np.ndarray:
    """Entry probabilities: `val` for DTMCs/MDPs; for a CTMC those of the
    embedded DTMC (`rate / E(s)`). An absorbing CTMC state has no entries;
    callers treat it as a self-loop (it is never a "maybe" state)."""
    if model.model_type == ModelType.CTMC:
        e = exit_rates(model)
        return model.val / e[state_of_entry(model)]
    return np.asarray(model.val, dtype=np.float64)


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


def choice_rewards(model: ExplicitModel, reward, probs=None) -> np.ndarray:
    """Expected one-step reward of each choice: `state[s] + sum_e P_e trans_e`."""
    m = model.num_choices
    r = np.zeros(m)
    if reward.state is not None:
        r += np.asarray(reward.state, dtype=np.float64)[model.state_of_choice()]
    if reward.transition is not None:
        p = probabilities(model) if probs is None else probs
        r += np.bincount(
            model.row_of_entry(), weights=p * np.asarray(reward.transition), minlength=m
        )
    return r


LINEAR = ("jacobi", "gauss_seidel", "power", "bicgstab")
MINMAX = ("value_iteration", "interval_iteration")


#: The default method of DTMC/CTMC linear systems: `solve_fixed` picks
#: Gauss-Seidel in topological order (on the host) where the system's graph
#: is nearly acyclic (at most `TOPOLOGICAL_MAX_CYCLIC` of the unknowns in
#: strongly connected components of more than one state), and Jacobi (on
#: the device layout) otherwise.
AUTO = "auto"

#: See `AUTO`. Why: where the graph is acyclic a Gauss-Seidel sweep in
#: topological order is a back-substitution (brp N=512: 2 sweeps, 8 ms, the
#: exact value, where Jacobi took 3,168 iterations and 1.1 s and stopped
#: 1.2e-6 off); inside a cyclic component it is a plain Gauss-Seidel sweep
#: on the host, sequential and slower per sweep than Jacobi's vectorised
#: step (polling N=9, half of its unknowns in one component: 3,165 sweeps
#: and 3.7 s against Jacobi's 0.5 s). Small cyclic systems stay with Jacobi
#: too, although its first solve compiles: a host sweep costs ~0.1-0.3 ms
#: of Python and scipy overhead however small the system (polling N=5, 240
#: states: 0.80 s warm on the host against Jacobi's 0.009 s).
TOPOLOGICAL_MAX_CYCLIC = 0.1

#: See `AUTO`: the host Gauss-Seidel chosen for the structure stops after
#: this many sweeps and hands its iterate to Jacobi (cyclic components that
#: mix slowly would otherwise cost ~0.1-0.3 ms of host overhead per sweep).
AUTO_GS_MAX_SWEEPS = 200

#: Systems with more entries than this keep Jacobi without looking at their
#: components (the host's decomposition would cost seconds).
TOPOLOGICAL_MAX_ENTRIES = 1 << 24


def default_method(model, method):
    if method is None:
        return "value_iteration" if model.is_nondeterministic else AUTO
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


def _result(sol, method, extra=None) -> NumericResult:
    return NumericResult(
        values=np.asarray(sol.value, dtype=np.float64),
        status=Status(int(sol.status)),
        iterations=int(sol.iterations),
        residual=float(sol.residual),
        method=method,
        extra=extra or {},
    )


def solve_fixed(
    model: ExplicitModel,
    probs: np.ndarray,
    maybe: np.ndarray,
    fixed: np.ndarray,
    b: np.ndarray,
    *,
    opt: str | None,
    method: str,
    epsilon: float,
    relative: bool,
    max_iters: int,
    throw: bool,
    upper: np.ndarray | None = None,
    layout: str = "auto",
    M: SparseModel | None = None,
    precision: str = "fp64",
) -> NumericResult:
    """Solve `x = opt(b + P x)` on `maybe`, `x = fixed` elsewhere.

    `probs` are the entry probabilities of `model` (or of `M` if given), `b`
    the per-choice constants (±inf disables a choice of an MDP). `upper` is an
    upper bound on the solution for interval iteration (which also needs the
    maybe states free of end components; see `jaxmc.numerics.reach`).
    `layout`: the device matrix the SpMV runs on (see the module docstring;
    `M`, if given, must have been built for the same layout). `precision`:
    the float type of the matrix and the iterate during the solve (see the
    module docstring); the values come back as float64.
    """
    check_precision(precision, epsilon)
    if precision == "fp32" and method == "bicgstab":
        # Measured: on brp N=16 BiCGStab in float32 stops "converged" (its
        # recursive residual 4e-7) at -7e-4 for a probability of 4.2e-4 (CSR;
        # ELL: -6.2): the recursive residual drifts from the true one.
        raise UnsupportedError(
            "BiCGStab is not reliable in fp32: its recursive residual drifts "
            "from the true residual and it can stop at a wrong value",
            hint="use method='jacobi' or 'power' with fp32, or precision fp64",
        )
    kind = resolve_layout(model, layout)
    host = host_structure(model, M)
    if M is None:
        M = sparse(model, kind)
    maybe = np.asarray(maybe, dtype=bool)
    fixed = np.where(maybe, 0.0, np.asarray(fixed, dtype=np.float64))
    if not maybe.any():
        return NumericResult(
            values=fixed.copy(), method="jacobi" if method == AUTO else method
        )
    rank = None
    if kind == "dia":
        if M.nondeterministic or M.n_states != model.num_states:
            kind = "compact"  # (choices are not states: no square system)
        else:
            rank = lex_rank(model)
    with stage("solve"):
        kw = dict(epsilon=epsilon, relative=relative, max_iters=max_iters, throw=throw)
        out = _solve_masked(M, kind, host, probs, maybe, fixed, b, upper, opt, method,
                            kw, precision,
                            auto_ok=layout == "auto" and precision == "fp64", rank=rank)
    return out


def _host_matrix(n, data, state_row, cols):
    """The masked system as a scipy matrix (the host Gauss-Seidel's input)."""
    import scipy.sparse as scipy_sparse

    live = data != 0
    return scipy_sparse.csr_matrix(
        (data[live], (state_row[live], cols[live])), shape=(n, n)
    )


def _auto_linear(n, data, state_row, cols, maybe, auto_ok):
    """`(A, order)` for `AUTO`: the host matrix and its topological order
    if at most `TOPOLOGICAL_MAX_CYCLIC` of the unknowns lie in components of
    more than one state (Gauss-Seidel), else `(None, None)` (Jacobi)."""
    k = int(maybe.sum())
    # (on an accelerator only small systems: there Jacobi's loop is fast and
    # the host's decomposition would add to every property)
    cap = TOPOLOGICAL_MAX_ENTRIES
    if jax.default_backend() != "cpu":
        cap >>= 4
    if not auto_ok or data.size > cap or k == 0:
        return None, None
    from ..solvers._gauss_seidel import scc_labels, topological_order

    A = _host_matrix(n, data, state_row, cols)
    scc = scc_labels(A)
    size = np.bincount(scc[1])
    cyclic = int(np.count_nonzero(size[scc[1][maybe]] > 1))
    if cyclic > TOPOLOGICAL_MAX_CYCLIC * k:
        return None, None
    return A, topological_order(A, scc)


def _solve_masked(M, kind, host, probs, maybe, fixed, b, upper, opt, method, kw,
                  precision="fp64", auto_ok=False, rank=None):
    soc, rows, cols, indptr = host
    n = M.n_states
    state_row = soc[rows]
    data = np.where(maybe[state_row], probs, 0.0)
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
    sweeps = 0  # host Gauss-Seidel sweeps before Jacobi took over (AUTO)
    if method == AUTO:
        A, order = _auto_linear(n, data, state_row, cols, maybe, auto_ok)
        method = "jacobi"
        if A is not None:  # chosen for the structure: bounded, then Jacobi takes over
            budget = min(int(kw["max_iters"]), AUTO_GS_MAX_SWEEPS)
            sol = gauss_seidel(
                A, bb, x0, order=order, **dict(kw, max_iters=budget, throw=False)
            )
            if Status(int(sol.status)) != Status.MAX_ITERS or budget == kw["max_iters"]:
                method = "gauss_seidel"
                sol = check_solution(sol, kw["throw"], "Gauss–Seidel")
                # a host solve, in float64
                extra.update(layout="host", precision="fp64")
            else:
                sweeps, x0 = int(sol.iterations), np.asarray(sol.value)
                kw = dict(kw, max_iters=int(kw["max_iters"]) - sweeps)
                extra["gauss_seidel_sweeps"] = sweeps
    elif method == "gauss_seidel":
        sol = gauss_seidel(_host_matrix(n, data, state_row, cols), bb, x0, **kw)
        extra.update(layout="host", precision="fp64")  # a host solve, in float64
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
        if sweeps:
            sol = sol.__class__(
                sol.value, sol.status, sol.iterations + sweeps, sol.residual
            )
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
        extra.update(lower=np.asarray(lo, np.float64), upper=np.asarray(hi, np.float64))
    else:  # pragma: no cover - validated by default_method
        raise ValueError(method)
    if "layout" not in extra:
        extra["layout"] = layout_name(A)
    return _result(sol, method, extra)


def expand_result(res: NumericResult, rep: np.ndarray, **extra) -> NumericResult:
    """`res`, solved on a quotient (`quotient`), read back on the original
    states: values and per-state extras (interval-iteration bounds) at
    `rep[s]`; `extra` added."""
    lifted = {k: np.asarray(v)[rep] if isinstance(v, np.ndarray) else v
              for k, v in (res.extra or {}).items()}
    lifted.update(extra)
    return NumericResult(
        res.values[rep], res.status, res.iterations, res.residual, res.method, lifted
    )


def quotient(model: ExplicitModel, probs, labels, count, inside, layout: str = "csr"):
    """Collapse end components: every state with `labels[s] = k >= 0` becomes
    one state; choices inside (`inside[c]`) are dropped, the others kept with
    successors renamed. Returns `(M, rep, keep, idx, probs)`: the quotient
    `SparseModel`, the new state of every old state, the old index of every
    kept choice, the old index of every kept entry and their probabilities.
    The caller restricts per-choice data with `keep`. The quotient's matrix
    is in `layout` (resolved for `model`)."""
    n = model.num_states
    ec = labels >= 0
    others = np.nonzero(~ec)[0]
    rep = np.empty(n, dtype=np.int64)
    rep[others] = np.arange(len(others))
    rep[ec] = len(others) + labels[ec]
    n2 = len(others) + count
    soc = model.state_of_choice()
    keep = np.nonzero(~inside)[0]
    keep = keep[np.argsort(rep[soc[keep]], kind="stable")]
    new_state = rep[soc[keep]]
    counts = np.bincount(new_state, minlength=n2)
    if (counts == 0).any():
        raise ModelCheckingError("an end component without exit was not removed")
    choice_ptr = np.concatenate([[0], np.cumsum(counts)])
    starts, ends = model.row_ptr[keep], model.row_ptr[keep + 1]
    lens = ends - starts
    idx = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(lens.sum())
    row_ptr = np.concatenate([[0], np.cumsum(lens)])
    M = sparse_model(
        choice_ptr, row_ptr, rep[model.col[idx]], np.zeros(len(idx)),
        nondeterministic=True, kind=resolve_layout(model, layout),
    )
    return M, rep, keep, idx, probs[idx]
