"""Evaluation and constant folding of PRISM expressions, with PRISM's exact
arithmetic (the floating-point mode of `parser.ast.Expression.evaluate`).

The rules, which the builder's vectorised evaluation must reproduce:

- values are Python `bool`, `int` (PRISM's 32-bit Java `int`) or `float`
  (Java `double`). The type of an expression is static (`types.type_of`) and
  the Python type of its value matches it;
- `+ - *` on two ints are int and *raise* on 32-bit overflow (PRISM uses
  `Math.addExact` & co.); with a double operand they are double;
- `/` is always double division: `1/2 = 0.5`, `x/0` is `±Infinity` or `NaN`
  (no error);
- `pow(i, j)` / `i ^ j` on ints is an int; a negative exponent or a result
  outside the 32-bit range is an error. On doubles it is Java's `Math.pow`;
- `mod(i, n)` is on ints only, non-negative: `mod(-1, 3) = 2`; `n <= 0` is an
  error;
- `floor`, `ceil` and `round` give ints; `round(x) = floor(x + 0.5)` (Java's
  `Math.round`); NaN or infinite arguments are errors;
- `log(x, b) = ln(x) / ln(b)` (`log(0, b) = -Infinity`, negative x → NaN);
- `min`/`max` are int when all arguments are ints;
- comparisons of an int with a double compare as doubles; `=` on doubles is
  Java's `Double.equals` (NaN = NaN, 0.0 ≠ -0.0);
- `c ? a : b` evaluates only the taken branch; its value is converted to
  double when the other branch is double.

Errors are `SemanticError`s located at the offending node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from ..errors import SemanticError
from ..lang import ast
from .rewrite import map_children
from .types import Type, type_of


Value = int | float | bool

INT_MIN = -(2**31)
INT_MAX = 2**31 - 1


class _Unknown(Exception):
    """Raised internally when an identifier has no value (folding)."""


# ------------------------------------------------------------------- arithmetic


def _check_int(v: int, node: ast.Node, what: str = "integer arithmetic") -> int:
    if v < INT_MIN or v > INT_MAX:
        raise SemanticError(
            f"integer overflow in {what} (result {v} is outside the 32-bit range)",
            node.span,
            hint="PRISM integers are 32-bit; use a double (e.g. `1.0*x`) for large values",
        )
    return v


def java_div(a: float, b: float) -> float:
    """IEEE division: `x/0` is ±inf (or NaN for 0/0), never an exception."""
    a, b = float(a), float(b)
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return math.nan
        sign = math.copysign(1.0, a) * math.copysign(1.0, b)
        return math.copysign(math.inf, sign)
    return a / b


def java_pow(a: float, b: float) -> float:
    """Java's `Math.pow` (C `pow`): never raises, never complex."""
    a, b = float(a), float(b)
    try:
        r = math.pow(a, b)
    except ZeroDivisionError:  # pragma: no cover - math.pow raises ValueError
        r = math.inf
    except ValueError:
        if a == 0.0 and b < 0:
            # pow(±0, negative): ±inf for odd integer exponents, +inf otherwise
            odd = b.is_integer() and int(b) % 2 == 1
            return math.copysign(math.inf, a) if odd else math.inf
        return math.nan
    except OverflowError:
        neg = a < 0 and b.is_integer() and int(b) % 2 == 1
        return -math.inf if neg else math.inf
    return r


def java_log(x: float, b: float) -> float:
    """`PrismUtils.log(x, b) = Math.log(x) / Math.log(b)`."""
    return java_div(_ln(float(x)), _ln(float(b)))


def _ln(x: float) -> float:
    if math.isnan(x) or x < 0:
        return math.nan
    if x == 0:
        return -math.inf
    if math.isinf(x):
        return math.inf
    return math.log(x)


