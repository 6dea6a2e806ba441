"""Tests of `jaxmc.lang.printer`: printing is minimal in parentheses and
`parse(format(parse(text))) == parse(text)` on the whole corpus."""

from __future__ import annotations

import corpus
import pytest

from jaxmc.errors import JaxmcError
from jaxmc.lang import (
    ast,
    format_expr,
    format_program,
    format_properties,
    parse_expression,
    parse_model,
    parse_model_file,
    parse_properties,
    parse_properties_file,
)


MODELS = corpus.SHARED_MODELS
ROOTS = [corpus.EXAMPLES / d for d in corpus.EXAMPLE_DIRS] + [
    corpus.TESTS / d for d in corpus.TEST_DIRS
]


def _files(suffixes):
    return [
        p
        for root in ROOTS
        if root.is_dir()
        for p in sorted(root.rglob("*"))
        if p.suffix in suffixes
    ]


@pytest.mark.skipif(not MODELS.is_dir(), reason="../shared/models is absent")
def test_round_trip_corpus_models():
    checked = 0
    for path in _files((".pm", ".sm", ".nm", ".prism")):
        try:
            program = parse_model_file(path)
        except JaxmcError:
            continue  # out of scope (PTA, IMDP, ...): see test_parser.py
        text = format_program(program)
        again = parse_model(text, "printed")
        assert again == program, path
        assert format_program(again) == text, path  # printing is a fixed point
        checked += 1
    print(f"\nround-tripped {checked} model files")
    assert checked > 300


@pytest.mark.skipif(not MODELS.is_dir(), reason="../shared/models is absent")
def test_round_trip_corpus_properties():
    checked = 0
    for path in _files((".props", ".pctl", ".csl")):
        try:
            pf = parse_properties_file(path)
        except JaxmcError:
            continue
        text = format_properties(pf)
        again = parse_properties(text, "printed")
        assert again == pf, path
        assert format_properties(again) == text, path
        checked += 1
    print(f"\nround-tripped {checked} property files")
    assert checked > 180


@pytest.mark.parametrize(
    "text, printed",
    [
        ("(1 + 2) * 3", "(1 + 2) * 3"),
        ("1 + (2 * 3)", "1 + 2 * 3"),
        ("(1 - 2) - 3", "1 - 2 - 3"),
        ("1 - (2 - 3)", "1 - (2 - 3)"),
        ("1 - (-2)", "1 - -2"),
        ("(2 ^ 3) ^ 2", "(2^3)^2"),
        ("2 ^ (3 ^ 2)", "2^3^2"),
        ("(-2) ^ 2", "(-2)^2"),
        ("-(2 ^ 2)", "-2^2"),
        ("!(a & b)", "!(a & b)"),
        ("(!a) & b", "!a & b"),
        ("!(a = b)", "!(a = b)"),  # bracketed for readers and Storm
        ("(a => b) => c", "a => b => c"),
        ("a => (b => c)", "a => (b => c)"),
        ("a => (b <=> c)", "a => b <=> c"),
        ("(a => b) <=> c", "(a => b) <=> c"),
        ("(a ? b : c) ? d : e", "(a ? b : c) ? d : e"),
        ("a ? (b ? c : d) : e", "a ? (b ? c : d) : e"),
        ("a ? b : (c ? d : e)", "a ? b : c ? d : e"),
        ("(a | b) & c", "(a | b) & c"),
        ("(a < b) = c", "a < b = c"),
        ("a < (b = c)", "a < (b = c)"),
        ("floor((x))", "floor(x)"),
        ("func(foo, 1)", "func(foo, 1)"),
        ("P=? [ (F a) U b ]", "P=? [ F a U b ]"),  # as in PRISM: (F a) U b
        ("P=? [ F (a U b) ]", "P=? [ F (a U b) ]"),
        ("P=? [ G (F a) ]", "P=? [ G F a ]"),
        ("P=? [ F<=(k) b ]", "P=? [ F<=k b ]"),
        ("P=? [ F<=k (-x > 0) ]", "P=? [ F<=k (-x > 0) ]"),
        ('R{"r"}min=?[C<=T]', 'R{"r"}min=? [ C<=T ]'),
        ("R{1+1}=?[S]", "R{1 + 1}=? [ S ]"),
        (
            'filter(forall, P>=0.5 [ X a ], "init")',
            'filter(forall, P>=0.5 [ X a ], "init")',
        ),
        ("1.50e3 + .5", "1.50e3 + .5"),
    ],
)
def test_minimal_parentheses(text, printed):
    e = parse_expression(text)
    assert format_expr(e) == printed
    assert parse_expression(printed) == e


def test_constructed_asts_print_without_order():
    """ASTs built by code (no spans, empty `order`) print too."""
    Int, N = ast.IntLit, ast.Ident
    program = ast.Program(
        ast.ModelType.DTMC,
        constants=(ast.ConstDecl("p", ast.ValueType.DOUBLE, ast.RealLit(0.25)),),
        modules=(
            ast.Module(
                "m",
                (ast.VarDecl("x", ast.ValueType.INT, Int(0), Int(2), Int(0)),),
                (
                    ast.Command(
                        "a",
                        ast.Binary(ast.BinaryOp.LT, N("x"), Int(2)),
                        (
                            ast.Update(
                                N("p"),
                                (
                                    ast.Assign(
                                        "x",
                                        ast.Binary(ast.BinaryOp.ADD, N("x"), Int(1)),
                                    ),
                                ),
                            ),
                            ast.Update(
                                ast.Binary(ast.BinaryOp.SUB, Int(1), N("p")), ()
                            ),
                        ),
                    ),
                ),
            ),
        ),
        system=ast.SysInterleave(ast.SysModule("m"), ast.SysModule("m")),
    )
    text = format_program(program)
    assert "const double p = 0.25;" in text
    assert "[a] x < 2 -> p : (x'=x + 1) + 1 - p : true;" in text
    assert parse_model(text) == program
    pf = ast.PropertiesFile(
        properties=(
            ast.Property(
                ast.ProbOp(ast.Temporal(ast.TemporalOp.EVENTUALLY, None, N("x"))),
                "reach",
            ),
        )
    )
    assert format_properties(pf) == '"reach": P=? [ F x ];\n'
    # negative literals made by code keep their sign
    assert parse_expression(
        format_expr(ast.Binary(ast.BinaryOp.SUB, Int(1), Int(-2)))
    ) == ast.Binary(ast.BinaryOp.SUB, Int(1), ast.Unary(ast.UnaryOp.NEG, Int(2)))


def test_system_round_trip():
    for system in [
        "a ||| b || c",
        "(a ||| b) || c",
        "a || (b || c)",
        "(a || b) |[x]| c",
        "a |[x,y]| (b / {x})",
        "(a {x <- y}) / {y}",
        "a ||| (b ||| c)",
    ]:
        p = parse_model(f"module a endmodule\nsystem {system} endsystem")
        assert parse_model(format_program(p)) == p, system
