"""Storm (stormpy) as an independent oracle: the value of a property at the
initial state, computed with Storm's sound methods on the full reachable
state space (the property is passed twice so that Storm does not prune the
exploration at target states: with a single formula, stormpy's builder makes
the formula's target states absorbing).

Every function takes the model as a path, plus optionally `program_text`:
the same model reprinted by `storm_input.program_text`, for files Storm's
parser refuses (Storm then reads that text instead of the file).
"""

from __future__ import annotations

import json
import os
import tempfile


def load_program(model_path: str, program_text: str | None = None):
    """Storm's parse of the model file, or of `program_text` when given."""
    import stormpy

    if program_text is None:
        return stormpy.parse_prism_program(model_path, prism_compatibility=True)
    fd, tmp = tempfile.mkstemp(suffix=os.path.splitext(model_path)[1] or ".prism")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(program_text)
        return stormpy.parse_prism_program(tmp, prism_compatibility=True)
    finally:
        os.unlink(tmp)


def _program_and_property(model_path, consts, prop_text, program_text):
    """The program with its undefined constants set from `consts` (a
    `-const` string; names the model does not declare are ignored, as PRISM
    ignores them) and the (single) property parsed against it."""
    import stormpy

    program = load_program(model_path, program_text)
    prop = stormpy.parse_properties(prop_text, program)[0]
    declared = {c.name for c in program.constants if not c.defined}
    use = ",".join(
        p
        for p in (consts.split(",") if consts else [])
        if p.split("=", 1)[0].strip() in declared
    )
    if use:
        program, props = stormpy.instantiate_constants(program, use, [prop])
        prop = props[0]
    return program, prop


def storm_value(
    model_path: str, consts: str, prop_text: str, program_text: str | None = None
):
    """Storm's value of the property `prop_text` at the single initial state
    (a float or bool); ("range", lo, hi) for a numerical property with several
    initial states; for a Boolean one, whether it holds in all of them (as
    PRISM reports it)."""
    import stormpy

    program, prop = _program_and_property(model_path, consts, prop_text, program_text)
    model = stormpy.build_model(program, [prop, prop])
    env = stormpy.environments.sound()
    value, extras = _storm_ref().evaluate(
        stormpy, model, prop, env, stormpy.Engine.SPARSE, True, program=program
    )
    if extras.get("filter") == "values" and "init_min" in extras:
        return ("range", extras["init_min"], extras["init_max"])
    if "init_all" in extras:
        return extras["init_all"]
    return value


def _storm_ref():
    """../shared/tools/storm_ref.py, which knows how Storm reports filters."""
    import importlib.util
    import pathlib

    path = (
        pathlib.Path(__file__).resolve().parents[2]
        / "shared"
        / "tools"
        / "storm_ref.py"
    )
    if not path.exists():  # (stormpy without the shared tools: skip cleanly)
        import pytest

        pytest.skip(f"{path} not found")
    spec = importlib.util.spec_from_file_location("storm_ref", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def storm_values_by_valuation(
    model_path: str,
    consts: str,
    prop_text: str,
    program_text: str | None = None,
    environment=None,
):
    """Storm's value of a (filter-free) property in every reachable state, as
    `{valuation: value}` with valuations as tuples of ints (bools as 0/1) in
    the order of the sorted variable names (the second result) — to compare
    state by state with jaxmc, whose state numbering differs. `environment`:
    Storm's solver environment (default: `stormpy.environments.sound()`)."""
    import stormpy

    program, prop = _program_and_property(model_path, consts, prop_text, program_text)
    formula = prop.get_raw_formula()
    options = stormpy.BuilderOptions([formula, formula])
    options.set_build_state_valuations()
    options.set_build_all_labels()
    model = stormpy.build_model(program, options=options)
    env = environment or stormpy.environments.sound()
    res = stormpy.model_checking(model, prop, environment=env)
    qualitative = res.is_qualitative()
    truth = res.get_truth_values_vector() if qualitative else None
    names = sorted(
        v.name
        for group in (
            program.global_integer_variables,
            program.global_boolean_variables,
            *(m.integer_variables for m in program.modules),
            *(m.boolean_variables for m in program.modules),
        )
        for v in group
    )
    out = {}
    vals = model.state_valuations
    for s in range(model.nr_states):
        d = json.loads(str(vals.to_json(s)))
        key = tuple(int(d[n]) for n in names)
        out[key] = bool(truth[s]) if qualitative else res.get_value(s)
    return out, names