def java_double_equals(a: float, b: float) -> bool:
    """`Double.equals`: NaN equals NaN, and 0.0 differs from -0.0."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _to_int_checked(x: float, fname: str, node: ast.Node) -> int:
    if math.isnan(x) or math.isinf(x):
        raise SemanticError(f"cannot take {fname}() of {_fmt(x)}", node.span)
    # Java's (int) cast saturates; values beyond the int range are errors here
    return _check_int(int(x), node, f"{fname}()")


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
            raise SemanticError(f"unknown identifier `{node.name}`", node.span) from None

    return _Evaluator(lookup, env).eval(expr)


class _Evaluator:
    def __init__(self, lookup: Callable[[ast.Ident], Value], env: Mapping[str, Value]):
        self.lookup = lookup
        self.env = env

    def static_type(self, expr: ast.Expr) -> Type | None:
        """Static type of an (unevaluated) expression, from the values' types."""
        try:
            return type_of(expr, _EnvTypes(self.env))
        except SemanticError:
            return None

    def eval(self, e: ast.Expr) -> Value:  # noqa: C901 - one dispatch
        if isinstance(e, ast.BoolLit):
            return bool(e.value)
        if isinstance(e, ast.IntLit):
            return _check_int(int(e.value), e, "integer literal")
        if isinstance(e, ast.RealLit):
            return float(e.value)
        if isinstance(e, ast.Ident):
            return self.lookup(e)
        if isinstance(e, ast.Unary):
            v = self.eval(e.operand)
            if e.op == ast.UnaryOp.NOT:
                return not v
            if is_int(v):
                return _check_int(-v, e, "negation")
            return -float(v)
        if isinstance(e, ast.Binary):
            op = e.op
            if op == ast.BinaryOp.AND:
                return bool(self.eval(e.left)) and bool(self.eval(e.right))
            if op == ast.BinaryOp.OR:
                return bool(self.eval(e.left)) or bool(self.eval(e.right))
            if op == ast.BinaryOp.IMPLIES:
                return (not self.eval(e.left)) or bool(self.eval(e.right))
            return binary(op, self.eval(e.left), self.eval(e.right), e)
        if isinstance(e, ast.Ite):
            c = self.eval(e.cond)
            taken, other = (e.then, e.else_) if c else (e.else_, e.then)
            v = self.eval(taken)
            if is_int(v) and self.static_type(other) == Type.DOUBLE:
                return float(v)
            return v
        if isinstance(e, ast.Call):
            return call(e.func, [self.eval(a) for a in e.args], e)
        raise SemanticError(
            f"`{type(e).__name__}` cannot be evaluated to a value here", e.span
        )


class _EnvTypes(Mapping):
    def __init__(self, env: Mapping[str, Value]):
        self.env = env

    def __getitem__(self, name: str) -> Type:
        return type_of_value(self.env[name])

    def __iter__(self):
        return iter(self.env)

    def __len__(self):
        return len(self.env)


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
            return _mul(x, y)
    raise SemanticError(f"unknown operator `{op.value}`", node.span)  # pragma: no cover


def _mul(x: float, y: float) -> float:
    try:
        return x * y
    except OverflowError:  # pragma: no cover - float mul does not raise
        return math.inf


def power(a: Value, b: Value, node: ast.Node) -> Value:
    if is_int(a) and is_int(b):
        if b < 0:
            raise SemanticError(
                "negative exponent not allowed for integer power",
                node.span,
                hint="use a double base, e.g. `pow(2.0, -1)`",
            )
        if a in (0, 1) or b == 0:
            return 1 if b == 0 else a
        if a == -1:
            return 1 if b % 2 == 0 else -1
        if b > 64:
            # |a| >= 2: certainly out of range
            raise SemanticError("overflow evaluating integer power", node.span)
        r = a**b
        if r > INT_MAX:
            raise SemanticError("overflow evaluating integer power", node.span)
        if r < INT_MIN:
            raise SemanticError("underflow evaluating integer power", node.span)
        return r
    return java_pow(a, b)


def call(func: str, args: list[Value], node: ast.Node) -> Value:
    """Apply a built-in function to evaluated arguments."""
    if func in ("min", "max"):
        if not args:
            raise SemanticError(f"`{func}` needs at least one argument", node.span)
        if all(is_int(a) for a in args):
            return min(args) if func == "min" else max(args)
        xs = [float(a) for a in args]
        r = xs[0]
        for x in xs[1:]:
            # Java: (d < dMin) ? d : dMin  -- NaN never replaces, but a NaN
            # first argument stays
            if func == "min" and x < r:
                r = x
            elif func == "max" and x > r:
                r = x
        return r
    if func == "floor":
        return _to_int_checked(math.floor(float(args[0])) if math.isfinite(float(args[0])) else float(args[0]), "floor", node)
    if func == "ceil":
        return _to_int_checked(math.ceil(float(args[0])) if math.isfinite(float(args[0])) else float(args[0]), "ceil", node)
    if func == "round":
        x = float(args[0])
        return _to_int_checked(math.floor(x + 0.5) if math.isfinite(x) else x, "round", node)
    if func == "pow":
        return power(args[0], args[1], node)
    if func == "mod":
        i, j = args
        if j <= 0:
            raise SemanticError(
                f"attempt to compute modulo with non-positive divisor {j}", node.span
            )
        return i % j  # Python's % is non-negative for j > 0, as PRISM's mod
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


