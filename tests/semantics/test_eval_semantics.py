"""The expression evaluators agree with PRISM: lazy `| & => ? :` (errors in an
operand PRISM does not evaluate are no errors), located errors naming the
state, 32-bit ints, one integer `pow`, and no recursion limit on the size or
depth of an expression.

The entry points of the one evaluator: `semantics.evaluate`/`fold`
(constants, scalar), `explore.lower` (guards, updates, labels, rewards),
`props.evaluate` (properties) and `explore.lower_parametric` (parametric
values, jax.numpy); `test_one_evaluator.py` checks a table of expressions
through all of them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmc
from jaxmc.errors import ExplorationError, JaxmcError, SemanticError
from jaxmc.explore.lower import Kind, lower, lower_parametric
from jaxmc.lang import ast as A
from jaxmc.semantics import evaluate, fold


B = A.BinaryOp
S = A.Ident("s")


def _bin(op, a, b):
    return A.Binary(B(op), a, b)


def _int(v):
    return A.IntLit(v)


def _pow(a, b):
    return A.Call("pow", (a, b))


def compile_expr(e, params, variables, bools, cols, n):
    """The parametric path's evaluator (jax.numpy backend)."""
    return lower_parametric(e, params, variables, cols, n, xp=jnp, bools=bools)


# A chain of s in [0..4]: `y` holds 2^s, written by the update.
MODEL = """dtmc
const double p;
module m
  s : [0..4] init 0;
  y : [0..16] init 1;
  [] s<4 & (s=0 | pow(2, s-1) > 0) -> (s'=s+1) & (y'=pow(2, s+1));
  [] s=4 -> true;
endmodule
label "eight" = pow(2, s) = 8;
label "lazy" = s>0 => pow(2, s-1) >= 1;
formula half = s=0 ? 0 : pow(2, s-1);
rewards "r"
  true : pow(2, s) * p;
  s>0 : half;
endrewards
"""


def _model(text=MODEL, **kw):
    return jaxmc.load_model_string(text, "p=1.0", file="m.pm", **kw)


# ----------------------------------------------------------- short circuits


def test_lazy_operators_in_guards_labels_rewards_and_properties():
    model = _model()
    m = jaxmc.build(model)
    s = m.states[:, 0]
    assert m.num_states == 5
    assert (m.states[:, 1] == 2**s).all()  # update: one int pow semantics
    assert (m.labels["eight"] == (s == 3)).all()
    assert m.labels["lazy"].all()
    # `s>0 : half` is evaluated only where s>0; half's else branch likewise
    r = m.rewards[0].state
    np.testing.assert_allclose(r, 2.0**s + np.where(s > 0, 2.0 ** (s - 1), 0))
    assert bool(jaxmc.check(model, "filter(forall, s=0 | pow(2, s-1) > 0)").value)
    assert bool(jaxmc.check(model, "filter(forall, s>0 => mod(4, s) >= 0)").value)
    v = jaxmc.check(model, "filter(max, s=0 ? -1 : pow(2, s-1))").value
    assert float(v) == 8


@pytest.mark.parametrize(
    "where,text",
    [
        ("guard", MODEL.replace("(s=0 | pow(2, s-1) > 0)", "pow(2, s-1) > 0")),
        ("label", MODEL.replace("s>0 => pow(2, s-1) >= 1", "pow(2, s-1) >= 1")),
        ("reward", MODEL.replace("s>0 : half", "true : pow(2, s-1)")),
        ("update", MODEL.replace("(y'=pow(2, s+1))", "(y'=pow(2, s-1))")),
    ],
)
def test_active_error_is_located_with_its_state(where, text):
    with pytest.raises(ExplorationError) as info:
        jaxmc.build(_model(text))
    msg = str(info.value)
    assert "negative exponent" in msg and "s=0" in msg, msg
    assert info.value.span is not None and info.value.span.file == "m.pm"
    line = text.splitlines()[info.value.span.line - 1]
    assert "pow(2, s-1)" in line and "|" in msg  # the source line is quoted


def test_active_error_in_a_property():
    model = _model()
    with pytest.raises(JaxmcError, match=r"negative exponent.*s=0"):
        jaxmc.check(model, "filter(forall, pow(2, s-1) > 0)")
    with pytest.raises(JaxmcError, match=r"non-positive divisor.*s=0"):
        jaxmc.check(model, "filter(forall, s>3 | mod(4, s) = 0)")


