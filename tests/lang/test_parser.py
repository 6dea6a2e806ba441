"""Tests of stage 1 (text → AST): the PRISM corpus, precedence, spans,
malformed input, fuzzing, speed, and the grammars shipped in the wheel."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import corpus
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from jaxmc.errors import JaxmcError, PrismSyntaxError, SemanticError, UnsupportedError
from jaxmc.lang import (
    ast,
    format_program,
    parse_expression,
    parse_model,
    parse_model_file,
    parse_properties,
    parse_properties_file,
)
from jaxmc.lang.grammar import get_parser


REPO = Path(__file__).resolve().parents[2]
MODELS = corpus.SHARED_MODELS
EXAMPLE_DIRS = [corpus.EXAMPLES / d for d in corpus.EXAMPLE_DIRS]
TEST_DIRS = [corpus.TESTS / d for d in corpus.TEST_DIRS]
_TYPE = re.compile(
    r"^\s*(dtmc|ctmc|mdp|probabilistic|stochastic|nondeterministic|pta|pomdp|popta"
    r"|smg|csg|tsg|idtmc|imdp|lts)\b",
    re.M,
)
_IN_SCOPE = {
    "dtmc",
    "ctmc",
    "mdp",
    "probabilistic",
    "stochastic",
    "nondeterministic",
    None,
}

needs_corpus = pytest.mark.skipif(
    not MODELS.is_dir(), reason="../shared/models is absent"
)


def _model_type(path: Path) -> str | None:
    text = re.sub(r"//[^\n]*", "", path.read_text(errors="replace"))
    m = _TYPE.search(text)
    return m.group(1) if m else None


def in_scope_models() -> list[Path]:
    """DTMC/CTMC/MDP model files (no keyword: PRISM reads an MDP)."""
    out = []
    for root in EXAMPLE_DIRS + TEST_DIRS:
        for p in sorted(root.rglob("*")) if root.is_dir() else ():
            if (
                p.suffix in (".pm", ".sm", ".nm", ".prism")
                and _model_type(p) in _IN_SCOPE
            ):
                out.append(p)
    return out


def in_scope_properties() -> list[Path]:
    """Property files of in-scope models: for the regression suite the model
    is the longest prefix of the file name (`m.nm.slow.props` → `m.nm`); the
    examples folders hold only in-scope models."""
    models = set(in_scope_models())
    out = []
    for root in EXAMPLE_DIRS + TEST_DIRS:
        for p in sorted(root.rglob("*")) if root.is_dir() else ():
            if p.suffix not in (".props", ".pctl", ".csl"):
                continue
            if root in EXAMPLE_DIRS:
                out.append(p)
                continue
            parts = p.name.split(".")
            owners = [
                p.with_name(".".join(parts[:i])) for i in range(len(parts) - 1, 0, -1)
            ]
            owner = next((m for m in owners if m.is_file()), None)
            if owner is None or owner in models:
                out.append(p)
    return out


def _rel(p: Path) -> str:
    return p.relative_to(MODELS).as_posix()


#: In-scope files that do not parse, with the error we expect and why.
KNOWN_MODEL_FAILURES = {
    "prism-tests/bugfixes/imdp-reach-with-infty.prism": (
        UnsupportedError,
        "an interval MDP without a model-type keyword: `[0.5,0.6] : (s'=1)` "
        "interval probabilities are out of scope",
    ),
    # interval DTMC/MDP (IDTMC/IMDP) models in the suite's language and
    # export folders (PRISM reads `[lo,hi] :` updates as an interval model)
    "prism-tests/functionality/language/imdp-sync.prism": (
        UnsupportedError,
        "an interval MDP without a model-type keyword (out of scope)",
    ),
    "prism-tests/functionality/export/dot/dtmc_pctl.prism": (
        UnsupportedError,
        "`dtmc` with interval probabilities, i.e. an interval DTMC (out of scope)",
    ),
    "prism-tests/functionality/export/dot/irobot.prism": (
        UnsupportedError,
        "`mdp` with interval probabilities, i.e. an interval MDP (out of scope)",
    ),
}
KNOWN_PROPERTY_FAILURES = {
    "prism-examples/mdps/leader_async/leader.pctl": (
        PrismSyntaxError,
        "the file has the typo `fiter(forall, leaders<=1)`; PRISM rejects it too "
        "(unknown function)",
    ),
    "prism-tests/bugfixes/imdp-reach-with-infty.prism.props": (
        PrismSyntaxError,
        "IMDP robust operators `Rminmin=?`/`Rminmax=?` for the interval MDP above "
        "(out of scope)",
    ),
}
# Out of scope but parsed (the checker rejects them): LTL path formulas such as
# `P=? [ G F a ]` parse into nested `Temporal` nodes, and multi-objective
# queries `multi(...)` into `Call("multi", ...)`; see the tests below.


@needs_corpus
def test_corpus_models():
    models = in_scope_models()
    assert len(models) > 300
    failures = {}
    for path in models:
        try:
            program = parse_model_file(path)
        except JaxmcError as e:
            failures[_rel(path)] = e
            continue
        assert isinstance(program, ast.Program)
        assert program.span is not None and program.span.file == str(path)
    print(f"\nmodels: {len(models) - len(failures)}/{len(models)} parsed")
    for name, err in failures.items():
        assert name in KNOWN_MODEL_FAILURES, f"unexpected failure:\n{err}"
        cls, _reason = KNOWN_MODEL_FAILURES[name]
        assert type(err) is cls, str(err)
    assert (len(models) - len(failures)) / len(models) == 1 - len(
        KNOWN_MODEL_FAILURES
    ) / len(models)


@needs_corpus
def test_corpus_properties():
    files = in_scope_properties()
    assert len(files) > 180
    failures = {}
    n_props = 0
    for path in files:
        try:
            pf = parse_properties_file(path)
        except JaxmcError as e:
            failures[_rel(path)] = e
            continue
        n_props += len(pf.properties)
    ok = len(files) - len(failures)
    print(f"\nproperty files: {ok}/{len(files)} parsed ({n_props} properties)")
    for name, err in failures.items():
        assert name in KNOWN_PROPERTY_FAILURES, f"unexpected failure:\n{err}"
        cls, _reason = KNOWN_PROPERTY_FAILURES[name]
        assert type(err) is cls, str(err)
    assert ok / len(files) >= 0.98


@needs_corpus
def test_corpus_ltl_and_multi_are_parsed_for_the_checker():
    pf = parse_properties_file(MODELS / "prism-tests/bugfixes/ltl.nm.props")
    expr = pf.properties[0].expr  # Pmax=? [ G F (x=1) ]
    assert isinstance(expr, ast.ProbOp) and expr.opt is ast.Opt.MAX
    g = expr.path
    assert isinstance(g, ast.Temporal) and g.op is ast.TemporalOp.GLOBALLY
    assert isinstance(g.right, ast.Temporal) and g.right.op is ast.TemporalOp.EVENTUALLY
    pf = parse_properties_file(
        MODELS / "prism-tests/functionality/verify/mdps/rewards/total-reward-2.nm.props"
    )
    multi = [p.expr for p in pf.properties if isinstance(p.expr, ast.Call)]
    assert (
        multi
        and multi[0].func == "multi"
        and isinstance(multi[0].args[0], ast.RewardOp)
    )


@needs_corpus
def test_corpus_old_style_filters():
    pf = parse_properties_file(
        MODELS / "prism-tests/functionality/verify/ctmc_csl.sm.props"
    )
    filters = [p.expr for p in pf.properties if isinstance(p.expr, ast.Filter)]
    # P=? [ F[0.3,0.3] !"minimum"  {!"minimum"}{max} ]
    f = filters[0]
    assert f.op == "max"
    assert f.states == ast.Unary(ast.UnaryOp.NOT, ast.LabelRef("minimum"))
    assert isinstance(f.operand, ast.ProbOp)
    assert f.operand.path.bound.kind is ast.TimeBoundKind.INTERVAL


# ----------------------------------------------------------- the AST produced


def _e(text):
    return parse_expression(text)


Int, B, N = ast.IntLit, ast.Binary, ast.Ident
Op = ast.BinaryOp


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1 + 2 * 3", B(Op.ADD, Int(1), B(Op.MUL, Int(2), Int(3)))),
        ("1 - 2 - 3", B(Op.SUB, B(Op.SUB, Int(1), Int(2)), Int(3))),
        ("8 / 4 / 2", B(Op.DIV, B(Op.DIV, Int(8), Int(4)), Int(2))),
        ("2 ^ 3 ^ 2", B(Op.POW, Int(2), B(Op.POW, Int(3), Int(2)))),
        ("-2 ^ 2", ast.Unary(ast.UnaryOp.NEG, B(Op.POW, Int(2), Int(2)))),
        ("2 ^ -1", B(Op.POW, Int(2), ast.Unary(ast.UnaryOp.NEG, Int(1)))),
        ("a | b & c", B(Op.OR, N("a"), B(Op.AND, N("b"), N("c")))),
        # PRISM: <=> binds tighter than =>, both left associative
        ("a => b <=> c", B(Op.IMPLIES, N("a"), B(Op.IFF, N("b"), N("c")))),
        ("a <=> b => c", B(Op.IMPLIES, B(Op.IFF, N("a"), N("b")), N("c"))),
        ("a => b => c", B(Op.IMPLIES, B(Op.IMPLIES, N("a"), N("b")), N("c"))),
        ("!a = b", ast.Unary(ast.UnaryOp.NOT, B(Op.EQ, N("a"), N("b")))),
        ("!a & b", B(Op.AND, ast.Unary(ast.UnaryOp.NOT, N("a")), N("b"))),
        ("a < b = c", B(Op.EQ, B(Op.LT, N("a"), N("b")), N("c"))),
        ("x<-1", B(Op.LT, N("x"), ast.Unary(ast.UnaryOp.NEG, Int(1)))),
        ("a ? b : c ? d : e", ast.Ite(N("a"), N("b"), ast.Ite(N("c"), N("d"), N("e")))),
        ("a | b ? 1 : 2", ast.Ite(B(Op.OR, N("a"), N("b")), Int(1), Int(2))),
        ("1e-3", ast.RealLit(1e-3)),
        ("2.5E+4", ast.RealLit(2.5e4)),
        (".5", ast.RealLit(0.5)),
        ("3", Int(3)),
        ("true & false", B(Op.AND, ast.BoolLit(True), ast.BoolLit(False))),
        ("min(a, 1, 2)", ast.Call("min", (N("a"), Int(1), Int(2)))),
        ("floor (x/2)", ast.Call("floor", (B(Op.DIV, N("x"), Int(2)),))),
        ("func(max, 1, 2)", ast.Call("max", (Int(1), Int(2)))),
        ("func(pow, 2, 3)", ast.Call("pow", (Int(2), Int(3)))),
        ("mod(x, 3) = 0", B(Op.EQ, ast.Call("mod", (N("x"), Int(3))), Int(0))),
    ],
)
def test_expression_ast(text, expected):
    assert _e(text) == expected


def test_property_ast():
    F, U = ast.TemporalOp.EVENTUALLY, ast.TemporalOp.UNTIL
    TB, K = ast.TimeBound, ast.TimeBoundKind
    s2 = B(Op.EQ, N("s"), Int(2))
    assert _e("P=? [ F s=2 ]") == ast.ProbOp(ast.Temporal(F, None, s2))
    assert _e("Pmin=? [ F s=2 ]") == ast.ProbOp(ast.Temporal(F, None, s2), ast.Opt.MIN)
    assert _e("P max=? [ F s=2 ]") == ast.ProbOp(ast.Temporal(F, None, s2), ast.Opt.MAX)
    assert _e("P>=0.9 [ F s=2 ]") == ast.ProbOp(
        ast.Temporal(F, None, s2), threshold=ast.Threshold(Op.GE, ast.RealLit(0.9))
    )
    assert _e("Pmax<0.5 [ F s=2 ]") == ast.ProbOp(
        ast.Temporal(F, None, s2), ast.Opt.MAX, ast.Threshold(Op.LT, ast.RealLit(0.5))
    )
    assert _e("P=? [ a U<=10 b ]") == ast.ProbOp(
        ast.Temporal(U, N("a"), N("b"), TB(K.LE, high=Int(10)))
    )
    assert _e("P=? [ F[2,5] b ]").path.bound == TB(K.INTERVAL, Int(2), Int(5))
    assert _e("P=? [ F=3 b ]").path.bound == TB(K.EQ, low=Int(3))
    assert _e("P=? [ F>=t b ]").path.bound == TB(K.GE, low=N("t"))
    assert _e("P=? [ F>1.5 b ]").path.bound == TB(K.GT, low=ast.RealLit(1.5))
    assert _e("P=? [ F<k b ]").path.bound == TB(K.LT, high=N("k"))
    # PRISM reads `F<=k (b)` as the bound k and the operand (b), not a call k(b)
    assert _e("P=? [ F<=k (b) ]").path == ast.Temporal(
        F, None, N("b"), TB(K.LE, high=N("k"))
    )
    for op in "XFG":
        assert _e(f"P=? [ {op} a ]").path.op is ast.TemporalOp(op)
    for op in "UWR":
        assert _e(f"P=? [ a {op} b ]").path.op is ast.TemporalOp(op)
    nested = _e("P=? [ F P>0.5 [ G x ] ]")
    assert isinstance(nested.path.right, ast.ProbOp)
    assert _e('R{"time"}max=? [ F "done" ]') == ast.RewardOp(
        ast.Temporal(F, None, ast.LabelRef("done")), "time", ast.Opt.MAX
    )
    assert _e("R{2}=? [ C<=5 ]") == ast.RewardOp(
        ast.RewardPath(ast.RewardPathKind.CUMULATIVE, TB(K.LE, high=Int(5))), Int(2)
    )
    assert _e("Rmin=? [ C ]") == ast.RewardOp(
        ast.RewardPath(ast.RewardPathKind.CUMULATIVE), opt=ast.Opt.MIN
    )
    assert _e("R=? [ I=3 ]").path == ast.RewardPath(
        ast.RewardPathKind.INSTANT, TB(K.EQ, low=Int(3))
    )
    assert _e("R=? [ S ]").path == ast.RewardPath(ast.RewardPathKind.LONG_RUN)
    assert _e("R<=5 [ F a ]").threshold == ast.Threshold(Op.LE, Int(5))
    assert _e("S=? [ a ]") == ast.SteadyOp(N("a"))
    assert _e("S>=0.1 [ a ]").threshold == ast.Threshold(Op.GE, ast.RealLit(0.1))
    assert _e("E [ X a ]") == ast.PathQuantifier(
        ast.Quantifier.EXISTS, ast.Temporal(ast.TemporalOp.NEXT, None, N("a"))
    )
    assert _e('filter(max, P=? [ F a ], "init")') == ast.Filter(
        "max", ast.ProbOp(ast.Temporal(F, None, N("a"))), ast.LabelRef("init")
    )
    assert _e("filter(&, a)") == ast.Filter("forall", N("a"))
    combined = _e('P>=1 [F a] & !"deadlock"')
    assert combined.op is Op.AND and combined.right == ast.Unary(
        ast.UnaryOp.NOT, ast.LabelRef("deadlock")
    )
    ceil = _e("ceil(Pmax=? [ F s=2 ]) + 1")
    assert ceil.left.func == "ceil" and isinstance(ceil.left.args[0], ast.ProbOp)
    # PRISM 3 filters in the brackets
    assert _e("P=? [ F a {b}{min}{max} ]") == ast.Filter(
        "range", ast.ProbOp(ast.Temporal(F, None, N("a"))), N("b")
    )
    assert _e("P>0.5 [ F a {b} ]").op == "forall"
    assert _e("S=? [ a {b} ]").op == "state"


def test_property_file_structure():
    pf = parse_properties(
        """
        const int k = 3;
        formula f = x + 1;
        label "l" = x > k;
        "first": P=? [ F "l" ];
        // semicolons between properties are optional, as in PRISM
        P>0.5 [ G f < 10 ]
        R{"r"}=? [ F x=1 ]
        "last": S=? [ x = 2 ]
        """,
        "p.props",
    )
    assert [c.name for c in pf.constants] == ["k"]
    assert [f.name for f in pf.formulas] == ["f"]
    assert [label.name for label in pf.labels] == ["l"]
    assert [p.name for p in pf.properties] == ["first", None, None, "last"]
    assert isinstance(pf.properties[0].expr, ast.ProbOp)
    assert pf.properties[0].expr.path.right == ast.LabelRef("l")
    assert [type(n).__name__ for n in pf.order] == [
        "ConstDecl", "FormulaDecl", "LabelDecl", "Property", "Property", "Property",
        "Property",
    ]  # fmt: skip
    assert pf.properties[1].span == ast.Span("p.props", 7, 9, 7, 27)


MODEL = """\
// a model touching most of the language
ctmc

