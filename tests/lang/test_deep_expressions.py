"""Very long and very deep expressions: no `RecursionError` anywhere in the
front end (parse, type-check, rewrite, print), long chains of `+ * & |`
balanced, and the whole model checked and built."""

from __future__ import annotations

import pytest

import jaxmc
from jaxmc.errors import JaxmcError, PrismSyntaxError
from jaxmc.lang import ast, format_expr, format_program, parse_expression, parse_model
from jaxmc.lang.tree import CHAIN_LIMIT, chain_operands
from jaxmc.semantics import type_of
from jaxmc.semantics.rewrite import substitute
from jaxmc.semantics.types import Type


def depth(e: ast.Node) -> int:
    """The height of `e` (computed without recursion)."""
    best, stack = 0, [(e, 1)]
    while stack:
        n, d = stack.pop()
        best = max(best, d)
        stack.extend((c, d + 1) for c in ast.children(n))
    return best


def chains(n: int) -> dict[str, str]:
    """Chains of `n` operands whose values are known for s in 0..3."""
    return {
        "or": "|".join(f"s={i % 4}" for i in range(n)),  # true
        "and": "&".join(f"s<={4 + i % 7}" for i in range(n)),  # true
        "plus": "+".join("s" if i == 0 else "0" for i in range(n)),  # s
        "times": "*".join("2" if i == 0 else "1" for i in range(n)),  # 2
    }


def long_model(n: int) -> str:
    c = chains(n)
    return f"""dtmc
formula f = {c["plus"]};
module m
  s : [0..3] init 0;
  [] ({c["or"]}) & s<3 -> 0.5 : (s'=min(3, f+1)) + 0.5 : (s'=s);
  [] ({c["and"]}) & s=3 -> (s'=f);
endmodule
label "done" = ({c["or"]}) & s=3;
rewards "r" true : {c["times"]}; endrewards
"""


def check_long_model(n: int) -> None:
    text = long_model(n)
    program = parse_model(text)
    # every long chain is a balanced tree
    assert depth(program) < 40
    module = program.modules[0]
    guard = module.commands[0].guard.left
    assert len(chain_operands(guard)) == n
    # printing and parsing again gives the same model
    assert parse_model(format_program(program)) == program
    model = jaxmc.load_model_string(text)
    explicit = jaxmc.build(model)
    assert explicit.num_states == 4
    assert jaxmc.solve(model, 'P=? [ F "done" ]') == pytest.approx(1.0)
    # reward 2 per step until s=3: 2 * (expected steps = 3 * 2)
    assert jaxmc.solve(model, 'R{"r"}=? [ F s=3 ]') == pytest.approx(12.0)
    c = chains(n)
    assert jaxmc.solve(model, f"P=? [ F ({c['or']}) & ({c['and']}) & s=3 ]") == 1.0
    plus = c["plus"].replace("s", "1", 1)
    assert jaxmc.solve(model, f'R{{"r"}}=? [ C<={plus}+1 ]') == pytest.approx(4.0)


def test_long_chains_parse_check_and_build():
    # (far past CHAIN_LIMIT; the `slow` test below takes 100,000 terms)
    check_long_model(3_000)


@pytest.mark.slow
def test_chains_of_a_hundred_thousand_terms():
    check_long_model(100_000)


