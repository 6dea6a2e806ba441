"""The `jaxmc` command line: argparse → the public API (`jaxmc.*`), with
PRISM's switches.

This module reads arguments, calls `jaxmc.load_model` / `jaxmc.build` /
`jaxmc.parse_properties` / `jaxmc.check`, and prints what they return. It
turns every `JaxmcError` into its located message and exit status 1 (usage
errors exit 2, from argparse), so a user never sees a traceback for a mistake
in a model or a property.

Three forms:

    jaxmc MODEL [PROPS_FILE] [options]          check properties
    jaxmc sweep MODEL --prop P --param p=a:s:b  a property over a parameter grid
    jaxmc plot-matrix MODEL [options] -o F.png  draw the transition matrix
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import sys
import time
from typing import Any


#: PRISM's method switches → the `method=` names of `jaxmc.check`.
METHODS = {
    "jacobi": "jacobi",
    "gaussseidel": "gauss_seidel",
    "power": "power",
    "bicgstab": "bicgstab",
    "valiter": "value_iteration",
    "ii": "interval_iteration",
}
_METHOD_HELP = {
    "jacobi": "Jacobi iteration (the default for DTMC/CTMC linear equation systems "
    "unless nearly acyclic; those get topological Gauss-Seidel)",
    "gaussseidel": "Gauss-Seidel for DTMC/CTMC linear systems (sequential: runs on "
    "the host CPU, one sparse triangular solve per sweep, components in topological "
    "order; value iteration on MDPs)",
    "power": "the power method",
    "bicgstab": "BiCGStab (Krylov solver)",
    "valiter": "value iteration (default for MDPs)",
    "ii": "interval iteration (sound lower/upper bounds)",
}
#: PRISM's other spellings of the method switches.
_METHOD_ALIASES = {
    "jacobi": ("-jac",),
    "gaussseidel": ("-gs",),
    "power": ("-pow", "-pwr"),
    "ii": ("-intervaliter",),
}
LAYOUTS = ("auto", "csr", "ell", "sell", "warp", "warp2", "compact", "compact2", "vector", "dia")
PRECISIONS = ("fp64", "fp32")


def _api_supports(name: str) -> bool:
    """Whether `jaxmc.check` takes keyword `name` (so that --layout and
    --precision are passed on as soon as the API grows them)."""
    from . import api

    return name in inspect.signature(api.check).parameters


# ------------------------------------------------------------------ parsers


def _parser() -> argparse.ArgumentParser:
    from ._cli.switches import PrismArgumentParser

    p = PrismArgumentParser(
        prog="jaxmc",
        usage="jaxmc MODEL [PROPS_FILE] [options]\n"
        "       jaxmc -importmodel BASE.tra,sta,lab [PROPS_FILE] [options]\n"
        "       jaxmc sweep MODEL --prop PROP --param p=0.1:0.1:0.9 [options]\n"
        "       jaxmc plot-matrix MODEL [--const ...] -o OUT.png",
        description="Probabilistic model checking of PRISM models (DTMC .pm, "
        "CTMC .sm, MDP .nm) on JAX: PCTL/CSL properties with rewards, checked "
        "as PRISM checks them. PRISM's single-dash switches are accepted.",
        epilog="Exit status: 0 ok; 1 an error in the model, a property or the "
        "numerics (a located message on stderr; a property that does not "
        "converge is an error); 2 a usage error. "
        "Examples: jaxmc examples/models/die.pm examples/models/die.pm.props; "
        "jaxmc examples/models/die.pm --prop 'P=? [ F s=7 & d=6 ]'; "
        "jaxmc herman5.pm herman.pctl --property 3 --const k=1:2:5,K=0. "
        "See 'jaxmc sweep --help' for parameter sweeps and 'jaxmc plot-matrix "
        "--help' for the matrix plot.",
    )
    p.add_argument("model", nargs="?", help="PRISM model file (.pm, .sm, .nm, .prism)")
    p.add_argument("props_file", nargs="?", help="PRISM properties file (.props, .pctl, .csl)")
    p.add_argument(
        "--prop", "-pf", "-pctl", "-csl", action="append", default=[], metavar="PROP",
        help="a property to check, e.g. 'P=? [ F \"goal\" ]' (repeatable; "
        "checked after those of PROPS_FILE, and may refer to them by name)",
    )  # fmt: skip
    p.add_argument(
        "--property", "-prop", "-property", action="append", default=[],
        metavar="NAME|INDEX",
        help="check only this property: a name, or a 1-based index in the "
        "list PROPS_FILE then --prop (repeatable, or comma-separated)",
    )  # fmt: skip
    p.add_argument(
        "--const", "-const", action="append", default=[], metavar="N=3,p=0.1",
        help="values of undefined constants (model or properties); a range "
        "N=1:9 or N=1:2:9 (low:step:high) runs an experiment, one row per "
        "setting, the last constant varying fastest (repeatable)",
    )  # fmt: skip

    num = p.add_argument_group("numerical methods (PRISM's switches)")
    num.add_argument("-epsilon", "--epsilon", "-e", type=float, default=1e-6,
                     help="convergence threshold (default 1e-6)")  # fmt: skip
    num.add_argument("-maxiters", "--max-iters", type=int, default=10000,
                     dest="max_iters", metavar="N",
                     help="iteration limit (default 10000); reaching it is an "
                     "error (exit 1) naming the iterations and the residual")  # fmt: skip
    crit = num.add_mutually_exclusive_group()
    crit.add_argument("-relative", "--relative", "-rel", dest="relative",
                      action="store_true", default=True,
                      help="relative convergence criterion (default)")  # fmt: skip
    crit.add_argument("-absolute", "--absolute", "-abs", dest="relative",
                      action="store_false", help="absolute convergence criterion")
    meth = num.add_mutually_exclusive_group()
    for flag, method in METHODS.items():
        meth.add_argument(f"-{flag}", f"--{flag}", *_METHOD_ALIASES.get(flag, ()),
                          dest="method", action="store_const", const=method,
                          help=_METHOD_HELP[flag])  # fmt: skip

    dev = p.add_argument_group("device and data layout")
    dev.add_argument(
        "--device", choices=("cpu", "gpu"),
        help="JAX platform to run on (default: JAX's choice, i.e. a GPU if "
        "jax[cuda12] is installed and one is visible); set before JAX starts",
    )  # fmt: skip
    layout_note = "" if _api_supports("layout") else (
        "; NOTE: this version's jaxmc.check does not take a layout yet, so "
        "only 'csr' (what it uses) is accepted and others exit 1"
    )  # fmt: skip
    dev.add_argument("--layout", choices=LAYOUTS, default="auto",
                     help="sparse matrix layout of the iterative solves: auto (CSR "
                     "on a CPU, a warp-segment sliced ELL run by the Pallas kernels "
                     "on a GPU), csr, ell, sell (sliced ELLPACK), warp / warp2 "
                     "(warp-segment, full / half warp), compact / compact2 (their "
                     "compact-value variants), vector (CSR-vector, a warp per row, "
                     "for long rows), dia (compact diagonals in PRISM's state order, "
                     "for box-shaped state spaces such as tandem's; compact where the "
                     "matrix is not a few diagonals; auto picks it for GPU "
                     "steady-state solves where it fits; default auto)"
                     f"{layout_note}")  # fmt: skip
    prec_note = "" if _api_supports("precision") else (
        "; NOTE: this version's jaxmc.check does not take a precision yet and "
        "always computes in fp64, so fp32 exits 1"
    )  # fmt: skip
    dev.add_argument("--precision", choices=PRECISIONS, default="fp64",
                     help=f"floating-point precision (default fp64){prec_note}")

    p.add_argument("--max-states", type=int, default=None, metavar="N",
                   help="stop exploring after N states with an error naming the "
                   "variables whose range keeps growing (default: no limit; the "
                   "build stops anyway when it would run out of memory)")  # fmt: skip

    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true",
                     help="print the model summaries and results as one JSON "
                     "document on stdout (nothing else on stdout)")  # fmt: skip
    out.add_argument("--timing", action="store_true",
                     help="print a timing breakdown (parse, build, and each "
                     "property's stages) after the results")  # fmt: skip
    out.add_argument("--quiet", "-q", action="store_true",
                     help="no progress on stderr (exploration progress is a line "
                     "updated in place on a terminal, else a plain line every few "
                     "seconds of a long build)")  # fmt: skip

    io = p.add_argument_group("model import/export (PRISM's explicit files)")
    io.add_argument("-exportmodel", "--export-model", metavar="BASE[.tra,sta,...|.all]",
                    help="write the built model as BASE.tra/.sta/.lab/.srew/.trew; "
                    "'BASE.tra,lab' writes only those, 'BASE.all' or 'BASE' "
                    "all of them")  # fmt: skip
    io.add_argument("-importmodel", "--import-model", metavar="BASE.tra[,sta,lab,srew,trew]|BASE.all",
                    help="read the model from PRISM explicit files instead of "
                    "a PRISM model (then the first positional argument is the "
                    "properties file); properties may use the variables of "
                    "the .sta file and the labels of the .lab file")  # fmt: skip
    mt = io.add_mutually_exclusive_group()
    for kind in ("dtmc", "ctmc", "mdp"):
        mt.add_argument(f"-{kind}", f"--{kind}", dest="import_type",
                        action="store_const", const=kind,
                        help=f"with -importmodel: the files hold a {kind.upper()} "
                        "(default: from the .tra header)")  # fmt: skip
    _add_prism_switches(p, meth)
    return p


def _add_prism_switches(p: argparse.ArgumentParser, meth) -> None:
    from ._cli.switches import add_switches

    add_switches(p, meth)


def _plot_parser() -> argparse.ArgumentParser:
    from ._cli.switches import PrismArgumentParser

    p = PrismArgumentParser(
        prog="jaxmc plot-matrix",
        description="Draw the non-zero pattern of a model's transition matrix, "
        "side by side: in PRISM's state order (lexicographic in the variable "
        "valuations, as PRISM's sparse engines number states) and in jaxmc's "
        "BFS order (the builder's). Each panel's title reports the padding a "
        "sliced-ELL layout (slices of 32 rows, each padded to its longest "
        "row) would store in that order. Needs "
        "matplotlib (pip install 'jaxmc[plot]').",
    )
    p.add_argument("model", help="PRISM model file")
    p.add_argument("--const", "-const", action="append", default=[],
                   metavar="N=3,p=0.1", help="values of undefined constants "
                   "(no ranges)")  # fmt: skip
    p.add_argument("-o", "--output", required=True, metavar="OUT.png",
                   help="the image file to write")
    p.add_argument("--dpi", type=int, default=150, help="image resolution (default 150)")
    return p


def _sweep_parser() -> argparse.ArgumentParser:
    from ._cli.switches import PrismArgumentParser

    p = PrismArgumentParser(
        prog="jaxmc sweep",
        usage="jaxmc sweep MODEL --prop PROP --param NAME=VALUES [--param ...] [options]",
        description="One property at every point of a grid of parameter values, "
        "in one batched computation (jaxmc.sweep): the state space is built once, "
        "the parameters' values only change the transition probabilities, rates "
        "and rewards. A parameter is an undefined `const double` of the model that "
        "occurs only in probabilities, rates, rewards or time bounds (not in guards "
        "or variable bounds). Progress on stderr; a table, or JSON, on stdout.",
        epilog="Example: jaxmc sweep examples/models/queue.sm --prop 'S=? [ \"empty\" ]' "
        "--param lambda=0.5:0.5:2.5 --param mu=3,4. "
        "Exit status: 0 ok; 1 an error in the model, the property, a parameter or "
        "a point that did not converge; 2 a usage error.",
    )
    p.add_argument("model", help="PRISM model file (.pm, .sm, .nm, .prism)")
    p.add_argument("--prop", "-pf", required=True, metavar="PROP",
                   help="the property, e.g. 'P=? [ F \"goal\" ]'")
    p.add_argument("--param", action="append", required=True, metavar="p=0.1:0.1:0.9",
                   help="a parameter and its values: low:step:high, low:high (step 1), "
                   "a comma list of values, or one value (repeatable; the points are "
                   "all combinations, the last parameter varying fastest)")
    p.add_argument("--const", "-const", action="append", default=[], metavar="N=3",
                   help="values of the model's other undefined constants (no ranges)")
    p.add_argument("-epsilon", "--epsilon", "-e", type=float, default=1e-6,
                   help="relative convergence threshold (default 1e-6, PRISM's)")
    p.add_argument("-maxiters", "--max-iters", type=int, default=200_000,
                   help="iteration limit per point (default 200000)")
    p.add_argument("--chunk", type=int, default=None,
                   help="points per batched solve (default: chosen from the model's size)")
    p.add_argument("--workers", type=int, default=None,
                   help="batches solved at once on host threads (default: one per CPU "
                   "core on the CPU, 1 on a GPU)")
    p.add_argument("--device", choices=("cpu", "gpu"), default=None,
                   help="JAX backend (default: JAX's own choice)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    return p


def _sweep_grid(specs: list[str]) -> tuple[list[str], list[list[float]]]:
    """The parameters' names and value lists from `--param` texts such as
    `p=0.1:0.1:0.9` (PRISM's range syntax) or `q=0.2,0.3,0.5`."""
    from .errors import SemanticError
    from .lang.ast import ValueType
    from .semantics.constants import expand_constants

    names: list[str] = []
    axes: list[list[float]] = []
    for spec in specs:
        name, eq, values = spec.partition("=")
        name = name.strip()
        if not eq or not name or not values.strip():
            raise SemanticError(f"`--param {spec}`: expected NAME=VALUES, e.g. p=0.1:0.1:0.9 or p=0.2,0.4")
        if name in names:
            raise SemanticError(f"parameter `{name}` is given twice")
        axis: list[float] = []
        for part in values.split(","):
            part = part.strip()
            if not part:
                continue
            try:
                got = expand_constants(f"{name}={part}", types={name: ValueType.DOUBLE})
            except ValueError as e:
                raise SemanticError(f"`--param {spec}`: {e}") from None
            axis += [float(s[name]) for s in got]
        if not axis:
            raise SemanticError(f"`--param {spec}`: no values")
        names.append(name)
        axes.append(axis)
    return names, axes


def _sweep(args: argparse.Namespace) -> int:
    """`jaxmc sweep`: load the model with the parameters symbolic, run
    `jaxmc.sweep` over the grid, print a table or JSON."""
    import numpy as np

    import jaxmc

    names, axes = _sweep_grid(args.param)
    grids = np.meshgrid(*[np.asarray(a, dtype=np.float64) for a in axes], indexing="ij")
    points = {k: g.reshape(-1) for k, g in zip(names, grids)}
    total = int(grids[0].size)
    first = {k: float(v[0]) for k, v in points.items()}
    t0 = time.perf_counter()
    model = jaxmc.load_model(args.model, ",".join(args.const) or None, parameters=tuple(names),
                             params=first)
    explicit = jaxmc.build(model)
    build_s = time.perf_counter() - t0
    for w in explicit.warnings:
        print(f"Warning: {w}", file=sys.stderr)
    if not args.quiet:
        print(f"model: {explicit.num_states} states, {explicit.num_transitions} transitions "
              f"({build_s:.2f} s); {total} points", file=sys.stderr, flush=True)
    t1 = time.perf_counter()
    try:
        values = jaxmc.sweep(
            model, args.prop, params=points, chunk=args.chunk, workers=args.workers,
            progress=not args.quiet, epsilon=args.epsilon, max_iters=args.max_iters,
        )  # fmt: skip
    except ValueError as e:  # e.g. a name that is not a parameter of the model
        print(f"error: {e}", file=sys.stderr)
        return 1
    sweep_s = time.perf_counter() - t1
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if args.json:
        out = {
            "model": args.model, "property": args.prop, "constants": ",".join(args.const) or None,
            "parameters": names, "states": explicit.num_states,
            "transitions": explicit.num_transitions, "epsilon": args.epsilon,
            "warnings": list(explicit.warnings), "timing": {"build": build_s, "sweep": sweep_s},
            "points": [{**{k: float(points[k][i]) for k in names}, "value": float(values[i])}
                       for i in range(total)],
        }  # fmt: skip
        print(json.dumps(out, indent=2))
        return 0
    print(f"Sweep of {args.prop} over {' x '.join(f'{k} ({len(a)})' for k, a in zip(names, axes))}"
          f" = {total} points: {sweep_s:.3f} s ({1e3 * sweep_s / total:.2f} ms per point)")
    rows = [[f"{points[k][i]:.10g}" for k in names] + [f"{values[i]:.10g}"] for i in range(total)]
    head = names + ["Result"]
    width = [max(len(h), *(len(r[j]) for r in rows)) for j, h in enumerate(head)]
    for r in [head] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, width)).rstrip())
    return 0


