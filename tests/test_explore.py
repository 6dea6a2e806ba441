"""Stage 3: expression lowering and state-space construction."""

from __future__ import annotations

import numpy as np
import pytest

from jaxmc.explore.lower import INVALID_INT, Kind, lower
from jaxmc.lang import ast as A


# ------------------------------------------------------------------- lowering

X, Y, B = A.Ident("x"), A.Ident("y"), A.Ident("b")
VARS = ["x", "y", "b"]
STATES = np.array([[0, 1, 1], [3, -2, 0], [5, 0, 1], [-7, 4, 0]])


def _bin(op, a, b):
    return A.Binary(A.BinaryOp(op), a, b)


def _ev(e):
    f = lower(e, VARS, bools={"b"})
    out = f(STATES)
    assert out.shape == (len(STATES),)
    return f.kind, out.tolist()


def test_lower_arithmetic_types():
    assert _ev(_bin("+", X, A.IntLit(1))) == (Kind.INT, [1, 4, 6, -6])
    assert _ev(_bin("*", X, A.RealLit(0.5))) == (Kind.DOUBLE, [0, 1.5, 2.5, -3.5])
    # `/` is real division, even of two ints.
    assert _ev(_bin("/", X, A.IntLit(2))) == (Kind.DOUBLE, [0, 1.5, 2.5, -3.5])
    assert _ev(A.Unary(A.UnaryOp.NEG, Y)) == (Kind.INT, [-1, 2, 0, -4])


def test_lower_division_by_zero_in_untaken_branch():
    e = A.Ite(_bin(">", Y, A.IntLit(0)), _bin("/", X, Y), A.RealLit(-1.0))
    with np.errstate(all="raise"):
        assert _ev(e) == (Kind.DOUBLE, [0.0, -1.0, -1.0, -1.75])


def test_lower_functions():
    call = lambda f, *a: A.Call(f, a)  # noqa: E731
    # PRISM's mod is non-negative for a positive divisor.
    assert _ev(call("mod", X, A.IntLit(4))) == (Kind.INT, [0, 3, 1, 1])
    assert _ev(call("mod", X, Y))[1][1] == INVALID_INT  # negative divisor
    assert _ev(call("max", X, Y, A.IntLit(2))) == (Kind.INT, [2, 3, 5, 4])
    assert _ev(call("min", X, A.RealLit(0.5))) == (Kind.DOUBLE, [0, 0.5, 0.5, -7])
    assert _ev(call("min", X)) == (Kind.INT, [0, 3, 5, -7])
    # round(x) = floor(x + 0.5), so round(-3.5) = -3 and round(2.5) = 3.
    half = _bin("/", X, A.IntLit(2))
    assert _ev(call("round", half)) == (Kind.INT, [0, 2, 3, -3])
    assert _ev(call("floor", half)) == (Kind.INT, [0, 1, 2, -4])
    assert _ev(call("ceil", half)) == (Kind.INT, [0, 2, 3, -3])
    assert _ev(call("pow", X, A.IntLit(2))) == (Kind.INT, [0, 9, 25, 49])
    assert _ev(_bin("^", A.IntLit(2), Y))[1] == [2, INVALID_INT, 1, 16]
    assert _ev(_bin("^", A.RealLit(2.0), Y)) == (Kind.DOUBLE, [2, 0.25, 1, 16])
    kind, out = _ev(call("log", A.IntLit(8), A.IntLit(2)))
    assert kind == Kind.DOUBLE and np.allclose(out, 3.0)


def test_lower_booleans():
    assert _ev(B) == (Kind.BOOL, [True, False, True, False])
    assert _ev(A.Unary(A.UnaryOp.NOT, B)) == (Kind.BOOL, [False, True, False, True])
    assert _ev(_bin("=>", B, _bin(">", X, A.IntLit(1)))) == (
        Kind.BOOL,
        [False, True, True, True],
    )
    assert _ev(_bin("<=>", B, _bin("=", Y, A.IntLit(0))))[1] == [False, True, True, True]
    assert _ev(_bin("|", _bin("&", B, A.BoolLit(False)), _bin("!=", X, A.IntLit(3))))[
        1
    ] == [True, False, True, True]
    assert _ev(A.BoolLit(True)) == (Kind.BOOL, [True] * 4)
    assert _ev(A.Ite(B, X, Y)) == (Kind.INT, [0, -2, 5, 4])


def test_lower_parameters_and_columns():
    f = lower(_bin("*", A.Ident("p"), X), ["x"], params={"p": 0.5})
    assert f.kind == Kind.DOUBLE and f.reads == (0,)
    assert f.on_columns([np.array([2, 4])], 2).tolist() == [1.0, 2.0]
    g = lower(A.IntLit(3), ["x"])
    assert g.is_constant and g(np.zeros((2, 1), int)).tolist() == [3, 3]
