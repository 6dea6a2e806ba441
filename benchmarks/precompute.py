"""Graph precomputation and layout building: host (numpy/scipy) against the
device (jitted JAX, `jaxmc.numerics.graph_device`, `jaxmc.layout.device_warp`)
on the default JAX device (a GPU where there is one).

For each case the model is built once; then

- graph (`--what graph`): the prob0/prob1 sets of `P=? [ φ U ψ ]` (DTMC,
  CTMC) or of `Pmax` and `Pmin` (MDP) by `jaxmc.numerics.graph` on the
  host (`graph_device.MODE = "off"`) and on the device (`"on"`): the edge
  list moved to the device (`structure`), the first call (compilation
  included) and a warm call (median of `--reps`); the sets are compared.
  `converged`: the device's prob0 search finished within
  `graph_device.MAX_ROUNDS` rounds (else the host finished it, and the
  device time includes that).
  Also the host BSCC decomposition (`graph.bsccs`) for DTMCs/CTMCs and
  MECs (`graph.mecs`) for MDPs, which stay on the host.
- check (`--what check`): `jaxmc.check` of the case's property (`PROPS`)
  with both host (`DEVICE_BUILD` and `graph_device.MODE` "off") and device
  ("on") paths, on a fresh device model each time: the host twice (the
  first compiles the solve), the device cold and warm; wall time and the
  `precompute` / `layout` / `solve` split.
- layout (`--what layout`): `numerics.matrices.build_ordered` (a solve's
  layout build: the window reordering where it pays, then the layout) from
  the model's host arrays, with `jaxmc.layout.build.DEVICE_BUILD` "off"
  (numpy on the host, moved to the device at the end) and "on"
  (`jaxmc.layout.device_warp`, `device_vector`, `device_order`: the arrays
  moved once, then built there), cold (compilation included) and warm; the
  arrays are compared.

Prints a markdown table per part and one JSON line per case.

    python benchmarks/precompute.py --size small
    python benchmarks/precompute.py --size large --what all
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import jax
import numpy as np


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _gpu_common import model_dirs, table  # noqa: E402

import jaxmc  # noqa: E402
from jaxmc.layout import build as layout_build  # noqa: E402
from jaxmc.numerics import graph, graph_device, matrices  # noqa: E402


def model_path(rel: str) -> Path:
    """`rel` (a path under PRISM's examples) under the first root of
    `_gpu_common.model_dirs` that has it (`JAXMC_MODELS`, `.bench/models`,
    `../shared/models/prism-examples`)."""
    for d in model_dirs():
        if (d / rel).exists():
            return d / rel
    raise FileNotFoundError(rel)


#: name -> (file under prism-examples (or JAXMC_MODELS), constants, ψ over
#: the state columns `v`, φ or None for true)
CASES = {
    "small": [
        ("tandem c=63", "ctmcs/tandem/tandem.sm", "c=63", lambda v: v["sc"] == 63),
        ("kanban t=2", "ctmcs/kanban/kanban.sm", "t=2", lambda v: v["w4"] == 2),
        ("brp N=64", "dtmcs/brp/brp.pm", "N=64,MAX=2", lambda v: v["s"] == 5),
        ("coin2 K=4", "mdps/consensus/coin2.nm", "K=4", lambda v: v["pc1"] == 3),
    ],
    "medium": [  # 10^5 - 10^6 states: the CPU comparison
        ("tandem c=255", "ctmcs/tandem/tandem.sm", "c=255", lambda v: v["sc"] == 255),
        ("tandem c=511", "ctmcs/tandem/tandem.sm", "c=511", lambda v: v["sc"] == 511),
        ("kanban t=3", "ctmcs/kanban/kanban.sm", "t=3", lambda v: v["w4"] == 3),
        ("brp N=2048", "dtmcs/brp/brp.pm", "N=2048,MAX=5", lambda v: v["s"] == 5),
        ("coin4 K=4", "mdps/consensus/coin4.nm", "K=4", lambda v: v["pc1"] == 3),
    ],
    "large": [  # the sizes (a GPU)
        (
            "tandem c=2047",
            "ctmcs/tandem/tandem.sm",
            "c=2047",
            lambda v: v["sc"] == 2047,
        ),
        ("kanban t=5", "ctmcs/kanban/kanban.sm", "t=5", lambda v: v["w4"] == 5),
        (
            "cluster N=256",
            "ctmcs/cluster/cluster.sm",
            "N=256",
            lambda v: v["left_n"] == 0,
        ),
        ("brp N=4096", "dtmcs/brp/brp.pm", "N=4096,MAX=5", lambda v: v["s"] == 5),
        ("coin6 K=4", "mdps/consensus/coin6.nm", "K=4", lambda v: v["pc1"] == 3),
        (
            "zeroconf N=1000 K=8",
            "mdps/zeroconf/zeroconf.nm",
            "N=1000,K=8,reset=true,err=0.1",
            lambda v: (v["l"] == 4) & (v["ip"] == 1),
        ),
    ],
}


#: The property `--what check` checks, by the case's first word.
PROPS = {
    "tandem": "P=? [ F<=0.25 sc=c ]",
    "kanban": "S=? [ w4>0 ]",
    "cluster": 'S=? [ "premium" ]',
    "brp": "P=? [ F s=5 ]",
    "coin2": 'Pmin=? [ F "finished" ]',
    "coin4": 'Pmin=? [ F "finished" ]',
    "coin6": 'Pmin=? [ F "finished" ]',
    "zeroconf": "Pmin=? [ F l=4 & ip=1 ]",
}


def timed(f, *a, **k):
    t = time.perf_counter()
    out = jax.block_until_ready(f(*a, **k))
    return out, time.perf_counter() - t


def median(f, reps, *a, **k):
    return statistics.median(timed(f, *a, **k)[1] for _ in range(reps))


def sets(mode, em, phi, psi):
    """The prob0/prob1 sets by `graph` with `graph_device.MODE = mode`."""
    saved, graph_device.MODE = graph_device.MODE, mode
    try:
        if not em.is_nondeterministic:
            return graph.prob01(em, phi, psi)
        return graph.prob01_max(em, phi, psi) + graph.prob01_min(em, phi, psi)
    finally:
        graph_device.MODE = saved


def rounds_needed(em, phi, psi) -> bool:
    """Whether the device's prob0 search converged within `MAX_ROUNDS`."""
    return graph_device.exists_reach(em, psi, phi & ~psi)[1]


def bench_graph(em, phi, psi, reps) -> dict:
    want, host_s = timed(sets, "off", em, phi, psi)
    host_s = min(host_s, median(sets, reps, "off", em, phi, psi))
    graph_device._CACHE.pop(em, None)
    _, move_s = timed(graph_device.structure, em)
    got, cold_s = timed(sets, "on", em, phi, psi)
    warm_s = median(sets, reps, "on", em, phi, psi)
    same = all(np.array_equal(a, b) for a, b in zip(want, got))
    if em.is_nondeterministic:
        decomp, dec_s = "mecs", timed(graph.mecs, em)[1]
    else:
        decomp, dec_s = "bsccs", timed(graph.bsccs, em)[1]
    return dict(
        host_s=host_s,
        device_move_s=move_s,
        device_cold_s=cold_s,
        device_warm_s=warm_s,
        same=same,
        converged=rounds_needed(em, phi, psi),
        decomposition=decomp,
        decomposition_host_s=dec_s,
    )


def ordered(mode, indptr, cols, vals, shape, kind):
    """`numerics.matrices.build_ordered` (the solve's build: the window
    reordering where it pays, then the layout) with `DEVICE_BUILD = mode`."""
    saved, layout_build.DEVICE_BUILD = layout_build.DEVICE_BUILD, mode
    try:
        return matrices.build_ordered(indptr, cols, vals, shape, kind)
    finally:
        layout_build.DEVICE_BUILD = saved


def bench_layout(em, reps) -> list[dict]:
    m, n = em.num_choices, em.num_states
    args = (em.row_ptr, em.col, em.val, (m, n))
    out = []
    kinds = ["warp", "warp2", "vector"]
    if m == n:
        kinds += ["compact", "compact2"]
    for kind in kinds:
        (want, wo), host_s = timed(ordered, "off", *args, kind)
        host_s = min(host_s, median(ordered, reps, "off", *args, kind))
        (got, go), cold_s = timed(ordered, "on", *args, kind)
        warm_s = median(ordered, reps, "on", *args, kind)
        same = type(want) is type(got) and all(
            np.array_equal(np.asarray(a), np.asarray(b))
            for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got))
        )
        same = same and (wo is None) == (go is None)
        out.append(
            dict(
                kind=kind,
                reordered=wo is not None,
                host_s=host_s,
                device_cold_s=cold_s,
                device_warm_s=warm_s,
                same=same,
            )
        )
    return out