def test_unfiltered_property_is_evaluated_in_the_initial_states():
    # PRISM's states of interest: `pow(2, 2-s)` fails only where s>2, not at init
    model = _model()
    assert int(jaxmc.check(model, "pow(2, 2-s)").value) == 4
    with pytest.raises(JaxmcError, match=r"negative exponent.*s=3"):
        jaxmc.check(model, "filter(forall, pow(2, 2-s) > 0)")
    with pytest.raises(JaxmcError, match=r"negative exponent.*s=3"):
        jaxmc.check(model, "P=? [ F pow(2, 2-s) > 3 ]")  # the operand: every state


def test_lowered_masks_and_operand_order():
    states = np.array([[0], [1], [3]])
    bad = _bin(">", _pow(_int(2), _bin("-", S, _int(1))), _int(0))
    lazy = {
        "|": _bin("|", _bin("=", S, _int(0)), bad),
        "&": _bin("&", _bin(">", S, _int(0)), bad),
        "=>": _bin("=>", _bin(">", S, _int(0)), bad),
        "?:": A.Ite(_bin("=", S, _int(0)), A.BoolLit(True), bad),
    }
    for name, e in lazy.items():
        at0 = name != "&"
        assert lower(e, ["s"])(states).tolist() == [at0, True, True], name
        assert evaluate(e, {"s": 0}) is at0
    # strict operators evaluate both sides, as PRISM does
    for op in ("<=>", "="):
        with pytest.raises(ExplorationError, match="negative exponent"):
            lower(_bin(op, _bin("=", S, _int(0)), bad), ["s"])(states)
        with pytest.raises(SemanticError, match="negative exponent"):
            evaluate(_bin(op, _bin("=", S, _int(0)), bad), {"s": 0})
    # a caller's active mask: errors outside it are ignored
    assert lower(bad, ["s"])(states, active=np.array([False, True, True])).tolist()[
        1:
    ] == [
        True,
        True,
    ]


def test_fold_keeps_untaken_errors_out():
    e = A.Ite(_bin("=", A.Ident("N"), _int(0)), _int(1), _pow(_int(2), _int(-1)))
    assert fold(e, {"N": 0}) == _int(1)
    with pytest.raises(SemanticError, match="negative exponent"):
        fold(e, {"N": 1})
    assert fold(
        _bin("|", A.Ident("t"), _pow(_int(2), _int(-1))), {"t": True}
    ) == A.BoolLit(True)


# ---------------------------------------------------------------- integers


def test_int_overflow_is_a_located_error():
    e = _bin("*", A.Ident("x"), A.Ident("x"))
    f = lower(e, ["x"])  # no ranges: full 32-bit
    assert f(np.array([[46340]])).tolist() == [46340**2]
    with pytest.raises(ExplorationError, match=r"integer overflow.*x=46341"):
        f(np.array([[3], [46341]]))
    # with the declared range, no check is emitted and none is needed
    assert "_ck" not in lower(e, ["x"], ranges={"x": (0, 100)}).source
    with pytest.raises(ExplorationError, match="outside the 32-bit range"):
        lower(_bin("+", A.Ident("x"), _int(99999999999999999999)), ["x"])
    with pytest.raises(SemanticError, match="integer overflow"):
        evaluate(_bin("+", _int(2**31 - 1), _int(1)), {})
    neg = A.Unary(A.UnaryOp.NEG, A.Ident("x"))
    with pytest.raises(ExplorationError, match="integer overflow"):
        lower(neg, ["x"])(np.array([[-(2**31)]]))


def test_huge_constant_in_a_guard_is_no_overflow_error():
    text = (
        "dtmc\nconst int N = 99999999999999999999;\n"
        "module m\n  x : [0..1] init 0;\n  [] x<N -> (x'=1);\nendmodule\n"
    )
    with pytest.raises(JaxmcError) as info:
        jaxmc.build(jaxmc.load_model_string(text, file="big.pm"))
    assert not isinstance(info.value, OverflowError)
    assert info.value.span is not None


def test_floor_ceil_round_convert_exactly():
    x = A.Ident("x")
    half = _bin("/", x, _int(2))
    f = lower(A.Call("round", (half,)), ["x"])
    assert f(np.array([[-7], [5]])).tolist() == [-3, 3]
    big = lower(A.Call("floor", (_bin("*", x, A.RealLit(1e10)),)), ["x"])
    assert big(np.array([[0]])).tolist() == [0]
    with pytest.raises(ExplorationError, match=r"floor\(10000000000\.0\).*x=1"):
        big(np.array([[0], [1]]))
    nan = lower(A.Call("ceil", (_bin("/", x, x),)), ["x"])
    with pytest.raises(ExplorationError, match=r"ceil\(NaN\).*x=0"):
        nan(np.array([[1], [0]]))


