"""Cost of `jax.grad` of an unbounded reachability probability against the
forward solve, with 1 and with 16 parameters (CPU).

The model is a synthetic parametric DTMC, a biased 2-D random walk on an
`N x N` grid (N^2 + 2 states) that is absorbed at the right edge ("goal")
or, with probability `fail` per step, in a failure state. Each column
residue `x mod P` has its own rightward bias `p0..p{P-1}`, so the number of
parameters P is a knob that does not change the structure's size. The
property is `P=? [ F "goal" ]` from the grid's left-bottom corner.

The forward solve is one Jacobi solve to 1e-10 (relative); the gradient
costs one more (transposed) solve, whatever P is.

    python benchmarks/grad.py --n 1000        # 10^6 states
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import jax
import numpy as np

import jaxmc


def model_text(P: int) -> str:
    lines = ["dtmc", "const int N;", "const double fail = 0.02;"]
    lines += [f"const double p{k};" for k in range(P)]
    lines += ["module walk", "  x : [0..N] init 0;", "  y : [0..N-1] init 0;", "  f : bool init false;"]
    for k in range(P):
        pk = f"p{k}"
        # right w.p. (1-fail)*pk, left/up/down share the rest; reflecting walls.
        lines.append(
            f"  [] !f & x<N & mod(x,{P})={k} -> (1-fail)*{pk} : (x'=x+1)"
            f" + (1-fail)*(1-{pk})/3 : (x'=max(x-1,0))"
            f" + (1-fail)*(1-{pk})/3 : (y'=min(y+1,N-1))"
            f" + (1-fail)*(1-{pk})/3 : (y'=max(y-1,0))"
            f" + fail : (f'=true)&(x'=0)&(y'=0);"
        )
    lines += ["  [] f | x=N -> true;", "endmodule", 'label "goal" = x=N & !f;']
    return "\n".join(lines)


def timed(f, *a, repeat=3):
    jax.block_until_ready(f(*a))  # compile
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        jax.block_until_ready(f(*a))
        best = min(best, time.perf_counter() - t)
    return best


def run(n: int, P: int, repeat: int) -> dict:
    point = {f"p{k}": 0.3 + 0.2 * k / max(P - 1, 1) for k in range(P)}
    t = time.perf_counter()
    model = jaxmc.load_model_string(model_text(P), {"N": n}, parameters=tuple(point), params=point)
    explicit = jaxmc.build(model)
    build = time.perf_counter() - t
    t = time.perf_counter()
    problem = jaxmc.parametric(model, 'P=? [ F "goal" ]', params=point, epsilon=1e-10)
    setup = time.perf_counter() - t
    fwd = timed(problem, point, repeat=repeat)
    grad_fn = jax.grad(problem)
    grd = timed(grad_fn, point, repeat=repeat)
    vg = jax.value_and_grad(problem)
    vgt = timed(vg, point, repeat=repeat)
    return {
        "states": explicit.num_states, "nnz": explicit.num_transitions, "P": P,
        "build_s": build, "setup_s": setup, "forward_s": fwd, "grad_s": grd,
        "value_and_grad_s": vgt, "ratio": grd / fwd, "value": float(problem(point)),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="grid side (states ~ n^2)")
    ap.add_argument("--params", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d')} {platform.processor() or platform.machine()} "
          f"({os.cpu_count()} cores), jax {jax.__version__} on {jax.default_backend()}")
    print("| states | nnz | params | forward (s) | grad (s) | grad/forward | value_and_grad (s) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for P in args.params:
        r = run(args.n, P, args.repeat)
        print(f"| {r['states']} | {r['nnz']} | {P} | {r['forward_s']:.3f} | {r['grad_s']:.3f} | "
              f"{r['ratio']:.2f} | {r['value_and_grad_s']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
