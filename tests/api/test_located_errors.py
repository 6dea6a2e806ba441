"""Errors raised while a property is being computed (numerics, limits) are
located at that property."""

from __future__ import annotations

import pytest

import jaxmc


QUEUE = "examples/models/queue.sm"


@pytest.mark.parametrize(
    "prop, words",
    [
        ('P=? [ F<=1e12 "full" ]', "uniformisation would need more than"),
        ('P=? [ F<=1e308 "full" ]', "positive finite"),
    ],
)
def test_numerics_error_is_located_at_the_property(tmp_path, prop, words):
    model = jaxmc.load_model(QUEUE)
    pfile = tmp_path / "q.props"
    pfile.write_text('// a comment\nP=? [ F<=1 "full" ];\n' + prop + ";\n")
    props = jaxmc.load_properties(pfile, model)
    assert jaxmc.check(model, props[0]).value >= 0.0
    with pytest.raises(jaxmc.ModelCheckingError) as info:
        jaxmc.check(model, props[1])
    err = info.value
    assert words in err.message
    assert err.span is not None and err.span.line == 3
    assert str(err).startswith(f"{pfile}:3:1:")
    assert prop in str(err)  # the line is quoted
