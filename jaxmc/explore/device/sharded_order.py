"""The partitioned explorer's states and transitions renumbered into the
single-device explorer's order (global BFS order), on the host.

The devices number their states locally (handles `local id * D + owner`,
`sharded_step`) and record each contribution on the device of its source,
in the order the source's entries come (choice, then update combination),
with the successor's handle. The single-device explorer numbers states in
order of first appearance in the sequence of its contributions, sources
taken in id order; the same numbering follows level by level: the states of
level `l + 1` are numbered in order of their first appearance among the
contributions of level `l`'s sources, those taken in (already known) id
order. Contributions and choices are then sorted (stably) by their
source's id, which puts each source's own, kept in its device's order,
where the single-device loop has them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Local(NamedTuple):
    """One device's output, on the host (its epochs joined)."""

    keys: np.ndarray  # uint32 [size, w], by local id
    level: np.ndarray  # int32 [size]
    c_src: np.ndarray  # int32: local ids
    c_dst: np.ndarray  # int32: handles
    c_prob: np.ndarray
    c_choice: np.ndarray  # int32: the device's choice numbers
    c_code: np.ndarray
    h_src: np.ndarray  # int32: local ids
    h_vec: np.ndarray


class Ordered(NamedTuple):
    """Everything in global BFS order (the single-device loop's arrays)."""

    keys: np.ndarray
    level: np.ndarray
    c_src: np.ndarray
    c_dst: np.ndarray
    c_prob: np.ndarray
    c_choice: np.ndarray
    c_code: np.ndarray
    h_src: np.ndarray
    h_vec: np.ndarray


def bfs_order(parts: list[Local], init_handles: np.ndarray) -> Ordered:
    """The devices' outputs `parts` (device `d`'s at `d`) renumbered: state
    ids in global BFS order (`init_handles`, the initial states' handles in
    their order, first)."""
    nd = len(parts)
    w = parts[0].keys.shape[1]
    top = max(p.keys.shape[0] for p in parts) * nd
    keys = np.zeros((top, w), np.uint32)
    level = np.full(top, -1, np.int64)
    for d, p in enumerate(parts):
        h = np.arange(p.keys.shape[0], dtype=np.int64) * nd + d
        keys[h], level[h] = p.keys, p.level

    def cat(f, handle=False):
        out = []
        for d, p in enumerate(parts):
            x = getattr(p, f).astype(np.int64) if handle else getattr(p, f)
            out.append(x * nd + d if handle else x)
        return np.concatenate(out)

    src, dst = cat("c_src", True), cat("c_dst").astype(np.int64)
    h_src = cat("h_src", True)
    # Each device's choice numbers, as positions in the joined choices.
    base = np.cumsum([0] + [p.h_src.size for p in parts])[:-1]
    c_choice = np.concatenate(
        [p.c_choice.astype(np.int64) + base[d] for d, p in enumerate(parts)]
    )

    gid = np.full(top, -1, np.int64)
    gid[init_handles] = np.arange(init_handles.size)
    n = init_handles.size
    by_level = np.argsort(level[src], kind="stable")
    bounds = np.searchsorted(level[src][by_level], np.arange(level.max() + 2))
    for lv in range(level.max()):
        idx = by_level[bounds[lv] : bounds[lv + 1]]
        idx = idx[np.argsort(gid[src[idx]], kind="stable")]
        d = dst[idx]
        d = d[level[d] == lv + 1]
        uniq, first = np.unique(d, return_index=True)
        new = uniq[np.argsort(first)]
        if np.any(gid[new] >= 0):
            raise AssertionError("a state numbered twice")
        gid[new] = n + np.arange(new.size)
        n += new.size
    stored = level >= 0
    if n != int(stored.sum()) or np.any(gid[stored] < 0):
        raise AssertionError("states unreached by the renumbering")

    states = np.flatnonzero(stored)
    at = np.empty(n, np.int64)
    at[gid[states]] = states
    c_order = np.argsort(gid[src], kind="stable")
    h_order = np.argsort(gid[h_src], kind="stable")
    h_pos = np.empty(h_order.size, np.int64)
    h_pos[h_order] = np.arange(h_order.size)
    return Ordered(
        keys[at], level[at].astype(np.int32),
        gid[src][c_order].astype(np.int32), gid[dst][c_order].astype(np.int32),
        cat("c_prob")[c_order], h_pos[c_choice][c_order].astype(np.int32),
        cat("c_code")[c_order],
        gid[h_src][h_order].astype(np.int32), cat("h_vec")[h_order],
    )  # fmt: skip
