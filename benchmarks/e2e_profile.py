"""Where a steady-state check spends its time: the wall time of the pieces
of `jaxmc.numerics.steady`'s path (BSCCs, periodicity, system assembly,
layout builds, device Krylov, Jacobi; each wrapped and synchronised), per
`layout=`, for a first and a warm `jaxmc.check` on the model built once.

    python benchmarks/e2e_profile.py c=2047 auto,warp path/to/tandem.sm
    python benchmarks/e2e_profile.py N=464 warp,auto path/to/cluster.sm \\
        'S=? [ "premium" ]'
"""

import collections
import functools
import sys
import time

import jax
import numpy as np

import jaxmc
from jaxmc.numerics import graph, steady, steady_solve


c = sys.argv[1] if len(sys.argv) > 1 else "c=2047"
c = c if "=" in c else f"c={c}"
layouts = sys.argv[2].split(",") if len(sys.argv) > 2 else ["auto", "warp"]
prop = sys.argv[4] if len(sys.argv) > 4 else 'R{"customers"}=? [ S ]'
T = collections.defaultdict(float)


def wrap(mod, name):
    f = getattr(mod, name)

    @functools.wraps(f)
    def g(*a, **k):
        t = time.perf_counter()
        out = f(*a, **k)
        jax.block_until_ready(
            jax.tree_util.tree_leaves(
                out, is_leaf=lambda x: isinstance(x, (np.ndarray, jax.Array))
            )
            and out
        )
        T[name] += time.perf_counter() - t
        return out

    setattr(mod, name, g)


for name in ("jacobi", "build_ordered", "_aperiodic", "_off_diagonal"):
    wrap(steady, name)
for name in ("device_krylov", "build_ordered", "system_kind", "canonical"):
    wrap(steady_solve, name)
wrap(graph, "bsccs")
t = time.perf_counter()
m = jaxmc.load_model(sys.argv[3] if len(sys.argv) > 3 else "tandem.sm", c)
em = jaxmc.build(m)
print(f"build {time.perf_counter() - t:.1f}s, {em.num_states} states", flush=True)
for lay in layouts:
    for rep in ("first", "warm"):
        T.clear()
        t = time.perf_counter()
        r = jaxmc.check(m, prop, layout=lay, max_iters=60000)
        tot = time.perf_counter() - t
        print(
            f"{lay:5s} {rep:5s} total {tot:6.2f}s value {r.value:.10g} "
            f"{r.method}/{r.layout} it={r.iterations} "
            f"timing={ {k: round(v, 2) for k, v in r.timing.items()} }"
        )
        print(
            "      "
            + ", ".join(
                f"{k} {v:.2f}" for k, v in sorted(T.items(), key=lambda kv: -kv[1])
            ),
            flush=True,
        )
