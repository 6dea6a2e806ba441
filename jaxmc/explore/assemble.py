"""The `ExplicitModel` of a finished exploration: the per-batch arrays joined
into CSR form, the states decoded, labels and state rewards evaluated on all
states, warnings, and the `Provenance` of every transition entry.

Memory: the states are decoded once (int32, `CHUNK` states at a time) and
the visited-state table is released before the transition arrays are
joined; each array is joined into its final type with its chunks freed as
they are copied and their pages given back as it fills (`rows.join`), so
the peak is the finished model plus a few MB, not two copies of an array."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import memory
from .expand import as_float
from .model import ExplicitModel, RewardStructure, StateVar
from .provenance import Provenance
from .rows import all_fill, join, trim


if TYPE_CHECKING:
    from .builder import Builder


def _pointers(counts: list, n: int) -> np.ndarray:
    """The `n + 1` pointers of `n` items from the chunks of their counts
    (`rows.join`'s; emptied), where every count is one: `0..n`."""
    if all_fill(counts):
        counts.clear()
        return np.arange(n + 1, dtype=np.int64)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(join(counts, np.int32), dtype=np.int64, out=ptr[1:])
    return ptr


def assemble(bfs: Builder, init_ids: np.ndarray) -> ExplicitModel:
    comp, mt = bfs.comp, bfs.mt
    n = len(bfs.table)
    # The concatenated transition arrays and provenance, the decoded
    # states (int64, then int32), the pointers and the labels.
    per_state = 12 * len(comp.vars) + 24 + len(comp.checked.labels) + 2
    need = bfs.held_bytes() + n * per_state
    memory.ensure(need, "the transition arrays", f"of {n:,} states")
    # (the device explorer hands its states over decoded)
    states = getattr(bfs, "states", None)
    if states is None:
        keys = bfs.table.keys
        states = np.empty((n, len(comp.vars)), dtype=np.int32)
        for a in range(0, n, CHUNK):
            b = min(n, a + CHUNK)
            for i, c in enumerate(comp.enc.decode_columns(keys[a:b])):
                states[a:b, i] = c
        del keys
        bfs.table.release()
    else:
        states = states.astype(np.int32, copy=False)
    choice_ptr = _pointers(bfs.n_choices, n)
    row_ptr = _pointers(bfs.row_len, int(choice_ptr[-1]))
    col = join(bfs.cols, np.int64)
    val = join(bfs.vals, np.float64)
    deadlock = join(bfs.deadlock, bool)
    warnings = list(comp.checked.warnings)
    if deadlock.any():
        first = int(np.argmax(deadlock))
        warnings.append(
            f"deadlocks in {int(deadlock.sum())} states were fixed with self-loops "
            f"(e.g. state {comp.witness(states[first])})"
        )
    if bfs.nondet_states:
        warnings.append(
            f"{bfs.nondet_states} states of the DTMC have several enabled choices; "
            "they are resolved uniformly at random, as PRISM does"
        )
    init = np.zeros(n, dtype=bool)
    init[init_ids] = True
    labels = {"init": init, "deadlock": deadlock}
    lowered = {name: comp.lower(e) for name, e in comp.checked.labels.items()}
    for name in lowered:
        labels[name] = np.empty(n, dtype=bool)
    state_items = [
        [x for x in items if not x.transition] if any(not x.transition for x in items)
        else None
        for items in comp.rewards
    ]  # fmt: skip
    state_rs = [None if x is None else np.zeros(n) for x in state_items]
    for a, cols in _column_chunks(states):
        m = cols.n
        for name, f in lowered.items():
            labels[name][a : a + m] = f.unchecked(cols, m)
        for ri, items in enumerate(state_items):
            if items is None:
                continue
            state_r = state_rs[ri][a : a + m]
            for item in items:
                g = np.asarray(item.guard.unchecked(cols, m), dtype=bool)
                if g.any():
                    v = np.where(g, as_float(item.value.unchecked(cols, m, g)), 0.0)
                    state_r += v
                    if (v < 0).any():
                        neg = np.flatnonzero(v < 0) + a
                        bfs.negative_at.setdefault(ri, []).append(neg)
    del cols  # the chunk's int64 columns
    trim()  # the pass's temporaries, before the next joins
    rewards = []
    for ri, r in enumerate(comp.checked.rewards):
        trans_r = None
        if ri in bfs.trew_structs:
            trans_r = join(bfs.trews[bfs.trew_structs.index(ri)], np.float64)
        negative = None
        if ri in bfs.negative_at:
            negative = np.zeros(n, dtype=bool)
            negative[np.concatenate(bfs.negative_at[ri])] = True
        rewards.append(RewardStructure(r.name, state_rs[ri], trans_r, negative))
    choice_action = entry_action = None
    if bfs.nd:
        names = np.array(bfs.label_names + [None], dtype=object)
        choice_action = tuple(names[join(bfs.actions, np.int64)].tolist())
    elif bfs.actions:
        ids = join(bfs.actions, np.min_scalar_type(len(bfs.label_names)), 0)
        if ids.any():
            entry_action = ids
    variables = tuple(StateVar(v.name, v.low, v.high, v.is_bool) for v in comp.vars)
    return ExplicitModel(
        model_type=mt,
        variables=variables,
        states=states,
        initial_states=np.asarray(init_ids, dtype=np.int64),
        choice_ptr=choice_ptr,
        row_ptr=row_ptr,
        col=col,
        val=val,
        labels=labels,
        rewards=tuple(rewards),
        choice_action=choice_action,
        entry_action=entry_action,
        action_names=tuple(bfs.label_names),
        provenance=provenance(bfs, col.size),
        warnings=tuple(warnings),
    )


#: States decoded, and whose labels and state rewards are evaluated, at a
#: time: the chunk's int64 columns are temporaries (8 bytes per state and
#: variable), small beside the model at this size.
CHUNK = 1 << 16


class _Columns:
    """int64 columns of states `a:a+n` of int32 `states`, made on first use."""

    def __init__(self, states: np.ndarray, a: int, n: int):
        self.states, self.a, self.n, self.cache = states, a, n, {}

    def __getitem__(self, i: int) -> np.ndarray:
        c = self.cache.get(i)
        if c is None:
            c = self.states[self.a : self.a + self.n, i].astype(np.int64)
            self.cache[i] = c
        return c


def _column_chunks(states: np.ndarray):
    """`(start, columns)` of the states, `CHUNK` at a time."""
    n = states.shape[0]
    for a in range(0, max(n, 1), CHUNK):
        yield a, _Columns(states, a, min(CHUNK, n - a))


def provenance(bfs: Builder, nnz: int) -> Provenance:
    comp = bfs.comp
    counts = None  # None: one contribution per entry
    if not all_fill(bfs.contrib_per_entry):
        counts = join(bfs.contrib_per_entry, np.int32)
        assert counts.size == nnz
    bfs.contrib_per_entry.clear()
    weight = None
    if bfs.contrib_weight and not all_fill(bfs.contrib_weight):
        weight = join(bfs.contrib_weight, np.float64)
    bfs.contrib_weight.clear()
    return Provenance(
        updates=np.array(comp.updates, dtype=np.int64).reshape(-1, 2),
        entry_ptr=None,
        weight=weight,
        codes=join(bfs.contrib_code, comp.code_dtype),
        radix=comp.radix,
        module_offset=comp.module_offset,
        n_module_updates=list(comp.n_module_updates),
        counts=counts,
        nnz=nnz,
    )
