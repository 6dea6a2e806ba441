"""The GPU benchmark scripts' helpers (`benchmarks/_gpu_common.py`,
`spmv.py`, `solve_gpu.py`) on the CPU at tiny sizes: the timed loop returns
what it timed, the model cache and its prebuild round-trip, and the MDP rows
(SpMV + row-group max, Bellman iterations) agree with scipy. Only the plain
JAX layouts run here (the Pallas kernels have their own tests)."""

from __future__ import annotations

import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest


ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT.parent / "shared" / "models" / "prism-examples"
sys.path.insert(0, str(ROOT / "benchmarks"))

import _gpu_common as common  # noqa: E402


needs_models = pytest.mark.skipif(not MODELS.exists(), reason="no ../shared/models")


def test_time_iterations_returns_two_steps_and_takes_operands():
    a = jnp.asarray([0.5, 0.25, 2.0])
    out = []
    t = common.time_iterations(
        lambda v, a: v * a + 1.0, jnp.ones(3), k=4, reps=1, out=out, operands=(a,)
    )
    assert t > 0
    np.testing.assert_allclose(out[0], (1.0 * a + 1.0) * a + 1.0)


def test_too_padded():
    assert not common.too_padded(np.array([3, 4, 4, 3]))
    assert common.too_padded(np.array([1] * 99 + [1000]))  # ELL would pad 10x


def test_table_without_rows():
    assert common.table([], ["a", "bb"]).splitlines()[0] == "| a | bb |"


@needs_models
def test_cache_and_prebuild_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXMC_BENCH_CACHE", str(tmp_path))
    common.prebuild(["tandem31"], workers=1)
    assert (tmp_path / "tandem31.pkl").exists()
    assert not (tmp_path / "tandem31.pending").exists()
    model, em, tb = common.build("tandem31")
    assert model is None and em.num_states == 2016 and tb > 0  # from the pickle


@needs_models
def test_mdp_rows_match_scipy(monkeypatch):
    import solve_gpu
    import spmv

    monkeypatch.delenv("JAXMC_BENCH_CACHE", raising=False)
    _, em, _ = common.build("coin2")
    assert len(em.row_ptr) - 1 > em.num_states  # an MDP: more choices than states
    monkeypatch.setattr(spmv, "ONLY", {"csr/f64", "ell/f64"})
    monkeypatch.setattr(spmv, "NO_BCSR", True)
    rows = spmv.bench_model("coin2", 1e9, False, k=4, em=em)
    assert {r["layout"] for r in rows} >= {"csr", "ell"}
    for r in rows:
        if r["impl"] == "reference":
            assert r["err"] < 1e-12  # two Bellman-form steps against scipy

    monkeypatch.setattr(solve_gpu, "ONLY", {"csr/f64"})
    monkeypatch.setattr(solve_gpu, "METHODS", ("bellman",))
    srows, _ = solve_gpu.bench_model("coin2", 1e9, iters=20, em=em)
    assert [r["solver"] for r in srows] == ["bellman"]
    # the same 20 value-iteration steps on the host
    P = common.stochastic(em)
    x = np.random.default_rng(0).random(em.num_states)
    for _ in range(int(srows[0]["iterations"])):
        x_old, x = x, np.maximum.reduceat(P @ x, np.asarray(em.choice_ptr[:-1]))
    rel = np.abs(x - x_old) / np.abs(x)
    np.testing.assert_allclose(srows[0]["residual"], rel.max(), rtol=1e-9)
