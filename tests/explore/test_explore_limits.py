"""Runaway and deadlocked state spaces: `max_states` names the variables that
keep growing, memory is checked before large allocations, deadlocks are
listed under `deadlocks="error"`, and progress reports BFS levels."""

import numpy as np
import pytest

from jaxmc.errors import ExplorationError
from jaxmc.explore import BuildProgress, build, builder, memory
from jaxmc.lang import parse_model
from jaxmc.semantics import check_program


COUNTER = """dtmc
module m
  x : [0..1000000000] init 0;
  b : bool init false;
  [] true -> (x'=min(x+1,1000000000));
endmodule
"""

CHAIN = """dtmc
module m
  x : [0..{n}] init 0;
  [] x<{n} -> (x'=x+1);
  [] x={n} -> true;
endmodule
"""

TWO_COUNTERS = """mdp
module m
  x : [0..100000] init 0;
  y : [0..100000] init 0;
  z : [0..3] init 2;
  [a] x<100000 -> (x'=x+1);
  [b] y<100000 -> (y'=y+1);
endmodule
"""


def _build(text, file="m.pm", **kw):
    return build(check_program(parse_model(text, file), source=text, file=file), **kw)


def test_max_states_names_the_growing_counter():
    with pytest.raises(ExplorationError) as e:
        _build(COUNTER, max_states=1000)
    msg = str(e.value)
    assert "more than 1,000 states (max_states)" in msg
    assert "`x` now 0..999 (declared [0..1000000000])" in msg
    assert "`b`" not in msg.split("hint:")[0]  # constant: not growing
    assert "BFS levels" in msg and "1,000 states found" in msg
    assert msg.startswith("m.pm:3:3: error:")  # at the declaration of `x`


def test_max_states_names_both_counters_not_the_constant_one():
    with pytest.raises(ExplorationError) as e:
        _build(TWO_COUNTERS, max_states=5000)
    msg = str(e.value).split("hint:")[0]
    assert "`x` now 0.." in msg and "`y` now 0.." in msg and "`z`" not in msg


def test_max_states_without_a_growing_variable_says_so():
    # 2^16 states reached in 16 levels: every variable's range is full at once.
    text = "dtmc\nmodule m\n" + "".join(
        f"  b{i} : bool init false;\n" for i in range(16)
    )
    text += (
        "  [] true -> "
        + " + ".join(f"1/16:(b{i}'=!b{i})" for i in range(16))
        + ";\nendmodule\n"
    )
    with pytest.raises(ExplorationError, match="no variable's range widened"):
        _build(text, max_states=30000)


def test_memory_check_stops_before_the_state_table_outgrows_the_machine(monkeypatch):
    monkeypatch.setattr(memory, "MIN_CHECKED_BYTES", 1)
    monkeypatch.setattr(memory, "available_bytes", lambda: 20_000)
    # doubling the keys (2,048 x 8 bytes) and the int32 slots (4,096 x 4)
    with pytest.raises(
        ExplorationError,
        match=r"would need ~32.0 KiB more for the table of "
        r"visited states at 1,024 states; the machine has 19.5 KiB available",
    ):
        _build(COUNTER)


def test_memory_check_before_assembling(monkeypatch):
    text = CHAIN.format(n=9)
    assert _build(text).num_states == 10  # fits
    monkeypatch.setattr(memory, "MIN_CHECKED_BYTES", 1)
    monkeypatch.setattr(memory, "available_bytes", lambda: 10)
    with pytest.raises(ExplorationError, match="the machine has"):
        _build(text)


def test_available_bytes_reads_the_machine():
    avail = memory.available_bytes()
    assert avail is None or avail > 0


def test_deadlocks_error_lists_the_first_five_with_values():
    text = "dtmc\nmodule m\n  x : [0..20] init 0;\n  b : bool init true;\n"
    text += "  [] x<5 -> 0.5:(x'=2*x+6) + 0.5:(x'=x+1);\nendmodule\n"
    with pytest.raises(ExplorationError) as e:
        _build(text, deadlocks="error")
    msg = str(e.value)
    assert msg.startswith("m.pm:1:1: error: the model has 6 deadlock states")
    listed = [ln.strip() for ln in msg.splitlines() if ln.startswith("  (")]
    assert len(listed) == 5 and all(ln.endswith(", b=true)") for ln in listed)
    assert "... and 1 more" in msg and "-fixdl" in msg
    fixed = _build(text)  # PRISM's default: self-loops
    assert int(fixed.labels["deadlock"].sum()) == 6


def test_progress_reports_levels_and_ends_done(monkeypatch):
    monkeypatch.setattr(builder, "PROGRESS_INTERVAL", 0.0)
    text = CHAIN.format(n=30)
    calls: list[BuildProgress] = []
    m = _build(text, progress=calls.append)
    assert m.num_states == 31
    levels = [c.levels for c in calls if not c.done]
    assert levels == sorted(levels) and levels[-1] == 31
    assert calls[-1].done and calls[-1].states == 31 and calls[-1].queued == 0


def test_compacting_per_batch_arrays_keeps_the_model(monkeypatch):
    text = """mdp
module m
  x : [0..40] init 0;
  [a] x<40 -> 0.5:(x'=x+1) + 0.5:(x'=max(x-1,0));
  [b] x<40 -> (x'=min(x+2,40));
  [] x=40 -> true;
endmodule
rewards "r" [a] true : 2; x=3 : 1; endrewards
"""
    ref = _build(text)
    monkeypatch.setattr(builder, "COMPACT_EVERY", 3)
    got = _build(text)
    for field in ("choice_ptr", "row_ptr", "col", "val", "states"):
        assert np.array_equal(getattr(ref, field), getattr(got, field)), field
    assert got.choice_action == ref.choice_action
    assert np.array_equal(got.rewards[0].transition, ref.rewards[0].transition)
    assert np.array_equal(got.provenance.product, ref.provenance.product)
