"""PRISM explicit files (`.tra/.sta/.lab/.srew/.trew`): import, export, round trip."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from jaxmc.errors import ExplorationError
from jaxmc.explore.explicit_import import import_explicit
from jaxmc.explore.formats import (
    export_explicit,
    format_lab,
    format_srew,
    format_sta,
    format_tra,
    format_trew,
)
from jaxmc.explore.model import ExplicitModel, RewardStructure, StateVar
from jaxmc.explore.reorder import lexicographic
from jaxmc.lang.ast import ModelType


SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "models"
IMPORT = SHARED / "prism-tests" / "functionality" / "import"
EXPORT = SHARED / "prism-tests" / "functionality" / "export"

needs_shared = pytest.mark.skipif(not IMPORT.is_dir(), reason="shared models absent")


def _assert_same(a: ExplicitModel, b: ExplicitModel) -> None:
    assert a.model_type == b.model_type
    assert a.variables == b.variables
    np.testing.assert_array_equal(a.states, b.states)
    np.testing.assert_array_equal(a.initial_states, b.initial_states)
    np.testing.assert_array_equal(a.choice_ptr, b.choice_ptr)
    np.testing.assert_array_equal(a.row_ptr, b.row_ptr)
    np.testing.assert_array_equal(a.col, b.col)
    np.testing.assert_allclose(a.val, b.val, rtol=1e-15)
    assert a.labels.keys() == b.labels.keys()
    for k in a.labels:
        np.testing.assert_array_equal(a.labels[k], b.labels[k])
    assert len(a.rewards) == len(b.rewards)
    for ra, rb in zip(a.rewards, b.rewards):
        assert ra.name == rb.name
        for x, y in ((ra.state, rb.state), (ra.transition, rb.transition)):
            if x is None or y is None:
                assert (x is None or not np.any(x)) and (y is None or not np.any(y))
            else:
                np.testing.assert_allclose(x, y, rtol=1e-15)
    assert a.choice_action == b.choice_action


@needs_shared
def test_import_dice():
    d = IMPORT
    m = import_explicit(
        d / "dice.tra", d / "dice.sta", d / "dice.lab", d / "dice.srew", d / "dice.trew"
    )
    assert m.model_type == ModelType.DTMC
    assert (m.num_states, m.num_transitions) == (13, 20)
    assert [v.name for v in m.variables] == ["s", "d"]
    assert m.variables[0] == StateVar("s", 0, 7)
    assert m.initial_states.tolist() == [0]
    assert set(m.labels) == {"init", "deadlock", "end", "six"}
    assert np.nonzero(m.labels["six"])[0].tolist() == [12]
    assert not m.labels["deadlock"].any()
    assert m.rewards[0].name == "coin_flips"
    assert m.rewards[0].state.sum() == 7
    # Rows are stochastic.
    np.testing.assert_allclose(np.add.reduceat(m.val, m.row_ptr[:-1]), 1.0)
    # Exporting gives PRISM's files back byte for byte.
    assert format_tra(m) == (d / "dice.tra").read_text()
    assert format_sta(m) == (d / "dice.sta").read_text()
    assert format_lab(m) == (d / "dice.lab").read_text()
    assert format_srew(m) == (d / "dice.srew").read_text()
    assert format_trew(m) == (d / "dice.trew").read_text()


@needs_shared
def test_import_gz_matches_plain():
    a = import_explicit(IMPORT / "dice.tra.gz", IMPORT / "dice.sta.gz")
    b = import_explicit(IMPORT / "dice.tra", IMPORT / "dice.sta")
    _assert_same(a, b)


@needs_shared
def test_mdp_robot_matches_prism_export():
    d = EXPORT / "mdp"
    srew = [d / f"robot.prism{i}.srew" for i in (1, 2, 3)]
    trew = [d / f"robot.prism{i}.trew" for i in (1, 2, 3)]
    m = import_explicit(
        d / "robot.prism.tra", d / "robot.prism.sta", d / "robot.prism.lab", srew, trew
    )
    assert m.model_type == ModelType.MDP
    assert (m.num_states, m.num_choices, m.num_transitions) == (6, 10, 16)
    assert m.choice_action[:2] == ("south", "east")
    assert [r.name for r in m.rewards] == ["time", "energy", "move"]
    assert format_tra(m) == (d / "robot.prism.tra").read_text()
    assert format_lab(m) == (d / "robot.prism.lab").read_text()
    for i in range(3):
        assert format_srew(m, i) == srew[i].read_text()
        assert format_trew(m, i) == trew[i].read_text()


@needs_shared
def test_ctmc_cluster_matches_prism_export():
    d = EXPORT / "ctmc"
    n = 3
    m = import_explicit(
        d / "cluster.sm.tra",
        d / "cluster.sm.sta",
        d / "cluster.sm.lab",
        [d / f"cluster.sm{i}.srew" for i in range(1, n + 1)],
        [d / f"cluster.sm{i}.trew" for i in range(1, n + 1)],
        model_type="ctmc",
    )
    assert m.model_type == ModelType.CTMC
    assert (m.num_states, m.num_transitions) == (276, 1120)
    assert m.variables[1].is_bool
    assert format_tra(m) == (d / "cluster.sm.tra").read_text()
    assert format_sta(m) == (d / "cluster.sm.sta").read_text()
    for i in range(n):
        assert format_srew(m, i) == (d / f"cluster.sm{i + 1}.srew").read_text()
        assert format_trew(m, i) == (d / f"cluster.sm{i + 1}.trew").read_text()


@needs_shared
@pytest.mark.parametrize("kind", ["dtmc", "mdp"])
def test_deadlocks_fixed_on_import(kind):
    m = import_explicit(IMPORT / f"{kind}-deadlocks.tra")
    fixed = (IMPORT / f"{kind}-deadlocks-fixed.tra").read_text()
    # PRISM labels DTMC transitions with their actions too; they survive
    # the round trip (the self-loops added for deadlocks have none).
    assert format_tra(m) == fixed
    lab = (IMPORT / f"{kind}-deadlocks-fixed.lab").read_text()
    assert format_lab(m) == lab
    assert m.num_states == 6
    assert np.nonzero(m.labels["deadlock"])[0].tolist() == [2, 3, 5]


def _small_mdp() -> ExplicitModel:
    return ExplicitModel(
        model_type=ModelType.MDP,
        variables=(StateVar("x", -1, 1), StateVar("b", 0, 1, True)),
        states=np.array([[0, 0], [1, 1], [-1, 0]], dtype=np.int32),
        initial_states=np.array([0]),
        choice_ptr=np.array([0, 2, 3, 4]),
        row_ptr=np.array([0, 2, 3, 4, 5]),
        col=np.array([1, 2, 0, 1, 2]),
        val=np.array([1 / 3, 2 / 3, 1.0, 1.0, 1.0]),
        labels={
            "init": np.array([True, False, False]),
            "deadlock": np.array([False, False, False]),
            "goal": np.array([False, True, True]),
        },
        rewards=(
            RewardStructure(
                "r", np.array([0.0, 2.5, 1e-7]), np.array([0, 0, 3, 0, 1.25])
            ),
            RewardStructure(None, np.array([1.0, 1.0, 1.0]), None),
        ),
        choice_action=("a", None, "b", "c"),
    )


def test_round_trip_mdp(tmp_path):
    m = _small_mdp()
    written = export_explicit(m, tmp_path / "m")
    names = sorted(p.name for p in written)
    assert names == [
        "m.lab",
        "m.sta",
        "m.tra",
        "m1.srew",
        "m1.trew",
        "m2.srew",
        "m2.trew",
    ]
    back = import_explicit(
        tmp_path / "m.tra",
        tmp_path / "m.sta",
        tmp_path / "m.lab",
        [tmp_path / "m1.srew", tmp_path / "m2.srew"],
        [tmp_path / "m1.trew", tmp_path / "m2.trew"],
    )
    # the files number states as PRISM does (lexicographically)
    _assert_same(lexicographic(m), back)
    assert "0 0 1 0.3333333333333333 a" in format_tra(m)
    assert "2:(-1,false)" in format_sta(m)


def test_round_trip_ctmc_from_streams():
    m = ExplicitModel(
        model_type=ModelType.CTMC,
        variables=(StateVar("x", 0, 2),),
        states=np.array([[0], [1], [2]], dtype=np.int32),
        initial_states=np.array([0]),
        choice_ptr=np.arange(4),
        row_ptr=np.array([0, 1, 3, 4]),
        col=np.array([1, 0, 2, 2]),
        val=np.array([0.5, 200.0, 1e-9, 1.0]),
        labels={
            "init": np.array([1, 0, 0], bool),
            "deadlock": np.array([0, 0, 1], bool),
        },
        rewards=(
            RewardStructure("t", np.array([0, 1.5, 0]), np.array([0, 0, 2.0, 0])),
        ),
    )
    back = import_explicit(
        io.StringIO(format_tra(m)),
        io.StringIO(format_sta(m)),
        io.StringIO(format_lab(m)),
        io.StringIO(format_srew(m)),
        io.StringIO(format_trew(m)),
    )
    assert back.model_type == ModelType.CTMC  # from the `# Transitions (CTMC)` comment
    _assert_same(m, back)


def test_import_without_sta_or_lab():
    m = import_explicit(io.StringIO("3 3\n0 1 1\n1 2 0.5\n1 0 0.5\n"))
    assert m.variables == (StateVar("x", 0, 2),)
    assert m.initial_states.tolist() == [0]
    assert m.labels["deadlock"].tolist() == [False, False, True]
    assert m.col.tolist() == [1, 0, 2, 2]  # columns sorted, deadlock self-loop


def test_import_errors():
    with pytest.raises(ExplorationError, match="out of range"):
        import_explicit(io.StringIO("2 1\n0 5 1\n"))
    with pytest.raises(ExplorationError, match="header"):
        import_explicit(io.StringIO("2 1 1\n0 0 1 1\n"), model_type="dtmc")
    with pytest.raises(ExplorationError, match="duplicate"):
        import_explicit(io.StringIO("2 2\n0 1 0.5\n0 1 0.5\n"))


def test_export_numbers_states_as_prism_does(tmp_path):
    # BFS finds x=3 first; PRISM's files list states in lexicographic order
    # of their valuations, with each row's entries sorted by target.
    import jaxmc

    model = jaxmc.load_model_string(
        "dtmc\nmodule m\n x : [0..3] init 3;\n b : bool init true;\n"
        " [] x>0 -> 0.25:(x'=x-1)&(b'=!b) + 0.75:(x'=0);\n"
        " [] x=0 -> true;\nendmodule\n"
        'rewards "r" x>1 : x; endrewards\n'
    )
    explicit = jaxmc.build(model)
    assert explicit.state(0) == {"x": 3, "b": True}
    base = tmp_path / "m"
    export_explicit(explicit, base)
    sta = (tmp_path / "m.sta").read_text().splitlines()
    rows = [ln.split(":", 1)[1] for ln in sta[2:]]
    assert rows == sorted(
        rows,
        key=lambda r: tuple(
            {"false": 0, "true": 1}.get(v, None) if v in ("false", "true") else int(v)
            for v in r.strip("()").split(",")
        ),
    )
    tra = (tmp_path / "m.tra").read_text().splitlines()[2:]
    pairs = [tuple(map(int, ln.split()[:2])) for ln in tra]
    assert pairs == sorted(pairs)
    back = import_explicit(
        tmp_path / "m.tra", tmp_path / "m.sta", tmp_path / "m.lab", tmp_path / "m.srew"
    )
    init = int(back.initial_states[0])
    assert back.state(init) == {"x": 3, "b": True}
    for s in range(back.num_states):
        j = next(
            i for i in range(explicit.num_states) if explicit.state(i) == back.state(s)
        )
        assert back.rewards[0].state[s] == explicit.rewards[0].state[j]
    # the same chain: values at the initial state agree
    imported = jaxmc.Model(checked=model.checked, _explicit=back)
    prop = 'R{"r"}=? [ C<=3 ]'
    assert (
        abs(jaxmc.check(imported, prop).value - jaxmc.check(model, prop).value) < 1e-12
    )


def test_export_precision_is_prisms():
    from jaxmc.explore.formats import _fmt

    assert _fmt(0.1 + 2.2) == "2.3"  # 16 significant digits, as PRISM
    assert _fmt(1e-13) == "1e-13"
    assert _fmt(0.9999999999999) == "0.9999999999999"
    assert _fmt(3.0) == "3"
