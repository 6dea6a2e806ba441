"""PRISM's model export formats and switches on the command line: Matlab
(`:matlab`, `-exportmatlab`), rows (`:rows`), Graphviz (`-exporttransdot`),
`actions=false`, `headers=false`, `precision=N`, `:proplabels` and
`-exportproplabels`, the single-part switches (`-exporttrans`,
`-exportstaterewards`, `-exporttransrewards`) and `-exporttarget`. Each file
is read back and compared with the model's matrices written down by hand
(a random walk's closed form, a two-action MDP); the byte-for-byte
comparison with PRISM's own files is in tests/conformance."""

import re

import numpy as np
import pytest

from jaxmc.cli import main


# x in -N..N; PRISM numbers the states by x, so x = i - N in state i.
WALK = """dtmc
const int N;
const double p;
module M
  x : [-N..N] init 0;
  [] true -> p:(x'=max(x-1,-N)) + (1-p):(x'=min(x+1,N));
endmodule
rewards "steps" true : 1; endrewards
rewards "moves" [] x<N : 2; endrewards
"""
PROPS = """label "right" = x>0;
P=? [ F x=N ];
"""
# Two actions from s=0 (a: stay or go, b: go for sure), then s=1 absorbing.
MDP = """mdp
module M
  s : [0..1] init 0;
  [a] s=0 -> 0.25:(s'=0) + 0.75:(s'=1);
  [b] s=0 -> (s'=1);
  [c] s=1 -> true;
endmodule
"""


def walk_matrix(n: int, p: float) -> np.ndarray:
    size = 2 * n + 1
    m = np.zeros((size, size))
    for i in range(size):
        m[i, max(i - 1, 0)] += p
        m[i, min(i + 1, size - 1)] += 1 - p
    return m


@pytest.fixture
def walk(tmp_path):
    (tmp_path / "walk.pm").write_text(WALK)
    (tmp_path / "walk.props").write_text(PROPS)
    return tmp_path


def run(*argv) -> int:
    return main([str(a) for a in argv] + ["-q"])


def read_matlab(text: str) -> dict[str, np.ndarray]:
    """The matrices of a Matlab export (1-based indices)."""
    mats = {}
    for name, r, c in re.findall(r"^(\w+) = sparse\((\d+),(\d+)\);$", text, re.M):
        mats[name] = np.zeros((int(r), int(c)))
    for name, i, j, v in re.findall(r"^(\w+)\((\d+),(\d+)\)=(.*);$", text, re.M):
        mats[name][int(i) - 1, int(j) - 1] = float(v)
    return mats


def test_matlab_walk_matrix_and_rewards(walk):
    n, p = 2, 0.3
    base = walk / "w"
    assert run(walk / "walk.pm", "-const", f"N={n},p={p}",
               "-exportmodel", f"{base}.all:matlab") == 0  # fmt: skip
    tra = read_matlab((walk / "w.tra").read_text())
    assert list(tra) == ["P"]
    np.testing.assert_allclose(tra["P"], walk_matrix(n, p), rtol=1e-15)
    # two reward structures: w1.srew (c1), w2.srew (c2), PRISM's numbering
    s1 = (walk / "w1.srew").read_text().splitlines()
    assert s1[0] == f"c1 = sparse({2 * n + 1},1);"
    assert s1[1:] == [f"c1({i})=1;" for i in range(1, 2 * n + 2)]
    assert (walk / "w2.srew").read_text() == f"c2 = sparse({2 * n + 1},1);\n"
    t2 = read_matlab((walk / "w2.trew").read_text())["C2"]
    want = 2.0 * (walk_matrix(n, p) > 0)
    want[-1] = 0  # x=N earns nothing
    np.testing.assert_array_equal(t2, want)
    sta = (walk / "w.sta").read_text().splitlines()
    assert sta[:3] == ["# States", "% (x)", "states=["]
    assert sta[3:] == [str(x) for x in range(-n, n + 1)] + ["];"]
    lab = (walk / "w.lab").read_text().splitlines()
    assert lab[:2] == [
        f"l_init=sparse({2 * n + 1},1);",
        f"l_deadlock=sparse({2 * n + 1},1);",
    ]
    assert lab[2:] == ["", f"l_init({n + 1})=1;"]


def test_matlab_mdp_one_matrix_per_choice(tmp_path):
    (tmp_path / "m.nm").write_text(MDP)
    assert run(tmp_path / "m.nm", "-exportmodel", f"{tmp_path / 'm'}.tra:matlab") == 0
    mats = read_matlab((tmp_path / "m.tra").read_text())
    assert sorted(mats) == ["S1", "S2"]
    # choices of s=0 in some order: {a, b}; s=1 has one choice
    got = sorted([tuple(mats["S1"][0]), tuple(mats["S2"][0])])
    assert got == [(0.0, 1.0), (0.25, 0.75)]
    assert tuple(mats["S1"][1]) == (0.0, 1.0) and not mats["S2"][1].any()


