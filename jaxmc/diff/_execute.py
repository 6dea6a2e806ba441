"""A property's plan (`jaxmc.props.plan`) executed as a traced function of the
parameters: each plan node becomes a function `(arrays, theta) -> values`
built from the schemes of `jaxmc.diff.Problem`'s mixins.

The plan is the eager checker's, so both executors decide dualities,
bounds, min/max, reward structures and thresholds alike; a node this
executor has no scheme for raises `UnsupportedError` with a hint.

State formulas are evaluated by the eager checker at the build point. Where
one holds a nested operator (`P=? [ F P>0.5 [ G x<3 ] ]`), the inner
operator's region is thereby fixed, like the graph: the outer operator's
value and derivative are those with that region (`fixed_regions` lists
such formulas). CTL `E`/`A` formulas are sets of states on the graph: 0/1,
with derivative 0.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..errors import ConvergenceError, ModelCheckingError, UnsupportedError
from ..lang import ast
from ..lang.ast import BinaryOp
from ..props import plan as P
from ..props.ctl import path_quantifier
from ..semantics.rewrite import mentions


_COMPARE = {
    BinaryOp.LT: jnp.less,
    BinaryOp.LE: jnp.less_equal,
    BinaryOp.GT: jnp.greater,
    BinaryOp.GE: jnp.greater_equal,
}
_HINT = "check it with jaxmc.check at fixed values, or pass rebuild=True to solve"
_NUMERIC_FILTERS = ("min", "max", "sum", "avg")
_FILTERS = (*_NUMERIC_FILTERS, "count", "forall", "exists", "first", "state")


class PlanExecution:
    """The plan executor of `jaxmc.diff.Problem` (a mixin)."""

    def _compile(self, e: ast.Expr):
        #: the state formulas with nested operators, decided at the build
        #: point (`_fixed_region`)
        self.fixed_regions: list[ast.Expr] = []
        self._need_soe()
        if self.is_mdp:
            self.host["coc"] = self.coc.astype(np.int32)
        node = P.plan(
            e,
            self.model,
            self._scalar,
            symbolic=lambda x: mentions(x, self.params) is not None,
        )
        self.plan = node
        #: whether the function's value is one number for the model (a filter)
        self.reduced = isinstance(node, P.Filter)
        #: the type of the result where it is not a number (a threshold's
        #: truth, a count), computed as floats so that NaN stays visible
        self.result_type = None
        if isinstance(node, (P.Threshold, P.Ctl)) or (
            self.reduced and node.op in ("forall", "exists")
        ):
            self.result_type = bool
        elif self.reduced and node.op == "count":
            self.result_type = int
        if self.reduced:
            return self._filter(node)
        if isinstance(node, P.Formula):
            raise UnsupportedError(
                "with parameters, the property must be a P, R, S, E or A "
                "operator or a filter of one (no arithmetic at the top level)",
                getattr(e, "span", None),
                hint=_HINT,
            )
        return self._exec(node)

    def _scalar(self, e: ast.Expr) -> float:
        v = self.formula(e)
        return v.flat[0].item() if isinstance(v, np.ndarray) else v

    def _mask(self, f) -> np.ndarray:
        """A state formula of the plan as a host mask."""
        if isinstance(f, P.AllStates):
            return np.ones(self.n, dtype=bool)
        if isinstance(f, P.Not):
            return ~self._mask(f.arg)
        if isinstance(f, P.And):
            return self._mask(f.left) & self._mask(f.right)
        e = f.expr
        p = mentions(e, self.params)
        if p is not None:
            raise UnsupportedError(
                f"parameter `{p}` in a state formula of the property", e.span
            )
        nested = self._nested(e)
        v = np.asarray(self.formula(e))
        if v.dtype != np.bool_:
            raise ModelCheckingError("expected a boolean-valued formula", e.span)
        if nested is not None:
            self._fixed_region(nested, e)
        return v

    def _nested(self, e: ast.Expr):
        """The first operator nested in the state formula `e` (or a named
        property it refers to), else None."""
        for node in ast.walk(e):
            if isinstance(node, P.OPERATORS):
                return node
            if (
                isinstance(node, ast.LabelRef)
                and node.name != "init"
                and node.name not in self.model.labels
            ):
                return node
        return None

    def _fixed_region(self, node, e) -> None:
        """Record that the state formula `e` was decided by the eager
        checker at the build point (a nested operator's threshold region,
        fixed, like the graph: the values and derivatives are those of the
        outer operator with this region); a solve of it that failed there
        is an error."""
        self.fixed_regions.append(e)
        checker = getattr(self.formula, "__self__", None)
        failure = getattr(checker, "failure", None)
        if failure is not None:
            raise ConvergenceError(
                f"the nested operator's {failure.method} solve at the build "
                f"point did not converge ({failure.status.name.lower()} after "
                f"{failure.iterations} iterations)",
                getattr(node, "span", None),
                hint="check the property with jaxmc.check at these values",
            )

    def _exec(self, node):
        """`(arrays, theta) -> values in every state` for a plan node."""
        if isinstance(node, P.Threshold):
            # 1.0/0.0 (NaN where the value is: a failed solve stays visible)
            inner, cmp, bound = self._exec(node.value), _COMPARE[node.cmp], node.bound

            def holds(a, t):
                v = inner(a, t)
                return jnp.where(jnp.isnan(v), jnp.nan, cmp(v, bound).astype(v.dtype))

            return holds
        if isinstance(node, P.Complement):
            inner = self._exec(node.value)
            return lambda a, t: 1.0 - inner(a, t)
        if isinstance(node, P.Holds):
            phi = self._mask(node.phi).astype(np.float64)
            return lambda a, t: jnp.asarray(phi)
        if isinstance(node, P.Next):
            return self._next(self._mask(node.phi), node.opt)
        if isinstance(node, P.Until):
            return self._until(self._mask(node.phi), self._mask(node.psi), node.opt)
        if isinstance(node, P.BoundedUntil):
            return self._bounded_until(node)
        if isinstance(node, P.TimeBoundedUntil):
            return self._ctmc_until(node)
        if isinstance(node, P.ReachReward):
            return self._reach_reward(node.reward, self._mask(node.target), node.opt)
        if isinstance(node, P.TotalReward):
            return self._total_reward(node.reward, node.opt)
        if isinstance(node, P.CumulativeReward):
            if self.is_ctmc:
                return self._ctmc_cumulative(node.reward, node.horizon)
            return self._cumulative(node.reward, node.horizon, node.opt)
        if isinstance(node, P.InstantReward):
            if self.is_ctmc:
                return self._ctmc_instant(node.reward, node.at)
            return self._instant(node.reward, node.at, node.opt)
        if isinstance(node, (P.LongRunReward, P.Steady)) and node.opt is not None:
            raise UnsupportedError(
                "with parameters, long-run averages S / R [ S ] on MDPs",
                hint="check it without params= (jaxmc.check)",
            )
        if isinstance(node, P.LongRunReward):
            return self._steady_reward(node.reward)
        if isinstance(node, P.Steady):
            phi = jnp.asarray(self._mask(node.phi), jnp.float64)
            return self._steady(lambda arrays, theta, P, val: phi)
        if isinstance(node, P.Ctl):
            # 1.0/0.0 on the graph of the build point (recorded: a graph
            # that differs elsewhere is seen); constant, zero derivative
            sat = self.graph(
                ctl, node, self._mask(node.left), self._mask(node.right)
            ).astype(np.float64)
            return lambda a, t: jnp.asarray(sat)
        if isinstance(node, P.RewardBoundedUntil):
            raise UnsupportedError(
                'with parameters, a reward-bounded path formula (F^{rew{"r"}<=b})',
                hint="check it with jaxmc.check at a point (no params=)",
            )
        raise UnsupportedError(
            "with parameters, a filter or an expression inside a P/R/S operator",
            hint=_HINT,
        )

    def _bounded_until(self, node: P.BoundedUntil):
        """`φ U[low, high] ψ` in steps: the `high - low` steps of `U<=k` (or
        the unbounded until), then `low` steps inside φ."""
        phi, psi = self._mask(node.phi), self._mask(node.psi)
        if node.high is not None and node.high < node.low:
            return lambda a, t: jnp.zeros(self.n)
        if node.high is None:
            first = self._until(phi, psi, node.opt)
        else:
            first = self._bounded(phi, psi, node.high - node.low, node.opt)
        if node.low == 0:
            return first
        return self._steps(first, node.low, node.opt, active=phi)

    def _filter(self, node: P.Filter):
        """A filter over the values of its operand (reduced in JAX)."""
        f, op = node.node, node.op
        if op not in _FILTERS:
            raise UnsupportedError(f"filter `{op}` with parameters", f.span, hint=_HINT)
        states = (
            np.ones(self.n, dtype=bool)
            if node.states is None
            else self._mask(node.states)
        )
        if not states.any():
            raise ModelCheckingError(
                "the filter's set of states is empty", (f.states or f).span
            )
        idx = np.flatnonzero(states)
        if op == "state" and idx.size != 1:
            raise ModelCheckingError(
                f"filter `state` needs exactly one state, the filter selects "
                f"{idx.size}",
                (f.states or f).span,
            )
        boolean = isinstance(node.operand, (P.Threshold, P.Ctl))
        if op in _NUMERIC_FILTERS and boolean:
            raise ModelCheckingError(
                f"filter `{op}` needs a numerical property", f.span
            )
        if op in ("forall", "exists") and not boolean:
            raise ModelCheckingError(f"filter `{op}` needs a boolean property", f.span)
        if isinstance(node.operand, (P.Filter, P.Formula)):
            raise UnsupportedError(
                "with parameters, a filter's operand must be a P, R, S, E or A "
                "operator",
                f.span,
                hint=_HINT,
            )
        inner = self._exec(node.operand)
        key = self._put(f"filter{len(self.host)}", idx.astype(np.int32))
        reduce = {
            "min": jnp.min,
            "max": jnp.max,
            "sum": jnp.sum,
            "avg": jnp.mean,
            "count": jnp.count_nonzero,
            "forall": lambda v: jnp.all(v != 0),
            "exists": lambda v: jnp.any(v != 0),
            "first": lambda v: v[0],
            "state": lambda v: v[0],
        }[op]

        def plan(a, t):
            v = inner(a, t)[a[key]]
            r = reduce(v).astype(v.dtype)
            return jnp.where(jnp.any(jnp.isnan(v)), jnp.nan, r)

        return plan


def ctl(model, node: P.Ctl, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The states satisfying the CTL plan node `node` on `model`, with its
    operands' masks `left` and `right` (a graph precomputation of the
    problem: `GraphLog` re-runs it on another point's graph)."""
    return path_quantifier(node, model, lambda f: right if f is node.right else left)
