"""A property's plan: every decision that depends on the formula and the model
type, but not on the numbers of a solve, made once.

Two executors run a plan: `jaxmc.props.check` eagerly (numpy masks, the
`jaxmc.numerics` algorithms) and `jaxmc.diff.Problem` traced (pure JAX
functions of the parameters). Because both read the same plan, they agree on
what a property means; they differ only in how they compute it.

PRISM's rules, applied here:
- `G`, `W`, `R` reduce to `U` by duality (`P(G φ) = 1 − P(F ¬φ)`, with min
  and max swapped): a `Complement` of an `Until`;
- discrete step bounds: `<k` is `<=k-1`, `>k` is `>=k+1`, `=k` is `[k,k]`;
  continuous time bounds: `<t` is `<=t`, `>t` is `>=t`; `U>=0` is plain `U`;
- `P~p` without `min`/`max` on an MDP quantifies over all schedulers: `>=`,
  `>` use the minimum, `<`, `<=` the maximum (and the same for `R` and
  `S`, a long-run average on an MDP); `P=?` (`R=?`, `S=?`) without them on
  an MDP is an error;
- `Pmin`/`Pmax` on a DTMC or CTMC are plain `P` (nothing to optimise);
- the reward structure of an `R` operator is resolved to its index and
  refused if it has negative rewards (`jaxmc.props.rewards`);
- Storm's reward bounds `F^{rew{"r"}<=b}` become `RewardBoundedUntil`
  (`jaxmc.props.rewardbound`); its `steps` and `time` bounds are PRISM's
  step and time bounds (a step bound on a CTMC is refused, as in Storm);
- CTL `E`/`A` reduce to E X, E U, E G, A X, A U, A G and `W`.

State formulas stay expressions (`Formula`), combined with `Not`/`And`
where a duality needs them; an executor evaluates them over all states and
plans the operators nested in them when it meets them. The traced executor
evaluates them eagerly, at its build point: a nested operator's region (the
states where its threshold holds) is then fixed, like the graph.

A bound may be a symbolic expression only where the traced executor can
follow it: an upper CSL time bound, or the time of a CSL `C<=t` / `I=t`,
that depends on a parameter (the `symbolic` argument of `plan` says which
expressions do).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..automata.formula import is_cosafe, to_text
from ..automata.from_ast import is_ltl, ltl_formula
from ..errors import ModelCheckingError, UnsupportedError
from ..explore.model import ExplicitModel
from ..lang import ast
from ..lang.ast import BinaryOp, ModelType, TemporalOp, TimeBoundKind
from .rewardbound import RewardBoundedUntil as RewardBoundedUntil, reward_bounded
from .rewards import require_nonnegative
from .timebounds import normalise_time_bound


# ----------------------------------------------------------- state formulas


@dataclass(frozen=True)
class Formula:
    """A state formula as written: a vector over all states."""

    expr: ast.Expr


@dataclass(frozen=True)
class AllStates:
    """`true` in every state."""


@dataclass(frozen=True)
class Not:
    arg: Any


@dataclass(frozen=True)
class And:
    left: Any
    right: Any


TRUE = AllStates()

# -------------------------------------------------- path formulas (P [...])


@dataclass(frozen=True)
class Holds:
    """A state formula as a path formula: 1 where it holds at time 0."""

    phi: Any


@dataclass(frozen=True)
class Next:
    phi: Any
    opt: str | None


@dataclass(frozen=True)
class Until:
    """Unbounded `φ U ψ`."""

    phi: Any
    psi: Any
    opt: str | None


@dataclass(frozen=True)
class BoundedUntil:
    """`φ U[low, high] ψ` in steps (DTMC, MDP), inclusive; `high` None is
    `U>=low` (`low` > 0 then)."""

    phi: Any
    psi: Any
    low: int
    high: int | None
    opt: str | None


@dataclass(frozen=True)
class TimeBoundedUntil:
    """`φ U[low, high] ψ` in continuous time (CTMC); `high` None is `U>=low`;
    `high` may be an expression of the parameters (then `low` is 0)."""

    phi: Any
    psi: Any
    low: float
    high: float | ast.Expr | None


@dataclass(frozen=True)
class LtlPath:
    """An LTL path formula (`jaxmc.automata.formula`) whose proposition `i`
    is the state formula `props[i]` (checked through an automaton product)."""

    formula: tuple
    props: tuple
    opt: str | None


@dataclass(frozen=True)
class LtlExists:
    """`E [ψ]` (`exists`) or `A [ψ]` for an LTL `ψ` (as `LtlPath`)."""

    exists: bool
    formula: tuple
    props: tuple


@dataclass(frozen=True)
class Complement:
    """`1 - value`: the dual of `G`, `W`, `R`."""

    value: Any


# ------------------------------------------------------- rewards (R [...])


@dataclass(frozen=True)
class ReachReward:
    """`R [F target]`; `reward` is an index into `model.rewards`."""

    reward: int
    target: Any
    opt: str | None


@dataclass(frozen=True)
class CosafeReward:
    """`R [ψ]` for a co-safe LTL `ψ` (as `LtlPath`): the reward accumulated
    until a path's prefix satisfies `ψ`."""

    reward: int
    formula: tuple
    props: tuple
    opt: str | None