# --------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    """Run the command line with `argv` (default `sys.argv[1:]`); returns the
    exit status: 0 ok, 1 an error in the input (a located message), 2 a usage
    error, 3 an internal error (one line and the path of a crash report,
    never a traceback), 130 interrupted."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv)
    except Exception as e:  # the last resort: a bug, reported without a traceback
        from ._cli.crash import report

        return report(e, argv)


def _main(argv: list[str]) -> int:
    if argv and argv[0] == "plot-matrix":
        args = _plot_parser().parse_args(argv[1:])
        return _guard(lambda: _plot(args))
    if argv and argv[0] == "sweep":
        args = _sweep_parser().parse_args(argv[1:])
        err = _select_device(args.device)
        if err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        _enable_cache()
        return _guard(lambda: _sweep(args))
    parser = _parser()
    args = parser.parse_args(argv)
    status = _guard(lambda: _prism_switches(args))
    if status:
        return status
    if args.import_model:
        if args.props_file is not None:
            parser.error("with -importmodel give only PROPS_FILE, not a model file")
        args.props_file, args.model = args.model, None
    elif args.model is None:
        parser.error("the following arguments are required: MODEL")
    err = _select_device(args.device)
    if err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    _enable_cache()
    try:
        return _guard(lambda: _run(args))
    finally:
        from .solvers import progress as _progress

        _progress.set_reporter(None)


