"""Every property of PRISM's example models agrees with Storm (issue #4).

Small instances (the two smallest of each folder) with the constants PRISM's
own `auto` scripts use; models over `MAX_STATES` states are left to the slow
tier (`-m slow`). Values are compared at 1e-6 relative; Storm runs its sound
methods.

Storm reads the original model file where its parser accepts it (test ids
ending `:file`); otherwise it reads the model reprinted by jaxmc's printer
(`storm_input.program_text`: model type first, declarations in dependency
order; ids ending `:normalised`) and still builds and checks it by its own
semantics. Properties are always given to Storm as jaxmc's checked property
(constants folded) written in Storm's subset (`storm_input.property_text`).
"""

from __future__ import annotations

import collections
import functools
import math
import re

import corpus
import numpy as np
import pytest


pytest.importorskip("stormpy")
if not corpus.available():
    pytest.skip("../shared/models not found", allow_module_level=True)

from storm_input import NoStormEquivalent, program_text, property_text, storm_expr  # noqa: E402
from storm_oracle import load_program, storm_value, storm_values_by_valuation  # noqa: E402

import jaxmc  # noqa: E402
from jaxmc.errors import (  # noqa: E402
    ExplorationError,
    JaxmcError,
    ModelCheckingError,
    SemanticError,
    UnsupportedError,
)
from jaxmc.lang import ast  # noqa: E402


MAX_STATES = 60_000
#: State-space limit of the slow tier.
SLOW_MAX_STATES = 2_000_000
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


@functools.cache
def _storm_reads(model) -> bool:
    """Whether Storm's parser accepts the model file as it is."""
    try:
        load_program(str(model))
        return True
    except RuntimeError:
        return False


def _cases():
    return list(corpus.property_cases(_smallest_instances()))


CASES = _cases()
IDS = [
    f"{m.relative_to(corpus.EXAMPLES)}:{p.name}:{i}:"
    f"{'file' if _storm_reads(m) else 'normalised'}"
    for m, p, c, i in CASES
]


#: Cases where Storm itself goes wrong, by "folder/props-file:index".
STORM_FAILS = {
    "ctmcs/peer2peer/peer2peer.csl:1": (
        "Storm's Fox-Glynn underflows on R=?[I=1.1] (right truncation point "
        "~1450 > 600 for q*t ~ 400): in sound mode it lowers the truncation "
        "error towards 0 and does not finish; in default mode it returns 0.0292 "
        'on peer2peer4_4, below P=?[F<=1.1 "done"] = 0.968, which bounds the '
        "expected fraction received from below (jaxmc: 0.99752)"
    ),
}


@functools.lru_cache(maxsize=2)
def _model(path: str, consts: str, max_states: int):
    m = jaxmc.load_model(path, consts or None, max_states=max_states)
    m.build()
    return m


@functools.cache
def _storm_program(path: str) -> str | None:
    """None where Storm reads the file itself, else jaxmc's reprint of it."""
    return None if _storm_reads(path) else program_text(path)


@pytest.mark.parametrize("model,props,consts,index", CASES, ids=IDS)
def test_agrees_with_storm(model, props, consts, index):
    _agrees(model, props, consts, index, MAX_STATES)


@pytest.mark.slow
@pytest.mark.parametrize("model,props,consts,index", CASES, ids=IDS)
def test_agrees_with_storm_large(model, props, consts, index):
    """The instances over `MAX_STATES` states (the others are the default
    tier's)."""
    try:
        _model(str(model), consts, MAX_STATES)
    except ExplorationError as e:
        if not _too_big(e):
            raise
    except JaxmcError:
        pass  # the default tier reports it
    else:
        pytest.skip(f"at most {MAX_STATES} states: checked by test_agrees_with_storm")
    _agrees(model, props, consts, index, SLOW_MAX_STATES)


def _too_big(e: ExplorationError) -> bool:
    return "max_states" in str(e) or "more than" in str(e)


def _agrees(model, props, consts, index, max_states):
    try:
        m = _model(str(model), consts, max_states)
        pset = jaxmc.load_properties(props, m, consts or None, errors="keep")
        prop = pset[index]
        ours = _ours(jaxmc.check(m, index, properties=pset), prop)
    except ExplorationError as e:
        if _too_big(e):
            pytest.skip(
                f"more than {max_states} states (the slow tier takes up to "
                f"{SLOW_MAX_STATES})"
            )
        raise
    except UnsupportedError as e:
        pytest.skip(f"jaxmc: unsupported: {e.message}")
    except ModelCheckingError as e:
        if "set of states is empty" in e.message:
            pytest.skip(
                f"no state satisfies the filter with {consts or 'these constants'}"
            )
        raise
    except SemanticError as e:
        if "must be given a value" in e.message:
            pytest.skip(f"no script gives a value: {e.message}")
        raise
    known = STORM_FAILS.get(
        f"{props.parent.relative_to(corpus.EXAMPLES)}/{props.name}:{index}"
    )
    if known:
        pytest.skip(f"Storm fails: {known}")
    program = _storm_program(str(model))
    try:
        if isinstance(prop.expr, ast.Filter):
            theirs = _storm_filter(m, pset, str(model), consts, prop.expr, program)
        else:
            text = property_text(prop.expr, pset)
            theirs = storm_value(str(model), consts, text, program)
    except NoStormEquivalent as e:
        pytest.skip(f"Storm: no equivalent: {e}")
    if _close(ours, theirs):
        return
    # Disagreement: a bug, or PRISM's stopping criterion (relative change
    # below epsilon) stopping short of 1e-6 accuracy? Re-solve tightly.
    tight = _ours(
        jaxmc.check(m, index, properties=pset, epsilon=1e-12, max_iters=1_000_000), prop
    )
    assert _close(tight, theirs), (
        f"jaxmc {ours!r} (epsilon=1e-12: {tight!r}) vs Storm {theirs!r}"
    )
    pytest.xfail(
        f"default epsilon=1e-6 stops {_rel(ours, theirs):.1e} away from Storm's "
        f"sound value; with epsilon=1e-12 jaxmc agrees to 1e-6"
    )


