"""Solver iterations on the GPU, per layout x kernel x precision, and
end-to-end solves.

    PYTHONPATH=. python benchmarks/solve_gpu.py tandem2047 ... [--e2e]

Per model: µs per iteration of the Jacobi solver (`jaxmc.solvers.jacobi`, the
steady-state system `(E - R^T) x = 0` of a CTMC or `(1 - P_ii) - P^T` of a
DTMC, diagonal split off) and of the power solver (`x' = P x`, P the
row-stochastic matrix), each run for a fixed 200 iterations (epsilon 0) so
that every variant does the same work. The loop includes the convergence
measure and the status test of every step. The fused Pallas step computes
the update and `max |x' - x| / |x'|` in one pass; the reference layouts use
the plain-JAX step (SpMV, then an XLA-fused update and reduction).

`--e2e`: tandem's steady state solved to PRISM's default criterion with the
fused Jacobi step (iterations, seconds) and `jaxmc.check` of `S=?[...]`
through the public API (whatever solver and layout it picks), both timed on
the machine that runs this script.
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
import scipy.sparse as sp
from _gpu_common import (
    build,
    copy_bandwidth,
    device_name,
    stochastic,
    table,
    time_left,
    to_csr,
    too_padded,
)

import jaxmc
from jaxmc import solvers
from jaxmc.kernels import dia_pallas, spmv_pallas
from jaxmc.layout import CompactVector


_BASE_TUNING = {k: dict(v) for k, v in spmv_pallas.TUNING.items()}
_BASE_DIA = dict(dia_pallas.TUNING)
#: `--lex`: PRISM's lexicographic state order first (`reorder_system`).
LEX = False


def jacobi_system(em):
    """`(A, diag)`: off-diagonal of the transposed rate/probability matrix
    and the diagonal of the steady-state system."""
    n = em.num_states
    R = sp.csr_matrix((em.val, em.col, em.row_ptr), shape=(n, n))
    d_self = R.diagonal()
    if em.model_type.name == "CTMC":
        diag = np.asarray(R.sum(axis=1)).ravel() - d_self
    else:
        diag = 1.0 - d_self
    A = (R - sp.diags(d_self)).T.tocsr()
    A.eliminate_zeros()
    A.sort_indices()
    diag = np.where(diag > 0, diag, 1.0)
    return A, diag


def reorder_system(A, diag, P, em=None):
    """`spmv.py --window`'s order for this script (`--window`): the Jacobi
    matrix and its diagonal by the order of the Jacobi matrix's rows, `P` by
    its own (each solve runs in its own numbering; x0 is uniform). With
    `--lex` (`LEX`), PRISM's lexicographic state order first (where the
    compact diagonal layout applies)."""
    import spmv

    if LEX and em is not None and A is not None:
        from jaxmc.layout import lex_order

        o = lex_order(em.states)
        A = A[o][:, o].tocsr()
        A.sort_indices()
        diag = diag[o]
        P = P[o][:, o].tocsr()
        P.sort_indices()
    A, order = spmv.reorder(A)
    if order is not None:
        diag = diag[order]
    P, _ = spmv.reorder(P)
    return A, diag, P


def make(csr, kind):
    from spmv import make_kind

    return make_kind(csr, kind)


#: (label, layout kind, precision, diag/b storage, b, steps per trip, kernel
#: TUNING overrides, segments per block). diag/b storage: "compact" stores
#: 1/diag (and b) as `CompactVector`s; b: "zero" passes b=None (the
#: steady-state system; the kernel reads no b), "dense" an array of zeros.
VARIANTS = [
    ("csr", "csr", "f64", "dense", "dense", None, {}, None),
    ("ell", "ell", "f64", "dense", "dense", None, {}, None),
    ("vector", "vector", "f64", "compact", "zero", None, {}, None),
    ("sell32", "sell", "f64", "dense", "dense", None, {}, None),
    ("warp-full", "warp", "f64", "compact", "zero", None, {}, None),
    (
        "warp-full sorted",
        "warp-sorted",
        "f64",
        "compact",
        "zero",
        None,
        dict(_methods=("jacobi",)),
        None,
    ),
    ("warp-half", "warp2", "f64", "compact", "zero", None, {}, None),
    ("compact-full", "compact", "f64", "compact", "zero", None, {}, None),
    (
        "compact-full sorted",
        "compact-sorted",
        "f64",
        "compact",
        "zero",
        None,
        dict(_methods=("jacobi",)),
        None,
    ),
    ("compact-half", "compact2", "f64", "compact", "zero", None, {}, None),
    ("warp-full", "warp", "f32", "compact", "zero", None, {}, None),
    ("warp-half", "warp2", "f32", "compact", "zero", None, {}, None),
    ("compact-full", "compact", "f32", "compact", "zero", None, {}, None),
    ("compact-dia", "dia", "f64", "compact", "zero", None, {}, None),
]

#: The compact kernel's defaults up to run 11 (masked loop, gated gathers):
#: the compact rows below were measured against them, so they keep them
#: unless they name the knob.
_R11 = dict(tile=False, gate=True)

TUNE = [
    ("warp-full t8", "warp", "f64", "compact", "zero", 8, {}, None),
    ("warp-full t16", "warp", "f64", "compact", "zero", 16, {}, None),
    ("warp-full t32", "warp", "f64", "compact", "zero", 32, {}, None),
    ("compact-full t16", "compact", "f64", "compact", "zero", 16, {}, None),
    # the compact diagonal layout (`--lex`); the last field: rows per program
    ("compact-dia t16", "dia", "f64", "compact", "zero", 16, {}, None),
    ("compact-dia t16 r512", "dia", "f64", "compact", "zero", 16, {}, 512),
    ("compact-dia t16 r2048", "dia", "f64", "compact", "zero", 16, {}, 2048),
    (
        "compact-dia t16 r2048 w8",
        "dia",
        "f64",
        "compact",
        "zero",
        16,
        {"num_warps": 8},
        2048,
    ),
    (
        "compact-dia t16 r4096 w8",
        "dia",
        "f64",
        "compact",
        "zero",
        16,
        {"num_warps": 8},
        4096,
    ),
    ("compact-dia t16 w2", "dia", "f64", "compact", "zero", 16, {"num_warps": 2}, None),
    ("compact-dia t16 w8", "dia", "f64", "compact", "zero", 16, {"num_warps": 8}, None),
    (
        "compact-dia t16 s2",
        "dia",
        "f64",
        "compact",
        "zero",
        16,
        {"num_stages": 2},
        None,
    ),
    (
        "compact-dia t16 masked",
        "dia",
        "f64",
        "compact",
        "zero",
        16,
        {"tile": False},
        None,
    ),
    (
        "compact-dia t16 noskip",
        "dia",
        "f64",
        "compact",
        "zero",
        16,
        {"skip": False},
        None,
    ),
    (
        "compact-dia t16 noskip w8",
        "dia",
        "f64",
        "compact",
        "zero",
        16,
        {"skip": False, "num_warps": 8},
        None,
    ),
    (
        "compact-dia t16 r2048 w16",
        "dia",
        "f64",
        "compact",
        "zero",
        16,
        {"num_warps": 16},
        2048,
    ),
    (
        "compact-dia t16 r512 w8",
        "dia",
        "f64",
        "compact",
        "zero",
        16,
        {"num_warps": 8},
        512,
    ),
    (
        "compact-dia t16 r256 w4",
        "dia",
        "f64",
        "compact",
        "zero",
        16,
        {"num_warps": 4},
        256,
    ),
    (
        "compact-dia t16 r4096 w16",
        "dia",
        "f64",
        "compact",
        "zero",
        16,
        {"num_warps": 16},
        4096,
    ),
    (
        "compact-dia t16 r128 w4",
        "dia",
        "f64",
        "compact",
        "zero",
        16,
        {"num_warps": 4},
        128,
    ),
    (
        "compact-dia t16 r256 w8",
        "dia",
        "f64",
        "compact",
        "zero",
        16,
        {"num_warps": 8},
        256,
    ),
    (
        "compact-dia t16 r512 w16",
        "dia",
        "f64",
        "compact",
        "zero",
        16,
        {"num_warps": 16},
        512,
    ),
    (
        "compact-dia t16 r1024 w16",
        "dia",
        "f64",
        "compact",
        "zero",
        16,
        {"num_warps": 16},
        1024,
    ),
    (
        "compact-dia t16 r256 w4 s2",
        "dia",
        "f64",
        "compact",
        "zero",
        16,
        {"num_warps": 4, "num_stages": 2},
        256,
    ),
    (
        "compact-dia t16 r256 w4 noalign",
        "dia",
        "f64",
        "compact",
        "zero",
        16,
        {"num_warps": 4, "align": False},
        256,
    ),
    ("compact-full t16 loop", "compact", "f64", "compact", "zero", 16, _R11, None),
    # compact knobs again, for the windowed order (uniform segment widths)
    (
        "compact-full t16 u2",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "unroll": 2},
        None,
    ),
    (
        "compact-full t16 u4",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "unroll": 4},
        None,
    ),
    (
        "compact-full t16 w2",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "num_warps": 2},
        None,
    ),
    (
        "compact-full t16 w8",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "num_warps": 8},
        None,
    ),
    (
        "compact-full t16 s2",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "num_stages": 2},
        None,
    ),
    (
        "compact-full t16 s3",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "num_stages": 3},
        None,
    ),
    (
        "compact-full t16 nogate",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "gate": False},
        None,
    ),
    (
        "compact-full t16 evict",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "evict": True},
        None,
    ),
    (
        "compact-full t16 prefetch",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "prefetch": True},
        None,
    ),
    ("compact-full t16 spb4", "compact", "f64", "compact", "zero", 16, _R11, 4),
    ("compact-full t16 spb16", "compact", "f64", "compact", "zero", 16, _R11, 16),
    ("compact-full t16 spb32", "compact", "f64", "compact", "zero", 16, _R11, 32),
    (
        "compact-full t16 spb16 w8",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "num_warps": 8},
        16,
    ),
    (
        "compact-full t16 u2 nogate",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "unroll": 2, "gate": False},
        None,
    ),
    # issue #5, run 12: straight-line bodies per block width (static), tiled
    # uniform blocks (tile), table lookups by selects (select)
    (
        "compact-full t16 st8",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "static": 8},
        None,
    ),
    (
        "compact-full t16 st8 tile",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "static": 8, "tile": True},
        None,
    ),
    (
        "compact-full t16 sel16",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "select": 16},
        None,
    ),
    (
        "compact-full t16 st8 tile sel16",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "static": 8, "tile": True, "select": 16},
        None,
    ),
    (
        "compact-full t16 st8 tile sel16 nogate",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "static": 8, "tile": True, "select": 16, "gate": False},
        None,
    ),
    (
        "compact-full t16 st8 tile sel16 prefetch",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "static": 8, "tile": True, "select": 16, "prefetch": True},
        None,
    ),
    (
        "compact-full t16 st8 tile sel16 spb16",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "static": 8, "tile": True, "select": 16},
        16,
    ),
    (
        "compact-full t16 st8 tile sel16 spb16 w8",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "static": 8, "tile": True, "select": 16, "num_warps": 8},
        16,
    ),
    (
        "compact-full t16 st8 tile sel16 spb4 w2",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "static": 8, "tile": True, "select": 16, "num_warps": 2},
        4,
    ),
    (
        "compact-full t16 tile",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "tile": True},
        None,
    ),
    (
        "compact-full t16 tile sel16",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "tile": True, "select": 16},
        None,
    ),
    (
        "compact-full t16 tile nogate",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "tile": True, "gate": False},
        None,
    ),
    (
        "compact-full t16 tile prefetch",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "tile": True, "prefetch": True},
        None,
    ),
    (
        "compact-full t16 tile spb16",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "tile": True},
        16,
    ),
    (
        "compact-full t16 tile spb16 w8",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "tile": True, "num_warps": 8},
        16,
    ),
    (
        "compact-full t16 tile spb32 w8",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "tile": True, "num_warps": 8},
        32,
    ),
    (
        "compact-full t16 tile noalign",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "tile": True, "align": False},
        None,
    ),
    (
        "compact-full t16 tile nogate prefetch",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "tile": True, "gate": False, "prefetch": True},
        None,
    ),
    (
        "compact-full t16 tile nogate s2",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "tile": True, "gate": False, "num_stages": 2},
        None,
    ),
    (
        "compact-full t16 tile nogate noalign",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "tile": True, "gate": False, "align": False},
        None,
    ),
    (
        "compact-full t16 tile nogate evict",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "tile": True, "gate": False, "evict": True},
        None,
    ),
    (
        "compact-full t16 tile nogate spb16 w8",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "tile": True, "gate": False, "num_warps": 8},
        16,
    ),
    (
        "compact-full t16 tile nogate spb4 w2",
        "compact",
        "f64",
        "compact",
        "zero",
        16,
        {**_R11, "tile": True, "gate": False, "num_warps": 2},
        4,
    ),
]


def per_iteration(fn, iters):
    fn(iters)  # compile
    ts = []
    for _ in range(5):
        t = time.perf_counter()
        sol = fn(iters)
        jax.block_until_ready(sol.value)
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)) / int(sol.iterations), sol


ONLY = None
TUNING_RUN = False
#: Solvers to time (`--methods`): "jacobi", "power" (square matrices) and
#: "bellman" (MDPs: `solvers.value_iteration`, max over each state's choices).
METHODS = ("jacobi", "power", "bellman")


def _set_tuning(overrides):
    """Kernel defaults for the next traces (`spmv_pallas.TUNING`)."""
    for k in ("WarpELL", "CompactWarpELL", "VectorCSR"):
        spmv_pallas.TUNING[k].update(_BASE_TUNING[k])
        spmv_pallas.TUNING[k].update(overrides)
    dia_pallas.TUNING.update(_BASE_DIA)
    dia_pallas.TUNING.update({k: v for k, v in overrides.items() if k in _BASE_DIA})
    jax.clear_caches()


def micro(name, L, inv, xs, bw_unused=None, k=100):
    """Where a fused Jacobi step's time goes (per step, µs): the bare SpMV,
    the Jacobi epilogue without / with the convergence measure and its
    reduction, in a fori_loop of `k` steps; plus the copies XLA puts in the
    solver's loop."""
    from _gpu_common import median_time
    from jax import lax

    from jaxmc.kernels.spmv import on_gpu
    from jaxmc.kernels.spmv_pallas import fused as _fused

    def fused(*a, **kw):
        return _fused(*a, interpret=not on_gpu(), **kw)

    out = {}

    def loop(f):
        @jax.jit
        def run(x):
            def body(i, c):
                x, d = c
                y, e = f(x)
                y2, e2 = f(y)
                return y2, jnp.maximum(d, jnp.maximum(e, e2))

            return lax.fori_loop(0, k // 2, body, (x, jnp.zeros((), x.dtype)))

        return median_time(run, xs) / k * 1e6

    zero = jnp.zeros((), xs.dtype)
    out["spmv"] = loop(lambda x: (fused(L, x), zero))
    out["jacobi no diff"] = loop(
        lambda x: (fused(L, x, None, inv, epilogue="jacobi"), zero)
    )
    out["jacobi diff"] = loop(
        lambda x: fused(L, x, None, inv, epilogue="jacobi", diff=True)[:2]
    )
    try:
        f = jax.jit(
            lambda x0: (
                solvers.jacobi(
                    L, inv, None, x0, epsilon=0.0, max_iters=200, throw=False
                ).value
            )
        )
        txt = f.lower(xs).compile().as_text()
        big = f"[{xs.shape[0]}]"
        copies = [
            ln.strip()[:120]
            for ln in txt.splitlines()
            if (" copy(" in ln or "copy-start" in ln) and big in ln
        ]
        out["hlo vector copies"] = len(copies)
        for c in copies[:8]:
            print("   copy:", c, flush=True)
    except Exception as e:  # noqa: BLE001
        print(f"FAILED hlo dump: {type(e).__name__}: {str(e)[:200]}", flush=True)
    print(
        f"# micro {name}:",
        {k: (round(v, 1) if isinstance(v, float) else v) for k, v in out.items()},
        flush=True,
    )
    return out


#: The MDP group reductions to time for `bellman` (`JAXMC_BENCH_GROUPS`,
#: comma list): "auto" (what `from_arrays` picks: the gather of
#: `jaxmc.layout.GroupIndex`), "segment" (`segment_max`, the reduction up to
#: session 5), "table" (the gather with a precomputed `[n, width]` index
#: table), "wN" / "tableN" (width N; states with more choices overflow).
GROUPS = tuple(os.environ.get("JAXMC_BENCH_GROUPS", "auto").split(","))


def bellman_model(em, L, groups="auto"):
    """A `SparseModel` of the MDP `em` whose `matrix` is the layout `L`, its
    group reduction set by `groups` (see `GROUPS`)."""
    import equinox as eqx

    from jaxmc.layout import from_arrays
    from jaxmc.layout.grouped import group_index

    M = from_arrays(em.choice_ptr, em.row_ptr, em.col, em.val, nondeterministic=True)
    M = eqx.tree_at(lambda m: m.matrix, M, L)
    if groups == "auto":
        return M
    if groups == "segment":
        G = None
    else:
        table = groups.startswith("table")
        w = groups.removeprefix("table").removeprefix("w")
        G = group_index(
            em.choice_ptr, width=int(w) if w else None, table=table, max_padding=None
        )
    return eqx.tree_at(lambda m: m.groups, M, G, is_leaf=lambda x: x is None)


def hlo_kernels(f) -> dict:
    """Kernel count of `f`'s compiled HLO (fusions, scatters, custom calls,
    e.g. a Pallas kernel): whether the group max and the measure share one
    fusion."""
    import re

    txt = jax.jit(f).lower().compile().as_text()
    ops = re.findall(r"= \S+ ([\w-]+)\(", txt)
    return dict(
        fusions=ops.count("fusion"),
        scatters=txt.count(" scatter("),
        custom_calls=ops.count("custom-call"),
    )


def bench_model(name, bw, iters=200, em=None, t_model=None, tb=float("nan")):
    """Solver rows of one model (`em`: already built, in `tb` seconds;
    `t_model`: the `time.time()` the per-model time guard counts from)."""
    t_model = time.time() if t_model is None else t_model
    if em is None:
        _, em, tb = build(name)
    n = em.num_states
    mdp = len(em.row_ptr) - 1 != n
    if mdp:
        A = diag = None
    else:
        A, diag = jacobi_system(em)
    P = stochastic(em)
    A, diag, P = reorder_system(A, diag, P, em)
    print(
        f"# {name}: {n} states, {P.shape[0]} rows, nnz {P.nnz}, built in {tb:.1f}s",
        flush=True,
    )
    long_rows = P.nnz / max(P.shape[0], 1) >= 16
    rows = []
    x0 = np.full(n, 1.0 / n)
    layouts = {}
    variants = TUNE if TUNING_RUN else VARIANTS
    for label, kind, dt, vecs, bmode, trip, tov, spb in variants:
        if ONLY and f"{label}/{dt}" not in ONLY:
            continue
        dtype = np.float64 if dt == "f64" else np.float32
        it = 8 if dt == "f64" else 4
        tov = dict(tov)
        measure = tov.pop("_measure", None)
        methods = tov.pop("_methods", ("jacobi", "power", "bellman"))
        if kind == "vector" and not long_rows:
            continue  # the CSR-vector layout only where rows are long
        _set_tuning(tov)
        for method in methods:
            if TUNING_RUN and method == "power" or method not in METHODS:
                continue
            if (method == "bellman") != mdp or (mdp and kind.startswith("compact")):
                continue
            M = A if method == "jacobi" else P
            if kind == "ell" and too_padded(np.diff(M.indptr)):
                print(
                    f"SKIPPED {name} {method} {label} {dt}: ELL padding too large",
                    flush=True,
                )
                continue
            if time_left(t_model) <= 0:
                print(f"SKIPPED {name} {method} {label} {dt}: time guard", flush=True)
                continue
            try:
                key = (method, kind, dt)
                if key not in layouts:
                    layouts[key] = make(to_csr(M, dtype), kind)
                L = layouts[key]
                if spb is not None:
                    L = (
                        L.with_block_rows(spb)
                        if kind == "dia"
                        else L.with_segs_per_block(spb)
                    )
                xs = jnp.asarray(x0, dtype)
                compact = vecs == "compact"
                if bmode == "zero":
                    b = None
                else:
                    b = (
                        CompactVector.from_array(np.zeros(n), dtype)
                        if compact
                        else jnp.zeros(n, dtype)
                    )
                if method == "jacobi":
                    dg = (
                        CompactVector.from_array(diag, dtype)
                        if compact
                        else jnp.asarray(diag, dtype)
                    )

                    def fn(k, L=L, dg=dg, b=b, xs=xs):
                        return solvers.jacobi(
                            L,
                            dg,
                            b,
                            xs,
                            epsilon=0.0,
                            max_iters=k,
                            throw=False,
                            steps_per_trip=trip,
                            measure=measure,
                        )

                    # compulsory CSR-equivalent bytes: matrix, x, x', b, 1/diag
                    cb = M.nnz * (it + 4) + 4 * (n + 1) + it * 4 * n
                elif method == "bellman":
                    bb = jnp.zeros(M.shape[0], dtype)
                    xs = jnp.asarray(np.random.default_rng(0).random(n), dtype)
                    fns = []
                    for g in GROUPS:
                        MM = bellman_model(em, L, g)

                        def fn(k, MM=MM, bb=bb, xs=xs):
                            return solvers.value_iteration(
                                MM, bb, xs, "max", epsilon=0.0, max_iters=k, throw=False
                            )

                        fns.append((g, fn))
                    # CSR matrix (m rows), x, x' (the per-choice vector is not counted)
                    cb = M.nnz * (it + 4) + 4 * (M.shape[0] + 1) + it * 2 * n
                else:

                    def fn(k, L=L, b=b, xs=xs):
                        return solvers.power(
                            L,
                            b,
                            xs,
                            epsilon=0.0,
                            max_iters=k,
                            throw=False,
                            steps_per_trip=trip,
                            measure=measure,
                        )

                    cb = M.nnz * (it + 4) + 4 * (n + 1) + it * 3 * n
                if method != "bellman":
                    fns = [(None, fn)]
                ref = None
                for g, fn in fns:
                    t, sol = per_iteration(fn, iters)
                    rows.append(
                        dict(
                            model=name,
                            solver=method,
                            layout=label if g is None else f"{label} [{g}]",
                            prec=dt,
                            us_per_iter=t * 1e6,
                            GBs=cb / t / 1e9,
                            frac_copy=cb / t / bw,
                            residual=float(sol.residual),
                            iterations=int(sol.iterations),
                        )
                    )
                    if g is not None:  # same values from every reduction
                        v = np.asarray(sol.value)
                        ref = v if ref is None else ref
                        rows[-1]["same_as_first"] = bool(np.array_equal(v, ref))
                        rows[-1].update(hlo_kernels(lambda fn=fn: fn(iters).value))
                    print(rows[-1], flush=True)
                if TUNING_RUN and method == "jacobi" and label == "warp-full t8":
                    inv = dg.map(lambda t: 1.0 / t)
                    rows[-1].update(micro(label, L, inv, xs))
                del L, fn, fns
            except Exception as e:  # noqa: BLE001
                print(
                    f"FAILED {name} {method} {label} {dt}: {type(e).__name__}: "
                    f"{str(e)[:400]}",
                    flush=True,
                )
            gc.collect()
    _set_tuning({})
    layouts.clear()
    gc.collect()
    return rows, em


def end_to_end(name, em, prop):
    """Fused-Jacobi steady state to PRISM's default criterion, and the public
    API's `check`, both timed."""
    out = []
    A, diag = jacobi_system(em)
    n = em.num_states
    for kind in ("compact", "warp"):
        try:
            t0 = time.perf_counter()
            L = make(to_csr(A), kind)
            dg = CompactVector.from_array(diag)
            b = None  # steady state: b = 0, not read
            tl = time.perf_counter() - t0
            x0 = jnp.full(n, 1.0 / n)
            sol = solvers.jacobi(
                L, dg, b, x0, epsilon=1e-6, max_iters=200000, throw=False
            )
            jax.block_until_ready(sol.value)  # includes compilation
            t0 = time.perf_counter()
            sol = solvers.jacobi(
                L, dg, b, x0, epsilon=1e-6, max_iters=200000, throw=False
            )
            jax.block_until_ready(sol.value)
            ts = time.perf_counter() - t0
            out.append(
                dict(
                    model=name,
                    what=f"fused Jacobi steady state ({kind})",
                    iterations=int(sol.iterations),
                    seconds=ts,
                    layout_s=tl,
                    status=int(sol.status),
                )
            )
            print(out[-1], flush=True)
        except Exception as e:  # noqa: BLE001
            print(
                f"FAILED e2e {name} {kind}: {type(e).__name__}: {str(e)[:400]}",
                flush=True,
            )
    if prop and CHECK:
        try:
            t0 = time.perf_counter()
            model = jaxmc.load_model(
                str(
                    __import__("_gpu_common").find_model(
                        __import__("_gpu_common").MODELS[name][0]
                    )
                ),
                __import__("_gpu_common").MODELS[name][1] or None,
            )
            r = jaxmc.check(model, prop)
            out.append(
                dict(
                    model=name,
                    what=f"jaxmc.check {prop} (build included)",
                    seconds=time.perf_counter() - t0,
                    value=str(r)[:80],
                )
            )
            print(out[-1], flush=True)
        except Exception as e:  # noqa: BLE001
            print(
                f"FAILED check {name}: {type(e).__name__}: {str(e)[:400]}", flush=True
            )
    return out


CHECK = False
E2E = {
    "tandem2047": "S=? [ sm=c ]",
    "tandem31": "S=? [ sm=c ]",
    "cluster256": 'S=? [ "premium" ]',
    "cluster464": 'S=? [ "premium" ]',
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", default=["tandem2047"])
    ap.add_argument("--e2e", action="store_true")
    ap.add_argument(
        "--only", default="", help="comma list of layout/prec, e.g. warp-full/f64"
    )
    ap.add_argument(
        "--check", action="store_true", help="also time jaxmc.check (--e2e)"
    )
    ap.add_argument("--tune", action="store_true", help="Jacobi tuning variants (TUNE)")
    ap.add_argument(
        "--methods",
        default="jacobi,power,bellman",
        help="comma list of jacobi, power, bellman (MDPs)",
    )
    ap.add_argument(
        "--with-spmv",
        action="store_true",
        help="also spmv.py's rows of each model, on the same build",
    )
    ap.add_argument(
        "--spmv-only",
        default="",
        help="spmv.py's --only for --with-spmv (its label/prec list)",
    )
    ap.add_argument(
        "--plan",
        default="",
        help="JSON file: a list of {model, only, spmv_only, methods, model_s} "
        "(per-model selections, in order; instead of the models)",
    )
    ap.add_argument(
        "--json",
        default=(
            os.path.join(os.environ["OUT"], "solve.json")
            if os.environ.get("OUT")
            else None
        ),
        help="write the rows here as JSON (default: $OUT/solve.json when OUT is set)",
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
    ap.add_argument(
        "--lex",
        action="store_true",
        help="PRISM's lexicographic state order first (the compact diagonal layout's)",
    )
    a = ap.parse_args()
    import spmv as _spmv

    _spmv.WINDOW = a.window
    _spmv.RCM = a.rcm
    global ONLY, CHECK, TUNING_RUN, METHODS, LEX
    LEX = a.lex
    ONLY = set(a.only.split(",")) if a.only else None
    METHODS = tuple(a.methods.split(","))
    TUNING_RUN = a.tune
    CHECK = a.check
    bw, how = copy_bandwidth()
    print(
        f"# device {device_name()}, copy bandwidth {bw / 1e12:.3f} TB/s ({how})",
        flush=True,
    )
    rows, e2e, srows, builds = [], [], [], {}
    if a.with_spmv:
        import spmv

        spmv.NO_BCSR = True
        spmv.ONLY = set(a.spmv_only.split(",")) if a.spmv_only else None
    plan = [dict(model=m) for m in a.models]
    if a.plan:
        import _gpu_common

        with open(a.plan) as fh:
            plan = json.load(fh)
        model_s = _gpu_common.MODEL_S
    for entry in plan:
        name = entry["model"]
        if a.plan:  # this entry's selections
            ONLY = set(entry["only"].split(",")) if entry.get("only") else None
            METHODS = tuple(entry.get("methods", a.methods).split(","))
            if a.with_spmv:
                sel = entry.get("spmv_only", a.spmv_only)
                spmv.ONLY = set(sel.split(",")) if sel else None
            _gpu_common.MODEL_S = float(entry.get("model_s", model_s))
        if time_left() <= 0:
            print(f"SKIPPED {name}: deadline", flush=True)
            continue
        em = None
        try:
            _, em, tb = build(name)
            t_model = time.time()
            builds[name] = dict(
                build_s=tb,
                states=em.num_states,
                rows=len(em.row_ptr) - 1,
                nnz=len(em.col),
            )
            print(f"# {name}: {builds[name]}", flush=True)
            if a.with_spmv:
                srows += spmv.bench_model(
                    name, bw, False, em=em, t_model=t_model, tb=tb
                )
            r, em = bench_model(name, bw, em=em, t_model=t_model, tb=tb)
            rows += r
            if a.e2e and name in E2E:
                e2e += end_to_end(name, em, E2E[name])
        except Exception as e:  # noqa: BLE001
            print(f"FAILED {name}: {type(e).__name__}: {e}", flush=True)
        del em
        gc.collect()
        if a.json:
            with open(a.json, "w") as fh:  # partial results as we go
                json.dump(
                    dict(
                        device=device_name(),
                        copy_Bps=bw,
                        builds=builds,
                        rows=rows,
                        spmv=srows,
                        e2e=e2e,
                    ),
                    fh,
                    indent=1,
                )
    if srows:
        print(
            table(
                srows,
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
    print(
        table(
            rows,
            ["model", "solver", "layout", "prec", "us_per_iter", "GBs", "frac_copy"],
        )
    )
    for r in e2e:
        print(r)


if __name__ == "__main__":
    main()
