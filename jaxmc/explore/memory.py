"""How much memory the machine has left, and a check before the builder's
large allocations: an exploration that cannot fit stops with an
`ExplorationError` saying how much it would need, instead of being killed
by the operating system (or swapping the machine to a standstill)."""

from __future__ import annotations

import os

from ..errors import ExplorationError


#: Allocations below this size are not checked (reading the available memory
#: costs a system call; small allocations cannot be what exhausts it).
MIN_CHECKED_BYTES = 256 << 20


def size(nbytes: int) -> str:
    """`nbytes` in GiB (MiB, KiB below one)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes / 1024:.1f} KiB"


def available_bytes() -> int | None:
    """Memory available to a new allocation without swapping: Linux's
    `MemAvailable` (/proc/meminfo), else the free physical pages; None where
    neither can be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def ensure(nbytes: int, what: str, progress: str = "") -> None:
    """Raise `ExplorationError` if allocating `nbytes` more for `what` would
    exceed the available memory (checked from `MIN_CHECKED_BYTES` up).
    `progress` (e.g. "after 3,000,000 states") goes into the message."""
    if nbytes < MIN_CHECKED_BYTES:
        return
    avail = available_bytes()
    if avail is None or nbytes <= avail:
        return
    where = f" {progress}" if progress else ""
    raise ExplorationError(
        f"building the state space would need ~{size(nbytes)} more for {what}"
        f"{where}; the machine has {size(avail)} available",
        hint="check the model's variable ranges (a counter that only grows makes the "
        "state space as large as its range), use smaller constants, or stop early "
        "with max_states (--max-states)",
    )
