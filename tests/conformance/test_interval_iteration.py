"""Interval iteration on every MDP case of PRISM's suite (issue #4): on exit
the certified gap upper − lower is at most 2·epsilon, and the exact value
given by the suite lies inside the interval."""

from __future__ import annotations

import math

import numpy as np
import pytest

from . import suite
from .cases import _load, all_cases


if not suite.SUITE.is_dir():
    pytest.skip("../shared/models/prism-tests not found", allow_module_level=True)


def _mdp_cases():
    out = []
    for case in all_cases():
        # the model's type as the case reads it (`-dtmc`, `-ctmc`, `-mdp`)
        kind = case.config.import_type or suite.model_type_keyword(case.model)
        if case.skip or case.index < 0 or kind not in ("mdp", "nondeterministic"):
            continue
        expected = suite.parse_expected(case.expected)
        if isinstance(expected, float) and math.isfinite(expected):
            out.append((case, expected))
    # one case per (file, line, constants): the configurations repeat them
    return list({(c.props, c.line, c.consts): (c, e) for c, e in out}.values())


CASES = _mdp_cases()


@pytest.mark.parametrize("case,expected", CASES, ids=[c.id for c, _ in CASES])
def test_interval_iteration_certifies_the_exact_value(case, expected):
    import jaxmc
    from jaxmc.errors import JaxmcError
    from jaxmc.lang import ast

    from .cases import out_of_scope_reason

    c = case.config
    model = _load(str(case.model), case.consts, c.prob_checks, c.import_type)
    props = jaxmc.load_properties(case.props, model, case.consts or None, errors="keep")
    prop = props[case.index]
    if prop.error is not None or not isinstance(prop.expr, (ast.ProbOp, ast.RewardOp)):
        pytest.skip("not a top-level P or R query")
    eps = 1e-6
    try:
        result = jaxmc.check(
            model, case.index, properties=props, method="interval_iteration",
            epsilon=eps, relative=False, max_iters=1_000_000,
        )  # fmt: skip
    except JaxmcError as e:
        reason = out_of_scope_reason(e)
        if reason:
            pytest.skip(reason)
        raise
    if result.lower is None:
        pytest.skip("no iterative solve (decided by precomputation or bounded)")
    init = result.initial_states
    lo, hi = result.lower[init], result.upper[init]
    assert np.all(hi - lo <= 2 * eps + 1e-15), (lo, hi)
    assert np.all(lo - 1e-12 <= expected) and np.all(expected <= hi + 1e-12), (
        f"exact {expected} outside [{lo}, {hi}]"
    )
