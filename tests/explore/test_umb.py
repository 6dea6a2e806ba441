"""UMB archives (the unified Markov binary format, format-version 1): the
specification's own example read as its PRISM model says, round trips
(build → export → import → the same values) on DTMCs, CTMCs and MDPs with
rewards, and the checks of what is read. Archives exchanged with Storm:
tests/explore/test_drn_storm.py."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

import jaxmc
from jaxmc.errors import ExplorationError, UnsupportedError
from jaxmc.explore.umb import export_umb, import_umb


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "models"

#: The example of the UMB specification (pmc-tools/umb, example/README.md):
#: mdp; x : [0..2]; b : bool;
#: [a] x=0 -> 0.5:(x'=1) + 0.5:(x'=2)&(b'=false);
#: [b] x=0 -> 0.2:(x'=2) + 0.8:(x'=2)&(b'=true);
#: [a] x=1 -> 0.9:(x'=0) + 0.1:(x'=1);  [a] x=2 -> (x'=2);
#: label "g" = x=2 & b;  rewards "r" [b] true : 1; endrewards
SPEC_INDEX = {
    "format-version": 1,
    "format-revision": 0,
    "transition-system": {
        "time": "discrete",
        "#players": 1,
        "#states": 4,
        "#initial-states": 1,
        "#choices": 5,
        "#choice-actions": 2,
        "#branches": 8,
        "#branch-actions": 0,
        "#observations": 0,
        "branch-probability-type": {"type": "double", "size": 64},
    },
    "annotations": {
        "aps": {
            "g": {"alias": "g", "applies-to": ["states"], "type": {"type": "bool"}}
        },
        "rewards": {
            "r": {"alias": "r", "applies-to": ["choices"], "type": {"type": "double"}}
        },
    },
    "valuations": {
        "states": {
            "unique": True,
            "classes": [
                {
                    "variables": [
                        {"name": "x", "type": {"type": "uint", "size": 2}},
                        {"name": "b", "type": {"type": "bool", "size": 1}},
                        {"padding": 5},
                    ]
                }
            ],
        }
    },
}


def _u64(*xs):
    return np.array(xs, "<u8").tobytes()


def _f64(*xs):
    return np.array(xs, "<f8").tobytes()


SPEC_FILES = {
    "state-to-choices.bin": _u64(0, 2, 3, 4, 5),
    "choice-to-branches.bin": _u64(0, 2, 4, 6, 7, 8),
    "branch-to-probability.bin": _f64(0.5, 0.5, 0.2, 0.8, 0.9, 0.1, 1.0, 1.0),
    "branch-to-target.bin": _u64(1, 2, 2, 3, 0, 1, 2, 3),
    "state-is-initial.bin": _u64(0b0001),
    "actions/choices/string-mapping.bin": _u64(0, 1, 2),
    "actions/choices/strings.bin": b"ab",
    "actions/choices/values.bin": np.array([0, 1, 0, 0, 0], "<u4").tobytes(),
    "annotations/aps/g/states/values.bin": _u64(0b1000),
    "annotations/rewards/r/choices/values.bin": _f64(0, 1, 0, 0, 0),
    # x in bits 0-1, b in bit 2: (x=0,b=0) (1,0) (2,0) (2,1)
    "valuations/states/valuations.bin": bytes([0b000, 0b001, 0b010, 0b110]),
}


def _archive(path, index, files, mode="w:gz"):
    with tarfile.open(path, mode) as tar:
        for name, data in [("index.json", json.dumps(index).encode()), *files.items()]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("mode", ["w", "w:gz", "w:xz"])
def test_reads_the_specifications_example(tmp_path, mode):
    m = import_umb(_archive(tmp_path / "mdp.umb", SPEC_INDEX, SPEC_FILES, mode))
    assert m.model_type == jaxmc.lang.ast.ModelType.MDP
    assert [(v.name, v.is_bool) for v in m.variables] == [("x", False), ("b", True)]
    np.testing.assert_array_equal(m.states, [[0, 0], [1, 0], [2, 0], [2, 1]])
    assert m.choice_action == ("a", "b", "a", "a", "a")
    # choice b of state 0: two branches to state 2 and 3 (not merged)
    assert m.col[m.row_ptr[1] : m.row_ptr[2]].tolist() == [2, 3]
    assert m.labels["g"].tolist() == [False, False, False, True]
    assert m.initial_states.tolist() == [0]
    program = """mdp
