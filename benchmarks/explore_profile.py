"""Where the device explorer's time goes: compilations vs loop runs vs the
finish, per model (issue 21).

Each model is built in a fresh subprocess with `explore.build(...,
explorer="device")`; the script wraps the explorer's stages (the level loop
and each of its calls, the buffer regrowth, the device post pass, the host
`assemble`) with timers and listens to JAX's compile events
(`jax.monitoring`: tracing, lowering to MLIR, backend compilation), so that
each stage's wall time is split into compile and run. It only wraps module
attributes (no change to jaxmc), so it runs on any tree that has
`jaxmc.explore.device`.

    python benchmarks/explore_profile.py                 # the CPU set
    python benchmarks/explore_profile.py --set gpu       # the GPU set
    python benchmarks/explore_profile.py --only brp --host
    JAXMC_MODELS=/tmp/jaxmc-accuracy python benchmarks/explore_profile.py

`--host` adds the host builder's time for the same model (another fresh
process). Models are looked up as in `benchmarks/build.py`. Output: one
markdown table, then one line per model with every stage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))

from _peers import run_child  # noqa: E402
from build import GPU_CASES, _model  # noqa: E402


#: (name, model path relative to prism-examples, constants)
CPU_CASES = [
    ("tandem c=255", "ctmcs/tandem/tandem.sm", "c=255"),
    ("tandem c=511", "ctmcs/tandem/tandem.sm", "c=511"),
    ("brp N=256 MAX=5", "dtmcs/brp/brp.pm", "N=256,MAX=5"),
    ("brp N=1024 MAX=5", "dtmcs/brp/brp.pm", "N=1024,MAX=5"),
    ("brp N=2048 MAX=5", "dtmcs/brp/brp.pm", "N=2048,MAX=5"),
    ("crowds 3/5", "prism-benchmarks/dtmcs/crowds/crowds.pm",
     "TotalRuns=3,CrowdSize=5"),
    ("herman N=9", "dtmcs/herman/herman9.pm", ""),
    ("herman N=11", "dtmcs/herman/herman11.pm", ""),
    ("herman N=13", "dtmcs/herman/herman13.pm", ""),
]  # fmt: skip
LARGE_GPU = [
    ("tandem c=1023", "ctmcs/tandem/tandem.sm", "c=1023"),
    ("brp N=2048 MAX=5", "dtmcs/brp/brp.pm", "N=2048,MAX=5"),
]


class _Prof:
    """Wall and compile seconds per stage; stages nest (the inner one's time
    is taken out of the outer one's)."""

    def __init__(self):
        self.wall: dict[str, float] = {}
        self.compile: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.compiles: dict[str, int] = {}
        self.stack: list[list] = []  # [name, start, inner seconds]
        self.events: dict[str, float] = {}
        self.backend_compiles = 0

    def on_duration(self, name: str, secs: float, **_) -> None:
        self.events[name] = self.events.get(name, 0.0) + secs
        if not name.startswith("/jax/core/compile/"):
            return
        where = self.stack[-1][0] if self.stack else "other"
        self.compile[where] = self.compile.get(where, 0.0) + secs
        if name.endswith("backend_compile_duration"):
            self.backend_compiles += 1
            self.compiles[where] = self.compiles.get(where, 0) + 1

    def wrap(self, obj, attr: str, name: str, block: bool = True):
        import jax

        fn = getattr(obj, attr)
        prof = self

        def timed(*a, **k):
            prof.stack.append([name, time.perf_counter(), 0.0])
            try:
                out = fn(*a, **k)
                if block:
                    jax.block_until_ready(out)
                return out
            finally:
                _, t0, inner = prof.stack.pop()
                dt = time.perf_counter() - t0
                prof.wall[name] = prof.wall.get(name, 0.0) + dt - inner
                prof.calls[name] = prof.calls.get(name, 0) + 1
                if prof.stack:
                    prof.stack[-1][2] += dt

        setattr(obj, attr, timed)
        return timed


def _install(prof: _Prof) -> None:
    """Wrap the device explorer's stages (whatever of them this tree has)."""
    from jaxmc.explore.device import explorer as E, finish as F, step as S

    make_loop = S.make_loop

    def make_loop_timed(*a, **k):
        run = make_loop(*a, **k)
        box = type("Box", (), {})()
        box.run = run
        return prof.wrap(box, "run", "loop")

    S.make_loop = make_loop_timed
    for mod, attr, name in [
        (S, "seed", "seed"),
        (S, "regrow", "regrow"),
        (S, "epoch", "epoch"),
        (E, "finish", "finish"),
        (F, "_collect" if hasattr(F, "_collect") else "_join", "finish.join"),
        (F, "label_ids", "finish.labels"),
        (F, "assemble", "finish.assemble (host)"),
        (E, "Program", "program"),
    ]:
        if hasattr(mod, attr):
            prof.wrap(mod, attr, name, block=name != "program")
    # Newer trees: whatever `explore` calls by these names.
    for attr in ("finish_device", "post", "labels_on_device"):
        if hasattr(F, attr):
            prof.wrap(F, attr, f"finish.{attr}")


def _child(path: str, consts: str, explorer: str) -> None:
    import jax
    from jax import monitoring

    t_import = time.perf_counter()
    from jaxmc.explore import build
    from jaxmc.lang import parse_model
    from jaxmc.semantics import check_program

    prof = _Prof()
    monitoring.register_event_duration_secs_listener(prof.on_duration)
    if explorer == "device":
        _install(prof)
    text = Path(path).read_text()
    checked = check_program(
        parse_model(text, path), consts or None, source=text, file=path
    )
    t0 = time.perf_counter()
    prof.stack.append(["build (rest)", t0, 0.0])
    m = build(checked, explorer=explorer)
    _, _, inner = prof.stack.pop()
    total = time.perf_counter() - t0
    prof.wall["build (rest)"] = total - inner
    out = {
        "states": m.num_states,
        "transitions": m.num_transitions,
        "build_s": total,
        "front_s": t0 - t_import,
        "backend": jax.default_backend(),
        "device": str(jax.devices()[0].device_kind),
        "wall": prof.wall,
        "compile": prof.compile,
        "calls": prof.calls,
        "compiles": prof.compiles,
        "backend_compiles": prof.backend_compiles,
        "events": prof.events,
    }
    print(json.dumps(out))


def _run(path: Path, consts: str, explorer: str, timeout: float) -> dict:
    cmd = [sys.executable, __file__, "--child", str(path), consts, explorer]
    return run_child(cmd, timeout, 80)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--set", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--only", default=None, help="rows whose name contains this")
    ap.add_argument("--host", action="store_true", help="time the host builder too")
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    cases = CPU_CASES if args.set == "cpu" else LARGE_GPU + GPU_CASES
    cases = [c for c in cases if args.only is None or args.only in c[0]]
    print(
        "| model | states | device build s | states/s | backend compiles | compile s "
        "| loop calls | loop run s | regrow s | finish device s | assemble (host) s "
        "| host builder s |"
    )
    print("|" + "---|" * 12)
    details = []
    for name, rel, consts in cases:
        path = _model(rel)
        if not path.exists():
            print(f"| {name} | missing {rel} |" + " |" * 10, flush=True)
            continue
        d = _run(path, consts, "device", args.timeout)
        h = _run(path, consts, "host", args.timeout) if args.host else {}
        if "error" in d:
            print(f"| {name} | {d['error']} |" + " |" * 10, flush=True)
            continue
        w, c = d["wall"], d["compile"]
        comp_s = sum(c.values())
        loop_run = w.get("loop", 0.0) - c.get("loop", 0.0)
        fin_dev = sum(
            w.get(k, 0.0) for k in w if k.startswith("finish") and "assemble" not in k
        )
        host_s = f"{h['build_s']:.2f}" if "build_s" in h else h.get("error", "-")
        print(
            f"| {name} | {d['states']:,} | {d['build_s']:.2f} "
            f"| {d['states'] / d['build_s']:,.0f} | {d['backend_compiles']} "
            f"| {comp_s:.2f} | {d['calls'].get('loop', 0)} | {loop_run:.2f} "
            f"| {w.get('regrow', 0.0):.2f} | {fin_dev:.2f} "
            f"| {w.get('finish.assemble (host)', 0.0):.2f} | {host_s} |",
            flush=True,
        )
        details.append((name, d))
    print()
    for name, d in details:
        stages = ", ".join(
            f"{k} {d['wall'][k]:.2f}s ({d['calls'].get(k, 1)}x, compile "
            f"{d['compile'].get(k, 0.0):.2f}s/{d['compiles'].get(k, 0)})"
            for k in sorted(d["wall"], key=lambda k: -d["wall"][k])
        )
        print(f"- {name} [{d['backend']}, {d['device']}]: {stages}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
