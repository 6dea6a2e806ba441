"""The host builder cuts a BFS level into batches by the entries they make
(`builder.ENTRY_BUDGET`), and cuts a batch again where its states make too
many (`expand.expand`); the model and the errors must not depend on where
the cuts fall: they equal those of batches of `chunk_size` states."""

import numpy as np
import pytest

from jaxmc.errors import ExplorationError
from jaxmc.explore import build, builder
from jaxmc.lang import parse_model
from jaxmc.semantics import check_program


# Actions first met in different levels and `chunk_size` slices, in an
# order other than that of their commands; a module that synchronises.
ACTIONS_MDP = """mdp
module m
  x : [0..30] init 0;
  y : [0..30] init 0;
  [c] x<30 & y>20 -> (x'=x+1);
  [b] x<30 -> 0.5:(x'=x+1) + 0.5:(y'=min(y+1,30));
  [a] y<30 & x>12 -> (y'=y+1);
  [d] x=30 -> (y'=0);
  [] y=30 -> (x'=0);
endmodule
module n
  z : [0..2] init 0;
  [a] true -> (z'=mod(z+1,3));
  [e] z=2 & x>25 -> (z'=0);
endmodule
rewards "r"
  [a] true : 1;
  [b] x>3 : x/2;
  y>5 : 1;
endrewards
"""

# Both actions first met in the second level, `b` at its first state.
TWO_NAMES = """mdp
module m
  x : [0..3] init 0;
  [go] x=0 -> 0.5:(x'=1) + 0.5:(x'=2);
  [a] x=2 -> (x'=3);
  [b] x=1 -> (x'=3);
  [] x=3 -> true;
endmodule
"""

ACTIONS_DTMC = """dtmc
module m
  x : [0..40] init 0;
  y : [0..40] init 0;
  [s] x<40 & y>30 -> (x'=x+1);
  [t] x<40 -> 0.5:(x'=x+1) + 0.5:(y'=min(y+1,40));
  [u] y<40 & x>17 -> 0.5:(y'=y+1) + 0.5:(x'=min(x+1,40));
  [] x=40 -> (y'=0);
endmodule
"""

# One wide level (the second), a negative probability early in it
# and a range error late in it: expanded as one batch, the range error
# (evaluated before the signs) is the model's error.
TWO_ERRORS = """dtmc
module m
  x : [0..99] init 0;
  y : [0..2] init 2;
  [] y=2 -> 0.1:(x'=0)&(y'=0) + 0.1:(x'=10)&(y'=0) + 0.1:(x'=20)&(y'=0)
    + 0.1:(x'=30)&(y'=0) + 0.1:(x'=40)&(y'=0) + 0.1:(x'=50)&(y'=0)
    + 0.1:(x'=60)&(y'=0) + 0.1:(x'=70)&(y'=0) + 0.1:(x'=80)&(y'=0)
    + 0.1:(x'=90)&(y'=0);
  [] y=0 & x!=10 & x!=90 -> (y'=1);
  [] y=0 & x=10 -> (x-11):(y'=1) + (12-x):(y'=1);
  [] y=0 & x=90 -> (x'=x+10);
  [] y=1 -> true;
endmodule
"""

TWO_COUNTERS = """mdp
module m
  x : [0..100000] init 0;
  y : [0..100000] init 0;
  [a] x<100000 -> 0.5:(x'=x+1) + 0.5:(y'=min(y+2,100000));
  [b] y<100000 -> (y'=y+1);
endmodule
"""


def _build(text, file="m.pm", **kw):
    return build(check_program(parse_model(text, file), source=text, file=file), **kw)


def _tiny_batches(monkeypatch):
    """Batches of one state (whatever the entries)."""
    monkeypatch.setattr(builder, "ENTRY_BUDGET", 1)
    monkeypatch.setattr(builder, "MIN_BATCH", 1)


def _cut_batches(monkeypatch):
    """Batches of 64 states asked for, each cut after its states' first 4
    entries (at least one state) once they make more than 6."""
    monkeypatch.setattr(builder, "ENTRY_BUDGET", 4)
    monkeypatch.setattr(builder, "MIN_BATCH", 64)


BATCHES = {"tiny": _tiny_batches, "cut": _cut_batches}


def _fields(m):
    out = {
        k: np.asarray(getattr(m, k))
        for k in ("states", "initial_states", "choice_ptr", "row_ptr", "col", "val")
    }
    out["labels"] = {k: v.tolist() for k, v in m.labels.items()}
    out["rewards"] = [
        (r.name, None if r.state is None else r.state.tolist(),
         None if r.transition is None else r.transition.tolist())
        for r in m.rewards
    ]  # fmt: skip
    out["choice_action"] = m.choice_action
    out["entry_action"] = None if m.entry_action is None else m.entry_action.tolist()
    out["action_names"] = m.action_names
    out["warnings"] = m.warnings
    p = m.provenance
    out["prov"] = (
        None if p.entry_ptr is None else p.entry_ptr.tolist(),
        None if p.weight is None else p.weight.tolist(),
        p.products[p.product].tolist(),
    )
    return out


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
        else:
            assert a[k] == b[k], k


@pytest.mark.parametrize("batches", BATCHES)
@pytest.mark.parametrize("text", [TWO_NAMES, ACTIONS_MDP, ACTIONS_DTMC])
@pytest.mark.parametrize("chunk_size", [7, 64, 1 << 17])
def test_model_does_not_depend_on_batches(monkeypatch, text, chunk_size, batches):
    whole = _fields(_build(text, chunk_size=chunk_size))
    BATCHES[batches](monkeypatch)
    _assert_same(whole, _fields(_build(text, chunk_size=chunk_size)))


def _error(text, **kw):
    with pytest.raises(ExplorationError) as e:
        _build(text, **kw)
    return str(e.value)


@pytest.mark.parametrize(
    "text, kw",
    [
        (TWO_ERRORS, {}),
        (TWO_COUNTERS, {"max_states": 3000}),
        (TWO_COUNTERS, {"max_states": 3000, "chunk_size": 50}),
        (ACTIONS_DTMC.replace("[] x=40 -> (y'=0);", ""), {"deadlocks": "error"}),
    ],
)
@pytest.mark.parametrize("batches", BATCHES)
def test_errors_do_not_depend_on_batches(monkeypatch, text, kw, batches):
    whole = _error(text, **kw)
    BATCHES[batches](monkeypatch)
    assert _error(text, **kw) == whole


def test_actions_numbered_in_the_order_of_their_vectors(monkeypatch):
    _tiny_batches(monkeypatch)
    assert _build(TWO_NAMES).action_names == (None, "go", "a", "b")


def test_two_errors_in_one_batch_the_range_error_first():
    msg = _error(TWO_ERRORS)
    assert "outside its range" in msg and "x=90" in msg
