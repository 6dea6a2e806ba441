"""Schedulers of the regression and example MDPs: the DTMC a property's
optimal scheduler induces, checked again with the same property, has the
MDP's optimum within the certified bound (Pmax, Pmin, Rmax, Rmin)."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest

import jaxmc
from jaxmc.lang import ast


SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "models"
TESTS = SHARED / "prism-tests"
EXAMPLES = SHARED / "prism-examples" / "mdps"

#: (model, properties file, constants)
MODELS = [
    (TESTS / "functionality/verify/mdps/reach/mdp_simple.nm", None, None),
    (TESTS / "functionality/verify/mdps/rewards/mdp_rewards.nm", None, None),
    (
        TESTS / "functionality/verify/mdps/rewards/robot.nm",
        TESTS / "functionality/verify/mdps/rewards/robot.nm.reach.props",
        None,
    ),
    (TESTS / "functionality/verify/mdps/rewards/rewpoliter.nm", None, None),
    (TESTS / "bugfixes/mdp-rewards-gs-loops.nm", None, None),
    (TESTS / "bugfixes/rewpoliter2.nm", None, None),
    (TESTS / "pmc/lec12mdp.nm", None, "version=1"),
    (TESTS / "pmc/lec12mdp.nm", None, "version=2"),
    (TESTS / "bugfixes/advgenexplicit.nm", None, None),
    (TESTS / "bugfixes/advgenexplicit2.nm", None, None),
    (TESTS / "bugfixes/stratgenreach.nm", None, None),
    (EXAMPLES / "consensus/coin2.nm", EXAMPLES / "consensus/coin.pctl", "K=2,k=10"),
    (EXAMPLES / "csma/csma2_2.nm", EXAMPLES / "csma/csma.pctl", "k=1"),
]


def _kind(expr) -> str | None:
    """`Pmax`, `Pmin`, `Rmax`, `Rmin` for a `=?` query of an MDP, else None."""
    if isinstance(expr, ast.Filter):
        return None
    if isinstance(expr, (ast.ProbOp, ast.RewardOp)) and expr.threshold is None:
        if expr.opt is not None:
            return ("P" if isinstance(expr, ast.ProbOp) else "R") + expr.opt.value
    return None


#: Larger ones (tens of seconds on a 2-core CPU).
SLOW = [
    (
        EXAMPLES / "zeroconf/zeroconf.nm",
        EXAMPLES / "zeroconf/zeroconf.pctl",
        "N=1000,K=2,err=0,reset=false",
    ),
]


def _cases():
    for group, marks in ((MODELS, ()), (SLOW, (pytest.mark.slow,))):
        for model, props, consts in group:
            props = props or model.with_name(model.name + ".props")
            name = f"{model.name}-{consts}"
            yield pytest.param(model, props, consts, id=name, marks=marks)


SEEN: collections.Counter = collections.Counter()


@pytest.mark.parametrize("model_path, props_path, consts", list(_cases()))
def test_induced_dtmc_has_the_optimum(model_path, props_path, consts):
    if not model_path.exists() or not props_path.exists():
        pytest.skip("shared models not available")
    model = jaxmc.load_model(str(model_path), consts)
    props = jaxmc.load_properties(str(props_path), model, errors="keep")
    checked = 0
    for i, prop in enumerate(props):
        if prop.error is not None or _kind(prop.expr) is None:
            continue
        try:
            result = jaxmc.check(model, i, properties=props, scheduler=True)
        except jaxmc.UnsupportedError:
            continue  # step-bounded, LTL, C, I, ...: no memoryless scheduler
        sched = result.scheduler
        assert result.bound is not None  # certified by default
        induced = jaxmc.induced_model(model, result)
        again = jaxmc.load_properties(str(props_path), induced, errors="keep")
        again_result = jaxmc.check(induced, i, properties=again)
        value, expected = again_result.value, result.value
        # both values are certified: within the sum of their bounds
        bound = (result.bound or 0.0) + (again_result.bound or 0.0)
        init = np.asarray(result.initial_states)
        exact = sched.values[init]
        if np.isinf(expected):
            assert value == expected and np.all(exact == expected), prop.text
        else:
            slack = bound + 1e-9 * max(1.0, abs(expected))
            assert abs(value - expected) <= slack, (prop.text, value, expected)
            # the scheduler's exact values (a direct solve of the induced DTMC)
            assert np.all(np.abs(exact - expected) <= slack), (prop.text, exact)
        checked += 1
        SEEN[_kind(prop.expr)] += 1
    assert checked, "no property with a memoryless scheduler in " + props_path.name


def test_every_kind_was_checked():
    """(after the cases above) Pmax, Pmin, Rmax and Rmin each came up."""
    if not SHARED.exists():
        pytest.skip("shared models not available")
    if not SEEN:
        pytest.skip("run with the model cases")
    assert {"Pmax", "Pmin", "Rmax", "Rmin"} <= set(SEEN), SEEN
