"""MDP long-run averages (`Smin/Smax`, `R{..}min/max=? [S]`) against Storm
on PRISM's example MDPs: value, certified bound, agreement and time.

    python benchmarks/lra_storm.py [--models DIR] [--only NAME] [--json]

Storm runs in its sound environment (stormpy); jaxmc with its defaults
(relative epsilon 1e-6, sound). A row agrees when the values differ by at
most 1e-6 relative (plus 1e-9)."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / ".." / "shared" / "models" / "prism-examples" / "mdps"

#: (name, model file, constants, property)
CASES = [
    ("consensus2 Smax agree", "consensus/coin2.nm", "K=2", 'Smax=? [ "agree" ]'),
    ("consensus2 Smin agree", "consensus/coin2.nm", "K=2", 'Smin=? [ "agree" ]'),
    ("consensus4 Rmax steps", "consensus/coin4.nm", "K=2", 'R{"steps"}max=? [ S ]'),
    ("csma2_2 Rmax time", "csma/csma2_2.nm", "", 'R{"time"}max=? [ S ]'),
    ("csma2_2 Rmin time", "csma/csma2_2.nm", "", 'R{"time"}min=? [ S ]'),
    ("csma2_2 Smax all", "csma/csma2_2.nm", "", 'Smax=? [ "all_delivered" ]'),
    ("wlan0 Rmax cost", "wlan/wlan0.nm", "TRANS_TIME_MAX=10", 'R{"cost"}max=? [ S ]'),
    ("wlan0 Rmin time", "wlan/wlan0.nm", "TRANS_TIME_MAX=10", 'R{"time"}min=? [ S ]'),
    ("wlan1 Rmax collisions", "wlan/wlan1.nm", "TRANS_TIME_MAX=10",
     'R{"collisions"}max=? [ S ]'),
    ("zeroconf Rmax", "zeroconf/zeroconf.nm", "N=20,K=2,err=0.1,reset=true",
     "Rmax=? [ S ]"),
    ("zeroconf Rmin", "zeroconf/zeroconf.nm", "N=20,K=2,err=0.1,reset=true",
     "Rmin=? [ S ]"),
    ("mutual3 Smax some_14", "mutual/mutual3.nm", "", 'Smax=? [ "some_14" ]'),
    ("mutual3 Smin some_4_13", "mutual/mutual3.nm", "", 'Smin=? [ "some_4_13" ]'),
    ("rabin3 Smax one_critical", "rabin/rabin3.nm", "", 'Smax=? [ "one_critical" ]'),
    ("rabin3 Smin one_critical", "rabin/rabin3.nm", "", 'Smin=? [ "one_critical" ]'),
    ("leader3 Smax elected", "leader_async/leader3.nm", "", 'Smax=? [ "elected" ]'),
]  # fmt: skip

#: Larger instances (`--large`): one big end component each.
LARGE = [
    ("mutual4 Smax some_14", "mutual/mutual4.nm", "", 'Smax=? [ "some_14" ]'),
    ("rabin4 Smin one_critical", "rabin/rabin4.nm", "", 'Smin=? [ "one_critical" ]'),
    ("rabin4 Smax one_critical", "rabin/rabin4.nm", "", 'Smax=? [ "one_critical" ]'),
]  # fmt: skip


def storm(path: Path, consts: str, prop: str) -> tuple[float, float]:
    sys.path.insert(0, str(ROOT / "tests"))
    from storm_input import program_text
    from storm_oracle import storm_value

    t = time.perf_counter()
    try:
        v = storm_value(str(path), consts, prop)
    except RuntimeError:  # (Storm's parser refuses the file: reprinted)
        v = storm_value(str(path), consts, prop, program_text(path))
    return float(v), time.perf_counter() - t


def ours(path: Path, consts: str, prop: str):
    import jaxmc

    model = jaxmc.load_model(str(path), consts or None)
    t0 = time.perf_counter()
    model.build()
    t1 = time.perf_counter()
    r = jaxmc.check(model, prop)
    t2 = time.perf_counter()
    n = jaxmc.build(model).num_states
    return float(r.value), r.bound, n, t1 - t0, t2 - t1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=str(MODELS))
    ap.add_argument("--only", default=None, help="cases whose name contains this")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--large", action="store_true", help="add the larger cases")
    ap.add_argument("--no-storm", action="store_true", help="jaxmc only")
    a = ap.parse_args(argv)
    rows, bad = [], 0
    for name, file, consts, prop in CASES + (LARGE if a.large else []):
        if a.only and a.only not in name:
            continue
        path = Path(a.models) / file
        v, bound, n, build_s, check_s = ours(path, consts, prop)
        s, storm_s = (math.nan, math.nan) if a.no_storm else storm(path, consts, prop)
        ok = a.no_storm or abs(v - s) <= 1e-6 * abs(s) + 1e-9
        bad += not ok
        rows.append(dict(case=name, states=n, jaxmc=v, bound=bound, storm=s,
                         agree=ok, build_s=build_s, check_s=check_s,
                         storm_s=storm_s))  # fmt: skip
        if not a.json:
            b = "-" if bound is None else f"{bound:.1e}"
            print(f"{name:28s} n={n:7d} jaxmc={v:.10g} (±{b}) storm={s:.10g} "
                  f"{'ok' if ok else 'DIFFER'} check {check_s:.2f}s "
                  f"storm {storm_s:.2f}s", flush=True)  # fmt: skip
    if a.json:
        print(json.dumps(rows, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
