"""Multi-vector SpMV (`Y = A X`, `X` of shape [n, k]) on the GPU.

    PYTHONPATH=. python benchmarks/spmv_multi.py tandem2047 cluster256 [--ks 1,2,4,8,16]

For each model (built on the machine that runs this) and each full-warp
layout (warp, compact; f64, optionally f32): µs per pass of the
multi-vector Pallas kernel (`jaxmc.kernels.spmv_multi_pallas.fused_multi`,
median of 7 runs of a jitted loop of 100 passes, two per loop trip), µs per
vector, effective GB/s and the fraction of the device copy bandwidth
measured in the same run. Compulsory bytes: the CSR matrix of the same
precision once (values + int32 columns + row pointers) plus `k` vectors in
and `k` out. Side by side: `k` separate single-vector SpMVs (`k` times the
single-vector kernel's time), the fused power step with its per-column
measure, the plain-JAX reference (ELL), and cuSPARSE SpMM (CuPy
`csr @ dense`, `X` column-major, cuSPARSE's native order) where CuPy is
present. Max relative error against scipy in float64 for every variant.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from _gpu_common import (
    build,
    copy_bandwidth,
    cusparse_time,
    device_name,
    median_time,
    stochastic,
    table,
    to_csr,
)

from jaxmc.kernels import spmv
from jaxmc.kernels.spmv_multi_pallas import fused_multi
from jaxmc.kernels.spmv_pallas import fused
from jaxmc.layout import CompactWarpELL, WarpELL


INTERPRET = jax.default_backend() != "gpu"
COLS = [
    "model",
    "layout",
    "prec",
    "variant",
    "k",
    "us",
    "us_per_vec",
    "GBs",
    "frac_copy",
    "vs_k_single",
    "err",
]


def multi_bytes(nnz: int, n: int, m: int, k: int, itemsize: int) -> int:
    """CSR matrix once + `k` vectors read + `k` written."""
    return nnz * (itemsize + 4) + 4 * (m + 1) + k * itemsize * (n + m)


def loop_time(f, x, iters: int):
    """`(seconds per application of f, f(f(x)))`: `_gpu_common.time_iterations`
    with the trip count a traced argument, so that the same compiled loop
    (one Triton compile per variant, the expensive part of this script)
    also gives the result that is checked."""

    @jax.jit
    def run(x, trips):
        return jax.lax.fori_loop(0, trips, lambda i, v: f(f(v)), x)

    y2 = run(x, 1)
    return median_time(run, x, iters // 2) / (iters // 2 * 2), y2


def rel_err(y, ref) -> float:
    return float(
        np.abs(np.asarray(y, np.float64) - ref).max() / max(np.abs(ref).max(), 1e-300)
    )


def bench_model(
    name,
    bw,
    ks,
    f32,
    tune,
    iters,
    out_rows,
    dump,
    kinds=("warp", "compact"),
    load2d=False,
    power=True,
    ell=True,
    reference=False,
):
    _, em, tb = build(name)
    A = stochastic(em)
    m, n = A.shape
    nnz = A.nnz
    print(f"# {name}: {n} states, {nnz} nnz, built in {tb:.1f}s", flush=True)
    rng = np.random.default_rng(0)
    Xs = {k: rng.random((n, k)) for k in ks}
    refs = {k: A @ (A @ Xs[k]) for k in ks}  # two applications (`loop_time`)

    def add(**row):
        row.update(model=name)
        out_rows.append(row)
        print({c: row.get(c) for c in COLS}, flush=True)
        dump()

    layouts = [("warp-full", WarpELL, "f64"), ("compact-full", CompactWarpELL, "f64")]
    if f32:
        layouts += [
            ("warp-full", WarpELL, "f32"),
            ("compact-full", CompactWarpELL, "f32"),
        ]
    layouts = [lay for lay in layouts if lay[0].split("-")[0] in kinds]
    for label, cls, dt in layouts:
        if cls is CompactWarpELL and m != n:
            continue
        dtype = jnp.float64 if dt == "f64" else jnp.float32
        it = 8 if dt == "f64" else 4
        try:
            t0 = time.perf_counter()
            L = cls.from_csr(to_csr(A, np.float64)).astype(dtype)
            print(
                f"# {label} {dt}: layout {time.perf_counter() - t0:.1f}s "
                f"{L.stats()['bytes_per_nnz']:.2f} B/nnz",
                flush=True,
            )
        except Exception as e:  # noqa: BLE001 - e.g. too many distinct values
            print(
                f"FAILED {name} {label}: {type(e).__name__}: {str(e)[:300]}", flush=True
            )
            continue
        x1 = jnp.asarray(Xs[ks[0]][:, 0], dtype)
        f1 = lambda v, L=L: fused(L, v, interpret=INTERPRET)  # noqa: E731
        t1, y2 = loop_time(f1, x1, iters)
        add(
            layout=label,
            prec=dt,
            variant="single-vector kernel",
            k=1,
            us=t1 * 1e6,
            us_per_vec=t1 * 1e6,
            GBs=multi_bytes(nnz, n, m, 1, it) / t1 / 1e9,
            frac_copy=multi_bytes(nnz, n, m, 1, it) / t1 / bw,
            vs_k_single=1.0,
            err=rel_err(y2, refs[ks[0]][:, 0]),
        )
        variants = [("multi", {}, ks)]
        if tune:
            tks = tuple(tune) if isinstance(tune, (tuple, list)) else (4, 16)
            variants += [
                (f"multi w{w} s{s}", dict(num_warps=w, num_stages=s), tks)
                for w, s in ((4, 1), (4, 2), (8, 1), (8, 2), (16, 1))
            ]
            variants += [
                (f"multi rows{rp} w{w}", dict(rows_per_program=rp, num_warps=w), tks)
                for rp, w in ((64, 2), (64, 4), (128, 4))
            ]
        if load2d:
            variants += [("multi load2d", dict(load2d=True), (1, 4, 16))]
        if reference:  # plain JAX on the same layout (what impl="reference" runs)
            variants += [("plain JAX, same layout", "reference", ks)]
        for k in ks:
            X = jnp.asarray(Xs[k], dtype)
            cb = multi_bytes(nnz, n, m, k, it)
            for vname, kw, vks in variants:
                if k not in vks:
                    continue
                try:
                    if kw == "reference":

                        def f(V, L=L):
                            return spmv(L, V, impl="reference")
                    else:

                        def f(V, L=L, kw=kw):
                            return fused_multi(L, V, interpret=INTERPRET, **kw)

                    t, y2 = loop_time(f, X, iters)
                    err = rel_err(y2, refs[k])
                    add(
                        layout=label,
                        prec=dt,
                        variant=vname,
                        k=k,
                        us=t * 1e6,
                        us_per_vec=t * 1e6 / k,
                        GBs=cb / t / 1e9,
                        frac_copy=cb / t / bw,
                        vs_k_single=k * t1 / t,
                        err=err,
                    )
                except Exception as e:  # noqa: BLE001
                    print(
                        f"FAILED {name} {label} {vname} k={k}: {type(e).__name__}: "
                        f"{str(e)[:400]}",
                        flush=True,
                    )
            if dt == "f64" and k in (1, 4, 16) and power:
                try:  # the fused power step with its per-column measure
                    g = lambda V, L=L: fused_multi(  # noqa: E731
                        L, V, epilogue="power", diff=True, interpret=INTERPRET
                    )[0]
                    t, y2 = loop_time(g, X, iters)
                    add(
                        layout=label,
                        prec=dt,
                        variant="power step + measure",
                        k=k,
                        us=t * 1e6,
                        us_per_vec=t * 1e6 / k,
                        GBs=cb / t / 1e9,
                        frac_copy=cb / t / bw,
                        vs_k_single=k * t1 / t,
                        err=rel_err(y2, refs[k]),
                    )
                except Exception as e:  # noqa: BLE001
                    print(
                        f"FAILED {name} {label} power k={k}: {type(e).__name__}: "
                        f"{str(e)[:400]}",
                        flush=True,
                    )
            del X
            gc.collect()
        del L
        gc.collect()

    # cuSPARSE SpMM and plain JAX (ELL), f64
    for k in ks:
        cs = cusparse_time(A, np.asfortranarray(Xs[k]), k=iters)
        if cs is None:
            print("# no CuPy: cuSPARSE skipped", flush=True)
            break
        t, err = cs
        cb = multi_bytes(nnz, n, m, k, 8)
        add(
            layout="cusparse csr (cupy)",
            prec="f64",
            variant="SpMM, X column-major",
            k=k,
            us=t * 1e6,
            us_per_vec=t * 1e6 / k,
            GBs=cb / t / 1e9,
            frac_copy=cb / t / bw,
            err=err,
        )

    from jaxmc.layout import make_layout

    if not ell:
        return
    try:
        E = make_layout(to_csr(A, np.float64), "ell")
        for k in (1, 4, 16):
            if k not in ks:
                continue
            X = jnp.asarray(Xs[k])
            f = lambda V, E=E: spmv(E, V, impl="reference")  # noqa: E731
            t, y2 = loop_time(f, X, iters)
            err = rel_err(y2, refs[k])
            cb = multi_bytes(nnz, n, m, k, 8)
            add(
                layout="ell",
                prec="f64",
                variant="plain JAX reference",
                k=k,
                us=t * 1e6,
                us_per_vec=t * 1e6 / k,
                GBs=cb / t / 1e9,
                frac_copy=cb / t / bw,
                err=err,
            )
        del E
    except Exception as e:  # noqa: BLE001
        print(f"FAILED {name} ell: {type(e).__name__}: {str(e)[:300]}", flush=True)
    gc.collect()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", default=["tandem2047"])
    ap.add_argument("--ks", default="1,2,4,8,16")
    ap.add_argument("--f32", action="store_true", help="also the f32 layouts")
    ap.add_argument(
        "--tune-ks",
        default="",
        help="with --tune: the k's the variants run at (default 4,16)",
    )
    ap.add_argument(
        "--tune",
        action="store_true",
        help="num_warps/num_stages/rows_per_program at k=4, 16",
    )
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--layouts", default="warp,compact")
    ap.add_argument(
        "--load2d", action="store_true", help="also load2d=True at k=1,4,16"
    )
    ap.add_argument("--no-power", action="store_true")
    ap.add_argument("--no-ell", action="store_true")
    ap.add_argument(
        "--reference",
        action="store_true",
        help="also plain JAX (impl='reference') on the same warp/compact layouts, "
        "every k",
    )
    ap.add_argument(
        "--json", default=os.path.join(os.environ.get("OUT", "."), "spmv_multi.json")
    )
    a = ap.parse_args()
    ks = [int(v) for v in a.ks.split(",")]
    bw, how = copy_bandwidth()
    print(
        f"# device {device_name()}, copy bandwidth {bw / 1e12:.3f} TB/s ({how})",
        flush=True,
    )
    rows = []

    def dump():
        with open(a.json, "w") as fh:
            json.dump(dict(device=device_name(), copy_Bps=bw, rows=rows), fh, indent=1)

    for name in a.models:
        try:
            tune = (
                tuple(int(k) for k in a.tune_ks.split(","))
                if a.tune and a.tune_ks
                else a.tune
            )
            bench_model(
                name,
                bw,
                ks,
                a.f32,
                tune,
                a.iters,
                rows,
                dump,
                kinds=a.layouts.split(","),
                load2d=a.load2d,
                power=not a.no_power,
                ell=not a.no_ell,
                reference=a.reference,
            )
        except Exception as e:  # noqa: BLE001
            print(f"FAILED {name}: {type(e).__name__}: {e}", flush=True)
    dump()
    print(table(rows, COLS))


if __name__ == "__main__":
    main()
