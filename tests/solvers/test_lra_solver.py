"""`solvers.lra_value_iteration`: the brackets it returns hold after any
number of sweeps, tighten to the tolerance, and several components iterate
together (each against its own closed-form gain)."""

from __future__ import annotations

import numpy as np
import pytest

from jaxmc.solvers import Status, gain_tolerance_met, lra_value_iteration


def two_components():
    """Component 0: states 0, 1; at 0 a choice of staying (reward 1) or
    moving to 1 (reward 0); at 1 back to 0 (reward 4): max gain 2 (the
    2-cycle), min gain 1 (stay). Component 1: state 2 alone, two loops
    with rewards 3 and 5: max 5, min 3."""
    soc = np.array([0, 0, 1, 2, 2])
    ech = np.array([0, 1, 2, 3, 4])
    etg = np.array([0, 1, 0, 2, 2])
    epr = np.ones(5)
    reward = np.array([1.0, 0.0, 4.0, 3.0, 5.0])
    comp = np.array([0, 0, 1])
    return soc, ech, etg, epr, reward, comp


@pytest.mark.parametrize("opt, want", [("max", [2.0, 5.0]), ("min", [1.0, 3.0])])
def test_gains_of_two_components(opt, want):
    lo, hi, it, status = lra_value_iteration(
        *two_components(), 2, opt, epsilon=1e-9, relative=True, max_iters=10_000
    )
    assert status == Status.CONVERGED
    assert np.all(lo <= want) and np.all(np.asarray(want) <= hi)
    np.testing.assert_allclose(0.5 * (lo + hi), want, rtol=1e-9)
    assert gain_tolerance_met(lo, hi, 1e-9, True, 5.0).all()


@pytest.mark.parametrize("sweeps", [1, 2, 3, 7])
def test_brackets_hold_after_any_number_of_sweeps(sweeps):
    lo, hi, it, status = lra_value_iteration(
        *two_components(), 2, "max", epsilon=1e-12, relative=False,
        max_iters=sweeps,
    )  # fmt: skip
    assert it <= sweeps
    assert np.all(lo <= [2.0, 5.0]) and np.all(np.array([2.0, 5.0]) <= hi)
    if status != Status.CONVERGED:
        assert status == Status.MAX_ITERS
