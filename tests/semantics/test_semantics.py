"""Tests of `jaxmc.semantics`: constants, typing, evaluation, check_program,
check_properties, and a corpus run over ../shared/models."""

from __future__ import annotations

import math
import re

import corpus
import pytest

from jaxmc.errors import SemanticError, UnsupportedError
from jaxmc.lang import ast, parse_expression, parse_model, parse_properties
from jaxmc.semantics import (
    ConstRange,
    ConstValue,
    check_program,
    check_properties,
    evaluate,
    expand_constants,
    fold,
    parse_constants,
    type_of,
)


T = ast.ValueType


def check(text, constants=None, **kw):
    return check_program(parse_model(text), constants, source=text, **kw)


def props(model_text, props_text, constants=None, mconsts=None, **kw):
    m = check(model_text, mconsts)
    return check_properties(
        parse_properties(props_text), m, constants, source=props_text, **kw
    )


def ev(text, **env):
    return evaluate(parse_expression(text), env)


DIE = """
dtmc
const double p = 0.5;
module die
  s : [0..7] init 0;
  d : [0..6] init 0;
  [] s=0 -> p : (s'=1) + 1-p : (s'=2);
  [] s=1 -> p : (s'=3) + 1-p : (s'=4);
  [] s=2 -> p : (s'=5) + 1-p : (s'=6);
  [] s=3 -> p : (s'=1) + 1-p : (s'=7) & (d'=1);
  [] s=4 -> p : (s'=7) & (d'=2) + 1-p : (s'=7) & (d'=3);
  [] s=5 -> p : (s'=7) & (d'=4) + 1-p : (s'=7) & (d'=5);
  [] s=6 -> p : (s'=2) + 1-p : (s'=7) & (d'=6);
  [] s=7 -> (s'=7);
endmodule
rewards "coin_flips"
  [] s<7 : 1;
endrewards
label "done" = s=7;
"""


# ------------------------------------------------------------------ constants


def test_parse_constants_values_and_ranges():
    c = parse_constants("N=3,p=0.2,b=true,K=1:2:9,M=1:9")
    assert c == {
        "N": ConstValue("3"),
        "p": ConstValue("0.2"),
        "b": ConstValue("true"),
        "K": ConstRange("1", "9", "2"),
        "M": ConstRange("1", "9"),
    }
    assert parse_constants(["N=1", "", "p=2"]) == {
        "N": ConstValue("1"),
        "p": ConstValue("2"),
    }
    assert parse_constants(None) == {}


@pytest.mark.parametrize(
    "bad", ["N", "=3", "N=", "N=1:", "N=1:2:3:4", "N=1,N=2", "1N=3"]
)
def test_parse_constants_errors(bad):
    with pytest.raises(SemanticError):
        parse_constants(bad)


def test_expand_constants_prism_order_and_double_steps():
    settings = expand_constants("N=1:2:5,b=true")
    assert settings == [{"N": 1, "b": True}, {"N": 3, "b": True}, {"N": 5, "b": True}]
    # int range with a step that does not divide the width stops below high
    assert [s["N"] for s in expand_constants("N=1:2:6")] == [1, 3, 5]
    # double ranges: low + i*step while <= high (+ PRISM's 0.001*step slack)
    ps = [s["p"] for s in expand_constants("p=0:0.1:1")]
    assert len(ps) == 11 and ps[3] == 0 + 3 * 0.1
    # the last constant varies fastest; declaration order wins
    s = expand_constants("a=1:2,b=3:4", order=["b", "a"])
    assert [(x["b"], x["a"]) for x in s] == [(3, 1), (3, 2), (4, 1), (4, 2)]
    # declared types convert: a double const given an int range
    assert expand_constants("p=0:1", types={"p": T.DOUBLE}) == [{"p": 0.0}, {"p": 1.0}]
    assert expand_constants(None) == [{}]


@pytest.mark.parametrize(
    "bad", ["N=5:1", "N=1:0:5", "N=1:-1:5", "N=1:9:5", "b=true:false"]
)
def test_expand_constants_bad_ranges(bad):
    with pytest.raises(SemanticError):
        expand_constants(bad, types={"b": T.BOOL})


# ---------------------------------------------------------------------- types


