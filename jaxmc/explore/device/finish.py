"""The device explorer's output: the entries of the level loop merged into
rows on the device (weights, columns sorted and merged per row, actions,
transition rewards, provenance codes), then handed to the host builder's
`assemble` for the `ExplicitModel` (labels, state rewards, warnings).

The same arrays as the host builder's batches come out, so `assemble` makes
an identical model; `DeviceArrays` keeps the device copies for later
stages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from ...lang.ast import ModelType
from ..assemble import assemble
from ..model import ExplicitModel
from .lowering import on_device
from .program import Program, compiler_options
from .step import Carry


@dataclass
class DeviceArrays:
    """The transition structure on the device (row-grouped CSR, BFS order).
    `row_ptr`/`choice_ptr` as in `ExplicitModel`; `keys` the packed states
    (`Program.pack`). Arrays are padded to size buckets (so that models of
    similar size share compilations): the first `num_states` keys, `num_rows
    + 1` row pointers and `nnz` entries are the model's."""

    choice_ptr: jax.Array
    row_ptr: jax.Array
    col: jax.Array
    val: jax.Array
    keys: jax.Array
    num_states: int = 0
    num_rows: int = 0
    nnz: int = 0


#: The smallest padded length of the finish's arrays (`bucket`).
MIN_BUCKET = 1 << 12


