"""End-to-end solves through the public API on the default JAX device (a GPU
where there is one), next to Storm on the same host's CPU.

Cases (`--size large`, the issue's): tandem c=2047 `R=? [ S ]` (long-run
expected customers, tandem.csl) and cluster N=464 `S=? [ "premium" ]`
(cluster.csl); `--size small`: tandem c=31, cluster N=8 (a CPU smoke run).

For each case: `jaxmc.load_model` + `jaxmc.build` (timed together), the
first `jaxmc.check` (tracing, compilation and layout building included) and
a warm one on the built model, with value, method, layout, iterations and
`CheckResult.timing` (precompute / layout / solve); then Storm (stormpy
`build_model` + `model_checking` through `../shared/tools/storm_ref.py`, its
CLI-default solver setting, in a subprocess with a timeout). Storm runs
after jaxmc, one case at a time, unless `--storm-parallel` starts it at
once beside jaxmc (on other cores; to fit a time budget: its times are then
taken on a busier host, which the output says).

Prints a markdown table (and writes it with `--out FILE`), plus one JSON
line per case.

    python benchmarks/e2e_gpu.py --size small
    python benchmarks/e2e_gpu.py --size large --storm-timeout 300 --storm-parallel
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _gpu_common import find_model  # noqa: E402
from _peers import environment, storm_available, storm_finish, storm_start  # noqa: E402

import jaxmc  # noqa: E402


CASES = {
    "large": [
        ("tandem", "tandem.sm", "c=2047", "R=? [ S ]"),
        ("cluster", "cluster.sm", "N=464", 'S=? [ "premium" ]'),
    ],
    "small": [
        ("tandem", "tandem.sm", "c=31", "R=? [ S ]"),
        ("cluster", "cluster.sm", "N=8", 'S=? [ "premium" ]'),
    ],
}


def run_jaxmc(
    path: Path,
    consts: str,
    prop: str,
    max_iters: int,
    layout: str,
    precisions=("fp64",),
) -> list[dict]:
    """One result dict per precision (`jaxmc.check(precision=...)`), the
    model built once."""
    base: dict = {}
    t = time.perf_counter()
    model = jaxmc.load_model(str(path), consts)
    em = jaxmc.build(model)
    base["build_s"] = time.perf_counter() - t
    base["states"] = em.num_states
    base["transitions"] = em.num_transitions
    outs = []
    for prec in precisions:
        out = dict(base, precision=prec)
        outs.append(out)
        kw = {} if prec == "fp64" else {"precision": prec}
        for key in ("first", "warm"):
            t = time.perf_counter()
            try:
                r = jaxmc.check(model, prop, max_iters=max_iters, layout=layout, **kw)
            except jaxmc.JaxmcError as e:
                out["error"] = str(e).splitlines()[0]
                break
            wall = time.perf_counter() - t
            out[key] = {
                "wall_s": wall,
                "value": r.value,
                "method": r.method,
                "layout": r.layout,
                "precision": getattr(r, "precision", prec),
                "iterations": r.iterations,
                "status": r.status,
                "timing": {k: v for k, v in r.timing.items() if k != "build"},
            }
    return outs


def _f(v, nd=3):
    return "—" if v is None else f"{v:.{nd}f}"


def table(rows: list[dict]) -> str:
    head = (
        "| model | constants | property | states | jaxmc value | Storm value "
        "| agree (1e-6 rel) | method / layout | iterations | jaxmc build s "
        "| check first s | check warm s "
        "| warm: precompute / layout / solve s | Storm build s | Storm check s "
        "| ratio (build+first) | ratio (warm check vs Storm check) |"
    )
    lines = [head, "|" + "|".join(["---"] * (head.count("|") - 1)) + "|"]
    for r in rows:
        j, s = r["jaxmc"], r["storm"]
        first, warm = j.get("first", {}), j.get("warm", {})
        jv = warm.get("value", j.get("error", "error"))
        sv = s.get("value", s.get("error"))
        agree = "—"
        if isinstance(jv, float) and isinstance(sv, (int, float)):
            rel = abs(jv - sv) / max(abs(jv), abs(sv), 1e-300)
            agree = f"{'yes' if rel <= 1e-6 else 'no'} ({rel:.1e})"
        t = warm.get("timing", {})
        stages = (
            " / ".join(_f(t.get(k)) for k in ("precompute", "layout", "solve"))
            if t
            else "—"
        )
        ratio = ratio_w = "—"
        if "build_s" in s and "wall_s" in first:
            ratio = (j["build_s"] + first["wall_s"]) / (s["build_s"] + s["check_s"])
            ratio = f"{ratio:.2f}×"
            ratio_w = f"{warm['wall_s'] / max(s['check_s'], 1e-9):.2f}×"
        how = f"{warm.get('method')} / {warm.get('layout')}" if warm else "—"
        if warm.get("precision", "fp64") != "fp64":
            how += f" / {warm['precision']}"
        its = warm.get("iterations")
        lines.append(
            f"| {r['name']} | `{r['consts']}` | `{r['prop']}` | {j.get('states', 0):,} "
            f"| {jv if isinstance(jv, str) else f'{jv:.10g}'} "
            f"| {sv if isinstance(sv, str) else f'{sv:.10g}'} | {agree} | {how} "
            f"| {its if its is not None else '—'} | {_f(j.get('build_s'))} "
            f"| {_f(first.get('wall_s'))} | {_f(warm.get('wall_s'))} | {stages} "
            f"| {_f(s.get('build_s'))} | {_f(s.get('check_s'))} | {ratio} | {ratio_w} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", choices=sorted(CASES), default="large")
    p.add_argument("--only", choices=("tandem", "cluster"), help="run one case only")
    p.add_argument(
        "--max-iters",
        type=int,
        default=20000,
        help="max_iters of jaxmc.check (GMRES steps / Jacobi iterations)",
    )
    p.add_argument(
        "--layout", default="auto", help="layout= of jaxmc.check (default auto)"
    )
    p.add_argument("--storm-timeout", type=float, default=300.0)
    p.add_argument("--storm-solver", default="storm-default")
    p.add_argument(
        "--storm-parallel",
        action="store_true",
        help="start Storm at once, beside jaxmc (other cores)",
    )
    p.add_argument("--no-storm", action="store_true")
    p.add_argument(
        "--precision",
        nargs="+",
        default=["fp64"],
        choices=("fp64", "fp32"),
        help="precision= of jaxmc.check, one row each (model built once)",
    )
    p.add_argument("--out", help="also write the markdown table here")
    args = p.parse_args(argv)
    env = environment()
    print(json.dumps({"environment": env}), flush=True)
    cases = [c for c in CASES[args.size] if args.only in (None, c[0])]
    with_storm = not args.no_storm and storm_available()
    procs = {}
    if with_storm and args.storm_parallel:
        for name, fname, consts, prop in cases:
            procs[name] = storm_start(
                find_model(fname), consts, prop, args.storm_solver
            )
    rows = []
    for name, fname, consts, prop in cases:
        path = find_model(fname)
        group = []
        for j in run_jaxmc(
            path, consts, prop, args.max_iters, args.layout, args.precision
        ):
            print(json.dumps({"case": name, "jaxmc": j}, default=str), flush=True)
            group.append(
                {"name": name, "consts": consts, "prop": prop, "jaxmc": j, "storm": {}}
            )
        rows.append(group)
    for group, (name, fname, consts, prop) in zip(rows, cases):
        if not with_storm:
            for row in group:
                row["storm"] = {"error": "not run"}
            continue
        if name not in procs:
            procs[name] = storm_start(
                find_model(fname), consts, prop, args.storm_solver
            )
        storm = storm_finish(procs[name], args.storm_timeout)
        for row in group:
            row["storm"] = storm
        print(json.dumps({"case": name, "storm": storm}, default=str), flush=True)
    rows = [row for group in rows for row in group]
    text = table(rows)
    note = f"Storm solver setting `{args.storm_solver}`" + (
        ", started beside jaxmc (concurrently, on other cores)"
        if args.storm_parallel
        else ", run after jaxmc"
    )
    text += f"\n\n{note}; max_iters {args.max_iters}; layout `{args.layout}`."
    print(text, flush=True)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0 if all("error" not in r["jaxmc"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