@pytest.mark.parametrize(
    "text,expected",
    [
        ("1+2", T.INT),
        ("1/2", T.DOUBLE),
        ("1+2.0", T.DOUBLE),
        ("pow(2,3)", T.INT),
        ("2^3", T.INT),
        ("pow(2.0,3)", T.DOUBLE),
        ("floor(2.5)", T.INT),
        ("ceil(x/2)", T.INT),
        ("round(1.5)", T.INT),
        ("mod(x,3)", T.INT),
        ("log(8,2)", T.DOUBLE),
        ("min(1,2,x)", T.INT),
        ("max(1,2.0)", T.DOUBLE),
        ("x<3", T.BOOL),
        ("b=true", T.BOOL),
        ("b ? 1 : 2.0", T.DOUBLE),
        ("b ? 1 : x", T.INT),
        ("!b & (b|b) => (b<=>b)", T.BOOL),
        ("-x", T.INT),
    ],
)
def test_types(text, expected):
    assert type_of(parse_expression(text), {"x": T.INT, "b": T.BOOL}) == expected


@pytest.mark.parametrize(
    "text",
    [
        "mod(x,2.0)",
        "b+1",
        "x & b",
        "b<b",
        "x ? 1 : 2",
        "b ? 1 : b",
        "!x",
        "floor(b)",
        "b=1",
    ],
)
def test_type_errors(text):
    with pytest.raises(SemanticError, match="type error"):
        type_of(parse_expression(text), {"x": T.INT, "b": T.BOOL})


def test_unknown_identifier_did_you_mean():
    with pytest.raises(SemanticError, match="unknown identifier `countr`") as e:
        type_of(parse_expression("countr + 1"), {"counter": T.INT})
    assert "did you mean `counter`" in str(e.value)


# ----------------------------------------------------------------- evaluation


def test_evaluate_prism_arithmetic():
    assert ev("1/2") == 0.5
    assert ev("7/2") == 3.5 and isinstance(ev("4/2"), float)
    assert ev("mod(-1,3)") == 2 and ev("mod(7,3)") == 1
    assert ev("round(2.5)") == 3 and ev("round(-2.5)") == -2 and ev("round(-0.5)") == 0
    assert ev("floor(-1.5)") == -2 and ev("ceil(1.2)") == 2
    assert ev("pow(2,10)") == 1024 and isinstance(ev("pow(2,10)"), int)
    assert ev("pow(2.0,-1)") == 0.5
    assert ev("log(8,2)") == pytest.approx(3.0)
    assert ev("min(3,1,2)") == 1 and ev("max(1,2.5)") == 2.5
    assert ev("1=1.0") is True and ev("true=false") is False
    assert ev("x>0 ? 1 : 2.0", x=1) == 1.0 and isinstance(
        ev("x>0 ? 1 : 2.0", x=1), float
    )
    assert ev("1/0") == math.inf and ev("-1/0") == -math.inf and math.isnan(ev("0/0"))
    assert ev("log(0,2)") == -math.inf and math.isnan(ev("log(-1,2)"))
    # short circuit: the untaken branch is not evaluated
    assert ev("x=0 | mod(1,x)=0", x=0) is True
    assert ev("x=0 ? 1 : mod(1,x)", x=0) == 1


@pytest.mark.parametrize(
    "text,msg",
    [
        ("pow(2,-1)", "negative exponent"),
        ("pow(2,31)", "overflow"),
        ("2147483647+1", "overflow"),
        ("100000*100000", "overflow"),
        ("mod(1,0)", "non-positive divisor"),
        ("floor(1/0)", "cannot take floor"),
        ("round(0/0)", "cannot take round"),
    ],
)
def test_evaluate_errors(text, msg):
    with pytest.raises(SemanticError, match=msg):
        ev(text)


def test_fold_partial():
    e = fold(parse_expression("N+1 > x & (b | N=3)"), {"N": 3, "b": False})
    assert e == parse_expression("4 > x")
    assert fold(parse_expression("1/0 + x"), {}) == ast.Binary(
        ast.BinaryOp.ADD, ast.RealLit(math.inf), ast.Ident("x")
    )
    assert fold(parse_expression("false & mod(1,0)=0"), {}) == ast.BoolLit(False)
    # a selected int branch of a double conditional stays double
    assert fold(parse_expression("c ? 1 : 2.5"), {"c": True}) == ast.RealLit(1.0)
    # parameters stay symbolic
    assert fold(parse_expression("p*2"), {"p": ast.Ident("q")}) == parse_expression(
        "q*2"
    )


