"""The device explorer (`jaxmc.explore.device`, on JAX's CPU backend here)
against the host builder: the same states in the same (BFS) order, the same
rows, values, actions, labels, rewards and provenance, and the host's
errors. In CI: one in-scope model per folder of the shared models (the
smallest file, `_per_folder`); under the `slow` marker: every in-scope model
whose host build has at most 20,000 states."""

from __future__ import annotations

from pathlib import Path

import corpus
import numpy as np
import pytest

from jaxmc.errors import ExplorationError, UnsupportedError
from jaxmc.explore import build
from jaxmc.lang import parse_model
from jaxmc.semantics import check_program


def _checked(text: str, consts: str | None = None, file: str | None = None):
    return check_program(
        parse_model(text, file), consts or None, source=text, file=file
    )


def _file(rel: str, consts: str = ""):
    path = corpus.SHARED_MODELS / rel
    if not path.exists():
        pytest.skip(f"{rel} not available")
    return _checked(path.read_text(), consts, str(path))


def assert_same_model(a, b) -> None:
    """Every field of two `ExplicitModel`s, bit for bit."""
    assert a.model_type == b.model_type
    assert a.variables == b.variables
    assert (a.num_states, a.num_choices, a.num_transitions) == (
        b.num_states, b.num_choices, b.num_transitions,
    )  # fmt: skip
    for name in ("states", "initial_states", "choice_ptr", "row_ptr", "col", "val"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), name)
    assert a.labels.keys() == b.labels.keys()
    for k in a.labels:
        np.testing.assert_array_equal(a.labels[k], b.labels[k], k)
    assert a.choice_action == b.choice_action
    assert a.action_names == b.action_names
    assert (a.entry_action is None) == (b.entry_action is None)
    if a.entry_action is not None:
        np.testing.assert_array_equal(a.entry_action, b.entry_action)
    assert a.warnings == b.warnings
    assert len(a.rewards) == len(b.rewards)
    for ra, rb in zip(a.rewards, b.rewards):
        assert ra.name == rb.name
        for f in ("state", "transition", "negative_items"):
            x, y = getattr(ra, f), getattr(rb, f)
            assert (x is None) == (y is None), f
            if x is not None:
                np.testing.assert_array_equal(x, y, f)
    pa, pb = a.provenance, b.provenance
    np.testing.assert_array_equal(pa.entry_ptr, pb.entry_ptr)
    np.testing.assert_array_equal(pa.weight, pb.weight)
    np.testing.assert_array_equal(pa.products, pb.products)
    np.testing.assert_array_equal(pa.product, pb.product)


def assert_same(checked, **options) -> None:
    host = build(checked, explorer="host", **options)
    device = build(checked, explorer="device", **options)
    assert_same_model(host, device)


# Synchronisation with renaming, DTMC choices merged uniformly, transition
# rewards by action, a deadlock fixed by a self-loop, several initial
# states, booleans, and variables that need a second key word.
FEATURES = """
{kind}
const int N = 3;
module A
  g : [0..N];
  a : [0..N];
  b : bool;
  [go] a < N -> 0.5 : (a'=a+1) + 0.5 : (b'=!b);
  [] a = N & !b -> (a'=0);
  [] a = N & !b -> 0.3 : (a'=1) + 0.7 : (a'=0);
  [tick] g < N -> (g'=g+1);
endmodule
module B
  c : [0..1000000];
  d : [0..2000000000];
  [go] c < 2 -> 1/3 : (c'=c+1) + 2/3 : (c'=c+1) & (d'=d+1000000);
  [tock] c < 2 -> (c'=c);
endmodule
module C = B [c=e, d=f, go=go, tock=tick] endmodule
init a <= 1 & c = 0 & d = 0 & e = 0 & f = 0 & g = 0 endinit
rewards "r"
  [go] true : 1/3 + a;
  [] a = N : 0.5;
  a = 1 : 2;
endrewards
rewards "t"
  [tick] true : 1;
endrewards
label "top" = a = N;
"""


@pytest.mark.parametrize("kind", ["dtmc", "ctmc", "mdp"])
def test_features(kind):
    assert_same(_checked(FEATURES.format(kind=kind)))


@pytest.mark.parametrize("kind", ["dtmc", "mdp"])
def test_no_commands(kind):
    """A program without commands (the regression suite's
    boolean-constant-issue-232): every state deadlocks into a self-loop."""
    assert_same(_checked(f"{kind}\nmodule M b : bool init false; endmodule"))


def _setting(model) -> tuple[str, str]:
    """A model's path in the shared models and its first constant setting."""
    rel = str(model.relative_to(corpus.SHARED_MODELS))
    return rel, (corpus.constant_settings(model) or [""])[0]


def _in_scope():
    return [_setting(m) for m in corpus.in_scope_models()]


def _per_folder():
    """One in-scope model per folder (every folder of prism-examples and of
    the regression suite's in-scope folders that holds one): its smallest
    file, ties by path. Chosen by this rule alone, whether or not the host
    builds it."""
    smallest = {}
    for m in corpus.in_scope_models():
        key = (m.stat().st_size, str(m))
        smallest[m.parent] = min(smallest.get(m.parent, key), key)
    return [_setting(Path(p)) for _, p in sorted(smallest.values(), key=lambda k: k[1])]


def _compare(rel: str, consts: str) -> None:
    """The device explorer against the host builder on one shared model;
    skipped where the host builder does not build it in 20,000 states."""
    from jaxmc.errors import JaxmcError

    try:
        checked = _file(rel, consts)
        host = build(checked, explorer="host", max_states=20_000)
    except JaxmcError as e:
        pytest.skip(f"the host builder does not build it: {type(e).__name__}")
    assert_same_model(host, build(checked, explorer="device"))


