"""Schedulers of every MDP of PRISM's regression suite (the in-scope folders
of `tests/conformance`, each model with the constants of its test cases):
for every `Pmin/Pmax/Rmin/Rmax=?` property with a scheduler (memoryless,
or finite-memory for LTL), the chain it induces, checked again with the
same property, and the scheduler's own exact value have the MDP's optimum
within the certified bounds. Properties without one (step and time bounds,
`C`, `I=k`, non-co-safe `R`) are refused with a reason, never answered
wrongly. `test_scheduler_models.py` holds the example MDPs."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from test_scheduler_models import _kind

import jaxmc


def _suite_mdps():
    import corpus

    if not corpus.available():
        return []
    from conformance.cases import all_cases

    seen = {}
    for c in all_cases():
        if c.model.suffix not in corpus.MODEL_SUFFIXES or c.skip:
            continue
        if corpus.model_type_keyword(c.model) not in (None, "mdp", "nondeterministic"):
            continue
        if c.config.import_model or c.config.import_type:
            continue
        seen.setdefault((c.model, c.props, c.consts), None)
    root = corpus.TESTS
    return [pytest.param(m, p, k, id=f"{p.relative_to(root)}[{k}]") for m, p, k in seen]


CASES = _suite_mdps()
SEEN: collections.Counter = collections.Counter()


@pytest.mark.parametrize(
    "model_path, props_path, consts", CASES or [(None, None, None)]
)
def test_suite_mdp_schedulers(model_path, props_path, consts):
    if model_path is None:
        pytest.skip("PRISM's regression suite is not in ../shared")
    model = jaxmc.load_model(str(model_path), consts or None)
    props = jaxmc.load_properties(str(props_path), model, errors="keep")
    for i, prop in enumerate(props):
        kind = _kind(prop.expr)
        if prop.error is not None or kind is None:
            continue
        try:
            result = jaxmc.check(model, i, properties=props, scheduler=True)
        except jaxmc.UnsupportedError:
            SEEN["refused"] += 1
            continue
        induced = jaxmc.induced_model(model, result)
        again = jaxmc.load_properties(str(props_path), induced, errors="keep")
        other = jaxmc.check(induced, i, properties=again)
        want, got = result.value, other.value
        exact = result.scheduler.values[np.asarray(result.initial_states)]
        if np.isinf(want):
            assert got == want and np.all(exact == want), prop.text
        else:
            slack = (result.bound or 0.0) + (other.bound or 0.0)
            slack += 1e-9 * max(1.0, abs(want))
            assert abs(got - want) <= slack, (prop.text, got, want)
            assert np.all(np.abs(exact - want) <= slack), (prop.text, exact, want)
        memory = hasattr(result.scheduler, "memory_states")
        SEEN[("memory " if memory else "") + kind] += 1


def test_suite_covers_every_kind():
    """(after the cases above) Pmax, Pmin, Rmax, Rmin, memoryless and
    finite-memory, each came up."""
    if not SEEN:
        pytest.skip("run with the suite cases")
    for kind in ("Pmax", "Pmin", "Rmax", "Rmin"):
        assert SEEN[kind] and SEEN["memory " + kind], SEEN