def bucket(size: int, least: int = 8) -> int:
    """`size` rounded up to one of eight sizes per power of two (at most
    12.5% more; `least` for the smallest): the padded length of the
    finish's arrays, so that its compilations serve models of similar
    size."""
    if size <= least:
        return least
    step = 1 << max(int(size).bit_length() - 4, 0)
    return -(-int(size) // step) * step


class _Table:
    """What `assemble` reads of the host builder's state table (its size:
    the states come decoded, `_Batches.states`)."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n


@dataclass
class _Batches:
    """The host builder's per-batch outputs, as one batch (`assemble`'s input)."""

    comp: object
    mt: ModelType
    table: _Table
    nd: bool
    trew_structs: list
    label_names: list
    n_choices: list = field(default_factory=list)
    row_len: list = field(default_factory=list)
    cols: list = field(default_factory=list)
    vals: list = field(default_factory=list)
    deadlock: list = field(default_factory=list)
    actions: list = field(default_factory=list)
    contrib_per_entry: list = field(default_factory=list)
    contrib_weight: list = field(default_factory=list)
    contrib_code: list = field(default_factory=list)
    trews: list = field(default_factory=list)
    negative_at: dict = field(default_factory=dict)
    nondet_states: int = 0
    states: np.ndarray | None = None  # int64 [n, vars]: the decoded states

    def held_bytes(self) -> int:
        return sum(a.nbytes for lst in (self.cols, self.vals, self.contrib_code,
                                        self.contrib_weight, self.contrib_per_entry)
                   for a in lst)  # fmt: skip


def _join(arrays, counts, total: int):
    """The first `counts[i]` rows of each epoch's `arrays[i]` (a tuple of
    same-length arrays per epoch), concatenated: arrays of length `total`."""
    fields = []
    for f in range(len(arrays[0])):
        parts = [a[f] for a in arrays]
        fields.append(jnp.concatenate(parts) if len(parts) > 1 else parts[0])
    keep = jnp.concatenate(
        [jnp.arange(a[0].shape[0]) < c for a, c in zip(arrays, counts)]
    )
    at = jnp.where(keep, jnp.cumsum(keep, dtype=jnp.int32) - 1, total)
    return tuple(
        jnp.zeros((total,), x.dtype).at[at].set(x, mode="drop") for x in fields
    )


@partial(jax.jit, static_argnums=(4, 5, 6))
def _collect(contribs, c_counts, choices, h_counts, t: int, h: int, v1: int):
    """The epochs' contributions and choices joined (lengths `t`, `h`), and
    the first source state of a choice of each of the `v1` vectors (one
    compilation for the three)."""
    c = _join(contribs, c_counts, t)
    h_src, h_vec = _join(choices, h_counts, h)
    live = jnp.arange(h) < sum(h_counts)
    first = jax.ops.segment_min(h_src, jnp.where(live, h_vec, v1), v1)
    return c, (h_src, h_vec), first


def label_ids(
    prog: Program, s: Carry, first: np.ndarray, chunk_size: int
) -> tuple[list, np.ndarray]:
    """Action names in the host builder's order (the order in which its
    batches first meet them: batch by batch, each in vector order) and the
    name id of each vector (`-1`: the deadlock self-loop); `first`: the
    first source state of a choice of each vector."""
    n = int(s.table.size)
    level = np.asarray(s.level)[:n]
    start = np.searchsorted(level, level, side="left")  # levels are id ranges
    seen = {}  # name -> (batch key, vector)
    for v in range(prog.n_vectors):
        if first[v] >= n or first[v] < 0:
            continue
        st = int(first[v])
        key = (int(level[st]), (st - int(start[st])) // chunk_size, v)
        a = prog.vector_label[v]
        if a not in seen or key < seen[a]:
            seen[a] = key
    names: list = [None]
    for a, _ in sorted(seen.items(), key=lambda kv: kv[1]):
        if a is not None:
            names.append(a)
    index = {a: i for i, a in enumerate(names)}
    vec = np.array([index.get(a, 0) for a in prog.vector_label] + [-1], np.int32)
    return names, vec


#: Longest run of contributions `_reduceat` sums (numpy's pairwise block).
_BLOCK = 128


def _reduceat(x, first, length):
    """Per segment (`first` index, `length` >= 1 elements of `x`): the sum
    in numpy's `add.reduceat` order, bit for bit: the first element plus the
    rest's `pairwise_sum` (sequential below 8 elements; 8 interleaved
    partial sums up to `_BLOCK`). Longer segments are the caller's (see
    `long`)."""
    n = length - 1
    t = x.shape[0]
    top = jnp.minimum(jnp.max(n, initial=0), _BLOCK)

    def at(k):
        return x[jnp.minimum(first + 1 + k, t - 1)]

    def seq(k, acc):
        return jnp.where((k < n) & (n < 8), acc + at(k), acc)

    small = jax.lax.fori_loop(0, jnp.minimum(top, 7), seq, jnp.zeros_like(x))
    whole = n - n % 8

    def blocks(i, r):
        return tuple(jnp.where(8 * i < whole, r[j] + at(8 * i + j), r[j])
                     for j in range(8))  # fmt: skip

    r = jax.lax.fori_loop(1, (top + 7) // 8, blocks, tuple(at(j) for j in range(8)))
    big = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))

    def tail(k, acc):
        return jnp.where((n >= 8) & (whole + k < n), acc + at(whole + k), acc)

    big = jax.lax.fori_loop(0, 7, tail, big)
    return x[first] + jnp.where(n < 8, small, big)


def _merge(n, nd, weight_mode, c_src, c_dst, c_prob, c_choice, h_src, h_vec,
           vec_lab, dead_vec, counts):  # fmt: skip
    """Rows of the contributions: weights, sort by (row, column), merge.
    `n` states; the arrays padded past `counts` (traced: states,
    contributions, choices), their padding made inert: sorted last, each
    contribution its own entry, outside every segment."""
    h = h_src.shape[0]
    t = c_src.shape[0]
    live_c = jnp.arange(t) < counts[1]
    live_h = jnp.arange(h) < counts[2]
    last = jnp.iinfo(jnp.int32).max
    c_src = jnp.where(live_c, c_src, n)
    c_dst = jnp.where(live_c, c_dst, jnp.arange(t, dtype=jnp.int32))
    c_choice = jnp.where(live_c, c_choice, h)
    h_src = jnp.where(live_h, h_src, n)
    n_choices = jax.ops.segment_sum(jnp.ones(h, jnp.int32), h_src, n)
    dead = jax.ops.segment_max((h_vec == dead_vec).astype(jnp.int32), h_src, n) > 0
    if weight_mode == 1:  # DTMC: uniform over the choices
        weight = 1.0 / n_choices[c_src]
    else:
        weight = jnp.ones(t)
    row = jnp.where(live_c, c_choice if nd else c_src, last)
    val = c_prob * weight
    _, _, order = jax.lax.sort(
        [row, c_dst, jnp.arange(t, dtype=jnp.int32)], num_keys=2, is_stable=True
    )
    rs, ds = row[order], c_dst[order]
    start = jnp.ones(t, bool)
    if t > 1:
        start = start.at[1:].set((rs[1:] != rs[:-1]) | (ds[1:] != ds[:-1]))
    seg = jnp.cumsum(start, dtype=jnp.int32) - 1
    per_entry = jax.ops.segment_sum(jnp.ones(t, jnp.int32), seg, t)
    pos = jnp.arange(t, dtype=jnp.int32)
    first = jnp.zeros(t, jnp.int32).at[jnp.where(start, seg, t)].set(pos, mode="drop")
    merged = _reduceat(val[order], first, jnp.maximum(per_entry, 1))
    col = jnp.zeros(t, jnp.int32).at[seg].set(ds)
    n_rows = h if nd else n
    row_len = jax.ops.segment_sum(start.astype(jnp.int32), rs, n_rows)
    lab_c = vec_lab[h_vec]
    if nd:
        actions = lab_c
    else:
        lab = jnp.maximum(lab_c[c_choice], 0)[order]
        lo = jax.ops.segment_min(lab, seg, t)
        hi = jax.ops.segment_max(lab, seg, t)
        actions = jnp.where(lo == hi, lo, 0)
    return dict(n_choices=n_choices, dead=dead, weight=weight, order=order,
                seg=seg, first=first, merged=merged, col=col, row_len=row_len,
                per_entry=per_entry, actions=actions,
                nnz=jnp.where(counts[1] > 0, seg[jnp.maximum(counts[1] - 1, 0)] + 1, 0),
        long=jnp.max(per_entry, initial=0) > _BLOCK + 1)  # fmt: skip


def _transition_rewards(items_by_struct, consts, lab_c, h_src, c_choice, val, out,
                        cols, n, live_n):  # fmt: skip
    """Per reward structure with transition items: the reward of each merged
    entry, the states with a negative item, and whether evaluation failed
    (`consts`: the items' constants, per structure and item)."""
    result, negative, failed = [], [], jnp.zeros((), bool)
    for items, item_consts in zip(items_by_struct, consts):
        r_choice = jnp.zeros(h_src.shape[0])
        neg = jnp.zeros(n, bool)
        for (label, guard, value), (gk, vk) in zip(items, item_consts):
            match = lab_c == label
            g, gbad = guard(cols, None, n, gk)
            v, vbad = value(cols, g, n, vk)
            v = jnp.asarray(v, jnp.float64)
            failed = failed | jnp.any(gbad & live_n) | jnp.any(vbad & g & live_n)
            hit = match & g[jnp.minimum(h_src, n - 1)] & (h_src < n)
            r_choice = r_choice + jnp.where(hit, v[h_src], 0.0)
            at = jnp.where(hit & (v[h_src] < 0), h_src, n)
            neg = neg.at[at].set(True, mode="drop")
        contrib = (val * r_choice[c_choice])[out["order"]]
        num = _reduceat(contrib, out["first"], jnp.maximum(out["per_entry"], 1))
        merged = out["merged"]
        safe = jnp.where(merged != 0, merged, 1.0)
        result.append(jnp.where(merged != 0, num / safe, 0.0))
        negative.append(neg)
    return result, negative, failed


def _post_all(keys, c_src, c_dst, c_prob, c_choice, c_code, h_src, h_vec, vec,
              dead_vec, unpack, counts, *, nd: bool, mode: int):  # fmt: skip
    """The post pass's program-free part: the rows merged (`_merge`), the
    provenance codes and weights in row order, the row pointers, and the
    states decoded by `unpack` (per variable: word, shift, bit mask, lower
    bound; padded variables have mask 0)."""
    n, h = keys.shape[0], h_src.shape[0]
    h_src = jnp.where(jnp.arange(h) < counts[2], h_src, n)
    out = _merge(n, nd, mode, c_src, c_dst, c_prob, c_choice, h_src, h_vec,
                 vec, dead_vec, counts)  # fmt: skip
    word, shift, mask, lows = unpack
    fields = keys[:, word].astype(jnp.int64)
    out["states"] = ((fields >> shift) & mask) + lows
    out["code"] = c_code[out["order"]]
    out["val"] = c_prob * out["weight"]
    out["h_src_live"] = h_src
    out["weight"] = out["weight"][out["order"]]
    out["row_ptr"] = jnp.concatenate(
        [jnp.zeros(1, jnp.int32), jnp.cumsum(out["row_len"], dtype=jnp.int32)]
    )
    return out


@cache
def _post_fn():
    """The jitted `_post_all` (one per backend's compiler options; its
    compilations are shared by every program with the same sizes)."""
    return jax.jit(_post_all, static_argnames=("nd", "mode"),
                   compiler_options=compiler_options())  # fmt: skip


#: Variables of `_post_all`'s decoding, in multiples of this (so that
#: programs of similar sizes share its compilation).
VARS_BUCKET = 8


def _unpack(prog: Program) -> tuple:
    """`_post_all`'s `unpack` arrays of `prog`'s packing."""
    pk = prog.pack
    nv = len(pk.lows)
    size = max(VARS_BUCKET, -(-nv // VARS_BUCKET) * VARS_BUCKET)
    word = np.zeros(size, np.int32)
    shift = np.zeros(size, np.int64)
    mask = np.zeros(size, np.int64)
    lows = np.zeros(size, np.int64)
    word[:nv], shift[:nv] = pk.word, pk.shift
    mask[:nv] = (np.int64(1) << pk.bits) - 1
    lows[:nv] = pk.lows
    return tuple(jax.device_put(x) for x in (word, shift, mask, lows))


#: The jitted transition-reward passes of recent programs (see
#: `explorer._LOOPS`).
_POSTS: dict = {}
POSTS_KEPT = 16


def _rewards_pass(prog: Program, names: list, n: int, t: int, h: int):
    """The jitted pass that evaluates `prog`'s transition rewards on the
    merged rows, and the values it takes; None where there are none (cached
    per program signature and sizes)."""
    index = {a: i for i, a in enumerate(names)}
    items_by_struct = [
        [(index[x.action], on_device(x.guard), on_device(x.value))
         for x in items if x.transition and x.action in index]
        for items in prog.comp.rewards
        if any(x.transition for x in items)
    ]  # fmt: skip
    if not items_by_struct:
        return None, None
    values = {
        "lows": prog.values["lows"],
        "trews": [[(g.consts, v.consts) for _, g, v in items]
                  for items in items_by_struct],
    }  # fmt: skip
    shape = tuple(tuple((a, g.source, v.source) for a, g, v in items)
                  for items in items_by_struct)  # fmt: skip
    key = (prog.signature, shape, tuple(names), n, t, h)
    fn = _POSTS.get(key)
    if fn is not None:
        return fn, values

    @partial(jax.jit, compiler_options=compiler_options())
    def rewards(keys, out, c_choice, vec, h_vec, values, counts):
        cols = prog.pack.decode(keys, values["lows"])
        return _transition_rewards(
            items_by_struct, values["trews"], vec[h_vec], out["h_src_live"],
            c_choice, out["val"], out, cols, n, jnp.arange(n) < counts[0],
        )  # fmt: skip

    if len(_POSTS) >= POSTS_KEPT:
        _POSTS.pop(next(iter(_POSTS)))
    _POSTS[key] = rewards
    return rewards, values


def finish(prog: Program, s: Carry, epochs: list, init_ids: np.ndarray,
           prob_checks: bool, chunk_size: int):  # fmt: skip
    """The `ExplicitModel` of a finished loop, its `DeviceArrays`, and
    whether the evaluation of a transition reward failed (the caller then
    lets the host builder raise the located error)."""
    comp, mt = prog.comp, prog.mt
    n = int(s.table.size)
    t = sum(e.n_contrib for e in epochs)
    h = sum(e.n_choice for e in epochs)
    big_n = s.keys.shape[0]
    big_t, big_h = bucket(t, MIN_BUCKET), bucket(h, MIN_BUCKET)
    contribs, (h_src, h_vec), first = _collect(
        tuple(tuple(e[:5]) for e in epochs),
        tuple(e.n_contrib for e in epochs),
        tuple((e.h_src, e.h_vec) for e in epochs),
        tuple(e.n_choice for e in epochs),
        big_t,
        big_h,
        max(16, 1 << prog.n_vectors.bit_length()),  # > n_vectors, in buckets
    )
    c_src, c_dst, c_prob, c_choice, c_code = contribs
    nd = mt == ModelType.MDP
    names, vec = label_ids(prog, s, np.asarray(first), chunk_size)
    mode = 1 if mt == ModelType.DTMC else 0
    counts = np.asarray([n, t, h], np.int32)
    v1 = max(16, 1 << prog.n_vectors.bit_length())
    vec = jax.device_put(np.concatenate([vec, np.zeros(v1 - vec.size, vec.dtype)]))
    out = _post_fn()(s.keys, c_src, c_dst, c_prob, c_choice, c_code, h_src, h_vec,
                     vec, np.int32(prog.n_vectors), _unpack(prog), counts,
                     nd=nd, mode=mode)  # fmt: skip
    nnz = int(out["nnz"])
    if bool(out["long"]):  # merged out of numpy's order: the host's job
        return None, None, False
    rewards, values = _rewards_pass(prog, names, big_n, big_t, big_h)
    if rewards is not None:
        tr, neg, bad = rewards(s.keys, out, c_choice, vec, h_vec, values, counts)
        out["trews"], out["negative"], out["failed"] = tr, neg, bad
    inner = ("order", "seg", "val", "h_src_live", "first")
    host = jax.device_get({k: v for k, v in out.items() if k not in inner})
    host["states"] = host["states"][:, : len(prog.pack.lows)]
    trew_structs = [i for i, items in enumerate(comp.rewards)
                    if any(x.transition for x in items)]  # fmt: skip
    bfs = _Batches(comp, mt, _Table(n), nd, trew_structs, names)
    bfs.states = host["states"][:n]
    for slot, ri in enumerate(trew_structs):
        bfs.trews.append([host["trews"][slot][:nnz]])
        neg = np.flatnonzero(host["negative"][slot][:n])
        if neg.size:
            bfs.negative_at[ri] = [neg]
    n_choices = host["n_choices"][:n].astype(np.int64)
    n_rows = h if nd else n
    bfs.n_choices = [n_choices if nd else np.ones(n, np.int64)]
    bfs.row_len = [host["row_len"][:n_rows].astype(np.int64)]
    bfs.cols = [host["col"][:nnz].astype(np.int64)]
    bfs.vals = [host["merged"][:nnz]]
    bfs.deadlock = [host["dead"][:n]]
    if mt == ModelType.DTMC:
        bfs.nondet_states = int(np.sum(n_choices > 1))
        bfs.contrib_weight = [host["weight"][:t]]
    if nd:
        bfs.actions = [host["actions"][:h].astype(np.int64)]
    elif nnz:
        bfs.actions = [host["actions"][:nnz]]
    bfs.contrib_per_entry = [host["per_entry"][:nnz]]
    bfs.contrib_code = [host["code"][:t]]
    model: ExplicitModel = assemble(bfs, init_ids)
    arrays = DeviceArrays(
        jax.device_put(model.choice_ptr if nd else np.arange(n + 1)),
        out["row_ptr"], out["col"], out["merged"], s.keys, n, n_rows, nnz,
    )  # fmt: skip
    return model, arrays, bool(host.get("failed", False))
