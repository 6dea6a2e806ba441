"""PRISM's exports on the command line: -exportresults in every shape,
-importresults, -exportvector, -exportstates/-exportlabels/-exportprism and
the printout of filter(print|printall|argmin|argmax); values checked against
closed forms and dense numpy computations, formats against PRISM's Java
behaviour (the byte-for-byte comparison with PRISM's own files is in
tests/conformance, `exports.py`)."""

import csv
import io
import json
import math

import numpy as np
import pytest

import jaxmc
from jaxmc.cli import main
from jaxmc.cli.javatext import format_g12, java_double
from jaxmc.lang import parse_properties
from jaxmc.lang.prism_text import prism_string


# A walk on -N..N started at 0: BFS numbers the states 0, -1, 1, ...; PRISM
# numbers them -N..N.
WALK = """dtmc
const int N;
const double p;
module M
  x : [-N..N] init 0;
  [] true -> p:(x'=max(x-1,-N)) + (1-p):(x'=min(x+1,N));
endmodule
label "edge" = x=-N | x=N;
"""
WALK_PROPS = """const int k;
"reach": P=? [ F<=k x=N ];
P>0.1 [ F<=k "edge" ];
P=? [ X x=0 ];
"""


@pytest.fixture
def walk(tmp_path):
    (tmp_path / "walk.pm").write_text(WALK)
    (tmp_path / "walk.props").write_text(WALK_PROPS)
    return tmp_path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def matrix(n: int, p: float) -> np.ndarray:
    """The walk's transition matrix in PRISM's order (x = -n..n)."""
    size = 2 * n + 1
    m = np.zeros((size, size))
    for i in range(size):
        m[i, max(i - 1, 0)] += p
        m[i, min(i + 1, size - 1)] += 1 - p
    return m


def bounded_reach(n: int, p: float, k: int, target: np.ndarray) -> np.ndarray:
    """P(F<=k target) in every state, by k steps of the dense matrix."""
    m, x = matrix(n, p), target.astype(float)
    for _ in range(k):
        x = np.where(target, 1.0, m @ x)
    return x


def test_exportresults_list_csv_comment_matrix_dataframe(walk, capsys):
    base = [walk / "walk.pm", walk / "walk.props", "-const", "k=1:3,N=2,p=0.5"]
    shapes = {"txt": "", "csv": ":csv", "comment": ":comment", "matrix": ":matrix",
              "mcsv": ":matrix,csv", "df": ":dataframe"}  # fmt: skip
    for name, opt in shapes.items():
        run(capsys, *base, "-exportresults", f"{walk / name}{opt}", "-q")
    want = {
        k: bounded_reach(2, 0.5, k, np.arange(5) == 4)[2] for k in (1, 2, 3)
    }  # from x=0: 0, 0.25, 0.25
    txt = (walk / "txt").read_text().split("\n\n")
    assert len(txt) == 3  # one table per property
    head, cols, *rows = txt[0].splitlines()
    assert head == '"reach": P=? [ F<=k x=N ]:'  # PRISM's text of the property
    assert cols == "k\tResult"  # N, p have one value: not columns
    assert [r.split("\t") for r in rows] == [
        [str(k), format_g12(want[k])] for k in (1, 2, 3)
    ]
    # a property that does not use k has no k column
    assert txt[2].splitlines()[:2] == ["P=? [ X x=0 ]:", "Result"]
    assert (walk / "csv").read_text().splitlines()[0] == (
        '"""reach"": P=? [ F<=k x=N ]"'
    )
    comment = (walk / "comment").read_text().splitlines()
    assert comment[0] == f"// RESULT (N=2,p=0.5,k=1): {format_g12(want[1])}"
    assert comment[3] == '"reach": P=? [ F<=k x=N ]'
    m = (walk / "matrix").read_text().split("\n\n")[0].splitlines()
    assert m[1:] == ["k:", "1\t2\t3", "\t".join(format_g12(want[k]) for k in (1, 2, 3))]
    assert (walk / "mcsv").read_text().splitlines()[1:3] == ['"k"', "1,2,3"]
    df = list(csv.reader(io.StringIO((walk / "df").read_text())))
    assert df[0] == ["Property", "k", "Result"]
    assert df[1:4] == [["reach", str(k), format_g12(want[k])] for k in (1, 2, 3)]
    assert df[4][0] == "Property_2" and df[7] == ["Property_3", "", "0"]
    # -importresults reads the data frame back: the same frame comes out
    run(
        capsys,
        "-importresults",
        walk / "df",
        "-exportresults",
        f"{walk / 'df2'}:dataframe",
    )
    assert (walk / "df2").read_text() == (walk / "df").read_text()


