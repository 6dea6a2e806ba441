"""Steady state at scale: long-run properties through the numerics' certified
long-run path (`jaxmc.numerics.steady_state_values` / `long_run_rewards`) on
the default JAX device, with value, certified bound, the methods tried
(attempts), iterations and time, cold (compilation included) and warm.

    python benchmarks/steady_scale.py tandem.sm c=2047 'R{"customers"}=? [ S ]'
    python benchmarks/steady_scale.py --models DIR cluster.sm N=256 'S=? [ "premium" ]'

Each case is three arguments (model file, constants, property: `S=? [ label ]`
with a label of the model, or `R{"name"}=? [ S ]`); prints one JSON line per
case. `--epsilon`, `--method`, `--layout`, `--max-iters` are passed on.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import jax  # noqa: E402

import jaxmc  # noqa: E402
from jaxmc import numerics  # noqa: E402


def _find(models: Path, name: str) -> Path:
    hits = sorted(models.rglob(name))
    if not hits:
        raise SystemExit(f"{name} not found under {models}")
    return hits[0]


def run_case(path, consts, prop, args):
    t0 = time.perf_counter()
    em = jaxmc.build(jaxmc.load_model(str(path), consts))
    t_build = time.perf_counter() - t0
    kw = dict(
        options=jaxmc.SolveOptions(
            epsilon=args.epsilon,
            method=args.method,
            layout=args.layout,
            max_iters=args.max_iters,
            throw=False,
        )
    )
    m = re.fullmatch(r'\s*R\{"(\w+)"\}=\?\s*\[\s*S\s*\]\s*', prop)
    if m:
        call = lambda: numerics.long_run_rewards(  # noqa: E731
            em, em.reward_structure(m.group(1)), **kw
        )
    else:
        lab = re.fullmatch(r'\s*S=\?\s*\[\s*"(\w+)"\s*\]\s*', prop).group(1)
        call = lambda: numerics.steady_state_values(em, em.labels[lab], **kw)  # noqa: E731
    out = dict(
        model=path.name,
        consts=consts,
        prop=prop,
        states=em.num_states,
        transitions=em.num_transitions,
        build_s=round(t_build, 2),
        device=str(jax.devices()[0]),
        epsilon=args.epsilon,
    )
    for run in ("cold", "warm")[: 1 + args.warm]:
        t0 = time.perf_counter()
        res = call()
        out[f"{run}_s"] = round(time.perf_counter() - t0, 2)
    init = int(em.initial_states[0])
    out.update(
        value=float(res.values[init]),
        bound=res.bound,
        status=res.status.name,
        method=res.method,
        layout=res.extra.get("layout"),
        iterations=res.iterations,
        attempts=[a.describe() for a in res.attempts],
        final=res.extra["stationary_attempt"].describe()
        if "stationary_attempt" in res.extra
        else None,
    )
    print(json.dumps(out), flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--models", type=Path, default=ROOT.parent / "shared" / "models")
    ap.add_argument("--epsilon", type=float, default=1e-6)
    ap.add_argument("--method", default=None)
    ap.add_argument("--layout", default="auto")
    ap.add_argument(
        "--max-iters",
        type=int,
        default=None,
        help="a hard cap (default: the default budget, as with jaxmc.check)",
    )
    ap.add_argument("--warm", action="store_true", help="time a second, warm run")
    args = ap.parse_args()
    if len(args.cases) % 3:
        raise SystemExit("cases come in threes: MODEL CONSTS PROPERTY")
    for i in range(0, len(args.cases), 3):
        name, consts, prop = args.cases[i : i + 3]
        run_case(_find(args.models, name), consts, prop, args)


if __name__ == "__main__":
    main()
