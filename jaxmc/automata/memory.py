"""Finite-memory deterministic schedulers of MDPs (`MemoryScheduler`) and
the Markov chain one induces on its model (the model's states paired with
the scheduler's memory).

A finite-memory scheduler has memory states `0..memory_states-1`; a run
starting in model state `s` starts with memory `initial_memory[s]`; in the
pair `(s, m)` it takes one choice of `s`, and on moving to `s'` its memory
becomes `update(s, m, s')`. Only the pairs a run can meet are kept: those
reachable from `(s, initial_memory[s])` for every model state `s` under
the scheduler's own choices.

The induced chain (`MemoryScheduler.chain`) is a DTMC whose states are
these pairs, ordered by model state then memory; its variables are the
model's followed by `_memory`, its labels and reward structures are the
model's (state rewards of the pair's model state, transition rewards of
the model's entries taken), and its initial states are the pairs of the
model's initial states with their initial memory (its label "init" marks
those pairs only: another pair of an initial model state is not initial).
Every path of the chain projects to a path of the MDP under the scheduler
with the same probability, so any property of paths checked on it
(`jaxmc.induced_model`) has the scheduler's value.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..explore.model import ExplicitModel, RewardStructure, StateVar
from ..lang.ast import ModelType


@dataclasses.dataclass(frozen=True)
class MemoryScheduler:
    """A finite-memory deterministic scheduler of an MDP (the optimal one of
    an LTL property, `jaxmc.automata.strategy`).

    - `memory_states`: the number of memory states; memory `m` stands for
      the automaton state `memory_automaton[m]` after reading the path so far
      (and, inside an accepting end component of a generalised Büchi
      condition, the monitor `memory_phase[m]` it heads for next; 0 elsewhere).
    - `initial_memory`: int64 [n], the memory of a run that starts in `s`.
    - `state`, `memory`: int64 [K], the pairs (model state, memory) the
      scheduler can be in, sorted by state then memory (the choice table's
      index; `pair(s, m)` finds one).
    - `choice`: int64 [K], the index of the chosen choice within the state's
      row group; `actions`: its action label (None unlabelled); `defined`:
      bool [K], where the choice matters (elsewhere any choice is optimal:
      the formula is decided, or the value is 0).
    - `chain`: the induced DTMC over the pairs (module docstring); `update`
      reads the memory update from its transitions.
    - `objective`: what it optimises; `values`: float [n], the exact value of
      the induced chain from each model state with its initial memory;
      `deviation`: the largest distance of `values` from the solve's values.
    """

    memory_states: int
    memory_automaton: np.ndarray
    memory_phase: np.ndarray
    initial_memory: np.ndarray
    state: np.ndarray
    memory: np.ndarray
    choice: np.ndarray
    actions: tuple
    defined: np.ndarray
    chain: ExplicitModel
    objective: str
    values: np.ndarray
    deviation: float = 0.0

    def pair(self, s, m) -> np.ndarray | int:
        """The index of pair `(s, m)` (-1 where the scheduler never is)."""
        keys = self.state * self.memory_states + self.memory
        want = np.asarray(s, np.int64) * self.memory_states + np.asarray(m, np.int64)
        i = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
        out = np.where(keys[i] == want, i, -1)
        return int(out) if out.ndim == 0 else out

    def choice_at(self, s: int, m: int) -> int:
        """The choice index taken in model state `s` with memory `m`."""
        k = self.pair(s, m)
        if k < 0:
            raise KeyError(f"the scheduler is never in state {s} with memory {m}")
        return int(self.choice[k])

    def update(self, s: int, m: int, s_next: int) -> int:
        """The memory after moving from `s` (memory `m`) to `s_next` under
        the scheduler's choice."""
        k = self.pair(s, m)
        c = self.chain
        lo, hi = c.row_ptr[c.choice_ptr[k]], c.row_ptr[c.choice_ptr[k] + 1]
        for j in np.asarray(c.col[lo:hi]).tolist():
            if int(self.state[j]) == s_next:
                return int(self.memory[j])
        raise KeyError(f"state {s_next} is not a successor of ({s}, {m})")

    def induced(self, model: ExplicitModel) -> ExplicitModel:
        """The DTMC this scheduler induces on `model` (its `chain`)."""
        if model.num_states != len(self.initial_memory):
            raise ValueError("the scheduler is of another model")
        return self.chain


def ranges(start: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(owner, index): `start[i] + 0..count[i]-1` for every i, flattened."""
    owner = np.repeat(np.arange(start.size), count)
    offs = np.arange(owner.size) - np.repeat(np.cumsum(count) - count, count)
    return owner, np.repeat(start, count) + offs


def induced_chain(
    model: ExplicitModel,
    state: np.ndarray,
    memory: np.ndarray,
    memory_states: int,
    rows: np.ndarray,
    entries: np.ndarray,
    owner: np.ndarray,
    dest: np.ndarray,
    initial: np.ndarray,
) -> ExplicitModel:
    """The DTMC over the pairs `(state, memory)` (sorted) in which pair `i`
    takes the model's choice (row) `rows[i]`: model entry `entries[j]`
    leads from pair `owner[j]` to pair `dest[j]` (owners ascending);
    `initial`: the pairs of the initial states."""
    order = np.lexsort((dest, owner))
    entries, owner, dest = entries[order], owner[order], dest[order]
    k = len(state)
    row_ptr = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=k))])
    rewards = tuple(
        RewardStructure(
            r.name,
            None if r.state is None else np.asarray(r.state)[state],
            None if r.transition is None else np.asarray(r.transition)[entries],
        )
        for r in model.rewards
    )
    acts = model.choice_action
    chosen = tuple(acts[r] for r in rows.tolist()) if acts is not None else None
    entry_action, names = None, (None,)
    if chosen is not None and any(a is not None for a in chosen):
        names = (None,) + tuple(sorted({a for a in chosen if a is not None}))
        index = {a: i for i, a in enumerate(names)}
        per_pair = np.array([index[a] for a in chosen], dtype=np.int32)
        entry_action = per_pair[owner]
    states = np.concatenate(
        [np.asarray(model.states)[state], memory[:, None].astype(model.states.dtype)],
        axis=1,
    )
    memvar = StateVar("_memory", 0, max(memory_states - 1, 0))
    labels = {name: np.asarray(v, bool)[state] for name, v in model.labels.items()}
    # "init" is the chain's own initial states (the model's initial states
    # with their initial memory), not every pair of an initial model state
    labels["init"] = np.zeros(k, bool)
    labels["init"][np.asarray(initial, np.int64)] = True
    return ExplicitModel(
        model_type=ModelType.DTMC,
        variables=model.variables + (memvar,),
        states=states,
        initial_states=np.asarray(initial, np.int64),
        choice_ptr=np.arange(k + 1, dtype=np.int64),
        row_ptr=row_ptr.astype(np.int64),
        col=dest.astype(np.int64),
        val=np.asarray(model.val, np.float64)[entries],
        labels=labels,
        rewards=rewards,
        choice_action=chosen,
        entry_action=entry_action,
        action_names=names,
        warnings=model.warnings,
    )
