"""One of the processes of `test_devices.py`'s multi-process tests: joins
`jax.distributed` on the CPU (gloo collectives), then

- `solve` (default): splits a Jacobi solve over the processes' devices
  (`jaxmc.layout.partition` over the global mesh) and prints the largest
  error against a direct solve (the same matrix in every process, from one
  seed);
- `check MODELS`: runs `jaxmc.check(..., devices=<every device>)` on the
  cases of `CHECKS` and prints one JSON line per case (value, per-state
  values, iterations, layout) for the test to compare with one process."""

from __future__ import annotations

import sys

import jax
import numpy as np


#: (model under PRISM's examples, constants, property): a DTMC reachability,
#: CTMC time-bounded, steady-state and reward properties, MDP min/max.
CHECKS = (
    ("dtmcs/brp/brp.pm", "N=16,MAX=2", "P=? [ true U s=5 & srep=2 ]"),
    ("ctmcs/tandem/tandem.sm", "c=15", "P=? [ F<=1.5 sc=c ]"),
    ("ctmcs/tandem/tandem.sm", "c=15", 'R{"customers"}=? [ S ]'),
    ("ctmcs/tandem/tandem.sm", "c=15", 'R{"customers"}=? [ I=1.5 ]'),
    ("mdps/consensus/coin2.nm", "K=2", 'Pmin=? [ F "finished"&"all_coins_equal_0" ]'),
    ("mdps/consensus/coin2.nm", "K=2", 'R{"steps"}max=? [ F "finished" ]'),
)


def checks(models: str) -> None:
    import json

    import jaxmc

    for path, consts, prop in CHECKS:
        model = jaxmc.load_model(f"{models}/{path}", consts)
        r = jaxmc.check(model, prop, devices=len(jax.devices()))
        rec = {"case": f"{path} {consts} {prop}", "value": float(r.value),
               "values": np.asarray(r.values, np.float64).tolist(),
               "iterations": r.iterations, "layout": r.layout}  # fmt: skip
        print(json.dumps(rec), flush=True)


def main(pid: int, port: str, nproc: int, mode: str = "solve", *args) -> None:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"localhost:{port}", num_processes=nproc, process_id=pid)
    jax.config.update("jax_enable_x64", True)
    if mode == "check":
        checks(*args)
        jax.distributed.shutdown()
        return
    import jax.numpy as jnp
    import scipy.sparse as sp
    from jax.experimental import multihost_utils

    from jaxmc.layout import make_mesh, partition
    from jaxmc.solvers import jacobi

    rng = np.random.default_rng(7)
    n = 301
    off = sp.diags([rng.random(n - 1), rng.random(n - 4)], [1, -4], format="csr")
    off = sp.csr_matrix(off.multiply(0.45))  # row sums < 1: a contraction
    off.sort_indices()
    b = rng.random(n)
    mesh = make_mesh(len(jax.devices()))
    A = partition(off.indptr, off.indices, off.data, off.shape, mesh)
    sol = jacobi(A, jnp.ones(n), jnp.asarray(b), jnp.zeros(n), epsilon=1e-13,
                 relative=False, throw=False)  # fmt: skip
    x = np.asarray(multihost_utils.process_allgather(sol.value, tiled=True))
    exact = sp.linalg.spsolve(sp.identity(n, format="csc") - off.tocsc(), b)
    print(
        f"devices={len(jax.devices())} processes={jax.process_count()} "
        f"mode={A.halo.mode} iterations={int(sol.iterations)} "
        f"error={float(np.max(np.abs(x - exact))):.3e}",
        flush=True,
    )
    jax.distributed.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), *sys.argv[4:])
