"""Every script in examples/ runs and prints the values we know: closed forms
(the die's 1/6 and 11/3, the M/M/1/K steady state, the robot MDP's 1, 0.8,
20/9, 0.98) and Storm's values (exact engine for Herman, sound engine for the
queue's transient and cumulative values)."""

import runpy
import subprocess
import sys
from pathlib import Path

import pytest


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: Values printed by the scripts, with where they come from.
KNOWN = {
    "die": {"six": 1 / 6, "flips": 11 / 3, "named_flips": 11 / 3, "sum": 1.0},
    "herman": {
        "worst": 16 / 5,  # Storm (exact): 3.2
        "from_3": 12 / 5,  # Storm (exact, via a label): 2.4
        "within3": 43 / 64,  # Storm (exact): 0.671875
        "min": 0.0,  # stable initial configurations
        "max": 16 / 5,
    },
    "ctmc_queue": {
        "full_by_T": 0.009153472008562506,  # Storm (sound)
        "full_20": 0.09687687300746835,  # Storm (sound)
        "served": 8.364514022154518,  # Storm (sound)
        # closed forms: rho = 2/3, K = 10
        "idle": (1 / 3) / (1 - (2 / 3) ** 11),
        "mean": sum(
            q * (2 / 3) ** q * (1 / 3) / (1 - (2 / 3) ** 11) for q in range(11)
        ),
    },
    "mdp_scheduler": {"pmax": 1.0, "pmin": 0.8, "rmin": 20 / 9, "pmax3": 0.98},
}


def _scripts():
    return sorted(p.stem for p in EXAMPLES.glob("*.py"))


def test_every_example_has_known_values():
    assert set(_scripts()) == set(KNOWN)


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_example(name, capsys):
    main = runpy.run_path(str(EXAMPLES / f"{name}.py"))["main"]
    values = main()
    printed = capsys.readouterr().out
    for key, expected in KNOWN[name].items():
        # 1e-5 relative: the scripts use PRISM's default 1e-6 relative
        # convergence criterion, which bounds the change, not the error.
        assert values[key] == pytest.approx(expected, rel=1e-5, abs=1e-12), key
        # printed, not just returned (with the script's number of decimals)
        shown = {f"{values[key]:.{d}f}" for d in range(4, 11)}
        assert any(t in printed for t in shown), key
    if name == "herman":
        assert values["stabilises"] is True


def test_example_runs_as_a_script():
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "die.py")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "P(six) = 0.16666" in proc.stdout
    assert "E[flips] = 3.66666" in proc.stdout


# ---------------------------------------------------------------- gradients
# (issue #6) examples/sensitivity.py and examples/sweep.py: closed forms of
# the M/M/1/10 queue and finite differences.

KNOWN["sensitivity"] = {
    "idle": (1 / 3) / (1 - (2 / 3) ** 11),
    "full_by_T": 0.009153472008562506,
}
KNOWN["sweep"] = {"idle_err": 0.0}


def test_sensitivity_example(capsys):
    values = runpy.run_path(str(EXAMPLES / "sensitivity.py"))["main"]()
    printed = capsys.readouterr().out
    assert values["idle"] == pytest.approx(KNOWN["sensitivity"]["idle"], rel=1e-9)
    assert values["full_by_T"] == pytest.approx(
        KNOWN["sensitivity"]["full_by_T"], rel=1e-6
    )
    assert values["idle_dlambda"] == pytest.approx(
        values["idle_exact_dlambda"], rel=1e-7
    )
    assert values["idle_dmu"] == pytest.approx(values["idle_exact_dmu"], rel=1e-7)
    for k in ("lambda", "mu", "T"):
        assert values[f"full_by_T_d{k}"] == pytest.approx(values[f"fd_d{k}"], rel=1e-5)
    assert "d/dlambda" in printed
    # Herman's ring at p = 1/2 takes 12/5 steps from three adjacent tokens
    # (herman5.pm.props); at p = 0.3 the gradients match finite differences
    for k in ("steps", "within3"):
        assert values[f"herman_{k}_dp"] == pytest.approx(
            values[f"herman_{k}_fd"], rel=1e-5
        )
    assert values["herman_steps"] > 12 / 5 and values["herman_steps_dp"] < 0


def test_sweep_example(tmp_path):
    values = runpy.run_path(str(EXAMPLES / "sweep.py"))["main"](str(tmp_path / "s.png"))
    assert values["idle_err"] < 1e-9
    assert values["idle_at_2"] == pytest.approx((1 / 3) / (1 - (2 / 3) ** 11), rel=1e-3)
    assert 0 <= values["full_min"] < values["full_max"] <= 1
    if "png" in values:
        assert (tmp_path / "s.png").stat().st_size > 0