# -------------------------------------------------------------- check_program


def test_die_checks():
    c = check(DIE)
    assert c.model_type == ast.ModelType.DTMC
    assert [v.name for v in c.variables] == ["s", "d"]
    assert c.variable("s").init == 0 and c.variable("s").high == 7
    assert c.constants == {"p": 0.5}
    cmd = c.modules[0].commands[0]
    assert cmd.index == 0 and cmd.guard == parse_expression("s=0")
    # constants are folded into the probabilities
    assert cmd.updates[0].prob == ast.RealLit(0.5) and cmd.updates[
        1
    ].prob == ast.RealLit(0.5)
    assert c.labels["done"] == parse_expression("s=7")
    assert c.rewards[0].name == "coin_flips"
    assert c.system == ast.SysModule("die")


def test_missing_model_type_is_mdp_with_warning():
    c = check("module m x:bool; [] !x -> (x'=true); endmodule")
    assert c.model_type == ast.ModelType.MDP
    assert any("assuming mdp" in w for w in c.warnings)
    assert c.variable("x").is_bool and c.variable("x").init == 0


def test_unsupported_model_type():
    with pytest.raises(UnsupportedError, match="pta"):
        check("pta module m x:[0..1]; [] x=0 -> (x'=1); endmodule")


def test_duplicate_names():
    text = (
        "dtmc\nconst int N = 2;\nmodule m\n  N : [0..1];\n  [] true -> true;\n"
        "endmodule\n"
    )
    with pytest.raises(
        SemanticError, match=r"`N` is already declared \(constant\) at <string>:2"
    ) as e:
        check(text)
    assert e.value.span.line == 4
    with pytest.raises(SemanticError, match="already declared"):
        check(
            "dtmc formula f = 1; const int f = 2; module m x:[0..1]; [] true -> true; "
            "endmodule"
        )
    with pytest.raises(SemanticError, match="module `m` is already declared"):
        check("dtmc module m x:[0..1]; endmodule module m y:[0..1]; endmodule")


def test_undefined_identifier_suggestion():
    text = (
        "dtmc module m counter:[0..3]; [] countr<3 -> (counter'=counter+1); endmodule"
    )
    with pytest.raises(SemanticError, match="unknown identifier `countr`") as e:
        check(text)
    assert "did you mean `counter`" in str(e.value)
    assert e.value.span.column == text.index("countr<") + 1


def test_missing_constants_listed_together():
    text = (
        "dtmc const int N; const double p; const int K = N+1; const bool b;\n"
        "module m x:[0..N]; endmodule"
    )
    with pytest.raises(SemanticError) as e:
        check(text)
    msg = str(e.value)
    assert "`N`, `p`, `b`" in msg and "--const N=...,p=...,b=..." in msg
    c = check(text, "N=3,p=0.5,b=false")
    assert c.constants == {"N": 3, "p": 0.5, "b": False, "K": 4}
    assert c.variable("x").high == 3


def test_constant_overrides_and_types():
    text = (
        "dtmc const int N; const double p; const int D = 5;\n"
        "module m x:[0..N]; endmodule"
    )
    c = check(text, {"N": 2, "p": 1})
    assert c.constants["p"] == 1.0 and isinstance(c.constants["p"], float)
    # PRISM: "Constant ... has already been defined" (UndefinedConstants.defineConstant)
    with pytest.raises(
        SemanticError, match="`D` is defined in the file, so it cannot be given a value"
    ):
        check(text, "N=2,p=0.1,D=9")
    with pytest.raises(SemanticError, match="not a valid integer"):
        check(text, "N=2.5,p=0.1")
    with pytest.raises(SemanticError, match="range"):
        check(text, "N=1:3,p=0.1")
    with pytest.raises(
        SemanticError, match="type mismatch in definition of constant `K`"
    ):
        check("dtmc const int K = 1/2; module m x:[0..1]; endmodule")
    with pytest.raises(SemanticError, match="cyclic dependency among constants"):
        check("dtmc const int a = b; const int b = a; module m x:[0..1]; endmodule")
    with pytest.raises(SemanticError, match="not constant"):
        check("dtmc const int a = x; module m x:[0..1]; endmodule")


