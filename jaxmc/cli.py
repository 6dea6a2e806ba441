"""The `jaxmc` command line: argparse → `jaxmc.api`, with PRISM's switches.

No logic lives here beyond reading arguments, printing results and turning
`JaxmcError`s into a located message and exit code 1 (usage errors exit 2).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any


METHODS = {
    "jacobi": "jacobi",
    "power": "power",
    "gaussseidel": "gauss_seidel",
    "bicgstab": "bicgstab",
    "valiter": "value_iteration",
    "ii": "interval_iteration",
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="jaxmc",
        description="Probabilistic model checking of PRISM models (DTMC, CTMC, "
        "MDP) on JAX. Checks PCTL/CSL properties with rewards, as PRISM does.",
        epilog="Example: jaxmc examples/models/die.pm --prop "
        "'P=? [ F s=7 & d=6 ]'",
    )
    p.add_argument("model", help="PRISM model file (.pm, .sm, .nm, .prism)")
    p.add_argument("props_file", nargs="?", help="PRISM properties file")
    p.add_argument(
        "--prop", "-pf", action="append", default=[], metavar="PROP",
        help="a property to check, e.g. 'P=? [ F \"goal\" ]' (repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--property", "-prop", action="append", default=[], metavar="NAME|INDEX",
        help="check only this property of the file, by name or 1-based index",
    )  # fmt: skip
    p.add_argument(
        "--const", "-const", action="append", default=[], metavar="N=3,p=0.1",
        help="values of undefined constants; ranges N=1:2:9 run an experiment",
    )  # fmt: skip
    num = p.add_argument_group("numerical methods (PRISM's switches)")
    num.add_argument("-epsilon", "--epsilon", type=float, default=1e-6,
                     help="convergence threshold (default 1e-6)")  # fmt: skip
    num.add_argument("-maxiters", "--max-iters", type=int, default=10000,
                     dest="max_iters", help="iteration limit (default 10000)")  # fmt: skip
    crit = num.add_mutually_exclusive_group()
    crit.add_argument("-relative", "--relative", dest="relative",
                      action="store_true", default=True,
                      help="relative convergence criterion (default)")  # fmt: skip
    crit.add_argument("-absolute", "--absolute", dest="relative",
                      action="store_false", help="absolute convergence criterion")
    meth = num.add_mutually_exclusive_group()
    for flag, method in METHODS.items():
        meth.add_argument(f"-{flag}", f"--{flag}", dest="method",
                          action="store_const", const=method,
                          help=f"use {method.replace('_', ' ')}")  # fmt: skip
    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true",
                     help="print the results as JSON on stdout")  # fmt: skip
    out.add_argument("--timing", action="store_true",
                     help="print a timing breakdown per property")  # fmt: skip
    exp = p.add_argument_group("model import/export")
    exp.add_argument("-exportmodel", "--export-model", metavar="BASENAME",
                     help="write BASENAME.tra/.sta/.lab/.srew/.trew")  # fmt: skip
    return p


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return repr(v)
    return str(v)


def _progress(found: int, frontier: int, elapsed: float) -> None:
    if sys.stderr.isatty():
        print(
            f"\rexploring: {found:,} states, frontier {frontier:,}, "
            f"{elapsed:.1f} s",
            end="",
            file=sys.stderr,
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    import jaxmc
    from jaxmc.errors import JaxmcError

    args = _parser().parse_args(argv)
    try:
        return _run(args, jaxmc)
    except JaxmcError as e:
        print(str(e), file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {e.strerror}: {e.filename}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace, jaxmc: Any) -> int:
    const = ",".join(args.const) if args.const else None
    settings = jaxmc.semantics.expand_constants(const)
    if len(settings) > 1:
        print(f"Experiment over {len(settings)} constant settings", file=sys.stderr)
    report: list[dict[str, Any]] = []
    status = 0
    for setting in settings:
        model = jaxmc.load_model(args.model, setting, progress=_progress)
        t0 = time.perf_counter()
        explicit = model.build()
        if sys.stderr.isatty():
            print(file=sys.stderr)
        if not args.json:
            _print_model(model, explicit, time.perf_counter() - t0, setting)
        if args.export_model:
            jaxmc.explore.export_explicit(explicit, args.export_model)
        props = _properties(args, model, jaxmc, setting)
        for index, prop in _selected(args, props):
            result = jaxmc.check(
                model,
                index,
                properties=props,
                method=args.method,
                epsilon=args.epsilon,
                relative=args.relative,
                max_iters=args.max_iters,
            )
            entry = {
                "property": prop.text,
                "name": prop.name,
                "constants": setting,
                "states": explicit.num_states,
            }
            try:
                entry["value"] = result.value
            except JaxmcError as e:
                lo, hi = result.range
                entry["range"] = [lo.item(), hi.item()]
                if not args.json:
                    print(f"Note: {e.message}", file=sys.stderr)
            entry.update(
                status=result.status,
                iterations=result.iterations,
                timing=result.timing,
            )
            report.append(entry)
            if not args.json:
                _print_result(entry, args.timing)
    if args.json:
        print(json.dumps(report, indent=2, default=_json_default))
    return status


def _json_default(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    if isinstance(v, float) and math.isinf(v):
        return "Infinity"
    return str(v)


def _properties(args, model, jaxmc, setting):
    texts = []
    if args.props_file:
        with open(args.props_file, encoding="utf-8") as f:
            texts.append(f.read())
    texts.extend(args.prop)
    if not texts:
        raise jaxmc.errors.ModelCheckingError(
            "no properties to check",
            hint="give a properties file or --prop 'P=? [ F ... ]'",
        )
    return jaxmc.parse_properties(
        "\n".join(t if t.rstrip().endswith(";") else t + ";" for t in texts),
        model,
        setting,
        file=args.props_file if not args.prop else None,
    )


def _selected(args, props):
    if not args.property:
        return list(enumerate(props))
    chosen = []
    for key in args.property:
        if key.isdigit():
            i = int(key) - 1
            chosen.append((i, props[i]))
        else:
            for i, p in enumerate(props):
                if p.name == key:
                    chosen.append((i, p))
                    break
            else:
                raise KeyError(key)
    return chosen


def _print_model(model, explicit, seconds, setting) -> None:
    print(f"Model: {os.path.basename(model.path or '<string>')} "
          f"({model.model_type.value.upper()})"
          + (f", constants {setting}" if setting else ""))  # fmt: skip
    line = f"States: {explicit.num_states:,}  Transitions: {explicit.num_transitions:,}"
    if explicit.is_nondeterministic:
        line += f"  Choices: {explicit.num_choices:,}"
    line += f"  Initial states: {len(explicit.initial_states)}"
    print(line)
    print(f"Build time: {seconds:.3f} s")


def _print_result(entry: dict[str, Any], timing: bool) -> None:
    print()
    label = f'"{entry["name"]}": ' if entry["name"] else ""
    print(f"Property: {label}{entry['property']}")
    if "value" in entry:
        print(f"Result: {_fmt(entry['value'])}")
    else:
        lo, hi = entry["range"]
        print(f"Result: [{_fmt(lo)}, {_fmt(hi)}] (range over initial states)")
    if entry.get("iterations") is not None:
        print(f"Iterations: {entry['iterations']}")
    if timing and entry.get("timing"):
        parts = ", ".join(f"{k} {v:.4f} s" for k, v in entry["timing"].items())
        print(f"Timing: {parts}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
