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

`tandem-gen:c=...` is the same tandem network made by `_tandem.py`
(arrays straight from the model's rules, checked against `jaxmc.build` in
`tests/bench/test_tandem_gen.py`), for 10⁸ states and more, where the
builder does not fit a device call. `--baselines` adds one-device rows in
other layouts (`auto`: jaxmc's own choice on that device, e.g. the Pallas
warp kernels on a GPU) beside the local layout's; parallel efficiency is
the one-device time in the local layout over `D` times the `D`-device time.

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
    p.add_argument("--local", default="csr", choices=("csr", "ell", "warp"),
                   help="the devices' local layout (one device: the same)")  # fmt: skip
    p.add_argument("--baselines", default="",
                   help="more one-device layouts, e.g. auto,csr")  # fmt: skip
    p.add_argument("--deadline", type=float, default=0.0,
                   help="seconds after which no new case starts (0: none)")  # fmt: skip
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


def generated(name, consts):
    """scipy CSR of `tandem-gen` (`_tandem.uniformised`)."""
    import scipy.sparse as sp

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _tandem

    c = int(dict(kv.split("=") for kv in consts.split(","))["c"])
    indptr, cols, vals = _tandem.uniformised(c)
    n = len(indptr) - 1
    return sp.csr_matrix((vals, cols, indptr), shape=(n, n))


def _bytes(P, itemsize):
    """The fewest bytes one iteration `x' = P x + b` moves: every entry's
    value and column once, `x` (read), `b` (read), `x'` (written)."""
    return P.nnz * (itemsize + 4) + 3 * P.shape[0] * itemsize


def measure(name, P, D, iters, repeat, precision, local="csr"):
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxmc.layout import CSR, make_mesh, partition
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
        from jaxmc.layout import make_layout

        A = CSR.from_arrays(P.indptr, P.indices, P.data, P.shape)
        A = to_precision(make_layout(A, local), precision)
        out.update(layout=type(A).__name__ if local == "auto" else local,
                   per_iter_s=_time(run(A), repeat) / iters)  # fmt: skip
        out["GBps"] = _bytes(P, jnp.dtype(dt).itemsize) / out["per_iter_s"] / 1e9
        del A
        return out
    A = partition(P.indptr, P.indices, P.data, P.shape, make_mesh(D), local=local)
    A = to_precision(A, precision)
    halo = A.halo_bytes(jnp.dtype(dt).itemsize)
    full = _time(run(A), repeat) / iters
    quiet = eqx.tree_at(lambda m: m.halo, A,
                        Halo(None, None, None, "none", A.halo.needed))  # fmt: skip
    alone = _time(run(quiet), repeat) / iters
    del A, quiet
    out.update(
        layout=f"sharded-{local}",
        per_iter_s=full,
        local_only_s=alone,
        comm=max(0.0, 1.0 - alone / full),
        halo=halo,
    )
    out["GBps"] = _bytes(P, jnp.dtype(dt).itemsize) / full / 1e9
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

    start = time.perf_counter()
    late = lambda: a.deadline and time.perf_counter() - start > a.deadline  # noqa: E731
    extra = [b for b in a.baselines.split(",") if b and b != a.local]

    def case(name, consts, ds, kind):
        if late():
            print(f"# {name} {consts}: not run (deadline)", file=sys.stderr)
            return
        t0 = time.perf_counter()
        try:
            if name.endswith("-gen"):
                P = generated(name, consts)
            else:
                model = jaxmc.load_model(find_model(FILES[name]), consts)
                P = uniformised(jaxmc.build(model))
        except Exception as e:  # noqa: BLE001 (report and go on)
            print(f"# {name} {consts}: build failed: {e!r}", file=sys.stderr)
            return
        label = f"{name} {consts}"
        took = time.perf_counter() - t0
        print(f"# {label}: {P.shape[0]:,} states, {P.nnz:,} entries, made in "
              f"{took:.1f} s", file=sys.stderr, flush=True)  # fmt: skip
        runs = [(D, a.local) for D in ds] + [(1, b) for b in extra if 1 in ds]
        for D, local in runs:
            if late():
                print(f"# {label} D={D}: not run (deadline)", file=sys.stderr)
                continue
            t1 = time.perf_counter()
            try:
                rec = measure(label, P, D, a.iters, a.repeat, a.precision, local)
            except Exception as e:  # noqa: BLE001 (report and go on)
                rec = {"model": label, "states": P.shape[0], "devices": D,
                       "layout": local, "error": repr(e)[:300]}  # fmt: skip
            rec["scaling"] = kind
            rec["wall_s"] = round(time.perf_counter() - t1, 1)
            print(json.dumps(rec), flush=True)
            rows.append(rec)
        del P

    for spec in filter(None, a.models.split(",")):
        case(*_parse(spec), counts, "strong")
    if a.weak:
        name, consts = _parse(a.weak)
        c1 = int(consts.split("=")[1])
        for D in counts:
            c = round(c1 * D**0.5)
            c += (c + 1) % 2  # c + 1 even: the states split evenly over D <= 2
            case(name, f"c={c}", [D], "weak")
    print(table(rows, a.local))


def table(rows, local):
    """The markdown table of the records `rows`: per iteration time, the
    effective bandwidth, the parallel efficiency against the same model on
    one device in the `local` layout (weak scaling: against the one-device
    case, per state), the exchange's share and the halo bytes."""
    ok = [r for r in rows if "error" not in r]
    one = {r["model"]: r for r in ok if r["devices"] == 1 and r["layout"] == local}
    weak1 = next((r for r in ok if r["scaling"] == "weak" and r["devices"] == 1),
                 None)  # fmt: skip
    out = ["| scaling | model | states | devices | layout | ms/iter | GB/s "
           "| efficiency | comm | halo needed | halo moved |",
           "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        if "error" in r:
            out.append(f"| {r['scaling']} | {r['model']} | {r['states']:,} "
                       f"| {r['devices']} | {r['layout']} | error: {r['error']} "
                       "| | | | | |")  # fmt: skip
            continue
        h, t = r.get("halo", {}), r["per_iter_s"]
        eff = ""
        base = one.get(r["model"]) if r["scaling"] == "strong" else weak1
        if base is not None and r["layout"].startswith("sharded"):
            per_state = base["per_iter_s"] / base["states"]
            eff = f"{per_state * r['states'] / (r['devices'] * t):.2f}"
        out.append(
            f"| {r['scaling']} | {r['model']} | {r['states']:,} | {r['devices']} "
            f"| {r['layout']} | {t * 1e3:.3g} | {r.get('GBps', 0):.0f} | {eff} "
            f"| {r.get('comm', 0):.0%} | {h.get('needed', 0):,} B "
            f"| {h.get('moved', 0):,} B |"
        )
    return "\n".join(out)


if __name__ == "__main__":
    main()
