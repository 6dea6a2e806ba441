"""Several devices (`devices=`, `--devices`): the same values as one device.

The checks run in one subprocess with 4 simulated CPU devices
(`XLA_FLAGS=--xla_force_host_platform_device_count=4` must be set before
JAX starts), `tests/api/sharded_checks.py`, which compares each case on one
device (`layout="csr"`: the same code path without the partition) with
`devices=4`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxmc
from jaxmc.options import OptionsError


ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / ".." / "shared" / "models" / "prism-examples"
CHECKS = Path(__file__).with_name("sharded_checks.py")


def _run(devices: int, *extra: str) -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={devices}"
    )
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, str(CHECKS), str(devices), str(MODELS), *extra],
        capture_output=True, text=True, env=env, timeout=1200,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    lines = out.stdout.splitlines()
    recs = [json.loads(line) for line in lines if line.startswith("{")]
    return {r["name"]: r for r in recs}


@pytest.fixture(scope="module")
def four():
    return _run(4)


def _check_cases(recs: dict):
    for name, r in recs.items():
        if name == "cli":
            assert r["one"] == r["several"] == r["explored"] and r["one"][0] == 0, r
            # `--explorer device --devices N` builds over the N devices
            assert len(r["sharded_builds"]) == 1, r
            assert len(r["one"][1]) >= 2, r
            continue
        if name.startswith("kernel"):
            assert r["rel"] == 0.0, r  # the local sums are CSR's, bit for bit
            continue
        if name.startswith("fused"):
            # the extended partition's steps: one device's, bit for bit; the
            # Pallas kernel's in whole trips of 16 steps, to the same solution
            ref, split, kernel = r["iters"]
            assert r["extended"] and r["rel"] == 0.0 and ref == split, r
            assert kernel % 16 == 0 and ref <= kernel < ref + 16, r
            assert r["err"] <= 1e-9 and r["kernel-err"] <= 1e-9, r
            continue
        one, several = r["iters"]
        if "bicgstab" in name:
            # The global dot products are reduced in another order: the
            # iterate differs within the solve's tolerance (brp: 1.3e-6
            # absolute at epsilon 1e-6, on values of 1e-5), not to 1e-12,
            # and the stopping test can hold an iteration earlier or later.
            assert abs(one - several) <= 2 and r["rel"] <= 1e-1, r
        elif r.get("krylov"):
            # the sound default's certified BiCGStab (reordered dot products;
            # its certificate may hold on one side only, sound value
            # iteration finishing the other): both within epsilon per state
            assert r["rel"] <= 2.5e-6, r
        else:
            assert one == several, r  # same method, same iteration count
            assert r["rel"] <= 1e-12, r


def test_kernel_halo_modes(four):
    assert four["kernel-banded"]["mode"] == "neighbour"
    halo = four["kernel-banded"]["halo"]
    # 3 device boundaries, 5 sub-diagonal entries one way, 1 the other
    assert halo["needed"] == 3 * (5 + 1) * 8
    assert four["kernel-random"]["mode"] == "gather"
    _check_cases({k: v for k, v in four.items() if k.startswith("kernel")})


def test_fused_steps_on_extended_partitions(four):
    fused = {k: v for k, v in four.items() if k.startswith("fused")}
    assert len(fused) == 4, sorted(four)
    assert {r["mode"] for r in fused.values()} == {"neighbour", "gather"}
    _check_cases(fused)


def test_same_values_as_one_device(four):
    _check_cases(four)
    assert four["herman-R"]["layout"] == "sharded"
    assert four["kernel-banded-ell"]["mode"] == "neighbour"
    assert four["kernel-banded-warp"]["mode"] == "neighbour"
    assert four["kernel-random-warp"]["scipy-rel"] <= 1e-14


@pytest.mark.skipif(not MODELS.is_dir(), reason="shared models not available")
def test_methods_on_conformance_models(four):
    for name in (
        "brp-jacobi", "brp-sound", "tandem-S-jacobi", "tandem-transient",
        "coin-value_iteration-Pmax", "coin-interval_iteration-Pmin",
        "tandem-S-jacobi-ell", "coin-value_iteration-Pmax-ell",
        "tandem-S-jacobi-warp", "coin-value_iteration-Pmax-warp",
    ):  # fmt: skip
        assert four[name]["layout"] == "sharded", four[name]
        # (nothing but the sound default's certified Krylov solve handing
        # over to sound value iteration)
        notes = [n for n in four[name]["attempts"] if "residual bound" not in n]
        assert notes == [], four[name]
    # Gauss-Seidel runs on the host: never silently
    gs = four["brp-gauss_seidel"]
    assert gs["layout"] == "host"
    assert any("4 devices" in note for note in gs["attempts"]), gs


@pytest.mark.slow
@pytest.mark.skipif(not MODELS.is_dir(), reason="shared models not available")
def test_every_method_on_3_devices():
    recs = _run(3, "full")
    _check_cases(recs)
    assert recs["tandem-S-power"]["layout"] == "sharded"


def test_devices_option_checked():
    assert jaxmc.SolveOptions(devices=1).devices is None
    assert jaxmc.SolveOptions(devices=4).devices == 4
    for bad in (0, True, "4", 2.5):
        with pytest.raises(OptionsError):
            jaxmc.SolveOptions(devices=bad)


def test_devices_errors_at_api():
    model = jaxmc.load_model(ROOT / "examples" / "models" / "die.pm")
    prop = "P=? [ F s=7 & d=6 ]"
    import jax

    with pytest.raises(OptionsError, match="devices asked for"):
        jaxmc.check(model, prop, devices=len(jax.devices()) + 1)
    if len(jax.devices()) > 1:  # pragma: no cover - CI has one CPU device
        with pytest.raises(OptionsError, match="single-device"):
            jaxmc.check(model, prop, devices=2, layout="compact")


def test_cli_devices_flag(capsys):
    from jaxmc.cli import main

    die = str(ROOT / "examples" / "models" / "die.pm")
    assert main([die, "--prop", "P=? [ F s=7 & d=6 ]", "--devices", "64"]) == 1
    assert "devices asked for" in capsys.readouterr().err


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("localhost", 0))
        return int(s.getsockname()[1])


def _processes(n: int, *args: str) -> list[str]:
    """The outputs of `n` processes of `distributed_worker.py` joined by
    `jax.distributed` (one CPU device each), each asserted to succeed."""
    worker = Path(__file__).with_name("distributed_worker.py")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("XLA_FLAGS", None)
    port = str(_free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, str(worker), str(i), port, str(n), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )  # fmt: skip
        for i in range(n)
    ]
    try:
        outs = [p.communicate(timeout=600)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-3000:]
    return outs


def test_two_processes_through_jax_distributed():
    """A Jacobi solve split over 2 processes (one CPU device each) joined by
    `jax.distributed.initialize` with gloo collectives."""
    outs = _processes(2)
    for out in outs:
        line = [s for s in out.splitlines() if s.startswith("devices=")][-1]
        fields = dict(kv.split("=") for kv in line.split())
        assert fields["devices"] == "2" and fields["processes"] == "2", line
        assert fields["mode"] == "neighbour", line
        assert float(fields["error"]) < 1e-11, line


@pytest.mark.skipif(not MODELS.is_dir(), reason="shared models not available")
def test_check_across_two_processes():
    """`jaxmc.check(..., devices=<both processes' devices>)` in 2 processes
    joined by `jax.distributed`: each process gets the whole result (split
    arrays are gathered where numerics reads them), equal to one process's
    check on one device in the same local layout (CSR)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from distributed_worker import CHECKS

    outs = _processes(2, "check", str(MODELS))
    recs = [
        [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        for out in outs
    ]
    assert len(recs[0]) == len(recs[1]) == len(CHECKS), outs[0][-3000:]
    for (path, consts, prop), a, b in zip(CHECKS, *recs):
        assert a == b, (a["case"], b["case"])  # every process: the same
        one = jaxmc.check(jaxmc.load_model(MODELS / path, consts), prop,
                          layout="csr")  # fmt: skip
        assert a["layout"] == "sharded", a["case"]
        ref = np.asarray(one.values, np.float64)
        got = np.asarray(a["values"])
        scale = np.maximum(np.abs(ref), 1e-300)
        rel = float(np.max(np.abs(got - ref) / scale, initial=0.0))
        # fixed-point methods: the same iterates (1e-12); a steady state's
        # normalisation and Krylov dot products (also the sound default's)
        # are reduced in another order: within the solve's epsilon
        assert rel <= 2e-6, (a["case"], rel)


@pytest.mark.skipif(not MODELS.is_dir(), reason="shared models not available")
def test_cli_across_two_processes():
    """`jaxmc ... --coordinator --num-processes 2 --process-id I` in two
    processes: process 0 prints the result of one process, process 1
    nothing; and the three switches go together."""
    from jaxmc.cli import main

    model = str(MODELS / "ctmcs" / "tandem" / "tandem.sm")
    argv = [model, "--const", "c=15", "--prop", 'R{"customers"}=? [ I=1.5 ]']
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("XLA_FLAGS", None)
    port = _free_port()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jaxmc",
                *argv,
                "--coordinator",
                f"localhost:{port}",
                "--num-processes",
                "2",
                "--process-id",
                str(i),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )  # fmt: skip
        for i in range(2)
    ]
    try:
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], outs
    result = [s for s in outs[0][0].splitlines() if s.startswith("Result:")]
    # (gloo, the CPU collectives, may print a line of its own on process 0)
    assert len(result) == 1 and outs[1][0] == "", outs
    one = jaxmc.check(jaxmc.load_model(model, "c=15"), argv[-1])
    assert result[0].split()[1] == repr(float(one.value)), (result, one.value)
    assert main(argv + ["--coordinator", f"localhost:{port}"]) == 1


