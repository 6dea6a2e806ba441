"""Sound by default (issue 20): jaxmc's default `criterion="sound"` against
PRISM's criterion (`criterion="change"`) on PRISM's example models, with
Storm's sound value (`../shared/tools/storm_ref.py --solver sound`) as the
reference.

For each case: the time of a warm `jaxmc.check` (the fastest of
`REPEATS` after a first one on the built model, so JAX's compilation is
excluded) and its iterations under
each criterion, the relative error of each value against Storm's sound
value, and the certified bound of the sound result (absolute) and whether
the two certified intervals meet (Storm's sound value is within 1e-6
relative of the exact one).

    python benchmarks/sound.py              # print a markdown table
    python benchmarks/sound.py --only brp   # cases whose name contains brp

Storm's sound values are cached in `benchmarks/sound_storm.json` (keyed
by model, constants and property), so later runs need not recompute them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peers import environment, storm_available, storm_run  # noqa: E402


ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT.parent / "shared" / "models" / "prism-examples"
CACHE = ROOT / "benchmarks" / "sound_storm.json"

#: (name, model relative to prism-examples, constants, property)
CASES = [
    ("brp N=256 MAX=5", "dtmcs/brp/brp.pm", "N=256,MAX=5", "P=? [ true U s=5 ]"),
    ("brp N=256 MAX=5 (srep=3)", "dtmcs/brp/brp.pm", "N=256,MAX=5",
     "P=? [ true U srep=3 & !(rrep=3) & recv ]"),
    ("herman N=13", "dtmcs/herman/herman13.pm", "",
     'filter(max, R=? [ F "stable" ], "init")'),
    ("herman N=15", "dtmcs/herman/herman15.pm", "",
     'filter(max, R=? [ F "stable" ], "init")'),
    ("leader_sync 5-4", "dtmcs/leader_sync/leader5_4.pm", "",
     'R{"num_rounds"}=? [ F "elected" ]'),
    ("leader_sync 6-4", "dtmcs/leader_sync/leader6_4.pm", "",
     'R{"num_rounds"}=? [ F "elected" ]'),
    ("polling N=10", "ctmcs/polling/poll10.sm", "",
     "P=? [ !(s=2 & a=1) U (s=1 & a=1) ]"),
    ("polling N=12", "ctmcs/polling/poll12.sm", "",
     "P=? [ !(s=2 & a=1) U (s=1 & a=1) ]"),
    ("kanban t=3", "ctmcs/kanban/kanban.sm", "t=3", "P=? [ !(z4=t) U z1=t ]"),
]  # fmt: skip


#: Warm checks per case and criterion; the table has the fastest.
REPEATS = 3


def _key(model, consts, prop) -> str:
    return f"{model}|{consts}|{prop}"


def storm_sound(model, consts, prop, timeout) -> dict:
    cache = json.loads(CACHE.read_text()) if CACHE.exists() else {}
    key = _key(model, consts, prop)
    if key not in cache:
        if not storm_available():
            return {"error": "Storm not installed"}
        got = storm_run(EXAMPLES / model, consts, prop, "sound", timeout)
        if "error" in got:
            return got
        cache[key] = got
        CACHE.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
    return cache[key]


def run_jaxmc(model, consts, prop, criterion) -> dict:
    import jaxmc

    m = jaxmc.load_model(EXAMPLES / model, consts or None)
    jaxmc.build(m)
    jaxmc.check(m, prop, criterion=criterion)  # (compiles)
    wall = float("inf")
    for _ in range(REPEATS):  # (the least of a few: the machine is shared)
        t0 = time.perf_counter()
        r = jaxmc.check(m, prop, criterion=criterion)
        wall = min(wall, time.perf_counter() - t0)
    return {
        "value": float(r.value),
        "bound": r.bound,
        "iterations": r.iterations or 0,
        "method": r.method,
        "time": wall,
        "states": jaxmc.build(m).num_states,
    }


def _rel(v, ref) -> float:
    return abs(v - ref) / abs(ref) if ref else abs(v - ref)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="run the cases whose name contains this")
    p.add_argument("--skip", action="append", default=[],
                   help="leave out the cases whose name contains this")  # fmt: skip
    p.add_argument("--storm-timeout", type=float, default=600.0)
    args = p.parse_args(argv)
    env = environment()
    print(f"{env['date']}, {env['cpu']} ({env['cores']} cores), {env['device']}, "
          f"jax {env['jax']}, stormpy {env.get('stormpy', '-')}")  # fmt: skip
    print()
    print("| case | states | sound: time s / iters / method | change: time s / "
          "iters | sound/change time | rel. err sound | rel. err change | "
          "bound (abs) | meets Storm's |")  # fmt: skip
    print("|---|---:|---|---|---:|---:|---:|---:|---|")
    for name, model, consts, prop in CASES:
        if args.only and args.only not in name:
            continue
        if any(k in name for k in args.skip):
            continue
        ref = storm_sound(model, consts, prop, args.storm_timeout)
        s = run_jaxmc(model, consts, prop, "sound")
        c = run_jaxmc(model, consts, prop, "change")
        if "value" in ref:
            v = float(ref["value"])
            es, ec = f"{_rel(s['value'], v):.1e}", f"{_rel(c['value'], v):.1e}"
            # (Storm's sound value is itself within 1e-6 relative of the
            # exact value: the two certified intervals must meet)
            slack = 1e-6 * abs(v)
            inside = (
                s["bound"] is not None and abs(s["value"] - v) <= s["bound"] + slack
            )
            inside = "yes" if inside else "no"
        else:
            es = ec = inside = f"(Storm: {ref.get('error')})"
        bound = "-" if s["bound"] is None else f"{s['bound']:.1e}"
        print(f"| {name} | {s['states']} | {s['time']:.3f} / {s['iterations']} / "
              f"{s['method']} | {c['time']:.3f} / {c['iterations']} | "
              f"{s['time'] / c['time']:.2f} | {es} | {ec} | {bound} | {inside} |",
              flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