@pytest.mark.parametrize("rel, consts", _per_folder())
def test_model_per_folder(rel, consts):
    _compare(rel, consts)


@pytest.mark.slow
@pytest.mark.parametrize("rel, consts", _in_scope())
def test_every_model(rel, consts):
    _compare(rel, consts)


ERRORS = {
    "range": "dtmc\nmodule M x : [0..2] init 0; [] true -> (x'=x+1); endmodule",
    "sum": "mdp\nmodule M x : [0..2] init 0;\n"
    "[a] x < 2 -> 0.5 : (x'=x+1) + 0.4 : (x'=0); [b] x = 2 -> (x'=0); endmodule",
    "evaluation": "dtmc\nmodule M x : [0..3] init 0;\n"
    "[] true -> (x'=mod(x + 1, x - 2)); endmodule",
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_are_the_hosts(name):
    checked = _checked(ERRORS[name])
    with pytest.raises(ExplorationError) as host:
        build(checked, explorer="host")
    with pytest.raises(ExplorationError) as device:
        build(checked, explorer="device")
    assert str(device.value) == str(host.value)


def test_deadlocks_error_and_unsupported():
    text = "dtmc\nmodule M x : [0..3] init 0; [] x < 3 -> (x'=x+1); endmodule"
    checked = _checked(text)
    with pytest.raises(ExplorationError) as host:
        build(checked, explorer="host", deadlocks="error")
    with pytest.raises(ExplorationError) as device:
        build(checked, explorer="device", deadlocks="error")
    assert str(device.value) == str(host.value)
    with pytest.raises(UnsupportedError):
        build(checked, explorer="device", prob_checks=False)
    assert_same_model(
        build(checked, explorer="host", prob_checks=False),
        build(checked, explorer="auto", prob_checks=False),
    )
    with pytest.raises(ValueError):
        build(checked, explorer="gpu")


@pytest.mark.parametrize("short", [None, (2, 1, 2)])
def test_growth_paths(monkeypatch, short):
    """Tiny starting capacities: the loop stops for larger step buffers
    (the first state's and a narrow step's), a larger state store, a wider
    batch and full output epochs, and resumes; the model is the host's.
    With `short`, short steps for short queues too (stopping the loop for
    a larger store or a full epoch, or handing a state they cannot hold to
    the full step)."""
    from jaxmc.explore.device import explorer as E, step as S

    kind = "cpu" if E.jax.default_backend() == "cpu" else "gpu"
    monkeypatch.setitem(E.START, kind, S.Caps(4, 1, 2, 16, 128, 64))
    monkeypatch.setitem(E.MAX_BATCH, kind, 16)
    monkeypatch.setitem(E.BOUNDED, kind, 0)
    monkeypatch.setitem(E.MAX_ENTRIES, kind, 128)
    monkeypatch.setitem(E.SHORT_STEP, kind, short)
    monkeypatch.setattr(S, "NARROW_TRIPS", 2)  # (short steps soon)
    stops = []
    make_loop = S.make_loop
    shorts = []

    def recording(prog, caps, opts, short=None, watch=None):
        shorts.append(short)
        run = make_loop(prog, caps, opts, short, watch)

        def call(s, values):
            out = run(s, values)
            stops.append(int(out.status))
            return out

        return call

    monkeypatch.setattr(S, "make_loop", recording)
    assert_same(_file("prism-examples/mdps/csma/csma2_2.nm", "k=1"))
    assert {S.NEED_STEP, S.NEED_STORE, S.NEED_BATCH, S.FLUSH} <= set(stops)
    assert S.SHORT_STUCK not in stops
    assert any(x is not None for x in shorts) == (short is not None)


FAN_OUT = """dtmc
module D
  d : [0..3];
  [go] d<3 -> (d'=d+1);
  [go] d=3 -> true;
endmodule
module A
  a : [0..8];
  [go] a=0 & d<3 -> true;
  [go] a=0 & d=3 -> 1/8:(a'=1) + 1/8:(a'=2) + 1/8:(a'=3) + 1/8:(a'=4)
                  + 1/8:(a'=5) + 1/8:(a'=6) + 1/8:(a'=7) + 1/8:(a'=8);
  [go] a>0 -> (a'=0);
endmodule
module B = A [a=b] endmodule
module C = A [a=c] endmodule
"""


def test_narrow_levels_take_short_steps(monkeypatch):
    """A chain of single states (narrow levels: after `NARROW_TRIPS` full
    steps the loop stops and short steps take over), then a state with 8^3
    successors, more than a short step's entries: that short step is
    stuck, the full step of the same trip takes the state, and the model is
    the host's."""
    from jaxmc.explore.device import explorer as E, step as S

    kind = "cpu" if E.jax.default_backend() == "cpu" else "gpu"
    monkeypatch.setitem(E.SHORT_STEP, kind, (16, 64, 256))
    monkeypatch.setattr(S, "NARROW_TRIPS", 1)
    runs = []
    make_loop = S.make_loop

    def recording(prog, caps, opts, short=None, watch=None):
        run = make_loop(prog, caps, opts, short, watch)

        def call(s, values):
            out = run(s, values)
            runs.append((short is not None, int(out.status)))
            return out

        return call

    monkeypatch.setattr(S, "make_loop", recording)
    checked = _checked(FAN_OUT)
    got = build(checked, explorer="device")
    assert got.num_states == 516 and got.num_transitions == 1027
    assert_same_model(got, build(checked, explorer="host"))
    # watching, stopped for the narrow levels; then short steps to the end
    assert runs == [(False, S.NARROW_LEVELS), (True, S.RUNNING)], runs
