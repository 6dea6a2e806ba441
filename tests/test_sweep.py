"""`jaxmc.sweep`: batches of parameter points sharing one structure."""

from pathlib import Path

import numpy as np
import pytest

import jaxmc
from jaxmc.errors import ModelCheckingError


PARAM = Path(__file__).resolve().parents[1].parent / "shared" / "models" / "prism-tests" / "functionality" / "verify" / "param"

pytestmark = pytest.mark.skipif(not PARAM.exists(), reason="shared models not available")


def test_sweep_shapes_chunks_and_progress():
    model = jaxmc.load_model(PARAM / "dtmcs/dtmc_steady_2.prism", parameters=("p",))
    ps = np.linspace(0.05, 0.95, 11)
    seen = []
    out = jaxmc.sweep(model, "S=?[ s=1 ]", params={"p": ps}, chunk=4, progress=lambda d, t, e: seen.append((d, t)))
    np.testing.assert_allclose(out, ps / 2, rtol=1e-9)
    assert seen == [(4, 11), (8, 11), (11, 11)]
    grid = jaxmc.sweep(model, "S=?[ s=2 ]", params={"p": ps.reshape(11, 1)})
    assert grid.shape == (11, 1)
    np.testing.assert_allclose(grid[:, 0], (1 - ps) / 2, rtol=1e-9)


def test_sweep_ctmc_time_bound_grows_terms():
    """Uniformisation's static number of terms is enlarged for the largest
    rate x time of the batch (a point far above the build point)."""
    text = (PARAM / "ctmcs/ctmc_rewards.prism").read_text().replace(
        "const double x;", "const double x;\nconst double T;"
    )
    model = jaxmc.load_model_string(text, parameters=("x", "T"))
    T = np.array([0.1, 1.0, 5.0, 40.0])
    x = 5.0
    out = jaxmc.sweep(model, "P=? [ F<=T s=2 ]", params={"x": x, "T": T})
    cdf = 1 - (7 * np.exp(-x * T) - x * np.exp(-7 * T)) / (7 - x)
    np.testing.assert_allclose(out, cdf, rtol=1e-9, atol=1e-12)


def test_sweep_reports_invalid_points():
    model = jaxmc.load_model(PARAM / "dtmcs/dtmc_pctl.prism", parameters=("p",))
    with pytest.raises(ModelCheckingError, match="did not converge"):
        # p = 2 is not a probability: the linear system has no valid solution
        jaxmc.sweep(model, 'R{"time"}=? [ F s>1 ]', params={"p": np.array([0.3, 2.0])}, max_iters=2000)