@dataclass(frozen=True)
class TotalReward:
    """`R [C]`."""

    reward: int
    opt: str | None


@dataclass(frozen=True)
class CumulativeReward:
    """`R [C<=horizon]`: steps (int) or time (float; on a CTMC also an
    expression of the parameters)."""

    reward: int
    horizon: int | float | ast.Expr
    opt: str | None


@dataclass(frozen=True)
class InstantReward:
    """`R [I=at]`: steps (int) or time (float; on a CTMC also an expression
    of the parameters)."""

    reward: int
    at: int | float | ast.Expr
    opt: str | None


@dataclass(frozen=True)
class LongRunReward:
    """`R [S]`: the long-run average reward (on an MDP with `opt`)."""

    reward: int
    opt: str | None = None


@dataclass(frozen=True)
class Steady:
    """`S [φ]`: the long-run fraction of time in φ (on an MDP with `opt`)."""

    phi: Any
    opt: str | None = None


# ------------------------------------------------------ operators, filters


@dataclass(frozen=True)
class Threshold:
    """`value ~ bound` (`P>=p [...]`); `op` is the operator, for messages."""

    value: Any
    cmp: BinaryOp
    bound: float
    op: ast.Expr = field(compare=False)


@dataclass(frozen=True)
class Filter:
    """`filter(op, operand, states)`; `states` None is all states."""

    op: str
    operand: Any
    states: Any
    node: ast.Filter = field(compare=False)


@dataclass(frozen=True)
class Ctl:
    """CTL `E [left U right]` etc. with `op` one of X, U, G, W (F and R
    reduced); `exists` False is `A`."""

    exists: bool
    op: TemporalOp
    left: Any
    right: Any


OPERATORS = (ast.ProbOp, ast.RewardOp, ast.SteadyOp, ast.PathQuantifier, ast.Filter)
_FLIP = {None: None, "min": "max", "max": "min"}


def plan(
    expr: ast.Expr,
    model: ExplicitModel,
    scalar: Callable[[ast.Expr], float],
    symbolic: Callable[[ast.Expr], bool] | None = None,
) -> Any:
    """The plan of `expr` on `model`: an operator (`P`, `R`, `S`, `E`, `A`)
    or filter becomes its plan node, anything else a `Formula`.

    - `scalar(e)`: the value of a constant expression (bounds, thresholds,
      reward structure indices).
    - `symbolic(e)`: whether `e` depends on parameters (traced executor);
      such a value stays an expression where one may (a CSL upper time
      bound) and is refused elsewhere.
    """
    return _Planner(model, scalar, symbolic).plan(expr)


