"""jaxmc and Storm side by side, in one run, on the same machine.

For each model of the GPU-PRISM set (herman, cluster, tandem, kanban, fms,
polling) plus brp, leader_sync, consensus and zeroconf, from PRISM's examples
in `../shared/models/prism-examples`, one representative property of the
model's own properties file is checked by both tools. We report the states,
both values and whether they agree (1e-6 relative), build and check times and
the ratio jaxmc/Storm.

    python benchmarks/compare.py --size small
    python benchmarks/compare.py --size small --size medium --markdown  # RESULTS.md

Timings:
- jaxmc: `build` is `jaxmc.build` (state-space exploration; the model is
  parsed before); `check` is the first `jaxmc.check`, so it includes JAX's
  tracing and compilation; `warm` is a second, identical check on the built
  model (compiled code reused, the cost a parameter sweep pays per point).
- Storm: `build` and `check` as reported by `../shared/tools/storm_ref.py`
  (stormpy's `build_model` over the full reachable state space, as PRISM,
  and `model_checking`), run in a subprocess so that the two tools do not
  share a heap. The Storm solver setting is `--storm-solver` (default
  `storm-default`: Storm's CLI defaults, 1e-6 relative, non-sound, like
  jaxmc's and PRISM's defaults).
- ratio: (jaxmc build + check) / (Storm build + check); > 1 means jaxmc is
  slower. "ratio warm" uses jaxmc's warm check (compilation excluded).

Both tools stop their iterations at a relative change of 1e-6, which bounds
the change, not the error: values can differ in the 6th digit without either
being wrong. Rows that differ by more than 1e-6 relative are marked and the
relative difference is shown.

crowds and nand are only in PRISM's regression suite as interval DTMCs
(`idtmcs/`), which jaxmc does not support; they are listed as skipped.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peers import environment, storm_available, storm_run  # noqa: E402


ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
EXAMPLES = SHARED / "models" / "prism-examples"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "## jaxmc vs Storm (benchmarks/compare.py)"


@dataclass(frozen=True)
class Case:
    name: str
    model: str  # relative to prism-examples; may use {size}
    props: str  # the model's properties file, relative to prism-examples
    prop: str  # the property as written in it (Storm-compatible syntax)
    sizes: dict[str, tuple[str, str]]  # size -> (value for {size}, -const)
    #: Declarations of the properties file's constants the property uses.
    decls: str = ""
    #: Storm wants the model type keyword first: hand it a temporary copy with
    #: the keyword moved to the top (the same model).
    type_first: bool = False


#: One representative property per model, taken from its properties file.
#: (herman's file uses PRISM's old `{"init"}{max}` filter syntax, which Storm
#: does not read; its `filter(max, ..., "init")` form is used instead.)
CASES = [
    Case("herman", "dtmcs/herman/herman{size}.pm", "dtmcs/herman/herman.pctl",
         'filter(max, R=? [ F "stable" ], "init")',
         {"small": ("7", ""), "medium": ("11", ""), "large": ("15", "")}),
    Case("cluster", "ctmcs/cluster/cluster.sm", "ctmcs/cluster/cluster.csl",
         'P=? [ true U<=T !"minimum" ]',
         {"small": ("", "N=8,T=10"), "medium": ("", "N=32,T=10"),
          "large": ("", "N=128,T=10")},
         decls="const double T;"),
    Case("tandem", "ctmcs/tandem/tandem.sm", "ctmcs/tandem/tandem.csl",
         "P=? [ true U<=T sc=c ]",
         {"small": ("", "c=15,T=1"), "medium": ("", "c=63,T=1"),
          "large": ("", "c=255,T=1")},
         decls="const double T;"),
    Case("kanban", "ctmcs/kanban/kanban.sm", "ctmcs/kanban/kanban.csl",
         'R{"tokens_cell1"}=? [ S ]',
         {"small": ("", "t=2"), "medium": ("", "t=3"), "large": ("", "t=4")}),
    Case("fms", "ctmcs/fms/fms.sm", "ctmcs/fms/fms.csl",
         'R{"productivity"}=? [ S ]',
         {"small": ("", "n=2"), "medium": ("", "n=3"), "large": ("", "n=5")}),
    Case("polling", "ctmcs/polling/poll{size}.sm", "ctmcs/polling/poll.csl",
         "P=? [ !(s=2 & a=1) U (s=1 & a=1) ]",
         {"small": ("5", ""), "medium": ("9", ""), "large": ("13", "")}),
    Case("brp", "dtmcs/brp/brp.pm", "dtmcs/brp/brp.pctl",
         "P=? [ true U s=5 ]",
         {"small": ("", "N=16,MAX=2"), "medium": ("", "N=64,MAX=5"),
          "large": ("", "N=512,MAX=5")}),
    Case("leader_sync", "dtmcs/leader_sync/leader{size}.pm",
         "dtmcs/leader_sync/leader.pctl",
         'R{"num_rounds"}=? [ F "elected" ]',
         {"small": ("3_4", ""), "medium": ("4_6", ""), "large": ("5_8", "")}),
    Case("consensus", "mdps/consensus/coin{size}.nm", "mdps/consensus/coin.pctl",
         'Pmin=? [ F "finished"&"all_coins_equal_0" ]',
         {"small": ("2", "K=2"), "medium": ("4", "K=4"), "large": ("6", "K=4")}),
    Case("zeroconf", "mdps/zeroconf/zeroconf.nm", "mdps/zeroconf/zeroconf.pctl",
         "Pmin=?[ true U (l=4 & ip=1) ]",
         {"small": ("", "N=1000,K=2,err=0,reset=true"),
          "medium": ("", "N=1000,K=4,err=0,reset=true"),
          "large": ("", "N=1000,K=8,err=0,reset=true")},
         type_first=True),
]  # fmt: skip
SKIPPED = {
    "crowds": "only an interval DTMC in PRISM's tests (idtmcs/): not supported by "
    "jaxmc",
    "nand": "only an interval DTMC in PRISM's tests (idtmcs/): not supported by jaxmc",
}


def run_jaxmc(
    model_path: Path, consts: str, prop: str, decls: str, epsilon: float
) -> dict:
    import jaxmc

    out: dict = {}
    try:
        t0 = time.perf_counter()
        model = jaxmc.load_model(model_path, consts or None)
        out["parse_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        explicit = jaxmc.build(model)
        out["build_s"] = time.perf_counter() - t0
        out["states"] = explicit.num_states
        out["transitions"] = explicit.num_transitions
        t0 = time.perf_counter()
        props = jaxmc.parse_properties(f"{decls}\n{prop};", model, consts or None)
        result = jaxmc.check(model, 0, properties=props, epsilon=epsilon)
        out["check_s"] = time.perf_counter() - t0
        out["value"] = _plain(result.value)
        out["iterations"] = result.iterations
        t0 = time.perf_counter()
        jaxmc.check(model, 0, properties=props, epsilon=epsilon)
        out["warm_s"] = time.perf_counter() - t0
    except jaxmc.JaxmcError as e:
        out["error"] = str(e).splitlines()[0]
    return out


def run_storm(
    model_path: Path,
    consts: str,
    prop: str,
    solver: str,
    timeout: float,
    type_first: bool = False,
) -> dict:
    if type_first:
        text = model_path.read_text()
        kw = re.search(
            r"^(dtmc|ctmc|mdp|probabilistic|stochastic|nondeterministic)\s*$",
            text,
            re.M,
        )
        text = kw.group(1) + "\n" + text[: kw.start()] + text[kw.end() :]
        tmp = Path(tempfile.mkdtemp()) / model_path.name
        tmp.write_text(text)
        model_path = tmp
    return storm_run(model_path, consts, prop, solver, timeout)


def _plain(v):
    return v.item() if hasattr(v, "item") else v


def agree(a, b, rtol: float = 1e-6) -> tuple[bool, float]:
    """(whether a and b agree to `rtol` relative, their relative difference)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b, 0.0 if a == b else math.inf
    a, b = float(a), float(b)
    if a == b:
        return True, 0.0
    diff = abs(a - b) / max(abs(a), abs(b))
    return diff <= rtol, diff


