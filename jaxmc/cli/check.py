"""`jaxmc MODEL [PROPS_FILE]`: load (or import) the model once per setting
of its constants, read the properties, build, check the chosen properties
through `jaxmc.check`, and hand each result to the printer."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from .export import Exports, filter_entry
from .output import Printer, error_text, json_default


def run(args: argparse.Namespace) -> int:
    import jaxmc

    solve_options = jaxmc.SolveOptions(
        method=args.method, epsilon=args.epsilon, relative=args.relative,
        max_iters=args.max_iters, layout=args.layout, precision=args.precision,
        criterion=args.criterion, devices=args.devices,
    )  # fmt: skip
    settings = jaxmc.semantics.expand_constants(",".join(args.const) or None)
    show = Printer(args).solve_progress()
    exports = Exports(args)
    status = 0
    runs: list[dict[str, Any]] = []
    model = None
    model_key = None
    for setting in settings:
        t0 = time.perf_counter()
        if args.import_model:
            if model is None:
                model = jaxmc.import_model(args.import_model, args.import_type)
            parse_time = time.perf_counter() - t0
        else:
            names = None if model is None else _model_constant_names(model)
            key = (
                None
                if names is None
                else {k: v for k, v in setting.items() if k in names}
            )
            if model is None or key != model_key:
                options = _build_options(args, show)
                model = jaxmc.load_model(
                    args.model, setting, model_type=args.import_type, **options
                )
                model_key = {
                    k: v
                    for k, v in setting.items()
                    if k in _model_constant_names(model)
                }
            parse_time = time.perf_counter() - t0
        # properties are read before the build, as PRISM does: a mistake in
        # them (or a constant no file declares) costs no exploration
        props, sources = _properties(args, model, setting, jaxmc)
        chosen = None if props is None else _selected(args, props, jaxmc)
        explicit = jaxmc.build(model)
        show.end_progress()
        run = {
            "constants": setting,
            "model": _summary(model, explicit, args),
            "timing": {
                "parse": parse_time,
                "build": model.build_time or 0.0,
                "build_compile": getattr(model, "build_compile_time", None) or 0.0,
            },
            "properties": [],
        }
        runs.append(run)
        show.model(run, explicit)
        exports.model(model, explicit, props, show)
        if chosen is None:
            continue
        exports.properties(model, sources.text if sources else None, props, chosen)
        for n, (index, prop) in enumerate(chosen, 1):
            show.checking(n, len(chosen), prop.text)
            entry = {"index": index + 1, "name": prop.name, "property": prop.text}
            strategy = None
            try:
                result, strategy = _check_one(
                    jaxmc, model, index, props, solve_options, args,
                    exports.all_states,
                )  # fmt: skip
                entry.update(_result_entry(result))
                if result.printed is not None:
                    entry["filter"] = filter_entry(result.printed, explicit)
            except jaxmc.JaxmcError as e:
                entry["error"] = error_text(sources.relocate(e))
                status = 1
                result = e
            run["properties"].append(entry)
            show.result(entry)
            exports.result(setting, index, result, explicit)
            if strategy is not None:
                _export_strategy(strategy, show)
    if args.json:
        out = {
            "model": args.model or args.import_model,
            "properties_file": args.props_file,
            "runs": runs,
            "status": status,
        }
        print(json.dumps(out, indent=2, default=json_default))
    else:
        if len(settings) > 1:
            show.experiment(runs)
        if args.timing:
            show.timing(runs)
    exports.finish()  # last: PRISM exports the results after the experiment
    return status


def _check_one(jaxmc, model, index, props, options, args, all_states=False):
    """`jaxmc.check` of one property, and with `-exportstrat` the text of
    its scheduler as PRISM writes it, or a note why there is none (the
    property is then checked without it)."""
    spec = getattr(args, "export_strat", None)
    kw = dict(properties=props, options=options, all_states=all_states)
    if not spec:
        return jaxmc.check(model, index, **kw), None
    from ..strategy import format_strategy, parse_spec

    file, how = parse_spec(spec)
    try:
        result = jaxmc.check(model, index, scheduler=True, **kw)
    except jaxmc.UnsupportedError as e:
        result = jaxmc.check(model, index, **kw)
        return result, (file, None, e.message)
    return result, (file, format_strategy(model, result, **how), None)


def _export_strategy(strategy, show) -> None:
    """Write (or print, to "stdout") a scheduler's text from `_check_one`."""
    file, text, why = strategy
    if text is None:
        show.note(f"\nNo strategy exported: {why}")
    elif file == "stdout":
        show.note("\nExporting strategy below:")
        print(text, end="")
    else:
        with open(file, "w") as f:
            f.write(text)
        show.note(f'\nExporting strategy to file "{file}"')


