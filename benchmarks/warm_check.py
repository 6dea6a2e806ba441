"""Where a warm check spends its time (issue 21: "host work after the build
is O(1) per model: the warm check of kanban t=5 spends >= 80% of its time
in device solves").

Per instance of `accuracy.py`'s list, in one process: build, a first check
and `--repeat` warm checks of the same property (and, with `--also PROP`,
one of another property of the model, cold for that property). Each device
solve loop (the long-run Krylov, Jacobi and value iterations, the sound
linear solves' BiCGStab and value iteration, their residual certificate
where it runs on the device and their masked values made there, the graph
searches on the device) is wrapped
and synchronised (`block_until_ready`), so "device" is the wall time inside
those calls and "host" (wall less device) the rest of the check: graph
work, layout conversion, certificates, transfers and Python. Also the
check's own split (`CheckResult.timing`).

    python benchmarks/warm_check.py --size cpu --only kanban
    python benchmarks/warm_check.py --size gpu --only polling \
        --set jaxmc.numerics.graph_device.MODE=off   # a module constant, A/B
    python benchmarks/warm_check.py --size gpu --only kanban leader_sync \\
        --json $OUT/warm.json --md $OUT/warm.md
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from accuracy import cases, locate  # noqa: E402


#: The device loops: (module, function) wrapped where they are called from.
WRAPPED = (
    ("jaxmc.numerics.steady_krylov", "bicgstab_l"),
    ("jaxmc.numerics.steady_krylov", "device_gmres"),
    ("jaxmc.numerics.steady_longrun", "pair_jacobi"),
    ("jaxmc.numerics.steady_longrun", "relative_value_iteration"),
    ("jaxmc.numerics.sound", "bicgstab"),
    ("jaxmc.numerics.sound", "sound_value_iteration"),
    ("jaxmc.numerics.graph_device", "_exists_jit"),
    ("jaxmc.numerics.graph_device", "_forall_jit"),
    ("jaxmc.numerics.graph_device", "_prob1E"),
    ("jaxmc.numerics.certificate", "_residual_kernel"),
    ("jaxmc.numerics.certificate", "_supersolution_kernel"),
    ("jaxmc.numerics.certificate", "_mv_kernel"),
    ("jaxmc.numerics.host_system", "_masked_values"),
    ("jaxmc.numerics.steady_bsccs", "_certify_kernel"),
)


def _wrap(clock: dict) -> None:
    import importlib

    import jax

    for mod_name, name in WRAPPED:
        mod = importlib.import_module(mod_name)
        f = getattr(mod, name)

        @functools.wraps(f)
        def timed(*a, _f=f, **k):
            t = time.perf_counter()
            out = _f(*a, **k)
            jax.block_until_ready(out)
            clock["device"] += time.perf_counter() - t
            clock["calls"] += 1
            return out

        setattr(mod, name, timed)


def _apply(settings: list[str]) -> None:
    """`module.NAME=value` (value a Python literal, else a string): set
    before the checks, for an A/B comparison of a module constant."""
    import ast
    import importlib

    for item in settings:
        target, _, value = item.partition("=")
        mod_name, _, name = target.rpartition(".")
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            pass
        setattr(importlib.import_module(mod_name), name, value)


def gpu_defaults() -> None:
    """The choices `jaxmc.numerics` makes on a GPU, made here on any backend
    (`--gpu-defaults`): graph searches and certificates on the device for
    large models, the GPU's automatic layouts (their builds and SpMVs stay
    the CPU's: numpy builders, the plain-JAX kernels), the GPU's bound for
    the topological method. For host time of warm checks as a GPU runs
    them, measured on a CPU."""
    import jaxmc.numerics.certificate as certificate
    import jaxmc.numerics.device as device
    import jaxmc.numerics.graph_device as graph_device
    import jaxmc.numerics.matrices as matrices
    import jaxmc.numerics.methods as methods
    import jaxmc.numerics.steady_bsccs as steady_bsccs
    import jaxmc.numerics.steady_solve as steady_solve

    graph_device.use_device = lambda m: m.num_states >= graph_device.MIN_STATES
    certificate.use_device = lambda nnz: nnz >= certificate.CERTIFY_DEVICE_MIN_ENTRIES
    steady_bsccs.jax = _GpuBackend()
    for mod in (device, matrices, steady_solve):
        mod.on_gpu = lambda: True
    methods.TOPOLOGICAL_MAX_ENTRIES = methods.TOPOLOGICAL_DEVICE_MAX_ENTRIES


class _GpuBackend:
    """`jax` with `default_backend()` "gpu" (for one module's test)."""

    def default_backend(self) -> str:
        return "gpu"

    def __getattr__(self, name):
        import jax

        return getattr(jax, name)


def one(
    path: str,
    consts: str,
    prop: str,
    repeat: int,
    also: str | None,
    settings=(),
    profile: int = 0,
    gpu: bool = False,
) -> dict:
    import jax

    import jaxmc

    if gpu:
        gpu_defaults()
    _apply(list(settings))

    clock = {"device": 0.0, "calls": 0}
    _wrap(clock)
    out: dict = {"device": str(jax.devices()[0]), "checks": [], "set": list(settings)}
    model = jaxmc.load_model(path, consts or None)
    t = time.perf_counter()
    em = jaxmc.build(model)
    out.update(build_s=time.perf_counter() - t, states=int(em.num_states))
    runs = [("first", prop)] + [("warm", prop)] * repeat
    if also:
        runs.append(("other", also))
    for i, (kind, p) in enumerate(runs):
        clock.update(device=0.0, calls=0)
        prof = None
        if profile and kind == "warm" and i == repeat:  # (the last warm check)
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        t = time.perf_counter()
        r = jaxmc.check(model, p)
        wall = time.perf_counter() - t
        if prof is not None:
            import io
            import pstats

            prof.disable()
            text = io.StringIO()
            stats = pstats.Stats(prof, stream=text).sort_stats("tottime")
            stats.print_stats(profile)
            out["profile"] = text.getvalue()
        out["checks"].append(
            dict(
                kind=kind,
                prop=p,
                wall_s=wall,
                device_s=clock["device"],
                device_calls=clock["calls"],
                device_share=clock["device"] / wall if wall else 0.0,
                value=float(r.value),
                bound=getattr(r, "bound", None),
                method=r.method,
                timing={k: float(v) for k, v in (r.timing or {}).items()},
            )
        )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", choices=("small", "cpu", "gpu"), default="small")
    p.add_argument("--only", nargs="+")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--also", help="another property checked after the warm ones")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="MODULE.NAME=VALUE",
        help="set a module constant in the child first (repeatable)",
    )
    p.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="cProfile the last warm check; print its N costliest functions",
    )
    p.add_argument(
        "--gpu-defaults",
        action="store_true",
        help="make numerics' GPU choices on this backend (`gpu_defaults`)",
    )
    p.add_argument("--json", type=Path)
    p.add_argument("--md", type=Path)
    p.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        path, consts, prop, repeat, also = args.child
        rec = one(
            path,
            consts,
            prop,
            int(repeat),
            also or None,
            args.set,
            args.profile,
            args.gpu_defaults,
        )
        print("RESULT " + json.dumps(rec))
        return
    rows = []
    for c in cases(args.size, args.only):
        path = locate(c.model)
        label = f"{c.name} {c.consts}".strip()
        if args.set:
            label += " [" + ", ".join(x.rpartition(".")[2] for x in args.set) + "]"
        if args.gpu_defaults:
            label += " [GPU defaults]"
        rec: dict = {"instance": label, "prop": c.prop}
        if path is None:
            rec["error"] = "model not found"
            rows.append(rec)
            continue
        cmd = [sys.executable, __file__, "--child", str(path), c.consts, c.prop]
        cmd += [str(args.repeat), args.also or ""]
        cmd += [f"--set={x}" for x in args.set]
        cmd += [f"--profile={args.profile}"]
        cmd += ["--gpu-defaults"] if args.gpu_defaults else []
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=args.timeout
            )
            line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
            if line:
                rec.update(json.loads(line[-1][7:]))
            else:
                rec["error"] = (done.stderr or done.stdout).strip()[-300:]
        except subprocess.TimeoutExpired:
            rec["error"] = f"timeout after {args.timeout:.0f} s"
        rows.append(rec)
        print(rec.pop("profile", ""), file=sys.stderr)
        print(json.dumps(rec), flush=True)
    md = _table(rows)
    print(md)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.md:
        args.md.write_text(md)