def test_parameters_stay_symbolic():
    text = (
        "dtmc const double p; module m x:[0..1]; [] x=0 -> p:(x'=1) + 1-p:(x'=0); "
        "endmodule"
    )
    c = check(text, parameters=("p",))
    assert c.parameters == ("p",) and "p" not in c.constants
    upd = c.modules[0].commands[0].updates
    assert upd[0].prob == ast.Ident("p") and upd[1].prob == parse_expression("1-p")
    with pytest.raises(SemanticError, match="parameters"):
        check("dtmc const int N; module m x:[0..N]; endmodule", parameters=("N",))


def test_formulas_expand_and_cycles():
    text = """dtmc
formula f = x+1;
formula g = f*2;
module m x:[0..9]; [] g<5 -> (x'=f); endmodule
label "l" = g=4;"""
    c = check(text)
    cmd = c.modules[0].commands[0]
    assert cmd.guard == parse_expression("(x+1)*2<5")
    assert cmd.updates[0].assigns == (("x", parse_expression("x+1")),)
    assert c.formulas["g"] == parse_expression("(x+1)*2")
    with pytest.raises(SemanticError, match="cyclic dependency among formulas"):
        check(
            "dtmc formula f = g; formula g = f; module m x:[0..1]; [] f -> true; "
            "endmodule"
        )


def test_init_values():
    with pytest.raises(
        SemanticError,
        match=r"initial value 5 of variable `x` is outside its range \[0..3\]",
    ):
        check("dtmc module m x:[0..3] init 5; endmodule")
    with pytest.raises(SemanticError, match="empty"):
        check("dtmc module m x:[3..0]; endmodule")
    c = check("dtmc const int N=2; module m x:[N..N+3]; b:bool init true; endmodule")
    assert (c.variable("x").low, c.variable("x").high, c.variable("x").init) == (
        2,
        5,
        2,
    )
    assert c.variable("b").init == 1
    c = check("dtmc module m x:[0..3]; endmodule init x>1 endinit")
    assert c.variable("x").init is None and c.init == parse_expression("x>1")
    with pytest.raises(SemanticError, match="cannot use both"):
        check("dtmc module m x:[0..3] init 0; endmodule init x>1 endinit")
    with pytest.raises(SemanticError, match="must be int"):
        check("dtmc module m x:[0..3] init 1.5; endmodule")


def test_writes_and_assignment_types():
    with pytest.raises(
        SemanticError,
        match="module `b` cannot modify variable `x`, which belongs to module `a`",
    ):
        check(
            "dtmc module a x:[0..1]; endmodule module b y:[0..1]; [] x=0 -> (x'=1); "
            "endmodule"
        )
    # reading another module's variable is fine
    check(
        "dtmc module a x:[0..1]; endmodule module b y:[0..1]; [] x=0 -> (y'=1); "
        "endmodule"
    )
    with pytest.raises(SemanticError, match="assigned twice"):
        check("dtmc module a x:[0..1]; [] true -> (x'=0)&(x'=1); endmodule")
    with pytest.raises(
        SemanticError, match="type error in update to variable `x`"
    ) as e:
        check("dtmc module a x:[0..4]; [] true -> (x'=x/2); endmodule")
    assert "floor" in e.value.hint
    with pytest.raises(SemanticError, match="type error"):
        check("dtmc module a b:bool; [] true -> (b'=1); endmodule")
    with pytest.raises(SemanticError, match="guard must be bool"):
        check("dtmc module a x:[0..4]; [] x+1 -> (x'=0); endmodule")
    with pytest.raises(SemanticError, match="unknown variable `z`"):
        check("dtmc module a x:[0..4]; [] true -> (z'=0); endmodule")
    with pytest.raises(SemanticError, match="global variable"):
        check("mdp global g:[0..1]; module a x:[0..1]; [go] true -> (g'=1); endmodule")
    check("mdp global g:[0..1]; module a x:[0..1]; [] true -> (g'=1); endmodule")


