"""Storm's bounded path formulas (`F^{rew{"r"}<=b}`, `U^{steps<=k}`,
`F^{time[a,b]}`, the braceless `F rew{"r"}<=b`): parsing, printing, and
PRISM's own bounds and names left as they were."""

from __future__ import annotations

import pytest

from jaxmc.errors import PrismSyntaxError, UnsupportedError
from jaxmc.lang import ast, format_expr, parse_expression


K = ast.TimeBoundKind
R = ast.BoundRef


def bound(text: str) -> ast.TimeBound:
    return parse_expression(text).path.bound


@pytest.mark.parametrize(
    "text, ref, structure, kind, low, high",
    [
        ('P=? [ F^{rew{"r"}<=3} "a" ]', R.REWARD, "r", K.LE, None, 3),
        ('P=? [ F{rew{"r"}<3} "a" ]', R.REWARD, "r", K.LT, None, 3),
        ('P=? [ F rew{"r"}<=3 "a" ]', R.REWARD, "r", K.LE, None, 3),
        ('P=? [ F^{{"r"}>=2} "a" ]', R.REWARD, "r", K.GE, 2, None),
        ('P=? [ F^{rew>2} "a" ]', R.REWARD, None, K.GT, 2, None),
        ('P=? [ F^{rew{"r"}[1,4]} "a" ]', R.REWARD, "r", K.INTERVAL, 1, 4),
        ('P=? [ F^{rew{"r"}=2} "a" ]', R.REWARD, "r", K.EQ, 2, None),
        ('P=? [ true U^{steps<=10} "a" ]', R.STEPS, None, K.LE, None, 10),
        ('P=? [ F^{time<=5} "a" ]', R.TIME, None, K.LE, None, 5),
        ('P=? [ F^{<=5} "a" ]', R.TIME, None, K.LE, None, 5),
        ('P=? [ F^{time[1,5]} "a" ]', R.TIME, None, K.INTERVAL, 1, 5),
        ('P=? [ "b" U rew{"r"}<=7 "a" ]', R.REWARD, "r", K.LE, None, 7),
        ('P=? [ F<=5 "a" ]', None, None, K.LE, None, 5),  # PRISM's bound
        # as Storm prints them: the operator glued to its reward bound
        ('Pmin=? [true Urew{"time"}<=800 "done"]', R.REWARD, "time", K.LE, None, 800),
        ('P=? [Frew{"r"}>=2 "a"]', R.REWARD, "r", K.GE, 2, None),
    ],
)
def test_bounds_parse(text, ref, structure, kind, low, high):
    b = bound(text)
    assert (b.ref, b.structure, b.kind) == (ref, structure, kind)
    assert (None if b.low is None else b.low.value) == low
    assert (None if b.high is None else b.high.value) == high


def test_reward_structure_by_index_and_expression_bound():
    b = bound('P=? [ F^{rew{2}<=N+1} "a" ]')
    assert b.structure == ast.IntLit(2)
    assert b.high == parse_expression("N+1")


@pytest.mark.parametrize(
    "text",
    [
        'P=? [ F^{rew{"r"}<=3} "a" ]',
        'P=? [ F^{rew<=3} "a" ]',
        'P=? [ F^{rew{2}>=3} "a" ]',
        'P=? [ x=1 U^{rew{"r"}[2,B]} "a" ]',
        'P=? [ F^{steps<=3} "a" ]',
        "P=? [ G^{time<=2.5} x<3 ]",
        'Pmin=? [ F^{rew{"time"}<=deadline} -x=1 ]',
        'P=? [ F<=3 "a" ]',
    ],
)
def test_print_round_trip(text):
    e = parse_expression(text)
    assert parse_expression(format_expr(e)) == e
    assert format_expr(parse_expression(format_expr(e))) == format_expr(e)


def test_printed_form_is_storms():
    e = parse_expression('P=? [ F rew{"time"}<=800 "done" ]')
    assert format_expr(e) == 'P=? [ F^{rew{"time"}<=800} "done" ]'


@pytest.mark.parametrize(
    "text",
    [
        "P=? [ F time<=3 ]",  # a variable named time, as in PRISM
        "P=? [ F steps=2 & rew>1 ]",
        "P=? [ rew U steps>0 ]",
        "P=? [ Urew U Frew ]",  # names that start like Storm's glued operators
    ],
)
def test_storm_words_stay_names_in_prism_text(text):
    e = parse_expression(text)
    assert e.path.bound is None


def test_several_bounds_are_refused_with_a_location():
    with pytest.raises(UnsupportedError) as err:
        parse_expression('P=? [ F^{steps<=3, rew{"r"}<=2} "a" ]')
    assert err.value.span.column == 8
    assert "multi-dimensional" in str(err.value)
    assert err.value.hint


@pytest.mark.parametrize(
    "text",
    [
        'P=? [ F^{rew{"r"}} "a" ]',  # no relation
        'P=? [ F^{cost<=3} "a" ]',  # unknown reference
        'P=? [ F^{rew{"r"}<=} "a" ]',
    ],
)
def test_malformed_bounds_are_syntax_errors(text):
    with pytest.raises(PrismSyntaxError):
        parse_expression(text)
