"""Every property of PRISM's example models agrees with Storm (issue #4).

Small instances with the constants PRISM's own `auto` scripts use; models over
`MAX_STATES` states are skipped (named in the skip reason). Values are
compared at 1e-6 relative; Storm runs its sound methods.
"""

from __future__ import annotations

import collections
import functools
import math
import re

import numpy as np
import pytest

import corpus


pytest.importorskip("stormpy")
if not corpus.available():
    pytest.skip("../shared/models not found", allow_module_level=True)

import jaxmc  # noqa: E402
from jaxmc.errors import (  # noqa: E402
    ExplorationError,
    JaxmcError,
    ModelCheckingError,
    SemanticError,
    UnsupportedError,
)
from jaxmc.lang import ast, format_expr, parse_properties  # noqa: E402
from storm_oracle import storm_value, storm_values_by_valuation  # noqa: E402


MAX_STATES = 60_000
RTOL = 1e-6
#: Instances per example folder (the smallest, by the numbers in their names).
PER_FOLDER = 2

pytestmark = pytest.mark.storm


def _natural(path):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name)]


def _smallest_instances():
    by_folder = collections.defaultdict(list)
    for model in corpus.in_scope_models():
        if corpus.EXAMPLES in model.parents:
            by_folder[model.parent].append(model)
    for folder in sorted(by_folder):
        yield from sorted(by_folder[folder], key=_natural)[:PER_FOLDER]


def _consts_for(model, props, index: int) -> str:
    """The constants PRISM's `auto` script uses for property `index` (its
    `-prop N` line; ranges reduced to their first value), else the merged
    settings for the file."""
    for cmd in corpus._auto_commands(model.parent):
        if model.name in cmd and props.name in cmd and "-prop" in cmd:
            if cmd[cmd.index("-prop") + 1] == str(index + 1):
                return ",".join(
                    part.split(":")[0] if "=" in part else part
                    for part in corpus._consts_of(list(cmd)).split(",")
                    if part
                )
    return corpus.merged_constants(model, props)


def _cases():
    out = []
    for model in _smallest_instances():
        for props in corpus.props_for(model):
            try:
                pf = parse_properties(props.read_text(errors="replace"), file=str(props))
            except JaxmcError:
                continue  # the parser tests list these files
            for i, _ in enumerate(pf.properties):
                out.append((model, props, _consts_for(model, props, i), i))
    return out


CASES = _cases()


@functools.lru_cache(maxsize=2)
def _model(path: str, consts: str):
    m = jaxmc.load_model(path, consts or None, max_states=MAX_STATES)
    m.build()
    return m


def _prelude(pset) -> str:
    """Label declarations of the property file (checked: constants folded),
    for Storm, which accepts no `const` declarations among properties."""
    return "\n".join(
        f'label "{name}" = {format_expr(expr)};' for name, expr in pset.labels.items()
    )


@pytest.mark.parametrize(
    "model,props,consts,index",
    CASES,
    ids=[f"{m.relative_to(corpus.EXAMPLES)}:{p.name}:{i}" for m, p, c, i in CASES],
)
def test_agrees_with_storm(model, props, consts, index):
    try:
        m = _model(str(model), consts)
        pset = jaxmc.load_properties(props, m, consts or None, errors="keep")
        prop = pset[index]
        result = jaxmc.check(m, index, properties=pset)
        ours = result.value if len(result.initial_states) == 1 else (
            "range", *(v.item() for v in result.range)
        )
    except ExplorationError as e:
        if "max_states" in str(e) or "more than" in str(e):
            pytest.skip(f"more than {MAX_STATES} states")
        raise
    except UnsupportedError as e:
        pytest.skip(f"unsupported: {e.message}")
    except ModelCheckingError as e:
        if "set of states is empty" in e.message:
            pytest.skip(f"no state satisfies the filter with {consts or 'these constants'}")
        raise
    except SemanticError as e:
        if "must be given a value" in e.message:
            pytest.skip(f"no script gives a value: {e.message}")
        raise
    try:
        if isinstance(prop.expr, ast.Filter):
            theirs = _storm_filter(m, pset, str(model), consts, prop.expr)
        else:
            storm_text = _prelude(pset) + "\n" + format_expr(prop.expr) + ";"
            theirs = storm_value(str(model), consts, storm_text)
    except Exception as e:  # noqa: BLE001 - Storm cannot check it: nothing to compare
        pytest.skip(f"Storm: {type(e).__name__}: {str(e)[:120]}")
    if _close(ours, theirs):
        return
    # Disagreement: a bug, or PRISM's stopping criterion (relative change
    # below epsilon) stopping short of 1e-6 accuracy? Re-solve tightly.
    tight = jaxmc.check(
        m, index, properties=pset, epsilon=1e-12, max_iters=1_000_000
    ).value
    assert _close(tight, theirs), (
        f"jaxmc {ours!r} (epsilon=1e-12: {tight!r}) vs Storm {theirs!r}"
    )
    pytest.xfail(
        f"default epsilon=1e-6 stops {_rel(ours, theirs):.1e} away from Storm's "
        f"sound value; with epsilon=1e-12 jaxmc agrees to 1e-6"
    )


def _rel(a, b) -> float:
    return abs(float(a) - float(b)) / max(abs(float(b)), 1e-300)


def _storm_filter(m, pset, model_path, consts, f):
    """A filter computed on Storm's per-state values, matched to jaxmc's
    states by their valuations; the filter's state set is jaxmc's."""
    text = _prelude(pset) + "\n" + format_expr(f.operand) + ";"
    values, names = storm_values_by_valuation(model_path, consts, text)
    explicit = m.build()
    cols = [[v.name for v in explicit.variables].index(n) for n in names]
    keys = map(tuple, explicit.states[:, cols].tolist())
    vec = np.array([values[k] for k in keys])
    if f.states is None:
        mask = np.ones(explicit.num_states, dtype=bool)
    else:
        props = jaxmc.parse_properties(_prelude_props(pset) + format_expr(f.states), m)
        mask = jaxmc.check(m, 0, properties=props).values.astype(bool)
    sel = vec[mask]
    op = f.op
    if op == "range":
        return ("range", sel.min(), sel.max())
    reduce = {
        "min": np.min, "max": np.max, "sum": np.sum, "avg": np.mean,
        "count": np.count_nonzero, "forall": np.all, "exists": np.any,
        "first": lambda v: v[0], "state": lambda v: v[0],
    }  # fmt: skip
    out = reduce[op](sel)
    return bool(out) if isinstance(out, np.bool_) else float(out)


def _prelude_props(pset) -> str:
    return _prelude(pset) + ("\n" if pset.labels else "")


def _close(ours, theirs) -> bool:
    if isinstance(theirs, tuple):
        return isinstance(ours, tuple) and all(
            _close(a, b) for a, b in zip(ours[1:], theirs[1:])
        )
    if isinstance(theirs, bool) or isinstance(ours, bool):
        return bool(ours) == bool(theirs)
    ours, theirs = float(ours), float(theirs)
    if math.isinf(theirs) or math.isinf(ours):
        return ours == theirs
    return abs(ours - theirs) <= RTOL * abs(theirs) + 1e-10