def test_constant_probabilities_checked():
    with pytest.raises(SemanticError, match=r"probability 1.5 is outside \[0, 1\]"):
        check("dtmc module a x:[0..1]; [] true -> 1.5:(x'=0) + -0.5:(x'=1); endmodule")
    with pytest.raises(SemanticError, match="rate"):
        check("ctmc module a x:[0..1]; [] true -> -2:(x'=0); endmodule")
    c = check("ctmc module a x:[0..1]; [] x=0 -> 3:(x'=1); [] x=1 -> (x'=0); endmodule")
    assert c.modules[0].commands[0].updates[0].prob == ast.IntLit(3)
    assert c.modules[0].commands[1].updates[0].prob == ast.RealLit(1.0)


def test_renaming():
    text = """mdp
const int N = 2;
formula near = x1 < N;
module m1
  x1 : [0..N] init 0;
  [a] near -> (x1'=x1+1);
  [b] x1=N -> (x1'=0);
endmodule
module m2 = m1 [x1=x2, a=c] endmodule
"""
    c = check(text)
    m2 = c.modules[1]
    assert m2.name == "m2" and m2.variables == ("x2",)
    assert m2.alphabet == frozenset({"c", "b"})
    # the formula was expanded before renaming, so it refers to x2 here
    assert m2.commands[0].guard == parse_expression("x2 < 2")
    assert m2.commands[0].updates[0].assigns == (("x2", parse_expression("x2+1")),)
    assert [cmd.index for m in c.modules for cmd in m.commands] == [0, 1, 2, 3]
    # spans point to the base module's text
    assert m2.commands[0].span.line == 6
    assert c.system == ast.SysFullParallel(ast.SysModule("m1"), ast.SysModule("m2"))
    with pytest.raises(SemanticError, match="must rename variable `x1`"):
        check(text.replace("x1=x2, a=c", "a=c"))
    with pytest.raises(SemanticError, match="unknown module `m3`"):
        check(text.replace("= m1 [", "= m3 ["))


def test_system_clause():
    base = (
        "mdp module a x:[0..1]; [s] true -> true; endmodule module b y:[0..1]; [s] "
        "true -> true; endmodule\n"
    )
    c = check(base + "system a || b endsystem")
    assert c.system == ast.SysFullParallel(ast.SysModule("a"), ast.SysModule("b"))
    check(base + "system (a ||| b) / {s} endsystem")
    with pytest.raises(SemanticError, match="does not appear"):
        check(base + "system a endsystem")
    with pytest.raises(SemanticError, match="more than once"):
        check(base + "system a || b || a endsystem")
    with pytest.raises(SemanticError, match="unknown module `c`"):
        check(base + "system a || b || c endsystem")
    with pytest.raises(SemanticError, match='invalid action "t"'):
        check(base + "system a |[t]| b endsystem")


def test_labels_and_rewards():
    with pytest.raises(SemanticError, match="built-in label"):
        check('dtmc module m x:[0..1]; endmodule label "init" = x=0;')
    with pytest.raises(SemanticError, match="already declared"):
        check('dtmc module m x:[0..1]; endmodule label "a" = x=0; label "a" = x=1;')
    with pytest.raises(SemanticError, match="must be bool"):
        check('dtmc module m x:[0..1]; endmodule label "a" = x+1;')
    with pytest.raises(SemanticError, match="reward value must be a number"):
        check("dtmc module m x:[0..1]; endmodule rewards true : x=0; endrewards")
    with pytest.raises(SemanticError, match='reward structure "r" is already declared'):
        check(
            'dtmc module m x:[0..1]; endmodule rewards "r" true:1; endrewards rewards '
            '"r" true:2; endrewards'
        )


def test_errors_carry_source_and_file():
    text = "dtmc\nmodule m\n  x : [0..3] init 7;\nendmodule\n"
    with pytest.raises(SemanticError) as e:
        check_program(parse_model(text), source=text, file="m.pm")
    s = str(e.value)
    assert s.startswith("m.pm:3:") and "x : [0..3] init 7;" in s and "^" in s


# ----------------------------------------------------------- check_properties


