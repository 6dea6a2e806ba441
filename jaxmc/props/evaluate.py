"""Evaluate the non-probabilistic parts of a property over all states at once.

Sub-formulas that need model checking (`P`, `R`, `S`, filters, labels) are
handed back to the caller through `operator`, so arithmetic on their results
works too: `ceil(Pmax=? [ F s=2 ]) + 1`, `P>0.5 [F a] & !"deadlock"`.

The arithmetic is PRISM's (`/` is real division, `floor`/`ceil`/`round`
return ints, `round` rounds half up, `mod` is non-negative for a positive
divisor, integer `pow`). It is done on the host with numpy; the state
matrix of a built model is small next to its transition matrix.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import ModelCheckingError
from ..explore.model import ExplicitModel
from ..lang import ast
from ..lang.ast import BinaryOp


def evaluate_plain(
    e: ast.Expr,
    model: ExplicitModel,
    operator: Callable[[ast.Expr], np.ndarray],
) -> np.ndarray:
    """The value of `e` in each of the model's states (a vector of length n)."""
    n = model.num_states
    columns = {v.name: i for i, v in enumerate(model.variables)}
    is_bool = {v.name: v.is_bool for v in model.variables}

    def ev(x: ast.Expr) -> np.ndarray:
        if isinstance(x, ast.BoolLit):
            return np.full(n, x.value, dtype=bool)
        if isinstance(x, ast.IntLit):
            return np.full(n, x.value, dtype=np.int64)
        if isinstance(x, ast.RealLit):
            return np.full(n, x.value, dtype=np.float64)
        if isinstance(x, ast.Ident):
            if x.name not in columns:
                raise ModelCheckingError(f"unknown identifier `{x.name}`", x.span)
            col = model.states[:, columns[x.name]]
            return col.astype(bool) if is_bool[x.name] else col.astype(np.int64)
        if isinstance(x, ast.Unary):
            v = ev(x.operand)
            return ~v if x.op == ast.UnaryOp.NOT else -v
        if isinstance(x, ast.Binary):
            return _binary(x, ev(x.left), ev(x.right))
        if isinstance(x, ast.Ite):
            c, a, b = ev(x.cond), ev(x.then), ev(x.else_)
            if a.dtype != b.dtype and np.bool_ not in (a.dtype, b.dtype):
                a, b = a.astype(np.float64), b.astype(np.float64)
            return np.where(c, a, b)
        if isinstance(x, ast.Call):
            return _call(x, [ev(a) for a in x.args])
        return np.asarray(operator(x))

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return ev(e)


def _binary(x: ast.Binary, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    op = x.op
    if op == BinaryOp.AND:
        return a & b
    if op == BinaryOp.OR:
        return a | b
    if op == BinaryOp.IMPLIES:
        return ~a | b
    if op == BinaryOp.IFF:
        return a == b
    if op == BinaryOp.EQ:
        return a == b
    if op == BinaryOp.NE:
        return a != b
    if op == BinaryOp.LT:
        return a < b
    if op == BinaryOp.LE:
        return a <= b
    if op == BinaryOp.GT:
        return a > b
    if op == BinaryOp.GE:
        return a >= b
    if op == BinaryOp.ADD:
        return a + b
    if op == BinaryOp.SUB:
        return a - b
    if op == BinaryOp.MUL:
        return a * b
    if op == BinaryOp.DIV:
        return a.astype(np.float64) / b
    if op == BinaryOp.POW:
        return _pow(x, a, b)
    raise ModelCheckingError(f"operator {op.value}", x.span)


def _pow(x: ast.Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "i" and b.dtype.kind == "i":
        if (b < 0).any():
            raise ModelCheckingError(
                "negative exponent in integer pow", x.span,
                hint="write a double base, e.g. pow(2.0, -1)",
            )  # fmt: skip
        return np.power(a, b)
    return np.power(a.astype(np.float64), b)


def _call(x: ast.Call, args: list[np.ndarray]) -> np.ndarray:
    f = x.func
    if f in ("min", "max"):
        out = args[0]
        for a in args[1:]:
            out = np.minimum(out, a) if f == "min" else np.maximum(out, a)
        return out
    if f == "floor":
        return np.floor(args[0]).astype(np.int64)
    if f == "ceil":
        return np.ceil(args[0]).astype(np.int64)
    if f == "round":
        return np.floor(args[0] + 0.5).astype(np.int64)
    if f == "pow":
        return _pow(x, args[0], args[1])
    if f == "mod":
        a, b = args
        if (b <= 0).any():
            raise ModelCheckingError("mod by a non-positive number", x.span)
        return np.mod(a, b)
    if f == "log":
        return np.log(args[0].astype(np.float64)) / np.log(args[1])
    raise ModelCheckingError(f"unknown function `{f}`", x.span)
