"""The `ExplicitModel` of a finished exploration: the per-batch arrays joined
into CSR form, the states decoded, labels and state rewards evaluated on all
states, warnings, and the `Provenance` of every transition entry."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import memory
from .expand import as_float
from .model import ExplicitModel, RewardStructure, StateVar
from .provenance import Provenance


if TYPE_CHECKING:
    from .builder import Builder


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
        states = comp.enc.decode(bfs.table.keys[:n])
    cols = [np.ascontiguousarray(states[:, i]) for i in range(states.shape[1])]
    n_choices = (
        np.concatenate(bfs.n_choices) if bfs.n_choices else np.zeros(0, np.int64)
    )
    choice_ptr = np.concatenate([[0], np.cumsum(n_choices)]).astype(np.int64)
    row_len = np.concatenate(bfs.row_len)
    row_ptr = np.concatenate([[0], np.cumsum(row_len)]).astype(np.int64)
    col = np.concatenate(bfs.cols).astype(np.int64)
    val = np.concatenate(bfs.vals).astype(np.float64)
    deadlock = np.concatenate(bfs.deadlock)
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
    for name, e in comp.checked.labels.items():
        labels[name] = np.asarray(comp.lower(e).unchecked(cols, n), dtype=bool)
    rewards = []
    for ri, (r, items) in enumerate(zip(comp.checked.rewards, comp.rewards)):
        state_r = None
        if any(not x.transition for x in items):
            state_r = np.zeros(n)
            for item in items:
                if item.transition:
                    continue
                g = np.asarray(item.guard.unchecked(cols, n), dtype=bool)
                if g.any():
                    v = np.where(g, as_float(item.value.unchecked(cols, n, g)), 0.0)
                    state_r += v
                    if (v < 0).any():
                        bfs.negative_at.setdefault(ri, []).append(np.flatnonzero(v < 0))
        trans_r = None
        if ri in bfs.trew_structs:
            trans_r = np.concatenate(bfs.trews[bfs.trew_structs.index(ri)])
        negative = None
        if ri in bfs.negative_at:
            negative = np.zeros(n, dtype=bool)
            negative[np.concatenate(bfs.negative_at[ri])] = True
        rewards.append(RewardStructure(r.name, state_r, trans_r, negative))
    choice_action = entry_action = None
    if bfs.nd:
        names = np.array(bfs.label_names + [None], dtype=object)
        choice_action = tuple(names[np.concatenate(bfs.actions)].tolist())
    elif bfs.actions:
        ids = np.concatenate(bfs.actions)
        if ids.any():
            entry_action = ids.astype(np.min_scalar_type(len(bfs.label_names)))
    variables = tuple(StateVar(v.name, v.low, v.high, v.is_bool) for v in comp.vars)
    return ExplicitModel(
        model_type=mt,
        variables=variables,
        states=states.astype(np.int32),
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


def provenance(bfs: Builder, nnz: int) -> Provenance:
    comp = bfs.comp
    counts = (
        np.concatenate(bfs.contrib_per_entry)
        if bfs.contrib_per_entry
        else np.zeros(0, np.int32)
    )
    assert counts.size == nnz
    entry_ptr = np.zeros(nnz + 1, dtype=np.int64)
    np.cumsum(counts, dtype=np.int64, out=entry_ptr[1:])
    return Provenance(
        updates=np.array(comp.updates, dtype=np.int64).reshape(-1, 2),
        entry_ptr=entry_ptr,
        weight=np.concatenate(bfs.contrib_weight) if bfs.contrib_weight else None,
        codes=np.concatenate(bfs.contrib_code),
        radix=comp.radix,
        module_offset=comp.module_offset,
        n_module_updates=list(comp.n_module_updates),
    )
