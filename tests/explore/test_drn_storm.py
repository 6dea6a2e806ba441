"""DRN files and UMB archives exchanged with Storm (stormpy): files Storm
writes load in jaxmc with the values Storm computes on its own model, and
files jaxmc writes load in Storm (`stormpy.build_model_from_drn`,
`build_model_from_umb`) with the values jaxmc computes.
DTMCs, CTMCs and MDPs with state and action rewards; Storm runs its sound
methods. (Not `I=t` on CTMCs: Storm 2.0's value differs from the matrix
exponential's, 1.214 against 0.8841 for queue.sm's `R{"customers"}=? [ I=1 ]`,
on the PRISM model too.) Properties use only the files' labels and reward
models (Storm's DRN models have no variables)."""

from __future__ import annotations

from pathlib import Path

import pytest

import jaxmc


stormpy = pytest.importorskip("stormpy")
import stormpy.io as storm_io  # noqa: E402


pytestmark = pytest.mark.storm

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "models"
SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "models"
PRISM_EXAMPLES = SHARED / "prism-examples"
RTOL = 1e-6

CASES = [
    (
        EXAMPLES / "die.pm",
        "",
        ['P=? [ F "done" ]', 'R{"coin_flips"}=? [ F "done" ]', 'P=? [ F<=3 "done" ]'],
    ),
    (
        EXAMPLES / "queue.sm",
        "",
        [
            'P=? [ F<=1.5 "full" ]',
            'S=? [ "empty" ]',
            'R{"customers"}=? [ S ]',
            'R{"served"}=? [ C<=2 ]',
            'R{"served"}=? [ F "full" ]',
        ],
    ),
    (
        EXAMPLES / "robot.nm",
        "",
        [
            'Pmax=? [ F "goal" ]',
            'Pmin=? [ F "goal" ]',
            'Rmin=? [ F "goal" ]',
            'Rmax=? [ F "goal" | "crashed" ]',
            "Rmax=? [ C<=3 ]",
        ],
    ),
    (
        PRISM_EXAMPLES / "mdps" / "consensus" / "coin2.nm",
        "K=2",
        [
            'Pmin=? [ F "finished" & "all_coins_equal_0" ]',
            'Pmax=? [ F "finished" & !"agree" ]',
            'Rmin=? [ F "finished" ]',
            'Rmax=? [ F "finished" ]',
        ],
    ),
    (
        PRISM_EXAMPLES / "ctmcs" / "polling" / "poll2.sm",
        "",
        [
            'R{"waiting"}=? [ C<=2 ]',
            'R{"served"}=? [ C<=2 ]',
            'R{"served"}=? [ S ]',
        ],
    ),
]


def _id(case):
    return case[0].name if isinstance(case, tuple) else None


def _skip_absent(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} not found")


def _storm_model(path: Path, consts: str):
    program = storm_io.parse_prism_program(str(path), prism_compatibility=True)
    if consts:
        program = storm_io.instantiate_constants(program, consts)
        program = program[0] if isinstance(program, tuple) else program
    options = stormpy.BuilderOptions(build_full=True)
    options.set_build_state_valuations()
    options.set_build_choice_labels()
    options.set_build_all_labels()
    options.set_build_all_reward_models()
    return stormpy.build_model(program, options=options)


def _storm_value(model, prop: str) -> float:
    formula = stormpy.parse_properties(prop)[0]
    env = stormpy.environments.sound()
    result = stormpy.model_checking(model, formula, environment=env)
    return result.get_value(model.initial_states[0])


def _jaxmc_value(model, prop: str) -> float:
    return jaxmc.check(model, prop, epsilon=1e-9).value


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_storm_written_drn_loads_with_storms_values(tmp_path, case):
    path, consts, props = case
    _skip_absent(path)
    storm = _storm_model(path, consts)
    drn = tmp_path / "storm.drn"
    storm_io.export_to_drn(storm, str(drn))
    model = jaxmc.load_drn(drn)
    explicit = jaxmc.build(model)
    assert explicit.num_states == storm.nr_states
    assert explicit.num_transitions == storm.nr_transitions
    assert set(storm.labeling.get_labels()) <= set(explicit.labels)
    for prop in props:
        want = _storm_value(storm, prop)
        assert _jaxmc_value(model, prop) == pytest.approx(want, rel=RTOL), prop


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_jaxmc_written_drn_loads_in_storm_with_jaxmcs_values(tmp_path, case):
    path, consts, props = case
    _skip_absent(path)
    model = jaxmc.load_model(path, consts or None)
    drn = tmp_path / "jaxmc.drn"
    jaxmc.export_drn(model, drn)
    options = storm_io.DirectEncodingParserOptions()
    options.build_choice_labeling = True
    storm = stormpy.build_model_from_drn(str(drn), options=options)
    explicit = jaxmc.build(model)
    assert storm.nr_states == explicit.num_states
    assert storm.nr_transitions == explicit.num_transitions
    assert set(storm.reward_models) == {r.name for r in explicit.rewards}
    for prop in props:
        want = _jaxmc_value(model, prop)
        assert _storm_value(storm, prop) == pytest.approx(want, rel=RTOL), prop


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_storm_written_umb_loads_with_storms_values(tmp_path, case):
    path, consts, props = case
    _skip_absent(path)
    storm = _storm_model(path, consts)
    umb = tmp_path / "storm.umb"
    storm_io.export_to_umb(storm, str(umb))
    model = jaxmc.import_model(str(umb))
    explicit = jaxmc.build(model)
    assert explicit.num_states == storm.nr_states
    assert set(storm.labeling.get_labels()) <= set(explicit.labels)
    for prop in props:
        want = _storm_value(storm, prop)
        assert _jaxmc_value(model, prop) == pytest.approx(want, rel=RTOL), prop


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_jaxmc_written_umb_loads_in_storm_with_jaxmcs_values(tmp_path, case):
    path, consts, props = case
    _skip_absent(path)
    model = jaxmc.load_model(path, consts or None)
    umb = tmp_path / "jaxmc.umb"
    jaxmc.export_model(model, str(umb))
    storm = stormpy.build_model_from_umb(str(umb))
    explicit = jaxmc.build(model)
    assert storm.nr_states == explicit.num_states
    assert storm.nr_transitions == explicit.num_transitions
    assert set(storm.reward_models) == {r.name for r in explicit.rewards}
    for prop in props:
        want = _jaxmc_value(model, prop)
        assert _storm_value(storm, prop) == pytest.approx(want, rel=RTOL), prop
