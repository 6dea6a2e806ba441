"""`jaxmc.SolveOptions` (issue 19): one options object validated once at
the API, the same results as the keywords it replaces, each path's
defaults; one device model per (model, options); fallbacks recorded in the
result and printed by the command line; a failed solve raised once, at the
API, or kept as data with `throw=False`."""

import dataclasses
import json
import traceback
from pathlib import Path

import jax
import numpy as np
import pytest

import jaxmc
from jaxmc.cli import main
from jaxmc.numerics import DeviceModel
from jaxmc.options import DEFAULTS, OptionsError, SolveOptions
from jaxmc.solvers import Status


DIE = str(Path(__file__).resolve().parents[2] / "examples/models/die.pm")
SIX = "P=? [ F s=7 & d=6 ]"

RUIN = """
dtmc
const double p;
const int N = 20;
module ruin
  x : [0..N] init 10;
  [] x>0 & x<N -> p:(x'=x+1) + (1-p):(x'=x-1);
  [] x=0 | x=N -> (x'=x);
endmodule
label "win" = x=N;
"""


def _ruin_exact(p, n=20, start=10):
    r = (1 - p) / p
    return (1 - r**start) / (1 - r**n)


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(method="newton"), "method"),
        (dict(layout="coo"), "layout"),
        (dict(precision="fp16"), "precision"),
        (dict(epsilon=0.0), "epsilon"),
        (dict(epsilon=-1e-6), "epsilon"),
        (dict(epsilon=float("nan")), "epsilon"),
        (dict(epsilon="small"), "epsilon"),
        (dict(max_iters=0), "max_iters"),
        (dict(max_iters=2.5), "max_iters"),
        (dict(omega=2.0), "omega"),
    ],
)
def test_bad_values_refused_with_a_hint(kw, match):
    with pytest.raises(OptionsError, match=match) as e:
        SolveOptions(**kw)
    assert isinstance(e.value, ValueError) and isinstance(e.value, jaxmc.JaxmcError)
    assert e.value.hint


def test_fp32_refuses_an_epsilon_it_cannot_reach():
    with pytest.raises(jaxmc.UnsupportedError, match="fp32"):
        SolveOptions(precision="fp32", epsilon=1e-8)
    assert SolveOptions(precision="fp32", epsilon=1e-6).epsilon == 1e-6


def test_bad_options_fail_at_the_api_before_the_build():
    for kw in (dict(layout="coo"), dict(epsilon=-1.0), dict(max_iters=0)):
        model = jaxmc.load_model(DIE)
        with pytest.raises(OptionsError):
            jaxmc.check(model, SIX, **kw)
        assert model._explicit is None  # nothing was built
    model = jaxmc.load_model_string(RUIN, parameters=("p",))
    with pytest.raises(OptionsError, match="epsilon"):
        jaxmc.solve(model, 'P=? [ F "win" ]', params={"p": 0.45}, epsilon=0.0)
    with pytest.raises(OptionsError, match="max_iters"):
        jaxmc.sweep(model, 'P=? [ F "win" ]', {"p": np.array([0.4])}, max_iters=0)
    with pytest.raises(TypeError, match="colour"):
        jaxmc.solve(model, 'P=? [ F "win" ]', params={"p": 0.45}, colour=1)


def test_each_path_has_its_defaults():
    o = SolveOptions()
    assert o.epsilon is None and o.max_iters is None
    assert o.resolved("check").epsilon == DEFAULTS["check"]["epsilon"] == 1e-6
    assert o.resolved("check").max_iters == 10_000
    assert o.resolved("params").epsilon == DEFAULTS["params"]["epsilon"] == 1e-12
    assert o.resolved("params").max_iters == 200_000
    # a value given is kept on either path
    assert SolveOptions(epsilon=1e-9).resolved("params").epsilon == 1e-9
    # the check path's default is PRISM's: the same solve as epsilon=1e-6
    model = jaxmc.load_model(DIE)
    a, b = jaxmc.check(model, SIX), jaxmc.check(model, SIX, epsilon=1e-6)
    assert (a.value, a.iterations) == (b.value, b.iterations)
    # the parametric path's: right to ~1e-12 where the check path is not
    ruin = jaxmc.load_model_string(RUIN, parameters=("p",))
    v = float(jaxmc.solve(ruin, 'P=? [ F "win" ]', params={"p": 0.45}))
    assert v == pytest.approx(_ruin_exact(0.45), abs=1e-10)


@pytest.mark.parametrize(
    "kw",
    [
        dict(method="power", epsilon=1e-10),
        dict(method="gauss_seidel", relative=False, epsilon=1e-9),
        dict(layout="ell", max_iters=500),
        dict(precision="fp32", method="jacobi"),
    ],
)
def test_options_object_and_keywords_agree(kw):
    model = jaxmc.load_model(DIE)
    by_kw = jaxmc.check(model, SIX, **kw)
    by_obj = jaxmc.check(model, SIX, options=SolveOptions(**kw))
    assert by_obj.value == by_kw.value
    assert (by_obj.iterations, by_obj.method, by_obj.layout, by_obj.precision) == (
        by_kw.iterations,
        by_kw.method,
        by_kw.layout,
        by_kw.precision,
    )
    assert float(jaxmc.solve(model, SIX, options=SolveOptions(**kw))) == by_kw.value


def test_keywords_override_the_options_object():
    model = jaxmc.load_model(DIE)
    base = SolveOptions(method="power", epsilon=1e-4)
    got = jaxmc.check(model, SIX, options=base, epsilon=1e-10)
    ref = jaxmc.check(model, SIX, method="power", epsilon=1e-10)
    assert (got.value, got.iterations) == (ref.value, ref.iterations)


