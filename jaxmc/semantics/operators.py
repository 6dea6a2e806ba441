"""The typing rules of a property's operators: `P`, `R`, `S`, `E`, `A`,
filters, labels and references to named properties, their path formulas
(one temporal operator over state formulas, or LTL under `P` and co-safe
LTL under `R`), time bounds,
thresholds and reward structures.

`OperatorTyping` is the part of the properties checker
(`jaxmc.semantics.properties`) that `type_of` calls back (`_hook`) for these
nodes; it reads the checker's `m` (the `CheckedProgram`), `formulas`, `env`,
`var_types`, `label_kinds`, `prop_names`, `pf_label_decls` and `_typing`.
"""

from __future__ import annotations

from ..errors import SemanticError, UnsupportedError
from ..lang import ast
from .check import BUILTIN_LABELS
from .evaluate import is_literal, literal_value
from .resolve import fold
from .rewrite import idents
from .types import Type, is_numeric, suggest


class OperatorTyping:
    """Typing of property operators, mixed into the properties checker."""

    def _hook(self, e: ast.Expr, recurse) -> Type:
        if isinstance(e, ast.LabelRef):
            self._label(e, recurse)
            return (
                Type.BOOL
                if self.label_kinds[e.name] != "property"
                else self._ref_type(e, recurse)
            )
        if isinstance(e, ast.ProbOp):
            self._path(e.path, recurse, "P")
            return self._threshold(e.threshold, recurse, probability=True)
        if isinstance(e, ast.PathQuantifier):
            self._path(e.path, recurse, e.quantifier.value)
            return Type.BOOL
        if isinstance(e, ast.RewardOp):
            self._reward_structure(e, recurse)
            self._reward_path(e.path, recurse)
            return self._threshold(e.threshold, recurse, probability=False)
        if isinstance(e, ast.SteadyOp):
            t = recurse(e.operand)
            if t != Type.BOOL:
                raise SemanticError(
                    f"type error: the operand of S must be Boolean, not {t.value}",
                    e.operand.span,
                )
            return self._threshold(e.threshold, recurse, probability=True)
        if isinstance(e, ast.Filter):
            return self._filter(e, recurse)
        if isinstance(e, (ast.Temporal, ast.RewardPath)):
            raise SemanticError(
                "a path formula can only appear directly inside P [...], R [...], E "
                "[...] or A [...]",
                e.span,
                hint='write e.g. P=? [ F "goal" ]',
            )
        raise SemanticError(
            f"unexpected `{type(e).__name__}` in a property", e.span
        )  # pragma: no cover

    def _label(self, e: ast.LabelRef, recurse) -> None:
        name = e.name
        if name in BUILTIN_LABELS:
            kind = "builtin"
        elif name in self.m.labels:
            kind = "model"
        elif name in self.pf_label_decls:
            kind = "properties"
        elif name in self.prop_names:
            kind = "property"
        else:
            known = (
                list(BUILTIN_LABELS)
                + list(self.m.labels)
                + list(self.pf_label_decls)
                + list(self.prop_names)
            )
            raise SemanticError(
                f'unknown label or property "{name}"', e.span, hint=suggest(name, known)
            )
        self.label_kinds[name] = kind

    def _ref_type(self, e: ast.LabelRef, recurse) -> Type:
        name = e.name
        if name in self._typing:
            raise SemanticError(f'property "{name}" refers to itself', e.span)
        self._typing.append(name)
        try:
            p = self.prop_names[name]
            return self._type_property(name, self.formulas.expand(p.expr))
        finally:
            self._typing.pop()

    def _threshold(self, th: ast.Threshold | None, recurse, probability: bool) -> Type:
        if th is None:
            return Type.DOUBLE
        t = recurse(th.value)
        if not is_numeric(t):
            raise SemanticError(
                f"type error: a bound must be a number, not {t.value}", th.value.span
            )
        v = fold(th.value, self.env, self.var_types)
        if is_literal(v):
            x = float(literal_value(v))
            if probability and not 0 <= x <= 1:
                raise SemanticError(
                    f"invalid probability bound {x}: it must be in [0, 1]",
                    th.value.span,
                )
        else:
            for i in idents(v):
                if i.name in self.var_types:
                    raise SemanticError(
                        f"a bound must be constant, but uses variable `{i.name}`",
                        i.span or th.value.span,
                    )
        return Type.BOOL

    def _state(self, e: ast.Expr, recurse, ctx: str) -> None:
        """A state formula (no temporal operator outside its own P/R/S/E/A)
        under a temporal operator of `ctx` [...]: it must be Boolean."""
        t = recurse(e)
        if t != Type.BOOL:
            raise SemanticError(
                "type error: the argument of a temporal operator must be Boolean, not "
                f"{t.value}",
                e.span,
            )

    def _path(self, path: ast.Expr, recurse, ctx: str) -> None:
        if isinstance(path, ast.RewardPath):
            raise SemanticError(
                f"the reward path `{path.kind.value}` can only appear inside R [...]",
                path.span,
            )
        is_temporal = isinstance(path, ast.Temporal)
        operands = [path]
        if is_temporal:
            operands = [x for x in (path.left, path.right) if x is not None]
        if any(has_temporal(x) for x in operands):
            self._ltl(path, recurse, ctx)
            return
        if not is_temporal:
            # PRISM reads a state formula here as a (trivial) LTL formula: it
            # holds on a path iff it holds in its first state
            self._state(path, recurse, ctx)
            return
        if path.left is not None:
            self._state(path.left, recurse, ctx)
        self._state(path.right, recurse, ctx)
        if path.bound is not None:
            if path.op == ast.TemporalOp.NEXT:
                raise UnsupportedError(
                    "time-bounded X is not supported", path.bound.span or path.span
                )
            self._bound(path.bound, recurse, path.op.value)

    def _ltl(self, e: ast.Expr, recurse, ctx: str) -> None:
        """Type an LTL formula: `!`, `&`, `|`, `=>`, `<=>` and temporal
        operators over Boolean state formulas."""
        if not has_temporal(e):
            self._state(e, recurse, ctx)
            return
        if isinstance(e, ast.Unary) and e.op == ast.UnaryOp.NOT:
            self._ltl(e.operand, recurse, ctx)
            return
        if isinstance(e, ast.Binary) and e.op in _BOOL_OPS:
            self._ltl(e.left, recurse, ctx)
            self._ltl(e.right, recurse, ctx)
            return
        if isinstance(e, ast.Temporal):
            if e.left is not None:
                self._ltl(e.left, recurse, ctx)
            self._ltl(e.right, recurse, ctx)
            if e.bound is not None:
                if e.op == ast.TemporalOp.NEXT:
                    raise UnsupportedError(
                        "time-bounded X is not supported", e.bound.span or e.span
                    )
                if e.bound.ref is ast.BoundRef.REWARD:
                    raise UnsupportedError(
                        "a reward bound inside an LTL formula",
                        e.bound.span or e.span,
                        hint='reward bounds apply to one F or U: P=? [ F^{rew{"r"}'
                        "<=b} goal ]",
                    )
                self._bound(e.bound, recurse, e.op.value)
            return
        raise SemanticError(
            f"a path formula cannot appear in {_quote(e)}: LTL combines path "
            "formulas with !, &, |, => and <=> only",
            e.span,
        )

    def _bound(self, b: ast.TimeBound, recurse, opname: str) -> None:
        discrete = self.m.model_type != ast.ModelType.CTMC
        if b.ref is ast.BoundRef.REWARD:
            # a reward bound counts accumulated reward: any non-negative number
            self._reward_structure(b, recurse)
            discrete = False
        elif b.ref is ast.BoundRef.STEPS:
            discrete = True
        for x in (b.low, b.high):
            if x is None:
                continue
            t = recurse(x)
            if not is_numeric(t):
                raise SemanticError(
                    f"type error: the bound of {opname} must be a number, not "
                    f"{t.value}",
                    x.span,
                )
            if discrete and t != Type.INT:
                raise SemanticError(
                    f"the bound of {opname} must be an integer (a number of steps) for "
                    "discrete-time models",
                    x.span,
                )
            v = fold(x, self.env, self.var_types)
            if is_literal(v):
                if float(literal_value(v)) < 0:
                    raise SemanticError(
                        f"the bound of {opname} is negative ({literal_value(v)})",
                        x.span,
                    )
            else:
                for i in idents(v):
                    if i.name in self.var_types:
                        raise SemanticError(
                            f"the bound of {opname} must be constant, but uses "
                            f"variable `{i.name}`",
                            i.span,
                        )
        if b.kind == ast.TimeBoundKind.INTERVAL:
            lo = fold(b.low, self.env, self.var_types)
            hi = fold(b.high, self.env, self.var_types)
            if (
                is_literal(lo)
                and is_literal(hi)
                and float(literal_value(hi)) < float(literal_value(lo))
            ):
                raise SemanticError(
                    f"the interval [{literal_value(lo)},{literal_value(hi)}] of "
                    f"{opname} is empty",
                    b.span,
                )

    def _reward_path(self, path: ast.Expr, recurse) -> None:
        if isinstance(path, ast.RewardPath):
            if path.bound is not None:
                self._bound(path.bound, recurse, path.kind.value)
            elif path.kind == ast.RewardPathKind.INSTANT:
                raise SemanticError(
                    "the instantaneous reward I needs a time bound `I=t`", path.span
                )
            return
        if (
            isinstance(path, ast.Temporal)
            and not has_temporal(path.right)
            and path.op == ast.TemporalOp.EVENTUALLY
        ):
            self._state(path.right, recurse, "R")
            if path.bound is not None:
                self._bound(path.bound, recurse, "F")
            return
        # PRISM reads anything else as a co-safe LTL formula (a state formula
        # included); whether it is co-safe is decided when it is planned
        self._ltl(path, recurse, "R")

    def _reward_structure(self, e: ast.RewardOp | ast.TimeBound, recurse) -> None:
        rewards = self.m.rewards
        names = [r.name for r in rewards if r.name is not None]
        if e.structure is None:
            if not rewards:
                raise SemanticError("the model has no reward structures", e.span)
            return
        if isinstance(e.structure, str):
            if e.structure not in names:
                avail = ", ".join(f'"{n}"' for n in names) or "none"
                raise SemanticError(
                    f'unknown reward structure "{e.structure}" (available: {avail})',
                    e.span,
                    hint=suggest(e.structure, names),
                )
            return
        t = recurse(e.structure)
        if t != Type.INT:
            raise SemanticError(
                f"type error: a reward structure index must be an int, not {t.value}",
                e.structure.span,
            )
        v = fold(e.structure, self.env, self.var_types)
        if is_literal(v):
            k = int(literal_value(v))
            if not 1 <= k <= len(rewards):
                raise SemanticError(
                    f"reward structure index {k} is out of range (the model has "
                    f"{len(rewards)})",
                    e.structure.span or e.span,
                )

    def _filter(self, e: ast.Filter, recurse) -> Type:
        if e.op not in ast.FILTER_OPS:
            raise SemanticError(
                f"unknown filter operator `{e.op}`",
                e.span,
                hint=suggest(e.op, ast.FILTER_OPS),
            )
        t = recurse(e.operand)
        if e.states is not None:
            ts = recurse(e.states)
            if ts != Type.BOOL:
                raise SemanticError(
                    "type error: the states of a filter must be Boolean, not "
                    f"{ts.value}",
                    e.states.span,
                )
        if (
            e.op in ("min", "max", "argmin", "argmax", "sum", "avg", "range")
            and t == Type.BOOL
        ):
            raise SemanticError(
                f"type error: Boolean operand not allowed for filter `{e.op}`",
                e.operand.span,
            )
        if e.op in ("count", "forall", "exists") and t != Type.BOOL:
            raise SemanticError(
                f"type error: the operand of filter `{e.op}` must be Boolean",
                e.operand.span,
            )
        if e.op == "count":
            return Type.INT
        if e.op == "avg":
            return Type.DOUBLE
        if e.op in ("argmin", "argmax", "forall", "exists"):
            return Type.BOOL
        return t


def _quote(e: ast.Expr, limit: int = 60) -> str:
    """`e` as PRISM text in backticks, shortened to about `limit` characters."""
    from ..lang.printer import format_expr

    text = format_expr(e)
    if len(text) > limit:
        text = text[: limit - 3].rstrip() + "..."
    return f"`{text}`"


def has_temporal(e: ast.Expr) -> bool:
    """Whether `e` contains a temporal operator not enclosed in its own
    P/R/S/E/A operator (i.e. a nested path formula: LTL)."""
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Temporal, ast.RewardPath)):
            return True
        if isinstance(n, _OPERATORS):
            continue
        bounds = (ast.TimeBound, ast.Threshold)
        stack.extend(c for c in ast.children(n) if not isinstance(c, bounds))
    return False


_BOOL_OPS = (
    ast.BinaryOp.AND,
    ast.BinaryOp.OR,
    ast.BinaryOp.IMPLIES,
    ast.BinaryOp.IFF,
)
_OPERATORS = (ast.ProbOp, ast.RewardOp, ast.SteadyOp, ast.PathQuantifier, ast.Filter)
