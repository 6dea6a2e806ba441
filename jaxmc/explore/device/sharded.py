"""The device explorer partitioned over several devices (`devices=`): the
host side: the mesh, capacities, growth and resumption, and the result.

Each device owns the states its hash selects, holds their table shard and
expands them; successors go to their owners by `all_to_all` once per step,
level by level (`sharded_step`). A capacity that would overflow on any
device stops the loop on all of them; the host grows it (for every device:
shapes are the same everywhere) and resumes, as the single-device
explorer does (`explorer`). At the end the devices' states and
contributions are brought to the host and renumbered in global BFS order
(`sharded_order`), and the single-device `finish` merges the rows: the
`ExplicitModel` is the single-device explorer's (and the host builder's),
bit for bit, whatever the number of devices.

Where the host builder must give the outcome (an evaluation error,
`max_states`, deadlocks under `deadlocks="error"`, ...) this raises
`NeedsHost`, as `explorer.explore` does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh

from ..._mesh import make_mesh as _make_mesh
from ...lang.ast import ModelType
from ..compile import Compiled
from ..growth import BuildProgress
from ..model import ExplicitModel
from . import sharded_step as S
from .explorer import (
    BATCH_GROWTH,
    MAX_BATCH,
    STEP_GROWTH,
    STORE_GROWTH,
    NeedsHost,
    backend_kind,
    check_supported,
)  # fmt: skip
from .finish import MIN_BUCKET, DeviceArrays, bucket, finish
from .program import Program
from .sharded_order import Local, bfs_order
from .step import Epoch


#: Starting capacities per device (`sharded_step.PCaps`), per backend.
START = {
    "cpu": S.PCaps(256, 1024, 4096, 4096, 1 << 16, 1 << 15, 1024, 256),
    "gpu": S.PCaps(
        1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 21, 1 << 16, 1024
    ),  # fmt: skip
}
#: Growth factor of the exchange buckets and of the level statistics.
XCHG_GROWTH = 4
LEVEL_GROWTH = 4


def make_mesh(devices) -> Mesh:
    """The 1-D mesh of `devices` over the explorer's axis
    (`jaxmc._mesh.make_mesh`): a count, a sequence of `jax.Device`s or a
    `Mesh`."""
    return _make_mesh(devices, S.AXIS)


@dataclass
class ShardedStats:
    """What a partitioned exploration did: per BFS level `l`, the states of
    level `l + 1` each device found (`new[l, d]`) and the successors of
    level `l`'s states each device sent to another (`sent[l, d]`; each
    costs `4 w` bytes out and a 4-byte handle back, `bytes_per_successor`);
    the loop's runs (`rounds`: one plus the stops to grow or flush) and the
    capacities it ended with."""

    devices: int
    states: int = 0
    levels: int = 0
    bytes_per_successor: int = 0
    rounds: int = 0
    new: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    sent: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    caps: S.PCaps | None = None


def _grown(caps: S.PCaps, s: S.PCarry) -> S.PCaps:
    """The capacities that let the stopped loop `s` go on (the largest need
    of any device)."""
    status = np.asarray(s.status)
    need = np.asarray(s.need).max(axis=0)
    size = int(np.asarray(s.table.size).max())
    c = caps._asdict()
    if (status == S.NEED_STEP).any():
        for k, i in (("choices", 0), ("entries", 1)):
            while c[k] < need[i]:
                c[k] *= STEP_GROWTH
    if (status == S.NEED_BATCH).any():
        for k in ("batch", "choices", "entries"):
            c[k] *= BATCH_GROWTH
    if (status == S.NEED_XCHG).any():
        while c["xchg"] < need[2]:
            c["xchg"] *= XCHG_GROWTH
    if (status == S.NEED_STORE).any():
        need_store = np.asarray(s.table.size) + np.asarray(s.need)[:, 3]
        while c["states"] < need_store.max():
            c["states"] *= STORE_GROWTH
    if (status == S.NEED_LEVELS).any():
        c["levels"] *= LEVEL_GROWTH
    c["contribs"] = max(c["contribs"], 4 * c["entries"])
    c["all_choices"] = max(c["all_choices"], 4 * c["choices"])
    if max(c["states"], size) * len(status) >= 1 << 31:
        raise NeedsHost("more than 2**31 state handles")
    return S.PCaps(**c)


_LOOPS: dict = {}
LOOPS_KEPT = 16


def _loop(prog: Program, caps: S.PCaps, opts: tuple, mesh: Mesh):
    key = (prog.signature, caps, opts, mesh)
    run = _LOOPS.get(key)
    if run is None:
        if len(_LOOPS) >= LOOPS_KEPT:
            _LOOPS.pop(next(iter(_LOOPS)))
        run = _LOOPS[key] = S.make_loop(prog, caps, opts, mesh)
    return run


class _Size(NamedTuple):
    size: int


class _Store(NamedTuple):
    """What `finish` reads of a loop's carry."""

    table: _Size
    keys: jax.Array
    level: np.ndarray