def fold(
    expr: ast.Expr,
    env: Mapping[str, Value | ast.Expr],
    types: Mapping[str, Type] | None = None,
) -> ast.Expr:
    """Partially evaluate `expr`.

    Identifiers bound in `env` are replaced (a value becomes a literal; an
    `ast.Expr` is substituted as is), subexpressions whose operands are all
    literals are folded into literals, everything else is kept (with its
    span). Boolean connectives simplify with a literal operand
    (`false & x` → `false`, `true & x` → `x`); conditionals with a literal
    condition select their branch.

    `types` gives the types of identifiers left symbolic (state variables,
    parameters); it is only needed to keep `c ? 1 : x` double-typed when the
    int branch is selected and `x` is a double.

    Property operators (`P`, `R`, ...) are folded inside their operands.
    Arithmetic errors are raised only for subexpressions that are evaluated:
    division by zero folds to `Infinity`/`NaN` like PRISM.
    """
    return _Folder(env, types or {}).fold(expr)


class _TypesOf(Mapping):
    def __init__(self, env, types):
        self.env, self.types = env, types

    def __getitem__(self, name):
        if name in self.types:
            return self.types[name]
        v = self.env[name]
        if isinstance(v, (bool, int, float)):
            return type_of_value(v)
        return type_of(v, self)

    def __iter__(self):
        return iter({**self.env, **self.types})

    def __len__(self):
        return len({**self.env, **self.types})


class _Folder:
    def __init__(self, env, types):
        self.env = env
        self.types = types

    def type_of(self, e: ast.Expr) -> Type | None:
        try:
            return type_of(e, _TypesOf(self.env, self.types))
        except SemanticError:
            return None

    def fold(self, e: ast.Expr) -> ast.Expr:  # noqa: C901
        sp = e.span
        if is_literal(e):
            return e
        if isinstance(e, ast.Ident):
            if e.name in self.env:
                v = self.env[e.name]
                if isinstance(v, (bool, int, float)):
                    return literal(v, sp)
                return v
            return e
        if isinstance(e, ast.Unary):
            x = self.fold(e.operand)
            if is_literal(x):
                v = literal_value(x)
                return literal(_Evaluator(None, {}).eval(ast.Unary(e.op, literal(v), span=sp)), sp)
            return ast.Unary(e.op, x, span=sp)
        if isinstance(e, ast.Binary):
            B = ast.BinaryOp
            left = self.fold(e.left)
            if e.op in (B.AND, B.OR, B.IMPLIES) and is_literal(left):
                lv = bool(literal_value(left))
                if e.op == B.AND and not lv:
                    return ast.BoolLit(False, span=sp)
                if e.op == B.OR and lv:
                    return ast.BoolLit(True, span=sp)
                if e.op == B.IMPLIES and not lv:
                    return ast.BoolLit(True, span=sp)
                right = self.fold(e.right)
                if is_literal(right):
                    return literal(bool(literal_value(right)), sp)
                return right
            right = self.fold(e.right)
            if is_literal(left) and is_literal(right):
                return literal(binary(e.op, literal_value(left), literal_value(right), e), sp)
            if e.op in (B.AND, B.OR) and is_literal(right):
                rv = bool(literal_value(right))
                if e.op == B.AND:
                    return left if rv else ast.BoolLit(False, span=sp)
                return ast.BoolLit(True, span=sp) if rv else left
            return ast.Binary(e.op, left, right, span=sp)
        if isinstance(e, ast.Ite):
            c = self.fold(e.cond)
            if is_literal(c):
                taken, other = (e.then, e.else_) if literal_value(c) else (e.else_, e.then)
                t = self.fold(taken)
                if self.type_of(t) == Type.INT and self.type_of(other) == Type.DOUBLE:
                    if is_literal(t):
                        return literal(float(literal_value(t)), sp)
                    # keep the conditional so that the expression stays double
                    return ast.Ite(c, self.fold(e.then), self.fold(e.else_), span=sp)
                return t
            return ast.Ite(c, self.fold(e.then), self.fold(e.else_), span=sp)
        if isinstance(e, ast.Call):
            args = tuple(self.fold(a) for a in e.args)
            if all(is_literal(a) for a in args):
                return literal(call(e.func, [literal_value(a) for a in args], e), sp)
            return ast.Call(e.func, args, span=sp)
        # property-level nodes: fold inside (through bounds and thresholds)
        return map_children(e, self._fold_child)

    def _fold_child(self, c: ast.Node) -> ast.Node:
        if isinstance(c, (ast.TimeBound, ast.Threshold)):
            return map_children(c, self._fold_child)
        return self.fold(c)
