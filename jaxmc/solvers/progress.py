"""Progress of long iterative solves: iterations and residual, reported
from inside the jitted loops to a host function (the CLI's progress line).

A loop reports only when a reporter is set *when it is traced* and its
vector is long (`MIN_STATES`), every `EVERY` iterations, through
`jax.debug.callback`. Why so guarded: an executable with a host callback is
not written to JAX's persistent compilation cache, and small models must
stay instant; the CLI sets the reporter only when stderr is a terminal.
A function traced before `set_reporter` keeps not reporting (jit's cache),
and one traced with a reporter keeps calling whatever is set then (nothing
when it is unset again).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import jax
import numpy as np
from jax import lax


#: Vector length from which loops report (smaller solves finish quickly).
MIN_STATES = 1 << 16
#: Iterations between reports (a report costs a host round trip).
EVERY = 512

_reporter: Callable[[int, float], None] | None = None


def set_reporter(fn: Callable[[int, float], None] | None) -> None:
    """Send `(iterations, residual)` of long solves traced from now on to
    `fn` (None: stop)."""
    global _reporter
    _reporter = fn


def _emit(it, res) -> None:
    fn = _reporter
    if fn is not None:  # (max: robust to a batched call)
        fn(int(np.max(it)), float(np.max(res)))


def report(it, residual, n: int, step: int = 1) -> None:
    """In a loop body (traced): report `(it, residual)` when `it` has just
    passed a multiple of `EVERY` (`step`: iterations per loop trip), if a
    reporter is set and the solve has at least `MIN_STATES` entries."""
    if _reporter is None or n < MIN_STATES:
        return
    lax.cond(
        it % EVERY < step,
        lambda: jax.debug.callback(_emit, it, residual),
        lambda: None,
    )


def report_host(it: int, residual: float, n: int, every: int = 16) -> None:
    """`report` for a loop on the host (no tracing): every `every`
    iterations."""
    if _reporter is not None and n >= MIN_STATES and it % every == 0:
        _reporter(it, residual)


class Throttle:
    """Calls `fn(iterations, residual, elapsed_s)` at most every `period`
    seconds, from the first report on."""

    def __init__(self, fn: Callable[[int, float, float], None], period: float = 0.5):
        self.fn, self.period = fn, period
        self.start = time.perf_counter()
        self.last = -float("inf")

    def restart(self) -> None:
        self.start = time.perf_counter()
        self.last = -float("inf")

    def __call__(self, it: int, res: float) -> None:
        now = time.perf_counter()
        if now - self.last >= self.period:
            self.last = now
            self.fn(it, res, now - self.start)
