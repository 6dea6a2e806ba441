"""Storm (stormpy) as an independent oracle: the value of a property at the
initial state, computed with Storm's sound methods on the full reachable
state space (the property is passed twice so that Storm does not prune the
exploration at target states)."""

from __future__ import annotations



def storm_value(model_path: str, consts: str, prop_text: str, index: int = 0):
    """Storm's value of property `index` of `prop_text` (which may hold
    const/formula/label declarations too) at the single initial state (a float
    or bool), or ("range", lo, hi) for several initial states."""
    import stormpy

    program = stormpy.parse_prism_program(model_path, prism_compatibility=True)
    prop = stormpy.parse_properties(prop_text, program)[index]
    declared = {c.name for c in program.constants if not c.defined}
    declared |= {v.name for v in prop.undefined_constants()} if hasattr(
        prop, "undefined_constants"
    ) else set()
    use = ",".join(
        p for p in (consts.split(",") if consts else [])
        if p.split("=", 1)[0].strip() in declared
    )
    if use:
        program, props = stormpy.instantiate_constants(program, use, [prop])
        prop = props[0]
    model = _build(program, prop)
    env = stormpy.environments.sound()
    value, extras = _storm_ref().evaluate(
        stormpy, model, prop, env, stormpy.Engine.SPARSE, True, program=program
    )
    if extras.get("filter") == "values" and "init_min" in extras:
        return ("range", extras["init_min"], extras["init_max"])
    return value


def _storm_ref():
    """../shared/tools/storm_ref.py, which knows how Storm reports filters."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "shared" / "tools" / "storm_ref.py"
    spec = importlib.util.spec_from_file_location("storm_ref", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def storm_values_by_valuation(model_path: str, consts: str, prop_text: str):
    """Storm's value of a (filter-free) property in every reachable state, as
    `{valuation: value}` with valuations as tuples of ints in the program's
    variable order (bools as 0/1) — to compare state by state with jaxmc,
    whose state numbering differs."""
    import stormpy

    program = stormpy.parse_prism_program(model_path, prism_compatibility=True)
    prop = stormpy.parse_properties(prop_text, program)[0]
    if consts:
        declared = {c.name for c in program.constants if not c.defined}
        use = ",".join(p for p in consts.split(",") if p.split("=", 1)[0] in declared)
        if use:
            program, props = stormpy.instantiate_constants(program, use, [prop])
            prop = props[0]
    options = stormpy.BuilderOptions([prop.get_raw_formula()])
    options.set_build_state_valuations()
    options.set_build_all_labels()
    model = stormpy.build_model(program, options=options)
    res = stormpy.model_checking(model, prop, environment=stormpy.environments.sound())
    qualitative = res.is_qualitative()
    truth = res.get_truth_values_vector() if qualitative else None
    names = [v.name for m in program.modules for v in m.integer_variables + m.boolean_variables]
    out = {}
    vals = model.state_valuations
    for s in range(model.nr_states):
        import json

        d = json.loads(str(vals.to_json(s)))
        key = tuple(int(d[n]) if not isinstance(d[n], bool) else int(d[n]) for n in sorted(d))
        out[key] = bool(truth[s]) if qualitative else res.get_value(s)
    return out, sorted(names)


def _build(program, prop):
    import stormpy

    return stormpy.build_model(program, [prop, prop])


