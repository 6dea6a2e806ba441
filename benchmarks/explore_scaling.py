"""The partitioned device explorer (issue 22's exploration item) on 1, 2, 4
devices: states, BFS levels, successors exchanged between devices per
level (and their bytes: a key of `4 w` bytes out, a 4-byte handle back),
the loop's runs, and time, against the single-device explorer.

    python benchmarks/explore_scaling.py --simulate 4 --devices 1,2,4 \\
        [--models brp:N=64,MAX=5,...] [--repeat 2]

`--simulate N` sets `XLA_FLAGS=--xla_force_host_platform_device_count=N`
before JAX starts (CPU: simulated devices share the host's cores, so the
times say nothing about scaling on GPUs). Each time is the best of
`--repeat` runs after a first (compiling) one; `first s` is that first
run. Every partitioned model is checked equal to the single-device one
(states, rows, values). Prints one JSON line per measurement and a table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models" / "prism-examples"
#: name -> (file under MODELS, constants)
CASES = {
    "brp": ("dtmcs/brp/brp.pm", "N=64,MAX=5"),
    "kanban": ("ctmcs/kanban/kanban.sm", "t=3"),
    "coin": ("mdps/consensus/coin4.nm", "K=2"),
    "tandem": ("ctmcs/tandem/tandem.sm", "c=255"),
}


def _parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--simulate", type=int, default=0)
    p.add_argument("--devices", default="1,2,4")
    p.add_argument("--models", default="brp,kanban,coin",
                   help="names of CASES, each optionally name:CONSTS")  # fmt: skip
    p.add_argument("--repeat", type=int, default=2)
    return p.parse_args()


def main() -> None:
    args = _parse()
    if args.simulate:
        flag = f"--xla_force_host_platform_device_count={args.simulate}"
        os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " " + flag
    import numpy as np

    from jaxmc.explore.builder import Builder
    from jaxmc.explore.compile import Compiled
    from jaxmc.explore.device import explore, explore_sharded
    from jaxmc.lang import parse_model
    from jaxmc.semantics import check_program

    def timed(f):
        t = time.perf_counter()
        out = f()
        first = time.perf_counter() - t
        best = float("inf")
        for _ in range(args.repeat):
            t = time.perf_counter()
            out = f()
            best = min(best, time.perf_counter() - t)
        return out, first, best

    rows = []
    for spec in args.models.split(","):
        name, _, consts = spec.partition(":")
        rel, default = CASES[name]
        path = MODELS / rel
        if not path.exists():
            print(f"# {rel} not available", file=sys.stderr)
            continue
        text = path.read_text()
        checked = check_program(parse_model(text, str(path)), consts or default)
        comp = Compiled(checked, None)
        mt = checked.model_type
        init = Builder(comp, mt, None, "fix", None, 1 << 17, 0.0).initial()
        (ref, _), first, best = timed(lambda: explore(comp, mt, init))
        rows.append(dict(model=f"{name}:{consts or default}", devices="single",
                         states=ref.num_states, first=first, best=best))  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
        for nd in [int(x) for x in args.devices.split(",")]:
            (model, _, st), first, best = timed(
                lambda: explore_sharded(comp, mt, init, nd)
            )
            assert model.num_states == ref.num_states
            for f in ("row_ptr", "col", "val", "states"):
                np.testing.assert_array_equal(getattr(model, f), getattr(ref, f))
            sent = st.sent.sum(axis=1)
            rows.append(dict(
                model=f"{name}:{consts or default}", devices=nd,
                states=st.states, levels=st.levels, rounds=st.rounds,
                sent=int(sent.sum()), peak_level=int(sent.max(initial=0)),
                bytes=int(sent.sum()) * st.bytes_per_successor,
                peak_bytes=int(sent.max(initial=0)) * st.bytes_per_successor,
                per_device_states=(st.new.sum(axis=0)).tolist(),
                sent_per_level=sent.tolist(), first=first, best=best,
            ))  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    print(
        "\n| model | devices | states | levels | runs | exchanged successors "
        "(bytes) | peak level (bytes) | first s | best s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if r["devices"] == "single":
            print(
                f"| {r['model']} | single-device explorer | {r['states']:,} | | | "
                f"| | {r['first']:.2f} | {r['best']:.2f} |"
            )
            continue
        print(
            f"| {r['model']} | {r['devices']} | {r['states']:,} | {r['levels']} | "
            f"{r['rounds']} | {r['sent']:,} ({r['bytes']:,}) | "
            f"{r['peak_level']:,} ({r['peak_bytes']:,}) | {r['first']:.2f} | "
            f"{r['best']:.2f} |"
        )


if __name__ == "__main__":
    main()
