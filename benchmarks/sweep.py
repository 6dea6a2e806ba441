"""A sweep of many parameter points on one DTMC: `jaxmc.sweep` (vmapped,
one structure, one pass over the matrix per iteration for all points) against
sequential `jaxmc.solve` calls and against Storm instantiating its
parametric model at each point (stormpy's `ModelInstantiator`; Storm runs on
the host CPU).

The model is the walk of `benchmarks/grad.py` with 2 parameters (`p0`, `p1`),
`P=? [ F "goal" ]`, on a 32 x 32 grid of points by default; `--fail` sets its
failure probability per step (0.02 by default; larger values make the chain
contract faster, so that every iterative solver needs fewer iterations and
per-point fixed costs weigh more). Both tools stop at a relative change of
`--epsilon` (default 1e-6, Storm's and PRISM's default; jaxmc: per entry,
over-relaxed Gauss-Seidel); the sequential and Storm baselines are timed on
`--sequential` / `--storm` points spread evenly over the grid and
extrapolated to all points. On a CPU, `jaxmc.sweep` solves its chunks on
all cores at once (`--workers`); Storm runs single-threaded.

    python benchmarks/sweep.py --n 316 --points 1024 --sequential 32 --storm 16
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # measure this checkout

import jax  # noqa: E402
import numpy as np  # noqa: E402
from grad import model_text  # noqa: E402  (benchmarks/ is the script's dir)

import jaxmc  # noqa: E402


def spread(npts: int, m: int) -> np.ndarray:
    """`m` indices spread evenly over the `npts` points (first and last
    included): the baselines are timed on a sample of the whole grid, whose
    points need different numbers of iterations, not on its first row."""
    return np.unique(np.round(np.linspace(0, npts - 1, max(1, m))).astype(int))


def storm_times(text: str, n: int, prop: str, pts: dict, sel: np.ndarray) -> dict:
    """Storm: parametric build once (not counted), then instantiate + check
    the points `sel`."""
    import stormpy
    import stormpy.pars
    from stormpy.numbers.developer import cln

    with tempfile.NamedTemporaryFile("w", suffix=".prism", delete=False) as f:
        f.write(text.replace("const int N;", f"const int N = {n};"))
    t = time.perf_counter()
    program = stormpy.parse_prism_program(f.name)
    props = stormpy.parse_properties(prop, program)
    pmodel = stormpy.build_model[cln.FactorizedRationalFunction](program, props)
    inst = stormpy.pars.ModelInstantiator(pmodel)
    t_build = time.perf_counter() - t
    os.unlink(f.name)
    names = {v.name: v for v in pmodel.collect_probability_parameters()}
    init = int(pmodel.initial_states[0])
    vals, t_inst, t_check = [], 0.0, 0.0
    c0 = time.process_time()
    for i in sel:
        point = {names[k]: cln.Rational(float(pts[k][i])) for k in names}
        t = time.perf_counter()
        model = inst.instantiate(point)
        t_inst += time.perf_counter() - t
        t = time.perf_counter()
        res = stormpy.model_checking(model, props[0])
        t_check += time.perf_counter() - t
        vals.append(float(res.get_value(init)))
    cpu = time.process_time() - c0
    solver = str(stormpy.Environment().solver().get_linear_equation_solver_type())
    return {
        "build_s": t_build,
        "inst_s": t_inst,
        "check_s": t_check,
        "values": vals,
        "solver": solver,
        "cpu_s": cpu,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=316, help="grid side (states ~ n^2)")
    ap.add_argument("--points", type=int, default=1024)
    ap.add_argument("--fail", type=float, default=0.02)
    ap.add_argument(
        "--chunk",
        type=int,
        nargs="+",
        default=[0],
        help="points per vmapped batch, one run each (0: jaxmc.sweep's default)",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=None,
        help="jaxmc.sweep's concurrent chunks (default: its own, the CPU cores on a "
        "CPU)",
    )
    ap.add_argument(
        "--sequential",
        type=int,
        default=32,
        help="sequential solve calls timed (extrapolated to --points)",
    )
    ap.add_argument(
        "--storm",
        type=int,
        default=16,
        help="Storm points timed (extrapolated; 0: skip Storm)",
    )
    ap.add_argument("--epsilon", type=float, default=1e-6)
    ap.add_argument(
        "--omega",
        type=float,
        default=None,
        help="over-relaxation of jaxmc's solves (default: automatic; 1: plain "
        "Gauss-Seidel)",
    )
    ap.add_argument(
        "--sor-kernel",
        choices=("auto", "on", "off"),
        default=None,
        help="fused Pallas SOR kernel of batched sweeps (jaxmc._config.SOR_KERNEL; "
        "default: $JAXMC_SOR_KERNEL or auto, i.e. on a GPU)",
    )
    ap.add_argument("--json", help="append one JSON line with all numbers to this file")
    ap.add_argument(
        "--xla-defaults",
        action="store_true",
        help="compile the CPU solves with XLA's default options "
        "(jaxmc._config.CPU_SOLVER_OPTIONS off), for comparison",
    )
    args = ap.parse_args()
    if args.xla_defaults:
        jaxmc._config.CPU_SOLVER_OPTIONS = {}
    from jaxmc.kernels import sor_multi_pallas

    if args.sor_kernel:
        jaxmc._config.SOR_KERNEL = args.sor_kernel
    side = int(round(np.sqrt(args.points)))
    P0, P1 = np.meshgrid(
        np.linspace(0.3, 0.5, side), np.linspace(0.35, 0.55, args.points // side)
    )
    pts = {"p0": P0.reshape(-1), "p1": P1.reshape(-1)}
    npts = pts["p0"].size
    text = model_text(2, args.fail)
    first = {k: float(v[0]) for k, v in pts.items()}
    model = jaxmc.load_model_string(
        text, {"N": args.n}, parameters=("p0", "p1"), params=first
    )
    t = time.perf_counter()
    explicit = jaxmc.build(model)
    build = time.perf_counter() - t
    prop = 'P=? [ F "goal" ]'
    dev = jax.devices()[0]
    print(
        f"# {time.strftime('%Y-%m-%d')} {platform.machine()} ({os.cpu_count()} cores), "
        f"jax {jax.__version__} on {jax.default_backend()} "
        f"({getattr(dev, 'device_kind', dev.platform)})"
    )
    print(
        f"# model: {explicit.num_states} states, {explicit.num_transitions} "
        f"transitions, fail {args.fail} (jaxmc build {build:.1f} s); {npts} points; "
        f"epsilon {args.epsilon}; SOR kernel {sor_multi_pallas.mode()} (active: "
        f"{sor_multi_pallas.active()})"
    )
    kw = dict(epsilon=args.epsilon, build_params=first, omega=args.omega)
    rec = {
        "bench": "sweep",
        "backend": jax.default_backend(),
        "device": str(getattr(dev, "device_kind", dev.platform)),
        "cpus": os.cpu_count(),
        "states": explicit.num_states,
        "nnz": explicit.num_transitions,
        "points": npts,
        "fail": args.fail,
        "epsilon": args.epsilon,
        "omega": args.omega,
        "sor_kernel": sor_multi_pallas.mode(),
        "sweeps": [],
    }
    rows = []
    out = None
    for chunk in args.chunk:
        c = chunk or None
        # compile first (on a batch of the chunk size, or with the default
        # chunk on all points: the compiled batch is then reused)
        warm = pts if c is None else {k: v[:c] for k, v in pts.items()}
        t = time.perf_counter()
        jaxmc.sweep(model, prop, params=warm, chunk=c, workers=args.workers, **kw)
        t_warm = time.perf_counter() - t
        t, c0 = time.perf_counter(), time.process_time()
        out = jaxmc.sweep(model, prop, params=pts, chunk=c, workers=args.workers, **kw)
        t_sweep, c_sweep = time.perf_counter() - t, time.process_time() - c0
        rec["sweeps"].append(
            {"chunk": chunk, "s": t_sweep, "cpu_s": c_sweep, "first_call_s": t_warm}
        )
        rows.append(
            (
                f"jaxmc.sweep (vmap), chunk {chunk or 'default'}",
                t_sweep,
                f"measured (first call incl. compile {t_warm:.1f} s)",
            )
        )
        print(
            f"# sweep chunk {chunk or 'default'}: {t_sweep:.2f} s (process CPU time "
            f"{c_sweep:.2f} s)",
            flush=True,
        )
    t_best = min(s["s"] for s in rec["sweeps"])
    # sequential jaxmc.solve calls (compiled once, then one call per point)
    sel = spread(npts, min(args.sequential, npts))
    m = sel.size
    jaxmc.solve(model, prop, params=first, **kw)
    t, c0 = time.perf_counter(), time.process_time()
    seq = np.array(
        [
            float(jaxmc.solve(model, prop, params={k: pts[k][i] for k in pts}, **kw))
            for i in sel
        ]
    )
    t_seq = (time.perf_counter() - t) * npts / m
    c_seq = (time.process_time() - c0) * npts / m
    np.testing.assert_allclose(seq, out[sel], rtol=10 * args.epsilon)
    rec["sequential"] = {
        "timed": m,
        "s_extrapolated": t_seq,
        "cpu_s_extrapolated": c_seq,
    }
    rows.append(("jaxmc.solve x points", t_seq, f"{m} calls timed, extrapolated"))
    print(
        f"# sequential: {t_seq:.2f} s extrapolated (process CPU time {c_seq:.2f} s)",
        flush=True,
    )
    if args.storm:
        try:
            import stormpy  # noqa: F401
        except ImportError:
            print("# stormpy not importable: Storm skipped")
        else:
            ms = min(args.storm, npts)
            sel = spread(npts, ms)
            ms = sel.size
            st = storm_times(text, args.n, prop, pts, sel)
            t_storm = (st["inst_s"] + st["check_s"]) * npts / ms
            err = float(
                np.max(np.abs(np.array(st["values"]) - out[sel]) / np.abs(out[sel]))
            )
            rec["storm"] = {
                "timed": ms,
                "s_extrapolated": t_storm,
                "build_s": st["build_s"],
                "inst_s": st["inst_s"],
                "check_s": st["check_s"],
                "solver": st["solver"],
                "max_rel_diff": err,
                "cpu_s_extrapolated": st["cpu_s"] * npts / ms,
            }
            rows.append(
                (
                    "Storm instantiate + check",
                    t_storm,
                    f"{ms} points timed, extrapolated (instantiate "
                    f"{1e3 * st['inst_s'] / ms:.0f} ms"
                    f" + check {1e3 * st['check_s'] / ms:.0f} ms per point; parametric "
                    f"build {st['build_s']:.1f} s not counted; {st['solver']})",
                )
            )
            print(
                f"# Storm: {t_storm:.2f} s extrapolated (process CPU time "
                f"{st['cpu_s'] * npts / ms:.2f} s)"
            )
            print(f"# max rel. difference jaxmc vs Storm over {ms} points: {err:.2e}")
    print(
        "| method | time for all points (s) | per point (ms) | vs best sweep | note |"
    )
    print("|---|---:|---:|---:|---|")
    for name, tt, note in rows:
        print(
            f"| {name} | {tt:.2f} | {1e3 * tt / npts:.2f} | {tt / t_best:.1f}x | "
            f"{note} |"
        )
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