def _ours(result, prop):
    """jaxmc's answer as PRISM reports it: the filter's value, the value at
    the initial state, or ("range", lo, hi) over several initial states."""
    if isinstance(prop.expr, ast.Filter) or len(result.initial_states) == 1:
        return result.value
    return ("range", *(v.item() for v in result.range))


def _rel(a, b) -> float:
    if isinstance(b, tuple):
        return max(_rel(x, y) for x, y in zip(a[1:], b[1:]))
    return abs(float(a) - float(b)) / max(abs(float(b)), 1e-300)


#: Filter operators computed here from Storm's per-state values.
_REDUCE = {
    "min": np.min, "max": np.max, "sum": np.sum, "avg": np.mean,
    "count": np.count_nonzero, "forall": np.all, "exists": np.any,
    "first": lambda v: v[0], "state": lambda v: v[0],
    "range": lambda v: ("range", v.min(), v.max()),
}  # fmt: skip


def _storm_filter(m, pset, model_path, consts, f, program):
    """A filter computed on Storm's per-state values, matched to jaxmc's
    states by their valuations; the filter's state set is Storm's too (the
    state formula checked by Storm), and `first` takes the first state in
    PRISM's order (jaxmc's)."""
    if f.op not in _REDUCE:
        raise NoStormEquivalent(
            f"filter({f.op}, ...) prints states; no value to compare"
        )
    values, names = storm_values_by_valuation(
        model_path, consts, property_text(f.operand, pset), program
    )
    explicit = m.build()
    cols = [[v.name for v in explicit.variables].index(n) for n in names]
    keys = list(map(tuple, explicit.states[:, cols].tolist()))
    vec = np.array([values[k] for k in keys])
    if f.states is None:
        mask = np.ones(explicit.num_states, dtype=bool)
    else:
        truth, _ = storm_values_by_valuation(
            model_path, consts, property_text(f.states, pset), program
        )
        mask = np.array([bool(truth[k]) for k in keys])
    out = _REDUCE[f.op](vec[mask])
    if isinstance(out, tuple):
        return out
    return bool(out) if isinstance(out, np.bool_) else float(out)


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


# ------------------------------------------------------ the normalised path


#: Models Storm reads directly, covering formulas, renamed modules, rewards,
#: globals and the three model types: reprinted, they must give Storm the
#: same answer.
ROUND_TRIP = [
    ("dtmcs/brp/brp.pm", "N=16,MAX=2", "P=? [ F srep=1 & rrep=3 & recv ]"),
    ("dtmcs/leader_sync/leader3_2.pm", "", 'P=? [ F<=8 "elected" ]'),
    ("ctmcs/cluster/cluster.sm", "N=2,T=10", 'R{"num_repairs"}=? [ C<=10 ]'),
    ("ctmcs/embedded/embedded.sm", "MAX_COUNT=2", "S=? [ s<2 ]"),
    ("ctmcs/cluster/cluster.sm", "N=2", 'P=? [ F<=100 !"minimum" ]'),
    ("mdps/phil/nofair/phil-nofair3.nm", "", 'Pmin=? [ F "eat" ]'),
    ("mdps/consensus/coin2.nm", "K=2", 'Rmax=? [ F "finished" ]'),
]


@pytest.mark.parametrize("path,consts,prop", ROUND_TRIP, ids=[r[0] for r in ROUND_TRIP])
def test_normalised_model_gives_storm_the_same_answer(path, consts, prop):
    model = corpus.EXAMPLES / path
    assert _storm_reads(model)
    direct = storm_value(str(model), consts, prop)
    normalised = storm_value(str(model), consts, prop, program_text(model))
    assert direct == normalised or _close(normalised, direct)


def test_normalised_model_orders_constants_and_keyword():
    """csma defines `slot = 2*sigma` above `sigma`; wlan declares constants
    before `mdp`: Storm refuses both files and reads both reprints."""
    for path in ("mdps/csma/csma2_2.nm", "mdps/wlan/wlan0.nm"):
        model = corpus.EXAMPLES / path
        assert not _storm_reads(model)
        load_program(str(model), program_text(model))


def test_property_text_writes_out_implication_and_labels():
    path = corpus.EXAMPLES / "dtmcs/leader_sync/leader3_2.pm"
    m = jaxmc.load_model(path)
    pset = jaxmc.parse_properties(
        'const int k = 3; label "done" = s1=k;\n"p": P>0.5 [ F "elected" ];\n'
        '"done" => "p";\n"p" => "done";\n"done" <=> !"p";',
        m,
    )
    text = [property_text(p.expr, pset) for p in pset]
    assert not any("=>" in t for t in text)
    assert not any(f'"{name}"' in t for t in text for name in ("p", "done"))
    # Storm reads them, and the writing-out keeps the meaning (true, false, true).
    for i, t in enumerate(text):
        ours = jaxmc.check(m, i, properties=pset).value
        assert _close(ours, storm_value(str(path), "", t))
    assert [jaxmc.check(m, i, properties=pset).value for i in (1, 2, 3)] == [
        True,
        False,
        True,
    ]
    with pytest.raises(NoStormEquivalent):
        storm_expr(jaxmc.parse_properties('A [ F "elected" ]', m)[0].expr, pset)
