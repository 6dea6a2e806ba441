"""Evaluation and constant folding of PRISM expressions, with PRISM's exact
arithmetic (the floating-point mode of `parser.ast.Expression.evaluate`).

Values are Python `bool`, `int` (PRISM's 32-bit Java `int`) or `float`
(Java `double`); the type of an expression is static (`types.type_of`) and
the Python type of its value matches it. The operators and functions are
those of `jaxmc.semantics.functions`, which the builder's vectorised
evaluation and the parametric path share; what is left here is the walk:
`& | =>` evaluate their right operand only when needed, `c ? a : b` only the
taken branch (its value converted to double when the other branch is
double), comparisons of an int with a double compare as doubles.

Errors are `SemanticError`s located at the offending node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from ..errors import SemanticError
from ..lang import ast
from . import functions as F
from .types import Type


Value = int | float | bool

INT_MIN = F.INT_MIN
INT_MAX = F.INT_MAX


class _Unknown(Exception):
    """Raised internally when an identifier has no value (folding)."""


# ------------------------------------------------------------------- arithmetic
# The operators are `functions`' (shared with the vectorised evaluators),
# applied to numpy scalars; the results are turned back into Python values.


def _check_int(v: int, node: ast.Node, what: str = "integer arithmetic") -> int:
    if F.int_out_of_range(v):
        raise SemanticError(
            f"integer overflow in {what} (result {v} is outside the 32-bit range)",
            node.span,
            hint="PRISM integers are 32-bit; use a double (e.g. `1.0*x`) for large "
            "values",
        )
    return v


def _float(f, *args) -> float:
    with np.errstate(all="ignore"):
        return float(f(np, *args))


def java_div(a: float, b: float) -> float:
    """IEEE division: `x/0` is ±inf (or NaN for 0/0), never an exception."""
    return _float(F.fdiv, float(a), float(b))


def java_pow(a: float, b: float) -> float:
    """Java's `Math.pow` (C `pow`): never raises, never complex."""
    return _float(F.fpow, float(a), float(b))


def java_log(x: float, b: float) -> float:
    """`PrismUtils.log(x, b) = Math.log(x) / Math.log(b)`."""
    return _float(F.flog, float(x), float(b))


def java_double_equals(a: float, b: float) -> bool:
    """`Double.equals`: NaN equals NaN, and 0.0 differs from -0.0."""
    return bool(F.deq(np, float(a), float(b)))


def _rounding(func: str, x: float, node: ast.Node) -> int:
    with np.errstate(all="ignore"):
        if not F.rounding_bad(np, func, x):
            return int(F.rounding(np, func, x))
        if math.isfinite(x):
            v = int(F.ROUNDING[func](np, x))
            return _check_int(v, node, f"{func}()")
    raise SemanticError(f"cannot take {func}() of {_fmt(x)}", node.span)


