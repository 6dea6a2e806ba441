"""`jaxmc.check` on one device and split over several (issue 22), end to
end in one process: the model is built once, then each property is checked
with `devices=None` (jaxmc's single-device default: its own layout choice,
the Pallas kernels on a GPU) and with `devices=D` for each `D` asked for.
Prints one JSON line per check (value, bound, method, iterations, the
check's wall time and `CheckResult.timing`) and a table; the relative
difference of each split value from the single-device one is in the table.

    python benchmarks/devices_check.py --model tandem --const c=2047 \\
        --prop 'P=? [ F<=0.25 sc=c ]' --prop 'R{"customers"}=? [ S ]' \\
        --devices 2 [--deadline 300]

Models are found as `benchmarks/scaling.py` finds them (`JAXMC_MODELS`,
`.bench/models`, `../shared/models/prism-examples`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


FILES = {"tandem": "tandem.sm", "cluster": "cluster.sm", "kanban": "kanban.sm",
         "polling": "poll16.sm", "fms": "fms.sm"}  # fmt: skip


def _args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="tandem, cluster, kanban or a path")
    p.add_argument("--const", default="")
    p.add_argument("--prop", action="append", required=True)
    p.add_argument("--devices", default="2", help="comma-separated counts")
    p.add_argument("--deadline", type=float, default=0.0,
                   help="no new check starts after this many s (0: none)")  # fmt: skip
    return p.parse_args(argv)


def main(argv=None):
    a = _args(sys.argv[1:] if argv is None else argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    t0 = time.perf_counter()
    import jax

    jax.config.update("jax_enable_x64", True)
    import jaxmc
    from benchmarks._gpu_common import find_model

    path = a.model if Path(a.model).exists() else find_model(FILES[a.model])
    model = jaxmc.load_model(path, a.const or None)
    explicit = jaxmc.build(model)
    built = time.perf_counter() - t0
    n = explicit.num_states
    print(f"# {Path(path).name} {a.const}: {n:,} states, built in {built:.1f} s; "
          f"{jax.devices()}", file=sys.stderr, flush=True)  # fmt: skip
    counts = [None] + [int(d) for d in a.devices.split(",") if int(d) > 1]
    rows = []
    for prop in a.prop:
        for D in counts:
            if a.deadline and time.perf_counter() - t0 > a.deadline:
                print(f"# {prop} devices={D}: not run (deadline)", file=sys.stderr)
                continue
            t1 = time.perf_counter()
            try:
                r = jaxmc.check(model, prop, devices=D, throw=False)
                rec = {"value": float(r.value), "bound": r.bound,  # (one state)
                       "method": r.method, "iterations": r.iterations,
                       "layout": r.layout, "status": str(r.status),
                       "attempts": [str(x) for x in r.attempts],
                       "timing": {k: round(v, 3) for k, v in r.timing.items()
                                  if isinstance(v, (int, float))}}  # fmt: skip
            except Exception as e:  # noqa: BLE001 (report and go on)
                rec = {"error": repr(e)[:300]}
            rec.update(prop=prop, devices=D or 1, states=explicit.num_states,
                       wall_s=round(time.perf_counter() - t1, 2))  # fmt: skip
            print(json.dumps(rec, default=str), flush=True)
            rows.append(rec)
    print(table(rows))


def table(rows) -> str:
    """Markdown: one row per check, the split ones against the first."""
    first = {}
    out = ["| property | devices | layout | value (bound) | rel. diff | method "
           "| iterations | check s |",
           "|---|---:|---|---|---:|---|---:|---:|"]  # fmt: skip
    for r in rows:
        if "error" in r:
            out.append(f"| `{r['prop']}` | {r['devices']} | error: {r['error']} "
                       "| | | | | |")  # fmt: skip
            continue
        base = first.setdefault(r["prop"], r["value"])
        rel = abs(r["value"] - base) / max(abs(base), 1e-300)
        out.append(
            f"| `{r['prop']}` | {r['devices']} | {r['layout']} "
            f"| {r['value']:.10g} (±{r['bound'] or 0:.2g}) | {rel:.1e} "
            f"| {r['method']} | {r['iterations']} | {r['wall_s']} |"
        )
    return "\n".join(out)


if __name__ == "__main__":
    main()
