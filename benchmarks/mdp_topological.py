"""MDPs: topological value iteration and topological interval iteration
(issue 20) against Storm's sound and default engines, one markdown row per
instance and property.

    python benchmarks/mdp_topological.py [--max-iters N] [--only NAME]

Needs ../shared/models and ../shared/tools/storm_ref.py (Storm via stormpy).
jaxmc's time is the check alone (the model is built first, not counted);
Storm's is its check time as storm_ref.py reports it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jaxmc


ROOT = Path(__file__).resolve().parents[1]
MDPS = ROOT / "../shared/models/prism-examples/mdps"
STORM = ROOT / "../shared/tools/storm_ref.py"

COIN = [
    'Pmin=? [ F "finished"&"all_coins_equal_1" ]',
    'R{"steps"}max=? [ F "finished" ]',
]

INSTANCES = [
    ("consensus N=2 K=2", "consensus/coin2.nm", "K=2", COIN),
    ("consensus N=2 K=16", "consensus/coin2.nm", "K=16", COIN),
    ("consensus N=4 K=2", "consensus/coin4.nm", "K=2", COIN),
    ("consensus N=4 K=4", "consensus/coin4.nm", "K=4", COIN),
    ("consensus N=6 K=2", "consensus/coin6.nm", "K=2", COIN),
    ("csma 2-4", "csma/csma2_4.nm", "",
     ['Pmin=? [ F "all_delivered" ]', 'R{"time"}max=? [ F "all_delivered" ]']),
    ("csma 3-2", "csma/csma3_2.nm", "",
     ['Pmin=? [ F "all_delivered" ]', 'R{"time"}max=? [ F "all_delivered" ]']),
    ("zeroconf N=1000 K=4", "zeroconf/zeroconf.nm", "N=1000,K=4,err=0,reset=true",
     ["Pmin=? [ true U (l=4 & ip=1) ]", "Rmax=? [ F l=4 ]"]),
    ("wlan0 TTM=10", "wlan/wlan0.nm", "TRANS_TIME_MAX=10",
     ['R{"time"}max=? [ F s1=12 & s2=12 ]']),
    ("wlan2 TTM=10", "wlan/wlan2.nm", "TRANS_TIME_MAX=10",
     ['R{"time"}max=? [ F s1=12 & s2=12 ]']),
    ("firewire impl delay=3", "firewire/impl/firewire.nm", "delay=3,fast=0.5",
     ['R{"time"}min=? [ F ((s1=8) & (s2=7)) | ((s1=7) & (s2=8)) ]']),
    ("firewire impl delay=36", "firewire/impl/firewire.nm", "delay=36,fast=0.5",
     ['R{"time"}min=? [ F ((s1=8) & (s2=7)) | ((s1=7) & (s2=8)) ]']),
]  # fmt: skip


def storm(model, consts, prop, solver):
    """Storm's value and check time; for files Storm's parser refuses, on
    jaxmc's reprint of the model (tests/storm_input.py)."""
    value, secs = _storm(model, consts, prop, solver)
    if value is None:
        sys.path.insert(0, str(ROOT / "tests"))
        from storm_input import program_text

        with tempfile.NamedTemporaryFile("w", suffix=".nm", delete=False) as f:
            f.write(program_text(model))
        try:
            value, secs = _storm(f.name, consts, prop, solver)
        finally:
            os.unlink(f.name)
    return value, secs


def _storm(model, consts, prop, solver):
    cmd = [sys.executable, str(STORM), str(model), "--prop", prop, "--solver", solver]
    if consts:
        cmd += ["--const", consts]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    try:
        d = json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return None, None
    return (d.get("value"), d.get("check_s")) if d.get("ok") else (None, None)


def jaxmc_row(model, prop, method, max_iters):
    t = time.perf_counter()
    try:
        r = jaxmc.check(model, prop, method=method, max_iters=max_iters, throw=False)
    except jaxmc.errors.JaxmcError as err:
        return None, None, str(err).splitlines()[0][:60], time.perf_counter() - t
    dt = time.perf_counter() - t
    i = int(r.initial_states[0])
    gap = None
    if r.lower is not None:
        gap = (float(r.upper[i]) - float(r.lower[i])) / 2
    return float(r.value), gap, f"{r.status} {r.iterations or 0}", dt


def rel(a, b):
    if a is None or b is None:
        return "-"
    return f"{abs(a - b) / max(abs(b), 1e-300):.1e}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-iters", type=int, default=10000)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    print(
        "| instance | states | property | Storm sound (s) | Storm default: rel. err (s)"
        " | jaxmc VI: rel. err, status iters (s) | jaxmc II: rel. err, ±bound,"
        " status iters (s) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, path, consts, props in INSTANCES:
        if args.only and args.only not in name:
            continue
        m = jaxmc.load_model(str(MDPS / path), consts or None)
        n = jaxmc.build(m).num_states
        for prop in props:
            sv, st = storm(MDPS / path, consts, prop, "sound")
            dv, dtime = storm(MDPS / path, consts, prop, "storm-default")
            cells = []
            for method in ("value_iteration", "interval_iteration"):
                v, gap, how, dt = jaxmc_row(m, prop, method, args.max_iters)
                b = f", ±{gap:.1e}" if gap is not None else ""
                cells.append(f"{rel(v, sv)}{b}, {how} ({dt:.2f})")
            sstr = f"{sv:.10g} ({st:.2f})" if sv is not None else "-"
            dstr = f"{rel(dv, sv)} ({dtime:.2f})" if dv is not None else "-"
            print(
                f"| {name} | {n:,} | `{prop}` | {sstr} | {dstr} | {cells[0]} "
                f"| {cells[1]} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