def _enable_cache() -> None:
    """JAX's persistent compilation cache (`JAXMC_CACHE_DIR`; the empty string
    turns it off), so that checking a model again in a new process compiles
    nothing (die: the first property's solve 0.23 s, 0.07 s from the cache)."""
    from ._config import enable_compilation_cache

    enable_compilation_cache()


def _guard(fn) -> int:
    from .errors import JaxmcError

    try:
        return fn()
    except JaxmcError as e:
        print(_error_text(e), file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {e.strerror or e}: {e.filename or ''}".rstrip(": "), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _prism_switches(args: argparse.Namespace) -> int:
    """Apply PRISM's engine/method switches (`jaxmc._cli.switches`) and print
    a note for each that jaxmc does not implement."""
    from ._cli.switches import apply

    for note in apply(args):
        print(f"note: {note}", file=sys.stderr)
    return 0


def _error_text(e) -> str:
    """The error as the command line shows it: constants are given values
    with `--const` here (the API's hint names its `constants=` argument)."""
    from .semantics.constants import MissingConstantsError, command_line_hint

    if isinstance(e, MissingConstantsError):
        e.rehint(command_line_hint(e.names))
    return str(e)


def _select_device(device: str | None) -> str | None:
    """Point JAX at `device` before it starts (env var if JAX is not yet
    imported, else its config, which works until the first computation)."""
    if device is None:
        return None
    platform = {"cpu": "cpu", "gpu": "cuda"}[device]
    if "jax" not in sys.modules:
        os.environ["JAX_PLATFORMS"] = platform
    else:
        import jax

        jax.config.update("jax_platforms", platform)
    try:
        import jax

        jax.devices()
    except Exception as e:  # JAX raises RuntimeError or AssertionError here
        why = (str(e).splitlines() or ["JAX found no backend for it"])[0]
        return (
            f"cannot use device '{device}': {why}\n"
            "hint: for a GPU install jax with CUDA (pip install 'jaxmc[gpu]')"
        )
    return None


# ---------------------------------------------------------------- checking


def _run(args: argparse.Namespace) -> int:
    import jaxmc

    extra = _api_options(args)
    settings = jaxmc.semantics.expand_constants(",".join(args.const) or None)
    show = _Printer(args).solve_progress()
    status = 0
    runs: list[dict[str, Any]] = []
    model = None
    model_key = None
    for setting in settings:
        t0 = time.perf_counter()
        if args.import_model:
            if model is None:
                model = _import_model(args, jaxmc)
            parse_time = time.perf_counter() - t0
        else:
            names = None if model is None else _model_constant_names(model)
            key = None if names is None else {k: v for k, v in setting.items() if k in names}
            if model is None or key != model_key:
                options = _build_options(args, show)
                model = jaxmc.load_model(args.model, setting, **options)
                model_key = {k: v for k, v in setting.items() if k in _model_constant_names(model)}
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
            "timing": {"parse": parse_time, "build": model.build_time or 0.0},
            "properties": [],
        }
        runs.append(run)
        show.model(run, explicit)
        if args.export_model:
            _export(args.export_model, explicit, jaxmc, show)
        if chosen is None:
            continue
        for n, (index, prop) in enumerate(chosen, 1):
            show.checking(n, len(chosen), prop.text)
            entry = {"index": index + 1, "name": prop.name, "property": prop.text}
            try:
                result = jaxmc.check(
                    model, index, properties=props, method=args.method,
                    epsilon=args.epsilon, relative=args.relative,
                    max_iters=args.max_iters, **extra,
                )  # fmt: skip
                entry.update(_result_entry(result))
            except jaxmc.JaxmcError as e:
                entry["error"] = _error_text(sources.relocate(e))
                status = 1
            run["properties"].append(entry)
            show.result(entry)
    if args.json:
        out = {
            "model": args.model or args.import_model,
            "properties_file": args.props_file,
            "runs": runs,
            "status": status,
        }
        print(json.dumps(out, indent=2, default=_json_default))
    else:
        if len(settings) > 1:
            show.experiment(runs)
        if args.timing:
            show.timing(runs)
    return status


