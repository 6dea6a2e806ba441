"""QVBS instances through jaxmc and Storm's sound mode, compared.

    python benchmarks/qvbs.py QVBS/benchmarks/mdp/eajs --max-states 1000000 \\
        --out qvbs.json
    python benchmarks/qvbs.py --table qvbs.json

The Quantitative Verification Benchmark Set (github.com/ahartmanns/qcomp,
folder `benchmarks/`) is not part of this repository: give the folder of
one benchmark (its `index.json`, PRISM files and properties). For every
instance the index lists (file parameters and open parameters) whose
state count, as the index gives it, is at most `--max-states`, jaxmc
checks all properties of the instance in one child process (`python -m
jaxmc MODEL PROPS --const ... --json`, default options: certified
results), then Storm checks each property in its own child
(`../shared/tools/storm_ref.py --solver sound`). Each row records both
values, jaxmc's certified bound, whether it contains Storm's value, the
relative difference, the times and the exact commands; rows are merged
into the JSON file `--out` (keyed by instance and property), so that a long
set can be run in several jobs. `--table` prints the file as a Markdown
table.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

from _peers import STORM_REF, environment, load_cache, run_child, save_cache


#: jaxmc's value must be within this of Storm's (relative).
REL_TOL = 1e-6
#: jaxmc's certified bounds cover the method, not floating-point rounding
#: (`jaxmc.numerics.bounded`): a value outside its bound by at most this
#: many units in the last place is reported as "rounding", not as outside.
ROUNDING_ULPS = 4


def instances(folder: Path) -> list[dict]:
    """The instances of a QVBS benchmark: model, props file, constants and
    the state count of its index."""
    index = json.loads((folder / "index.json").read_text())
    out = []
    for f in index["files"]:
        model = folder / f["original-file"][0]
        props = folder / f["original-file"][1]
        fixed = ",".join(
            f"{p['name']}={p['value']}" for p in f["file-parameter-values"]
        )
        for setting in f["open-parameter-values"]:
            consts = ",".join(f"{v['name']}={v['value']}" for v in setting["values"])
            states = max((s["number"] for s in setting.get("states", [])), default=None)
            refs = {
                r["property"]: _reference(r["value"])
                for r in setting.get("results", [])
            }
            out.append(
                {
                    "benchmark": index["short"],
                    "model": model,
                    "props": props,
                    "file_params": fixed,
                    "consts": consts,
                    "states_index": states,
                    "references": refs,
                }
            )
    return out


def _reference(v):
    """A QVBS result value (a number, a Boolean, or `{num, den, approx}`)
    as a float or bool (an exact fraction rounded once)."""
    if isinstance(v, dict):
        if "num" in v:
            return float(Fraction(int(v["num"]), int(v["den"])))
        return float(v["approx"])
    return v if isinstance(v, bool) else float(v)


def _value(v):
    if isinstance(v, bool) or v is None:
        return v
    return float(v)


def jaxmc_run(inst: dict, timeout: float) -> tuple[list[str], dict]:
    cmd = [sys.executable, "-m", "jaxmc", str(inst["model"]), str(inst["props"])]
    cmd += ["--const", inst["consts"], "--json"]
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        out = json.loads(p.stdout)
    except subprocess.TimeoutExpired:
        out = {"error": f"timeout {timeout:.0f} s"}
    except json.JSONDecodeError:
        out = {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}
    out["wall_s"] = time.perf_counter() - t
    return cmd, out


def storm_run(inst: dict, name: str, timeout: float) -> tuple[list[str], dict]:
    cmd = [sys.executable, str(STORM_REF), str(inst["model"]), "--props"]
    cmd += [str(inst["props"]), "--name", name, "--const", inst["consts"]]
    cmd += ["--solver", "sound", "--quiet-storm"]
    return cmd, run_child(cmd, timeout, width=300)


def compare(jv, bound, sv) -> dict:
    """Relative difference, and whether jaxmc's bound contains Storm's value."""
    if isinstance(jv, bool) or isinstance(sv, bool) or jv is None or sv is None:
        return {"rel": None, "ok": jv == sv and jv is not None, "in_bound": None}
    diff = abs(jv - sv)
    rel = diff / abs(sv) if sv != 0 else diff
    inside = None if bound is None else diff <= bound
    ulps = diff / math.ulp(max(abs(jv), abs(sv)))
    if inside is False and ulps <= ROUNDING_ULPS:
        inside = "rounding"
    return {"rel": rel, "ok": rel <= REL_TOL, "in_bound": inside, "ulps": ulps}


def run(args) -> None:
    cache = Path(args.out)
    env = environment()
    for folder in args.folders:
        for inst in instances(Path(folder)):
            key0 = f"{inst['benchmark']}.{inst['file_params']}.{inst['consts']}"
            states = inst["states_index"]
            if states is not None and states > args.max_states:
                print(f"skip {key0}: {states:,} states", file=sys.stderr)
                continue
            if args.only and not any(o in key0 for o in args.only):
                continue
            jcmd, jout = jaxmc_run(inst, args.timeout)
            print(f"{key0}: jaxmc {jout.get('wall_s', 0):.1f} s", file=sys.stderr)
            rows = {}
            if "error" in jout:
                rows[key0] = {"key": key0, "error": jout["error"], "jaxmc_cmd": jcmd}
                save_cache(rows, cache)
                continue
            run0 = jout["runs"][0]
            for p in run0["properties"]:
                name = p.get("name")
                scmd, sout = storm_run(inst, name, args.timeout)
                jv, sv = _value(p.get("value")), _value(sout.get("value"))
                row = {
                    "key": f"{key0}.{name}",
                    "benchmark": inst["benchmark"],
                    "file_params": inst["file_params"],
                    "consts": inst["consts"],
                    "property_name": name,
                    "property": p.get("property"),
                    "states": run0["model"]["states"],
                    "storm_states": sout.get("states"),
                    "jaxmc_value": jv,
                    "jaxmc_bound": p.get("bound"),
                    "jaxmc_status": p.get("status"),
                    "jaxmc_error": p.get("error"),
                    "jaxmc_build_s": run0["model"]["build_time"],
                    "jaxmc_check_s": (p.get("timing") or {}).get("total"),
                    "storm_value": sv,
                    "qvbs_reference": inst["references"].get(name),
                    "storm_error": sout.get("error"),
                    "storm_build_s": sout.get("build_s"),
                    "storm_check_s": sout.get("check_s"),
                    **compare(jv, p.get("bound"), sv),
                    "jaxmc_cmd": shlex.join(["python", *jcmd[1:]]),
                    "storm_cmd": shlex.join(["python", *scmd[1:]]),
                    "date": env["date"],
                    "machine": f"{env['cpu']}, {env['cores']} cores",
                }
                rows[row["key"]] = row
                print(f"  {name}: {jv} vs {sv} {row['rel']}", file=sys.stderr)
            save_cache(rows, cache)


def _num(v, bound=None) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v).lower()
    s = f"{v:.12g}"
    if bound:
        s += f" ± {bound:.1e}"
    elif bound == 0.0:
        s += " ± 0"
    return s


def _t(x) -> str:
    return "—" if x is None else f"{x:.2f}"


def table(path: Path, folders=()) -> None:
    """The rows as Markdown; with the benchmark `folders`, QVBS's own
    reference values (its index's results, Storm's exact engine in 2018)
    fill in rows measured without them."""
    refs = {}
    for folder in folders:
        for inst in instances(Path(folder)):
            key0 = f"{inst['benchmark']}.{inst['file_params']}.{inst['consts']}"
            for name, v in inst["references"].items():
                refs[f"{key0}.{name}"] = v
    rows = sorted(load_cache(path).values(), key=lambda r: r["key"])
    print(
        "| instance | constants | property | states | jaxmc value ± bound "
        "| Storm sound | rel. error | in bound | QVBS reference: rel. error "
        "| jaxmc build + check (s) | Storm build + check (s) |"
    )
    print("|---|---|---|--:|--:|--:|--:|:-:|--:|--:|--:|")
    for r in rows:
        if "error" in r and "benchmark" not in r:
            print(f"| {r['key']} | | | | error: {r['error']} | | | | | | |")
            continue
        r = {**r, **compare(r["jaxmc_value"], r["jaxmc_bound"], r["storm_value"])}
        inst = f"{r['benchmark']} {r['file_params']}".strip()
        rel = "—" if r["rel"] is None else f"{r['rel']:.1e}"
        inside = {None: "—", True: "yes", False: "**no**"}.get(r["in_bound"])
        if r["in_bound"] == "rounding":
            inside = f"{r['ulps']:.0f} ulp off ± 0"
        jv = _num(r["jaxmc_value"], r["jaxmc_bound"])
        if r.get("jaxmc_error"):
            jv = f"error: {r['jaxmc_error']}"
        sv = _num(r["storm_value"]) if not r.get("storm_error") else r["storm_error"]
        ref = r.get("qvbs_reference", refs.get(r["key"]))
        if ref is None:
            qv = "—"
        elif isinstance(ref, bool) or isinstance(r["jaxmc_value"], bool):
            qv = "equal" if ref == r["jaxmc_value"] else f"**{ref}**"
        else:
            d = abs(r["jaxmc_value"] - ref)
            qv = f"{d / abs(ref) if ref else d:.1e}"
        print(
            f"| {inst} | {r['consts']} | {r['property_name']} | {r['states']:,} "
            f"| {jv} | {sv} | {rel} | {inside} | {qv} "
            f"| {_t(r['jaxmc_build_s'])} + {_t(r['jaxmc_check_s'])} "
            f"| {_t(r['storm_build_s'])} + {_t(r['storm_check_s'])} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="*", help="QVBS benchmark folders")
    ap.add_argument("--out", default="qvbs.json", help="JSON file of rows (merged)")
    ap.add_argument("--max-states", type=int, default=1_000_000)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--only", nargs="*", help="instances whose key contains one")
    ap.add_argument("--table", metavar="JSON", help="print the rows as Markdown")
    args = ap.parse_args()
    if args.table:
        table(Path(args.table), args.folders)
    else:
        run(args)


if __name__ == "__main__":
    main()