const int N = 3;
const double p = 0.5;
const bool b;
const M;
rate r = 2;
global g : [0..N] init 0;
formula full = s = N;
label "done" = full & g > 0;

module one
    s : [0..N] init 0;
    t : bool init false;
    [go] s < N -> r * p : (s'=s+1) & (t'=!t) + r * (1-p) : true;
    [] s = N -> (s'=0);
    [stop] full -> true;
endmodule

module two = one [s=u, t=v, go=run] endmodule

rewards "time"
    true : 1;
    [go] s > 0 : s / 2;
endrewards

rewards
    [] true : 1;
endrewards

init s = 0 & u = 0 endinit

system (one |[go]| two) / {go} {stop <- halt} endsystem
"""


def test_model_structure():
    p = parse_model(MODEL, "m.sm")
    assert p.model_type is ast.ModelType.CTMC
    assert [(c.name, c.type, c.keyword) for c in p.constants] == [
        ("N", ast.ValueType.INT, "int"),
        ("p", ast.ValueType.DOUBLE, "double"),
        ("b", ast.ValueType.BOOL, "bool"),
        ("M", ast.ValueType.INT, ""),
        ("r", ast.ValueType.DOUBLE, "rate"),
    ]
    assert p.constants[2].value is None
    assert p.globals == (ast.VarDecl("g", ast.ValueType.INT, Int(0), N("N"), Int(0)),)
    assert p.formulas[0] == ast.FormulaDecl("full", B(Op.EQ, N("s"), N("N")))
    assert p.labels[0].name == "done"
    one, two = p.modules
    assert [v.name for v in one.variables] == ["s", "t"]
    assert one.variables[1] == ast.VarDecl(
        "t", ast.ValueType.BOOL, init=ast.BoolLit(False)
    )
    go, reset, stop = one.commands
    assert go.action == "go" and len(go.updates) == 2
    assert go.updates[0].assigns == (
        ast.Assign("s", B(Op.ADD, N("s"), Int(1))),
        ast.Assign("t", ast.Unary(ast.UnaryOp.NOT, N("t"))),
    )
    assert go.updates[1].assigns == ()
    assert reset.action is None and reset.updates == (
        ast.Update(None, (ast.Assign("s", Int(0)),)),
    )
    assert stop.updates == (ast.Update(None, ()),)
    assert two == ast.RenamedModule(
        "two", "one", (("s", "u"), ("t", "v"), ("go", "run"))
    )
    time_, unnamed = p.rewards
    assert time_.name == "time" and unnamed.name is None
    assert time_.items[0] == ast.RewardItem(False, None, ast.BoolLit(True), Int(1))
    assert time_.items[1].transition and time_.items[1].action == "go"
    assert unnamed.items[0].transition and unnamed.items[0].action is None
    assert p.init == B(Op.AND, B(Op.EQ, N("s"), Int(0)), B(Op.EQ, N("u"), Int(0)))
    assert p.system == ast.SysRename(
        ast.SysHide(
            ast.SysParallel(ast.SysModule("one"), ast.SysModule("two"), ("go",)),
            ("go",),
        ),
        (("stop", "halt"),),
    )
    kinds = [type(n).__name__ for n in p.order]
    assert kinds == [
        "ConstDecl", "ConstDecl", "ConstDecl", "ConstDecl", "ConstDecl", "VarDecl",
        "FormulaDecl", "LabelDecl", "Module", "RenamedModule", "RewardStruct",
        "RewardStruct", "Binary", "SysRename",
    ]  # fmt: skip


def test_spans_everywhere():
    p = parse_model(MODEL, "m.sm")
    for node in ast.walk(p):
        assert node.span is not None, node
        assert node.span.file == "m.sm"
    go = p.modules[0].commands[0]
    assert (go.span.line, go.span.column) == (16, 5)
    assert (go.guard.span.line, go.guard.span.column) == (16, 10)
    assert (go.guard.span.end_line, go.guard.span.end_column) == (16, 15)
    assign = go.updates[0].assigns[1]
    assert (assign.span.line, assign.span.column) == (16, 38)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a ||| b || c", "SysInterleave(a, SysFullParallel(b, c))"),
        ("a || b || c", "SysFullParallel(SysFullParallel(a, b), c)"),
        ("(a ||| b) || c", "SysFullParallel(SysInterleave(a, b), c)"),
        ("a |[x,y]| b", "SysParallel(a, b, x,y)"),
        ("a / {x} || b", "SysFullParallel(SysHide(a, x), b)"),
        ("a {x<-y} / {y}", "SysHide(SysRename(a, x<-y), y)"),
    ],
)
def test_system_precedence(text, expected):
    def show(s):
        if isinstance(s, ast.SysModule):
            return s.name
        if isinstance(s, ast.SysHide):
            return f"SysHide({show(s.operand)}, {','.join(s.actions)})"
        if isinstance(s, ast.SysRename):
            pairs = ",".join(f"{a}<-{b}" for a, b in s.renames)
            return f"SysRename({show(s.operand)}, {pairs})"
        if isinstance(s, ast.SysParallel):
            return (
                f"SysParallel({show(s.left)}, {show(s.right)}, {','.join(s.actions)})"
            )
        return f"{type(s).__name__}({show(s.left)}, {show(s.right)})"

    p = parse_model(f"module a endmodule\nsystem {text} endsystem")
    assert show(p.system) == expected


def test_keywords_in_context():
    # property keywords are names in models ...
    p = parse_model(
        "mdp\nmodule m\n F : [0..1]; C : bool; s : bool;\n [] F=0 & C -> (F'=1);\n"
        "endmodule"
    )
    assert [v.name for v in p.modules[0].variables] == ["F", "C", "s"]
    # ... `min`/`max` may be renamed, `rate`/`prob` declare constants
    p = parse_model(
        "prob p = 0.5;\nrate r;\nmodule a endmodule module b = a [min=max] endmodule"
    )
    assert [c.keyword for c in p.constants] == ["prob", "rate"]
    assert p.modules[1].renames == (("min", "max"),)
    # the model type may be absent (semantics decides: PRISM assumes an MDP)
    assert parse_model("module a endmodule").model_type is None
    for kw, mt in ast.MODEL_TYPE_KEYWORDS.items():
        assert parse_model(f"{kw}\nmodule a endmodule").model_type is mt


def test_unsupported_constructs_are_kept_for_rejection():
    p = parse_model(
        "pta\nmodule m\n x : clock;\n invariant x <= 2 endinvariant\n [] x>1 -> true;\n"
        "endmodule"
    )
    assert p.model_type is ast.ModelType.PTA
    assert p.modules[0].variables[0].type == "clock"
    assert p.modules[0].invariant == B(Op.LE, N("x"), Int(2))
    assert (
        parse_model("module m\n x : int;\nendmodule").modules[0].variables[0].type
        == "int"
    )
    with pytest.raises(UnsupportedError) as e:
        parse_model("pomdp\nmodule m s : bool; endmodule\nobservables s endobservables")
    assert e.value.span.line == 3


# ------------------------------------------------------------ malformed input

_M = "dtmc\nmodule m\n  s : [0..3] init 0;\n{}\nendmodule\n"

MALFORMED = [
    # (kind, text, error class, line, column, message or hint fragment)
    (
        "model",
        _M.format("  [] s=0 -> (s'=1)\n  [] s=1 -> (s'=2);"),
        PrismSyntaxError,
        4,
        19,
        "missing ';'",
    ),
    ("model", _M.format("  [] s=0 -> (s=1);"), PrismSyntaxError, 4, 18, "(s'=...)"),
    (
        "model",
        _M.format("  [] s'=0 -> (s'=1);"),
        PrismSyntaxError,
        4,
        6,
        "primed variable s'",
    ),
    (
        "model",
        _M.format("  [] s=0 => (s'=1);"),
        PrismSyntaxError,
        4,
        14,
        "with '->', not '=>'",
    ),
    (
        "model",
        _M.format("  [] s=0 -> (s'=1));"),
        PrismSyntaxError,
        4,
        19,
        "unbalanced parentheses",
    ),
    (
        "model",
        _M.format("  [] (s=0 -> (s'=1);"),
        PrismSyntaxError,
        4,
        11,
        "expected ')'",
    ),
    (
        "model",
        "dtmc\nmodule m\n s : [0..3] init 0;\n [] s=0 -> (s'=1);\n",
        PrismSyntaxError,
        4,
        19,
        "endmodule",
    ),
    (
        "model",
        "dtmc\nmodule m\n s : bool;\nmodule n\n t : bool;\nendmodule\n",
        PrismSyntaxError,
        4,
        1,
        "'endmodule'",
    ),
    ("model", _M.format("  [] s=0 -> (s':=1);"), PrismSyntaxError, 4, 16, ":="),
    ("model", _M.format("  [] s=0 -> s:=1;"), PrismSyntaxError, 4, 15, ":="),
    (
        "model",
        "dtmc\nconst int init = 3;\n",
        PrismSyntaxError,
        2,
        11,
        "'init' is a PRISM keyword",
    ),
    (
        "model",
        "dtmc\nmodule m\n  module : [0..3];\nendmodule\n",
        PrismSyntaxError,
        3,
        3,
        "keyword",
    ),
    (
        "model",
        "dtmc\nmodule m\n  rewards : bool;\nendmodule\n",
        PrismSyntaxError,
        3,
        3,
        "keyword",
    ),
    (
        "model",
        _M.format("  [] s=0 && s=1 -> (s'=1);"),
        PrismSyntaxError,
        4,
        11,
        "'&' (not '&&')",
    ),
    (
        "model",
        _M.format("  [] s==0 -> (s'=1);"),
        PrismSyntaxError,
        4,
        8,
        "'=' (not '==')",
    ),
    (
        "model",
        "dtmc\nconst int N = 3\nconst int M = 2;\n",
        PrismSyntaxError,
        2,
        16,
        "missing ';' before 'const'",
    ),
    (
        "model",
        'dtmc\nlabel "a" = s -> 1;\n',
        PrismSyntaxError,
        2,
        15,
        "implication is written '=>'",
    ),
    (
        "model",
        _M.format("  [] s=0 -> 0.5 : (s'=1) + 0.5 (s'=2);"),
        PrismSyntaxError,
        4,
        32,
        "separated by ':'",
    ),
    (
        "model",
        _M.format("  [] s=0 -> foo(s) : (s'=1);"),
        PrismSyntaxError,
        4,
        16,
        "'foo' is not a built-in function",
    ),
    (
        "model",
        "dtmc\nmodule m\n  s : [0..3] init 0\n  [] s=0 -> (s'=1);\nendmodule\n",
        PrismSyntaxError,
        3,
        20,
        "missing ';'",
    ),
    (
        "model",
        "dtmc\nformula f = s + ;\n",
        PrismSyntaxError,
        2,
        17,
        "expected an expression",
    ),
    (
        "model",
        "dtmc\nglobal g : [0..1]\n",
        PrismSyntaxError,
        2,
        18,
        "missing ';' before end of input",
    ),
    (
        "model",
        "dtmc\nrewards\n  true : 1\nendrewards\n",
        PrismSyntaxError,
        3,
        11,
        "missing ';' before 'endrewards'",
    ),
    (
        "model",
        'dtmc\nrewards "r"\n  true : 1;\n',
        PrismSyntaxError,
        3,
        12,
        "endrewards",
    ),
    (
        "model",
        _M.format("  [] s=0 -> (s'=1) $;"),
        PrismSyntaxError,
        4,
        20,
        "unexpected character '$'",
    ),
    ("model", "dtmc mdp\n", PrismSyntaxError, 1, 6, "multiple model type"),
    (
        "model",
        'dtmc\nlabel "a b" = true;\n',
        PrismSyntaxError,
        2,
        7,
        "must be an identifier",
    ),
    (
        "model",
        "dtmc\ninit true endinit\ninit false endinit\n",
        PrismSyntaxError,
        3,
        1,
        "multiple init",
    ),
    (
        "model",
        "pomdp\nobservables s endobservables\n",
        UnsupportedError,
        2,
        1,
        "observables",
    ),
    (
        "model",
        "dtmc\nmodule m\n  [] true -> [0.2,0.3] : true;\nendmodule",
        UnsupportedError,
        3,
        14,
        "interval",
    ),
    (
        "model",
        "dtmc\nmodule m\n  s : [0..2] init 0;\n  [] s=0 -> (s'=1);\nendmodule\n"
        "modul n\n",
        PrismSyntaxError,
        6,
        1,
        "unexpected 'modul'",
    ),
    ("model", "#const N#\n", PrismSyntaxError, 1, 1, "preprocessor"),
    (
        "model",
        'dtmc\nlabel "open = true;\n',
        PrismSyntaxError,
        2,
        7,
        "closed on the same line",
    ),
    ("props", "P=? [ F s=1 ", PrismSyntaxError, 1, 12, "expected ']'"),
    ("props", "P=? [ F s=1 ] ]", PrismSyntaxError, 1, 15, "unexpected ']'"),
    ("props", "P>= [ F s=1 ]", PrismSyntaxError, 1, 5, "expected an expression"),
    ("props", "Q=? [ F s=1 ]", PrismSyntaxError, 1, 3, "unexpected '?'"),
    ("props", "P=? [ s=1 U ]", PrismSyntaxError, 1, 13, "unexpected ']'"),
    ("props", 'R{"a"=? [ F s=1 ]', PrismSyntaxError, 1, 7, "unexpected '?'"),
    (
        "props",
        "filter(foo, s=1)",
        PrismSyntaxError,
        1,
        8,
        "unknown filter operator 'foo'",
    ),
    (
        "props",
        "fiter(forall, s=1)",
        PrismSyntaxError,
        1,
        13,
        "'fiter' is not a built-in function",
    ),
    ("props", "P=? [ F<= s=1 ]", PrismSyntaxError, 1, 15, "expected an expression"),
    ("props", "P=? [ F s'=1 ]", PrismSyntaxError, 1, 9, "primed variable s'"),
    (
        "props",
        'label "x" = true\nP=? [ F "x" ];',
        PrismSyntaxError,
        1,
        17,
        "missing ';'",
    ),
    ("expr", "1 +", PrismSyntaxError, 1, 4, "expected an expression"),
    ("expr", "(1 + 2", PrismSyntaxError, 1, 7, "a '(' is not closed"),
    ("expr", "1 + 2)", PrismSyntaxError, 1, 6, "has no matching '('"),
    ("expr", "", PrismSyntaxError, 1, 1, "expected an expression"),
]


@pytest.mark.parametrize(
    "kind, text, cls, line, column, fragment",
    MALFORMED,
    ids=[f"{k}-{i}" for i, (k, *_rest) in enumerate(MALFORMED)],
)
def test_malformed(kind, text, cls, line, column, fragment):
    parse = {"model": parse_model, "props": parse_properties, "expr": parse_expression}[
        kind
    ]
    with pytest.raises(cls) as info:
        parse(text, "bad.txt")
    err = info.value
    assert type(err) is cls
    assert (err.span.line, err.span.column) == (line, column), str(err)
    assert err.span.file == "bad.txt"
    assert fragment in err.message or fragment in (err.hint or ""), str(err)
    rendered = str(err)
    assert rendered.startswith(f"bad.txt:{line}:{column}: ")
    assert "Traceback" not in rendered and "lark" not in rendered.lower()
    # the rendering quotes the line with a caret, unless the file is empty
    if text:
        assert "^" in rendered
    # no lark exception is chained into the user's traceback
    assert err.__cause__ is None and err.__suppress_context__


def test_malformed_cases_are_many():
    assert len(MALFORMED) >= 30


# -------------------------------------------------------------------- fuzzing

_FUZZ_FILES = [
    "prism-examples/simple/dice/dice.pm",
    "prism-examples/dtmcs/brp/brp.pm",
    "prism-examples/ctmcs/cluster/cluster.sm",
    "prism-examples/mdps/consensus/coin2.nm",
    "prism-tests/functionality/verify/dtmcs/dtmc_pctl.pm",
    "prism-examples/dtmcs/brp/brp.pctl",
    "prism-examples/ctmcs/cluster/cluster.csl",
]


def _fuzz_sources():
    out = []
    for rel in _FUZZ_FILES:
        path = MODELS / rel
        if path.is_file():
            out.append((path.suffix in (".pctl", ".csl", ".props"), path.read_text()))
    return out


_SOURCES = _fuzz_sources()
_TOKEN = re.compile(r"[A-Za-z_]\w*'?|\d+(?:\.\d+)?|\.\.|->|<=|>=|!=|=>|<=>|\S")


@st.composite
def _mutated(draw):
    is_props, text = draw(st.sampled_from(_SOURCES))
    pieces = [m for m in _TOKEN.finditer(text)]
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(
            st.sampled_from(["del_tok", "dup_tok", "swap_tok", "del_char", "ins_char"])
        )
        if kind.endswith("_tok") and pieces:
            i = draw(st.integers(0, len(pieces) - 1))
            m = pieces[i]
            a, b = m.span()
            if kind == "del_tok":
                text = text[:a] + text[b:]
            elif kind == "dup_tok":
                text = text[:b] + " " + m.group() + text[b:]
            else:
                j = draw(st.integers(0, len(pieces) - 1))
                m2 = pieces[j]
                (a, b), (c, d) = sorted([m.span(), m2.span()])
                if b <= c:
                    text = text[:a] + text[c:d] + text[b:c] + text[a:b] + text[d:]
        elif text:
            i = draw(st.integers(0, len(text) - 1))
            if kind == "del_char":
                text = text[:i] + text[i + 1 :]
            else:
                text = (
                    text[:i]
                    + draw(st.sampled_from(list("()[]{};:'\"=<>-+&|!?.,#x0 \n")))
                    + text[i:]
                )
        pieces = [m for m in _TOKEN.finditer(text)]
    return is_props, text


@pytest.mark.skipif(not _SOURCES, reason="../shared/models is absent")
@settings(
    max_examples=150,
    deadline=1000,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(_mutated())
def test_fuzz_mutated_models(case):
    from jaxmc.lang import format_properties

    is_props, text = case
    parse = parse_properties if is_props else parse_model
    fmt = format_properties if is_props else format_program
    start = time.perf_counter()
    try:
        tree = parse(text)
    except JaxmcError as e:
        assert e.span is None or e.span.line >= 1
        str(e)  # renders without failing
        return
    finally:
        assert time.perf_counter() - start < 1.0
    # whatever parses, prints back to text that parses to the same AST
    assert parse(fmt(tree)) == tree


# ----------------------------------------------------------------------- speed


@needs_corpus
def test_largest_example_parses_fast():
    get_parser("prism")  # grammar built once, outside the timing
    examples = [p for p in in_scope_models() if "prism-examples" in p.parts]
    largest = max(examples, key=lambda p: p.stat().st_size)
    text = largest.read_text(errors="replace")
    times = []
    for _ in range(3):
        start = time.perf_counter()
        parse_model(text, str(largest))
        times.append(time.perf_counter() - start)
    assert min(times) < 0.5, (largest, times)


def test_parsers_are_cached():
    assert get_parser("prism") is get_parser("prism")
    assert get_parser("props") is get_parser("props")


# ------------------------------------------------------------------ packaging


def test_wheel_ships_grammars(tmp_path):
    """The wheel holds jaxmc/grammars/*.lark and parses from site-packages."""
    import zipfile

    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(REPO),
            "--no-deps",
            "-w",
            str(wheels),
            "-q",
        ],
        capture_output=True,
        text=True,
    )
    if build.returncode != 0:
        pytest.skip(
            f"cannot build the wheel here (no build backend?):\n{build.stderr[-2000:]}"
        )
    (wheel,) = wheels.glob("jaxmc-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for g in ("common", "prism", "props"):
        assert f"jaxmc/grammars/{g}.lark" in names
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
            "-q",
        ],
        check=True,
        capture_output=True,
    )
    script = (
        "import jaxmc, jaxmc.lang as L, jaxmc.lang.grammar as G\n"
        f"assert jaxmc.__file__.startswith({str(target)!r}), jaxmc.__file__\n"
        f"assert str(G._grammar_dir()).startswith({str(target)!r})\n"
        "p = L.parse_model(\"dtmc module m s : [0..1] init 0; [] s=0 -> (s'=1); "
        'endmodule")\n'
        "print(p.modules[0].commands[0].updates[0].assigns[0].var)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "s"


# ----------------------------------------------------------- 32-bit integers


@pytest.mark.parametrize(
    ("kind", "text", "line", "col", "literal"),
    [
        ("model", "const int N = 99999999999999999999;", 1, 15, "99999999999999999999"),
        ("model", "dtmc\nconst double d = 2147483648;\n", 2, 18, "2147483648"),
        (
            "model",
            "module m\n s : [0..1];\n [] s<4294967296 -> true;\nendmodule",
            3,
            7,
            "4294967296",
        ),
        ("props", "P=? [ F<=3000000000 true ];", 1, 10, "3000000000"),
        ("expr", "-2147483648", 1, 2, "2147483648"),
    ],
)
def test_integer_literals_must_fit_in_32_bits(kind, text, line, col, literal):
    parsers = dict(model=parse_model, props=parse_properties, expr=parse_expression)
    with pytest.raises(PrismSyntaxError) as e:
        parsers[kind](text, "f.prism")
    err = e.value
    assert (err.span.file, err.span.line, err.span.column) == ("f.prism", line, col)
    assert err.span.end_column == col + len(literal)
    assert f"integer literal {literal} does not fit in PRISM's 32-bit int" in str(err)
    assert f"`{literal}.0`" in err.hint


def test_largest_integer_literal_and_large_doubles_are_fine():
    assert parse_expression("2147483647") == ast.IntLit(2**31 - 1)
    neg = ast.Unary(ast.UnaryOp.NEG, ast.IntLit(2**31 - 1))
    smallest = ast.Binary(ast.BinaryOp.SUB, neg, ast.IntLit(1))
    assert parse_expression("-2147483647 - 1") == smallest
    assert parse_expression("99999999999999999999.0").value == 1e20
    assert parse_expression("1e20").value == 1e20


@pytest.mark.parametrize(
    ("const", "error", "message"),
    [
        ("99999999999999999999", PrismSyntaxError, "does not fit in PRISM's 32-bit"),
        ("2147483647 + 1", SemanticError, "integer overflow"),
        ("-2147483647 - 2", SemanticError, "integer overflow"),
        ("65536 * 65536", SemanticError, "integer overflow"),
    ],
)
def test_int_constants_out_of_range_are_located_errors(const, error, message):
    import jaxmc

    text = f"dtmc\nconst int N = {const};\nmodule m s:[0..1]; [] s<N -> true; endmodule"
    with pytest.raises(error, match=re.escape(message)) as e:
        jaxmc.build(jaxmc.load_model_string(text, file="big.pm"))
    span = e.value.span
    assert (span.file, span.line, span.column) == ("big.pm", 2, 15)


# ------------------------------------------------- every syntax error explains

_BROKEN_MODELS = [
    _M.format("  [] s=0 -> (s'=1;"),
    _M.format("  [ s=0 -> (s'=1);"),
    _M.format("  [] s=0 -> (s'=1) $;"),
    _M.format("  [] s=0 -> 0.5:(s'=1) 0.5:(s'=2);"),
    "dtmc\nmodule m\n  s : [0..3] init 0;\n  [] s=0 -> (s'=1);\n",
    "dtmc\nmodule m\n s : [0..3 init 0;\nendmodule\n",
    "dtmc\nmodule m\n s : [0..3] init;\nendmodule\n",
    "dtmc\nformula f = ;\n",
    "dtmc\nlabel a = true;\n",
    "dtmc\nconst int N = 3 4;\n",
    'dtmc\nmodule m s:[0..1]; [] true -> (s\'="x"); endmodule\n',
    "dtmc\nmodule m s:[0..1]; [] true -> (s'=1); endmodule endmodule\n",
    "dtmc\nmodule module\nendmodule\n",
]
_BROKEN_PROPERTIES = [
    "P=? [ F s=1 ",
    "P=? F s=1 ]",
    "P [ F s=1 ]",
    "P=? [ F<= s=1 ]",
    "filter(, P=? [ F s=1 ])",
    "const int = 3;",
    "S=? [ ]",
]


@pytest.mark.parametrize(
    ("kind", "text"),
    [("model", t) for t in _BROKEN_MODELS] + [("props", t) for t in _BROKEN_PROPERTIES],
)
def test_syntax_errors_are_located_with_what_was_expected_and_a_hint(kind, text):
    model = kind == "model"
    parse, name = (parse_model, "f.pm") if model else (parse_properties, "f.props")
    with pytest.raises(PrismSyntaxError) as e:
        parse(text, name)
    first = str(e.value).splitlines()[0]
    assert re.match(rf"{re.escape(name)}:\d+:\d+: syntax error: ", first), first
    assert "expected" in first or "keyword" in first or "missing" in first
    assert e.value.hint, first
    assert "lark" not in str(e.value) and "Traceback" not in str(e.value)


def test_empty_and_comment_only_files_parse_to_nothing():
    assert parse_model("").modules == ()
    assert parse_model("// nothing\n").modules == ()
    assert parse_properties("").properties == ()
    assert parse_properties("// only\n// comments\n").properties == ()
