"""Strong and weak scaling of the row-partitioned solves (issue 22):
time per iteration and halo bytes per iteration on 1, 2, 4 (8) devices.

Each case builds a CTMC, uniformises it (`P = I + Q / q`) and runs the
power iteration `x' = P x + b` for a fixed number of iterations
(`jaxmc.solvers.power` with an unreachable epsilon) on:

- `csr`: one device, the plain CSR layout (the baseline);
- `D` devices: `jaxmc.layout.partition` over the first `D` devices, and the
  same with the halo exchange switched off (`comm` = 1 - its time / the
  full time: the share of an iteration spent exchanging, an estimate: the
  solve without the exchange computes wrong values at the same cost).

Strong scaling: one model on every device count. Weak scaling
(`--weak`): tandem with `c` grown with the device count so that the states
per device stay about those of `c` on one device (states ~ 2 c^2).

    python benchmarks/scaling.py --devices 1,2,4 --models tandem:c=4095,\\
        cluster:N=256,kanban:t=5 [--weak tandem:c=2047] [--iters 200]
    python benchmarks/scaling.py --simulate 4 ...   # CPU: 4 simulated devices

`--simulate N` sets `XLA_FLAGS=--xla_force_host_platform_device_count=N`
before JAX starts (CPU only: simulated devices share the host's cores, so
their times say nothing about scaling on GPUs). Prints one JSON line per
measurement and a table at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


FILES = {"tandem": "tandem.sm", "cluster": "cluster.sm", "kanban": "kanban.sm"}


def _args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", default="1,2,4")
    p.add_argument("--models", default="tandem:c=4095,cluster:N=256,kanban:t=5")
    p.add_argument("--weak", default="", help="e.g. tandem:c=2047 (c on one device)")
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--simulate", type=int, default=0)
    p.add_argument("--precision", default="fp64", choices=("fp64", "fp32"))
    p.add_argument("--local", default="csr", choices=("csr", "ell"),
                   help="the devices' local layout (one device: the same)")  # fmt: skip
    return p.parse_args(argv)


def uniformised(explicit):
    """`P = I + Q / q` of a CTMC as scipy CSR (rows sorted)."""
    import numpy as np
    import scipy.sparse as sp

    n = explicit.num_states
    rows = np.repeat(np.arange(n), np.diff(np.asarray(explicit.row_ptr)))
    Q = sp.csr_matrix((np.asarray(explicit.val), (rows, np.asarray(explicit.col))),
                      shape=(n, n))  # fmt: skip
    Q.setdiag(0)
    Q.eliminate_zeros()
    e = np.asarray(Q.sum(axis=1)).ravel()
    q = 1.02 * float(e.max())
    P = sp.csr_matrix(Q / q + sp.diags(1.0 - e / q))
    P.sort_indices()
    return P


def _time(fn, repeat):
    fn()  # compile
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure(name, P, D, iters, repeat, precision, local="csr"):
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxmc.layout import CSR, ELL, make_mesh, partition
    from jaxmc.layout.partition import Halo
    from jaxmc.numerics.precision import to_precision
    from jaxmc.solvers import power

    n = P.shape[0]
    dt = jnp.float64 if precision == "fp64" else jnp.float32
    b = jnp.asarray(np.full(n, 1e-3), dt)
    x0 = jnp.zeros(n, dt)

    def run(A):
        def go():
            sol = power(A, b, x0, epsilon=1e-300, relative=False,
                        max_iters=iters, throw=False)  # fmt: skip
            jax.block_until_ready(sol.value)
            return sol

        return go

    out = {"model": name, "states": n, "nnz": int(P.nnz), "devices": D,
           "iters": iters, "precision": precision,
           "platform": jax.default_backend()}  # fmt: skip
    if D == 1:
        A = CSR.from_arrays(P.indptr, P.indices, P.data, P.shape)
        A = to_precision(A if local == "csr" else ELL.from_csr(A), precision)
        out.update(layout=local, per_iter_s=_time(run(A), repeat) / iters)
        return out
    A = partition(P.indptr, P.indices, P.data, P.shape, make_mesh(D), local=local)
    A = to_precision(A, precision)
    full = _time(run(A), repeat) / iters
    quiet = eqx.tree_at(lambda m: m.halo, A,
                        Halo(None, None, None, "none", A.halo.needed))  # fmt: skip
    alone = _time(run(quiet), repeat) / iters
    out.update(
        layout=f"sharded-{local}",
        per_iter_s=full,
        local_only_s=alone,
        comm=max(0.0, 1.0 - alone / full),
        halo=A.halo_bytes(jnp.dtype(dt).itemsize),
    )
    return out


def _parse(spec):
    name, _, consts = spec.partition(":")
    return name, consts


def main(argv=None):
    a = _args(sys.argv[1:] if argv is None else argv)
    if a.simulate:
        os.environ["XLA_FLAGS"] = (
            os.environ.get("XLA_FLAGS", "")
            + f" --xla_force_host_platform_device_count={a.simulate}"
        )
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import jax

    jax.config.update("jax_enable_x64", True)
    import jaxmc
    from benchmarks._gpu_common import find_model

    counts = [int(d) for d in a.devices.split(",") if int(d) <= len(jax.devices())]
    rows = []

    def case(name, consts, ds, kind):
        t0 = time.perf_counter()
        explicit = jaxmc.build(jaxmc.load_model(find_model(FILES[name]), consts))
        P = uniformised(explicit)
        label = f"{name} {consts}"
        print(f"# {label}: {P.shape[0]} states, built in "
              f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)  # fmt: skip
        for D in ds:
            rec = measure(label, P, D, a.iters, a.repeat, a.precision, a.local)
            rec["scaling"] = kind
            print(json.dumps(rec), flush=True)
            rows.append(rec)

    for spec in filter(None, a.models.split(",")):
        case(*_parse(spec), counts, "strong")
    if a.weak:
        name, consts = _parse(a.weak)
        c1 = int(consts.split("=")[1])
        for D in counts:
            case(name, f"c={round(c1 * D**0.5)}", [D], "weak")
    print("\n| scaling | model | states | devices | layout | s/iter | comm "
          "| halo needed | halo moved |")  # fmt: skip
    print("|---|---|---:|---:|---|---:|---:|---:|---:|")
    for r in rows:
        h = r.get("halo", {})
        print(
            f"| {r['scaling']} | {r['model']} | {r['states']:,} | {r['devices']} "
            f"| {r['layout']} | {r['per_iter_s']:.3g} | {r.get('comm', 0):.0%} "
            f"| {h.get('needed', 0):,} B | {h.get('moved', 0):,} B |"
        )


if __name__ == "__main__":
    main()
