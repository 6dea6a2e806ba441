"""One table of expressions through every entry point of the evaluator, each
checked against PRISM's semantics (`parser.ast.ExpressionBinaryOp/
ExpressionFunc.evaluate`, floating-point mode):

- constants (the scalar evaluator, before any state exists);
- the builder: a guard, an update, a label, a state reward (numpy, per batch);
- a property's state formula (`filter(forall, ...)`, `filter(max, ...)`);
- the parametric path: a reward value as a function of a double parameter
  `x` (jax.numpy, traced), its value and `jax.grad` against a central
  difference of the constants path.

The operands are the int state variables `a`, `b` (constants of the same
names on the constants path), so nothing is folded away before the
evaluator under test sees it. `{x}` marks a double factor: `1.0` on the
plain paths, the parameter on the parametric one.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmc
from jaxmc.errors import JaxmcError
from jaxmc.explore import lower_parametric
from jaxmc.lang import parse_expression


INF, NAN = math.inf, math.nan


class Err(str):
    """An expected error: the regex of its message, and the expression's type."""

    def __new__(cls, regex: str, kind: str = "int"):
        self = super().__new__(cls, regex)
        self.kind = kind
        return self


#: (expression, a, b, expected: a value, or the regex of the error)
TABLE = [
    # int pow: an int; negative exponent and 32-bit overflow are errors
    ("pow(a, b)", 2, 10, 1024),
    ("a ^ b", -3, 3, -27),
    ("pow(a, b)", -2, 31, -(2**31)),  # exactly Integer.MIN_VALUE: no error
    ("pow(a, b)", 2, 31, Err("overflow")),
    ("pow(a, b)", -2, 33, Err("flow")),
    ("pow(a, b)", 2, -1, Err("negative exponent")),
    ("pow({x}*a, b)", 2, -1, 0.5),  # a double base: Math.pow
    ("pow(a, b/2)", 4, 1, 2.0),
    ("pow(a, b/2)", 0, -2, INF),
    ("pow(a/1, b/0)", 1, 1, NAN),  # Math.pow: (±1)^Infinity is NaN (C: 1)
    ("pow(a/1, b/0)", -1, -1, NAN),
    ("pow(a/1, (b-b)/(b-b))", 1, 0, NAN),  # a NaN exponent: NaN (C: 1)
    ("pow({x}*a, (b-b)/(b-b))", 1, 0, NAN),
    ("pow((a-a)/(a-a), b)", 1, 0, 1.0),  # NaN^0 = 1
    # mod: non-negative for a positive divisor; a divisor <= 0 is an error
    ("mod(a, b)", -7, 3, 2),
    ("mod(a, b)", 7, 3, 1),
    ("mod(a, b)", -6, 3, 0),
    ("mod(a, b)", 7, -3, Err("non-positive divisor")),
    ("mod(a, b)", 7, 0, Err("non-positive divisor")),
    # division: always double, IEEE at zero
    ("a / b", 7, 2, 3.5),
    ("{x}*a / b", -7, 2, -3.5),
    ("a / b", 1, 0, INF),
    ("a / b", -1, 0, -INF),
    ("(a - a) / (b - b)", 1, 0, NAN),
    # int arithmetic: 32-bit, overflow is an error
    ("a * b", 65536, 32767, 65536 * 32767),
    ("a * b", 65536, 32768, Err("overflow")),
    (
        "a * b * 1.0",
        65536,
        32768,
        Err("overflow", "double"),
    ),  # left to right: int * int first
    ("1.0 * a * b", 65536, 32768, 2.0**31),
    # floor / ceil / round: ints; round(x) = floor(x + 0.5)
    ("round(a / 2)", 5, 0, 3),
    ("round(a / 2)", -5, 0, -2),
    ("floor(a / 2)", -5, 0, -3),
    ("ceil(a / 2)", -5, 0, -2),
    ("ceil(a / b)", 1, 0, Err("ceil")),
    ("floor(a * 1.0 * a)", 65536, 0, Err("floor")),
    # min / max: int when all ints; doubles fold as (d < acc) ? d : acc
    ("max(a, b)", -3, 2, 2),
    ("min(a, b / 2)", 1, 1, 0.5),
    ("max(a / 2, b)", 3, 1, 1.5),
    ("min({x}*a, b)", 3, 2, 2.0),
    ("max({x}*a, b, 2.5)", 1, 2, 2.5),
    ("min(a / 1, (b - b) / (b - b))", 1, 0, 1.0),  # a NaN after the first: ignored
    ("max((b - b) / (b - b), a)", 1, 0, NAN),  # a NaN first: stays
    ("min({x}*a, (b - b) / (b - b))", 1, 0, 1.0),
    ("max((b - b) / (b - b), {x}*a)", 1, 0, NAN),
    # log(x, b) = ln(x) / ln(b)
    ("log(a, b)", 8, 2, 3.0),
    ("log({x}*a, b)", 1, 10, 0.0),
    ("log(a, b)", 0, 2, -INF),
    ("log(a, b)", -1, 2, NAN),
    # equality of doubles is Double.equals: NaN = NaN, 0.0 != -0.0
    ("(a - a) / (b - b) = (a - a) / (b - b)", 1, 0, True),
    ("-(a / b) = a / b", 0, 1, False),
    ("a / b = 0.5", 1, 2, True),
    ("a = b / 1", 2, 2, True),
    # conditionals (nested, int/double) and lazy connectives
    ("a < 0 ? (b < 0 ? 1 : 2) : (b < 0 ? 3 : 4)", -1, 5, 2),
    ("a < 0 ? (b < 0 ? 1 : 2.5) : 3", -1, 5, 2.5),
    ("a > 0 ? {x}*a : b / 2", 3, 5, 3.0),
    ("a > 0 ? {x}*a : b / 2", -3, 5, 2.5),
    ("b = 0 | mod(a, b) = 1", 5, 0, True),
    ("b != 0 & mod(a, b) = 1", 5, 0, False),
    ("b != 0 => pow(a, b - 1) > 0", 5, 0, True),
    ("b = 0 ? 1 : mod(a, b)", 5, 0, 1),
    ("b > 0 ? 1 : pow(a, b - 1)", 5, 0, Err("negative exponent")),
    ("b = 0 | mod(a, b) = 1", 5, -1, Err("non-positive divisor", "bool")),
]