# ---------------------------------------------------------- one int `pow`

POW_CASES = [(2, 0), (2, 10), (-3, 3), (0, 0), (-1, 31), (46340, 2), (2, 30), (1, 100)]
POW_FAILS = [(2, -1), (2, 31), (-2, 32), (10, 10), (46341, 2)]


def test_int_pow_agrees_in_every_evaluator():
    a, b = A.Ident("a"), A.Ident("b")
    e = _pow(a, b)
    states = np.array(POW_CASES)
    expect = [x**y for x, y in POW_CASES]
    assert [evaluate(e, {"a": x, "b": y}) for x, y in POW_CASES] == expect
    lo = lower(e, ["a", "b"])
    assert lo.kind == Kind.INT and lo(states).tolist() == expect
    caret = lower(_bin("^", a, b), ["a", "b"])
    assert caret(states).tolist() == expect
    cols = [states[:, 0], states[:, 1]]
    scaled = _bin("*", e, A.Ident("p"))  # host int pow under a parameter
    c = compile_expr(
        scaled, frozenset({"p"}), ("a", "b"), frozenset(), cols, len(states)
    )
    got = np.asarray(c(c.leaves, {"p": 1.0}))
    np.testing.assert_array_equal(got, np.asarray(expect, float))
    for x, y in POW_FAILS:
        with pytest.raises(SemanticError):
            evaluate(e, {"a": x, "b": y})
        with pytest.raises(ExplorationError, match=f"a={x}, b={y}"):
            lo(np.array([[2, 1], [x, y]]))
        with pytest.raises(ExplorationError):
            compile_expr(scaled, frozenset({"p"}), ("a", "b"), frozenset(),
                         [np.array([x]), np.array([y])], 1)  # fmt: skip


def test_int_pow_agrees_through_the_public_paths():
    model = _model()
    total = float(jaxmc.solve(model, 'R{"r"}=? [ C<=5 ]', params={"p": 1.0}))
    assert total == pytest.approx(
        sum(2.0**s for s in range(5)) + sum(2.0 ** (s - 1) for s in range(1, 5))
    )
    grad = jax.grad(lambda p: jaxmc.solve(model, 'R{"r"}=? [ C<=5 ]', params={"p": p}))(
        2.0
    )
    assert float(grad) == pytest.approx(31.0)
    assert bool(jaxmc.check(model, "filter(forall, y = pow(2, s))").value)
    assert bool(jaxmc.check(model, "filter(forall, y = 2^s)").value)


# ------------------------------------------------------- no recursion limit


def _chain(op, terms):
    e = terms[0]
    for t in terms[1:]:
        e = A.Binary(op, e, t)
    return e


def test_large_and_deep_expressions():
    n = 50_000  # 10^5 nodes and more
    big_or = _chain(B.OR, [_bin("=", S, _int(k)) for k in range(n)])
    assert evaluate(big_or, {"s": n - 1}) is True
    assert evaluate(big_or, {"s": n}) is False
    assert fold(big_or, {"s": 7}) == A.BoolLit(True)
    folded = fold(big_or, {})
    assert isinstance(folded, A.Binary)
    xs = [A.Ident(f"x{i}") for i in range(n)]
    big_sum = _chain(B.ADD, xs)
    assert evaluate(big_sum, {f"x{i}": 1 for i in range(n)}) == n
    # deep right-nested conditionals, the worst case for a recursive walk
    depth = 3000
    ite = _int(-1)
    for k in range(depth):
        ite = A.Ite(_bin("=", S, _int(k)), _pow(_int(2), _bin("-", S, _int(1))), ite)
    assert evaluate(ite, {"s": 5}) == 16
    assert evaluate(ite, {"s": depth + 1}) == -1
    assert fold(ite, {"s": 11}) == _int(1024)
    lo = lower(ite, ["s"])
    assert lo(np.array([[5], [depth + 1]])).tolist() == [16, -1]
    with pytest.raises(ExplorationError, match="s=0"):
        lo(np.array([[0]]))
    p = A.Ident("p")
    deep_param = _chain(B.ADD, [_bin("*", p, _int(k)) for k in range(depth)])
    c = compile_expr(
        deep_param, frozenset({"p"}), ("s",), frozenset(), [np.zeros(1)], 1
    )
    assert float(c(c.leaves, {"p": 1.0})) == sum(range(depth))
    small = _chain(B.OR, [_bin("=", S, _int(k)) for k in range(20_000)])
    assert lower(small, ["s"], ranges={"s": (0, 10**6)})(
        np.array([[19_999], [20_000]])
    ).tolist() == [True, False]
