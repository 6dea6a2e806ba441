"""The suite's reading of PRISM's `.args` and `.auto` lines (no models run)."""

from __future__ import annotations

from . import auto, suite


def test_switches_become_options():
    c = suite.parse_args_line(
        "-const N=2 -const=K=3 -e 1e-8 -maxiters 50 -absolute -ii"
    )
    assert c.consts == "N=2,K=3"
    assert c.epsilon == 1e-8 and c.max_iters == 50 and not c.relative
    assert c.method == "interval_iteration" and c.skip is None
    assert suite.parse_args_line("-prop six").only_property == "six"
    assert suite.parse_args_line("-ex -h -s # a comment -exact").skip is None


def test_skips_name_their_category():
    def cat(line, keyword=None):
        return suite.category(suite.parse_args_line(line, keyword).skip or "")

    assert cat("-politer") == "method"  # never run as value iteration
    assert cat("-lp") == "method" and cat("-modpoliter") == "method"
    assert cat("-exact") == "exact" and cat("-param p=0:1") == "parametric"
    assert cat("-sim") == "simulation"
    # results read back are compared as an export (tests/conformance/exports.py)
    c = suite.parse_args_line("-importresults r.csv -exportresults r.csv:dataframe")
    assert c.skip is None and c.exports[0] == "-importresults r.csv"
    # a PRISM model read as another type (jaxmc.load_model(model_type=...))
    c = suite.parse_args_line("-mdp -ex", "dtmc")
    assert c.skip is None and c.import_type == "mdp"
    assert cat("-dtmc", "dtmc") == ""
    assert cat("-frobnicate") == "unknown switch"
    c = suite.parse_args_line("-exportresults out.csv:csv -const x=1")
    assert c.skip is None and c.exports == ("-exportresults out.csv:csv",)


def test_prop_selects_by_index_or_name():
    assert suite.selects(None, 3, None)
    assert suite.selects("2", 1, "a") and not suite.selects("2", 0, "a")
    assert suite.selects("six", 4, "six") and not suite.selects("six", 4, "five")


def test_model_and_props_args_combine(tmp_path):
    model = tmp_path / "m.pm"
    props = tmp_path / "m.pm.props"
    model.write_text("dtmc\nmodule M x:[0..1]; endmodule\n")
    props.write_text("// RESULT: 1\nP=? [ F x=0 ]\n")
    (tmp_path / "m.pm.args").write_text("-const N=2\n-const N=3\n")
    (tmp_path / "m.pm.props.args").write_text("-ex\n-h\n-jacobi\n")
    configs = suite.configs(model, props)
    # 2 x 3 lines; -ex and -h are the same configuration for us
    assert [(c.consts, c.method) for c in configs] == [
        ("N=2", None), ("N=2", "jacobi"), ("N=3", None), ("N=3", "jacobi"),
    ]  # fmt: skip


def test_explicit_specs():
    assert auto.spec_problem("dice.all") is None
    assert auto.spec_problem("lec3.tra,sta,lab,srew,trew") is None
    assert auto.spec_problem("dice.pexp") is None
    assert suite.category(auto.spec_problem("dice.all.gz")) == "import"
    assert auto.spec_problem("m.all:matlab,actions=false") is None
    assert suite.category(auto.spec_problem("m.all:zip=xz")) == "export"


def test_mdp_choices_compared_up_to_their_order():
    from .choices import canonical_choices as canon

    a = b"S1 = sparse(2,2);\nS2 = sparse(2,2);\nS1(1,1)=1;\nS2(1,2)=1;\n"
    b = b"S1 = sparse(2,2);\nS2 = sparse(2,2);\nS1(1,2)=1;\nS2(1,1)=1;\n"
    assert canon("m.tra", a) == canon("m.tra", b)
    c = b"S1 = sparse(2,2);\nS2 = sparse(2,2);\nS1(1,2)=1;\nS2(2,1)=1;\n"
    assert canon("m.tra", a) != canon("m.tra", c)  # another state: differs
    rows = b"2 3 3\n0 1:1 b\n0 1:0 a\n1 1:1 c\n"
    swapped = b"2 3 3\n0 1:0 a\n0 1:1 b\n1 1:1 c\n"
    assert canon("m.tra", rows) == canon("m.tra", swapped)
    assert canon("m.tra", rows) != canon("m.tra", swapped.replace(b"1:1 c", b"1:0 c"))


def test_imported_type_reads_the_tra_header(tmp_path):
    (tmp_path / "a.tra").write_text("# Transitions (POMDP)\n1 1 1 1\n")
    (tmp_path / "b.tra").write_text("2 1\n0 1 1\n")
    assert auto._imported_type(tmp_path, "a.all") == "POMDP"
    assert auto._imported_type(tmp_path, "b.tra,lab") is None
