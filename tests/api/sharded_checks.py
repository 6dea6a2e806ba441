"""Run as a script with simulated CPU devices (`XLA_FLAGS` set by the
caller, `tests/api/test_devices.py`): checks models on one device
(`layout="csr"`, the same code path without the partition) and on
`devices=D`, and prints one JSON record per case on stdout.

A record: `name`, `rel` (the largest relative difference of the per-state
values), `iters` (one device, several), `layout`, `attempts` (the notes of
the several-device result's attempts), or for the kernel cases `rel` of the
partitioned product against CSR's and the halo mode."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def _rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.abs(a - b) / np.maximum(np.abs(a), np.finfo(float).tiny)
    return float(np.max(np.where(same, 0.0, d), initial=0.0))


def _matrices(rng, n: int, lower: int, density: float, seed: int) -> dict:
    """A banded matrix (diagonals 1, 0 and `-lower`: the neighbour plan)
    and a random one (the gather plan), `n` x `n`."""
    import scipy.sparse as sp

    band = [rng.random(n - 1), rng.random(n), rng.random(n - lower)]
    return {
        "banded": sp.diags(band, [1, 0, -lower]),
        "random": sp.random(n, n, density, random_state=seed),
    }


def kernel_cases(D: int):
    import jax.numpy as jnp
    import scipy.sparse as sp

    from jaxmc.kernels.spmv import spmv
    from jaxmc.layout import CSR, ELL, WarpELL, make_mesh, partition

    rng = np.random.default_rng(0)
    mesh = make_mesh(D)
    n = 203
    mats = _matrices(rng, n, lower=5, density=0.03, seed=1)
    for name, A in mats.items():
        A = sp.csr_matrix(A)
        A.sort_indices()
        Pm = partition(A.indptr, A.indices, A.data, A.shape, mesh)
        csr = CSR.from_arrays(A.indptr, A.indices, A.data, A.shape)
        x = jnp.asarray(rng.random(n))
        X = jnp.asarray(rng.random((n, 3)))
        yield {
            "name": f"kernel-{name}",
            "rel": max(_rel(spmv(csr, x), spmv(Pm, x)), _rel(A @ X, spmv(Pm, X))),
            "mode": Pm.halo.mode,
            "halo": Pm.halo_bytes(),
        }
        Pe = partition(A.indptr, A.indices, A.data, A.shape, mesh, local="ell")
        yield {
            "name": f"kernel-{name}-ell",
            "rel": _rel(spmv(ELL.from_csr(csr), x), spmv(Pe, x)),
            "mode": Pe.halo.mode,
        }
        # the warp-segment layout (its edge rows are ELL: another sum order)
        Pw = partition(A.indptr, A.indices, A.data, A.shape, mesh, local="warp")
        yield {
            "name": f"kernel-{name}-warp",
            "rel": _rel(spmv(WarpELL.from_csr(csr), x), spmv(Pw, x)),
            "scipy-rel": _rel(A @ np.asarray(x), spmv(Pw, x)),
            "mode": Pw.halo.mode,
        }
    # MDP: each state's choices stay on the device of the state
    ptr = np.concatenate([[0], np.cumsum(rng.integers(1, 4, size=60))])
    A = sp.csr_matrix(sp.random(int(ptr[-1]), 60, 0.1, random_state=2))
    A.sort_indices()
    Pm = partition(A.indptr, A.indices, A.data, A.shape, mesh, choice_ptr=ptr)
    x = rng.random(60)
    yield {
        "name": "kernel-choices",
        "rel": _rel(A @ x, spmv(Pm, jnp.asarray(x))),
        "mode": Pm.halo.mode,
    }


def fused_cases(D: int):
    """Jacobi and power iteration on extended partitions (square, "warp":
    `jaxmc.kernels.sharded_fused`) against one device's `WarpELL`: the
    plain-JAX steps (the CPU's) give the same iterates and iteration counts;
    the Pallas kernel (interpret mode, forced here as on a GPU) converges to
    the same solution, in whole trips of 16 steps."""
    import jax
    import jax.numpy as jnp
    import scipy.sparse as sp

    from jaxmc.kernels import sharded_fused
    from jaxmc.layout import CSR, WarpELL, make_mesh, partition
    from jaxmc.solvers import jacobi, power

    rng = np.random.default_rng(3)
    mesh = make_mesh(D)
    n = 157
    mats = _matrices(rng, n, lower=4, density=0.04, seed=5)
    real = sharded_fused.uses_pallas
    for name, A in mats.items():
        A = sp.csr_matrix(A * (0.9 / max(1.0, abs(A).sum(axis=1).max())))
        A.sort_indices()
        off = sp.csr_matrix(A - sp.diags(A.diagonal()))
        off.eliminate_zeros()
        off.sort_indices()
        diag = jnp.asarray(1.0 - A.diagonal())
        b = jnp.asarray(rng.random(n))
        exact = np.linalg.solve(np.eye(n) - A.toarray(), np.asarray(b))
        for method, M in (("power", A), ("jacobi", off)):
            csr = CSR.from_arrays(M.indptr, M.indices, M.data, M.shape)
            one = WarpELL.from_csr(csr)
            part = partition(M.indptr, M.indices, M.data, M.shape, mesh, local="warp")

            def solve(m):
                kw = dict(epsilon=1e-12, max_iters=2000)
                if method == "power":
                    return power(m, b, jnp.zeros(n), **kw)
                return jacobi(m, diag, b, jnp.zeros(n), **kw)

            ref, split = solve(one), solve(part)
            sharded_fused.uses_pallas = lambda A: True
            jax.clear_caches()  # (the solvers' traces: the other path)
            try:
                kernel = solve(part)
            finally:
                sharded_fused.uses_pallas = real
                jax.clear_caches()
            yield {
                "name": f"fused-{name}-{method}",
                "extended": part.extended,
                "mode": part.halo.mode,
                "rel": _rel(ref.value, split.value),
                "iters": [
                    int(ref.iterations),
                    int(split.iterations),
                    int(kernel.iterations),
                ],  # fmt: skip
                "kernel-err": float(np.max(np.abs(np.asarray(kernel.value) - exact))),
                "err": float(np.max(np.abs(np.asarray(split.value) - exact))),
            }


#: The cases CI runs (the others run with `full`, behind the slow marker).
QUICK = (
    "brp-jacobi", "brp-bicgstab", "brp-gauss_seidel", "brp-sound",
    "tandem-S-jacobi", "tandem-transient", "coin-value_iteration-Pmax",
    "coin-interval_iteration-Pmin", "herman-R",
)  # fmt: skip


def model_cases(D: int, models: Path, full: bool):
    import jaxmc

    ex = Path(__file__).resolve().parents[2] / "examples" / "models"
    change = dict(criterion="change")
    cases = []
    if models.is_dir():
        brp = jaxmc.load_model(models / "dtmcs/brp/brp.pm", "N=16,MAX=2")
        tandem = jaxmc.load_model(models / "ctmcs/tandem/tandem.sm", "c=15")
        coin = jaxmc.load_model(models / "mdps/consensus/coin2.nm", "K=2")
        reach = "P=? [ true U s=5 & srep=2 ]"
        for method in ("jacobi", "power", "bicgstab", "gauss_seidel"):
            cases.append((f"brp-{method}", brp, reach, dict(method=method, **change)))
        cases.append(("brp-sound", brp, reach, {}))
        cases.append(("brp-sound-power", brp, reach, dict(method="power")))
        for method in ("jacobi", "power", "bicgstab"):
            cases.append((f"tandem-S-{method}", tandem, 'R{"customers"}=? [ S ]',
                          dict(method=method, **change)))  # fmt: skip
        cases.append(("tandem-transient", tandem, "P=? [ true U<=2.5 sc=c ]", {}))
        cases.append(("tandem-I", tandem, 'R{"customers"}=? [ I=1.5 ]', {}))
        cases.append(("tandem-reach", tandem, 'R{"customers"}=? [ F sc=c & sm=c ]', {}))
        cases.append(("tandem-fp32", tandem, 'R{"customers"}=? [ S ]',
                      dict(method="jacobi", precision="fp32", **change)))  # fmt: skip
        fin = 'F "finished"&"all_coins_equal_0"'
        for method in ("value_iteration", "interval_iteration"):
            for q in (f"Pmin=? [ {fin} ]", f"Pmax=? [ {fin} ]",
                      'R{"steps"}max=? [ F "finished" ]'):  # fmt: skip
                cases.append((f"coin-{method}-{q[:4]}", coin, q,
                               dict(method=method, **change)))  # fmt: skip
        cases.append(("coin-sound", coin, f"Pmax=? [ {fin} ]", {}))
        cases.append(("coin-bounded", coin, 'Pmax=? [ F<=20 "finished" ]', {}))
    if models.is_dir():  # the forward transient distribution (transposed)
        from jaxmc.numerics import transient_probabilities

        explicit = jaxmc.build(tandem)
        one, several = (
            transient_probabilities(explicit, 2.0, options=jaxmc.SolveOptions(**kw))
            for kw in ({"layout": "csr"}, {"devices": D})
        )
        yield {"name": "tandem-forward", "rel": _rel(one, several), "iters": [0, 0],
               "layout": None, "attempts": []}  # fmt: skip
    herman = jaxmc.load_model(ex / "herman5.pm")
    cases.append(("herman-R", herman, 'R{"steps"}=? [ F "stable" ]', {}))
    if models.is_dir():  # the devices' rows in ELL, against one device's ELL
        for name, model, prop, kw in list(cases):
            if name in ("tandem-S-jacobi", "coin-value_iteration-Pmax"):
                cases.append((name + "-ell", model, prop, dict(kw, layout="ell")))
                cases.append((name + "-warp", model, prop, dict(kw, layout="warp")))
    for name, model, prop, kw in cases:
        if not full and name not in QUICK and not name.endswith(("-ell", "-warp")):
            continue
        kw.setdefault("layout", "csr")
        one = jaxmc.check(model, prop, **kw)
        several = jaxmc.check(model, prop, devices=D, **kw)
        yield {
            "name": name,
            "rel": _rel(one.values, several.values),
            "iters": [one.iterations, several.iterations],
            "layout": several.layout,
            "attempts": [a.note for a in several.attempts],
            # BiCGStab ran (asked for, or the sound default's certified
            # Krylov solve): dot products reduced in another order
            "krylov": any(
                "bicgstab" in [r.method, *(a.method for a in r.attempts)]
                for r in (one, several)
            ),
        }


def cli_case(D: int):
    """The command line's `--devices` against one device (`--layout csr`):
    the same `Result:` lines."""
    import contextlib
    import io

    import jaxmc.explore.device as device
    from jaxmc.cli import main

    calls = []
    real = device.explore_sharded

    def spy(*a, **k):
        calls.append(a[3])  # (the devices)
        return real(*a, **k)

    device.explore_sharded = spy
    die = Path(__file__).resolve().parents[2] / "examples" / "models" / "die.pm"
    outs = []
    for extra in (
        ["--layout", "csr"],
        ["--devices", str(D)],
        ["--devices", str(D), "--explorer", "device"],  # the build split too
    ):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main([str(die), str(die) + ".props", "-jacobi", *extra])
        results = [s for s in buf.getvalue().splitlines() if s.startswith("Result")]
        outs.append((rc, results))
    device.explore_sharded = real
    yield {"name": "cli", "one": outs[0], "several": outs[1], "explored": outs[2],
           "sharded_builds": calls}  # fmt: skip


def main(argv):
    D, models, full = int(argv[1]), Path(argv[2]), argv[3:] == ["full"]
    import jax

    jax.config.update("jax_enable_x64", True)
    assert len(jax.devices()) >= D, jax.devices()
    cases = [*kernel_cases(D), *fused_cases(D)]
    for rec in [*cases, *model_cases(D, models, full), *cli_case(D)]:
        print(json.dumps(rec, default=str), flush=True)


if __name__ == "__main__":
    main(sys.argv)
