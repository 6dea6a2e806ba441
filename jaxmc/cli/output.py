"""What the command line prints: PRISM-style model summaries, results,
experiment tables and timings on stdout, progress on stderr, and values
formatted as PRISM formats them."""

from __future__ import annotations

import math
import os
import sys
from typing import Any

from .progress import ExplorationProgress


def fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        if math.isnan(v):
            return "NaN"
        return repr(v)
    return str(v)


def fmt_consts(setting: dict[str, Any]) -> str:
    return ",".join(f"{k}={fmt(v)}" for k, v in setting.items())


def json_default(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    return str(v)


class Printer:
    """Human-readable output in PRISM's style on stdout, progress on stderr
    (only on a terminal); silent under --json except for errors."""

    def __init__(self, args):
        self.args = args
        self.tty = sys.stderr.isatty() and not args.quiet
        self.quiet = args.json
        self._line = False
        self._explore = ExplorationProgress(sys.stderr.isatty(), enabled=not args.quiet)
        self._checking = ""
        self._solve_progress = None

    def out(self, text: str = "") -> None:
        if not self.quiet:
            print(text)

    def note(self, text: str) -> None:
        print(text, file=sys.stderr if self.quiet else sys.stdout)

    def progress(self, p) -> None:
        """The exploration's progress (`jaxmc.cli.progress`)."""
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
        `jaxmc.solvers`)."""
        if self.tty and elapsed >= 1.0:
            msg = (
                f"{self._checking}: {it:,} iterations, residual {residual:.3g}, "
                f"{elapsed:.1f} s"
            )
            print(f"\r{msg[-110:]:<70}", end="", file=sys.stderr, flush=True)
            self._line = True

    def solve_progress(self):
        """Install `solving` as the solvers' reporter (on a terminal only:
        loops traced with a reporter are not persistently cached)."""
        from ..solvers import progress as solve_progress

        if self.tty:
            self._solve_progress = solve_progress.Throttle(self.solving)
            solve_progress.set_reporter(self._solve_progress)
        return self

    def model(self, run: dict[str, Any], explicit) -> None:
        m = run["model"]
        if self.quiet:
            for w in m["warnings"]:
                print(f"Warning: {w}", file=sys.stderr)
            return
        head = f"Model: {os.path.basename(m['file'] or '<string>')}"
        if run["constants"]:
            head += f"  (constants {fmt_consts(run['constants'])})"
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
        for line in entry.get("filter", {}).get("text", ()):
            self.out(line)
        if "filter" in entry:
            self.out()
        if "value" in entry:
            bound = entry.get("bound")
            # (a certified error bound; none printed for exact values)
            shown = "" if not bound else f" (±{bound:.1e})"
            self.out(f"Result: {fmt(entry['value'])}{shown}")
        else:
            lo, hi = entry["range"]
            self.out(
                f"Result: [{fmt(lo)},{fmt(hi)}] (range of values over initial states)"
            )
        if entry.get("iterations"):
            res = entry.get("residual")
            extra = f", residual {res:.3g}" if isinstance(res, float) else ""
            self.out(f"Iterations: {entry['iterations']} ({entry['status']}{extra})")
        for attempt in entry.get("attempts", ()):
            self.out(f"Fallback: {attempt['text']}")
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
                    r = fmt(e["value"])
                elif "range" in e:
                    r = f"[{fmt(e['range'][0])},{fmt(e['range'][1])}]"
                else:
                    r = "Error"
                self.out("\t".join([fmt(consts[n]) for n in names] + [r]))

    def timing(self, runs: list[dict[str, Any]]) -> None:
        self.out()
        self.out("Timing (seconds):")
        for run in runs:
            where = f" [{fmt_consts(run['constants'])}]" if run["constants"] else ""
            t = run["timing"]
            self.out(f"  parse + check model{where}: {t['parse']:.4f}")
            self.out(
                f"  build state space{where}: {t['build']:.4f}"
                f" (compile {t.get('build_compile', 0.0):.4f})"
            )
            for e in run["properties"]:
                stages = {k: v for k, v in e.get("timing", {}).items() if k != "build"}
                parts = ", ".join(f"{k} {v:.4f}" for k, v in stages.items())
                how = " / ".join(str(e[k]) for k in ("method", "layout") if e.get(k))
                how = f" ({how})" if how and parts else ""
                self.out(f"  property {e['index']}{where}: {parts or 'n/a'}{how}")


def end_solve_progress() -> None:
    """Remove the solvers' reporter that `Printer.solve_progress` installed."""
    from ..solvers import progress as solve_progress

    solve_progress.set_reporter(None)


def error_text(e) -> str:
    """The error as the command line shows it: constants are given values
    with `--const` here (the API's hint names its `constants=` argument)."""
    from ..semantics.constants import MissingConstantsError, command_line_hint

    if isinstance(e, MissingConstantsError):
        e.rehint(command_line_hint(e.names))
    return str(e)