def explore_sharded(
    comp: Compiled,
    mt: ModelType,
    init_states: np.ndarray,
    devices,
    *,
    params=None,
    max_states: int | None = None,
    deadlocks: str = "fix",
    prob_checks: bool = True,
    chunk_size: int = 1 << 17,
    progress: Callable[[BuildProgress], None] | None = None,
    start: S.PCaps | None = None,
    max_batch: int | None = None,
) -> tuple[ExplicitModel, DeviceArrays, ShardedStats]:
    """Explore partitioned over `devices` (a count, a sequence of devices or
    a `Mesh`; see `explorer.explore` for the rest). Returns the model, its
    arrays on the default device and the `ShardedStats`."""
    t0 = time.perf_counter()
    check_supported(mt, prob_checks)
    mesh = make_mesh(devices)
    nd = int(mesh.devices.size)
    prog = Program(comp, mt, params)
    w = prog.pack.n_words
    kind = backend_kind()
    caps = start or START[kind]
    k = init_states.shape[0]
    while caps.states < k:
        caps = caps._replace(states=caps.states * STORE_GROWTH)
    max_batch = max_batch or MAX_BATCH[kind]
    s, init_handles = S.seed(
        S.empty_carry(caps, w, mesh), prog.pack.encode_host(init_states), mesh
    )
    opts = (prob_checks, -1 if max_states is None else max_states)
    epochs: list[tuple] = []
    stats = ShardedStats(nd, bytes_per_successor=4 * w + 4)
    while True:
        run = _loop(prog, caps, opts + (caps.batch < max_batch,), mesh)
        s = run(s, prog.values)
        stats.rounds += 1
        status = np.asarray(s.status)
        if (status == S.ERROR).any():
            raise NeedsHost("an evaluation error")
        if (status == S.TOO_MANY).any():
            raise NeedsHost("more states than max_states")
        epochs.append(_epoch(s))
        if (status == S.RUNNING).all():
            break
        new = _grown(caps, s)  # (the same capacities: a flush)
        s = S.regrow(s, new, mesh)
        caps = new
    sizes = np.asarray(s.table.size)
    n = int(sizes.sum())
    if max_states is not None and n > max_states:
        raise NeedsHost("more states than max_states")
    order = bfs_order(_locals(s, epochs, sizes), init_handles)
    levels = int(np.asarray(s.lvl)[0])
    stats.states, stats.levels, stats.caps = n, levels, caps
    stats.new = np.asarray(s.lv_new).T[:levels].astype(np.int64)
    stats.sent = np.asarray(s.lv_sent).T[:levels].astype(np.int64)
    model, arrays, failed = _finish(prog, order, k, prob_checks, chunk_size)
    if failed:
        raise NeedsHost("a transition reward's evaluation error")
    if model is None:
        raise NeedsHost("an entry merging more than 129 contributions")
    if deadlocks == "error" and model.labels["deadlock"].any():
        raise NeedsHost("deadlocks")
    if progress is not None:
        progress(BuildProgress(n, 0, levels, time.perf_counter() - t0, True))
    return model, arrays, stats


def _epoch(s: S.PCarry) -> tuple:
    """The output epochs of every device (device arrays) and their counts."""
    counts = np.asarray(s.n_contrib), np.asarray(s.n_choice)
    return (s.c_src, s.c_dst, s.c_prob, s.c_choice, s.c_code, counts[0],
            s.h_src, s.h_vec, counts[1])  # fmt: skip


def _locals(s: S.PCarry, epochs: list, sizes: np.ndarray) -> list[Local]:
    """Each device's states and epochs joined, on the host."""
    host = jax.device_get((s.keys, s.level, [e for e in epochs]))
    keys, level, eps = host
    parts = []
    for d, size in enumerate(sizes.tolist()):

        def cat(f, cnt):
            return np.concatenate([e[f][d][: e[cnt][d]] for e in eps])

        c = [cat(f, 5) for f in range(5)]
        parts.append(Local(keys[d][:size], level[d][:size], *c,
                           cat(6, 8), cat(7, 8)))  # fmt: skip
    return parts


def _finish(prog: Program, o, k: int, prob_checks: bool, chunk_size: int):
    """The single-device `finish` on the renumbered arrays (one epoch,
    padded to size buckets)."""
    n, t, h = o.keys.shape[0], o.c_src.size, o.h_src.size

    def pad(x, size):
        out = np.zeros((size, *x.shape[1:]), x.dtype)
        out[: x.shape[0]] = x
        return jax.device_put(out)

    big_n = max(MIN_BUCKET, 1 << max(0, n - 1).bit_length())
    big_t, big_h = bucket(t, MIN_BUCKET), bucket(h, MIN_BUCKET)
    epoch = Epoch(*(pad(x, big_t) for x in (o.c_src, o.c_dst, o.c_prob,
                                             o.c_choice, o.c_code)),
                  t, pad(o.h_src, big_h), pad(o.h_vec, big_h), h)  # fmt: skip
    store = _Store(_Size(n), pad(o.keys, big_n), o.level)
    return finish(prog, store, [epoch], np.arange(k, dtype=np.int64),
                  prob_checks, chunk_size)  # fmt: skip
