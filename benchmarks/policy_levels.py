"""One MDP property with `throw=False`, and what policy iteration did on each
level of the topological solve: per policy solve its size, each BiCGStab
run's status and iterations, and the final residual; per level the
certificate's outcome, the iterations and the value range. For diagnosing a
level where "policy iteration found no certificate" (issue 20) on the device.

    python benchmarks/policy_levels.py MODEL CONSTS PROPERTY [--json OUT]

e.g. `python benchmarks/policy_levels.py
../shared/models/prism-examples/mdps/consensus/coin6.nm K=4
'Pmin=? [ F "finished" & "all_coins_equal_1" ]'`.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import jaxmc
from jaxmc.solvers import _policy, _topological


def instrument(log: list) -> None:
    """Wrap the policy solves, the certificates and the levels to append
    records to `log` (and print them)."""

    def say(rec):
        log.append(rec)
        print(json.dumps(rec), flush=True)

    krylov, solve, certify = _policy._krylov, _policy.solve_policy, _policy.certify
    level = _topological._Run.component_level
    runs: list = []

    def _krylov(*args):
        sol = krylov(*args)
        runs.append([int(sol.status), int(sol.iterations), float(sol.residual)])
        return sol

    def solve_policy(S, rhs, x0=None):
        runs.clear()
        t = time.perf_counter()
        x = solve(S, rhs, x0)
        res = None if x is None else float(np.max(np.abs(rhs - S @ x), initial=0.0))
        rec = dict(kind="policy_solve", states=S.shape[0], krylov=list(runs))
        say(dict(rec, residual=res, s=time.perf_counter() - t))
        return x

    def certify_(A, e_lo, e_up, starts, opt, Y, target, *rest):
        t = time.perf_counter()
        C = certify(A, e_lo, e_up, starts, opt, Y, target, *rest)
        rec = dict(kind="certify", states=A.shape[1], target=target)
        say(dict(rec, certified=C is not None, s=time.perf_counter() - t))
        return C

    def component_level(self, X, s, e, target):
        t = time.perf_counter()
        level(self, X, s, e, target)
        Y = X[self.plan.states[s:e]]
        rec = dict(kind="level", states=e - s, status=int(self.status))
        rec.update(iterations=self.iterations, lo=float(Y.min()), hi=float(Y.max()))
        say(dict(rec, s=time.perf_counter() - t))

    _policy._krylov, _policy.solve_policy = _krylov, solve_policy
    _policy.certify = _topological.certify = certify_
    _topological._Run.component_level = component_level


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("consts")
    p.add_argument("prop")
    p.add_argument("--json", help="write the records and the result here")
    args = p.parse_args()
    log: list = []
    instrument(log)
    t = time.perf_counter()
    model = jaxmc.load_model(args.model, args.consts or None)
    states = int(jaxmc.build(model).num_states)
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    r = jaxmc.check(model, args.prop, throw=False)
    out = dict(
        states=states, build_s=build_s, check_s=time.perf_counter() - t,
        value=float(r.value), bound=r.bound, status=str(r.status),
        attempts=[a.describe() for a in (r.attempts or ())],
    )  # fmt: skip
    print(json.dumps(out), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(result=out, log=log), f, indent=1)


if __name__ == "__main__":
    main()
