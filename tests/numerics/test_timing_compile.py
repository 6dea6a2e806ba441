"""Compile time is reported apart from the stages (`numerics.timing`), and
a property checked after another of its kind compiles nothing."""

from __future__ import annotations

import time
from pathlib import Path

import jax
import jax.numpy as jnp

import jaxmc
from jaxmc.numerics import timing


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "models"


def test_compile_is_taken_out_of_its_stage():
    @jax.jit
    def f(x):
        for _ in range(50):
            x = jnp.sin(x) * 1.5
        return x

    t0 = time.perf_counter()
    with timing.collect() as times:
        with timing.stage("solve"):
            before = timing.compile_totals()
            f(jnp.arange(7.0)).block_until_ready()
            after = timing.compile_totals()
    wall = time.perf_counter() - t0
    assert after[1] - before[1] >= 1
    assert times["compile"] > 0
    assert times["compile"] == after[0] - before[0]
    assert times["solve"] + times["compile"] <= wall
    assert times["solve"] < wall - times["compile"] + 1e-3


def test_later_properties_compile_nothing():
    model = jaxmc.load_model(EXAMPLES / "queue.sm")
    props = jaxmc.load_properties(EXAMPLES / "queue.sm.props", model)
    first = jaxmc.check(model, 0, properties=props)
    assert "compile" in first.timing
    for index in (1, 2, 3, 0):
        before = timing.compile_totals()[1]
        result = jaxmc.check(model, index, properties=props)
        assert timing.compile_totals()[1] == before, index
        assert result.timing["compile"] == 0.0
