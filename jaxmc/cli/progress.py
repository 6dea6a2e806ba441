"""Progress of a state-space exploration on stderr: a line rewritten in
place on a terminal, plain lines every `INTERVAL` seconds otherwise (a log
file, a pipe, a batch job), so that a build that runs away is never silent.
The builder only calls back (`jaxmc.explore.BuildProgress`); printing is
the command line's business."""

from __future__ import annotations

import os
import sys
import time


#: Seconds between two progress lines when stderr is not a terminal (a
#: build shorter than this prints none).
INTERVAL = 5.0


def resident_bytes() -> int | None:
    """This process's resident memory (Linux), else its peak, else None."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024
    except (ImportError, OSError):
        return None


class ExplorationProgress:
    """The `progress` callback of `jaxmc.load_model` for the command line."""

    def __init__(self, tty: bool, enabled: bool = True):
        self.tty = tty
        self.enabled = enabled
        self.line = False  # a `\r` line is on the terminal
        self._last = None

    def __call__(self, p) -> None:
        if not self.enabled:
            return
        rate = p.states / p.elapsed if p.elapsed > 0 else 0.0
        rss = resident_bytes()
        mem = f", memory {rss / (1 << 30):.2f} GiB" if rss is not None else ""
        text = (
            f"exploring: {p.states:,} states, {p.levels:,} levels, "
            f"{p.queued:,} queued, "
            f"{rate:,.0f} states/s{mem}, {p.elapsed:.1f} s"
        )
        if self.tty:
            if not p.done:
                print(f"\r{text:<100}", end="", file=sys.stderr, flush=True)
                self.line = True
            return
        now = time.monotonic()
        if p.done:
            if (
                self._last is not None
            ):  # the build was long enough to report: say it ended
                print(
                    text.replace("exploring:", "explored:", 1),
                    file=sys.stderr,
                    flush=True,
                )
            return
        due = self._last is None and p.elapsed >= INTERVAL
        if due or (self._last is not None and now - self._last >= INTERVAL):
            print(text, file=sys.stderr, flush=True)
            self._last = now

    def end(self) -> None:
        """Clear the terminal line, if one was written."""
        if self.line:
            print("\r" + " " * 100 + "\r", end="", file=sys.stderr, flush=True)
            self.line = False
