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
from functools import partial

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
    (`Program.pack`)."""

    choice_ptr: jax.Array
    row_ptr: jax.Array
    col: jax.Array
    val: jax.Array
    keys: jax.Array


class _Table:
    """What `assemble` reads of the host builder's state table."""

    def __init__(self, keys: np.ndarray):
        self.keys = keys

    def __len__(self) -> int:
        return self.keys.shape[0]


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

    def held_bytes(self) -> int:
        return sum(a.nbytes for lst in (self.cols, self.vals, self.contrib_code,
                                        self.contrib_weight, self.contrib_per_entry)
                   for a in lst)  # fmt: skip


@partial(jax.jit, static_argnums=2)
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


@partial(jax.jit, static_argnums=1)
def _first_of(h_src, v1, h_vec):
    """The first source state of a choice of each vector."""
    return jax.ops.segment_min(h_src, h_vec, v1)


def label_ids(
    prog: Program, s: Carry, h_src, h_vec, chunk_size: int
) -> tuple[list, np.ndarray]:
    """Action names in the host builder's order (the order in which its
    batches first meet them: batch by batch, each in vector order) and the
    name id of each vector (`-1`: the deadlock self-loop)."""
    n = int(s.table.size)
    v1 = prog.n_vectors + 1
    first = np.asarray(_first_of(h_src, v1, h_vec))
    level = np.asarray(s.level[:n])
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
           vec_lab, dead_vec):  # fmt: skip
    """Rows of the contributions: weights, sort by (row, column), merge."""
    h = h_src.shape[0]
    t = c_src.shape[0]
    n_choices = jax.ops.segment_sum(jnp.ones(h, jnp.int32), h_src, n)
    dead = jax.ops.segment_max((h_vec == dead_vec).astype(jnp.int32), h_src, n) > 0
    if weight_mode == 1:  # DTMC: uniform over the choices
        weight = 1.0 / n_choices[c_src]
    else:
        weight = jnp.ones(t)
    row = c_choice if nd else c_src
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
                per_entry=per_entry, actions=actions, nnz=seg[-1] + 1,
        long=jnp.max(per_entry, initial=0) > _BLOCK + 1)  # fmt: skip


def _transition_rewards(prog, items_by_struct, lab_c, h_src, c_choice, val, out,
                        cols, n):  # fmt: skip
    """Per reward structure with transition items: the reward of each merged
    entry, the states with a negative item, and whether evaluation failed."""
    result, negative, failed = [], [], jnp.zeros((), bool)
    for items in items_by_struct:
        r_choice = jnp.zeros(h_src.shape[0])
        neg = jnp.zeros(n, bool)
        for label, item in items:
            match = lab_c == label
            g, gbad = on_device(item.guard)(cols, None, n)
            v, vbad = on_device(item.value)(cols, g, n)
            v = jnp.asarray(v, jnp.float64)
            failed = failed | jnp.any(gbad) | jnp.any(vbad & g)
            hit = match & g[h_src]
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


def _post(prog: Program, names: list, n: int, t: int, h: int, mode: int):
    """The jitted post pass of a loop's arrays (cached per sizes)."""
    key = ("post", tuple(names), n, t, h, mode)
    fn = prog.cache.get(key)
    if fn is not None:
        return fn
    nd = prog.mt == ModelType.MDP
    index = {a: i for i, a in enumerate(names)}
    items_by_struct = [
        [(index[x.action], x) for x in items if x.transition and x.action in index]
        for items in prog.comp.rewards
        if any(x.transition for x in items)
    ]

    @partial(jax.jit, compiler_options=compiler_options())
    def post(keys, c_src, c_dst, c_prob, c_choice, c_code, h_src, h_vec, vec):
        out = _merge(n, nd, mode, c_src, c_dst, c_prob, c_choice, h_src, h_vec,
                     vec, prog.n_vectors)  # fmt: skip
        cols = prog.pack.decode(keys)
        out["states"] = (
            jnp.stack(cols, axis=1) if cols else jnp.zeros((n, 0), jnp.int64)
        )
        out["code"] = c_code[out["order"]]
        if items_by_struct:
            val = c_prob * out["weight"]
            tr, neg, bad = _transition_rewards(prog, items_by_struct, vec[h_vec], h_src,
                                               c_choice, val, out, cols, n)  # fmt: skip
            out["trews"], out["negative"], out["failed"] = tr, neg, bad
        out["weight"] = out["weight"][out["order"]]
        out["row_ptr"] = jnp.concatenate(
            [jnp.zeros(1, jnp.int32), jnp.cumsum(out["row_len"], dtype=jnp.int32)]
        )
        return out

    prog.cache[key] = post
    return post