def test_properties_basic():
    ps = props(
        DIE,
        'const int k; label "six" = d=6;\n"p6": P=? [ F s=7 & d=k ];\n'
        'P>=0.1 [ F "six" ];\nR{"coin_flips"}=? [ F "done" ];\n"p6" > 0.1;\n'
        'filter(forall, "init" => P>0 [ X s<3 ]);\n',
        "k=6",
    )
    assert len(ps) == 5
    assert ps[0].name == "p6" and ps[0].type == T.DOUBLE
    assert ps[0].expr.path == parse_expression("F s=7 & d=6") or ps.get("p6") is ps[0]
    assert ps[1].type == T.BOOL
    assert ps.label_kind("six") == "properties" and ps.label_kind("done") == "model"
    assert ps.label_kind("init") == "builtin" and ps.label_kind("p6") == "property"
    assert ps.resolve_label("six") == parse_expression("d=6")
    assert ps.resolve_label("p6") is ps[0].expr
    assert ps.constants == {"k": 6}


@pytest.mark.parametrize(
    "prop,exc,msg",
    [
        ('P=? [ F "nope" ]', SemanticError, 'unknown label or property "nope"'),
        ('R{"flips"}=? [ F s=7 ]', SemanticError, 'unknown reward structure "flips"'),
        ("R{2}=? [ F s=7 ]", SemanticError, "out of range"),
        ("P=? [ G F (X<=1 s=7) ]", UnsupportedError, "time-bounded X"),
        ("P=? [ (F s=7) & (F d+1) ]", SemanticError, "must be Boolean"),
        ("P=? [ (F s=7) & (d+1) ]", SemanticError, "must be Boolean"),
        ("P>1.5 [ F s=7 ]", SemanticError, "invalid probability bound"),
        ("P=? [ F<=2.5 s=7 ]", SemanticError, "must be an integer"),
        ("P=? [ F<=-1 s=7 ]", SemanticError, "negative"),
        ("P=? [ F s+1 ]", SemanticError, "must be Boolean"),
        ("filter(forall, s)", SemanticError, "must be Boolean"),
        ("P=? [ F z=1 ]", SemanticError, "unknown identifier `z`"),
    ],
)
def test_property_errors(prop, exc, msg):
    with pytest.raises(exc, match=re.escape(msg)):
        props(DIE, prop + ";")


def test_path_formula_outside_operator():
    bare = ast.Temporal(ast.TemporalOp.EVENTUALLY, None, parse_expression("s=7"))
    pf = ast.PropertiesFile(properties=(ast.Property(bare),))
    with pytest.raises(SemanticError, match="path formula can only appear"):
        check_properties(pf, check(DIE))
    cum = ast.RewardPath(
        ast.RewardPathKind.CUMULATIVE,
        ast.TimeBound(ast.TimeBoundKind.LE, high=ast.IntLit(5)),
    )
    pf = ast.PropertiesFile(properties=(ast.Property(ast.ProbOp(cum)),))
    with pytest.raises(SemanticError, match="only appear inside R"):
        check_properties(pf, check(DIE))
    pf = ast.PropertiesFile(
        properties=(ast.Property(ast.Filter("foo", parse_expression("s=7"))),)
    )
    with pytest.raises(SemanticError, match="unknown filter operator"):
        check_properties(pf, check(DIE))


def test_property_constants_per_property():
    text = "const int k; const int j;\nP=? [ F s=7 ];\nP=? [ F d=k ];\n"
    with pytest.raises(SemanticError, match="undefined constant `k`"):
        props(DIE, text)
    ps = props(DIE, text, errors="keep")
    assert ps[0].error is None and "`k`" in str(ps[1].error)
    # a defined model constant cannot be given a value (PRISM)
    with pytest.raises(SemanticError, match="`p` is defined in the model"):
        props(DIE, text, {"k": 1, "p": 0.3})


def test_property_model_type_rules():
    mdp = "mdp module m x:[0..1]; [] x=0 -> (x'=1); endmodule"
    # S on an MDP is a long-run average (min/max decided by the plan)
    assert props(mdp, "Smax=? [ x=1 ];")[0].type == T.DOUBLE
    ctmc = "ctmc module m x:[0..1]; [] x=0 -> 2:(x'=1); endmodule"
    ps = props(ctmc, "P=? [ F<=0.5 x=1 ];\nS=? [ x=1 ];\nP=? [ F[0.5,1.5] x=1 ];")
    assert ps[0].expr.path.bound.high == ast.RealLit(0.5)
    assert props(mdp, "Pmax=? [ F x=1 ];")[0].type == T.DOUBLE


