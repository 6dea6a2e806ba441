"""State-space construction: jaxmc's vectorised builder vs Storm's C++ builder.

Each build runs in a fresh subprocess, so that peak memory (max RSS) is the
build's own. Times are wall-clock seconds of the build alone (jaxmc:
`explore.build` on a checked program; Storm: `stormpy.build_model` on a parsed
program with constants instantiated), plus jaxmc's parse+check time.

    python benchmarks/build.py                 # the default table
    python benchmarks/build.py --quick         # small sizes only
    python benchmarks/build.py --only tandem   # rows whose name contains "tandem"
    python benchmarks/build.py --no-storm
    python benchmarks/build.py --quick --explorer host,device --no-storm
    python benchmarks/build.py --set gpu --explorer device --no-storm
    python benchmarks/build.py --set gpu --explorer device --no-storm --cache DIR
    python benchmarks/build.py --repeat 3      # best of 3 fresh processes each

`--explorer` names jaxmc's explorer(s) (`host`: numpy; `device`: jitted on
the JAX backend, `jaxmc.explore.device`, its time including compilation;
`auto`), one row each. `--cache DIR` turns JAX's persistent compilation
cache on in each child (`jaxmc.enable_compilation_cache(DIR)`): run twice,
the second run shows builds whose compilations come from the cache.
`--set gpu` is the device explorer's GPU set (tandem c=2047, brp N=32768
MAX=5, herman N=17, crowds, nand); crowds and nand are looked up, like
every model, in `JAXMC_MODELS`, `.bench/models` (filled by
`benchmarks/accuracy.py prepare`) and `../shared/models/prism-examples`.

Prints a markdown table: states, transitions, times (jaxmc's compile time
of the build apart: tracing, lowering and backend compilation), the build's
CPU seconds (`time.process_time`, all threads of the process), states/s,
peak memory: "RSS MB" is the child's peak resident set (`VmHWM`; not
`ru_maxrss`, which a child started by `subprocess` inherits from its parent
at `exec`), "build MB" the build's own: the peak during the build (the
counter reset through `/proc/self/clear_refs` as it starts) less the
resident set at its start, i.e. without the interpreter and the imports
(jaxmc's imports, JAX among them, take ~225 MB; stormpy's ~56 MB).
`--repeat N` runs each build in N fresh processes and keeps the fastest
(wall clock) of each tool; a shared machine's noise only ever adds time.
The first line names the machine, the date and the versions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from _peers import environment, run_child


ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT.parent / "shared" / "models" / "prism-examples"

#: (name, model path relative to prism-examples, constants)
CASES = [
    ("tandem c=255", "ctmcs/tandem/tandem.sm", "c=255"),
    ("tandem c=250", "ctmcs/tandem/tandem.sm", "c=250"),
    ("tandem c=1023", "ctmcs/tandem/tandem.sm", "c=1023"),
    ("tandem c=2047", "ctmcs/tandem/tandem.sm", "c=2047"),
    ("cluster N=64", "ctmcs/cluster/cluster.sm", "N=64"),
    ("cluster N=256", "ctmcs/cluster/cluster.sm", "N=256"),
    ("herman N=13", "dtmcs/herman/herman13.pm", ""),
    ("herman N=15", "dtmcs/herman/herman15.pm", ""),
    ("kanban t=4", "ctmcs/kanban/kanban.sm", "t=4"),
    ("polling N=14", "ctmcs/polling/poll14.sm", ""),
    ("fms n=5", "ctmcs/fms/fms.sm", "n=5"),
    ("leader_sync 5-4", "dtmcs/leader_sync/leader5_4.pm", ""),
    ("consensus N=4", "mdps/consensus/coin4.nm", "K=2"),
]
#: The device explorer's GPU set (`--set gpu`).
GPU_CASES = [
    ("tandem c=2047", "ctmcs/tandem/tandem.sm", "c=2047"),
    ("brp N=32768 MAX=5", "dtmcs/brp/brp.pm", "N=32768,MAX=5"),
    ("herman N=17", "dtmcs/herman/herman17.pm", ""),
    ("crowds TotalRuns=6 CrowdSize=20", "prism-benchmarks/dtmcs/crowds/crowds.pm",
     "TotalRuns=6,CrowdSize=20"),
    ("nand N=60 K=4", "prism-benchmarks/dtmcs/nand/nand.pm", "N=60,K=4"),
]  # fmt: skip
QUICK = {
    "tandem c=255",
    "cluster N=64",
    "herman N=13",
    "leader_sync 5-4",
    "consensus N=4",
}


def _model(rel: str) -> Path:
    """`rel` under `JAXMC_MODELS`, `.bench/models` or the shared examples."""
    roots = [Path(os.environ["JAXMC_MODELS"])] if os.environ.get("JAXMC_MODELS") else []
    for root in roots + [ROOT / ".bench" / "models", EXAMPLES]:
        if (root / rel).exists():
            return root / rel
    return EXAMPLES / rel


def _one_jaxmc(path: str, consts: str, explorer: str = "host") -> dict:
    t0 = time.perf_counter()
    import jaxmc
    from jaxmc.explore import build
    from jaxmc.lang import parse_model
    from jaxmc.numerics.timing import compile_totals
    from jaxmc.semantics import check_program

    if os.environ.get("JAXMC_BENCH_CACHE"):
        jaxmc.enable_compilation_cache(os.environ["JAXMC_BENCH_CACHE"])

    text = Path(path).read_text()
    checked = check_program(
        parse_model(text, path), consts or None, source=text, file=path
    )
    rss0 = _reset_peak()
    t1, p1 = time.perf_counter(), time.process_time()
    c1 = compile_totals()
    m = build(checked, explorer=explorer)
    t2, p2 = time.perf_counter(), time.process_time()
    c2 = compile_totals()
    return {
        "compile_s": c2[0] - c1[0],
        "compiles": c2[1] - c1[1],
        "states": m.num_states,
        "transitions": m.num_transitions,
        "choices": m.num_choices,
        "front_s": t1 - t0,
        "build_s": t2 - t1,
        "cpu_s": p2 - p1,
        "build_mb": _memory()[1] - rss0,
    }


def _memory() -> tuple[float, float]:
    """This process's resident set and its peak (`VmRSS`, `VmHWM`), MB."""
    got = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                got[line[:5]] = int(line.split()[1]) / 1024
    return got.get("VmRSS", 0.0), got.get("VmHWM", 0.0)