def test_short_chains_keep_their_shape_long_ones_are_balanced():
    short = parse_expression("+".join(["x"] * CHAIN_LIMIT))
    assert depth(short) == CHAIN_LIMIT  # left-deep, as written
    assert format_expr(short) == " + ".join(["x"] * CHAIN_LIMIT)
    n = 5000
    text = "(" + " | ".join(f"(a{i} & b{i})" for i in range(n)) + ")"
    e = parse_expression(text)
    assert depth(e) <= (n - 1).bit_length() + 3
    ops = chain_operands(e)
    assert [o.left.name for o in ops] == [f"a{i}" for i in range(n)]
    span = e.span
    # from the first operand's start to the last one's end (inside the parentheses)
    assert (span.line, span.column, span.end_column) == (1, 3, len(text) - 1)
    # parentheses do not change a long chain's balanced shape
    regrouped = "(" + " | ".join(f"(a{i} & b{i})" for i in range(n // 2)) + ") | ("
    regrouped += " | ".join(f"(a{i} & b{i})" for i in range(n // 2, n)) + ")"
    assert parse_expression(regrouped) == e
    assert parse_expression(format_expr(e)) == e


# ------------------------------------------------------------ deep nesting

D = 2000


def nested() -> dict[str, str]:
    """Expressions nested D levels deep (int-valued, bool-valued)."""
    return {
        "parens": "(" * D + "s" + ")" * D,
        "plus": "(" * D + "s" + "+0)" * D,
        "minus": "(" * D + "s" + "-0)" * D,
        "ite": "".join(f"s={i % 5} ? {i % 3} : " for i in range(D)) + "s",
        "neg": "-(" * (D // 2) * 2 + "s" + ")" * D,
    }


@pytest.mark.parametrize("kind", list(nested()))
def test_deep_expressions_parse_type_rewrite_and_print(kind):
    text = nested()[kind]
    e = parse_expression(text)
    assert type_of(e, {"s": Type.INT}) == Type.INT
    printed = format_expr(e)
    assert format_expr(parse_expression(printed)) == printed
    replaced = substitute(e, {"s": ast.IntLit(1)})
    assert "s" not in format_expr(replaced)
    boolean = parse_expression(f"!(({text}) = 1) & true")
    assert type_of(boolean, {"s": Type.INT}) == Type.BOOL


def deep_model(e: str) -> str:
    return f"""dtmc
formula f = {e};
module m
  s : [0..3] init 0;
  [] s<3 & ({e})>=0 -> (s'=min(3, max(0, {e}))+1>3 ? 3 : min(3, s+1));
  [] s=3 -> true;
endmodule
label "a" = ({e})=3;
rewards true : ({e})*0+1; endrewards
"""


@pytest.mark.parametrize("kind", list(nested()))
def test_deep_models_give_a_result_or_a_located_error(kind):
    text = deep_model(nested()[kind])
    program = parse_model(text, "deep.pm")
    again = parse_model(format_program(program))
    assert format_expr(again.labels[0].expr) == format_expr(program.labels[0].expr)
    try:
        model = jaxmc.load_model_string(text, file="deep.pm")
        jaxmc.build(model)
    except JaxmcError as err:  # never a RecursionError
        assert err.span is not None and err.span.file == "deep.pm"


@pytest.mark.parametrize("kind", list(nested()))
def test_deep_models_check_and_build(kind):
    model = jaxmc.load_model_string(deep_model(nested()[kind]))
    assert jaxmc.build(model).num_states == 4
    assert jaxmc.solve(model, "P=? [ F s=3 ]") == pytest.approx(1.0)
    # "a" is e=3: every e is s at s=3, but the ?: chain, which is 3 % 3 there
    expected = 0.0 if kind == "ite" else 1.0
    assert jaxmc.solve(model, 'P=? [ F "a" ]') == pytest.approx(expected)


def test_properties_with_many_disjuncts_and_deep_nesting():
    model = jaxmc.load_model_string(deep_model("s"))
    many = " | ".join(f"s={i % 4}" for i in range(3000))
    assert jaxmc.solve(model, f"P=? [ F ({many}) & s=3 ]") == 1.0
    deep = "(" * D + "s=3" + ")" * D
    assert jaxmc.solve(model, f"P=? [ F {deep} ]") == 1.0
    text = f'"p": P>=1 [ F ({many}) ];\nP=? [ G !{deep} ];'
    props = jaxmc.parse_properties(text, model)
    assert jaxmc.check(model, "p", properties=props).value is not None


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("(" * 100_000 + "s" + ")" * 100_000, True),
        ("(" * 100_000 + "s" + "+1)" * 100_000, True),
        ("(" * 100_000 + "s" + "-1)" * 100_000, False),
        ("!" * 100_000 + "true", False),
    ],
)
def test_pathological_nesting_gives_a_result_or_a_located_error(text, ok):
    if ok:
        assert isinstance(parse_expression(text, "x.props"), ast.Node)
        return
    with pytest.raises(PrismSyntaxError, match="nested more than 10000 levels") as e:
        parse_expression(text, "x.props")
    assert e.value.span.file == "x.props" and e.value.span.line == 1
