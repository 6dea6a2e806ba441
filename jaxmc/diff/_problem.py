"""A property compiled into a pure, jittable function of the parameters.

`Problem(...)` does everything that depends on the structure only, once, on
the host: it executes the property's plan (`jaxmc.props.plan`, the one the
eager checker executes too: dualities, bounds, min/max, reward structures,
thresholds, filters), evaluating the state sub-formulas to masks, running the
qualitative precomputation (prob0/prob1, BSCCs; Storm's `graph.h`) on the
graph built at the build point, and picking the numerical scheme.
`Problem.__call__(theta)` is then a pure function of the parameter values
(`jax.grad`, `jax.jvp`, `jax.jacrev` and `jax.vmap` apply), compiled once:
new values never retrace.

How each property is differentiated:

- unbounded `P=? [φ U ψ]`, `R=? [F ψ]` (DTMC; CTMC on the embedded DTMC):
  one linear solve `(I - A) x = b` through `lax.custom_linear_solve`
  (implicit function theorem; the backward pass is one transposed solve,
  stopped when the gradient has converged: `linear_solve`'s `relevance`);
- total rewards `R=? [C]`: the graph analysis of `numerics.total_rewards`
  (positive-reward BSCCs / end components, decided at the build point),
  then a reachability reward solved as above;
- bounded `F<=k`, `C<=k`, `I=k` (DTMC, MDP): the `k` steps as a
  `lax.scan`, differentiated directly (with checkpointing, memory
  O(sqrt(k) n));
- CTMC `U<=t`, `U[t1,t2]`, `U>=t`, `C<=t`, `I=t`: uniformisation,
  `sum_i w_i P^i v` as a scan (`_bounded._uniformised`), with a lower bound
  as PRISM's two phases; differentiable in the rates and in `t`. The
  uniformisation rate `q` is derived from the rates at each point and held
  constant under differentiation (the exact sum does not depend on it);
  the number of terms is static, Fox–Glynn's right end at the build point
  with margin, raised by `ensure` for concrete points beyond it;
- nested operators (`P=? [ F P>0.5 [ ψ ] ]`): the inner operator's region
  (the states where its threshold holds) is decided at the build point by
  the eager checker (`jaxmc.check`'s defaults) and then held fixed, like
  the graph; the value and derivative are those of the outer operator with
  that region, as in Storm's and PRISM's parametric engines for nested
  operators under fixed regions. A concrete `jaxmc.solve(params=...)` builds
  at its own point (so it agrees with `jaxmc.check`); a `Problem` with an
  explicit build point, and a `sweep` (built at `build_params` or its
  first point), keep the build point's region at every point;
- CTL `E [...]`, `A [...]` at the top level (or under a filter): 0/1 on the
  graph of the build point, derivative 0;
- `S=? [φ]`, `R=? [S]`: stationary distributions of the BSCCs by power
  iteration, then made differentiable through the stationary equations
  `pi (I - P) = 0, sum pi = 1` (an implicit solve; GMRES for tangents and
  cotangents), combined with the absorption probabilities into the BSCCs;
- MDP `Pmax/Pmin`, `Rmax/Rmin`: value iteration (not differentiated), then
  the optimal scheduler is fixed and the value is re-expressed as the
  solution of that scheduler's linear system, differentiated implicitly.
  Where two choices are optimal (a tie) the optimal value is not
  differentiable; the derivative returned is that of the scheduler picked,
  which prefers choices that make progress towards the target (this keeps
  the linear system nonsingular).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._config import cpu_solver_options
from ..errors import SemanticError
from ..explore.model import ExplicitModel
from ..lang.ast import ModelType
from ..numerics import graph
from ..options import SolveOptions
from ..props import state_formulas
from ._bounded import BoundedSolves, site_terms
from ._execute import PlanExecution
from ._rewards import RewardSolves
from ._status import SolveLog
from ._steady import SteadySolves
from ._structure import GraphLog
from ._unbounded import UnboundedSolves
from ._values import TransitionValues


def _concrete(tree) -> bool:
    """No leaf of `tree` is a tracer (a call outside any transformation)."""
    return not any(
        isinstance(v, jax.core.Tracer) for v in jax.tree_util.tree_leaves(tree)
    )


class Problem(
    PlanExecution, UnboundedSolves, BoundedSolves, RewardSolves, SteadySolves
):
    """One property on one parametric model.

    **Arguments:**
    - `checked`: the `CheckedProgram` (with `parameters`).
    - `model`: the `ExplicitModel` built at `build_params`.
    - `prop`, `properties`: a checked property and its collection.
    - `build_params`: the build point (dict name → float).
    - `options`: a `jaxmc.SolveOptions` (`epsilon`, `max_iters`, `omega`;
      the fields left None take the differentiable path's defaults).

    Call it with a dict name → value (scalars, or traced values): returns the
    value at the initial state (or the values at the initial states, if
    several) as a JAX array; NaN where a solve did not converge.
    `solve_report(theta)` returns `(value, SolveReport)`: the value and the
    status, iterations and residual of every solve, traceable too (under
    `jax.jit` and `jax.vmap`, where nothing can raise, the report is how a
    caller learns why a value is NaN; `jaxmc.diff._status`).
    """

    def __init__(
        self,
        checked,
        model: ExplicitModel,
        prop,
        properties,
        build_params,
        options=None,
    ):
        self.checked = checked
        self.model = model
        self.names = tuple(checked.parameters)
        self.params = frozenset(self.names)
        self.opts = (options or SolveOptions()).resolved("params")
        self.build_params = {k: float(build_params[k]) for k in self.names}
        self.tv = TransitionValues(checked, model, build_params)
        #: state formulas (labels, named properties) as vectors over the states
        self.formula = state_formulas(model, properties)
        #: the qualitative precomputations, recorded to compare other points' graphs
        self.graph = GraphLog(model)
        m = model
        self.n = m.num_states
        self.mtype = m.model_type
        self.is_mdp = m.model_type == ModelType.MDP
        self.is_ctmc = m.model_type == ModelType.CTMC
        self.row = m.row_of_entry()
        self.coc = m.state_of_choice()
        self.soe = self.coc[self.row]
        self.col = np.asarray(m.col, dtype=np.int64)
        self.init = np.asarray(m.initial_states, dtype=np.int64)
        # PRISM's state order (lexicographic in the variables' values): the
        # solves' diagonal layout (`layout.sweep_dia`) is found in it
        st = np.asarray(m.states)
        self.lex = np.lexsort(st.T[::-1]) if st.ndim == 2 and st.shape[1] else None
        self.host: dict = {"tv": self.tv.arrays, "init": self.init.astype(np.int32)}
        self.statics: dict = {}
        self._rewards: dict = {}
        self.traces = 0
        #: where the plan's solves record their outcome (`solve_report`)
        self.log = SolveLog()
        self._plan = self._compile(prop.expr)
        self.arrays = jax.tree_util.tree_map(jnp.asarray, self.host)
        self._make_jits()

    # ------------------------------------------------------------ plumbing

    def _run(self, arrays, theta):
        self.traces += 1  # Python side effect: counts traces, not calls
        x = self._plan(arrays, theta)
        if self.reduced:  # a filter: one value for the model
            return x
        return x[arrays["init"][0]] if self.init.size == 1 else x[arrays["init"]]

    def _run_report(self, arrays, theta) -> tuple:
        """`_run` and the `SolveReport` of its solves."""
        with self.log.collect() as report:
            x = self._run(arrays, theta)
            return x, report()

    def solve_report(self, theta) -> tuple:
        """`(value, SolveReport)` at `theta` (a dict name → value, as for
        calling the problem): the value and the outcome of every solve.
        Not differentiable (`jax.grad` the problem itself); traceable under
        `jax.jit` and `jax.vmap`."""
        self._check_names(theta)
        th = {k: _f64(theta[k]) for k in self.names}
        if _concrete(th):
            return self._jit(self.arrays, th)
        return self._jit_report_nested(self.arrays, th)

    def _make_jits(self):
        """The compiled entry points. With `cpu_solver_options` (the CPU
        backend), a top-level call compiles with them; a nested jit (under
        `jit`, `vmap`, `jvp`) takes no compiler options, so only eager calls
        and eager `jax.grad`/`jax.vjp` get them, the latter through a
        `custom_vjp` whose forward (the value and the VJP's residuals) and
        backward passes are each a top-level call on concrete arrays. Both
        passes are `jax.vjp` of the same function, so the gradient is the
        same as without it."""
        opts = cpu_solver_options()
        self._jit_nested = jax.jit(self._run)
        self._jit_report_nested = jax.jit(self._run_report)
        # (a concrete call computes the report too: `solve_report` and the
        # eager API share this one compiled function)
        self._jit = jax.jit(self._run_report, compiler_options=opts)
        self._reverse = None
        if opts is None:
            return
        fwd_jit = jax.jit(
            lambda a, th: jax.vjp(lambda t: self._run(a, t), th), compiler_options=opts
        )
        bwd_jit = jax.jit(lambda vjp_fn, g: vjp_fn(g)[0], compiler_options=opts)

        @jax.custom_vjp
        def reverse(th):
            return self._jit_nested(self.arrays, th)

        def fwd(th):
            if _concrete(th):
                return fwd_jit(self.arrays, th)
            return jax.vjp(lambda t: self._jit_nested(self.arrays, t), th)

        def bwd(vjp_fn, g):
            if _concrete((vjp_fn, g)):
                return (bwd_jit(vjp_fn, g),)
            return (vjp_fn(g)[0],)

        reverse.defvjp(fwd, bwd)
        self._reverse = reverse

    def __call__(self, theta):
        self._check_names(theta)
        th = {k: _f64(theta[k]) for k in self.names}
        if _concrete(th):
            return self._jit(self.arrays, th)[0]
        if self._reverse is not None:
            try:
                return self._reverse(th)
            except TypeError as e:  # forward mode (jax.jvp) meets the custom_vjp
                if "custom_vjp" not in str(e):
                    raise
        return self._jit_nested(self.arrays, th)

    def _check_names(self, theta) -> None:
        missing = [k for k in self.names if k not in theta]
        if missing:
            raise SemanticError(
                f"`params` lacks a value for parameter `{missing[0]}`",
                hint=f"the parameters are: {', '.join(self.names)}",
            )
        extra = [k for k in theta if k not in self.params]
        if extra:
            raise SemanticError(
                f"`{extra[0]}` is not a parameter of the model (parameters: "
                f"{', '.join(self.names)})"
            )

    def ensure(self, theta) -> None:
        """Make the static numbers of uniformisation terms (CTMC time
        bounds, `I=t`, `C<=t`) large enough for the concrete points `theta`
        (recompiles if not)."""
        sites = self.statics.get("unif", [])
        if not sites:
            return
        try:
            th = {
                k: np.atleast_1d(np.asarray(theta[k], dtype=np.float64))
                for k in self.names
            }
        except (
            TypeError,
            jax.errors.ConcretizationTypeError,
            jax.errors.TracerArrayConversionError,
        ):
            return
        grown = False
        for site in sites:
            if "lam_jit" not in site:  # (compiled once per site)
                site["lam_jit"] = jax.jit(jax.vmap(site["lam_fn"], in_axes=(None, 0)))
            lam = site["lam_jit"](self.arrays, th)
            lam = float(np.max(np.asarray(lam)))
            if lam > site["cap"]:
                site_terms(site, 1.25 * lam)
                grown = True
        if grown:
            self._make_jits()
            self._batched = None

    def structure_differs(self, point) -> str | None:
        """At the concrete parameter point `point`, None if the entries
        positive there give the same qualitative precomputation as the
        built structure (then the compiled values are the model's at that
        point); else the name of the precomputation that differs."""
        th = {k: jnp.asarray(float(point[k]), jnp.float64) for k in self.names}
        if getattr(self, "_tv_jit", None) is None:
            self._tv_jit = jax.jit(self.tv.__call__)
        return self.graph.differs(np.asarray(self._tv_jit(self.arrays["tv"], th)))

    def vanishing(self, theta) -> np.ndarray:
        """For a batch `theta` (name -> [k] arrays), whether some entry is 0
        (or negative) at each point: only there can the graph differ."""
        if getattr(self, "_vanish_jit", None) is None:
            self._vanish_jit = jax.jit(
                jax.vmap(lambda a, t: jnp.any(self.tv(a, t) <= 0), in_axes=(None, 0))
            )
        th = {k: jnp.asarray(theta[k], jnp.float64) for k in self.names}
        return np.asarray(self._vanish_jit(self.arrays["tv"], th))

    def batched(self):
        """`theta (name -> [k] arrays) -> ([k] values, SolveReport)`:
        `jax.vmap` of `solve_report`, compiled once per batch size."""
        if getattr(self, "_batched", None) is None:
            self._batched = jax.jit(
                jax.vmap(self._run_report, in_axes=(None, 0)),
                compiler_options=cpu_solver_options(),
            )
        jb = self._batched
        return lambda th: jb(
            self.arrays, {k: jnp.asarray(th[k], jnp.float64) for k in self.names}
        )

    def values_fn(self):
        """The pure function `(arrays, theta) -> values at all states` (the
        one value of a filter, where the property is one)."""
        return self._plan

    def _put(self, key, value):
        self.host[key] = value
        return key

    def _probs(self, arrays, theta):
        """Entry probabilities (embedded DTMC for a CTMC) and raw values."""
        val = self.tv(arrays["tv"], theta)
        if not self.is_ctmc:
            return val, val
        e = jax.ops.segment_sum(
            val, arrays["soe"], num_segments=self.n, indices_are_sorted=True
        )
        return val / e[arrays["soe"]], val

    def _need_soe(self):
        self.host["soe"] = self.soe.astype(np.int32)

    # ------------------------------------------------------------ next

    def _next(self, phi, opt):
        rows = self.row.astype(np.int32)
        k = self._put("next_phi", phi[self.col].astype(np.float64))
        self.host["row"] = rows
        m = self.model.num_choices

        def plan(arrays, theta):
            P, _ = self._probs(arrays, theta)
            q = jax.ops.segment_sum(
                P * arrays[k], arrays["row"], num_segments=m, indices_are_sorted=True
            )
            return self._group(arrays, q, opt)

        return plan

    def _group(self, arrays, q, opt):
        if not self.is_mdp:
            return q
        self.host.setdefault("coc", self.coc.astype(np.int32))
        f = jax.ops.segment_max if opt == "max" else jax.ops.segment_min
        return f(q, arrays["coc"], num_segments=self.n, indices_are_sorted=True)

    # ------------------------------------------------------------ until

    def _until(self, phi, psi, opt):
        """Unbounded `φ U ψ`: the qualitative precomputation, then one
        linear solve (DTMC, CTMC's embedded DTMC) or the optimal scheduler's
        system (MDP)."""
        if self.is_mdp:
            no, yes = self.graph(
                graph.prob01_max if opt == "max" else graph.prob01_min, phi, psi
            )
        else:
            no, yes = self.graph(graph.prob01, phi, psi)
        maybe = ~no & ~yes
        fixed = yes.astype(np.float64)
        if self.is_mdp:
            return self._mdp(maybe, fixed, None, None, opt)
        return self._dtmc_linear(maybe, fixed, None)


def _f64(v):
    """`v` as a float64 JAX value, without a conversion op where it already
    is one: under an un-jitted `jax.grad` each op costs tracing and
    linearization time on every call (16 conversions were 40% of a
    16-parameter `jax.grad(problem)` call's host time)."""
    if isinstance(v, jax.core.Tracer) and v.dtype == jnp.float64 and v.ndim == 0:
        return v  # (weak-typed or not: one more compiled signature at most)
    return jnp.asarray(v, jnp.float64)