def _reset_peak() -> float:
    """Reset the peak resident set to the current one (Linux); returns it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return _memory()[0]


def _one_storm(path: str, consts: str) -> dict:
    import stormpy

    prog = stormpy.parse_prism_program(path, prism_compatibility=True)
    undefined = {c.name for c in prog.constants if not c.defined}
    use = ",".join(
        kv for kv in consts.split(",") if kv and kv.split("=")[0] in undefined
    )
    if use:
        prog, _ = stormpy.instantiate_constants(prog, use)
    rss0 = _reset_peak()
    t1, p1 = time.perf_counter(), time.process_time()
    m = stormpy.build_model(prog)
    t2, p2 = time.perf_counter(), time.process_time()
    return {
        "states": m.nr_states,
        "transitions": m.nr_transitions,
        "choices": m.nr_choices,
        "build_s": t2 - t1,
        "cpu_s": p2 - p1,
        "build_mb": _memory()[1] - rss0,
    }


def _child(tool: str, path: str, consts: str) -> None:
    if tool.startswith("jaxmc"):
        out = _one_jaxmc(path, consts, tool.partition(":")[2] or "host")
    else:
        out = _one_storm(path, consts)
    out["peak_rss_mb"] = _memory()[1]
    print(json.dumps(out))


def _run(tool: str, path: Path, consts: str, timeout: float, repeat: int = 1) -> dict:
    """The fastest of `repeat` fresh-process builds (or the first error)."""
    cmd = [sys.executable, __file__, "--child", tool, str(path), consts]
    best: dict = {}
    for _ in range(max(1, repeat)):
        out = run_child(cmd, timeout, 60)
        if "build_s" not in out:
            return best or out
        if not best or out["build_s"] < best["build_s"]:
            best = out
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--child", nargs=3, metavar=("TOOL", "MODEL", "CONSTS"), help=argparse.SUPPRESS
    )
    ap.add_argument("--quick", action="store_true", help="small sizes only")
    ap.add_argument("--only", default=None, help="rows whose name contains this")
    ap.add_argument("--no-storm", action="store_true")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--repeat", type=int, default=1, help="best of N processes")
    ap.add_argument(
        "--explorer", default="host",
        help="jaxmc explorer(s), comma-separated: host, device, auto",
    )  # fmt: skip
    ap.add_argument("--env", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--set", choices=("default", "gpu"), default="default")
    ap.add_argument(
        "--cache", default=None, help="JAX's persistent compilation cache directory"
    )
    args = ap.parse_args(argv)
    if args.cache:
        os.environ["JAXMC_BENCH_CACHE"] = args.cache
    if args.child:
        _child(*args.child)
        return 0
    if args.env:
        print(json.dumps(environment()))
        return 0
    cases = [
        c
        for c in (GPU_CASES if args.set == "gpu" else CASES)
        if (not args.quick or c[0] in QUICK)
        and (args.only is None or args.only in c[0])
    ]
    head = (
        "| model | states | transitions | jaxmc build s | CPU s "
        "| of it compile s (n) | jaxmc states/s "
        "| jaxmc RSS MB | build MB | Storm build s | CPU s | Storm states/s "
        "| Storm RSS MB | build MB | parse+check s |"
    )
    # In a child: importing JAX here would raise every child's `ru_maxrss`.
    env = run_child([sys.executable, __file__, "--env"], 300)
    print(
        f"{env['date']}, {env['cpu']}, {env['cores']} cores, Python {env['python']}, "
        f"JAX {env['jax']} ({env['device']}), stormpy {env.get('stormpy', '-')}, "
        f"best of {max(1, args.repeat)}"
    )
    print(head)
    print("|" + "|".join("---" for _ in range(15)) + "|")
    explorers = args.explorer.split(",")
    for (name, rel, consts), explorer in (
        (c, e) for c in cases for e in explorers
    ):  # fmt: skip
        path = _model(rel)
        j = _run(f"jaxmc:{explorer}", path, consts, args.timeout, args.repeat)
        if len(explorers) > 1:
            name = f"{name} [{explorer}]"
        s = (
            {"error": "skipped"}
            if args.no_storm or (explorer != explorers[0])
            else _run("storm", path, consts, args.timeout, args.repeat)
        )

        def cell(d, key, fmt):
            return fmt.format(d[key]) if key in d else d.get("error", "-")

        def rate(d):
            return (
                f"{d['states'] / d['build_s']:,.0f}"
                if "build_s" in d and d["build_s"] > 0
                else "-"
            )

        if (
            "states" in j
            and "states" in s
            and (j["states"], j["transitions"]) != (s["states"], s["transitions"])
        ):
            name += " (COUNTS DIFFER)"
        ref = j if "states" in j else s
        print(
            f"| {name} | {ref.get('states', '-')} | {ref.get('transitions', '-')} "
            f"| {cell(j, 'build_s', '{:.2f}')} | {cell(j, 'cpu_s', '{:.2f}')} "
            f"| {cell(j, 'compile_s', '{:.2f}')} ({j.get('compiles', '-')}) "
            f"| {rate(j)} | "
            f"{cell(j, 'peak_rss_mb', '{:.0f}')} | {cell(j, 'build_mb', '{:.0f}')} "
            f"| {cell(s, 'build_s', '{:.2f}')} | {cell(s, 'cpu_s', '{:.2f}')} "
            f"| {rate(s)} | "
            f"{cell(s, 'peak_rss_mb', '{:.0f}')} | {cell(s, 'build_mb', '{:.0f}')} "
            f"| {cell(j, 'front_s', '{:.2f}')} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