def test_differentiable_path_refuses_devices():
    from jaxmc.errors import UnsupportedError

    queue = jaxmc.load_model(ROOT / "examples" / "models" / "queue.sm")
    with pytest.raises(UnsupportedError, match="one device"):
        jaxmc.solve(queue, 'S=? [ "empty" ]', params={"lambda": 2.0, "mu": 3.0},
                    devices=2)  # fmt: skip


def _gpu_count() -> int:
    import shutil

    if shutil.which("nvidia-smi") is None:
        return 0
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines())


@pytest.mark.gpu
def test_same_values_on_two_gpus(monkeypatch):
    """The cases of `sharded_checks.py` split over 2 real GPUs (NCCL), against
    one GPU. On a GPU the sums of `segment_sum` (the CSR layout) are
    scatter-adds in no fixed order, so the comparison has tolerances where
    the CPU test demands the same bits: a solve may stop an iteration
    earlier or later, and then both values are within its epsilon."""
    if _gpu_count() < 2:
        pytest.skip("fewer than 2 GPUs")
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    recs = _run(2)
    assert recs, "no cases ran"
    bad = []
    for name, r in recs.items():
        if name == "cli":
            ok = r["one"] == r["several"] and r["one"][0] == 0
        elif name.startswith("kernel"):
            ok = r["rel"] <= 1e-13
        elif name.startswith("fused"):  # (the Pallas kernel on both sides)
            ok = r["extended"] and max(r["err"], r["kernel-err"]) <= 1e-9
        else:
            one, several = r["iters"]
            if "bicgstab" in name:  # (as on the CPU: dot products reordered)
                ok = abs(one - several) <= 2 and r["rel"] <= 1e-1
            elif r.get("krylov"):  # (the sound default's certified Krylov)
                ok = r["rel"] <= 2.5e-6
            elif one == several:  # same iterations: rounding only
                ok = r["rel"] <= (1e-5 if "fp32" in name else 1e-9)
            else:
                # stopped an iteration apart (the sums' order differs): each
                # value is within epsilon (1e-6 relative) of the answer
                ok = abs(one - several) <= 2 and r["rel"] <= 2e-6
            ok = ok and r["layout"] in ("sharded", "host", None)
        if not ok:
            bad.append(r)
    assert not bad, bad