def test_exportresults_matrix_of_three_constants(walk, capsys):
    props = walk / "three.props"
    props.write_text("const int k;\nconst int j;\nP=? [ F<=k+j x=N ];\n")
    out = run(capsys, walk / "walk.pm", props, "-const", "N=1:2,p=0.5,k=0:1,j=1:2",
              "-exportresults", "stdout:matrix", "-q")  # fmt: skip
    text = out.split("Exporting results as matrix (plain text) below:\n\n")[1]
    first, second = text.rstrip("\n").split("\n\n")
    lines = first.splitlines()
    assert lines[:2] == ["N=1, k\\j:", "\t1\t2"]
    for row, k in zip(lines[2:], (0, 1)):
        cells = row.split("\t")
        assert cells[0] == str(k)
        for j, cell in zip((1, 2), cells[1:]):
            want = bounded_reach(1, 0.5, k + j, np.arange(3) == 2)[1]
            assert float(cell) == pytest.approx(want, abs=1e-12)
    assert second.splitlines()[0] == "N=2, k\\j:"


def test_exportvector_in_prism_state_order(walk, capsys):
    out_file = walk / "vec.txt"
    run(capsys, walk / "walk.pm", "--prop", "P=? [ F<=3 x=N ]", "-const",
        "N=3,p=0.3", "-exportvector", out_file, "-q")  # fmt: skip
    got = [float(v) for v in out_file.read_text().splitlines()]
    want = bounded_reach(3, 0.3, 3, np.arange(7) == 6)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    # a reducing filter's value stands for every state
    run(capsys, walk / "walk.pm", "--prop", 'filter(count, "edge")', "-const",
        "N=3,p=0.3", "-exportvector", out_file, "-q")  # fmt: skip
    assert out_file.read_text() == "2\n" * 7
    out = run(capsys, walk / "walk.pm", "--prop", "x>0", "-const", "N=1,p=0.3",
              "-exportvector", "stdout", "-q")  # fmt: skip
    assert "0:(-1)=false\n1:(0)=false\n2:(1)=true\n" in out


def test_filter_printouts(walk, capsys):
    args = [walk / "walk.pm", "-const", "N=2,p=0.25", "-q"]
    out = run(capsys, *args, "--prop", "filter(print, P=? [ X x=2 ])")
    want = matrix(2, 0.25)[:, 4]  # P(X x=2) per state, PRISM's order
    lines = out.split("Results (non-zero only) for filter true:\n")[1].split("\n\n")[0]
    assert lines.splitlines() == [
        f"{i}:({i - 2})={java_double(v)}" for i, v in enumerate(want) if v
    ]
    assert "States satisfying filter true: 5" in out
    out = run(capsys, *args, "--prop", "filter(printall, P=? [ X x=2 ], x>=1)")
    assert "Results (including zeros) for filter x>=1:\n3:(1)=0.75\n4:(2)=0.75\n" in out
    out = run(capsys, *args, "--prop", 'filter(print, "edge")')
    assert "Satisfying states:\n0:(-2)\n4:(2)\n" in out
    out = run(capsys, *args, "--prop", "filter(argmax, P=? [ X x=2 ], x<2)")
    assert "Maximum value over states satisfying filter: 0.75" in out
    assert "Number of states with maximum value: 1" in out
    doc = json.loads(run(capsys, *args, "--json", "--prop", "filter(print, x)"))
    shown = doc["runs"][0]["properties"][0]["filter"]
    assert shown["states"] == [0, 1, 3, 4] and shown["values"] == [-2, -1, 1, 2]
    assert shown["valuations"] == ["(-2)", "(-1)", "(1)", "(2)"]
    # the API: CheckResult.printed, in the model's own (BFS) numbering
    model = jaxmc.load_model(str(walk / "walk.pm"), "N=2,p=0.25")
    printed = jaxmc.check(model, "filter(printall, x, x>0)").printed
    explicit = jaxmc.build(model)
    assert sorted(explicit.states[printed.states, 0].tolist()) == [1, 2]
    assert sorted(printed.values.tolist()) == [1, 2]