def test_rows_and_dot_read_back(walk, tmp_path):
    n, p = 1, 0.25
    assert run(walk / "walk.pm", "-const", f"N={n},p={p}",
               "-exportmodel", f"{walk / 'r'}.tra,trew:rows",
               "-exporttransdotstates", walk / "g.dot") == 0  # fmt: skip
    lines = (walk / "r.tra").read_text().splitlines()
    size = 2 * n + 1
    assert lines[0] == f"{size} {2 * size}"  # no comment header
    got = np.zeros((size, size))
    for i, line in enumerate(lines[1:]):
        head, *entries = line.split()
        assert int(head) == i
        for e in entries:
            v, t = e.split(":")
            got[i, int(t)] += float(v)
    np.testing.assert_allclose(got, walk_matrix(n, p))
    # the rows .trew lists non-zero rewards only, a line per row
    trew = (walk / "r2.trew").read_text().splitlines()
    assert trew[0] == f"{size} 4" and trew[-1] == str(size - 1)
    dot = (walk / "g.dot").read_text()
    edges = re.findall(r'^(\d+) -> (\d+) \[label="([^"]+)"\];$', dot, re.M)
    got = np.zeros((size, size))
    for s, t, v in edges:
        got[int(s), int(t)] += float(v)
    np.testing.assert_allclose(got, walk_matrix(n, p))
    assert '0 [label="0\\n(-1)"];' in dot and dot.endswith("}\n")


def test_mdp_rows_actions_and_options(tmp_path):
    (tmp_path / "m.nm").write_text(MDP)
    out = tmp_path / "m"
    assert run(tmp_path / "m.nm", "-exportmodel", f"{out}.tra:rows") == 0
    lines = (tmp_path / "m.tra").read_text().splitlines()
    assert lines[0] == "2 3 4"
    assert sorted(lines[1:3]) == ["0 0.25:0 0.75:1 a", "0 1:1 b"]
    assert lines[3] == "1 1:1 c"
    assert run(tmp_path / "m.nm", "-exportmodel",
               f"{out}.tra:actions=false,headers=false") == 0  # fmt: skip
    plain = (tmp_path / "m.tra").read_text().splitlines()
    assert plain[0] == "2 3 4" and all(len(x.split()) == 4 for x in plain[1:])
    # unknown and unsupported options are errors, before anything is built
    assert run(tmp_path / "m.nm", "-exportmodel", f"{out}.tra:nonsense") == 1
    assert run(tmp_path / "m.nm", "-exporttrans", f"{out}.tra:matlab") == 1
    assert run(tmp_path / "m.nm", "-exportmodel", f"{out}.tra:precision=99") == 1


def test_precision_and_single_part_switches(walk):
    args = [walk / "walk.pm", "-const", "N=1,p=0.3333333333333333"]
    assert run(*args, "-exporttrans", f"{walk / 't.tra'}:precision=3",
               "-exportstaterewards", walk / "s.srew", "-exportmatlab",
               "-exporttransrewards", walk / "t.trew") == 0  # fmt: skip
    tra = (walk / "t.tra").read_text()
    assert "P(1,1)=0.333;" in tra and "P(1,2)=0.667;" in tra
    assert (walk / "s1.srew").read_text().startswith("c1 = sparse(3,1);")
    assert (walk / "t2.trew").read_text().startswith("C2 = sparse(3,3);")
    assert not (walk / "s.srew").exists()


def test_proplabels(walk):
    n = 2
    args = [walk / "walk.pm", walk / "walk.props", "-const", f"N={n},p=0.5"]
    assert run(*args, "-exportproplabels", walk / "p.lab",
               "-exportlabels", f"{walk / 'a.lab'}:proplabels") == 0  # fmt: skip
    # x>0 in states n+1..2n (PRISM's order)
    right = [f"{i}: 0" for i in range(n + 1, 2 * n + 1)]
    assert (walk / "p.lab").read_text().splitlines() == [
        "# Labels",
        '0="right"',
    ] + right
    a = (walk / "a.lab").read_text().splitlines()
    assert a[1] == '0="init" 1="deadlock" 2="right"'
    assert a[2:] == [f"{n}: 0"] + [f"{i}: 2" for i in range(n + 1, 2 * n + 1)]


@pytest.mark.parametrize(
    "prop, target",
    [("P=? [ F x=N ]", [4]), ("P=? [ x<=0 U x=1 ]", [3]),
     ("P=? [ G x<N ]", [4]),
     # the last reachability computed: the nested one (X is none)
     ("P=? [ X P>0.4 [ F x=-N ] ]", [0])],
)  # fmt: skip
def test_exporttarget(walk, prop, target):
    n = 2
    out = walk / "t.lab"
    args = [walk / "walk.pm", "-const", f"N={n},p=0.5", "--prop", prop]
    assert run(*args, "-exporttarget", out) == 0
    lines = out.read_text().splitlines()
    assert lines[:2] == ["# Labels", '0="init" 1="target"']
    rows = {n: ["0"]}
    for t in target:
        rows.setdefault(t, []).append("1")
    assert lines[2:] == [f"{s}: {' '.join(v)}" for s, v in sorted(rows.items())]


def test_exporttarget_refuses_ltl_and_skips_dtmc_rewards(walk, capsys):
    args = [walk / "walk.pm", "-const", "N=1,p=0.5", "-exporttarget", walk / "t.lab"]
    assert run(*args, "--prop", "P=? [ F G x=1 ]") == 1
    assert "LTL" in capsys.readouterr().err
    assert run(*args, "--prop", 'R{"steps"}=? [ F x=1 ]') == 0
    assert not (walk / "t.lab").exists()  # PRISM writes none for a DTMC reward