def finish(prog: Program, s: Carry, epochs: list, init_ids: np.ndarray,
           prob_checks: bool, chunk_size: int):  # fmt: skip
    """The `ExplicitModel` of a finished loop, its `DeviceArrays`, and
    whether the evaluation of a transition reward failed (the caller then
    lets the host builder raise the located error)."""
    comp, mt = prog.comp, prog.mt
    n = int(s.table.size)
    t = sum(e.n_contrib for e in epochs)
    h = sum(e.n_choice for e in epochs)
    c_src, c_dst, c_prob, c_choice, c_code = _join(
        tuple(tuple(e[:5]) for e in epochs), tuple(e.n_contrib for e in epochs), t
    )
    h_src, h_vec = _join(
        tuple((e.h_src, e.h_vec) for e in epochs),
        tuple(e.n_choice for e in epochs),
        h,
    )
    nd = mt == ModelType.MDP
    names, vec = label_ids(prog, s, h_src, h_vec, chunk_size)
    mode = 1 if mt == ModelType.DTMC else 0
    post = _post(prog, names, n, t, h, mode)
    keys = s.keys[:n]
    out = post(keys, c_src, c_dst, c_prob, c_choice, c_code, h_src, h_vec,
               jnp.asarray(vec))  # fmt: skip
    nnz = int(out["nnz"]) if t else 0
    if bool(out["long"]):  # merged out of numpy's order: the host's job
        return None, None, False
    host = jax.device_get({k: v for k, v in out.items() if k not in ("order", "seg")})
    states = host["states"]
    enc_keys = comp.enc.encode([states[:, i] for i in range(states.shape[1])], n)
    trew_structs = [i for i, items in enumerate(comp.rewards)
                    if any(x.transition for x in items)]  # fmt: skip
    bfs = _Batches(comp, mt, _Table(enc_keys), nd, trew_structs, names)
    for slot, ri in enumerate(trew_structs):
        bfs.trews.append([host["trews"][slot][:nnz]])
        neg = np.flatnonzero(host["negative"][slot])
        if neg.size:
            bfs.negative_at[ri] = [neg]
    n_choices = host["n_choices"].astype(np.int64)
    bfs.n_choices = [n_choices if nd else np.ones(n, np.int64)]
    bfs.row_len = [host["row_len"].astype(np.int64)]
    bfs.cols = [host["col"][:nnz].astype(np.int64)]
    bfs.vals = [host["merged"][:nnz]]
    bfs.deadlock = [host["dead"]]
    if mt == ModelType.DTMC:
        bfs.nondet_states = int(np.sum(n_choices > 1))
        bfs.contrib_weight = [host["weight"]]
    if nd:
        bfs.actions = [host["actions"].astype(np.int64)]
    elif nnz:
        bfs.actions = [host["actions"][:nnz]]
    bfs.contrib_per_entry = [host["per_entry"][:nnz]]
    bfs.contrib_code = [host["code"]]
    model: ExplicitModel = assemble(bfs, init_ids)
    arrays = DeviceArrays(
        jnp.asarray(model.choice_ptr) if nd else jnp.arange(n + 1),
        out["row_ptr"], out["col"][:nnz], out["merged"][:nnz], keys,
    )  # fmt: skip
    return model, arrays, bool(host.get("failed", False))