IDS = [f"{e}@a={a},b={b}" for e, a, b, _ in TABLE]


def _kind(v) -> str:
    if isinstance(v, bool):
        return "bool"
    return "int" if isinstance(v, int) else "double"


def _is_error(v) -> bool:
    return isinstance(v, Err)


def _plain(expr: str) -> str:
    return expr.replace("{x}", "x")


def _cond(expr: str, v) -> str:
    """A Boolean formula that holds exactly when `expr` has the value `v`
    (never using `=` on a NaN or an infinity)."""
    e = f"({_plain(expr)})"
    if _is_error(v):
        return f"{e} = {e}"
    if isinstance(v, bool):
        return e if v else f"!{e}"
    if isinstance(v, int):  # -2147483648 is no literal: -2147483647-1
        return f"{e} = {v}" if v > -(2**31) else f"{e} = ({v + 1}-1)"
    if math.isnan(v):
        return f"!({e} < 0 | {e} >= 0)"
    if math.isinf(v):
        return f"{e} {'>' if v > 0 else '<'} 1e308"
    return f"{e} = {v!r}"


def _constants(expr: str, a: int, b: int, v, x: float = 1.0):
    """The constants path: `c` defined by the expression over constants."""
    kind = v.kind if _is_error(v) else _kind(v)
    text = (
        f"dtmc\nconst int a = {a};\nconst int b = {b};\nconst double x = {x!r};\n"
        f"const {kind} c = {_plain(expr)};\n"
        "module m\n  t : [0..1] init 0;\n  [] true -> true;\nendmodule\n"
    )
    return jaxmc.load_model_string(text, file="c.pm").constants["c"]


def _model_text(a, b, *, guard="true", update="0", label="true", reward="x"):
    return (
        "dtmc\nconst double x;\nmodule m\n"
        f"  a : [-70000..70000] init {a};\n  b : [-70000..70000] init {b};\n"
        "  t : [0..1] init 0;\n  v : [-2147483647-1..2147483647] init 0;\n"
        f"  [] t=0 & ({guard}) -> (t'=1) & (v'={update});\n"
        "  [] t=1 -> true;\nendmodule\n"
        f'label "ok" = {label};\n'
        f'rewards "r"\n  t=0 : {reward};\nendrewards\n'
    )


def _load(text):
    return jaxmc.load_model_string(text, "x=1.0", file="e.pm")


def _finite(v) -> bool:
    return not _is_error(v) and not isinstance(v, bool) and math.isfinite(v)


def _same(got, v) -> bool:
    """`got` is PRISM's value `v` (of the same type, NaN matching NaN)."""
    if isinstance(v, bool):
        return got is v
    if isinstance(v, int):
        return type(got) is int and got == v
    return math.isnan(got) if math.isnan(v) else got == v


