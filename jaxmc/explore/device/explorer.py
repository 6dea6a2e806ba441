"""The host side of the device explorer: capacities, growth, resumption.

The level loop (`step.make_loop`) runs on the device until the queue is
empty or a capacity would overflow; then the host grows what was short by
a large factor (geometric growth, so a state space of `n` states costs
`O(log n)` round trips and compilations, however many BFS levels it has)
and resumes it. Loops are kept by program signature (`Program.signature`:
the generated code and static tables, not the constants' values), so a
model built again, or under other constants in the same capacities,
reuses them.

Where the device cannot give the host builder's answer — an evaluation error,
a probability sum off one, `max_states` exceeded, deadlocks under
`deadlocks="error"` — it raises `NeedsHost`: the caller runs the host
builder, which raises the located error with the exact message.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

import jax
import numpy as np

from ...errors import UnsupportedError
from ...lang.ast import ModelType
from ..compile import Compiled
from ..growth import BuildProgress
from ..model import ExplicitModel
from . import step as S
from .finish import DeviceArrays, finish
from .program import Program


class NeedsHost(Exception):  # noqa: N818 - a signal to the caller, not an error
    """The device explorer cannot reproduce the host builder's outcome (an
    error to locate); the caller runs the host builder instead."""


#: Starting capacities per backend (`Caps`: states per step; choices and
#: entries per step; states; contributions and choices per output epoch),
#: and the largest number of states per step. Every change of a capacity
#: compiles the loop again, so capacities start large where memory is
#: plentiful and grow by large factors: the state store by `STORE_GROWTH`,
#: the step by `BATCH_GROWTH`. On a GPU a step costs about the same for a
#: thousand states as for tens of thousands (it is bound by kernel launches),
#: so it starts wide.
START = {
    "cpu": S.Caps(256, 1024, 4096, 1 << 16, 1 << 20, 1 << 19),
    "gpu": S.Caps(1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 24, 1 << 22),
}
MAX_BATCH = {"cpu": 1 << 14, "gpu": 1 << 16}
#: The step buffers (states, choices, entries) for a queue of at most that
#: many states, beside the full step (`step.make_loop`'s `short`): on the
#: CPU a step costs in proportion to its buffers, so a narrow BFS level
#: takes a short step; on a GPU a step costs its kernel launches whatever
#: its width, and a second step would only add compilation.
SHORT_STEP = {"cpu": (16, 64, 256), "gpu": None}
#: The step's choices and entries grow past the first state's needs up to
#: this many (`step.NARROW`).
MAX_ENTRIES = {"cpu": 1 << 20, "gpu": 1 << 23}
#: The state store is sized for every valuation of the variables up front
#: (it then never grows, and the loop never checks it) where there are at
#: most this many: memory is `(12 w + 20)` bytes per valuation for keys of
#: `w` words (keys, levels, a hash table at most half full).
BOUNDED = {"cpu": 1 << 22, "gpu": 1 << 25}
#: Growth factors of the state store, of the states per step (and of the
#: step's buffers with it), and of the step's buffers alone.
STORE_GROWTH = 4
BATCH_GROWTH = 4
STEP_GROWTH = 4


def _start(
    comp: Compiled, n_init: int, start: S.Caps, kind: str
) -> tuple[S.Caps, bool]:
    """Initial capacities, and whether the state store holds every
    valuation of the variables."""
    valuations = 1
    for lo, hi in zip(comp.lows.tolist(), comp.highs.tolist()):
        valuations *= hi - lo + 1
    states = start.states
    bounded = valuations <= max(states, BOUNDED[kind])
    if bounded:
        # (never below the starting store: small programs then share the
        # capacities, and with them the compilations of the program-free
        # functions, `finish`'s and the store's)
        states = max(states, 1 << max(0, valuations - 1).bit_length())
    while states < n_init:
        states *= STORE_GROWTH
    return start._replace(states=states), bounded


def _grown(caps: S.Caps, s: S.Carry, kind: str) -> S.Caps:
    """The capacities that let the stopped loop `s` go on."""
    status = int(s.status)
    need = [int(x) for x in np.asarray(s.need)]
    c = caps._asdict()
    if status == S.NEED_STEP:
        # A starved step's needs, up to `MAX_ENTRIES`; the first state's, all.
        top = MAX_ENTRIES[kind]
        for k, i in (("choices", 0), ("entries", 1)):
            goal = max(need[i + 4], min(need[i], top))
            while c[k] < goal:
                c[k] *= STEP_GROWTH
            if goal <= top:
                c[k] = min(c[k], max(top, caps._asdict()[k]))
    elif status == S.NEED_STORE:
        while int(s.table.size) + need[3] > c["states"]:
            c["states"] *= STORE_GROWTH
    elif status == S.NEED_BATCH:
        for k in ("batch", "choices", "entries"):
            c[k] *= BATCH_GROWTH
    c["contribs"] = max(c["contribs"], 4 * c["entries"])
    c["all_choices"] = max(c["all_choices"], 4 * c["choices"])
    if c["states"] >= 1 << 31:
        raise NeedsHost("more than 2**31 states")
    return S.Caps(**c)


#: The jitted loops of recent programs, by program signature, capacities and
#: options: a program built again, or under other constants with the same
#: generated code, compiles nothing.
_LOOPS: OrderedDict = OrderedDict()
LOOPS_KEPT = 32


def _loop(prog: Program, caps: S.Caps, opts: tuple, kind: str, narrow: bool):
    """The loop for these capacities; with `narrow` (the levels were
    narrow), with short steps where `SHORT_STEP` gives them, else watching
    for narrow levels."""
    short = S.short_caps(caps, SHORT_STEP[kind])
    watch = None
    if not narrow and short is not None:
        short, watch = None, short.batch
    key = (prog.signature, caps, opts, short, watch, S.NARROW_TRIPS)
    run = _LOOPS.get(key)
    if run is None:
        run = _LOOPS[key] = S.make_loop(prog, caps, opts, short, watch)
        while len(_LOOPS) > LOOPS_KEPT:
            _LOOPS.popitem(last=False)
    _LOOPS.move_to_end(key)
    return run


def backend_kind() -> str:
    """The key of the per-backend settings (`START`, `MAX_BATCH`, ...):
    "cpu", or "gpu" for any accelerator."""
    return "cpu" if jax.default_backend() == "cpu" else "gpu"


def check_supported(mt: ModelType, prob_checks: bool) -> None:
    """Raise `UnsupportedError` for what no device explorer does."""
    if mt == ModelType.DTMC and not prob_checks:
        raise UnsupportedError(
            "the device explorer does not normalise DTMC rows (prob_checks=False)",
            hint="use explorer='host'",
        )


def explore(
    comp: Compiled,
    mt: ModelType,
    init_states: np.ndarray,
    *,
    params=None,
    max_states: int | None = None,
    deadlocks: str = "fix",
    prob_checks: bool = True,
    chunk_size: int = 1 << 17,
    progress: Callable[[BuildProgress], None] | None = None,
    start: S.Caps | None = None,
    max_batch: int | None = None,
) -> tuple[ExplicitModel, DeviceArrays]:
    """Explore on the device (see `jaxmc.explore.build`; `chunk_size` is the
    host builder's batch size, which its numbering of action names depends
    on). Raises `UnsupportedError` for programs the device explorer does not
    handle and `NeedsHost` where the host builder must give the outcome."""
    t0 = time.perf_counter()
    check_supported(mt, prob_checks)
    prog = Program(comp, mt, params)
    kind = backend_kind()
    k = init_states.shape[0]
    caps, bounded = _start(comp, k, start or START[kind], kind)
    max_batch = max_batch or MAX_BATCH[kind]
    s = S.seed(prog, S.empty_carry(caps, prog.pack.n_words), init_states)
    epochs: list[S.Epoch] = []
    narrow = False  # (the loop found narrow levels: short steps from then on)
    opts = (prob_checks, -1 if max_states is None else max_states)
    while True:
        # (below the cap, a starved step always grows one of the two)
        grow_step = max(caps.entries, caps.choices) < MAX_ENTRIES[kind]
        flags = (caps.batch < max_batch, bounded, grow_step)
        run = _loop(prog, caps, opts + flags, kind, narrow)
        s = run(s, prog.values)
        status = int(s.status)
        if status == S.ERROR:
            raise NeedsHost("an evaluation error")
        if status == S.TOO_MANY:
            raise NeedsHost("more states than max_states")
        epochs.append(S.epoch(s))
        if status == S.RUNNING:
            break
        narrow = narrow or status == S.NARROW_LEVELS
        keep = status in (S.FLUSH, S.NARROW_LEVELS)
        new = caps if keep else _grown(caps, s, kind)
        s = S.regrow(s, new)
        caps = new
    n = int(s.table.size)
    if max_states is not None and n > max_states:
        raise NeedsHost("more states than max_states")
    model, arrays, failed = finish(
        prog, s, epochs, np.arange(k, dtype=np.int64), prob_checks, chunk_size
    )
    if failed:
        raise NeedsHost("a transition reward's evaluation error")
    if model is None:
        raise NeedsHost("an entry merging more than 129 contributions")
    if deadlocks == "error" and model.labels["deadlock"].any():
        raise NeedsHost("deadlocks")
    if progress is not None:
        levels = int(np.asarray(s.level[n - 1])) + 1 if n else 0
        progress(BuildProgress(n, 0, levels, time.perf_counter() - t0, True))
    return model, arrays
