"""Per-state min/max over an MDP's choices (`group_reduce`), by gathers
from the choice pointers (`GroupIndex`) rather than a scatter.

An MDP's choices are grouped by state: they are consecutive rows, and
`GroupIndex` gives the same grouping as row pointers, which `group_reduce`
uses for the per-state min/max.

Why not `segment_max`: it is a scatter (one atomic/serialised update per
choice), and on a GPU it took several times the time of the SpMV it follows
(consensus; the benchmark notes have the figures). A gather-based reduction reads the
first `width` choices of every state (`ptr[s] + j`, clamped to the state's
last choice: repeating a value changes neither min nor max), reduces them
along an axis and leaves the output to fuse with whatever the caller does
next (the convergence measure of `kernels.fused.bellman_step`). The rare
states with more than `width` choices take their remaining choices through a
`segment_max` over those choices only.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int


#: Cost of one choice on the overflow path (a scatter) relative to one gather
#: slot, for the choice of `GroupIndex.width`: a wider table costs `n` slots
#: per unit of width, each choice it leaves out costs this much.
OVERFLOW_COST = 4
#: Padding above which the gather does not pay: `n * width` slots at most
#: this many times `max(m, n)`, else `group_reduce` keeps `segment_max`.
MAX_PADDING = 2.0


class GroupIndex(eqx.Module):
    """Where each state's choices are, for a gather-based min/max.

    - `ptr`: the choice pointers `[n + 1]` (state `s` owns choices
      `ptr[s] .. ptr[s+1]-1`); a state with none gets the identity.
    - `table`: `None` (the slot indices are computed from `ptr` inside the
      fused reduction: 8 bytes per state read instead of `4 * width`), or the
      precomputed `[n, width]` slot indices.
    - `rest_choice`, `rest_seg`, `rest_state`: the choices past the first
      `width` of the states that have more (`rest_state`, sorted), and for
      each of those choices its position in `rest_state`.
    - `width`: slots per state (static).
    """

    ptr: Int[Array, " n1"]
    table: Int[Array, "n w"] | None
    rest_choice: Int[Array, " r"]
    rest_seg: Int[Array, " r"]
    rest_state: Int[Array, " k"]
    width: int = eqx.field(static=True)


def choose_width(counts: np.ndarray, max_padding: float = MAX_PADDING) -> int:
    """The slot width for choice counts `counts` (per state): the largest
    count when `n * width` stays within `max_padding * max(m, n)` (no
    overflow path: every state in one fused gather; the repeated slots hit
    the cache), else the width minimising `n * w + OVERFLOW_COST * (choices
    past w)` (widening pays while more than `n / OVERFLOW_COST` states have
    more than `w` choices)."""
    counts = np.asarray(counts, dtype=np.int64)
    n = len(counts)
    top = int(counts.max(initial=0))
    if top <= 1:
        return 1
    if n * top <= max_padding * max(int(counts.sum()), n):
        return top
    above = n - np.cumsum(
        np.bincount(counts, minlength=top + 1)
    )  # [w]: states with > w
    rest = np.cumsum(above[::-1])[::-1]  # [w]: choices past slot w, summed over states
    w = np.arange(1, top + 1)
    return int(w[np.argmin(n * w + OVERFLOW_COST * rest[1:])])


def group_index(
    choice_ptr,
    *,
    width: int | None = None,
    table: bool = False,
    max_padding: float | None = MAX_PADDING,
) -> GroupIndex | None:
    """The `GroupIndex` of row-grouped choices `choice_ptr` (host array,
    `[n + 1]`), or `None` where the gather does not pay (no choices, or
    more than `max_padding * max(m, n)` slots; `None`: no limit).

    **Arguments:**
    - `width`: slots per state (default: `choose_width`).
    - `table`: precompute the `[n, width]` slot indices (otherwise the
      reduction derives them from `ptr`).
    """
    ptr = np.asarray(choice_ptr, dtype=np.int64)
    n, m = len(ptr) - 1, int(ptr[-1]) if len(ptr) else 0
    if n == 0 or m == 0:
        return None
    if m >= 2**31:
        return None  # int32 indices
    counts = np.diff(ptr)
    w = choose_width(counts, max_padding or np.inf) if width is None else int(width)
    if w < 1:
        raise ValueError(f"`width` must be at least 1, not {w}")
    if max_padding is not None and n * w > max_padding * max(m, n):
        return None
    big = np.flatnonzero(counts > w)
    extra = counts[big] - w
    rest_seg = np.repeat(np.arange(len(big)), extra)
    # choice ptr[s] + w + i for i < extra[s]
    first = np.repeat(
        ptr[big] + w - np.concatenate(([0], np.cumsum(extra)[:-1])), extra
    )
    rest_choice = first + np.arange(len(rest_seg))
    tab = None
    if table:
        j = np.arange(w)
        tab = np.maximum(np.minimum(ptr[:-1, None] + j, ptr[1:, None] - 1), 0)
        tab = jnp.asarray(tab, dtype=jnp.int32)
    i32 = lambda a: jnp.asarray(a, dtype=jnp.int32)  # noqa: E731
    return GroupIndex(
        ptr=i32(ptr),
        table=tab,
        rest_choice=i32(rest_choice),
        rest_seg=i32(rest_seg),
        rest_state=i32(big),
        width=w,
    )


def _identity(dtype, op: str):
    """What `segment_max`/`segment_min` give a state with no choices."""
    if jnp.issubdtype(dtype, jnp.inexact):
        return jnp.array(-jnp.inf if op == "max" else jnp.inf, dtype)
    info = jnp.iinfo(dtype)
    return jnp.array(info.min if op == "max" else info.max, dtype)


def _gather_reduce(v, G: GroupIndex, op: str):
    both = jnp.maximum if op == "max" else jnp.minimum
    start, end = G.ptr[:-1], G.ptr[1:]
    # A chain of elementwise max/min over the `width` slots, not a reduce
    # along an axis: XLA's CPU reduction loses NaNs in some rows (seen with
    # jax 0.10 on [300, 40]), the elementwise op propagates them, as
    # `segment_max` does. Each slot is clamped to the state's last choice; a
    # state with none reads choice max(start - 1, 0) and is masked below.
    y = None
    for j in range(G.width):
        if G.table is None:
            idx = jnp.maximum(jnp.minimum(start + j, end - 1), 0)
        else:
            idx = G.table[:, j]
        vj = v.at[idx].get(mode="promise_in_bounds")
        y = vj if y is None else both(y, vj)
    y = jnp.where(end > start, y, _identity(v.dtype, op))
    k = G.rest_state.shape[0]
    if k:
        seg = jax.ops.segment_max if op == "max" else jax.ops.segment_min
        r = seg(
            v.at[G.rest_choice].get(mode="promise_in_bounds"),
            G.rest_seg,
            num_segments=k,
            indices_are_sorted=True,
        )
        y = y.at[G.rest_state].set(
            both(y.at[G.rest_state].get(mode="promise_in_bounds"), r),
            indices_are_sorted=True,
            unique_indices=True,
        )
    return y


def group_reduce(
    v, group_ids, n_groups: int, op: str, *, groups: GroupIndex | None = None
):
    """`op` in {"min", "max"} of `v` over segments `group_ids` (sorted): a
    gather through `groups` when given (see the module docstring), else a
    `segment_min`/`segment_max`. Both give the same bits, including the
    identity (`-inf` for max, `inf` for min) of an empty segment and NaN
    propagation."""
    if op not in ("min", "max"):
        raise ValueError(f"`op` must be 'min' or 'max', not {op!r}")
    if groups is not None:
        return _gather_reduce(v, groups, op)
    seg = jax.ops.segment_max if op == "max" else jax.ops.segment_min
    return seg(v, group_ids, num_segments=n_groups, indices_are_sorted=True)