module M
  x : [0..2]; b : bool;
  [a] x=0 -> 0.5:(x'=1) + 0.5:(x'=2)&(b'=false);
  [b] x=0 -> 0.2:(x'=2) + 0.8:(x'=2)&(b'=true);
  [a] x=1 -> 0.9:(x'=0) + 0.1:(x'=1);
  [a] x=2 -> (x'=2);
endmodule
label "g" = x=2 & b;
rewards "r" [b] true : 1; endrewards
"""
    built = jaxmc.load_model_string(program)
    imported = jaxmc.Model(checked=built.checked, _explicit=m)
    for prop in ['Pmax=? [ F "g" ]', "Pmin=? [ F x=2 & !b ]", "Rmax=? [ C<=4 ]"]:
        want = jaxmc.check(built, prop).value
        assert jaxmc.check(imported, prop).value == pytest.approx(want, rel=1e-9)


DTMC = """dtmc
module m
  x : [-1..3] init 0;
  b : bool init false;
  [a] x=0 -> 1/3 : (x'=1) + 2/3 : (x'=-1) & (b'=true);
  [] x>0 & x<3 -> 1/7 : (x'=3) + 6/7 : (x'=x);
  [] x=-1 -> (x'=3);
endmodule
label "done" = x=3;
rewards "r"
  x=1 : 0.125;
  [a] true : 0.5;
  [] x=2 : 2;
endrewards
"""

ROUND_TRIPS = [
    (None, ['R{"r"}=? [ F "done" ]', 'R{"r"}=? [ C<=3 ]', "P=? [ F b & x=3 ]"]),
    (EXAMPLES / "queue.sm", ['R{"served"}=? [ C<=2 ]', 'R{"customers"}=? [ S ]']),
    (EXAMPLES / "robot.nm", ['Rmin=? [ F "goal" ]', "Pmax=? [ F<=2 s=2 ]"]),
]


@pytest.mark.parametrize(
    "path,props", ROUND_TRIPS, ids=lambda x: getattr(x, "name", None) or "dtmc"
)
def test_round_trip_same_values(tmp_path, path, props):
    model = jaxmc.load_model_string(DTMC) if path is None else jaxmc.load_model(path)
    jaxmc.export_model(model, str(tmp_path / "m.umb"))
    back = jaxmc.import_model(str(tmp_path / "m.umb"))
    a, b = jaxmc.build(model), jaxmc.build(back)
    np.testing.assert_array_equal(b.states, a.states)  # negative ints via offsets
    np.testing.assert_array_equal(b.col, a.col)
    np.testing.assert_allclose(b.val, a.val, rtol=1e-15)
    assert set(b.labels) == set(a.labels)
    for prop in props:
        va = jaxmc.check(model, prop, epsilon=1e-10).value
        assert jaxmc.check(back, prop, epsilon=1e-10).value == pytest.approx(
            va, rel=1e-9
        ), prop


def test_written_index(tmp_path):
    path = export_umb(
        jaxmc.build(jaxmc.load_model(EXAMPLES / "robot.nm")), tmp_path / "r.umb"
    )
    with tarfile.open(path) as tar:
        assert tar.getnames()[0] == "index.json"
        index = json.loads(tar.extractfile("index.json").read())
        bits = tar.extractfile("state-is-initial.bin").read()
    assert (index["format-version"], index["format-revision"]) == (1, 0)
    ts = index["transition-system"]
    assert (ts["time"], ts["#players"], ts["#states"], ts["#choices"]) == (
        "discrete", 1, 4, 5)  # fmt: skip
    assert bits == _u64(1)
    assert index["annotations"]["rewards"]["steps"]["applies-to"] == ["choices"]


@pytest.mark.parametrize(
    "change,error,words",
    [
        (({"format-version": 2}, {}), UnsupportedError, "format-version 2"),
        (
            (
                {
                    "transition-system": {
                        **SPEC_INDEX["transition-system"],
                        "#observations": 2,
                    }
                },
                {},
            ),
            UnsupportedError,
            "POMDP",
        ),  # fmt: skip
        (
            ({}, {"branch-to-target.bin": _u64(1, 2, 2, 3, 0, 1, 2)}),
            ExplorationError,
            r"branch-to-target.bin\): 56 bytes, expected 64",
        ),  # fmt: skip
        (
            ({}, {"branch-to-target.bin": _u64(1, 2, 2, 3, 0, 1, 2, 9)}),
            ExplorationError,
            "target out of range",
        ),  # fmt: skip
        (
            (
                {},
                {"branch-to-probability.bin": _f64(0.5, 0.4, 0.2, 0.8, 0.9, 0.1, 1, 1)},
            ),
            ExplorationError,
            "choice 0 .state 0. sum to 0.9",
        ),  # fmt: skip
        (({}, {"state-is-initial.bin": _u64(0)}), ExplorationError, "no initial"),
        (
            ({}, {"choice-to-branches.bin": _u64(0, 2, 4, 3, 7, 8)}),
            ExplorationError,
            "not offsets",
        ),  # fmt: skip
    ],
)
def test_checks(tmp_path, change, error, words):
    index = {**SPEC_INDEX, **change[0]}
    files = {**SPEC_FILES, **change[1]}
    with pytest.raises(error, match=words):
        import_umb(_archive(tmp_path / "bad.umb", index, files))


def test_not_an_archive(tmp_path):
    p = tmp_path / "bad.umb"
    p.write_text("hello")
    with pytest.raises(ExplorationError, match="not a UMB archive"):
        import_umb(p)