# ------------------------------------------------------------------- corpus


def _expected_error(lines, line):
    """Whether the `// RESULT:` comment above `line` announces an error."""
    for i in range(line - 2, max(-1, line - 8), -1):
        if "RESULT" in lines[i]:
            return "Error" in lines[i]
    return False


#: Suite models whose every RESULT is "Error" because the model itself is
#: wrong (PRISM refuses it when it builds it).
EXPECTED_MODEL_ERRORS = {
    "infinite-rates.prism",  # a rate of 1/0
}


@pytest.mark.skipif(not corpus.available(), reason="../shared/models not present")
def test_corpus_models_and_properties():
    """Check every in-scope model (constants from .args/auto scripts; those
    still unknown become parameters) and every property file. Properties may
    fail only with an UnsupportedError (LTL, ...), an error their RESULT
    comment announces, or an undefined property constant."""
    from jaxmc.errors import JaxmcError

    models = corpus.in_scope_models()
    assert len(models) > 300
    checked_models = 0
    model_failures = []
    unsupported_models = []
    n_props_files = props_ok = 0
    prop_failures = []
    unsupported = needs_constants = expected = 0
    for m in models:
        text = m.read_text()
        try:
            prog = parse_model(text, file=str(m))
        except UnsupportedError as e:
            unsupported_models.append((m.name, e.message))
            continue
        consts = expand_constants(corpus.merged_constants(m))[0]
        undefined = [
            c.name for c in prog.constants if c.value is None and c.name not in consts
        ]
        # the corpus merges the settings of several command lines: give each
        # file only the constants it declares (PRISM's -const of one command)
        consts = {
            k: v for k, v in consts.items() if k in {c.name for c in prog.constants}
        }
        try:
            checked = check_program(
                prog, consts, source=text, file=str(m), parameters=undefined
            )
        except JaxmcError as e:
            if m.name not in EXPECTED_MODEL_ERRORS:
                model_failures.append((m.name, str(e).splitlines()[0]))
            continue
        assert m.name not in EXPECTED_MODEL_ERRORS, f"{m.name} should be refused"
        checked_models += 1
        for pfile in corpus.props_for(m):
            n_props_files += 1
            ptext = pfile.read_text()
            lines = ptext.splitlines()
            pc = expand_constants(corpus.merged_constants(m, pfile))[0]
            try:
                pf = parse_properties(ptext, file=str(pfile))
                pc = {
                    k: v for k, v in pc.items() if k in {c.name for c in pf.constants}
                }
                cps = check_properties(
                    pf, checked, pc, source=ptext, file=str(pfile), errors="keep"
                )
            except JaxmcError as e:
                # parse errors are the parser's; a file-level semantic error is ours
                prop_failures.append((pfile.name, str(e).splitlines()[0]))
                continue
            bad = []
            for p in cps:
                if p.error is None:
                    continue
                if isinstance(p.error, UnsupportedError):
                    unsupported += 1
                elif "undefined constant" in p.error.message:
                    needs_constants += 1
                elif p.span is not None and _expected_error(lines, p.span.line):
                    expected += 1
                else:
                    bad.append(str(p.error).splitlines()[0])
            if bad:
                prop_failures.append((pfile.name, bad[0]))
            else:
                props_ok += 1
    print(
        f"\nmodels: {checked_models}/{len(models)} checked, {len(unsupported_models)} "
        f"unsupported {unsupported_models}; property files: {props_ok}/{n_props_files} "
        f"ok; properties unsupported: {unsupported}, needing constants: "
        f"{needs_constants}, expected errors: {expected}"
    )
    for f in model_failures + prop_failures:
        print("FAIL", *f)
    assert not model_failures
    # every unsupported model must be one of the known out-of-scope features
    assert all("interval" in msg for _, msg in unsupported_models)
    assert props_ok >= 0.95 * n_props_files, prop_failures
