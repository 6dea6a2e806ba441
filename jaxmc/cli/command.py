"""The `jaxmc` command: choose the form (check, `sweep`, `plot-matrix`),
parse its arguments, set up the device and the compilation cache, and turn
every error into a message and an exit status (`main`)."""

from __future__ import annotations

import argparse
import os
import sys

from . import check, plot, sweep
from .args import parser as main_parser, plot_parser, sweep_parser
from .output import end_solve_progress, error_text


def main(argv: list[str] | None = None) -> int:
    """Run the command line with `argv` (default `sys.argv[1:]`); returns the
    exit status: 0 ok, 1 an error in the input (a located message), 2 a usage
    error, 3 an internal error (one line and the path of a crash report,
    never a traceback), 130 interrupted."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv)
    except Exception as e:  # the last resort: a bug, reported without a traceback
        from .crash import report

        return report(e, argv)


def _main(argv: list[str]) -> int:
    if argv and argv[0] == "plot-matrix":
        args = plot_parser().parse_args(argv[1:])
        return _guard(lambda: plot.run(args))
    if argv and argv[0] == "sweep":
        args = sweep_parser().parse_args(argv[1:])
        err = _select_device(args.device)
        if err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        _enable_cache()
        return _guard(lambda: sweep.run(args))
    parser = main_parser()
    args = parser.parse_args(argv)
    status = _guard(lambda: _prism_switches(args))
    if status:
        return status
    if args.import_results:  # results in, results out: no model
        from .export import import_results

        return _guard(lambda: import_results(args))
    if args.import_model:
        if args.props_file is not None:
            parser.error("with -importmodel give only PROPS_FILE, not a model file")
        args.props_file, args.model = args.model, None
    elif args.model is None:
        parser.error("the following arguments are required: MODEL")
    err = _select_device(args.device) or _join(args)
    if err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    _enable_cache()
    try:
        return _guard(lambda: check.run(args))
    finally:
        end_solve_progress()


def _enable_cache() -> None:
    """JAX's persistent compilation cache (`JAXMC_CACHE_DIR`; the empty string
    turns it off), so that checking a model again in a new process compiles
    nothing."""
    from .._config import enable_compilation_cache

    enable_compilation_cache()


def _guard(fn) -> int:
    from ..errors import JaxmcError

    try:
        return fn()
    except JaxmcError as e:
        print(error_text(e), file=sys.stderr)
        return 1
    except OSError as e:
        print(
            f"error: {e.strerror or e}: {e.filename or ''}".rstrip(": "),
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _prism_switches(args: argparse.Namespace) -> int:
    """Apply PRISM's engine/method switches (`jaxmc.cli.switches`) and print
    a note for each that jaxmc does not implement."""
    from .switches import apply

    for note in apply(args):
        print(f"note: {note}", file=sys.stderr)
    return 0


def _join(args: argparse.Namespace) -> str | None:
    """With `--coordinator`: join `jax.distributed` (CPU collectives through
    gloo), split the solves over every process's devices unless `--devices`
    says otherwise, and keep the output to process 0 (the others print
    nothing and write no exports). An error message, or None."""
    given = (args.coordinator, args.num_processes, args.process_id)
    if all(v is None for v in given):
        return None
    if any(v is None for v in given):
        return (
            "--coordinator, --num-processes and --process-id go together\n"
            "hint: e.g. --coordinator host0:1234 --num-processes 2 --process-id 0"
        )
    if not 0 <= args.process_id < args.num_processes:
        return f"--process-id {args.process_id}: expected 0 .. {args.num_processes - 1}"
    if args.process_id != 0:  # (the collectives' own messages included)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        jax.distributed.initialize(
            args.coordinator, num_processes=args.num_processes,
            process_id=args.process_id,
        )  # fmt: skip
    except Exception as e:  # JAX raises RuntimeError/ValueError here
        why = (str(e).splitlines() or ["no reason given"])[0]
        return f"cannot join {args.coordinator} as process {args.process_id}: {why}"
    if args.devices is None:
        args.devices = len(jax.devices())
    if jax.process_index() != 0:
        for name, value in vars(args).items():
            if name.startswith("export") and value:
                setattr(args, name, None)
    return None


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
