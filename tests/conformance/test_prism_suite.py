"""Run PRISM's regression suite: every in-scope `// RESULT:` annotation.

`python -m pytest tests/conformance -rfs` prints a reason for every skip and
failure; `python -m tests.conformance` prints a summary per folder.
"""

from __future__ import annotations

import pytest

from . import suite
from .cases import all_cases, run_case


if not suite.SUITE.is_dir():
    pytest.skip("../shared/models/prism-tests not found", allow_module_level=True)

CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_prism_result(case):
    if case.skip:
        pytest.skip(case.skip)
    outcome, detail = run_case(case)
    if outcome == "skip":
        pytest.skip(detail)
    assert outcome == "pass", detail


def test_enough_cases_found():
    # Guards against the discovery silently finding nothing.
    assert len(CASES) > 500