def _build_options(args, show) -> dict[str, Any]:
    """The builder's options from the command line (see `jaxmc.load_model`)."""
    options: dict[str, Any] = {"progress": show.progress}
    if not args.fixdl:
        options["deadlocks"] = "error"
    if args.max_states is not None:
        options["max_states"] = args.max_states
    return options


def _api_options(args) -> dict[str, Any]:
    """--layout / --precision as keywords of `jaxmc.check`, if it takes them;
    else an error unless they are the defaults (what the API does anyway)."""
    from .errors import UnsupportedError

    extra: dict[str, Any] = {}
    for name, value, default in (
        ("layout", args.layout, "auto"),
        ("precision", args.precision, "fp64"),
    ):
        if _api_supports(name):
            extra[name] = value
        elif value != default:
            raise UnsupportedError(
                f"--{name} {value} is not supported yet: jaxmc.check has no "
                f"`{name}` argument in this version (it uses {default})",
                hint=f"leave --{name} out, or use --{name} {default}",
            )
    return extra


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
    from .errors import ModelCheckingError

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
    for key in ("method", "layout", "precision"):
        if getattr(result, key, None) is not None:
            entry[key] = getattr(result, key)
    return entry


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def _properties(args, model, setting, jaxmc):
    from ._cli.props import PropertySources

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


