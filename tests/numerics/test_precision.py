"""`jaxmc.check(precision="fp32")` (issue #5): float32 matrix and iterate in
the iterative solves, values within ~1e-5 of fp64, epsilon the fp32 cannot
reach refused, and fp64 (the default) unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import jaxmc
from jaxmc.cli import main
from jaxmc.numerics import fixed_point, sound, steady, steady_longrun


MODELS = Path(__file__).resolve().parents[2].parent / "shared" / "models"
EXAMPLES = MODELS / "prism-examples"

pytestmark = pytest.mark.skipif(not EXAMPLES.is_dir(), reason="PRISM examples absent")

#: (model, constants, property): DTMC reachability and reward, CTMC
#: steady state and long-run reward, MDP Pmax.
CASES = [
    ("dtmcs/brp/brp.pm", "N=16,MAX=2", "P=? [ true U s=5 ]"),
    ("simple/dice/dice.pm", None, "R=? [ F s=7 ]"),
    ("ctmcs/tandem/tandem.sm", "c=5", "S=? [ sc=c ]"),
    ("ctmcs/tandem/tandem.sm", "c=5", "R=? [ S ]"),
    ("ctmcs/cluster/cluster.sm", "N=4", 'S=? [ "premium" ]'),
    ("mdps/consensus/coin2.nm", "K=2", 'Pmax=? [ F "finished"&!"agree" ]'),
]


def _model(path, constants):
    return jaxmc.load_model(EXAMPLES / path, constants)


@pytest.mark.parametrize("path,constants,prop", CASES)
def test_fp32_agrees_with_fp64(path, constants, prop):
    m = _model(path, constants)
    r64 = jaxmc.check(m, prop)
    r32 = jaxmc.check(m, prop, precision="fp32")
    assert r64.precision == "fp64" and r32.precision == "fp32"
    assert r32.status == "converged"
    assert isinstance(r32.value, float)
    assert r32.values.dtype == np.float64
    assert r32.value == pytest.approx(r64.value, rel=2e-5)
    np.testing.assert_allclose(r32.values, r64.values, rtol=2e-5, atol=1e-7)


@pytest.fixture
def spy(monkeypatch):
    """The dtypes (matrix values, iterate) the solvers were called with."""
    seen = []

    def wrap(mod, name, matrix_of):
        real = getattr(mod, name)

        def spied(A, *args, **kw):
            at = {
                "jacobi": 2,
                "sound_value_iteration": 2,
                "relative_value_iteration": 6,
            }
            x0 = args[at.get(name, 1)]
            seen.append((name, matrix_of(A).dtype, x0.dtype))
            return real(A, *args, **kw)

        monkeypatch.setattr(mod, name, spied)

    wrap(fixed_point, "jacobi", lambda A: A.data)
    wrap(fixed_point, "value_iteration", lambda M: M.matrix.data)
    wrap(fixed_point, "interval_iteration", lambda M: M.matrix.data)
    wrap(steady, "jacobi", lambda A: A.data)
    wrap(sound, "sound_value_iteration", lambda A: A.data)
    wrap(steady_longrun, "relative_value_iteration", lambda A: A.data)
    return seen


@pytest.mark.parametrize("case", [0, 2, 5])
def test_fp32_runs_in_float32(spy, case):
    path, constants, prop = CASES[case]
    m = _model(path, constants)
    jaxmc.check(m, prop, precision="fp32")
    assert spy and all(a == np.float32 and x == np.float32 for _, a, x in spy), spy
    spy.clear()
    jaxmc.check(m, prop)
    assert all(a == np.float64 and x == np.float64 for _, a, x in spy), spy


def test_fp64_default_unchanged():
    m = _model("dtmcs/brp/brp.pm", "N=16,MAX=2")
    prop = "P=? [ true U s=5 ]"
    default = jaxmc.check(m, prop)
    explicit = jaxmc.check(m, prop, precision="fp64")
    assert explicit.value == default.value  # bit-identical
    np.testing.assert_array_equal(explicit.values, default.values)
    assert explicit.iterations == default.iterations


def test_fp32_epsilon_refused():
    m = _model("simple/dice/dice.pm", None)
    prop = "P=? [ F s=7 & d=6 ]"
    with pytest.raises(jaxmc.JaxmcError, match="fp32") as e:
        jaxmc.check(m, prop, precision="fp32", epsilon=1e-8)
    assert e.value.hint and "epsilon" in e.value.hint
    assert jaxmc.check(m, prop, precision="fp32", epsilon=1e-6).value == pytest.approx(
        1 / 6
    )
    assert jaxmc.check(m, prop, precision="fp64", epsilon=1e-10).value == pytest.approx(
        1 / 6
    )
    with pytest.raises(ValueError, match="precision"):
        jaxmc.check(m, prop, precision="fp16")


def test_fp32_bicgstab_refused():
    # BiCGStab in float32 stops "converged" at a wrong (negative) value here.
    m = _model("dtmcs/brp/brp.pm", "N=16,MAX=2")
    with pytest.raises(jaxmc.UnsupportedError, match="BiCGStab"):
        jaxmc.check(m, "P=? [ true U s=5 ]", precision="fp32", method="bicgstab")


@pytest.mark.parametrize("layout", ["sell", "warp", "compact"])
def test_fp32_other_layouts(layout):
    m = _model("dtmcs/brp/brp.pm", "N=16,MAX=2")
    prop = "P=? [ true U s=5 ]"
    ref = jaxmc.check(m, prop).value
    r = jaxmc.check(m, prop, precision="fp32", layout=layout, method="power")
    assert r.layout == layout and r.precision == "fp32"
    assert r.value == pytest.approx(ref, rel=2e-5)


def test_fp32_nonconvergence_reported():
    m = _model("dtmcs/brp/brp.pm", "N=16,MAX=2")
    prop = "P=? [ true U s=5 ]"
    # PRISM's criterion: the fp32 iteration's running out is the answer
    r = jaxmc.check(m, prop, precision="fp32", max_iters=4, throw=False,
                    criterion="change")  # fmt: skip
    assert r.status == "max_iters" and r.precision == "fp32"
    with pytest.raises(jaxmc.ConvergenceError):
        jaxmc.check(m, prop, precision="fp32", max_iters=4, criterion="change")
    # the sound default: the fp32 run out of iterations is recorded and a
    # certified sparse direct solve (in fp64, and said so) takes over
    d = jaxmc.check(m, prop, precision="fp32", max_iters=4)
    assert d.status == "converged" and d.method == "direct"
    assert d.precision == "fp64"
    assert [a.status.name for a in d.attempts] == ["MAX_ITERS"]
    ref = jaxmc.check(m, prop)
    assert abs(d.value - ref.value) <= d.bound + ref.bound


def test_cli_fp32(capsys):
    dice = str(EXAMPLES / "simple/dice/dice.pm")
    props = str(EXAMPLES / "simple/dice/dice.pctl")
    code = main([dice, props, "--precision", "fp32", "--property", "2", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    entry = json.loads(out)["runs"][0]["properties"][0]
    assert entry["value"] == pytest.approx(1 / 6, rel=1e-5)
    assert entry["precision"] == "fp32"
    code = main([dice, props, "--precision", "fp32", "--property", "2"])
    assert code == 0 and "Result" in capsys.readouterr().out
    code = main(
        [dice, props, "--precision", "fp32", "-epsilon", "1e-9", "--property", "2"]
    )
    assert code == 1 and "fp32" in capsys.readouterr().err
