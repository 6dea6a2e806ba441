"""The device explorer partitioned over several devices
(`jaxmc.explore.device.explore_sharded`, `jaxmc.build(..., devices=)`):
the same model, bit for bit, as the single-device explorer (and so as the
host builder) over 1, 2 and 4 devices, including from capacities so small
that each one overflows and grows.

The cases run in one subprocess with 4 simulated CPU devices
(`XLA_FLAGS=--xla_force_host_platform_device_count=4` must be set before
JAX starts), `tests/explore/sharded_checks.py`, which raises on any
difference; here its records are checked for the cases that must be there
and for what the exploration did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxmc.explore import build
from jaxmc.lang import parse_model
from jaxmc.semantics import check_program


ROOT = Path(__file__).resolve().parents[2]
CHECKS = Path(__file__).with_name("sharded_checks.py")


@pytest.fixture(scope="module")
def records() -> list[dict]:
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    )
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, str(CHECKS)], capture_output=True, text=True, env=env,
        timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    return [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]


def _cases(records, name):
    return {r["devices"]: r for r in records if r["name"] == name}


def test_same_model_over_1_2_4_devices(records):
    assert set(_cases(records, "features-mdp")) == {1, 2, 4}
    assert set(_cases(records, "features-dtmc")) == {4}
    assert set(_cases(records, "features-ctmc")) == {4}
    for r in records:
        if "states" in r:  # every state but the initial ones found once
            assert r["new"] == r["states"] - r["init"], r
    four = _cases(records, "features-dtmc")[4]
    assert four["states"] == 400 and four["levels"] == 6
    # every device sends successors to the others (the hash spreads them)
    assert all(x > 0 for x in four["sent"]), four
    assert _cases(records, "features-mdp")[1]["sent"] == [0]


def test_capacities_overflow_and_grow(records):
    (r,) = _cases(records, "growth-mdp").values()
    assert r["rounds"] > 1, r
    start = dict(batch=2, choices=2, entries=4, states=8, contribs=16,
                 all_choices=8, xchg=2, levels=2)  # fmt: skip
    for (k, v), got in zip(start.items(), r["caps"]):
        assert got > v, (k, r)


def test_shared_models(records):
    shared = [r for r in records if r["name"].startswith("prism-examples")]
    if all(r.get("skipped") for r in shared):
        pytest.skip("the shared models are not available")
    for r in shared:
        assert r.get("skipped") or r["devices"] == 4, r


def test_public_api(records):
    assert sorted(r["devices"] for r in records if r["name"] == "api") == [2, 4]


def test_devices_not_for_the_host_builder():
    checked = check_program(parse_model("dtmc module M x : [0..1]; endmodule"))
    with pytest.raises(ValueError, match="devices"):
        build(checked, explorer="host", devices=2)


@pytest.mark.gpu
def test_partitioned_explorer_on_the_gpu():
    """On a GPU the shard's hash table is the Pallas kernel inside
    `shard_map`: the model over all the GPUs there are (one is enough)
    equals the single-device explorer's."""
    import jax

    if jax.default_backend() != "gpu":
        pytest.skip("needs a GPU")
    sys.path.insert(0, str(Path(__file__).parent))
    from test_device_explorer import FEATURES, _checked, assert_same_model

    for kind in ("dtmc", "ctmc", "mdp"):
        checked = _checked(FEATURES.format(kind=kind))
        ref = build(checked, explorer="device")
        got = build(checked, explorer="device", devices=len(jax.devices()))
        assert_same_model(got, ref)
