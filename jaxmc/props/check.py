"""Checking a property: execute its plan (`jaxmc.props.plan`) eagerly.

This is Storm's `SparseDtmcPrctlModelChecker` layer: it knows formulas, and
hands plain matrices and boolean masks to `jaxmc.numerics`, which knows none.
Every sub-formula evaluates to a vector over all states (numpy: bool, int or
float). A `filter` reduces a vector to one value, which then stands for every
state. What a property means (dualities, bounds, min/max, reward structures)
is decided by the plan, which the traced executor (`jaxmc.diff`) shares;
`E [ψ]` is `P>0 [ψ]` and `A [ψ]` is `P>=1 [ψ]`, checked on the graph
(`jaxmc.props.ctl`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import numerics
from ..errors import JaxmcError, ModelCheckingError, UnsupportedError
from ..explore.model import ExplicitModel
from ..lang import ast
from ..numerics import lra
from ..numerics.device import DeviceModel, note_layout
from ..numerics.result import Attempt
from ..numerics.timing import collect
from ..options import SolveOptions, check_options
from ..solvers import Status
from . import ltl, plan as P, rewardbound
from .ctl import path_quantifier
from .evaluate import evaluate_plain
from .filters import PRINTING, printout, reduce_filter
from .result import CheckResult, located
from .rewards import describe_state
from .strategy import optimal_scheduler
from .threshold import compare, undecided_error


def check_property(
    model: ExplicitModel,
    prop: Any,
    properties: Any,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
    all_states: bool = False,
    scheduler: bool = False,
) -> CheckResult:
    """Check one property (from `jaxmc.semantics.check_properties`) with
    `options` (`None`: the defaults), its solves on `device_model` (made
    from `options` if not given; the API keeps one per model and options).
    The value of a property without a top-level filter is computed in the
    initial states only, unless `all_states` (then `values` holds it in
    every state, as PRISM's `-exportvector` needs).
    With `scheduler`, the result carries the optimal memoryless scheduler
    of the top-level operator (`jaxmc.props.strategy`; `UnsupportedError`
    where there is none).

    A solve that does not converge raises nothing here: its status is in
    the result (`status`, `failure`), and the API raises
    (`raise_on_failure`) if the options say `throw`."""
    options = check_options(options)
    if device_model is None:
        device_model = DeviceModel.of(model, options)
    checker = _Checker(model, properties, options, device_model)
    start = time.perf_counter()
    expr = prop.expr
    text = getattr(prop, "text", None) or _format(expr)
    printed = None
    try:
        with collect() as stages:
            if not isinstance(expr, ast.Filter) and not all_states:
                # Without a filter, PRISM reports the value in the initial states.
                checker.needed = np.zeros(checker.n, dtype=bool)
                checker.needed[np.asarray(model.initial_states)] = True
            if isinstance(expr, ast.Filter):
                value = checker.filter(expr)
                values, is_filter = None, True
                if isinstance(value, np.ndarray):  # argmin/argmax/print: a vector
                    values, is_filter, value = value, False, None
                if expr.op in PRINTING:
                    printed = printout(expr, *checker.last_filter)
            elif all_states:
                values, value, is_filter = checker.eval(expr), None, False
            else:
                # PRISM evaluates an unfiltered property in the initial states only
                checker.active = np.zeros(model.num_states, dtype=bool)
                checker.active[np.asarray(model.initial_states)] = True
                values, value, is_filter = checker.eval(expr), None, False
        sched = optimal_scheduler(checker, expr) if scheduler else None
    except JaxmcError as e:
        raise located(e, prop, properties) from None
    checker.stats["total"] = time.perf_counter() - start
    for name in ("precompute", "layout", "solve", "compile"):
        checker.stats[name] = stages.get(name, 0.0)
    return CheckResult(
        property_text=text,
        values=values,
        initial_states=np.asarray(model.initial_states),
        filter_value=value,
        is_filter=is_filter,
        status=checker.status,
        iterations=checker.iterations,
        residual=checker.residual,
        bound_gap=checker.bound_gap,
        timing=checker.stats,
        lower=None if checker.bounds is None else checker.bounds[0],
        upper=None if checker.bounds is None else checker.bounds[1],
        method=checker.method,
        layout=checker.layout,
        precision=checker.precision,
        attempts=checker.attempts,
        bound=checker.reported_bound(expr),
        failure=checker.failure,
        printed=printed,
        scheduler=sched,
    )


def _format(expr: ast.Expr) -> str:
    from ..lang.printer import format_expr

    return format_expr(expr)


class _Checker:
    def __init__(
        self,
        model: ExplicitModel,
        properties: Any,
        options: SolveOptions,
        device_model: DeviceModel,
    ):
        self.model = model
        self.properties = properties
        self.options = options
        self.device_model = device_model
        self.n = model.num_states
        self.is_mdp = model.model_type == ast.ModelType.MDP
        self.is_ctmc = model.model_type == ast.ModelType.CTMC
        self.stats: dict[str, float] = {}
        self.status: str | None = None
        self.iterations: int | None = None
        self.residual: float | None = None
        self.bound_gap: float | None = None
        self.method: str | None = None
        self.layout: str | None = None
        self.precision: str | None = None
        self.attempts: tuple[Attempt, ...] = ()
        #: The last solve's certified absolute error bound (None: none).
        self.bound: float | None = None
        #: The values the last operator returned (what `bound` is about).
        self.last: np.ndarray | None = None
        #: The first solve that did not converge, as an `Attempt`.
        self.failure: Attempt | None = None
        #: (operand values, filter states) of the last filter evaluated.
        self.last_filter: tuple[np.ndarray, np.ndarray] | None = None
        #: (lower, upper) of the last solve, if it was interval iteration.
        self.bounds: tuple[np.ndarray, np.ndarray] | None = None
        #: The states whose value of the formula being evaluated matters; a
        #: threshold left undecided by interval iteration in one of them is
        #: an error (`jaxmc.props.threshold`).
        self.needed = np.ones(self.n, dtype=bool)
        #: Labels, and properties referred to by name with the `needed` mask
        #: they were evaluated under.
        self._label_cache: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
        self._resolving: set[str] = set()
        #: States where a plain top-level expression must evaluate without error.
        self.active: np.ndarray | None = None
        #: What the last solve was, for its scheduler (`jaxmc.props.strategy`).
        self.sched_ctx: tuple | None = None

    # ------------------------------------------------------------ expressions

    def eval(self, e: ast.Expr) -> np.ndarray:
        """The value of `e` in every state."""
        active, self.active = self.active, None  # only for the top-level `e`
        if isinstance(e, P.OPERATORS):
            return self.run(self._plan(e))
        if isinstance(e, ast.LabelRef):
            return self.label(e)
        if isinstance(e, (ast.Temporal, ast.RewardPath)):
            raise ModelCheckingError(
                "a path formula must appear inside P[...], R[...], E[...] or A[...]",
                e.span,
            )
        return evaluate_plain(e, self.model, self.eval, active)

    def bool(self, e: ast.Expr) -> np.ndarray:
        v = self.eval(e)
        if v.dtype != np.bool_:
            raise ModelCheckingError("expected a boolean-valued formula", e.span)
        return v

    @contextlib.contextmanager
    def _needing(self, mask: np.ndarray | None = None):
        """Evaluate sub-formulas whose value matters in `mask` (all states if
        None): an operator's operands, a filter's operand and states."""
        saved = self.needed
        self.needed = np.ones(self.n, dtype=bool) if mask is None else mask
        try:
            yield
        finally:
            self.needed = saved

    def label(self, e: ast.LabelRef) -> np.ndarray:
        name = e.name
        if name in self._label_cache:
            mask, needed = self._label_cache[name]
            if needed is None or not (self.needed & ~needed).any():
                return mask
        needed = None
        if name == "init":
            mask = np.zeros(self.n, dtype=bool)
            mask[np.asarray(self.model.initial_states)] = True
        elif name in self.model.labels:
            mask = np.asarray(self.model.labels[name], dtype=bool)
        else:
            target = self.properties.resolve_label(name) if self.properties else None
            if target is None:
                raise ModelCheckingError(f'unknown label or property "{name}"', e.span)
            if name in self._resolving:
                raise ModelCheckingError(f'property "{name}" refers to itself', e.span)
            self._resolving.add(name)
            try:
                mask = self.eval(target)
            finally:
                self._resolving.discard(name)
            needed = self.needed
        self._label_cache[name] = (mask, needed)
        return mask

    # -------------------------------------------------------------- operators

    def _plan(self, e: ast.Expr):
        return P.plan(e, self.model, self._scalar)

    def run(self, node) -> np.ndarray:
        """The values of a plan node in every state."""
        if isinstance(node, P.Formula):
            return self.eval(node.expr)
        if isinstance(node, P.Filter):
            value = self._filter(node)
            if isinstance(value, np.ndarray):
                return value
            if isinstance(value, tuple):
                raise UnsupportedError(
                    "a `range` filter cannot be used inside an expression",
                    node.node.span,
                )
            return np.full(self.n, value)
        if isinstance(node, P.Threshold):
            return self._apply_threshold(self.run(node.value), node)
        # An operator's operands matter in every state.
        with self._needing():
            if isinstance(node, P.Ctl):
                return path_quantifier(node, self.model, self.mask)
            if isinstance(node, P.LtlExists):
                return ltl.exists(self.model, node, self.mask)
            return self._value(node)

    def mask(self, f) -> np.ndarray:
        """A state formula of a plan as a boolean vector."""
        if isinstance(f, P.Formula):
            return self.bool(f.expr)
        if isinstance(f, P.AllStates):
            return np.ones(self.n, dtype=bool)
        if isinstance(f, P.Not):
            return ~self.mask(f.arg)
        return self.mask(f.left) & self.mask(f.right)

    def _value(self, node) -> np.ndarray:
        if isinstance(node, P.Holds):
            # A state formula as a path formula holds at time 0 or not at all.
            values = self.mask(node.phi).astype(np.float64)
            self.bounds, self.bound, self.last = None, 0.0, values  # exact
            return values
        if isinstance(node, P.Next):
            return self._next(self.mask(node.phi), node.opt)
        if isinstance(node, (P.Until, P.BoundedUntil, P.TimeBoundedUntil)):
            return self._until(node)
        if isinstance(node, P.RewardBoundedUntil):
            options = self._solver_kwargs()["options"]
            res = rewardbound.probabilities(self.model, node, self.mask, options)
            return self._record(res)
        if isinstance(node, P.LtlPath):
            options = self._solver_kwargs()["options"]
            solved = ltl.probabilities(self.model, node, self.mask, options)
            values = self._record(solved.result())
            self.sched_ctx = ("ltl", solved)
            return values
        if isinstance(node, P.Complement):
            before = self.bounds
            return self._dual(self._value(node.value), before)
        if isinstance(node, P.Steady):
            return self._steady(node)
        return self.reward_path(node)

    def _apply_threshold(self, values: np.ndarray, node: P.Threshold):
        """`values ~ bound` for a threshold node, refusing a comparison that
        the bounds of the operator's own solve (`self.bounds`) leave
        undecided in a state that matters."""
        # (only interval iteration, asked for, refuses an undecided
        # comparison; otherwise the value is compared as PRISM does)
        asked = self.options.method == "interval_iteration"
        bounds = self.bounds if asked else None
        result, undecided = compare(values, node.cmp, node.bound, bounds, self.needed)
        if undecided.any():
            o = self.options
            raise undecided_error(
                node.op, _format(node.op), node.bound, bounds, undecided,
                lambda s: describe_state(self.model, s), o.epsilon, o.relative,
            )  # fmt: skip
        return result

    def _scalar(self, e: ast.Expr) -> float:
        v = self.eval(e)
        return v.flat[0].item() if isinstance(v, np.ndarray) else v

    # --------------------------------------------------------------- numerics

    def _record(self, res: numerics.NumericResult) -> np.ndarray:
        """Keep the statistics of an iterative solve (its fallbacks, bound
        and, for the first that failed, the failure); return its values."""
        res = note_layout(res, self.device_model)
        self.sched_ctx = None
        self.attempts, self.bound = tuple(res.attempts), res.bound
        if res.status != Status.CONVERGED and self.failure is None:
            self.failure = Attempt(
                res.method,
                res.status,
                int(res.iterations),
                float(res.residual),
                (res.extra or {}).get("layout"),
            )
        self.method = res.method
        if res.extra and "layout" in res.extra:
            self.layout = res.extra["layout"]
            # Solves that do not say (uniformisation, bounded steps) run in fp64.
            self.precision = res.extra.get("precision") or "fp64"
        if res.iterations:
            self.iterations = int(res.iterations) + (self.iterations or 0)
            self.residual = float(res.residual)
            self.status = res.status.name.lower()
        elif self.status is None:
            self.status = res.status.name.lower()
        if self.failure is not None:
            self.status = self.failure.status.name.lower()
        self.bounds = None
        lo, hi = res.lower, res.upper
        if lo is None and res.extra and "lower" in res.extra:
            lo, hi = res.extra["lower"], res.extra["upper"]
        if lo is not None:
            lo, hi = np.asarray(lo), np.asarray(hi)
            self.bounds = (lo, hi)
            with np.errstate(invalid="ignore"):  # inf - inf where both are inf
                gap = np.where(lo == hi, 0.0, hi - lo)
            self.bound_gap = float(np.max(gap, initial=0.0))
        self.last = np.asarray(res.values)
        return self.last

    def reported_bound(self, expr) -> float | None:
        """A certified bound on the absolute error of the reported value:
        from the last solve's per-state bounds (or its `bound`) where the
        top level is that operator's value (or a filter of it), else None."""
        if self.options.criterion != "sound":
            return None
        operand = expr.operand if isinstance(expr, ast.Filter) else expr
        ops = (ast.ProbOp, ast.RewardOp, ast.SteadyOp)
        if not isinstance(operand, ops) or operand.threshold is not None:
            return None
        if self.last is None:
            return None
        if self.bounds is None:
            return self.bound
        lo, hi = self.bounds
        v = self.last
        if not isinstance(expr, ast.Filter):  # (the initial states only)
            init = np.asarray(self.model.initial_states)
            lo, hi, v = lo[init], hi[init], v[init]
        with np.errstate(invalid="ignore"):
            err = np.maximum(hi - v, v - lo)
            err = np.where((lo == hi) & (v == lo), 0.0, err)
        worst = float(np.max(err, initial=0.0))
        return worst if np.isfinite(worst) else None

    def _dual(self, values: np.ndarray, before) -> np.ndarray:
        """`1 - values`, flipping interval-iteration bounds set since `before`."""
        if self.bounds is not None and self.bounds is not before:
            lo, hi = self.bounds
            self.bounds = (1.0 - hi, 1.0 - lo)
        self.last = 1.0 - values
        if self.sched_ctx is not None and self.sched_ctx[0] == "until":
            self.sched_ctx = ("dual",) + self.sched_ctx[1:]  # its scheduler's values
        return self.last

    def _solver_kwargs(self) -> dict[str, Any]:
        """The options and device model of the numerics calls: the method
        mapped to the model type, and no throw (`check_property`)."""
        o = self.options
        method = o.method
        if method in ("jacobi", "gauss_seidel", "power", "bicgstab") and self.is_mdp:
            # PRISM's linear-equation switches select value iteration on MDPs.
            method = "value_iteration"
        elif method == "value_iteration" and not self.is_mdp:
            method = "jacobi" if self.n else method
        options = dataclasses.replace(o, method=method, throw=False)
        return dict(options=options, device_model=self.device_model)

    def _next(self, phi: np.ndarray, opt: str | None) -> np.ndarray:
        res = numerics.next_probabilities(
            self.model, phi, opt=opt, device_model=self.device_model
        )
        return self._record(res)

    def _until(self, node) -> np.ndarray:
        phi, psi = self.mask(node.phi), self.mask(node.psi)
        opt = getattr(node, "opt", None)
        kw = self._solver_kwargs()
        if isinstance(node, P.Until):
            res = numerics.until_probabilities(self.model, phi, psi, opt=opt, **kw)
            values = self._record(res)
            self.sched_ctx = ("until", phi, psi, opt, res)
            return values
        upper, low = node.high, node.low
        if self.is_ctmc:
            res = numerics.ctmc_bounded_until(
                self.model, phi, psi, upper, lower=float(low), **kw
            )
        else:
            res = numerics.bounded_until(
                self.model, phi, psi, None if upper is None else int(upper),
                lower=int(low), opt=opt, **kw,
            )  # fmt: skip
        values = self._record(res)
        self.sched_ctx = ("bounded",)
        return values

    def reward_path(self, node) -> np.ndarray:
        """An `R` operator's plan node in every state."""
        m = self.model
        reward = m.rewards[node.reward]
        opt = getattr(node, "opt", None)
        if isinstance(node, P.CosafeReward):
            options = self._solver_kwargs()["options"]
            solved = ltl.rewards(m, node, self.mask, options)
            values = self._record(solved.result())
            self.sched_ctx = ("ltl", solved)
            return values
        if isinstance(node, P.ReachReward):
            target = self.mask(node.target)
            res = numerics.reachability_rewards(
                m, reward, target, opt=opt, **self._solver_kwargs()
            )
            values = self._record(res)
            self.sched_ctx = ("reach", reward, target, opt, res)
            return values
        if isinstance(node, P.TotalReward):
            return self._record(
                numerics.total_rewards(m, reward, opt=opt, **self._solver_kwargs())
            )
        if isinstance(node, P.LongRunReward):
            kw = self._solver_kwargs()
            if self.is_mdp:  # maximal end components (`numerics.lra`)
                return self._record(lra.mdp_long_run_rewards(m, reward, opt=opt, **kw))
            return self._record(numerics.long_run_rewards(m, reward, **kw))
        cumulative = isinstance(node, P.CumulativeReward)
        t = node.horizon if cumulative else node.at
        if self.is_ctmc:
            fn = (
                numerics.ctmc_cumulative_rewards
                if cumulative
                else numerics.ctmc_instantaneous_rewards
            )
            res = fn(m, reward, float(t), **self._solver_kwargs())
        else:
            fn = (
                numerics.cumulative_rewards
                if cumulative
                else numerics.instantaneous_rewards
            )
            res = fn(m, reward, int(t), opt=opt, device_model=self.device_model)
        return self._record(res)

    def _steady(self, node: P.Steady) -> np.ndarray:
        kw = self._solver_kwargs()
        phi = self.mask(node.phi)
        if self.is_mdp:  # maximal end components (`numerics.lra`)
            res = lra.mdp_steady_state_values(self.model, phi, opt=node.opt, **kw)
            return self._record(res)
        return self._record(numerics.steady_state_values(self.model, phi, **kw))

    # ---------------------------------------------------------------- filters

    def filter(self, f: ast.Filter) -> Any:
        """The value of filter `f`."""
        return self._filter(self._plan(f))

    def _filter(self, node: P.Filter) -> Any:
        """The filter's value; its operand matters only in its states."""
        f = node.node
        with self._needing():
            states = (
                np.ones(self.n, dtype=bool)
                if node.states is None
                else self.mask(node.states)
            )
        if not states.any():
            raise ModelCheckingError(
                "the filter's set of states is empty", (f.states or f).span
            )
        with self._needing(states):
            values = self.run(node.operand)
        # the top-level filter's, last: what `filter(print, ...)` shows
        self.last_filter = (values, states)
        return reduce_filter(f, values, states)


def state_formulas(
    model: ExplicitModel, properties: Any = None
) -> Callable[[ast.Expr], np.ndarray]:
    """`expr -> values in every state` for the state formulas of a property
    of `model` (labels, properties referred to by name), for executors of a
    plan other than this one (`jaxmc.diff`)."""
    options = check_options(None)
    return _Checker(model, properties, options, DeviceModel.of(model, options)).eval
