"""SpMV per layout x kernel x precision on the GPU.

    PYTHONPATH=. python benchmarks/spmv.py tandem2047 cluster256 ... [--tune]

For each model (built on the machine that runs this): the row-stochastic
matrix of the model in every layout; µs per SpMV (median of 7 runs of a
jitted loop of 100 SpMVs), GB/s counted as the *compulsory CSR bytes* of the
same precision (values + columns + row pointers + x + y; the same yardstick
for every layout, so the compact layout can exceed 1.0), the fraction of the
device-to-device copy bandwidth measured in the same run, and the maximum
relative error against scipy in float64. Side by side: cuSPARSE CSR through
CuPy and `jax.experimental.sparse` BCSR.
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
    csr_bytes,
    cusparse_time,
    device_name,
    stochastic,
    table,
    time_iterations,
    time_left,
    to_csr,
    too_padded,
)

from jaxmc.kernels import spmv
from jaxmc.kernels.spmv_pallas import fused
from jaxmc.layout import (
    CompactWarpELL,
    VectorCSR,
    WarpELL,
    layout_kind,
    make_layout,
    window_order,
)


INTERPRET = jax.default_backend() != "gpu"
ONLY = None
NO_BCSR = False
#: `--window W`: before any layout, the matrix is reordered symmetrically by
#: `jaxmc.layout.window_order(W)` (rows sorted by length within windows of W
#: rows; less padding in the warp layouts); 0 keeps the builder's BFS order.
WINDOW = 0
#: `--rcm`: reorder by reverse Cuthill-McKee (`jaxmc.layout.rcm_order`)
#: first (then by the window, if any).
RCM = False


def reorder(A):
    """`(A', order)`: `A` in the `--rcm` / `--window` order (`A[order][:,
    order]`), or `(A, None)` when there is neither or `A` is not square (MDP
    rows are choices, not states)."""
    if not (WINDOW or RCM) or A is None or A.shape[0] != A.shape[1]:
        return A, None
    order = np.arange(A.shape[0])
    if RCM:
        from jaxmc.layout import rcm_order

        order = rcm_order(to_csr(A)).order
        A = A[order][:, order].tocsr()
        A.sort_indices()
    if WINDOW:
        w = window_order(to_csr(A), WINDOW).order
        order = order[w]
        A = A[w][:, w].tocsr()
    B = A.tocsr()
    B.sort_indices()
    return B, order


def variants(name: str, mean_row: float, tune: bool):
    """(label, layout kind, dtype, impl, kernel kwargs, layout kwargs).

    Layout kwargs: `spb` regroups a warp layout (`with_segs_per_block`),
    `lanes`/`rpb` retile the CSR-vector layout (`with_tiling`)."""
    long_rows = mean_row >= 16
    if tune:
        v = []
        if long_rows:
            v.append(("vector (default)", "vector", "f64", "pallas", {}, {}))
            for L, rpb, nw, ns, gate in (
                (512, 2, 8, 1, True),
                (512, 4, 8, 1, True),
                (1024, 1, 4, 2, True),
                (512, 1, 4, 3, True),
                (256, 2, 4, 1, True),
                (512, 1, 4, 1, False),
            ):
                v.append(
                    (
                        f"vector L{L} r{rpb} w{nw} s{ns}{'' if gate else ' ng'}",
                        "vector",
                        "f64",
                        "pallas",
                        dict(num_warps=nw, num_stages=ns, gate=gate),
                        dict(lanes=L, rpb=rpb),
                    )
                )
            return v
        for spb, nw, ev, ns, gate in (
            (8, 4, False, 1, True),
            (8, 4, True, 2, True),
            (8, 4, False, 1, False),
            (8, 4, True, 2, False),
            (16, 8, True, 2, False),
        ):
            v.append(
                (
                    f"warp-full spb{spb} w{nw} s{ns}{' ev' if ev else ''}"
                    f"{'' if gate else ' ng'}",
                    "warp",
                    "f64",
                    "pallas",
                    dict(num_warps=nw, evict=ev, num_stages=ns, gate=gate),
                    dict(spb=spb),
                )
            )
        for spb, nw, ev, ns, gate in (
            (8, 4, False, 1, True),
            (8, 4, True, 1, True),
            (8, 4, False, 1, False),
            (16, 8, True, 2, False),
        ):
            v.append(
                (
                    f"compact-full spb{spb} w{nw} s{ns}{' ev' if ev else ''}"
                    f"{'' if gate else ' ng'}",
                    "compact",
                    "f64",
                    "pallas",
                    dict(num_warps=nw, evict=ev, num_stages=ns, gate=gate),
                    dict(spb=spb),
                )
            )
        return v
    v = [
        ("csr", "csr", "f64", "reference", {}, {}),
        ("ell", "ell", "f64", "reference", {}, {}),
        ("sell32", "sell", "f64", "reference", {}, {}),
        ("warp-full", "warp", "f64", "pallas", {}, {}),
        ("warp-full sorted", "warp-sorted", "f64", "pallas", {}, {}),
        ("warp-half", "warp2", "f64", "pallas", {}, {}),
        ("compact-full", "compact", "f64", "pallas", {}, {}),
        ("compact-full sorted", "compact-sorted", "f64", "pallas", {}, {}),
        ("compact-half", "compact2", "f64", "pallas", {}, {}),
        ("csr", "csr", "f32", "reference", {}, {}),
        ("warp-full", "warp", "f32", "pallas", {}, {}),
        ("warp-half", "warp2", "f32", "pallas", {}, {}),
        ("compact-full", "compact", "f32", "pallas", {}, {}),
    ]
    if long_rows:
        v = [
            ("vector", "vector", "f64", "pallas", {}, {}),
            ("vector", "vector", "f32", "pallas", {}, {}),
        ] + v
    return v


def make(csr, kind, lkw, base=None):
    """The layout; tuning variants are derived from `base` (the default
    layout of the same kind) without rebuilding."""
    if base is not None and "spb" in lkw:
        return base.with_segs_per_block(lkw["spb"])
    if base is not None and "lanes" in lkw:
        return base.with_tiling(lkw["lanes"], lkw["rpb"])
    return make_kind(csr, kind)


def make_kind(csr, kind):
    """Layout `kind` of `make_layout`, plus "warp-sorted"/"compact-sorted"
    (`sort_rows=True`)."""
    sort = kind.endswith("-sorted")
    kind = kind.removesuffix("-sorted")
    if kind in ("warp", "warp2"):
        return WarpELL.from_csr(csr, lanes=2 if kind == "warp2" else 1, sort_rows=sort)
    if kind in ("compact", "compact2"):
        return CompactWarpELL.from_csr(
            csr, lanes=2 if kind == "compact2" else 1, sort_rows=sort
        )
    if kind == "vector":
        return VectorCSR.from_csr(csr)
    return make_layout(csr, kind)  # ("dia": the compact diagonal layout)


def bench_model(name, bw, tune, k=100, em=None, t_model=None, tb=float("nan")):
    """Rows of one model. MDPs (more rows than states): the timed loop is
    the value-iteration form `x' = max_{c in s} (A x)_c` (SpMV, then the
    row-group max of `jaxmc.layout.group_reduce`), so that the loop carries
    a state vector; the GB/s still count the SpMV's CSR bytes only.
    `em`: an already built model (built in `tb` seconds); `t_model`: the
    `time.time()` from which the per-model time guard counts
    (`_gpu_common.time_left`)."""
    t_model = time.time() if t_model is None else t_model
    if em is None:
        _, em, tb = build(name)
    A, _ = reorder(stochastic(em))
    n, m, nnz = A.shape[1], A.shape[0], A.nnz
    print(f"# {name}: {n} states, {m} rows, {nnz} nnz, built in {tb:.1f}s", flush=True)
    rng = np.random.default_rng(0)
    x = rng.random(n)
    ref = A @ x
    rows = []
    cache = {}
    base = {}
    wanted = {dt for *_, dt, _i, _k, _l in variants(name, 0, tune)} | {"f64"}
    for dt in sorted(wanted):
        if ONLY is None or dt == "f64" or any(o.endswith("/" + dt) for o in ONLY):
            base[dt] = to_csr(A, np.float64 if dt == "f64" else np.float32)
    mean_row = nnz / max(m, 1)
    print(f"# layout_kind: {layout_kind(base['f64'], 'gpu')}", flush=True)
    groups = None
    if m != n:
        from jaxmc.layout import group_reduce

        groups = jnp.asarray(np.repeat(np.arange(n), np.diff(em.choice_ptr)), jnp.int32)
        ref = np.maximum.reduceat(ref, np.asarray(em.choice_ptr[:-1]))
    # f(f(x)) in float64 on the host: the timed loop's one-trip result is
    # checked against it (one compilation per variant, not two)
    ref2 = A @ ref
    if m != n:
        ref2 = np.maximum.reduceat(ref2, np.asarray(em.choice_ptr[:-1]))
    for label, kind, dt, impl, kkw, lkw in variants(name, mean_row, tune):
        if ONLY and f"{label}/{dt}" not in ONLY:
            continue
        if m != n and kind.startswith("compact"):
            continue
        if kind == "ell" and too_padded(np.diff(A.indptr)):
            print(f"SKIPPED {name} {label} {dt}: ELL padding too large", flush=True)
            continue
        if time_left(t_model) <= 0:
            print(f"SKIPPED {name} {label} {dt}: time guard", flush=True)
            continue
        dtype = jnp.float64 if dt == "f64" else jnp.float32
        try:
            t0 = time.perf_counter()
            key = (kind, dt)
            if key not in cache:
                cache.clear()
                gc.collect()
                cache[key] = make(base[dt], kind, {})
            L = make(base[dt], kind, lkw, cache[key]) if lkw else cache[key]
            tl = time.perf_counter() - t0
            xs = jnp.asarray(x, dtype)
            # the layout (and an MDP's groups) are arguments of the timed
            # loop, not constants captured by it (see `time_iterations`)
            if impl == "pallas":
                f = (
                    lambda kkw: lambda v, L, g: fused(L, v, interpret=INTERPRET, **kkw)
                )(kkw)
            else:
                f = lambda v, L, g: spmv(L, v, impl="reference")  # noqa: E731
            if groups is not None:
                f = (lambda f: lambda v, L, g: group_reduce(f(v, L, g), g, n, "max"))(f)
            out = []
            t = time_iterations(f, xs, k=k, out=out, operands=(L, groups))
            y = np.asarray(out[0], np.float64)
            err = float(np.abs(y - ref2).max() / np.abs(ref2).max())
            st = L.stats() if hasattr(L, "stats") else {}
            cb = csr_bytes(nnz, n, m, 8 if dt == "f64" else 4)
            rows.append(
                dict(
                    model=name,
                    layout=label,
                    impl=impl,
                    prec=dt,
                    us=t * 1e6,
                    GBs=cb / t / 1e9,
                    frac_copy=cb / t / bw,
                    pad=st.get("padding", 0.0),
                    B_per_nnz=st.get("bytes_per_nnz", 0.0),
                    err=err,
                    build_s=tl,
                )
            )
            print(rows[-1], flush=True)
            del L, f
        except Exception as e:  # noqa: BLE001 - report and go on
            print(
                f"FAILED {name} {label} {dt}: {type(e).__name__}: {str(e)[:400]}",
                flush=True,
            )
        gc.collect()
    cache.clear()
    cs = cusparse_time(A, x, k=k) if time_left(t_model) > 0 else None
    cb = csr_bytes(nnz, n, m, 8)
    if cs is not None:
        t, err = cs
        label = "cusparse csr (cupy)" + (", SpMV only" if m != n else "")
        rows.append(
            dict(
                model=name,
                layout=label,
                impl="cusparse",
                prec="f64",
                us=t * 1e6,
                GBs=cb / t / 1e9,
                frac_copy=cb / t / bw,
                err=err,
            )
        )
        print(rows[-1], flush=True)
    if NO_BCSR or m != n or time_left(t_model) <= 0:
        return rows
    try:
        from jax.experimental import sparse as jsparse

        B = jsparse.BCSR.from_bcoo(jsparse.BCOO.from_scipy_sparse(A))
        # B is an argument of the loop: captured, XLA constant-folded its
        # index arrays for minutes (tandem c=2047, run 2)
        out = []
        t = time_iterations(
            lambda v, B: B @ v, jnp.asarray(x), k=k, out=out, operands=(B,)
        )
        y = np.asarray(out[0])
        err = float(np.abs(y - ref2).max() / np.abs(ref2).max())
        rows.append(
            dict(
                model=name,
                layout="jax.experimental.sparse BCSR",
                impl="xla",
                prec="f64",
                us=t * 1e6,
                GBs=cb / t / 1e9,
                frac_copy=cb / t / bw,
                err=err,
            )
        )
        print(rows[-1], flush=True)
        del B
    except Exception as e:  # noqa: BLE001
        print(f"FAILED {name} BCSR: {type(e).__name__}: {str(e)[:300]}", flush=True)
    del base
    gc.collect()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", default=["tandem2047"])
    ap.add_argument("--tune", action="store_true")
    ap.add_argument(
        "--no-bcsr",
        action="store_true",
        help="skip BCSR (XLA constant-folds its captured index arrays for minutes)",
    )
    ap.add_argument(
        "--only", default="", help="comma list of layout/prec, e.g. warp-full/f64"
    )
    ap.add_argument(
        "--json", default=os.path.join(os.environ.get("OUT", "."), "spmv.json")
    )
    ap.add_argument(
        "--window",
        type=int,
        default=0,
        help="reorder by jaxmc.layout.window_order(W) first (0: BFS order)",
    )
    ap.add_argument(
        "--rcm",
        action="store_true",
        help="reorder by reverse Cuthill-McKee first (before --window)",
    )
    a = ap.parse_args()
    global ONLY, NO_BCSR
    global WINDOW, RCM
    WINDOW = a.window
    RCM = a.rcm
    NO_BCSR = a.no_bcsr
    ONLY = set(a.only.split(",")) if a.only else None
    bw, how = copy_bandwidth()
    print(
        f"# device {device_name()}, copy bandwidth {bw / 1e12:.3f} TB/s ({how})",
        flush=True,
    )
    rows = []
    for name in a.models:
        try:
            rows += bench_model(name, bw, a.tune)
        except Exception as e:  # noqa: BLE001
            print(f"FAILED {name}: {type(e).__name__}: {e}", flush=True)
    with open(a.json, "w") as fh:
        json.dump(dict(device=device_name(), copy_Bps=bw, rows=rows), fh, indent=1)
    print(
        table(
            rows,
            [
                "model",
                "layout",
                "impl",
                "prec",
                "us",
                "GBs",
                "frac_copy",
                "pad",
                "B_per_nnz",
                "err",
            ],
        )
    )


if __name__ == "__main__":
    main()