# ------------------------------------------------------ explicit import/export


def _export(spec: str, explicit, jaxmc, show) -> None:
    from ._cli.explicit import export

    export(spec, explicit, show)


def _import_model(args, jaxmc):
    from ._cli.explicit import import_model

    return import_model(args.import_model, args.import_type, jaxmc)


# ----------------------------------------------------------------- printing


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        if math.isnan(v):
            return "NaN"
        return repr(v)
    return str(v)


def _fmt_consts(setting: dict[str, Any]) -> str:
    return ",".join(f"{k}={_fmt(v)}" for k, v in setting.items())


def _json_default(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    return str(v)


def _exploration_progress(args):
    from ._cli.progress import ExplorationProgress

    return ExplorationProgress(sys.stderr.isatty(), enabled=not args.quiet)


class _Printer:
    """Human-readable output in PRISM's style on stdout, progress on stderr
    (only on a terminal); silent under --json except for errors."""

    def __init__(self, args):
        self.args = args
        self.tty = sys.stderr.isatty() and not args.quiet
        self.quiet = args.json
        self._line = False
        self._explore = _exploration_progress(args)
        self._checking = ""
        self._solve_progress = None

    def out(self, text: str = "") -> None:
        if not self.quiet:
            print(text)

    def note(self, text: str) -> None:
        print(text, file=sys.stderr if self.quiet else sys.stdout)

    def progress(self, p) -> None:
        """The exploration's progress (`jaxmc._cli.progress`)."""
        self._explore(p)

    def end_progress(self) -> None:
        self._explore.end()
        if self._line:
            print("\r" + " " * 70 + "\r", end="", file=sys.stderr, flush=True)
            self._line = False

    def checking(self, n: int, total: int, text: str) -> None:
        if self.tty:
            short = text if len(text) <= 50 else text[:47] + "..."
            self._checking = f"checking {n}/{total}: {short}"
            print(f"\r{self._checking:<70}", end="", file=sys.stderr, flush=True)
            self._line = True
            if self._solve_progress is not None:
                self._solve_progress.restart()

    def solving(self, it: int, residual: float, elapsed: float) -> None:
        """A long iterative solve's progress (from inside its loop: see
        `jaxmc.solvers._progress`)."""
        if self.tty and elapsed >= 1.0:
            msg = f"{self._checking}: {it:,} iterations, residual {residual:.3g}, {elapsed:.1f} s"
            print(f"\r{msg[-110:]:<70}", end="", file=sys.stderr, flush=True)
            self._line = True

    def solve_progress(self):
        """Install `solving` as the solvers' reporter (on a terminal only:
        loops traced with a reporter are not persistently cached)."""
        from .solvers import progress as _progress

        if self.tty:
            self._solve_progress = _progress.Throttle(self.solving)
            _progress.set_reporter(self._solve_progress)
        return self

    def model(self, run: dict[str, Any], explicit) -> None:
        m = run["model"]
        if self.quiet:
            for w in m["warnings"]:
                print(f"Warning: {w}", file=sys.stderr)
            return
        head = f"Model: {os.path.basename(m['file'] or '<string>')}"
        if run["constants"]:
            head += f"  (constants {_fmt_consts(run['constants'])})"
        self.out(("\n" if self._printed_model() else "") + head)
        self.out(f"Type:        {m['type']}")
        self.out(f"States:      {m['states']:,} ({m['initial_states']:,} initial)")
        self.out(f"Transitions: {m['transitions']:,}")
        if explicit.is_nondeterministic:
            self.out(f"Choices:     {m['choices']:,}")
        for w in m["warnings"]:
            self.out(f"Warning: {w}")
        self.out(f"Time for model construction: {m['build_time']:.3f} seconds.")

    def _printed_model(self) -> bool:
        seen = getattr(self, "_seen", False)
        self._seen = True
        return seen

    def result(self, entry: dict[str, Any]) -> None:
        self.end_progress()
        if self.quiet:
            if "error" in entry:
                print(entry["error"], file=sys.stderr)
            return
        label = f'"{entry["name"]}": ' if entry["name"] else ""
        self.out()
        self.out(f"Model checking: {label}{entry['property']}")
        if "error" in entry:
            sys.stdout.flush()
            print(entry["error"], file=sys.stderr)
            self.out("Result: Error (see the message on stderr)")
            return
        if "value" in entry:
            self.out(f"Result: {_fmt(entry['value'])}")
        else:
            lo, hi = entry["range"]
            self.out(f"Result: [{_fmt(lo)},{_fmt(hi)}] (range of values over initial states)")
        if entry.get("iterations"):
            res = entry.get("residual")
            extra = f", residual {res:.3g}" if isinstance(res, float) else ""
            self.out(f"Iterations: {entry['iterations']} ({entry['status']}{extra})")
        total = entry["timing"].get("total")
        if total is not None:
            self.out(f"Time for model checking: {total:.3f} seconds.")

    def experiment(self, runs: list[dict[str, Any]]) -> None:
        """PRISM's experiment table: one per property, a row per setting."""
        names = list(runs[0]["constants"])
        by_prop: dict[int, list[tuple[dict, dict]]] = {}
        texts: dict[int, str] = {}
        for run in runs:
            for e in run["properties"]:
                by_prop.setdefault(e["index"], []).append((run["constants"], e))
                texts[e["index"]] = e["property"]
        for index, rows in by_prop.items():
            self.out()
            self.out(f"Results for property {index}: {texts[index]}")
            self.out("\t".join(names + ["Result"]))
            for consts, e in rows:
                if "value" in e:
                    r = _fmt(e["value"])
                elif "range" in e:
                    r = f"[{_fmt(e['range'][0])},{_fmt(e['range'][1])}]"
                else:
                    r = "Error"
                self.out("\t".join([_fmt(consts[n]) for n in names] + [r]))

    def timing(self, runs: list[dict[str, Any]]) -> None:
        self.out()
        self.out("Timing (seconds):")
        for run in runs:
            where = f" [{_fmt_consts(run['constants'])}]" if run["constants"] else ""
            t = run["timing"]
            self.out(f"  parse + check model{where}: {t['parse']:.4f}")
            self.out(f"  build state space{where}: {t['build']:.4f}")
            for e in run["properties"]:
                stages = {k: v for k, v in e.get("timing", {}).items() if k != "build"}
                parts = ", ".join(f"{k} {v:.4f}" for k, v in stages.items())
                how = " / ".join(str(e[k]) for k in ("method", "layout") if e.get(k))
                how = f" ({how})" if how and parts else ""
                self.out(f"  property {e['index']}{where}: {parts or 'n/a'}{how}")


# ------------------------------------------------------------- plot-matrix


def _plot(args: argparse.Namespace) -> int:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            "error: jaxmc plot-matrix needs matplotlib\n"
            "hint: pip install 'jaxmc[plot]'  (or: pip install matplotlib)",
            file=sys.stderr,
        )
        return 1
    import numpy as np

    import jaxmc
    from jaxmc.layout import CSR, SLICE, SlicedELL

    model = jaxmc.load_model(args.model, ",".join(args.const) or None)
    explicit = jaxmc.build(model)
    n = explicit.num_states
    # State-to-state pattern (an MDP's choices merged per state).
    rows = explicit.state_of_choice()[explicit.row_of_entry()]
    cols = np.asarray(explicit.col)
    # PRISM numbers states in lexicographic order of the variable valuations
    # (first variable most significant).
    states = np.asarray(explicit.states)
    lex = np.lexsort(states.T[::-1]) if states.shape[1] else np.arange(n)
    rank = np.empty(n, dtype=np.int64)
    rank[lex] = np.arange(n)

    def padding(r, c):
        order = np.lexsort((c, r))
        r, c = r[order], c[order]
        keep = np.ones(len(r), dtype=bool)
        keep[1:] = (r[1:] != r[:-1]) | (c[1:] != c[:-1])
        r, c = r[keep], c[keep]
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(ptr, r + 1, 1)
        ptr = np.cumsum(ptr)
        csr = CSR.from_arrays(ptr, c, np.ones(len(c)), (n, n))
        sell = SlicedELL.from_csr(csr)
        stored = sum(int(np.prod(s.shape)) for s in sell.slot)
        return r, c, stored - len(c)

    fig, axes = plt.subplots(1, 2, figsize=(12, 6))
    panels = (
        ("PRISM order (lexicographic)", rank[rows], rank[cols]),
        ("jaxmc order (BFS)", rows, cols),
    )
    msize = max(0.05, min(4.0, 300.0 / max(n, 1)))
    for ax, (title, r, c) in zip(axes, panels):
        r, c, pad = padding(r, c)
        nnz = len(c)
        if n > 2000:
            ax.plot(c, r, ",", color="black")
        else:
            ax.scatter(c, r, s=msize, c="black", marker="s", linewidths=0)
        ax.set_xlim(-0.5, n - 0.5)
        ax.set_ylim(n - 0.5, -0.5)
        ax.set_aspect("equal")
        ax.set_title(
            f"{title}\nsliced ELL ({SLICE}-row slices): {nnz:,} non-zeros, "
            f"{pad:,} padding ({pad / max(nnz, 1):.0%})",
            fontsize=9,
        )
        ax.set_xlabel("column (successor)")
        ax.set_ylabel("row (state)")
    name = os.path.basename(args.model)
    fig.suptitle(f"{name}: {n:,} states, {explicit.num_transitions:,} transitions")
    fig.tight_layout()
    fig.savefig(args.output, dpi=args.dpi)
    print(f"Wrote {args.output}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
