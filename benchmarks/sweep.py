"""A sweep of many parameter points on one DTMC: `jaxmc.sweep` (vmapped,
one structure, one pass over the matrix per iteration for all points) against
sequential `jaxmc.solve` calls and against Storm instantiating its
parametric model at each point (stormpy's `ModelInstantiator`), on the CPU.

The model is the walk of `benchmarks/grad.py` with 2 parameters (`p0`, `p1`),
`P=? [ F "goal" ]`, on a 32 x 32 grid of points by default. All three
compute to a relative precision of about 1e-6..1e-8 (jaxmc: Jacobi to 1e-8;
Storm: its default solver for DTMCs).

    python benchmarks/sweep.py --n 316 --points 1024 --sequential 64
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time

import jax
import numpy as np

import jaxmc

from grad import model_text  # noqa: E402  (benchmarks/ is the script's dir)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=316, help="grid side (states ~ n^2)")
    ap.add_argument("--points", type=int, default=1024)
    ap.add_argument("--chunk", type=int, default=None,
                    help="points per vmapped batch (default: jaxmc.sweep's)")
    ap.add_argument("--sequential", type=int, default=64,
                    help="sequential solve/Storm calls timed (extrapolated to --points)")
    ap.add_argument("--epsilon", type=float, default=1e-8)
    args = ap.parse_args()
    side = int(round(np.sqrt(args.points)))
    P0, P1 = np.meshgrid(np.linspace(0.3, 0.5, side), np.linspace(0.35, 0.55, args.points // side))
    pts = {"p0": P0.reshape(-1), "p1": P1.reshape(-1)}
    npts = pts["p0"].size
    text = model_text(2)
    first = {k: float(v[0]) for k, v in pts.items()}
    model = jaxmc.load_model_string(text, {"N": args.n}, parameters=("p0", "p1"), params=first)
    t = time.perf_counter()
    explicit = jaxmc.build(model)
    build = time.perf_counter() - t
    prop = 'P=? [ F "goal" ]'
    print(f"# {time.strftime('%Y-%m-%d')} {platform.machine()} ({os.cpu_count()} cores), "
          f"jax {jax.__version__} on {jax.default_backend()}")
    print(f"# model: {explicit.num_states} states, {explicit.num_transitions} transitions "
          f"(jaxmc build {build:.1f} s); {npts} points")
    kw = dict(epsilon=args.epsilon, build_params=first)
    # vmapped sweep (compile first: on a batch of the chunk size, or, with
    # sweep's default chunk, on all points)
    chunk = args.chunk
    warm = pts if chunk is None else {k: v[:chunk] for k, v in pts.items()}
    jaxmc.sweep(model, prop, params=warm, chunk=chunk, **kw)
    t = time.perf_counter()
    out = jaxmc.sweep(model, prop, params=pts, chunk=chunk, **kw)
    t_sweep = time.perf_counter() - t
    # sequential jaxmc.solve calls (compiled once, then one call per point)
    m = min(args.sequential, npts)
    jaxmc.solve(model, prop, params=first, **kw)
    t = time.perf_counter()
    seq = np.array([
        float(jaxmc.solve(model, prop, params={k: pts[k][i] for k in pts}, **kw)) for i in range(m)
    ])
    t_seq = (time.perf_counter() - t) * npts / m
    np.testing.assert_allclose(seq, out[:m], rtol=1e-6)
    rows = [("jaxmc.sweep (vmap)", t_sweep, f"measured, chunk {chunk or 'default'}"),
            ("jaxmc.solve x points", t_seq, f"{m} calls, extrapolated")]
    try:
        import stormpy
        import stormpy.pars
        from stormpy.numbers.developer import cln
    except ImportError:
        stormpy = None
    if stormpy is not None:
        with tempfile.NamedTemporaryFile("w", suffix=".prism", delete=False) as f:
            f.write(text.replace("const int N;", f"const int N = {args.n};"))
        t = time.perf_counter()
        program = stormpy.parse_prism_program(f.name)
        props = stormpy.parse_properties(prop, program)
        pmodel = stormpy.build_model[cln.FactorizedRationalFunction](program, props)
        inst = stormpy.pars.ModelInstantiator(pmodel)
        t_sbuild = time.perf_counter() - t
        names = {v.name: v for v in pmodel.collect_probability_parameters()}
        init = int(pmodel.initial_states[0])
        t = time.perf_counter()
        vals = []
        for i in range(m):
            point = {names[k]: cln.Rational(float(pts[k][i])) for k in names}
            res = stormpy.model_checking(inst.instantiate(point), props[0])
            vals.append(float(res.get_value(init)))
        t_storm = (time.perf_counter() - t) * npts / m
        os.unlink(f.name)
        rows.append(("Storm instantiate + check", t_storm,
                     f"{m} points, extrapolated; parametric build {t_sbuild:.1f} s not counted"))
        err = float(np.max(np.abs(np.array(vals) - out[:m]) / np.abs(out[:m])))
        print(f"# max rel. difference jaxmc vs Storm over {m} points: {err:.2e}")
    print("| method | time for all points (s) | per point (ms) | speed-up of sweep | note |")
    print("|---|---:|---:|---:|---|")
    for name, tt, note in rows:
        print(f"| {name} | {tt:.2f} | {1e3 * tt / npts:.2f} | {tt / t_sweep:.1f}x | {note} |")


if __name__ == "__main__":
    main()
