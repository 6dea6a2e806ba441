"""What soundness costs (issue 20: "sound by default costs <= 1.5x the
unsound iteration on the GPU, report both per instance"): each instance of
`accuracy.py`'s list checked with PRISM's criterion (`criterion="change"`)
and with the default sound criterion, in one process per instance (the
model built once), each check run twice and the second (warm) one timed.

Reported per instance: both values, the sound bound, the methods, the
iterations, the warm check time and its `solve` stage
(`CheckResult.timing`), and the ratios sound / change of both. A check
that fails is reported with its error (throw on, as a user sees it).

    python benchmarks/soundcost.py --size small
    python benchmarks/soundcost.py --size gpu --only polling fms leader_sync \\
        --timeout 300 --json $OUT/soundcost.json --md $OUT/soundcost.md

Models are found as `accuracy.py` finds them (`accuracy.py prepare` lays
them out for a device run).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from accuracy import cases, locate  # noqa: E402


CRITERIA = ("change", "sound")


def one(path: str, consts: str, prop: str) -> dict:
    """Both criteria on one instance, in this process."""
    import jax

    import jaxmc

    out: dict = {"device": str(jax.devices()[0])}
    model = jaxmc.load_model(path, consts or None)
    t = time.perf_counter()
    em = jaxmc.build(model)
    out.update(build_s=time.perf_counter() - t, states=int(em.num_states))
    for crit in CRITERIA:
        rec: dict = {}
        try:
            for run in ("cold", "warm"):
                t = time.perf_counter()
                r = jaxmc.check(model, prop, criterion=crit)
                rec[f"{run}_s"] = time.perf_counter() - t
        except jaxmc.JaxmcError as e:
            rec["error"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"[:200]
            out[crit] = rec
            continue
        timing = {k: float(v) for k, v in (r.timing or {}).items()}
        rec.update(
            value=float(r.value),
            bound=None if r.bound is None else float(r.bound),
            method=str(r.method),
            iterations=int(r.iterations or 0),
            solve_s=timing.get("solve"),
            attempts=[a.describe() for a in (r.attempts or ())],
        )
        out[crit] = rec
    return out


def run_case(case, timeout: float) -> dict:
    path = locate(case.model)
    row = {"name": case.name, "consts": case.consts, "prop": case.prop}
    if path is None:
        return dict(row, error=f"model not found: {case.model}")
    cmd = [sys.executable, __file__, "one", str(path), case.consts, case.prop]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(row, error=f"timeout after {timeout:.0f} s")
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return dict(row, error=f"exit {p.returncode}: {tail[:200]}")
    return dict(row, **json.loads(lines[-1]))


def _ratio(a, b):
    return None if not a or b is None else b / a


def _f(x, fmt=".3g"):
    return "—" if x is None else format(x, fmt)


def table(rows: list[dict]) -> str:
    head = (
        "| instance | property | states | change: value, method, iters, warm s "
        "(solve s) | sound: value ± bound, method, iters, warm s (solve s) | "
        "ratio warm | ratio solve |\n|---|---|---:|---|---|---:|---:|"
    )
    out = [head]
    for r in rows:
        cells = []
        for crit in CRITERIA:
            c = r.get(crit) or {}
            if "error" in c or "error" in r:
                cells.append(c.get("error") or r.get("error"))
                continue
            pm = f" ± {_f(c['bound'], '.2g')}" if c.get("bound") is not None else ""
            cells.append(
                f"{c['value']:.10g}{pm}, {c['method']}, {c['iterations']}, "
                f"{_f(c['warm_s'])} ({_f(c['solve_s'])})"
            )
        ch, so = r.get("change") or {}, r.get("sound") or {}
        rw = _ratio(ch.get("warm_s"), so.get("warm_s"))
        rs = _ratio(ch.get("solve_s"), so.get("solve_s"))
        out.append(
            f"| {r['name']} `{r['consts']}` | `{r['prop']}` | "
            f"{r.get('states', '—')} | {cells[0]} | {cells[1]} | "
            f"{_f(rw, '.2f')} | {_f(rs, '.2f')} |"
        )
    dev = next((r["device"] for r in rows if "device" in r), "?")
    out.append(f"\ndevice {dev}, {time.strftime('%Y-%m-%d')}")
    return "\n".join(out)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["one"]:
        print(json.dumps(one(*argv[1:4])), flush=True)
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", choices=("small", "cpu", "gpu"), default="small")
    p.add_argument("--only", nargs="*")
    p.add_argument("--timeout", type=float, default=600.0, help="per instance")
    p.add_argument("--deadline", type=float, default=float("inf"), help="seconds")
    p.add_argument("--json", type=Path)
    p.add_argument("--md", type=Path)
    args = p.parse_args(argv)
    start, rows = time.perf_counter(), []
    for case in cases(args.size, args.only):
        if time.perf_counter() - start > args.deadline:
            rows.append({"name": case.name, "consts": case.consts,
                         "prop": case.prop, "error": "not run (deadline)"})  # fmt: skip
            continue
        rows.append(run_case(case, args.timeout))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    md = table(rows)
    print(md)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.md:
        args.md.write_text(md + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
