"""Where the time of a property check goes: `precompute` (graph algorithms:
prob0/prob1, BSCCs, end components, bounds), `layout` (building device
matrices) and `solve` (the numerical solve, the host-device transfers of its
inputs and results included).

The numerics helpers mark their stages with `stage(name)`; a caller that
wants the breakdown wraps the work in `collect()`. A stage inside another
pauses the outer one, so every second is counted in one stage at most: the
stages never overlap and their sum is at most the wall time. Every stage
ends with its results on the host (numpy) or waited for
(`jax.block_until_ready`), so asynchronous device work is counted where it
was started.
"""

from __future__ import annotations

import contextlib
import contextvars
import time


_STATE: contextvars.ContextVar[tuple[dict, list] | None] = contextvars.ContextVar(
    "_STATE", default=None
)

STAGES = ("precompute", "layout", "solve")


@contextlib.contextmanager
def collect():
    """Collect the stage times of the numerics run inside; yields the dict
    (stage -> seconds), filled in as stages end."""
    times: dict[str, float] = {}
    token = _STATE.set((times, []))
    try:
        yield times
    finally:
        _STATE.reset(token)


@contextlib.contextmanager
def stage(name: str):
    """Count the time inside towards `name` (if something collects)."""
    state = _STATE.get()
    if state is None:
        yield
        return
    times, stack = state
    now = time.perf_counter()
    if stack:  # pause the enclosing stage
        outer = stack[-1]
        times[outer[0]] = times.get(outer[0], 0.0) + now - outer[1]
    stack.append([name, now])
    try:
        yield
    finally:
        now = time.perf_counter()
        _, start = stack.pop()
        times[name] = times.get(name, 0.0) + now - start
        if stack:  # resume it
            stack[-1][1] = now