def _build_options(args, show) -> dict[str, Any]:
    """The builder's options from the command line (see `jaxmc.load_model`)."""
    options: dict[str, Any] = {"progress": show.progress}
    if not args.fixdl:
        options["deadlocks"] = "error"
    if args.max_states is not None:
        options["max_states"] = args.max_states
    if args.explorer != "auto":
        options["explorer"] = args.explorer
    if args.explorer == "device" and (args.devices or 1) > 1 and not args.coordinator:
        # the device explorer partitioned over the solves' devices (one
        # process: the partitioned build ends on one host)
        options["devices"] = args.devices
    return options


def _model_constant_names(model) -> set[str]:
    return {c.name for c in model.checked.program.constants}


def _summary(model, explicit, args) -> dict[str, Any]:
    return {
        "file": model.path,
        "type": explicit.model_type.value.upper(),
        "states": explicit.num_states,
        "initial_states": len(explicit.initial_states),
        "transitions": explicit.num_transitions,
        "choices": explicit.num_choices,
        "build_time": model.build_time or 0.0,
        "warnings": list(explicit.warnings),
    }


def _result_entry(result) -> dict[str, Any]:
    from ..errors import ModelCheckingError

    entry: dict[str, Any] = {}
    try:
        entry["value"] = _plain(result.value)
    except ModelCheckingError:
        lo, hi = result.range
        entry["range"] = [_plain(lo), _plain(hi)]
    entry.update(
        status=result.status,
        iterations=result.iterations,
        residual=result.residual,
        timing=dict(result.timing),
    )
    for key in ("method", "layout", "precision", "bound"):
        if getattr(result, key, None) is not None:
            entry[key] = getattr(result, key)
    # the fallbacks of the last solve, oldest first (printed under the result)
    entry["attempts"] = [
        {
            "method": a.method,
            "status": a.status.name.lower(),
            "iterations": a.iterations,
            "residual": a.residual,
            "layout": a.layout,
            "note": a.note,
            "text": a.describe(),
        }
        for a in result.attempts
    ]
    return entry


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def _properties(args, model, setting, jaxmc):
    from .props import PropertySources

    text = None
    if args.props_file:
        text = jaxmc.lang.read_source(args.props_file)
    sources = PropertySources(args.props_file, text, args.prop)
    if not sources:
        if args.property:
            raise jaxmc.ModelCheckingError(
                "--property given but no properties file or --prop",
            )
        jaxmc.parse_properties("", model, setting)  # reports constants no file declares
        return None, sources
    return sources.parse(jaxmc, model, setting), sources


def _selected(args, props, jaxmc):
    if not args.property:
        return list(enumerate(props))
    chosen = []
    for key in (k.strip() for arg in args.property for k in arg.split(",")):
        if key.isdigit():
            i = int(key) - 1
            if not 0 <= i < len(props):
                raise jaxmc.ModelCheckingError(
                    f"there is no property {key}: there are {len(props)}",
                    hint=f"give an index from 1 to {len(props)}, or a name",
                )
            chosen.append((i, props[i]))
            continue
        for i, p in enumerate(props):
            if p.name == key:
                chosen.append((i, p))
                break
        else:
            names = ", ".join(f'"{p.name}"' for p in props if p.name) or "none"
            raise jaxmc.ModelCheckingError(
                f'no property named "{key}"', hint=f"the named properties are: {names}"
            )
    return chosen
