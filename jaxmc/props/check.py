"""Checking a property: walk the property's AST and call the numerics.

This is Storm's `SparseDtmcPrctlModelChecker` layer: it knows formulas, and
hands plain matrices and boolean masks to `jaxmc.numerics`, which knows none.
Every sub-formula evaluates to a vector over all states (numpy: bool, int or
float). A `filter` reduces a vector to one value, which then stands for every
state.

PRISM's rules implemented here:
- `G`, `W`, `R` reduce to `U` by duality (`P(G φ) = 1 − P(F ¬φ)`, with
  min and max swapped);
- discrete step bounds: `<k` is `<=k-1`, `>k` is `>=k+1`, `=k` is `[k,k]`;
  continuous time bounds: `<t` is `<=t`, `>t` is `>=t`;
- `P~p` without `min`/`max` on an MDP quantifies over all schedulers: `>=`,
  `>` use the minimum, `<`, `<=` the maximum (and the same for `R`);
- `Pmin`/`Pmax` on a DTMC or CTMC are plain `P` (there is nothing to
  optimise), as in PRISM;
- `E [ψ]` is `P>0 [ψ]` (`Pmax>0` on an MDP) and `A [ψ]` is `P>=1 [ψ]`
  (`Pmin>=1`).
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any

import numpy as np

from .. import numerics
from ..errors import JaxmcError, ModelCheckingError, UnsupportedError
from ..explore.model import ExplicitModel
from ..lang import ast
from ..lang.ast import BinaryOp, TemporalOp
from ..numerics.timing import collect
from .ctl import path_quantifier
from .evaluate import evaluate_plain
from .filters import reduce_filter
from .result import CheckOptions, CheckResult
from .rewards import describe_state, require_nonnegative
from .threshold import compare, undecided_error
from .timebounds import normalise_time_bound


_FLIP = {None: None, ast.Opt.MIN: ast.Opt.MAX, ast.Opt.MAX: ast.Opt.MIN}


def _located(e: JaxmcError, prop: Any, properties: Any) -> JaxmcError:
    """`e` located at the property being checked, if it has no place of its
    own (a numerical failure, a limit reached): the user sees which property
    of which file it came from."""
    span = getattr(prop, "span", None)
    if e.span is None and span is not None:
        e.span = span
        source = getattr(properties, "source", None)
        if source is not None:
            return e.with_source(source, getattr(properties, "file", None))
        e.args = (e._render(),)
    return e


def check_property(
    model: ExplicitModel, prop: Any, properties: Any, options: CheckOptions
) -> CheckResult:
    """Check one property (from `jaxmc.semantics.check_properties`)."""
    checker = _Checker(model, properties, options)
    start = time.perf_counter()
    expr = prop.expr
    text = getattr(prop, "text", None) or _format(expr)
    try:
        with collect() as stages:
            if not isinstance(expr, ast.Filter):
                # Without a filter, PRISM reports the value in the initial states.
                checker.needed = np.zeros(checker.n, dtype=bool)
                checker.needed[np.asarray(model.initial_states)] = True
            if isinstance(expr, ast.Filter):
                value = checker.filter(expr)
                values, is_filter = None, True
                if isinstance(value, np.ndarray):  # argmin/argmax/print: a vector
                    values, is_filter, value = value, False, None
            else:
                # PRISM evaluates an unfiltered property in the initial states only
                checker.active = np.zeros(model.num_states, dtype=bool)
                checker.active[np.asarray(model.initial_states)] = True
                values, value, is_filter = checker.eval(expr), None, False
    except JaxmcError as e:
        raise _located(e, prop, properties) from None
    checker.stats["total"] = time.perf_counter() - start
    for name in ("precompute", "layout", "solve"):
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
    )


def _format(expr: ast.Expr) -> str:
    from ..lang.printer import format_expr

    return format_expr(expr)


class _Checker:
    def __init__(self, model: ExplicitModel, properties: Any, options: CheckOptions):
        self.model = model
        self.properties = properties
        self.options = options
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

    # ------------------------------------------------------------ expressions

    def eval(self, e: ast.Expr) -> np.ndarray:
        """The value of `e` in every state."""
        active, self.active = self.active, None  # only for the top-level `e`
        if isinstance(e, ast.ProbOp):
            return self.prob_op(e)
        if isinstance(e, ast.RewardOp):
            return self.reward_op(e)
        if isinstance(e, ast.SteadyOp):
            return self.steady_op(e)
        if isinstance(e, ast.PathQuantifier):
            return self.path_quantifier(e)
        if isinstance(e, ast.Filter):
            value = self.filter(e)
            if isinstance(value, np.ndarray):
                return value
            if isinstance(value, tuple):
                raise UnsupportedError(
                    "a `range` filter cannot be used inside an expression", e.span
                )
            return np.full(self.n, value)
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

    def _opt(self, opt: ast.Opt | None, threshold: ast.Threshold | None):
        """The optimisation direction for an MDP operator (None otherwise)."""
        if not self.is_mdp:
            return None
        if opt is not None:
            return opt.value
        if threshold is None:
            raise ModelCheckingError(
                "for an MDP, use Pmin=?/Pmax=? (or Rmin/Rmax): the value depends "
                "on the scheduler",
                hint="write Pmax=? [ ... ] or Pmin=? [ ... ]",
            )
        if threshold.cmp in (BinaryOp.GE, BinaryOp.GT):
            return "min"
        return "max"

    def _apply_threshold(self, values: np.ndarray, op: Any):
        """`values ~ bound` for `op`'s threshold, refusing a comparison that
        the bounds of `op`'s own solve (`self.bounds`) leave undecided in a
        state that matters."""
        threshold = op.threshold
        if threshold is None:
            return values
        bounds = self.bounds
        bound = self._scalar(threshold.value)
        result, undecided = compare(values, threshold.cmp, bound, bounds, self.needed)
        if undecided.any():
            o = self.options
            raise undecided_error(
                op, _format(op), bound, bounds, undecided,
                lambda s: describe_state(self.model, s), o.epsilon, o.relative,
            )  # fmt: skip
        return result

    def _scalar(self, e: ast.Expr) -> float:
        v = self.eval(e)
        return v.flat[0].item() if isinstance(v, np.ndarray) else v

    def prob_op(self, op: ast.ProbOp) -> np.ndarray:
        opt = self._opt(op.opt, op.threshold)
        with self._needing():
            values = self.path_probs(op.path, opt)
        return self._apply_threshold(values, op)

    def path_quantifier(self, q: ast.PathQuantifier) -> np.ndarray:
        """CTL `E`/`A` (see `jaxmc.numerics.ctl`), reduced to E X, E U, E G,
        A X, A U, A G by the usual dualities."""
        with self._needing():
            return path_quantifier(q, self.model, self.bool)

    def path_probs(self, path: ast.Expr, opt: str | None) -> np.ndarray:
        """P(path) in every state, optimised with `opt` on MDPs."""
        if not isinstance(path, ast.Temporal):
            # A state formula as a path formula holds at time 0 or not at all.
            values = self.bool(path).astype(np.float64)
            self.bounds = None  # exact
            return values
        flip = {None: None, "min": "max", "max": "min"}[opt]
        op, bound = path.op, path.bound
        if op == TemporalOp.NEXT:
            return self._next(self.bool(path.right), opt)
        if op == TemporalOp.EVENTUALLY:
            return self._until(np.ones(self.n, bool), self.bool(path.right), bound, opt)
        if op == TemporalOp.UNTIL:
            return self._until(self.bool(path.left), self.bool(path.right), bound, opt)
        before = self.bounds
        if op == TemporalOp.GLOBALLY:
            phi = self.bool(path.right)
            return self._dual(
                self._until(np.ones(self.n, bool), ~phi, bound, flip), before
            )
        if op == TemporalOp.WEAK_UNTIL:
            phi, psi = self.bool(path.left), self.bool(path.right)
            return self._dual(self._until(~psi, ~phi & ~psi, bound, flip), before)
        if op == TemporalOp.RELEASE:
            phi, psi = self.bool(path.left), self.bool(path.right)
            return self._dual(self._until(~phi, ~psi, bound, flip), before)
        raise UnsupportedError(f"temporal operator {op.value}", path.span)

    # ----------------------------------------------------------------- bounds

    def _bound_values(self, bound: ast.TimeBound) -> tuple[float, float]:
        """(low, high) of a bound; high may be inf. Discrete bounds are
        normalised to inclusive integer bounds."""
        low = self._scalar(bound.low) if bound.low is not None else 0
        high = self._scalar(bound.high) if bound.high is not None else math.inf
        return normalise_time_bound(bound, low, high, self.is_ctmc)

    # --------------------------------------------------------------- numerics

    def _record(self, res: numerics.NumericResult) -> np.ndarray:
        """Keep the statistics of an iterative solve; return its values."""
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
        self.bounds = None
        if res.extra and "lower" in res.extra:
            lo, hi = np.asarray(res.extra["lower"]), np.asarray(res.extra["upper"])
            self.bounds = (lo, hi)
            with np.errstate(invalid="ignore"):  # inf - inf where both are inf
                gap = np.where(lo == hi, 0.0, hi - lo)
            self.bound_gap = float(np.max(gap, initial=0.0))
        return np.asarray(res.values)

    def _dual(self, values: np.ndarray, before) -> np.ndarray:
        """`1 - values`, flipping interval-iteration bounds set since `before`."""
        if self.bounds is not None and self.bounds is not before:
            lo, hi = self.bounds
            self.bounds = (1.0 - hi, 1.0 - lo)
        return 1.0 - values

    def _solver_kwargs(self) -> dict[str, Any]:
        o = self.options
        method = o.method
        if method in ("jacobi", "gauss_seidel", "power", "bicgstab") and self.is_mdp:
            # PRISM's linear-equation switches select value iteration on MDPs.
            method = "value_iteration"
        elif method == "value_iteration" and not self.is_mdp:
            method = "jacobi" if self.n else method
        return dict(
            method=method,
            epsilon=o.epsilon,
            relative=o.relative,
            max_iters=o.max_iters,
            throw=o.throw,
            layout=o.layout,
            precision=o.precision,
        )

    def _next(self, phi: np.ndarray, opt: str | None) -> np.ndarray:
        res = numerics.next_probabilities(
            self.model, phi, opt=opt, layout=self.options.layout
        )
        return self._record(res)

    def _until(
        self,
        phi: np.ndarray,
        psi: np.ndarray,
        bound: ast.TimeBound | None,
        opt: str | None,
    ) -> np.ndarray:
        kw = self._solver_kwargs()
        if bound is None:
            return self._record(
                numerics.until_probabilities(self.model, phi, psi, opt=opt, **kw)
            )
        low, high = self._bound_values(bound)
        if low == 0 and math.isinf(high):  # U>=0 is plain U
            return self._until(phi, psi, None, opt)
        upper = None if math.isinf(high) else high
        if self.is_ctmc:
            res = numerics.ctmc_bounded_until(
                self.model, phi, psi, upper, lower=float(low), **kw
            )
        else:
            res = numerics.bounded_until(
                self.model, phi, psi, None if upper is None else int(upper),
                lower=int(low), opt=opt, **kw,
            )  # fmt: skip
        return self._record(res)

    def reward_op(self, op: ast.RewardOp) -> np.ndarray:
        key = op.structure
        if isinstance(key, ast.Node):
            idx = self._scalar(key)
            if float(idx) != int(idx):
                raise ModelCheckingError("reward structure index must be an integer")
            key = int(idx)
        try:
            reward = self.model.reward_structure(key)
        except ModelCheckingError as err:
            err.span = op.span
            raise
        require_nonnegative(self.model, reward, op.span)
        opt = self._opt(op.opt, op.threshold)
        with self._needing():
            values = self.reward_path(op.path, reward, opt)
        return self._apply_threshold(values, op)

    def reward_path(self, path: ast.Expr, reward: Any, opt: str | None) -> np.ndarray:
        m = self.model
        if isinstance(path, ast.Temporal) and path.op == TemporalOp.EVENTUALLY:
            if path.bound is not None:
                raise UnsupportedError(
                    "bounded reachability rewards (R [ F<=k ... ])", path.span
                )
            return self._record(
                numerics.reachability_rewards(
                    m, reward, self.bool(path.right), opt=opt, **self._solver_kwargs()
                )
            )
        if isinstance(path, ast.RewardPath):
            kind = path.kind
            if kind == ast.RewardPathKind.CUMULATIVE and path.bound is None:
                return self._record(
                    numerics.total_rewards(m, reward, opt=opt, **self._solver_kwargs())
                )
            if kind == ast.RewardPathKind.LONG_RUN:
                if self.is_mdp:
                    raise UnsupportedError(
                        "long-run average rewards R [ S ] on MDPs", path.span
                    )
                kw = self._solver_kwargs()
                return self._record(numerics.long_run_rewards(m, reward, **kw))
            low, high = self._bound_values(path.bound)
            cumulative = kind == ast.RewardPathKind.CUMULATIVE
            t = high if cumulative else low
            if self.is_ctmc:
                fn = (
                    numerics.ctmc_cumulative_rewards
                    if cumulative
                    else numerics.ctmc_instantaneous_rewards
                )
                res = fn(
                    m,
                    reward,
                    float(t),
                    epsilon=self.options.epsilon,
                    layout=self.options.layout,
                )
            else:
                fn = (
                    numerics.cumulative_rewards
                    if cumulative
                    else numerics.instantaneous_rewards
                )
                res = fn(m, reward, int(t), opt=opt, layout=self.options.layout)
            return self._record(res)
        raise UnsupportedError(
            "this reward path formula (expected F, C, C<=t, I=t or S)", path.span
        )

    def steady_op(self, op: ast.SteadyOp) -> np.ndarray:
        if self.is_mdp:
            raise UnsupportedError("steady-state probabilities S on MDPs", op.span)
        kw = self._solver_kwargs()
        with self._needing():
            phi = self.bool(op.operand)
        values = self._record(numerics.steady_state_values(self.model, phi, **kw))
        return self._apply_threshold(values, op)

    # ---------------------------------------------------------------- filters

    def filter(self, f: ast.Filter) -> Any:
        """The filter's value; its operand matters only in its states."""
        with self._needing():
            states = (
                np.ones(self.n, dtype=bool) if f.states is None else self.bool(f.states)
            )
        if not states.any():
            raise ModelCheckingError(
                "the filter's set of states is empty", (f.states or f).span
            )
        with self._needing(states):
            values = self.eval(f.operand)
        return reduce_filter(f, values, states)
