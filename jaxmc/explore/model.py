"""`ExplicitModel`: the output of state-space exploration, the input of every
later stage (layouts, solvers, export).

It lives on the host (numpy arrays): exploration is data-dependent and runs
outside jit. After it, every shape is fixed; layouts move the arrays to the
device.

Transition structure (Storm's row-grouped CSR):

- rows are *choices*. A DTMC or CTMC has exactly one choice per state
  (`choice_ptr == arange(n + 1)`); an MDP has `choice_ptr[s]:choice_ptr[s+1]`
  choices for state `s`, each with an action label.
- `row_ptr[r]:row_ptr[r+1]` are the entries of row `r`: successor `col`,
  value `val` (a probability for DTMCs/MDPs, a rate for CTMCs). Within a row,
  columns are sorted and unique.
- states are numbered in BFS order from the initial states (initial states
  first).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..lang.ast import ModelType


@dataclass(frozen=True)
class StateVar:
    """A state variable as stored in `ExplicitModel.states` (bools as 0/1)."""

    name: str
    low: int
    high: int
    is_bool: bool = False


@dataclass(frozen=True)
class RewardStructure:
    """One reward structure.

    - `state[s]`: the state reward of `s` (a rate reward in a CTMC).
    - `transition[e]`: the transition reward of entry `e` of the transition
      arrays (aligned with `col`/`val`); for DTMCs, where PRISM merges commands
      into one distribution, an entry produced by several commands carries their
      probability-weighted mean, so that the expected one-step reward is exact.
    Either may be None (no rewards of that kind).
    - `negative_items[s]`: some reward item (state or transition) is
      negative in state `s`, even where the items' sum is not; None if none
      is (PRISM refuses such structures in its `R` operators).
    """

    name: str | None
    state: np.ndarray | None = None
    transition: np.ndarray | None = None
    negative_items: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class ExplicitModel:
    model_type: ModelType
    variables: tuple[StateVar, ...]
    states: np.ndarray  # int32 [n, len(variables)]
    initial_states: np.ndarray  # int64 [k]
    choice_ptr: np.ndarray  # int64 [n + 1]
    row_ptr: np.ndarray  # int64 [m + 1]
    col: np.ndarray  # int64 [nnz]
    val: np.ndarray  # float64 [nnz]
    labels: dict[str, np.ndarray]  # bool [n]; includes "init" and "deadlock"
    rewards: tuple[RewardStructure, ...] = ()
    #: Action label of each choice (None = unlabelled `[]`); for DTMCs/CTMCs
    #: the label of a merged choice is None.
    choice_action: tuple[str | None, ...] | None = None
    #: For a DTMC/CTMC, the action of each entry, as an index into
    #: `action_names` (0: none): the one its commands agree on (builder) or
    #: the label of its `.tra` line (import); written back by `-exportmodel`.
    #: None where no entry has an action.
    entry_action: np.ndarray | None = None
    #: The names `entry_action` indexes; `action_names[0]` is None.
    action_names: tuple[str | None, ...] = (None,)
    #: Builder-specific record of which command/update produced each entry,
    #: used to recompute `val` from parameters (see explore.provenance).
    provenance: object = field(default=None, repr=False)
    #: Warnings raised while building (e.g. deadlocks fixed with self-loops).
    warnings: tuple[str, ...] = ()

    @property
    def num_states(self) -> int:
        return int(self.choice_ptr.shape[0] - 1)

    @property
    def num_choices(self) -> int:
        return int(self.row_ptr.shape[0] - 1)

    @property
    def num_transitions(self) -> int:
        return int(self.col.shape[0])

    @property
    def is_nondeterministic(self) -> bool:
        return self.model_type == ModelType.MDP

    def row_of_entry(self) -> np.ndarray:
        """Row (choice) index of every entry."""
        return np.repeat(np.arange(self.num_choices), np.diff(self.row_ptr))

    def state_of_choice(self) -> np.ndarray:
        """State index of every choice."""
        return np.repeat(np.arange(self.num_states), np.diff(self.choice_ptr))

    def state(self, i: int) -> dict[str, int | bool]:
        """The valuation of state `i`, as `{variable: value}`."""
        row = self.states[i]
        return {
            v.name: bool(x) if v.is_bool else int(x)
            for v, x in zip(self.variables, row.tolist())
        }

    def reward_structure(self, key: str | int | None) -> RewardStructure:
        """Look up a reward structure by name, by 1-based index, or the first
        one (`None`), as PRISM's `R{"name"}`, `R{2}` and `R` do."""
        from ..errors import ModelCheckingError

        if not self.rewards:
            raise ModelCheckingError("the model has no reward structures")
        if key is None:
            return self.rewards[0]
        if isinstance(key, int):
            if 1 <= key <= len(self.rewards):
                return self.rewards[key - 1]
            raise ModelCheckingError(
                f"reward structure index {key} out of range 1..{len(self.rewards)}"
            )
        for r in self.rewards:
            if r.name == key:
                return r
        names = ", ".join(f'"{r.name}"' for r in self.rewards if r.name)
        raise ModelCheckingError(
            f'no reward structure named "{key}"', hint=f"the model has: {names}"
        )
