"""Storm's explicit format (DRN): the reader's checks and located errors, the
writer's text, and round trips (build → export → import → the same values for
properties of DTMCs, CTMCs and MDPs with state and transition rewards).
Files written and read by Storm itself: tests/explore/test_drn_storm.py."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import numpy as np
import pytest

import jaxmc
from jaxmc.cli import main
from jaxmc.errors import ExplorationError, UnsupportedError
from jaxmc.explore.drn import format_drn, import_drn


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "models"

#: A DTMC with booleans, a transition reward on a merged command, an action.
DTMC = """dtmc
module m
  x : [0..3] init 0;
  b : bool init false;
  [a] x=0 -> 1/3 : (x'=1) + 2/3 : (x'=2) & (b'=true);
  [] x>0 & x<3 -> 1/7 : (x'=3) + 6/7 : (x'=x);
endmodule
label "done" = x=3;
rewards "r"
  x=1 : 0.125;
  [a] true : 0.5;
  [] x=2 : 2;
endrewards
rewards "s"
  b : 1;
endrewards
"""

ROUND_TRIPS = [
    (
        EXAMPLES / "die.pm",
        [
            'P=? [ F "done" & d=6 ]',
            'R{"coin_flips"}=? [ F "done" ]',
            "P=? [ F<=5 s=7 ]",
            'R{"coin_flips"}=? [ C<=4 ]',
            "filter(sum, P=? [ X s>2 ], true)",
        ],
    ),
    (
        EXAMPLES / "queue.sm",
        [
            'P=? [ F<=1.5 "full" ]',
            'S=? [ "empty" ]',
            'R{"customers"}=? [ S ]',
            'R{"served"}=? [ C<=2 ]',
            'R{"customers"}=? [ I=1 ]',
            'R{"served"}=? [ F q=4 ]',
        ],
    ),
    (
        EXAMPLES / "robot.nm",
        [
            'Pmax=? [ F "goal" ]',
            'Pmin=? [ F "goal" ]',
            'Rmin=? [ F "goal" ]',
            "Rmax=? [ C<=3 ]",
            "Pmax=? [ F<=2 s=2 ]",
        ],
    ),
    (None, ['R{"r"}=? [ F "done" ]', 'R{"s"}=? [ C<=3 ]', "P=? [ F b & x=3 ]"]),
]


def _model(path):
    return jaxmc.load_model_string(DTMC) if path is None else jaxmc.load_model(path)


@pytest.mark.parametrize(
    "path,props", ROUND_TRIPS, ids=lambda x: getattr(x, "name", None) or "dtmc"
)
def test_round_trip_same_values(tmp_path, path, props):
    model = _model(path)
    out = jaxmc.export_model(model, str(tmp_path / "m.drn"))
    back = jaxmc.load_drn(out[0])
    a, b = jaxmc.build(model), jaxmc.build(back)
    assert (b.num_states, b.num_choices, b.num_transitions) == (
        a.num_states,
        a.num_choices,
        a.num_transitions,
    )
    assert [v.name for v in b.variables] == [v.name for v in a.variables]
    np.testing.assert_array_equal(b.states, a.states)
    for name in a.labels:
        np.testing.assert_array_equal(b.labels[name], a.labels[name])
    if a.choice_action is not None:
        assert b.choice_action == a.choice_action
    for prop in props:
        va = jaxmc.check(model, prop, criterion="sound", epsilon=1e-10).value
        vb = jaxmc.check(back, prop, criterion="sound", epsilon=1e-10).value
        assert vb == pytest.approx(va, rel=1e-9, abs=1e-12), prop


@pytest.mark.parametrize("path", [p for p, _ in ROUND_TRIPS], ids=str)
def test_written_text_is_a_fixed_point(path):
    text = format_drn(jaxmc.build(_model(path)))
    assert format_drn(import_drn(io.StringIO(text))) == text


def test_written_text():
    text = format_drn(jaxmc.build(jaxmc.load_model_string(DTMC)))
    head = text.split("@model\n")[0]
    assert "@type: DTMC\n@value_type: double\n@parameters\n\n" in head
    assert "@reward_models\nr s\n@nr_states\n5\n@nr_choices\n5\n" in head
    lines = text.split("@model\n")[1].splitlines()
    # state 0: no rewards, initial; its action `a` earns 0.5; valuation comment
    assert lines[:4] == [
        "state 0 [0, 0] init",
        "//[x=0\t& !b]",
        "\taction a [0.5, 0]",
        "\t\t1 : 0.3333333333333333",
    ]
    # x=2 (b true): state reward of "s", transition reward 2 on both entries
    i = lines.index("//[x=2\t& b]")
    assert lines[i - 1] == "state 2 [0, 1]"
    assert lines[i + 1] == "\taction __NOLABEL__ [2, 0]"


CTMC_TEXT = """// a two-state CTMC
@type: CTMC
@value_type: double
@parameters

@reward_models
time jumps
@nr_states
3
@nr_choices
3
@model
state 0 !3 [1, 0] init "two words"
//[on	& n=0]
\taction go [0, 1]
\t\t1 : 1
\t\t2 : 2
state 1 !4 [1, 0]
//[	& n=1]
\taction __NOLABEL__ [0, 1]
\t\t0 : 4
state 2 !0 [0, 0] stop
//[!on	& n=2]
"""


def test_reads_ctmc_labels_valuations_deadlocks():
    m = import_drn(io.StringIO(CTMC_TEXT))
    assert m.model_type == jaxmc.lang.ast.ModelType.CTMC
    # Storm writes a true boolean without its name: named by its position
    assert [(v.name, v.is_bool) for v in m.variables] == [("on", True), ("n", False)]
    np.testing.assert_array_equal(m.states, [[1, 0], [1, 1], [0, 2]])
    assert m.labels["two words"].tolist() == [True, False, False]
    assert m.labels["deadlock"].tolist() == [False, False, True]  # no choices
    assert m.col[m.row_ptr[2] : m.row_ptr[3]].tolist() == [2]  # a self-loop
    assert m.rewards[0].name == "time" and m.rewards[0].transition is None
    # an action reward is given to every entry of its choice
    np.testing.assert_array_equal(m.rewards[1].transition[:3], [1, 1, 1])
    assert m.entry_action is not None


def test_ctmc_values_against_closed_form(tmp_path):
    """Expected time to reach `stop` from state 0: t0 = 1/3 + (1/3)(1/4 + t0),
    i.e. t0 = (1/3 + 1/12) / (2/3); expected jumps: j0 = 1 + (1/3)(1 + j0)."""
    path = tmp_path / "m.drn"
    path.write_text(CTMC_TEXT)
    model = jaxmc.load_drn(path)
    t0 = (1 / 3 + 1 / 12) / (2 / 3)
    j0 = (1 + 1 / 3) / (2 / 3)
    r = jaxmc.check(model, 'R{"time"}=? [ F "stop" ]', epsilon=1e-12)
    assert r.value == pytest.approx(t0, rel=1e-9)
    r = jaxmc.check(model, 'R{"jumps"}=? [ F "stop" ]', epsilon=1e-12)
    assert r.value == pytest.approx(j0, rel=1e-9)
    assert jaxmc.check(model, "P=? [ F n=2 & !on ]").value == pytest.approx(1.0)


MDP_TEXT = """@type: MDP
@parameters

@placeholders
$h : 1/2
@reward_models
@nr_states
2
@nr_choices
3
@model
state 0 init
\taction 0
\t\t0 : $h
\t\t1 : 0.5
\taction 1
\t\t1 : 1
state 1 done
\taction 0
\t\t1 : 1
"""


def test_reads_mdp_unlabelled_choices_rationals_placeholders():
    m = import_drn(io.StringIO(MDP_TEXT))
    assert m.choice_action == (None, None, None)  # Storm's `action 0, 1, ...`
    assert m.val.tolist() == [0.5, 0.5, 1.0, 1.0]
    assert m.rewards == ()
    assert m.variables[0].name == "x"  # no valuations: the state index


@pytest.fixture
def bad(tmp_path):
    def write(text: str) -> str:
        path = tmp_path / "bad.drn"
        path.write_text(text)
        return str(path)

    return write


def _replace(old: str, new: str) -> str:
    assert old in CTMC_TEXT
    return CTMC_TEXT.replace(old, new, 1)


@pytest.mark.parametrize(
    "text,line,words",
    [
        (_replace("@type: CTMC", "@type: CMTC"), 2, "unknown model type"),
        (_replace("@nr_states\n3", "@nr_states\nthree"), 9, "not a count"),
        (_replace("time jumps\n", "time jumps\n@bogus\n"), 8, "unexpected line"),
        (_replace("\t\t1 : 1\n", "\t\t7 : 1\n"), 16, "target state 7 out of range"),
        (_replace("\t\t1 : 1\n", "\t\t1 : one\n"), 16, "`one` is not a number"),
        (_replace("\t\t1 : 1\n", "\t\t1 : -1\n"), 16, "negative rate"),
        (_replace("state 1 !4", "state 2 !4"), 18, "expected state 1"),
        (_replace("state 1 !4", "state 1 !5"), 18, "exit rate of state 1"),
        (_replace("state 1 !4", "state 1"), 18, "exit rate `!rate` missing"),
        (_replace("\t\t0 : 4\n", "\t\t0 : 4\n\t\t0 : 1\n"), 22, "second transition"),
        (_replace("\taction go [0, 1]", "\taction go [0, 1"), 15, "`]` missing"),
        (_replace("\t\t2 : 2\n", "\t\t2 : 2\n\taction again\n"), 18, "second choice"),
        (_replace("\t\t1 : 1\n", "\t\tgarbage\n"), 16, "expected `state`"),
        (_replace("\t\t0 : 4\n", "\t\t0 4\n"), 21, "expected `target : value`"),
        (_replace("\t\t0 : 4\n", "\t\t0.5 : 4\n"), 21, "`0.5` is not a state"),
    ],
)
def test_located_errors(bad, text, line, words):
    path = bad(text)
    with pytest.raises(ExplorationError) as e:
        import_drn(path)
    msg = str(e.value)
    assert f"{path}:{line}:" in msg and words in msg, msg
    assert f" {line} | " in msg  # the offending line is quoted


def test_probability_sums_and_counts_checked(bad):
    path = bad(MDP_TEXT.replace("\t\t1 : 0.5", "\t\t1 : 0.25"))
    with pytest.raises(ExplorationError, match=r"bad.drn:13:.*sum to 0.75"):
        import_drn(path)
    with pytest.raises(ExplorationError, match="2 choices, but @nr_choices is 3"):
        import_drn(bad(MDP_TEXT.replace("\taction 1\n\t\t1 : 1\n", "")))
    with pytest.raises(ExplorationError, match="2 states, but @nr_states is 3"):
        import_drn(bad(MDP_TEXT.replace("@nr_states\n2", "@nr_states\n3")))
    with pytest.raises(ExplorationError, match="no initial state"):
        import_drn(bad(MDP_TEXT.replace("state 0 init", "state 0")))
    with pytest.raises(ExplorationError, match="no @model"):
        import_drn(bad("@type: DTMC\n@nr_states\n2\n"))
    with pytest.raises(ExplorationError, match="without transitions"):
        import_drn(bad(MDP_TEXT.replace("\taction 1\n\t\t1 : 1\n", "\taction 1\n")))


@pytest.mark.parametrize(
    "old,new,words",
    [
        ("@parameters\n\n", "@parameters\np q\n", "parametric DRN"),
        ("@parameters\n", "@value_type: parametric\n@parameters\n", "parametric"),
        ("@parameters\n", "@value_type: double-interval\n@parameters\n", "interval"),
        ("@type: MDP", "@type: POMDP", "POMDP models are not supported"),
    ],
)
def test_refused_with_a_hint(bad, old, new, words):
    path = bad(MDP_TEXT.replace(old, new, 1))
    with pytest.raises(UnsupportedError, match=words) as e:
        import_drn(path)
    assert e.value.hint


def test_import_model_type_switch_must_agree(bad):
    path = bad(MDP_TEXT)
    with pytest.raises(jaxmc.SemanticError, match="holds a MDP, not a DTMC"):
        jaxmc.import_model(path, "dtmc")


def test_detected_by_content(tmp_path):
    """A DRN file named otherwise (Storm's `--explicit-drn FILE`) is read as
    DRN: its header starts with `@`, which PRISM's explicit files never do."""
    p = tmp_path / "model.txt"
    p.write_text(MDP_TEXT)
    assert jaxmc.build(jaxmc.import_model(str(p))).num_choices == 3


def test_cli_import_export(tmp_path, capsys):
    out = tmp_path / "robot.drn"
    code = main([str(EXAMPLES / "robot.nm"), "-exportmodel", str(out)])
    assert code == 0 and out.exists()
    capsys.readouterr()
    code = main(["-importmodel", str(out), "--prop", 'Rmin=? [ F "goal" ]'])
    text = capsys.readouterr().out
    assert code == 0
    value = float(text.split("Result: ")[1].split()[0])
    assert value == pytest.approx(20 / 9, rel=1e-5)
    code = main(["--explicit-drn", str(out), "--prop", 'Pmin=? [ F "goal" ]'])
    assert code == 0 and "Result: 0.8" in capsys.readouterr().out


def test_cli_bad_file_is_a_located_error(tmp_path, capsys):
    bad = tmp_path / "bad.drn"
    bad.write_text(MDP_TEXT.replace("\t\t1 : 1\n", "\t\t1 : x\n", 1))
    code = main(["-importmodel", str(bad), "--prop", "P=? [ F x=1 ]"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"{bad}:17:" in err and "Traceback" not in err


def test_export_refuses_what_drn_cannot_say():
    model = jaxmc.build(jaxmc.load_model_string(DTMC))
    labels = {**model.labels, 'a"b': model.labels["done"]}
    quote = dataclasses.replace(model, labels=labels)
    with pytest.raises(UnsupportedError, match="quotation mark"):
        format_drn(quote)
    r = dataclasses.replace(model.rewards[0], name="two words")
    with pytest.raises(UnsupportedError, match="whitespace"):
        format_drn(dataclasses.replace(model, rewards=(r,)))