def test_exportstates_labels_prism(walk, capsys):
    base = [walk / "walk.pm", "-const", "N=1,p=0.5", "-q"]
    run(capsys, *base, "-exportstates", walk / "s.sta", "-exportlabels",
        walk / "l.lab", "-exportmodel", walk / "m.sta,lab",
        "-exportprism", walk / "flat.pm")  # fmt: skip
    assert (walk / "s.sta").read_text() == (walk / "m.sta").read_text()
    assert (walk / "s.sta").read_text().splitlines()[1:] == [
        "(x)", "0:(-1)", "1:(0)", "2:(1)"
    ]  # fmt: skip
    assert (walk / "l.lab").read_text() == (walk / "m.lab").read_text()
    # the printed model is the same model
    again = jaxmc.build(jaxmc.load_model(str(walk / "flat.pm"), "N=1,p=0.5"))
    assert again.num_states == 3 and again.num_transitions == 6
    assert main([str(walk / "walk.pm"), "-const", "N=1,p=0.5",
                 "-exportlabels", f"{walk / 'x.lab'}:bogus"]) == 1  # fmt: skip


@pytest.mark.parametrize(
    "value, java",
    [(1.0, "1.0"), (0.125, "0.125"), (1e-7, "1.0E-7"), (1.5e7, "1.5E7"),
     (0.001, "0.001"), (0.000999, "9.99E-4"), (1e21, "1.0E21"), (-2.5, "-2.5"),
     (1234567.0, "1234567.0"), (0.1 + 0.2, "0.30000000000000004"),
     (math.inf, "Infinity"), (0.0, "0.0")],
)  # fmt: skip
def test_java_double_to_string(value, java):
    assert java_double(value) == java


@pytest.mark.parametrize(
    "value, text",
    [(1.0, "1"), (0.78125, "0.78125"), (1 / 3, "0.333333333333"), (1e-5, "1e-05"),
     (0.0001, "0.0001"), (123456789012345.0, "1.23456789012e+14"),
     (999999999999.5, "1e+12"), (-math.inf, "-Infinity"), (0.0, "0"),
     (2.5e-7, "2.5e-07")],
)  # fmt: skip
def test_prism_format_double(value, text):
    """PRISM's formatDouble(12, v): Java's %.12g, trailing zeros removed."""
    assert format_g12(value) == text


def test_prism_text_reads_back_as_the_same_property():
    text = (
        'P=? [ !(s=0) U<=3 (x>1 | y<2) & z ];R{"a"}max=? [ C<=10 ];'
        'filter(print, Pmin=? [ X a-(b-c) ], "init");S>=0.5 [ x=1 => y=2 ];'
        "(x=1 ? 2 : 3)+1 > 2*(a+b)/c;R=? [ I=5 ];P>0.1 [ F[1,2] x=0 ];"
        "E [ G x=1 ];P=? [ (a U b) U c ];-(a-b)*c/(d/e)=f=g;(a=>b)=>c"
    )
    for prop in parse_properties(text).properties:
        again = parse_properties(prism_string(prop.expr) + ";").properties[0]
        assert again.expr == prop.expr, prism_string(prop.expr)
    assert prism_string(parse_properties("x=1 => y=2;").properties[0].expr) == (
        "x=1=>y=2"
    )
