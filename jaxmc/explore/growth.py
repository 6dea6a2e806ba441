"""What an exploration that runs away is doing: BFS levels, and the range of
values each variable has taken so far.

A state space that does not end is almost always a variable that only grows
(a counter, a queue length, a clock) with a huge declared range. The
builder records, level by level, the smallest and largest value of every
variable in the states it has expanded; the variables whose range still
widens in the second half of the levels are the ones to look at, and the
error of `max_states` names them with their current ranges.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BuildProgress:
    """One progress report of the exploration (see `jaxmc.explore.build`'s
    `progress`): states found, states still queued, BFS levels completed,
    seconds since the build started, and whether the exploration is over."""

    states: int
    queued: int
    levels: int
    elapsed: float
    done: bool = False


class Growth:
    """Per-variable ranges of the expanded states, snapshotted at BFS levels
    that are powers of two (so that memory stays logarithmic in the number of
    levels).

    With `decode(lo, hi)` (the valuations `[hi - lo, n_vars]` of the states
    numbered `lo..hi-1`) the ranges are read from the states themselves when
    they are needed (`upto`): at the snapshots and when a message asks,
    never per BFS level, so that the cost is one pass over the states."""

    #: States decoded at a time by `upto` (the decoded chunk and its
    #: columns are temporaries of ~12 bytes per state and variable).
    STEP = 1 << 16

    def __init__(self, n_vars: int, decode=None):
        self.lo = np.full(n_vars, np.iinfo(np.int64).max, dtype=np.int64)
        self.hi = np.full(n_vars, np.iinfo(np.int64).min, dtype=np.int64)
        self.levels = 0
        self._snapshots: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._decode = decode
        self._seen = 0  # states whose values `lo`/`hi` hold

    def expanded(self, states: np.ndarray) -> None:
        """Record the valuations `[n, n_vars]` of a batch being expanded."""
        if states.shape[0] and states.shape[1]:
            np.minimum(self.lo, states.min(axis=0), out=self.lo)
            np.maximum(self.hi, states.max(axis=0), out=self.hi)

    def upto(self, end: int) -> None:
        """Record the states numbered below `end` (with `decode`)."""
        while self._decode is not None and self._seen < end:
            stop = min(end, self._seen + self.STEP)
            self.expanded(self._decode(self._seen, stop))
            self._seen = stop

    def level_done(self, end: int = 0) -> None:
        """A BFS level has been expanded completely (the states below `end`)."""
        self.levels += 1
        if self.levels & (self.levels - 1) == 0:  # 1, 2, 4, 8, ... levels done
            self.upto(end)
            self._snapshots[self.levels] = (self.lo.copy(), self.hi.copy())

    def growing(self) -> tuple[np.ndarray, int]:
        """Indices of the variables whose range widened since the snapshot
        nearest below half the levels completed, and that snapshot's level."""
        if not self._snapshots:
            return np.zeros(0, dtype=np.int64), 0
        level = max([k for k in self._snapshots if k <= self.levels // 2] or [1])
        lo, hi = self._snapshots[level]
        wider = (self.lo < lo) | (self.hi > hi)
        return np.flatnonzero(wider), level


def describe(
    growth: Growth, variables, found: int, queued: int
) -> tuple[str, int | None]:
    """The part of a too-many-states message about where the states come
    from, and the index of the first growing variable (or None)."""
    idx, since = growth.growing()
    where = (
        f"{found:,} states found after {growth.levels:,} BFS levels, "
        f"{queued:,} still queued"
    )
    if idx.size == 0:
        return (
            f"{where}; no variable's range widened since level {since:,}: the new "
            "states are new combinations of values already seen",
            None,
        )
    parts = []
    for i in idx[:8].tolist():
        v = variables[i]
        parts.append(
            f"`{v.name}` now {int(growth.lo[i])}..{int(growth.hi[i])} "
            f"(declared [{v.low}..{v.high}])"
        )
    more = f" and {idx.size - 8} more" if idx.size > 8 else ""
    return (
        f"{where}; the variables whose range keeps widening (since level {since:,}): "
        + ", ".join(parts)
        + more,
        int(idx[0]),
    )
