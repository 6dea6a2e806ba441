"""Every numeric property of PRISM's example models, jaxmc's default against
Storm's sound value (issue 20: "checked against models and values you do
not have").

The instances: every DTMC/CTMC/MDP model file under
`../shared/models/prism-examples/{dtmcs,ctmcs,mdps,simple}`, every property
of its property files, with the constants PRISM's own `auto` scripts use
for that property (`tests/corpus.py`'s `constants_for_property`: the cases of
`tests/api/test_storm_examples.py` for every instance rather than two per
folder), at most `--max-states` states (jaxmc's build stops beyond; the
row says "skipped"). For each (model, constants) one child process builds
the model once and checks each property with jaxmc's default options
(certified results): value, certified bound (`CheckResult.bound`, else
`lower`/`upper` at the initial state), method, status. Each property with
a numeric answer is then checked by Storm in its own child
(`../shared/tools/storm_ref.py --solver sound --precision 1e-9`: tighter
than jaxmc's 1e-6, so that a verdict is about jaxmc; filters reduced here
from Storm's values in every state; the property as jaxmc
checked it, in Storm's syntax: `tests/storm_input.property_text`; the
model file itself where Storm's parser reads it, else jaxmc's reprint
`storm_input.program_text`), cached in `examples_reference.json` beside
this script (keyed by model, constants and Storm's property text).
Long-run properties (`S`, `R[S]`, `LRA`) are checked by Storm's exact
mode (`--solver exact`) where it finishes in `EXACT_TIMEOUT`, else by its
sound mode, whose long-run solvers stop at their own 1e-6 relative
(`--precision` does not reach them; the row's `storm.solver` and
`storm.tolerance` say which).

Verdicts per numeric property:

- `ok`: within 1e-6 relative of Storm's sound value (an absolute 1e-10 for
  values near 0) and jaxmc's bound contains it (|value - sound| <= bound
  + 1e-9 |sound|, Storm's own tolerance, + 4 ulps of rounding);
- `ok to Storm's 1e-6`: as `ok`, but the bound contains Storm's value
  only up to Storm's own long-run tolerance (a loose reference);
- `no bound`: within 1e-6 but jaxmc reports no certified bound;
- `outside bound`: within 1e-6 but outside the bound;
- `off`: more than 1e-6 relative away;
- `jaxmc error` / `storm error` / `storm timeout` / `no storm equivalent`:
  no comparison;
- `constant not set`: a property-file constant that PRISM's scripts do
  not set either (jaxmc stops as PRISM does).

    nice -n 10 python benchmarks/examples_accuracy.py run --out /tmp/ex.json \\
        --only dtmcs/brp ctmcs/cluster
    python benchmarks/examples_accuracy.py table /tmp/ex.json
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))

import corpus  # noqa: E402
from _peers import (  # noqa: E402
    STORM_REF,
    environment,
    load_cache,
    save_cache,
    storm_input,
)


REFERENCE = HERE / "examples_reference.json"
RTOL = 1e-6
ATOL = 1e-10
#: Storm's precision (relative): tighter than jaxmc's 1e-6, so that a
#: verdict is about jaxmc's value and bound, not about Storm's tolerance.
STORM_PRECISION = 1e-9
#: jaxmc's bounds cover the method, not the iterations' rounding: a value
#: outside its bound by at most this many units in the last place is inside.
ROUNDING_ULPS = 4
#: Storm's long-run solvers' precision (relative), whatever `--precision`.
LRA_PRECISION = 1e-6
#: Storm's exact mode (rational arithmetic) for a long-run property, at most.
EXACT_TIMEOUT = 30.0


# ---- the child: one model, its properties, with jaxmc --------------------


def _init_bounds(r):
    import numpy as np

    if r.bound is not None:
        return float(r.bound)
    if r.is_filter or r.lower is None or r.upper is None:
        return None  # lower/upper are per state: not a filter's bound
    lo = np.asarray(r.lower)[r.initial_states]
    hi = np.asarray(r.upper)[r.initial_states]
    vals = np.asarray(r.at_initial, dtype=float)
    return float(np.max(np.maximum(vals - lo, hi - vals)))


def child(model: str, tasks: list, max_states: int) -> None:
    """Print one JSON line per property of `tasks` (`[props, consts,
    indices]`) checked on `model`, each (model, constants) built once with
    at most `max_states` states."""
    import jaxmc
    from jaxmc.errors import ExplorationError, JaxmcError

    for props, consts, indices in tasks:
        t = time.perf_counter()
        try:
            m = jaxmc.load_model(model, consts or None, max_states=max_states)
            em = m.build()
            pset = jaxmc.load_properties(props, m, consts or None, errors="keep")
        except ExplorationError as e:
            big = "max_states" in str(e) or "more than" in str(e)
            msg = f"more than {max_states} states" if big else str(e).splitlines()[0]
            head = {"model_error": msg, "too_big": big}
        except JaxmcError as e:
            head = {"model_error": str(e).splitlines()[0][:300]}
        else:
            head = {"states": int(em.num_states), "build_s": time.perf_counter() - t}
        head.update(props=props, consts=consts)
        print(json.dumps(head), flush=True)
        if "model_error" not in head:
            for i in indices:
                print(json.dumps(_check_one(m, pset, i), default=str), flush=True)


def _check_one(m, pset, i: int) -> dict:
    from storm_input import NoStormEquivalent, property_text

    import jaxmc
    from jaxmc.errors import JaxmcError
    from jaxmc.lang import ast

    out: dict = {"index": i}
    try:
        prop = pset[i]
        out["property"] = str(getattr(prop, "text", None) or prop.expr)
        t = time.perf_counter()
        r = jaxmc.check(m, i, properties=pset)
        out["check_s"] = time.perf_counter() - t
        vals = r.at_initial
        if r.is_filter:
            v = r.filter_value
        elif len(vals) == 1:
            v = vals[0].item()
        else:
            v = ("range", float(vals.min()), float(vals.max()))
        if hasattr(v, "item"):
            v = v.item()
        out["value"] = v
        out["numeric"] = isinstance(v, (float, tuple)) or (
            isinstance(v, int) and not isinstance(v, bool)
        )
        out["bound"] = _init_bounds(r)
        out["method"], out["status"] = r.method, r.status
        out["iterations"] = r.iterations
        out["attempts"] = [a.describe() for a in r.attempts]
        try:
            expr = prop.expr
            if isinstance(expr, ast.Filter) and expr.op not in _STORM_FILTERS:
                raise NoStormEquivalent(f"filter({expr.op}, ...)")
            out["storm_property"] = property_text(expr, pset)
            if isinstance(expr, ast.Filter):
                out["storm_filter"] = [
                    expr.op,
                    property_text(expr.operand, pset),
                    "true" if expr.states is None else property_text(expr.states, pset),
                ]
        except NoStormEquivalent as e:
            out["no_storm"] = str(e)
    except JaxmcError as e:
        out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"[:300]
    except Exception as e:  # noqa: BLE001 - a crash is a row, not the end
        out["error"] = f"crash {type(e).__name__}: {e}"[:300]
    return out


#: Filters computed here from Storm's values in every state (`storm_filter`).
_STORM_FILTERS = {"min": min, "max": max, "sum": sum, "count": sum}
_STORM_FILTERS["avg"] = lambda v: sum(v) / len(v)


def storm_filter(
    model: str, consts: str, op: str, operand: str, states: str, precision: str
):
    """Print Storm's (sound) value of `filter(op, operand, states)`: the
    operand and the states' formula checked in every reachable state and
    reduced here (storm_ref.py aggregates over the initial states only)."""
    import stormpy
    from storm_oracle import storm_values_by_valuation

    env = stormpy.environments.sound()
    r = stormpy.Rational(precision)
    env.solver().native().precision = r
    env.solver().min_max().precision = r
    t = time.perf_counter()
    values, _ = storm_values_by_valuation(model, consts, operand, environment=env)
    truth, _ = storm_values_by_valuation(model, consts, states, environment=env)
    picked = [float(values[k]) for k in values if truth[k]]
    out = {"states": len(values), "check_s": time.perf_counter() - t}
    if not picked:
        out["error"] = "the filter's state set is empty"
    else:
        out["value"] = float(_STORM_FILTERS[op](picked))
    print(json.dumps(out), flush=True)


# ---- the parent ------------------------------------------------------------


def groups(only: list[str] | None):
    """(model, props, consts) -> property indices, for the example models:
    every property of every property file `corpus.props_for` gives a model,
    with the constants PRISM's scripts use for it
    (`corpus.constants_for_property`, as in `tests/api/test_storm_examples.py`)
    restricted to the names the model and the property file declare."""
    models = [m for m in corpus.in_scope_models() if corpus.EXAMPLES in m.parents]
    if only:
        models = [
            m
            for m in models
            if any(o in str(m.relative_to(corpus.EXAMPLES)) for o in only)
        ]
    out = collections.defaultdict(list)
    for model, props, consts, i in corpus.property_cases(models):
        out[(model, props, consts)].append(i)
    return out


def run_jaxmc(model, tasks, max_states, timeout) -> dict:
    """jaxmc on `tasks` (`[(props, consts, indices)]`) of `model` in one
    child: `{(props name, consts, index): row}`; a property the child did
    not reach (a timeout, a crash) gets the child's last words."""
    spec = json.dumps([[str(p), c, idx] for p, c, idx in tasks])
    cmd = [sys.executable, __file__, "child", str(model), spec, str(max_states)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        stdout, tail = p.stdout, (p.stderr.strip().splitlines() or [""])[-1]
    except subprocess.TimeoutExpired as e:
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout
        stdout, tail = stdout or "", f"timeout after {timeout:.0f} s"
    heads, rows, head = {}, {}, None
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        d = json.loads(line)
        if "index" not in d:
            head = d
            heads[(Path(d["props"]).name, d["consts"])] = d
        else:
            rows[(Path(head["props"]).name, head["consts"], d["index"])] = dict(
                d, states=head["states"], build_s=head["build_s"]
            )
    out = {}
    for props, consts, indices in tasks:
        h = heads.get((props.name, consts), {})
        for i in indices:
            key = (props.name, consts, i)
            if key in rows:
                out[key] = rows[key]
            elif "model_error" in h:
                out[key] = dict(h, index=i)
            else:
                out[key] = {"index": i, "error": tail[:300] or "no output"}
    return out


@functools.cache
def storm_model(model: Path) -> Path:
    """The model file itself where Storm's parser reads it, else jaxmc's
    reprint (`_peers.storm_input`, in the temp dir)."""
    from storm_oracle import load_program

    try:
        load_program(str(model))
        return model
    except RuntimeError:
        return storm_input(model)


_STEADY = re.compile(r"(^|[^\w\"])(S\s*=\s*\?|S\s*(min|max)\s*=|LRA)|\[\s*S\s*\]")


def storm_solver(row: dict) -> str:
    """`exact` for a long-run property, else `sound`: Storm's long-run
    solvers stop at their own precision (1e-6 relative, which stormpy's
    environment does not expose, so `--precision` leaves it), not at 1e-9
    like its other sound methods."""
    if row.get("storm_filter"):
        return "sound"  # storm_filter's solve is the sound environment's
    return "exact" if _STEADY.search(row.get("storm_property", "")) else "sound"


def run_storm(
    model: Path, consts: str, row: dict, timeout: float, solver: str = "sound"
) -> dict:
    """Storm's value of the row's property by `solver` (`sound` or `exact`)
    and its tolerance (relative); an exact run that fails or takes more
    than `EXACT_TIMEOUT` falls back to `sound` at Storm's long-run 1e-6:
    storm_ref.py, or for a filter `storm_filter` (both in a child)."""

    path = storm_model(model)
    use = corpus.only_declared(consts, corpus.declared_constants(model))
    if row.get("storm_filter"):
        cmd = [sys.executable, __file__, "storm-filter", str(path), use]
        cmd += row["storm_filter"] + [str(STORM_PRECISION)]
    else:
        cmd = [sys.executable, str(STORM_REF), str(path), "--prop"]
        cmd += [row["storm_property"], "--solver", solver, "--quiet-storm"]
        cmd += ["--precision", str(STORM_PRECISION)] if solver == "sound" else []
        cmd += ["--const", use] if use else []
    if solver == "exact":
        out = _storm_child(cmd, min(timeout, EXACT_TIMEOUT))
        if "value" in out:
            return dict(out, solver="exact", tolerance=0.0)
        out = dict(run_storm(model, consts, row, timeout), exact_error=out["error"])
        return dict(out, tolerance=LRA_PRECISION)
    loose = _STEADY.search(row.get("storm_property", ""))  # a filter's operand
    tolerance = LRA_PRECISION if loose else STORM_PRECISION
    return dict(_storm_child(cmd, timeout), solver=solver, tolerance=tolerance)


def _storm_child(cmd: list[str], timeout: float) -> dict:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f} s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    out = json.loads(lines[-1]) if lines else {}
    if "value" not in out:
        err = out.get("error") or (p.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": str(err)[:300]}
    keep = ("value", "init_min", "init_max", "states", "build_s", "check_s")
    return {k: out[k] for k in keep if k in out}


def _num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def verdict(row: dict) -> str:
    if row.get("model_error"):
        return "skipped" if row.get("too_big") else "jaxmc error"
    if str(row.get("error")).startswith("MissingConstantsError"):
        return "constant not set"  # by PRISM's scripts either: PRISM stops too
    if row.get("error"):
        return "jaxmc error"
    if not row.get("numeric"):
        return "not numeric"
    if row.get("no_storm"):
        return "no storm equivalent"
    s = row.get("storm") or {}
    if "value" not in s:
        return "storm timeout" if "timeout" in s.get("error", "") else "storm error"
    v = row["value"]
    if isinstance(v, list):  # ("range", lo, hi) over several initial states
        pairs = [(v[1], s.get("init_min")), (v[2], s.get("init_max"))]
    else:
        pairs = [(v, s["value"])]
    if any(_num(a) is None or _num(b) is None for a, b in pairs):
        return "storm error"
    gaps = []
    for a, b in pairs:
        if math.isinf(a) or math.isinf(b):
            if a != b:
                return "off"
            continue
        gap = abs(a - b)
        if gap > RTOL * abs(b) + ATOL:
            return "off"
        gaps.append((gap, b))
    bound, loose = row.get("bound"), False
    if bound is None:
        return "no bound"
    for gap, b in gaps:
        tolerance = s.get("tolerance", STORM_PRECISION) * abs(b)
        if gap > bound + min(tolerance, STORM_PRECISION * abs(b)) + ulps(b):
            if gap > bound + tolerance + ulps(b):
                return "outside bound"
            loose = True  # inside only by Storm's own (long-run) tolerance
    return "ok to Storm's 1e-6" if loose else "ok"


def ulps(b: float) -> float:
    return ROUNDING_ULPS * math.ulp(b)


def run(args) -> None:
    cache = load_cache(REFERENCE)
    rows = load_cache(args.out)
    env = environment()
    by_model = collections.defaultdict(list)
    for (model, props, consts), indices in groups(args.only).items():
        by_model[model].append((props, consts, indices))
    for model, tasks in by_model.items():
        name = str(model.relative_to(corpus.EXAMPLES))
        keys = {
            (p.name, c, i): f"{name} | {p.name} | {c} | {i}"
            for p, c, idx in tasks
            for i in idx
        }
        if not args.redo and all(k in rows for k in keys.values()):
            continue
        t = time.perf_counter()
        got = run_jaxmc(model, tasks, args.max_states, args.timeout)
        for k, key in keys.items():
            row = got[k]
            row.update(model=name, props=k[0], consts=k[1], key=key)
            if row.get("numeric") and row.get("storm_property"):
                solver = storm_solver(row)
                skey = f"{name} | {row['consts']} | {row['storm_property']}"
                skey += " | exact" if solver == "exact" else ""
                retry = args.retry_storm and "value" not in cache.get(skey, {})
                if skey not in cache or retry:
                    cache[skey] = run_storm(
                        model, row["consts"], row, args.storm_timeout, solver
                    )
                    save_cache({skey: cache[skey]}, REFERENCE)
                row["storm"] = cache[skey]
            row["verdict"] = verdict(row)
            row["date"] = env["date"]
            row["machine"] = f"{env['cpu']}, {env['cores']} cores"
            rows[key] = row
        save_cache({key: rows[key] for key in keys.values()}, args.out)
        verdicts = collections.Counter(rows[key]["verdict"] for key in keys.values())
        print(
            f"{name}: {dict(verdicts)} ({time.perf_counter() - t:.0f} s)",
            file=sys.stderr,
            flush=True,
        )


def _fmt(v) -> str:
    if isinstance(v, list):
        return f"[{v[1]:.10g}, {v[2]:.10g}]"
    return f"{v:.10g}" if isinstance(v, float) else str(v)


def table(path: Path) -> None:
    rows = sorted(load_cache(path).values(), key=lambda r: r["key"])
    for r in rows:
        r["verdict"] = verdict(r)
    count = collections.Counter(r["verdict"] for r in rows)
    numeric = [r for r in rows if r["verdict"] not in ("skipped", "not numeric")]
    print(f"{len(rows)} properties; {dict(sorted(count.items()))}")
    print(f"numeric and not skipped: {len(numeric)}")
    print()
    print("| model | constants | property | states | jaxmc (± bound) | Storm "
          "| rel. err | verdict | method / status |")  # fmt: skip
    print("|---|---|---|--:|--:|--:|--:|---|---|")
    for r in rows:
        if r["verdict"] in ("ok", "skipped", "not numeric"):
            continue
        s = r.get("storm") or {}
        sv = s.get("value", s.get("error", "—"))
        rel = "—"
        if _num(r.get("value")) is not None and _num(sv) is not None and sv:
            rel = f"{abs(r['value'] - sv) / abs(sv):.1e}"
        jv = r.get("error") or r.get("model_error") or _fmt(r.get("value"))
        if r.get("bound") is not None:
            jv += f" (±{r['bound']:.1e})"
        prop = (r.get("property") or "").replace("|", "\\|")
        print(
            f"| {r['model']} | {r['consts']} | `{prop}` | {r.get('states', '—')} "
            f"| {jv} | {_fmt(sv)} ({s.get('solver', 'sound')}) | {rel} "
            f"| {r['verdict']} "
            f"| {r.get('method')} / {r.get('status')} |"
        )


def main() -> None:
    if sys.argv[1:2] == ["storm-filter"]:
        storm_filter(*sys.argv[2:8])
        return
    if sys.argv[1:2] == ["child"]:
        model, tasks, max_states = sys.argv[2:5]
        child(model, json.loads(tasks), int(max_states))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, required=True, help="JSON rows (merged)")
    r.add_argument("--only", nargs="*", help="model paths containing one of these")
    r.add_argument("--max-states", type=int, default=100_000)
    r.add_argument("--timeout", type=float, default=600.0, help="per model file")
    r.add_argument("--storm-timeout", type=float, default=120.0)
    r.add_argument("--redo", action="store_true", help="rerun rows already in --out")
    r.add_argument("--retry-storm", action="store_true")
    t = sub.add_parser("table")
    t.add_argument("out", type=Path)
    args = ap.parse_args()
    if args.cmd == "run":
        os.environ.setdefault("PYTHONUNBUFFERED", "1")
        run(args)
    else:
        table(args.out)


if __name__ == "__main__":
    main()
