"""Where the time of a property check goes: `precompute` (graph algorithms:
prob0/prob1, BSCCs, end components, bounds), `layout` (building device
matrices) and `solve` (the numerical solve, the host-device transfers of its
inputs and results included), and `compile` (JAX tracing, lowering and
backend compilation, or loading from the persistent compilation cache,
wherever it happens: it is taken out of the stage it happens in).

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

STAGES = ("precompute", "layout", "solve", "compile")

#: JAX's compile events (`jax.monitoring`): every duration under this
#: prefix (tracing, lowering to MLIR, backend compilation) is compile time.
#: A persistent-cache hit is reported as a backend compilation after a
#: cache-hit event, so compilations are backend events less cache hits.
_COMPILE_PREFIX = "/jax/core/compile/"
_BACKEND = "/jax/core/compile/backend_compile_duration"
_CACHE_HIT = "/jax/compilation_cache/cache_hits"
_TOTALS = {"seconds": 0.0, "backend": 0, "hits": 0}
_listening = False


def _on_duration(name: str, secs: float, **_) -> None:
    if not name.startswith(_COMPILE_PREFIX):
        return
    _TOTALS["seconds"] += secs
    if name == _BACKEND:
        _TOTALS["backend"] += 1
    state = _STATE.get()
    if state is None:
        return
    times, stack = state
    times["compile"] = times.get("compile", 0.0) + secs
    if stack:  # not the running stage's time
        stack[-1][1] += secs


def _on_event(name: str, **_) -> None:
    if name == _CACHE_HIT:
        _TOTALS["hits"] += 1


def listen() -> None:
    """Start counting JAX's compilations (once per process)."""
    global _listening
    if _listening:
        return
    from jax import monitoring

    monitoring.register_event_duration_secs_listener(_on_duration)
    monitoring.register_event_listener(_on_event)
    _listening = True


def compile_totals() -> tuple[float, int]:
    """Seconds spent compiling and the number of backend compilations (not
    counting persistent-cache hits) in this process since `listen()`."""
    listen()
    return _TOTALS["seconds"], _TOTALS["backend"] - _TOTALS["hits"]


@contextlib.contextmanager
def collect():
    """Collect the stage times of the numerics run inside; yields the dict
    (stage -> seconds), filled in as stages end (`compile` as compilations
    happen)."""
    listen()
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