def check_in(mode, model, em, prop, layout="auto") -> dict:
    """`jaxmc.check` with the layouts and graph fixed points on the host
    (`mode` "host") or on the device ("device": forced, also on a CPU), on a
    fresh device model: wall seconds and the stage split."""
    import jaxmc.api

    jaxmc.api._DEVICE_MODELS.pop(em, None)
    graph_device._CACHE.pop(em, None)
    on = "on" if mode == "device" else "off"
    saved = layout_build.DEVICE_BUILD, graph_device.MODE
    layout_build.DEVICE_BUILD, graph_device.MODE = on, on
    try:
        t = time.perf_counter()
        r = jaxmc.check(model, prop, layout=layout)
        wall = time.perf_counter() - t
    finally:
        layout_build.DEVICE_BUILD, graph_device.MODE = saved
    tm = r.timing
    return dict(
        wall_s=wall,
        precompute_s=tm.get("precompute", 0.0),
        layout_s=tm.get("layout", 0.0),
        solve_s=tm.get("solve", 0.0),
        value=float(np.asarray(r.value)),
    )


def bench_check(model, em, prop, layout="auto") -> list[dict]:
    """The check on the host twice (the first compiles the solve), then on
    the device twice (cold: the builders compile; warm)."""
    a = (model, em, prop, layout)
    check_in("host", *a)
    out = [dict(run="host", **check_in("host", *a))]
    out.append(dict(run="device cold", **check_in("device", *a)))
    out.append(dict(run="device warm", **check_in("device", *a)))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(CASES), default="small")
    ap.add_argument(
        "--what", choices=("graph", "layout", "check", "all"), default="all"
    )
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument(
        "--layout", default="auto", help="the checks' layout (auto: CSR on a CPU)"
    )
    ap.add_argument("--only", help="run the cases whose name contains this")
    args = ap.parse_args(argv)
    print(
        f"# backend {jax.default_backend()}: {jax.devices()[0].device_kind}", flush=True
    )
    grows, lrows, crows = [], [], []
    for name, rel, consts, psi_of in CASES[args.size]:
        if args.only and args.only not in name:
            continue
        path = model_path(rel)
        t = time.perf_counter()
        model = jaxmc.load_model(str(path), consts)
        em = jaxmc.build(model)
        build_s = time.perf_counter() - t
        v = {x.name: em.states[:, i] for i, x in enumerate(em.variables)}
        psi = np.asarray(psi_of(v), dtype=bool)
        phi = np.ones(em.num_states, bool)
        base = dict(
            case=name,
            states=em.num_states,
            transitions=em.num_transitions,
            build_s=build_s,
        )
        if args.what in ("graph", "all"):
            row = dict(base, **bench_graph(em, phi, psi, args.reps))
            grows.append(row)
            print(json.dumps(dict(row, part="graph")), flush=True)
        if args.what in ("layout", "all"):
            for r in bench_layout(em, args.reps):
                row = dict(base, **r)
                lrows.append(row)
                print(json.dumps(dict(row, part="layout")), flush=True)
        if args.what in ("check", "all"):
            prop = PROPS[name.split()[0]]
            for r in bench_check(model, em, prop, args.layout):
                row = dict(base, prop=prop, **r)
                crows.append(row)
                print(json.dumps(dict(row, part="check")), flush=True)
    if crows:
        print("\n## check (s; timing stages)\n")
        print(
            table(
                crows,
                ["case", "states", "prop", "run", "wall_s", "precompute_s",
                 "layout_s", "solve_s", "value"],
            )
        )  # fmt: skip
    if grows:
        print("\n## graph precomputation (prob0/prob1 sets; s)\n")
        print(
            table(
                grows,
                [
                    "case",
                    "states",
                    "transitions",
                    "host_s",
                    "device_move_s",
                    "device_cold_s",
                    "device_warm_s",
                    "same",
                    "converged",
                    "decomposition",
                    "decomposition_host_s",
                ],
            )
        )
    if lrows:
        print("\n## layout build (s)\n")
        print(
            table(
                lrows,
                [
                    "case",
                    "states",
                    "transitions",
                    "kind",
                    "reordered",
                    "host_s",
                    "device_cold_s",
                    "device_warm_s",
                    "same",
                ],
            )
        )


if __name__ == "__main__":
    main()
