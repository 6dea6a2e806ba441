"""Grammar-aware fuzzing of the front end and the public path.

Each mutant (`fuzz_mutants.mutants`: one or two token-level mutations of an
example model or a small generated one, or of its properties) goes through
`jaxmc.load_model_string` → `jaxmc.build(max_states=...)` → `jaxmc.check`
in a worker process with a time limit. Every outcome must be a success or a
`jaxmc.JaxmcError` that says where in the source the problem is; only the
errors in `LOCATION_FREE` may have no location. Any other exception, or a
mutant that runs past the time limit, fails the test, which lists each such
mutant with what it did.

The CLI part runs mutants through `jaxmc.cli.main` (in the worker, output
captured): the exit status is 0 or 1 and no traceback is printed, also for
a model file that is not UTF-8.
"""

from __future__ import annotations

import random
import re

import pytest
from fuzz_mutants import Mutant, Runner, mutants


SEED = 20240518
#: Per-mutant time limit (seconds); the first mutant also waits for the
#: worker to import JAX.
TIMEOUT = 30.0

#: JaxmcErrors that concern no place in the source, by type and message.
LOCATION_FREE = {
    # an iterative method that stopped early: about the numerics
    "ConvergenceError": re.compile(r""),
    # the size limit the test itself sets
    "ExplorationError": re.compile(r"more than \d+ states"),
}


def _problem(outcome: dict) -> str | None:
    """Why `outcome` is not acceptable, or None."""
    kind = outcome["outcome"]
    if kind == "ok":
        return None
    if kind == "error":
        if outcome["located"]:
            return None
        free = LOCATION_FREE.get(outcome["type"])
        if free is not None and free.search(outcome["message"]):
            return None
        return f"{outcome['type']} without a location: {outcome['message']}"
    if kind == "cli":
        if outcome["code"] not in (0, 1):
            return f"exit status {outcome['code']}: {outcome['output'][-400:]}"
        if "Traceback" in outcome["output"]:
            return f"traceback printed: {outcome['output'][-400:]}"
        return None
    if kind == "hang":
        return f"hang: {outcome['type']}"
    return f"{outcome['type']}: {outcome.get('traceback', '')[-400:]}"


def _report(failures: list[tuple[Mutant, str]]) -> str:
    lines = [f"{len(failures)} mutants failed:"]
    for m, why in failures:
        lines.append(f"- {m.name}\n    {why.strip().splitlines()[-1][:300]}")
    return "\n".join(lines)


def _run_api(n: int, seed: int) -> list[tuple[Mutant, str]]:
    runner = Runner(TIMEOUT)
    failures = []
    try:
        for m in mutants(n, seed):
            why = _problem(runner.run("api", m))
            if why:
                failures.append((m, why))
    finally:
        runner.close()
    return failures


def test_fuzz_api():
    failures = _run_api(300, SEED)
    if failures:
        pytest.fail(_report(failures), pytrace=False)


def test_fuzz_cli(tmp_path):
    rng = random.Random(SEED)
    cases = mutants(30, SEED + 1)
    # three of them as files that are not UTF-8
    for i in rng.sample(range(len(cases)), 3):
        m = cases[i]
        cases[i] = Mutant(
            m.name + "; bytes: \\xff\\xfe in the model", m.model, m.props, m.suffix
        )
    runner = Runner(TIMEOUT)
    failures = []
    try:
        for m in cases:
            raw = None
            if "\\xff" in m.name:
                cut = len(m.model) // 2
                raw = m.model[:cut].encode() + b"\xff\xfe" + m.model[cut:].encode()
            why = _problem(runner.run("cli", m, str(tmp_path), raw))
            if why:
                failures.append((m, why))
    finally:
        runner.close()
    if failures:
        pytest.fail(_report(failures), pytrace=False)


@pytest.mark.slow
def test_fuzz_api_many():
    failures = _run_api(3000, SEED + 2)
    if failures:
        pytest.fail(_report(failures), pytrace=False)


def test_mutants_are_deterministic_and_varied():
    a, b = mutants(60, SEED), mutants(60, SEED)
    assert a == b
    kinds = {re.sub(r"^.*?: (model|props): (\w+).*$", r"\2", m.name) for m in a}
    # several kinds of mutation, of models and properties
    assert len(kinds) >= 8, kinds
    assert any("props:" in m.name for m in a) and any("model:" in m.name for m in a)


def test_problem_rejects_what_it_should():
    assert _problem({"outcome": "ok"}) is None
    assert _problem({"outcome": "crash", "type": "RecursionError", "traceback": "x"})
    assert _problem({"outcome": "hang", "type": "no answer"})
    unlocated = {"outcome": "error", "type": "SemanticError", "located": False,
                 "message": "unknown name"}  # fmt: skip
    assert _problem(unlocated)
    assert _problem({**unlocated, "located": True}) is None
    assert _problem({**unlocated, "type": "ConvergenceError"}) is None
    assert _problem({"outcome": "cli", "code": 2, "output": ""})
    assert _problem({"outcome": "cli", "code": 1, "output": "Traceback (most"})
    assert _problem({"outcome": "cli", "code": 1, "output": "m.pm:1:2: error"}) is None
