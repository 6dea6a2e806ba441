"""PRISM's type system for expressions: `int`, `double`, `bool`.

Mirrors `parser.visitor.TypeCheck`:

- `+ - *` and unary `-`: int if all operands are int, else double;
  `/` is always double;
- `pow(a, b)` and `a ^ b`: int if both are int, else double (a negative int
  exponent is an evaluation error, not a type error);
- `floor`, `ceil`, `round`, `mod`: int (`mod` takes ints only);
  `log`: double; `min`/`max`: int if all int, else double;
- `< <= > >=` compare numbers; `= !=` compare numbers or two bools;
- `! & | => <=>` take bools;
- `c ? a : b`: `c` bool; `a`, `b` both bool or both numeric (int + double
  unify to double);
- an int can be used wherever a double is expected (`can_assign`).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping

from ..errors import SemanticError
from ..lang import ast


Type = ast.ValueType

_NUMERIC = (Type.INT, Type.DOUBLE)


def can_assign(target: Type, source: Type) -> bool:
    """Whether a value of type `source` may be stored where `target` is
    expected (PRISM's `Type.canAssign`): equal types, or int → double."""
    return target == source or (target == Type.DOUBLE and source == Type.INT)


def is_numeric(t: Type) -> bool:
    return t in _NUMERIC


def unify_numeric(*ts: Type) -> Type:
    return Type.DOUBLE if Type.DOUBLE in ts else Type.INT


def suggest(name: str, candidates: Iterable[str]) -> str | None:
    """A "did you mean" hint for an unknown `name`, or None."""
    close = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
    if not close:
        return None
    return "did you mean " + " or ".join(f"`{c}`" for c in close) + "?"


def unknown_identifier(
    node: ast.Ident, scope: Iterable[str], what: str = "identifier"
) -> SemanticError:
    return SemanticError(
        f"unknown {what} `{node.name}`", node.span, hint=suggest(node.name, scope)
    )


Hook = Callable[[ast.Expr, Callable[[ast.Expr], Type]], Type]


def type_of(
    expr: ast.Expr, scope: Mapping[str, Type], hook: Hook | None = None
) -> Type:
    """The type of `expr`, with identifier types from `scope`.

    `hook(node, recurse)` types nodes other than plain expressions (property
    operators); without one they are rejected.

    **Raises:** `SemanticError` located at the offending subexpression, with a
    did-you-mean hint for unknown identifiers.
    """
    return _TypeChecker(scope, hook).visit(expr)


class _TypeChecker:
    """Types expressions with an explicit stack (no recursion), so that
    expressions thousands of levels deep can be checked. Errors come in the
    order a recursive checker would find them: operands left to right, a
    node's own check after its operands (for `?:`, the condition's check
    before the branches; for calls, the arity before the arguments)."""

    def __init__(self, scope: Mapping[str, Type], hook: Hook | None):
        self.scope = scope
        self.hook = hook

    def visit(self, e: ast.Expr) -> Type:
        types: dict[int, Type] = {}
        # (node, stage): stage 0 on first visit, then 1 (and 2 for `?:`)
        stack: list[tuple[ast.Expr, int]] = [(e, 0)]
        while stack:
            node, stage = stack.pop()
            if id(node) in types:
                continue
            if isinstance(node, ast.Unary):
                if stage == 0:
                    stack += [(node, 1), (node.operand, 0)]
                else:
                    types[id(node)] = self._unary(node, types[id(node.operand)])
            elif isinstance(node, ast.Binary):
                if stage == 0:
                    stack += [(node, 1), (node.right, 0), (node.left, 0)]
                else:
                    t1, t2 = types[id(node.left)], types[id(node.right)]
                    types[id(node)] = self._binary(node, t1, t2)
            elif isinstance(node, ast.Ite):
                if stage == 0:
                    stack += [(node, 1), (node.cond, 0)]
                elif stage == 1:
                    tc = types[id(node.cond)]
                    if tc != Type.BOOL:
                        raise SemanticError(
                            f"type error: condition of `?` is {tc.value}, not bool",
                            node.cond.span,
                        )
                    stack += [(node, 2), (node.else_, 0), (node.then, 0)]
                else:
                    t1, t2 = types[id(node.then)], types[id(node.else_)]
                    types[id(node)] = self._ite(node, t1, t2)
            elif isinstance(node, ast.Call):
                if stage == 0:
                    self._check_arity(node)
                    stack.append((node, 1))
                    stack += [(a, 0) for a in reversed(node.args)]
                else:
                    ts = [types[id(a)] for a in node.args]
                    types[id(node)] = self._call(node, ts)
            else:
                types[id(node)] = self._leaf(node)
        return types[id(e)]

    def _leaf(self, e: ast.Expr) -> Type:
        if isinstance(e, ast.BoolLit):
            return Type.BOOL
        if isinstance(e, ast.IntLit):
            return Type.INT
        if isinstance(e, ast.RealLit):
            return Type.DOUBLE
        if isinstance(e, ast.Ident):
            try:
                return self.scope[e.name]
            except KeyError:
                raise unknown_identifier(e, self.scope) from None
        if isinstance(e, ast.Primed):
            raise SemanticError(
                f"`{e.name}'` can only appear on the left of an assignment "
                f"`({e.name}'=...)`",
                e.span,
            )
        if self.hook is not None:
            return self.hook(e, self.visit)
        raise SemanticError(
            f"a property operator (`{type(e).__name__}`) cannot appear in a model "
            "expression",
            e.span,
        )

    def _unary(self, e: ast.Unary, t: Type) -> Type:
        if e.op == ast.UnaryOp.NOT:
            self._expect_bool(t, e.operand, "!")
            return Type.BOOL
        self._expect_numeric(t, e.operand, "-")
        return t

    def _ite(self, e: ast.Ite, t1: Type, t2: Type) -> Type:
        if t1 == Type.BOOL and t2 == Type.BOOL:
            return Type.BOOL
        if is_numeric(t1) and is_numeric(t2):
            return unify_numeric(t1, t2)
        raise SemanticError(
            f"type error: the branches of `?` have types {t1.value} and {t2.value}, "
            "which do not match",
            e.span,
        )

    def _expect_bool(self, t: Type, node: ast.Expr, op: str) -> None:
        if t != Type.BOOL:
            raise SemanticError(
                f"type error: `{op}` applied to a non-Boolean expression (of type "
                f"{t.value})",
                node.span,
            )

    def _expect_numeric(self, t: Type, node: ast.Expr, op: str) -> None:
        if not is_numeric(t):
            raise SemanticError(
                f"type error: `{op}` can only be applied to ints or doubles, not "
                f"{t.value}",
                node.span,
            )

    def _binary(self, e: ast.Binary, t1: Type, t2: Type) -> Type:
        B = ast.BinaryOp
        op = e.op
        if op in (B.IFF, B.IMPLIES, B.OR, B.AND):
            self._expect_bool(t1, e.left, op.value)
            self._expect_bool(t2, e.right, op.value)
            return Type.BOOL
        if op in (B.EQ, B.NE):
            if (t1 == Type.BOOL and t2 == Type.BOOL) or (
                is_numeric(t1) and is_numeric(t2)
            ):
                return Type.BOOL
            raise SemanticError(
                f"type error: `{op.value}` cannot compare {t1.value} and {t2.value}",
                e.span,
            )
        if op in (B.LT, B.LE, B.GT, B.GE):
            if is_numeric(t1) and is_numeric(t2):
                return Type.BOOL
            raise SemanticError(
                f"type error: `{op.value}` cannot compare {t1.value} and {t2.value}",
                e.span,
                hint="only numbers can be ordered" if Type.BOOL in (t1, t2) else None,
            )
        self._expect_numeric(t1, e.left, op.value)
        self._expect_numeric(t2, e.right, op.value)
        if op == B.DIV:
            return Type.DOUBLE
        return unify_numeric(t1, t2)

    def _check_arity(self, e: ast.Call) -> None:
        arity = ast.FUNCTIONS.get(e.func)
        if e.func == "multi":
            from ..errors import UnsupportedError

            raise UnsupportedError(
                "multi-objective queries multi(...) are not supported",
                e.span,
                hint="check each objective as a separate property",
            )
        if arity is None:
            raise SemanticError(
                f"unknown function `{e.func}`",
                e.span,
                hint=suggest(e.func, ast.FUNCTIONS),
            )
        lo, hi = arity
        n = len(e.args)
        if n < lo or (hi is not None and n > hi):
            want = (
                f"{lo}"
                if lo == hi
                else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
            )
            raise SemanticError(
                f"function `{e.func}` takes {want} argument(s), not {n}", e.span
            )

    def _call(self, e: ast.Call, ts: list[Type]) -> Type:
        if e.func == "mod":
            for t, a in zip(ts, e.args):
                if t != Type.INT:
                    raise SemanticError(
                        f"type error: non-integer argument (of type {t.value}) to "
                        "function `mod`",
                        a.span,
                    )
            return Type.INT
        for t, a in zip(ts, e.args):
            if t == Type.BOOL:
                raise SemanticError(
                    f"type error: Boolean argument not allowed in function `{e.func}`",
                    a.span,
                )
        if e.func in ("floor", "ceil", "round"):
            return Type.INT
        if e.func == "log":
            return Type.DOUBLE
        return unify_numeric(*ts)  # min, max, pow