def fmt_t(s) -> str:
    return "—" if s is None else f"{s:.3f}"


def fmt_v(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v).lower()
    return f"{v:.10g}"


def table(rows: list[dict], with_storm: bool) -> str:
    head = ["model", "constants", "property", "states", "jaxmc value"]
    if with_storm:
        head += ["Storm value", "agree (1e-6 rel)"]
    head += ["jaxmc build s", "jaxmc check s", "jaxmc warm s"]
    if with_storm:
        head += ["Storm build s", "Storm check s", "ratio", "ratio warm"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        j, s = r["jaxmc"], r.get("storm") or {}
        consts = r["consts"] or "—"
        cells = [
            r["label"],
            f"`{consts}`",
            f"`{r['prop']}`",
            f"{j.get('states', s.get('states', 0)):,}",
        ]
        cells.append(
            fmt_v(j.get("value")) if "error" not in j else f"error: {j['error']}"
        )
        if with_storm:
            cells.append(
                fmt_v(s.get("value")) if "error" not in s else f"error: {s['error']}"
            )
            if "value" in j and "value" in s and s["value"] is not None:
                ok, diff = agree(j["value"], s["value"])
                if ok:
                    cells.append("yes")
                elif r.get("reference") is not None:
                    ej = agree(j["value"], r["reference"])[1]
                    es = agree(s["value"], r["reference"])[1]
                    cells.append(
                        f"no ({diff:.1e}); vs Storm sound: jaxmc {ej:.1e}, Storm "
                        f"{es:.1e}"
                    )
                else:
                    cells.append(f"**no** (rel. diff {diff:.1e})")
            else:
                cells.append("—")
        cells += [
            fmt_t(j.get("build_s")),
            fmt_t(j.get("check_s")),
            fmt_t(j.get("warm_s")),
        ]
        if with_storm:
            cells += [fmt_t(s.get("build_s")), fmt_t(s.get("check_s"))]
            for key in ("check_s", "warm_s"):
                try:
                    ratio = (j["build_s"] + j[key]) / (s["build_s"] + s["check_s"])
                    cells.append(f"{ratio:.1f}×")
                except (KeyError, TypeError, ZeroDivisionError):
                    cells.append("—")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def section(runs, env, args, with_storm: bool) -> str:
    sizes = " ".join(f"--size {size}" for size, _, _ in runs)
    solver = args.storm_solver
    solver = f" --storm-solver {solver}" if solver != "storm-default" else ""
    parts = [
        subsection_heading(env),
        "",
        f"Measured {env['date']} with `python benchmarks/compare.py {sizes}"
        f"{solver} --markdown`.",
        "",
        f"- Device: {env['cpu']}, {env['cores']} cores; JAX device `{env['device']}`",
        f"- Versions: jaxmc {env['jaxmc']}, JAX {env['jax']}, Python {env['python']}"
        + (
            f", stormpy {env['stormpy']} (Storm solver setting `{args.storm_solver}`)"
            if with_storm
            else ""
        ),  # fmt: skip
        f"- Load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} "
        "(other work on the machine makes times noisy)",
        "",
    ]
    if not with_storm:
        parts += ["stormpy is not importable here: the Storm columns are left out.", ""]
    for size, rows, wall in runs:
        parts += [
            f"#### --size {size} (whole run {wall:.0f} s)",
            "",
            table(rows, with_storm),
            "",
        ]
    parts += [
        "jaxmc *check* includes JAX tracing and compilation (first call); *warm* is "
        "the same check again on the built model. Storm times are stormpy's "
        "`build_model` and `model_checking` in a separate process. ratio = "
        "(jaxmc build + check) / (Storm build + check); ratio warm uses jaxmc's "
        "warm check instead. Both tools stop at a 1e-6 "
        "relative change, so values may differ in the 6th significant digit: "
        "where they differ by more than 1e-6 relative, the agree column gives "
        "each tool's relative distance to Storm's sound engine (`storm_ref.py "
        "--solver sound`), i.e. which one stopped further from the true value.",
        "",
    ]
    for name, why in SKIPPED.items():
        parts.append(f"- {name}: skipped, {why}.")
    return "\n".join(parts) + "\n"


def subsection_heading(env) -> str:
    """The heading of this machine's part of the section: one per device
    kind, so that a CPU run does not replace a GPU host's tables."""
    dev = str(env["device"])
    if dev.endswith("(gpu)") or "cuda" in dev:
        return f"### On an {dev.rsplit(' (', 1)[0]} host"
    return f"### On the {env['cores']}-core CPU"


def write_section(text: str) -> None:
    """Replace this machine's subsection (`text` starts with its `### `
    heading) of the "jaxmc vs Storm" section of RESULTS.md, up to the next
    `### ` or `## ` heading, leaving the rest as it is."""
    old = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    heading = text.splitlines()[0]
    if SECTION not in old:
        old = old.rstrip("\n") + "\n\n" + SECTION + "\n"
    sub = re.compile(re.escape(heading) + r"\n.*?(?=^### |^## |\Z)", re.S | re.M)
    head, _, rest = old.partition(SECTION)
    end = re.search(r"^## ", rest, re.M)
    body, tail = (rest[: end.start()], rest[end.start() :]) if end else (rest, "")
    if sub.search(body):
        body = sub.sub(lambda _: text + "\n", body, count=1)
    else:
        body = body.rstrip("\n") + "\n\n" + text + "\n"
    RESULTS.write_text((head + SECTION + body + tail).rstrip("\n") + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--size",
        choices=("small", "medium", "large"),
        action="append",
        help="instance sizes to run (repeatable; default small)",
    )
    p.add_argument("--only", action="append", default=[], metavar="NAME",
                   help="run only these models (repeatable)")  # fmt: skip
    p.add_argument(
        "--storm-solver",
        default="storm-default",
        help="storm_ref.py --solver setting (default storm-default)",
    )
    p.add_argument("--no-storm", action="store_true", help="leave Storm out")
    p.add_argument("--timeout", type=float, default=600, help="per Storm run, seconds")
    p.add_argument(
        "--epsilon",
        type=float,
        default=1e-6,
        help="jaxmc's convergence threshold (relative; default 1e-6 as PRISM)",
    )
    p.add_argument(
        "--markdown",
        action="store_true",
        help=f"write the table into {RESULTS.relative_to(ROOT)}",
    )
    p.add_argument("--json", metavar="FILE", help="also write the raw results as JSON")
    args = p.parse_args(argv)
    if not EXAMPLES.is_dir():
        print(f"PRISM examples not found at {EXAMPLES}", file=sys.stderr)
        return 1
    with_storm = not args.no_storm and storm_available()
    if not with_storm and not args.no_storm:
        print("note: stormpy (or storm_ref.py) not available: Storm columns skipped",
              file=sys.stderr)  # fmt: skip
    env = environment()
    runs = []
    for size_name in args.size or ["small"]:
        start = time.perf_counter()
        rows = run_size(size_name, args, with_storm)
        runs.append((size_name, rows, time.perf_counter() - start))
        print(f"\n--size {size_name}")
        print(table(rows, with_storm))
    for name, why in SKIPPED.items():
        print(f"- {name}: skipped, {why}.")
    if args.json:
        Path(args.json).write_text(json.dumps({"env": env, "runs": runs}, indent=2))
    if args.markdown:
        write_section(section(runs, env, args, with_storm))
        print(f"updated {RESULTS}", file=sys.stderr)
    return 0


def run_size(size_name: str, args, with_storm: bool) -> list[dict]:
    rows = []
    for case in CASES:
        if args.only and case.name not in args.only:
            continue
        size, consts = case.sizes[size_name]
        path = EXAMPLES / case.model.format(size=size)
        label = case.name + (f" ({size})" if size else "")
        print(f"{label} {consts} ...", file=sys.stderr, flush=True)
        row = {"label": label, "consts": consts, "prop": case.prop,
               "jaxmc": run_jaxmc(path, consts, case.prop, case.decls,
                                  args.epsilon)}  # fmt: skip
        if with_storm:
            row["storm"] = run_storm(path, consts, case.prop, args.storm_solver,
                                     args.timeout, case.type_first)  # fmt: skip
            j, s = row["jaxmc"], row["storm"]
            if "value" in j and s.get("value") is not None:
                row["disagree"] = not agree(j["value"], s["value"])[0]
            if row.get("disagree"):
                # Which one is off? Ask Storm's sound engine for a reference.
                ref = run_storm(
                    path, consts, case.prop, "sound", args.timeout, case.type_first
                )
                if ref.get("value") is not None:
                    row["reference"] = ref["value"]
        print(
            f"  {json.dumps({k: v for k, v in row.items() if k != 'label'})}",
            file=sys.stderr,
        )
        rows.append(row)
    return rows


if __name__ == "__main__":
    sys.exit(main())
