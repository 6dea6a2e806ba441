"""`benchmarks/accuracy.py`'s bookkeeping on the CPU: the instance lists,
the verdicts against the sound value, the bounds read off a `CheckResult`,
the reference cache's keys, and the Storm copy of a model Storm refuses."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import accuracy  # noqa: E402


EXAMPLES = ROOT.parent / "shared" / "models" / "prism-examples"
needs_models = pytest.mark.skipif(not EXAMPLES.exists(), reason="no ../shared/models")


def _row(value, sound, default=None, **jaxmc):
    return {
        "jaxmc": {"value": value, **jaxmc},
        "sound": {"value": sound},
        "default": {"value": default} if default is not None else {"error": "x"},
    }


def test_every_model_has_every_size_and_the_issues_gpu_instances():
    names = [m[0] for m in accuracy.MODELS]
    assert len(names) == len(set(names)) == 16
    for size in ("small", "cpu", "gpu"):
        assert {c.name for c in accuracy.cases(size)} == set(names)
    gpu = {(c.name, c.consts) for c in accuracy.cases("gpu")}
    assert ("tandem", "c=2047") in gpu and ("brp", "N=32768,MAX=5") in gpu
    assert ("crowds", "TotalRuns=6,CrowdSize=20") in gpu and ("nand", "N=60,K=4") in gpu
    keys = [c.key for c in accuracy.cases("cpu")]
    assert len(keys) == len(set(keys))


def test_only_selects_and_orders_and_refuses_unknown_names():
    got = [c.name for c in accuracy.cases("small", ["herman", "brp"])]
    assert got == ["herman", "brp"]
    with pytest.raises(SystemExit, match="unknown model names"):
        accuracy.cases("small", ["nope"])


def test_judge_relative_errors_and_bound_verdicts():
    row = _row(0.5393556, 0.5396769, default=0.5396750)
    accuracy.judge(row)
    assert math.isclose(row["rel_err_jaxmc"], (0.5396769 - 0.5393556) / 0.5396769)
    assert row["rel_err_storm_default"] < 1e-5
    assert row["bound_ok"] is None  # no bound reported

    row = _row(1.0, 1.0 + 3e-7, bound=1e-7)
    accuracy.judge(row)  # 3e-7 apart: within bound + the sound value's 1e-6
    assert row["bound_ok"] is True
    row = _row(1.0, 1.0 + 3e-6, bound=1e-7)
    accuracy.judge(row)
    assert row["bound_ok"] is False

    # per-state bounds at the initial state stand in for a missing `bound`
    row = _row(2.0, 2.5, lower=1.0, upper=2.2)
    accuracy.judge(row)
    assert row["bound_used"] == 1.0 and row["bound_ok"] is True
    row = _row(0.0, 0.0, default=1e-9)
    accuracy.judge(row)  # a zero reference: exact agreement is 0, else huge
    assert row["rel_err_jaxmc"] == 0.0 and row["rel_err_storm_default"] > 1.0


def test_initial_bounds_single_state_and_max_filter():
    import numpy as np

    class R:
        property_text = 'filter(max, R=? [ F "stable" ], "init")'
        initial_states = np.array([0, 2])
        lower = np.array([1.0, 9.0, 3.0])
        upper = np.array([1.5, 9.5, 3.25])

    assert accuracy._initial_bounds(R()) == (3.0, 3.25)
    R.initial_states = np.array([1])
    assert accuracy._initial_bounds(R()) == (9.0, 9.5)
    R.lower = None
    assert accuracy._initial_bounds(R()) == (None, None)


@needs_models
def test_storm_copy_puts_the_model_type_first_and_constants_in_order():
    text = accuracy.storm_path("mdps/csma/csma2_6.nm").read_text()
    assert text.lstrip().startswith("mdp")
    assert text.index("const int sigma") < text.index("const int slot")
    text = accuracy.storm_path("mdps/firewire/impl/deadline.nm").read_text()
    assert text.lstrip().startswith("mdp")  # PRISM's default type
    assert accuracy.storm_path("no/such/model.pm") is None


def test_reference_cache_keys_are_model_constants_property():
    ref = accuracy.load_reference(accuracy.REFERENCE)
    keys = {c.key for s in ("small", "cpu", "gpu") for c in accuracy.cases(s)}
    assert ref, "the cache is committed beside the script"
    for key, entry in ref.items():
        assert key in keys, key  # no stale keys
        assert "value" in entry or "error" in entry
        assert entry["date"] and entry["host_cpu"]
