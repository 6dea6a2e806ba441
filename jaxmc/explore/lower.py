"""Lowering of PRISM expressions to vectorised numpy functions.

An expression over state variables is compiled once into Python source that
composes numpy ufuncs, so evaluating it on a batch of states costs one numpy
call per AST node, never a Python loop per state. The exploration evaluates
each guard, probability and assignment this way on a whole BFS frontier.

PRISM's semantics, which differ from Python's in places:

- `/` is always real division (`1/2` is `0.5`);
- `+ - *` of two ints is an int;
- `pow(a, b)`/`a^b` is an int when both operands are ints (computed as a
  double then truncated, as PRISM does; a negative exponent is a PRISM error,
  reported here with `ExplorationError` when it is actually used);
- `mod(i, j)` is the non-negative modulo for `j > 0` (PRISM rejects `j <= 0`);
- `floor`, `ceil`, `round` return ints; `round(x) = floor(x + 0.5)`;
- `log(x, b) = ln(x) / ln(b)`;
- `c ? a : b` is evaluated elementwise with `np.where`: both branches are
  computed on the whole batch, so numpy floating-point warnings (division by
  zero in an untaken branch) are suppressed.

Integer-valued functions that PRISM rejects for some arguments (`mod` with a
non-positive divisor, an integer power with a negative exponent) cannot raise
during the batch evaluation, because the offending values may sit in an untaken
`? :` branch. They produce a sentinel (`INVALID_INT`) instead; the builder
checks the results it actually uses.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import UnsupportedError
from ..lang import ast


#: What `mod`/`pow` return for arguments PRISM rejects (see module docstring).
INVALID_INT = np.iinfo(np.int64).min


class Kind(str, enum.Enum):
    """The numpy-level type of an expression."""

    INT = "int"
    DOUBLE = "double"
    BOOL = "bool"


@dataclass(frozen=True, eq=False)
class Lowered:
    """An expression compiled to numpy.

    `lowered(states)` evaluates on an int array `[batch, nvars]` and returns an
    array `[batch]` (int64, float64 or bool by `kind`). `lowered.on_columns(cols,
    n)` does the same on a sequence of per-variable 1-D arrays (anything that
    supports `cols[i]`, e.g. a lazy gather), avoiding the 2-D slice.
    """

    expr: ast.Expr
    kind: Kind
    #: Indices of the variables the expression reads.
    reads: tuple[int, ...]
    source: str = field(repr=False)
    _fn: object = field(repr=False)

    def on_columns(self, cols, n: int) -> np.ndarray:
        with np.errstate(all="ignore"):
            return self.unchecked(cols, n)

    def unchecked(self, cols, n: int) -> np.ndarray:
        """`on_columns` without silencing numpy's floating-point warnings
        (for callers that do it once around many evaluations)."""
        out = self._fn(cols)
        if type(out) is not np.ndarray or out.ndim == 0:
            out = np.full(n, out)
        return out

    def __call__(self, states: np.ndarray) -> np.ndarray:
        states = np.asarray(states)
        return self.on_columns(_Columns(states), states.shape[0])

    @property
    def is_constant(self) -> bool:
        return not self.reads


class _Columns:
    def __init__(self, states: np.ndarray):
        self.states = states

    def __getitem__(self, i: int) -> np.ndarray:
        return self.states[:, i]


def lower(
    expr: ast.Expr,
    variables: Sequence[str] | Mapping[str, int],
    *,
    bools: frozenset[str] | set[str] = frozenset(),
    params: Mapping[str, int | float | bool] | None = None,
) -> Lowered:
    """Compile `expr` into a vectorised numpy function.

    **Arguments:**

    - `expr`: an expression over state variables (constants already folded).
    - `variables`: variable names in column order, or a name → column map.
    - `bools`: the names of boolean variables (stored as 0/1 in the columns).
    - `params`: values of constants left symbolic (parameters), if any.

    **Returns:** a `Lowered` function.
    """
    if isinstance(variables, Mapping):
        index = dict(variables)
    else:
        index = {name: i for i, name in enumerate(variables)}
    gen = _Gen(index, frozenset(bools), dict(params or {}))
    code, kind = gen.expr(expr)
    lines = ["def _f(C):"]
    for i in sorted(gen.reads):
        lines.append(f"    c{i} = C[{i}]")
        if i in gen.bool_reads:
            lines.append(f"    b{i} = c{i} != 0")
    lines.append(f"    return {code}")
    source = "\n".join(lines)
    namespace = dict(_RUNTIME)
    namespace.update(gen.consts)
    exec(compile(source, "<jaxmc-lowered>", "exec"), namespace)
    return Lowered(expr, kind, tuple(sorted(gen.reads)), source, namespace["_f"])


# ------------------------------------------------------------------ runtime helpers


def _to_int(x):
    return np.asarray(x).astype(np.int64)


def _floor(x):
    return _to_int(np.floor(x))


def _ceil(x):
    return _to_int(np.ceil(x))


def _round(x):
    return _to_int(np.floor(np.add(x, 0.5)))


def _imod(a, b):
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    bad = b <= 0
    r = np.mod(a, np.where(bad, 1, b))
    return np.where(bad, INVALID_INT, r)


def _ipow(a, b):
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    res = np.power(a.astype(np.float64), b.astype(np.float64))
    bad = (b < 0) | ~np.isfinite(res) | (np.abs(res) > 2.0**62)
    return np.where(bad, INVALID_INT, np.where(bad, 0, res).astype(np.int64))


def _fpow(a, b):
    return np.power(np.asarray(a, dtype=np.float64), b)


def _div(a, b):
    return np.true_divide(np.asarray(a, dtype=np.float64), b)


def _log(x, b):
    return np.log(np.asarray(x, dtype=np.float64)) / np.log(np.asarray(b, np.float64))


_RUNTIME = {
    "np": np,
    "_floor": _floor,
    "_ceil": _ceil,
    "_round": _round,
    "_imod": _imod,
    "_ipow": _ipow,
    "_fpow": _fpow,
    "_div": _div,
    "_log": _log,
    "_where": np.where,
    "_and": np.logical_and,
    "_or": np.logical_or,
    "_not": np.logical_not,
    "_eq": np.equal,
    "_ne": np.not_equal,
    "_lt": np.less,
    "_le": np.less_equal,
    "_gt": np.greater,
    "_ge": np.greater_equal,
    "_add": np.add,
    "_sub": np.subtract,
    "_mul": np.multiply,
    "_neg": np.negative,
    "_min": np.minimum,
    "_max": np.maximum,
}

_CMP = {
    ast.BinaryOp.EQ: "_eq",
    ast.BinaryOp.NE: "_ne",
    ast.BinaryOp.LT: "_lt",
    ast.BinaryOp.LE: "_le",
    ast.BinaryOp.GT: "_gt",
    ast.BinaryOp.GE: "_ge",
}
_ARITH = {ast.BinaryOp.ADD: "_add", ast.BinaryOp.SUB: "_sub", ast.BinaryOp.MUL: "_mul"}


class _Gen:
    def __init__(self, index, bools, params):
        self.index = index
        self.bools = bools
        self.params = params
        self.reads: set[int] = set()
        self.bool_reads: set[int] = set()
        self.consts: dict[str, object] = {}

    def const(self, value) -> str:
        name = f"k{len(self.consts)}"
        self.consts[name] = value
        return name

    def expr(self, e: ast.Expr) -> tuple[str, Kind]:
        if isinstance(e, ast.BoolLit):
            return ("True" if e.value else "False"), Kind.BOOL
        if isinstance(e, ast.IntLit):
            return self.const(np.int64(e.value)), Kind.INT
        if isinstance(e, ast.RealLit):
            return self.const(np.float64(e.value)), Kind.DOUBLE
        if isinstance(e, ast.Ident):
            return self.ident(e)
        if isinstance(e, ast.Unary):
            code, kind = self.expr(e.operand)
            if e.op == ast.UnaryOp.NOT:
                return f"_not({code})", Kind.BOOL
            return f"_neg({code})", kind
        if isinstance(e, ast.Binary):
            return self.binary(e)
        if isinstance(e, ast.Ite):
            c, _ = self.expr(e.cond)
            a, ka = self.expr(e.then)
            b, kb = self.expr(e.else_)
            kind = _join(ka, kb)
            if kind == Kind.DOUBLE:
                a, b = self.as_double(a, ka), self.as_double(b, kb)
            return f"_where({c}, {a}, {b})", kind
        if isinstance(e, ast.Call):
            return self.call(e)
        raise UnsupportedError(
            f"`{type(e).__name__}` cannot appear in a model expression", e.span
        )

    def ident(self, e: ast.Ident) -> tuple[str, Kind]:
        if e.name in self.index:
            i = self.index[e.name]
            self.reads.add(i)
            if e.name in self.bools:
                self.bool_reads.add(i)
                return f"b{i}", Kind.BOOL
            return f"c{i}", Kind.INT
        if e.name in self.params:
            v = self.params[e.name]
            if isinstance(v, bool):
                return ("True" if v else "False"), Kind.BOOL
            if isinstance(v, int):
                return self.const(np.int64(v)), Kind.INT
            return self.const(np.float64(v)), Kind.DOUBLE
        raise UnsupportedError(
            f"unknown name `{e.name}` in an expression to evaluate on states",
            e.span,
            hint="constants must be folded (or given as parameters) before exploration",
        )

    @staticmethod
    def as_double(code: str, kind: Kind) -> str:
        return code if kind == Kind.DOUBLE else f"np.asarray({code}, np.float64)"

    def binary(self, e: ast.Binary) -> tuple[str, Kind]:
        a, ka = self.expr(e.left)
        b, kb = self.expr(e.right)
        op = e.op
        if op == ast.BinaryOp.AND:
            return f"_and({a}, {b})", Kind.BOOL
        if op == ast.BinaryOp.OR:
            return f"_or({a}, {b})", Kind.BOOL
        if op == ast.BinaryOp.IMPLIES:
            return f"_or(_not({a}), {b})", Kind.BOOL
        if op == ast.BinaryOp.IFF:
            return f"_eq({a}, {b})", Kind.BOOL
        if op in _CMP:
            return f"{_CMP[op]}({a}, {b})", Kind.BOOL
        if op in _ARITH:
            return f"{_ARITH[op]}({a}, {b})", _join(ka, kb)
        if op == ast.BinaryOp.DIV:
            return f"_div({a}, {b})", Kind.DOUBLE
        if op == ast.BinaryOp.POW:
            return self.pow(a, ka, b, kb)
        raise UnsupportedError(f"operator `{op.value}`", e.span)

    def pow(self, a, ka, b, kb) -> tuple[str, Kind]:
        if ka == Kind.INT and kb == Kind.INT:
            return f"_ipow({a}, {b})", Kind.INT
        return f"_fpow({a}, {b})", Kind.DOUBLE

    def call(self, e: ast.Call) -> tuple[str, Kind]:
        args = [self.expr(x) for x in e.args]
        f = e.func
        if f in ("min", "max"):
            kind = Kind.INT
            for _, k in args:
                kind = _join(kind, k)
            codes = [self.as_double(c, k) if kind == Kind.DOUBLE else c for c, k in args]
            out = codes[0]
            for c in codes[1:]:
                out = f"_{f}({out}, {c})"
            if len(codes) == 1:
                out = f"np.asarray({out})"
            return out, kind
        if f in ("floor", "ceil", "round"):
            (c, _), = args
            return f"_{f}({c})", Kind.INT
        if f == "pow":
            (a, ka), (b, kb) = args
            return self.pow(a, ka, b, kb)
        if f == "mod":
            (a, _), (b, _) = args
            return f"_imod({a}, {b})", Kind.INT
        if f == "log":
            (a, _), (b, _) = args
            return f"_log({a}, {b})", Kind.DOUBLE
        raise UnsupportedError(f"function `{f}` is not supported", e.span)


def _join(a: Kind, b: Kind) -> Kind:
    if a == Kind.DOUBLE or b == Kind.DOUBLE:
        return Kind.DOUBLE
    if a == Kind.BOOL and b == Kind.BOOL:
        return Kind.BOOL
    return Kind.INT


class Codegen:
    """Several expressions compiled into one Python function, sharing column
    loads: `expr()` returns the code of an expression (and its kind),
    `column()` the name of a variable's column, `compile()` builds
    `f(C) -> value of the last line's `return``. Used by the builder to fuse a
    whole update (probability, assignments, range checks, key deltas) into one
    call, which matters when BFS levels are small."""

    def __init__(
        self,
        variables: Sequence[str] | Mapping[str, int],
        *,
        bools: frozenset[str] | set[str] = frozenset(),
        params: Mapping[str, int | float | bool] | None = None,
    ):
        if isinstance(variables, Mapping):
            index = dict(variables)
        else:
            index = {name: i for i, name in enumerate(variables)}
        self._gen = _Gen(index, frozenset(bools), dict(params or {}))
        self.kinds: list[Kind] = []

    def expr(self, e: ast.Expr) -> tuple[str, Kind]:
        return self._gen.expr(e)

    def column(self, i: int) -> str:
        self._gen.reads.add(i)
        return f"c{i}"

    def const(self, value) -> str:
        return self._gen.const(value)

    def compile(self, body: Sequence[str]):
        gen = self._gen
        lines = ["def _f(C):"]
        for i in sorted(gen.reads):
            lines.append(f"    c{i} = C[{i}]")
            if i in gen.bool_reads:
                lines.append(f"    b{i} = c{i} != 0")
        lines += [f"    {ln}" for ln in body]
        namespace = dict(_RUNTIME)
        namespace.update(gen.consts)
        exec(compile("\n".join(lines), "<jaxmc-lowered>", "exec"), namespace)
        return namespace["_f"]