def test_parametric_options_object_and_keywords_agree():
    model = jaxmc.load_model_string(RUIN, parameters=("p",))
    prop = 'P=? [ F "win" ]'

    def f(kw):
        return lambda p: jaxmc.solve(model, prop, params={"p": p}, **kw)

    kw = dict(epsilon=1e-10, omega=1.0)
    v_kw, g_kw = jax.value_and_grad(f(kw))(0.45)
    v_obj, g_obj = jax.value_and_grad(f(dict(options=SolveOptions(**kw))))(0.45)
    assert float(v_kw) == float(v_obj) and float(g_kw) == float(g_obj)
    pts = {"p": np.array([0.4, 0.45, 0.55])}
    s_kw = jaxmc.sweep(model, prop, pts, **kw)
    s_obj = jaxmc.sweep(model, prop, pts, options=SolveOptions(**kw))
    np.testing.assert_array_equal(s_kw, s_obj)
    exact = [_ruin_exact(p) for p in pts["p"]]
    np.testing.assert_allclose(s_obj, exact, atol=1e-8)


def test_params_path_refuses_a_layout():
    model = jaxmc.load_model_string(RUIN, parameters=("p",))
    with pytest.raises(jaxmc.UnsupportedError, match="layout"):
        jaxmc.solve(model, 'P=? [ F "win" ]', params={"p": 0.45}, layout="warp")


def test_one_device_model_per_model_and_options():
    explicit = jaxmc.build(jaxmc.load_model(DIE))
    dm = DeviceModel(explicit, "auto")
    assert dm.kind == ("csr" if jax.default_backend() == "cpu" else dm.kind)
    assert dm.sparse() is dm.sparse()  # built once
    np.testing.assert_array_equal(np.sort(dm.lex_rank()), np.arange(13))
    model = jaxmc.load_model(DIE)
    first = jaxmc.check(model, SIX, layout="ell")
    again = jaxmc.check(model, "P=? [ F s=7 & d=1 ]", layout="ell")
    assert first.timing["layout"] > 0.0 and again.timing["layout"] == 0.0


def test_a_layout_fallback_is_recorded():
    # die's states are no few diagonals in PRISM's order: "dia" cannot hold
    # its system and the compact layout runs it instead
    model = jaxmc.load_model(DIE)
    r = jaxmc.check(model, SIX, layout="dia")
    ref = jaxmc.check(model, SIX, layout="csr")
    assert r.value == pytest.approx(ref.value, rel=1e-12)
    assert r.layout == "compact"
    (a,) = r.attempts
    assert a.status == Status.REFUSED and a.layout == "dia"
    assert "ran on compact" in a.note
    assert ref.attempts == ()  # nothing to record where the layout held


def test_cli_prints_the_fallback_and_json_has_it(capsys):
    code = main([DIE, "--prop", SIX, "--layout", "dia"])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Result:"))
    fallback = [line for line in lines[at:] if line.startswith("Fallback:")]
    assert fallback == [
        "Fallback: bicgstab on dia: refused "
        "(layout dia cannot hold this system; ran on compact)"
    ]
    code = main([DIE, "--prop", SIX, "--layout", "dia", "--json"])
    entry = json.loads(capsys.readouterr().out)["runs"][0]["properties"][0]
    assert code == 0
    assert [a["status"] for a in entry["attempts"]] == ["refused"]
    assert entry["attempts"][0]["layout"] == "dia"
    code = main([DIE, "--prop", SIX, "--json"])
    entry = json.loads(capsys.readouterr().out)["runs"][0]["properties"][0]
    assert entry["attempts"] == []


def test_a_failed_solve_is_one_error_at_the_api():
    model = jaxmc.load_model(DIE)
    with pytest.raises(jaxmc.ConvergenceError, match="did not converge") as e:
        jaxmc.check(model, SIX, method="jacobi", max_iters=3, criterion="change")
    # raised by the API's one throw, not by a solver below it
    frames = traceback.extract_tb(e.value.__traceback__)
    assert frames[-1].name == "raise_on_failure"
    assert e.value.span is not None  # located at the property
    data = jaxmc.check(
        model, SIX, method="jacobi", max_iters=3, throw=False, criterion="change"
    )
    assert f"within {data.iterations} iterations" in str(e.value)
    with pytest.raises(jaxmc.ConvergenceError):
        jaxmc.solve(model, SIX, method="jacobi", max_iters=3, criterion="change")


def test_throw_false_gives_the_status_as_data():
    model = jaxmc.load_model(DIE)
    r = jaxmc.check(
        model, SIX, method="jacobi", max_iters=3, throw=False, criterion="change"
    )
    assert r.status == "max_iters" and r.iterations >= 3
    assert r.failure is not None and r.failure.status == Status.MAX_ITERS
    assert r.failure.method == "jacobi" and r.failure.iterations == r.iterations
    ok = jaxmc.check(model, SIX, options=SolveOptions(throw=False))
    assert ok.status == "converged" and ok.failure is None


def test_throw_false_through_the_options_object_on_the_cli(capsys):
    code = main(
        [DIE, "--prop", SIX, "-maxiters", "3", "-jacobi", "--criterion", "change"]
    )
    captured = capsys.readouterr()
    assert code == 1
    assert captured.err.count("did not converge within") == 1


def test_options_are_frozen_and_replaceable():
    o = SolveOptions(epsilon=1e-8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.epsilon = 1.0
    assert SolveOptions.of(o, method="power") == SolveOptions(
        epsilon=1e-8, method="power"
    )
    with pytest.raises(TypeError, match="colour"):
        SolveOptions.of(o, colour=1)