class _Planner:
    def __init__(self, model, scalar, symbolic):
        self.model = model
        self.scalar = scalar
        self.symbolic = symbolic or (lambda e: False)
        self.is_mdp = model.model_type == ModelType.MDP
        self.is_ctmc = model.model_type == ModelType.CTMC

    def plan(self, e: ast.Expr) -> Any:
        if isinstance(e, ast.ProbOp):
            return self._threshold(self._path(e.path, self._opt(e)), e)
        if isinstance(e, ast.RewardOp):
            return self._threshold(self._reward(e), e)
        if isinstance(e, ast.SteadyOp):
            return self._threshold(Steady(Formula(e.operand), self._opt(e)), e)
        if isinstance(e, ast.PathQuantifier):
            return self._ctl(e)
        if isinstance(e, ast.Filter):
            states = None if e.states is None else Formula(e.states)
            return Filter(e.op, self.plan(e.operand), states, e)
        return Formula(e)

    # ------------------------------------------------------------ decisions

    def _opt(self, op) -> str | None:
        """The optimisation direction of an MDP operator (None otherwise)."""
        if not self.is_mdp:
            return None
        if op.opt is not None:
            return op.opt.value
        if op.threshold is None:
            name = "S" if isinstance(op, ast.SteadyOp) else "P"
            raise ModelCheckingError(
                f"for an MDP, use {name}min=?/{name}max=? (or Rmin/Rmax): the "
                "value depends on the scheduler",
                op.span,
                hint=f"write {name}max=? [ ... ] or {name}min=? [ ... ]",
            )
        return "min" if op.threshold.cmp in (BinaryOp.GE, BinaryOp.GT) else "max"

    def _number(self, e: ast.Expr, what: str) -> float:
        if self.symbolic(e):
            raise UnsupportedError(f"{what} that depends on a parameter", e.span)
        return self.scalar(e)

    def _threshold(self, value, op) -> Any:
        t = op.threshold
        if t is None:
            return value
        return Threshold(value, t.cmp, self._number(t.value, "a threshold"), op)

    def _bound(self, bound: ast.TimeBound) -> tuple[Any, Any]:
        """(low, high) of a bound, normalised (`jaxmc.props.timebounds`);
        high is inf if absent, or an expression (an upper CSL bound that
        depends on parameters)."""
        exprs = [e for e in (bound.low, bound.high) if e is not None]
        sym = [e for e in exprs if self.symbolic(e)]
        if sym:
            if not self.is_ctmc:
                raise UnsupportedError(
                    "a step bound that depends on a parameter", sym[0].span
                )
            if bound.kind not in (TimeBoundKind.LE, TimeBoundKind.LT):
                raise UnsupportedError(
                    "a time bound that depends on a parameter other than an "
                    "upper bound (<=t)",
                    sym[0].span,
                    hint="parameters may appear in upper time bounds U<=t",
                )
            return 0.0, bound.high
        low = self.scalar(bound.low) if bound.low is not None else 0
        high = self.scalar(bound.high) if bound.high is not None else math.inf
        return normalise_time_bound(bound, low, high, self.is_ctmc)

    # --------------------------------------------------------- probabilities

    def _path(self, path: ast.Expr, opt: str | None) -> Any:
        if is_ltl(path):
            f, props = ltl_formula(path)
            return LtlPath(f, tuple(Formula(p) for p in props), opt)
        if not isinstance(path, ast.Temporal):
            return Holds(Formula(path))
        flip = _FLIP[opt]
        op, bound = path.op, path.bound
        right = Formula(path.right)
        if op == TemporalOp.NEXT:
            return Next(right, opt)
        if op == TemporalOp.EVENTUALLY:
            return self._until(TRUE, right, bound, opt)
        left = Formula(path.left) if path.left is not None else TRUE
        if op == TemporalOp.UNTIL:
            return self._until(left, right, bound, opt)
        if op == TemporalOp.GLOBALLY:
            return Complement(self._until(TRUE, Not(right), bound, flip))
        if op == TemporalOp.WEAK_UNTIL:  # φ W ψ = ¬(¬ψ U (¬φ ∧ ¬ψ))
            inner = self._until(Not(right), And(Not(left), Not(right)), bound, flip)
            return Complement(inner)
        if op == TemporalOp.RELEASE:  # φ R ψ = ¬(¬φ U ¬ψ)
            return Complement(self._until(Not(left), Not(right), bound, flip))
        raise UnsupportedError(f"temporal operator {op.value}", path.span)

    def _until(self, phi, psi, bound, opt) -> Any:
        if bound is None:
            return Until(phi, psi, opt)
        if bound.ref is ast.BoundRef.REWARD or (
            bound.ref is ast.BoundRef.STEPS and self.is_ctmc
        ):
            return reward_bounded(phi, psi, bound, opt, self._number, self._structure)
        low, high = self._bound(bound)
        if isinstance(high, ast.Node):
            return TimeBoundedUntil(phi, psi, 0.0, high)
        if low == 0 and math.isinf(high):
            return Until(phi, psi, opt)
        upper = None if math.isinf(high) else high
        if self.is_ctmc:
            return TimeBoundedUntil(
                phi, psi, float(low), None if upper is None else float(upper)
            )
        upper = None if upper is None else int(upper)
        return BoundedUntil(phi, psi, int(low), upper, opt)

    def _structure(self, key, span) -> int:
        """The index of the reward structure named by `key` (a name, a
        1-based index expression, None for the first), refused if it has
        negative rewards."""
        if isinstance(key, ast.Node):
            idx = self._number(key, "a reward structure index")
            if float(idx) != int(idx):
                raise ModelCheckingError(
                    "reward structure index must be an integer", key.span
                )
            key = int(idx)
        try:
            rs = self.model.reward_structure(key)
        except ModelCheckingError as err:
            err.span = span
            raise
        require_nonnegative(self.model, rs, span)
        return next(i for i, r in enumerate(self.model.rewards) if r is rs)

    # -------------------------------------------------------------- rewards

    def _reward(self, op: ast.RewardOp) -> Any:
        ridx = self._structure(op.structure, op.span)
        opt = self._opt(op)
        path = op.path
        if not isinstance(path, ast.RewardPath) and (
            is_ltl(path)
            or not isinstance(path, ast.Temporal)
            or path.op != TemporalOp.EVENTUALLY
        ):
            f, props = ltl_formula(path)
            if not is_cosafe(f):
                raise UnsupportedError(
                    f"R [...] of `{to_text(f)}`: the formula is not co-safe LTL "
                    "(it needs G, W or R)",
                    path.span,
                    hint="write a co-safe formula (X, F, U, &, | of state "
                    "formulas), e.g. R=? [ F (a & F b) ]",
                )
            return CosafeReward(ridx, f, tuple(Formula(p) for p in props), opt)
        if isinstance(path, ast.Temporal) and path.op == TemporalOp.EVENTUALLY:
            if path.bound is not None:
                raise UnsupportedError(
                    "bounded reachability rewards (R [ F<=k ... ])", path.span
                )
            return ReachReward(ridx, Formula(path.right), opt)
        if not isinstance(path, ast.RewardPath):
            raise UnsupportedError(
                "this reward path formula (expected F, C, C<=t, I=t or S)", path.span
            )
        kind = path.kind
        if kind == ast.RewardPathKind.LONG_RUN:
            return LongRunReward(ridx, opt)
        cumulative = kind == ast.RewardPathKind.CUMULATIVE
        if cumulative and path.bound is None:
            return TotalReward(ridx, opt)
        at = self._symbolic_reward_time(path.bound, cumulative)
        if at is not None:
            if cumulative:
                return CumulativeReward(ridx, at, opt)
            return InstantReward(ridx, at, opt)
        low, high = self._bound(path.bound)
        t = high if cumulative else low
        t = float(t) if self.is_ctmc else int(t)
        if cumulative:
            return CumulativeReward(ridx, t, opt)
        return InstantReward(ridx, t, opt)

    def _symbolic_reward_time(self, bound: ast.TimeBound, cumulative: bool):
        """The time of a CSL `C<=t` / `I=t` that depends on parameters (an
        expression, for the traced executor), or None if it does not."""
        e = bound.high if cumulative else bound.low
        if e is None or not self.symbolic(e):
            if bound.low is not None and self.symbolic(bound.low):
                e = bound.low  # (C>=t, C[t1,t2] are not reward bounds)
            else:
                return None
        ok = (
            bound.kind in (TimeBoundKind.LE, TimeBoundKind.LT)
            if cumulative
            else (bound.kind == TimeBoundKind.EQ)
        )
        if not self.is_ctmc or not ok:
            raise UnsupportedError(
                "a reward step or time bound that depends on a parameter",
                e.span,
                hint="parameters may appear in the time of a CTMC's C<=t or I=t",
            )
        return e

    # ------------------------------------------------------------------ CTL

    def _ctl(self, q: ast.PathQuantifier) -> Any:
        path = q.path
        exists = q.quantifier == ast.Quantifier.EXISTS
        if is_ltl(path):
            f, props = ltl_formula(path)
            return LtlExists(exists, f, tuple(Formula(p) for p in props))
        if not isinstance(path, ast.Temporal):
            return Formula(path)
        if path.bound is not None:
            raise UnsupportedError(
                "time-bounded path formulas under E [...] / A [...] are not "
                "supported (as in PRISM)",
                path.bound.span or path.span,
            )
        op = path.op
        right = Formula(path.right)
        left = Formula(path.left) if path.left is not None else TRUE
        if op == TemporalOp.EVENTUALLY:
            return Ctl(exists, TemporalOp.UNTIL, TRUE, right)
        if op == TemporalOp.RELEASE:  # φ R ψ = ψ W (φ ∧ ψ)
            return Ctl(exists, TemporalOp.WEAK_UNTIL, right, And(left, right))
        if op in (TemporalOp.NEXT, TemporalOp.GLOBALLY):
            return Ctl(exists, op, TRUE, right)
        return Ctl(exists, op, left, right)