@pytest.mark.parametrize("expr,a,b,v", TABLE, ids=IDS)
def test_constants(expr, a, b, v):
    if _is_error(v):
        with pytest.raises(JaxmcError, match=v):
            _constants(expr, a, b, v)
        return
    got = _constants(expr, a, b, v)
    assert _same(got, v), got


@pytest.mark.parametrize("expr,a,b,v", TABLE, ids=IDS)
def test_builder_guards_updates_labels_rewards(expr, a, b, v):
    e = _plain(expr)
    if _is_error(v):
        # the expression evaluated (once, in the initial state) in each place
        once = f"(({e}) = ({e}) ? 1 : 0)"
        for place in ("guard", "label", "update", "reward"):
            kw = {place: once if place in ("update", "reward") else _cond(expr, v)}
            with pytest.raises(JaxmcError, match=v):
                jaxmc.build(_load(_model_text(a, b, **kw)))
        return
    cond = _cond(expr, v)
    kw = {"guard": cond, "label": cond}
    if _kind(v) == "int":
        kw["update"] = e
    if _finite(v):
        kw["reward"] = f"x*({e})"
    m = jaxmc.build(_load(_model_text(a, b, **kw)))
    assert m.num_states == 2  # the guard held in the initial state
    assert m.labels["ok"].all()
    if _kind(v) == "int":
        t1 = [i for i, s in enumerate(m.states) if s[2] == 1][0]
        assert int(m.states[t1][3]) == v
    if _finite(v):
        init = int(m.initial_states[0])
        assert float(m.rewards[0].state[init]) == v


@pytest.mark.parametrize("expr,a,b,v", TABLE, ids=IDS)
def test_property_state_formulas(expr, a, b, v):
    model = _load(_model_text(a, b))
    if _is_error(v):
        with pytest.raises(JaxmcError, match=v):
            jaxmc.check(model, f"filter(forall, {_cond(expr, v)})")
        return
    assert bool(jaxmc.check(model, f"filter(forall, {_cond(expr, v)})").value)
    if not isinstance(v, bool):
        got = float(jaxmc.check(model, f"filter(max, {_plain(expr)})").value)
        assert _same(got, float(v)), got  # (a property's values are doubles)


PARAMETRIC = [row for row in TABLE if _finite(row[3])]


@pytest.mark.parametrize(
    "expr,a,b,v", PARAMETRIC, ids=[f"{e}@a={a},b={b}" for e, a, b, _ in PARAMETRIC]
)
def test_parametric_values_and_gradients(expr, a, b, v):
    e = _plain(expr)
    # PRISM refuses negative rewards: an offset (exact in doubles) keeps them up
    offset = 2.0**32
    reward = (f"({e})" if "{x}" in expr else f"x*({e})") + f" + {offset!r}"
    model = _load(_model_text(a, b, reward=reward))

    def f(x):
        return jaxmc.solve(model, 'R{"r"}=? [ C<=1 ]', params={"x": x})

    assert float(f(1.0)) - offset == v
    h = 1e-6
    if "{x}" in expr:
        up, down = (_constants(expr, a, b, 0.0, 1 + s * h) for s in (1, -1))
        ref = (up - down) / (2 * h)
    else:
        ref = float(v)  # d/dx x*E = E
    assert float(jax.grad(f)(1.0)) == pytest.approx(ref, rel=1e-6, abs=1e-9)


SYMBOLIC = [row for row in TABLE if "{x}" in row[0] or _is_error(row[3])]


@pytest.mark.parametrize(
    "expr,a,b,v", SYMBOLIC, ids=[f"{e}@a={a},b={b}" for e, a, b, _ in SYMBOLIC]
)
def test_parametric_backend_directly(expr, a, b, v):
    """`lower_parametric` on jax.numpy, under `jit`, beyond what a reward may
    hold (errors of the host part, any value)."""
    e = parse_expression(_plain(expr) if "{x}" in expr else f"x * ({expr})")
    cols = [np.array([a]), np.array([b])]

    def compile_():
        return lower_parametric(e, {"x"}, ["a", "b"], cols, 1, xp=jnp)

    if _is_error(v):
        with pytest.raises(JaxmcError, match=v):
            compile_()
        return
    p = compile_()
    got = float(jnp.asarray(jax.jit(p.fn)(p.leaves, {"x": 1.0})).reshape(-1)[0])
    assert _same(got, float(v)), got