def _fmt(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return repr(x)


def is_double(v: Value) -> bool:
    return isinstance(v, float)


def is_int(v: Value) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# --------------------------------------------------------------------- evaluate


def evaluate(expr: ast.Expr, env: Mapping[str, Value]) -> Value:
    """Evaluate `expr` with the values of identifiers given by `env`
    (constants and variables alike; bools as `bool`).

    **Raises:** `SemanticError` (located) on an unknown identifier or an
    arithmetic error (overflow, negative int exponent, `mod` by <= 0, `floor`
    of NaN, ...).
    """

    def lookup(node: ast.Ident) -> Value:
        try:
            return env[node.name]
        except KeyError:
            raise SemanticError(
                f"unknown identifier `{node.name}`", node.span
            ) from None

    return _Evaluator(lookup, env).eval(expr)


class _Evaluator:
    """PRISM's lazy evaluation with an explicit stack (no recursion): `&`,
    `|`, `=>` evaluate their right operand only when needed, `? :` only the
    taken branch."""

    def __init__(self, lookup: Callable[[ast.Ident], Value], env: Mapping[str, Value]):
        self.lookup = lookup
        self.env = env

    def static_type(self, expr: ast.Expr) -> Type | None:
        """Static type of an (unevaluated) expression, from the values' types."""

        def lookup(name: str) -> Type | None:
            v = self.env.get(name) if self.env is not None else None
            return None if v is None else type_of_value(v)

        return static_type(expr, lookup)

    def eval(self, root: ast.Expr) -> Value:  # noqa: C901 - one dispatch
        B = ast.BinaryOp
        vals: list[Value] = []
        stack: list[tuple] = [(root, 0, None)]
        while stack:
            e, stage, extra = stack.pop()
            if isinstance(e, ast.BoolLit):
                vals.append(bool(e.value))
            elif isinstance(e, ast.IntLit):
                vals.append(_check_int(int(e.value), e, "integer literal"))
            elif isinstance(e, ast.RealLit):
                vals.append(float(e.value))
            elif isinstance(e, ast.Ident):
                vals.append(self.lookup(e))
            elif isinstance(e, ast.Unary):
                if stage == 0:
                    stack += [(e, 1, None), (e.operand, 0, None)]
                    continue
                v = vals.pop()
                if e.op == ast.UnaryOp.NOT:
                    vals.append(not v)
                elif is_int(v):
                    vals.append(_check_int(-v, e, "negation"))
                else:
                    vals.append(-float(v))
            elif isinstance(e, ast.Binary) and e.op in (B.AND, B.OR, B.IMPLIES):
                if stage == 0:
                    stack += [(e, 1, None), (e.left, 0, None)]
                    continue
                if stage == 2:
                    vals.append(bool(vals.pop()))
                    continue
                lv = bool(vals.pop())
                if e.op == B.AND and not lv:
                    vals.append(False)
                elif e.op == B.OR and lv:
                    vals.append(True)
                elif e.op == B.IMPLIES and not lv:
                    vals.append(True)
                else:
                    stack += [(e, 2, None), (e.right, 0, None)]
            elif isinstance(e, ast.Binary):
                if stage == 0:
                    stack += [(e, 1, None), (e.right, 0, None), (e.left, 0, None)]
                    continue
                b, a = vals.pop(), vals.pop()
                vals.append(binary(e.op, a, b, e))
            elif isinstance(e, ast.Ite):
                if stage == 0:
                    stack += [(e, 1, None), (e.cond, 0, None)]
                    continue
                if stage == 1:
                    c = vals.pop()
                    taken, other = (e.then, e.else_) if c else (e.else_, e.then)
                    stack += [(e, 2, other), (taken, 0, None)]
                    continue
                v = vals.pop()
                if is_int(v) and self.static_type(extra) == Type.DOUBLE:
                    v = float(v)
                vals.append(v)
            elif isinstance(e, ast.Call):
                if stage == 0:
                    stack.append((e, 1, None))
                    stack += [(a, 0, None) for a in reversed(e.args)]
                    continue
                k = len(e.args)
                args = vals[len(vals) - k :]
                del vals[len(vals) - k :]
                vals.append(call(e.func, args, e))
            else:
                raise SemanticError(
                    f"`{type(e).__name__}` cannot be evaluated to a value here", e.span
                )
        return vals[0]


def static_type(expr: ast.Expr, lookup: Callable[[str], Type | None]) -> Type | None:
    """The type of a plain expression (PRISM's rules, `types.type_of`) with
    identifier types from `lookup`, or None when some part has no type here.
    Iterative, for expressions of any depth; does not report type errors."""
    B = ast.BinaryOp
    order, stack = [], [expr]
    while stack:
        e = stack.pop()
        order.append(e)
        if isinstance(e, (ast.Unary, ast.Binary, ast.Ite, ast.Call)):
            stack.extend(ast.children(e))
    types: dict[int, Type | None] = {}
    for e in reversed(order):
        kids = [types[id(c)] for c in ast.children(e)] if not _is_leaf(e) else []
        if any(k is None for k in kids):
            t = None
        elif isinstance(e, ast.BoolLit):
            t = Type.BOOL
        elif isinstance(e, ast.IntLit):
            t = Type.INT
        elif isinstance(e, ast.RealLit):
            t = Type.DOUBLE
        elif isinstance(e, ast.Ident):
            t = lookup(e.name)
        elif isinstance(e, ast.Unary):
            t = Type.BOOL if e.op == ast.UnaryOp.NOT else kids[0]
        elif isinstance(e, ast.Binary):
            if e.op in (B.ADD, B.SUB, B.MUL, B.POW):
                t = _numeric(kids)
            else:
                t = Type.DOUBLE if e.op == B.DIV else Type.BOOL
        elif isinstance(e, ast.Ite):
            t = Type.BOOL if kids[1:] == [Type.BOOL, Type.BOOL] else _numeric(kids[1:])
        elif isinstance(e, ast.Call):
            if e.func in ("floor", "ceil", "round", "mod"):
                t = Type.INT
            else:
                t = Type.DOUBLE if e.func == "log" else _numeric(kids)
        else:
            t = None
        types[id(e)] = t
    return types[id(expr)]


def _is_leaf(e: ast.Expr) -> bool:
    return not isinstance(e, (ast.Unary, ast.Binary, ast.Ite, ast.Call))


def _numeric(kids: list[Type]) -> Type:
    return Type.DOUBLE if Type.DOUBLE in kids else Type.INT


def type_of_value(v: Value) -> Type:
    if isinstance(v, bool):
        return Type.BOOL
    if isinstance(v, int):
        return Type.INT
    return Type.DOUBLE


def binary(op: ast.BinaryOp, a: Value, b: Value, node: ast.Node) -> Value:
    """Apply a (non-short-circuit) binary operator to two values."""
    B = ast.BinaryOp
    if op == B.IFF:
        return bool(a) == bool(b)
    if op == B.AND:
        return bool(a) and bool(b)
    if op == B.OR:
        return bool(a) or bool(b)
    if op == B.IMPLIES:
        return (not a) or bool(b)
    if op in (B.EQ, B.NE):
        if isinstance(a, bool) or isinstance(b, bool):
            eq = a == b
        elif is_int(a) and is_int(b):
            eq = a == b
        else:
            eq = java_double_equals(float(a), float(b))
        return eq if op == B.EQ else not eq
    if op == B.DIV:
        return java_div(a, b)
    if op == B.POW:
        return power(a, b, node)
    both_int = is_int(a) and is_int(b)
    if op in (B.LT, B.LE, B.GT, B.GE):
        x, y = (a, b) if both_int else (float(a), float(b))
        if op == B.LT:
            return x < y
        if op == B.LE:
            return x <= y
        if op == B.GT:
            return x > y
        return x >= y
    if both_int:
        if op == B.ADD:
            return _check_int(a + b, node)
        if op == B.SUB:
            return _check_int(a - b, node)
        if op == B.MUL:
            return _check_int(a * b, node)
    else:
        x, y = float(a), float(b)
        if op == B.ADD:
            return x + y
        if op == B.SUB:
            return x - y
        if op == B.MUL:
            return x * y
    raise SemanticError(f"unknown operator `{op.value}`", node.span)  # pragma: no cover


def power(a: Value, b: Value, node: ast.Node) -> Value:
    if is_int(a) and is_int(b):
        if b < 0:
            raise SemanticError(
                "negative exponent not allowed for integer power",
                node.span,
                hint="use a double base, e.g. `pow(2.0, -1)`",
            )
        if F.ipow_bad(np, a, b):
            what = "overflow" if a > 0 or b % 2 == 0 else "underflow"
            raise SemanticError(f"{what} evaluating integer power", node.span)
        return int(F.ipow(np, a, b))
    return java_pow(a, b)


def call(func: str, args: list[Value], node: ast.Node) -> Value:
    """Apply a built-in function to evaluated arguments."""
    if func in ("min", "max"):
        if not args:
            raise SemanticError(f"`{func}` needs at least one argument", node.span)
        if all(is_int(a) for a in args):
            return min(args) if func == "min" else max(args)
        step = F.fmin if func == "min" else F.fmax
        r = float(args[0])
        for x in args[1:]:
            r = float(step(np, r, float(x)))
        return r
    if func in F.ROUNDING:
        return _rounding(func, float(args[0]), node)
    if func == "pow":
        return power(args[0], args[1], node)
    if func == "mod":
        i, j = args
        if F.imod_bad(np, i, j):
            raise SemanticError(
                f"attempt to compute modulo with non-positive divisor {j}", node.span
            )
        return int(F.imod(np, i, j))
    if func == "log":
        return java_log(args[0], args[1])
    raise SemanticError(f"unknown function `{func}`", node.span)


# ------------------------------------------------------------------------- fold


def literal(v: Value, span: ast.Span | None = None) -> ast.Expr:
    """The literal node for a value."""
    if isinstance(v, bool):
        return ast.BoolLit(v, span=span)
    if isinstance(v, int):
        return ast.IntLit(v, span=span)
    return ast.RealLit(float(v), text=_fmt(v), span=span)


def literal_value(e: ast.Expr) -> Value | None:
    """The value of a literal node, or None when `e` is not a literal."""
    if isinstance(e, ast.BoolLit):
        return bool(e.value)
    if isinstance(e, ast.IntLit):
        return int(e.value)
    if isinstance(e, ast.RealLit):
        return float(e.value)
    return None


def is_literal(e: ast.Expr) -> bool:
    return isinstance(e, (ast.BoolLit, ast.IntLit, ast.RealLit))
