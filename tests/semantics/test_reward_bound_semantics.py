"""Checking Storm's bounded path formulas against a model: the reward
structure of a `rew` bound exists, its bound is a non-negative constant
number (not necessarily an integer), a `steps` bound is an integer, and
reward bounds are refused inside LTL."""

from __future__ import annotations

import pytest

from jaxmc.errors import SemanticError, UnsupportedError
from jaxmc.lang import parse_model, parse_properties
from jaxmc.semantics import check_program, check_properties


MODEL = """mdp
const int N = 3;
module m
  x : [0..N] init 0;
  [go] x<N -> 0.5:(x'=x+1) + 0.5:(x'=x);
  [] x=N -> true;
endmodule
rewards "cost"
  [go] true : 1.5;
endrewards
rewards "time"
  [go] true : 1;
endrewards
label "done" = x=N;
"""


def props(text: str, constants: str | None = None):
    m = check_program(parse_model(MODEL), None, source=MODEL)
    return check_properties(parse_properties(text), m, constants, source=text)


@pytest.mark.parametrize(
    "text",
    [
        'Pmax=? [ F^{rew{"cost"}<=4.5} "done" ];',
        'Pmin=? [ F^{rew{2}<=N+1} "done" ];',
        'Pmin=? [ F^{rew>=1} "done" ];',
        'Pmax=? [ x<2 U^{rew{"time"}[1,3]} "done" ];',
        'const double b; Pmax=? [ F^{rew{"cost"}<b} "done" ];',
        'Pmax=? [ F^{steps<=4} "done" ];',
        'Pmax=? [ F^{time<=4} "done" ];',
    ],
)
def test_accepted(text):
    constants = "b=2.5" if "const double b" in text else None
    assert props(text, constants)


@pytest.mark.parametrize(
    "text, error, needle, column",
    [
        ('Pmax=? [ F^{rew{"energy"}<=3} "done" ];', SemanticError, "energy", 13),
        ('Pmax=? [ F^{rew{3}<=3} "done" ];', SemanticError, "out of range", 17),
        ('Pmax=? [ F^{rew{"time"}<=-1} "done" ];', SemanticError, "negative", 26),
        ('Pmax=? [ F^{rew{"time"}<=x} "done" ];', SemanticError, "variable", 26),
        ('Pmax=? [ F^{steps<=2.5} "done" ];', SemanticError, "integer", 20),
        ('Pmax=? [ F^{rew{"time"}<=true} "done" ];', SemanticError, "number", 26),
        ('Pmax=? [ F^{rew{"time"}[3,1]} "done" ];', SemanticError, "empty", 13),
        (
            'Pmax=? [ F^{rew{"time"}<=3} ("done" & X "done") ];',
            UnsupportedError,
            "LTL",
            13,
        ),
    ],
)
def test_refused_with_location(text, error, needle, column):
    with pytest.raises(error) as err:
        props(text)
    assert needle in str(err.value)
    assert err.value.span is not None and err.value.span.column == column