HEAD = (
    "| instance | states | build s | check | wall s | device s (calls) | host s"
    " | device share | precompute / layout / solve / compile s | value (± bound)"
    " | method |\n"
    "|---|---:|---:|---|---:|---:|---:|---:|---|---|---|\n"
)
SPLIT = ("precompute", "layout", "solve", "compile")


def _table(rows) -> str:
    out = []
    for r in rows:
        if "error" in r:
            err = r["error"].replace("\n", " ").replace("|", "/")
            out.append(f"| {r['instance']} | | | | | | | | | {err} | |")
            continue
        for i, c in enumerate(r["checks"]):
            split = " / ".join(f"{c['timing'].get(k, 0.0):.2f}" for k in SPLIT)
            bound = "" if c["bound"] is None else f" (±{c['bound']:.1e})"
            lead = f"| {r['instance']} | {r['states']} | {r['build_s']:.2f} "
            out.append(
                (lead if i == 0 else "| | | ")
                + f"| {c['kind']} | {c['wall_s']:.2f} | {c['device_s']:.2f}"
                f" ({c['device_calls']}) | {c['wall_s'] - c['device_s']:.2f}"
                f" | {c['device_share']:.0%} | {split}"
                f" | {c['value']:.10g}{bound} | {c['method']} |"
            )
    return HEAD + "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
