"""Cost of `jax.grad` of an unbounded reachability probability against the
forward solve, with 1 and with 16 parameters (on JAX's default backend).

The model is a synthetic parametric DTMC, a biased 2-D random walk on an
`N x N` grid (N^2 + 2 states) that is absorbed at the right edge ("goal")
or, with probability `fail` per step, in a failure state. Each column
residue `x mod P` has its own rightward bias `p0..p{P-1}`, so the number of
parameters P is a knob that does not change the structure's size. The
property is `P=? [ F "goal" ]` from the grid's left-bottom corner.

The forward solve is one (over-relaxed) Gauss-Seidel solve to 1e-10
(relative); the gradient costs one more (transposed) solve, whatever P is.
`--omega 1` forces plain Gauss-Seidel.

    python benchmarks/grad.py --n 1000        # 10^6 states
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # measure this checkout

import jax  # noqa: E402

import jaxmc  # noqa: E402


def model_text(P: int, fail: float = 0.02) -> str:
    """The walk with `P` bias parameters and failure probability `fail` per
    step (the larger `fail`, the faster the chain contracts: Jacobi needs
    about `log(eps) / log(1 - fail)` iterations or more)."""
    lines = ["dtmc", "const int N;", f"const double fail = {fail!r};"]
    lines += [f"const double p{k};" for k in range(P)]
    lines += [
        "module walk",
        "  x : [0..N] init 0;",
        "  y : [0..N-1] init 0;",
        "  f : bool init false;",
    ]
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
    """Best wall time of `repeat` calls after a compiling one, and the
    process CPU time of that call."""
    jax.block_until_ready(f(*a))  # compile
    best, cpu = float("inf"), float("inf")
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        jax.block_until_ready(f(*a))
        dt = time.perf_counter() - t
        if dt < best:
            best, cpu = dt, time.process_time() - c
    return best, cpu


def run(
    n: int, P: int, repeat: int, spread: float = 0.0, omega: float | None = None
) -> dict:
    # With spread 0 every parameter has the same value, so that the chain
    # (and the iteration count) is the same whatever P: only the number of
    # parameters differs.
    point = {f"p{k}": 0.3 + spread * k / max(P - 1, 1) for k in range(P)}
    model = jaxmc.load_model_string(
        model_text(P), {"N": n}, parameters=tuple(point), params=point
    )
    t = time.perf_counter()
    # builds the state space once, then the structure-only precomputation
    problem = jaxmc.parametric(
        model, 'P=? [ F "goal" ]', params=point, epsilon=1e-10, omega=omega
    )
    setup = time.perf_counter() - t
    explicit = problem.model
    fwd, fwd_cpu = timed(problem, point, repeat=repeat)
    grad_fn = jax.grad(problem)
    grd, grd_cpu = timed(grad_fn, point, repeat=repeat)
    vg = jax.value_and_grad(problem)
    vgt, vgt_cpu = timed(vg, point, repeat=repeat)
    return {
        "states": explicit.num_states,
        "nnz": explicit.num_transitions,
        "P": P,
        "setup_s": setup,
        "forward_s": fwd,
        "grad_s": grd,
        "value_and_grad_s": vgt,
        "ratio": grd / fwd,
        "value": float(problem(point)),
        "forward_cpu_s": fwd_cpu,
        "grad_cpu_s": grd_cpu,
        "value_and_grad_cpu_s": vgt_cpu,
        "omega": omega,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="grid side (states ~ n^2)")
    ap.add_argument("--params", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--spread",
        type=float,
        default=0.0,
        help="parameter k is 0.3 + spread * k / (P - 1) (0: one chain for every P)",
    )
    ap.add_argument(
        "--omega",
        type=float,
        default=None,
        help="over-relaxation of the solves (default: automatic; 1: plain "
        "Gauss-Seidel)",
    )
    ap.add_argument("--json", help="append one JSON line per row to this file")
    ap.add_argument(
        "--xla-defaults",
        action="store_true",
        help="compile the CPU solves with XLA's default options "
        "(jaxmc._config.CPU_SOLVER_OPTIONS off), for comparison",
    )
    args = ap.parse_args()
    if args.xla_defaults:
        jaxmc._config.CPU_SOLVER_OPTIONS = {}
    dev = jax.devices()[0]
    print(
        f"# {time.strftime('%Y-%m-%d')} {platform.processor() or platform.machine()} "
        f"({os.cpu_count()} cores), jax {jax.__version__} on {jax.default_backend()} "
        f"({getattr(dev, 'device_kind', dev.platform)})"
    )
    print(
        "| states | nnz | params | forward (s) | grad (s) | grad/forward | "
        "value_and_grad (s) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for P in args.params:
        r = run(args.n, P, args.repeat, args.spread, args.omega)
        print(
            f"| {r['states']} | {r['nnz']} | {P} | {r['forward_s']:.3f} | "
            f"{r['grad_s']:.3f} | {r['ratio']:.2f} | {r['value_and_grad_s']:.3f} |",
            flush=True,
        )
        print(
            f"#   build + setup {r['setup_s']:.1f} s, value {r['value']:.6e}; "
            f"process CPU time: forward {r['forward_cpu_s']:.2f} s, "
            f"grad {r['grad_cpu_s']:.2f} s, "
            f"value_and_grad {r['value_and_grad_cpu_s']:.2f} s; "
            f"omega {args.omega or 'auto'}",
            flush=True,
        )
        if args.json:
            with open(args.json, "a") as f:
                f.write(
                    json.dumps(
                        {
                            "bench": "grad",
                            "backend": jax.default_backend(),
                            "device": str(getattr(dev, "device_kind", dev.platform)),
                            **r,
                        }
                    )
                    + "\n"
                )


if __name__ == "__main__":
    main()
