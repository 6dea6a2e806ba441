"""Schedulers (PRISM's strategies) of MDPs out of jaxmc: the induced DTMC as
a model to check again (`induced_model`), and PRISM's `-exportstrat`
files (`format_strategy`, `export_strategy`).

The formats, as PRISM 4.9's explicit engine writes them
(`strat/MDStrategyArray.java`, `MDStrategy.java`, `Strategy.java`):

- `actions` (the default): one line `STATE=ACTION` per state whose choice
  is defined (PRISM leaves out the states where any choice is optimal),
  states in PRISM's order (lexicographic in the valuations) and written
  as their valuation `(v1,v2,...)` (`states=false`: as their index);
  an unlabelled choice is written as the empty string.
- `indices`: `INDEX=CHOICE`, the choice's index within its state.
- `induced` (the default for a `.tra` file): the `.tra` file of the
  induced model: with `mode=reduce` (PRISM's default since July 2025) the
  DTMC, with `mode=restrict` the MDP with only the chosen choice in each
  state. States without
  a defined choice take their first choice, as PRISM does. PRISM selects
  the chosen choice by its action label (all choices of a state with that
  label together); jaxmc by its index, which is the same unless a state has
  two choices with the same label.

The finite-memory schedulers of LTL properties
(`jaxmc.automata.memory.MemoryScheduler`) are written as PRISM writes its
product strategies (`strat/FMDStrategyProduct.java`), one line per pair
(model state, memory) the scheduler can be in, ordered by the state (in
PRISM's order) then the memory:

- `actions`: `STATE,MEMORY=ACTION` for the pairs whose choice matters
  (`(v1,v2,...),m=action`; `states=false`: `index,m=action`);
- `indices`: `INDEX,MEMORY=CHOICE` for every pair, the choice -1 where
  it does not matter (the formula is decided there, or any choice is
  optimal);
- `induced`: the `.tra` file of the induced chain over the pairs
  (`MemoryScheduler.chain`, states ordered as above; `mode=restrict` writes
  it as an MDP with one choice per pair).

The memory numbers are jaxmc's (`MemoryScheduler.memory_automaton` says
which automaton state each one is); PRISM numbers its own automaton's
(a deterministic Rabin automaton where jaxmc builds a limit-deterministic
one), so the memory column is not PRISM's.

Not written: `dot` files, and `reach=true` for induced models
(`UnsupportedError`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from .automata.memory import MemoryScheduler
from .errors import UnsupportedError
from .explore import ExplicitModel
from .explore.formats import format_tra
from .explore.reorder import lexicographic, lexicographic_order
from .lang import ast
from .model import Model, build
from .numerics.induced import induced_dtmc
from .numerics.scheduler import Scheduler


#: The `type=` values of `-exportstrat` jaxmc writes.
TYPES = ("actions", "indices", "induced")


def _scheduler(s: Any) -> Scheduler | MemoryScheduler:
    sched = getattr(s, "scheduler", s)
    if not isinstance(sched, (Scheduler, MemoryScheduler)):
        raise UnsupportedError(
            "no scheduler given",
            hint="check the property with jaxmc.check(..., scheduler=True)",
        )
    return sched


def induced_explicit(model: Model | ExplicitModel, scheduler: Any) -> ExplicitModel:
    """The DTMC `scheduler` (a `Scheduler` or a `CheckResult` carrying one)
    induces on `model` (an MDP), states numbered as in `model`; for a
    finite-memory `MemoryScheduler`, the chain over its pairs (model state,
    memory), with the variable `_memory` after the model's."""
    return _scheduler(scheduler).induced(build(model))


def induced_model(model: Model, scheduler: Any) -> Model:
    """The DTMC `scheduler` (a `Scheduler` or a `CheckResult` carrying one)
    induces on the MDP `model`, as a `Model` to check properties on with
    `jaxmc.check` (the same variables, labels, formulas and reward
    structures; `Pmin`/`Pmax` on it are plain `P`). A finite-memory
    scheduler's (LTL) induced model has a state per pair (model state,
    memory): its initial states are those of the model with their initial
    memory, so a property's value there is the scheduler's."""
    explicit = induced_explicit(model, scheduler)
    checked = model.checked
    program = dataclasses.replace(checked.program, model_type=ast.ModelType.DTMC)
    checked = dataclasses.replace(
        checked, program=program, model_type=ast.ModelType.DTMC
    )
    return Model(checked=checked, path=model.path, _explicit=explicit, build_time=0.0)


def _state_text(model: ExplicitModel) -> np.ndarray:
    """Each state's valuation as PRISM prints a `State`: `(1,true,0)`."""
    n = model.num_states
    if not model.variables:
        return np.full(n, "()", dtype=object)
    cols = []
    for j, v in enumerate(model.variables):
        c = np.asarray(model.states)[:, j]
        if v.is_bool:
            cols.append(np.where(c != 0, "true", "false").astype(object))
        else:
            cols.append(c.astype(str).astype(object))
    text = cols[0]
    for c in cols[1:]:
        text = text + "," + c
    return "(" + text + ")"


def format_strategy(
    model: Model | ExplicitModel,
    scheduler: Any,
    type: str = "actions",
    *,
    states: bool = True,
    mode: str = "reduce",
    reach: bool | None = None,
) -> str:
    """The text of PRISM's `-exportstrat` file of `scheduler` on `model`
    (see the module's docstring for the formats)."""
    explicit = build(model)
    sched = _scheduler(scheduler)
    if type not in TYPES:
        raise UnsupportedError(
            f"strategy export type {type!r} is not written by jaxmc",
            hint="use type=" + "|".join(TYPES),
        )
    if mode not in ("restrict", "reduce"):
        raise UnsupportedError(
            f"unknown induced-model mode {mode!r}", hint="use mode=restrict|reduce"
        )
    if isinstance(sched, MemoryScheduler):
        return _format_memory(explicit, sched, type, states, mode, reach)
    order = lexicographic_order(explicit)
    if type in ("actions", "indices"):
        keep = order[np.asarray(sched.defined)[order]]
        rank = np.empty(explicit.num_states, np.int64)
        rank[order] = np.arange(explicit.num_states)
        if type == "indices":
            left = rank[keep].astype(str).astype(object)
            right = np.asarray(sched.choice)[keep].astype(str).astype(object)
        else:
            left = (
                _state_text(explicit)[keep]
                if states
                else rank[keep].astype(str).astype(object)
            )
            acts = np.array(["" if a is None else a for a in sched.actions] or [""])
            right = acts.astype(object)[keep]
        lines = (left + "=" + right).tolist()
        return "".join(line + "\n" for line in lines)
    _no_reach(reach)
    induced = induced_dtmc(explicit, sched.choice)
    if mode == "restrict":  # the MDP with one choice per state
        induced = dataclasses.replace(induced, model_type=ast.ModelType.MDP)
    return format_tra(lexicographic(induced))


def _format_memory(explicit, sched, type, states, mode, reach) -> str:
    """`format_strategy` of a finite-memory scheduler (module docstring)."""
    order = lexicographic_order(explicit)
    rank = np.empty(explicit.num_states, np.int64)
    rank[order] = np.arange(explicit.num_states)
    pairs = np.lexsort((sched.memory, rank[sched.state]))
    mem = sched.memory[pairs].astype(str).astype(object)
    if type == "induced":
        _no_reach(reach)
        chain = sched.chain
        if mode == "restrict":
            chain = dataclasses.replace(chain, model_type=ast.ModelType.MDP)
        return format_tra(lexicographic(chain))
    where = rank[sched.state[pairs]].astype(str).astype(object)
    if type == "indices":
        right = np.where(sched.defined[pairs], sched.choice[pairs], -1)
        right = right.astype(str).astype(object)
    else:
        keep = sched.defined[pairs]
        pairs, mem, where = pairs[keep], mem[keep], where[keep]
        if states:
            where = _state_text(explicit)[sched.state[pairs]]
        acts = [sched.actions[k] for k in pairs.tolist()]
        right = np.array(["" if a is None else a for a in acts] or [""], dtype=object)
        right = right[: len(pairs)]
    lines = (where + "," + mem + "=" + right).tolist()
    return "".join(line + "\n" for line in lines)


def _no_reach(reach) -> None:
    if reach:
        raise UnsupportedError(
            "induced models restricted to their reachable states (reach=true) "
            "are not written by jaxmc",
            hint="leave out reach (PRISM's default for induced models: all states)",
        )


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """`FILE[:OPTIONS]` of `-exportstrat` → (file, keyword arguments of
    `format_strategy`): `type=actions|indices|induced|dot`, `mode=restrict|
    reduce`, `reach[=true|false]`, `states[=true|false]`; the default type
    follows the file's extension (`.tra`: induced, `.dot`: dot)."""
    from .errors import ModelCheckingError

    file, _, opts = spec.partition(":")
    ext = file.rsplit(".", 1)[-1] if "." in file else ""
    kw: dict[str, Any] = {"type": {"tra": "induced", "dot": "dot"}.get(ext, "actions")}
    for raw in filter(None, (o.strip() for o in opts.split(","))):
        key, eq, val = raw.partition("=")
        if key in ("reach", "states", "obs"):
            if eq and val not in ("true", "false"):
                raise ModelCheckingError(
                    f"bad value {val!r} for -exportstrat option {key!r}",
                    hint="expected true or false",
                )
            if key != "obs":  # (partially observable models only)
                kw[key] = not eq or val == "true"
        elif key == "type" and val in ("actions", "indices", "induced", "dot"):
            kw["type"] = val
        elif key == "type" and val == "model":
            kw["type"] = "induced"
        elif key == "mode" and val in ("restrict", "reduce"):
            kw["mode"] = val
        else:
            raise ModelCheckingError(
                f"unknown -exportstrat option {raw!r}",
                hint="options: type=actions|indices|induced|dot, "
                "mode=restrict|reduce, reach=true|false, states=true|false",
            )
    if kw["type"] == "dot":
        raise UnsupportedError(
            "strategies as Dot files are not written by jaxmc",
            hint="use type=actions, indices or induced",
        )
    return file, kw


def export_strategy(model: Model | ExplicitModel, scheduler: Any, spec: str) -> Path:
    """Write `scheduler` as PRISM's `-exportstrat FILE[:OPTIONS]` does
    (`parse_spec`); returns the file written."""
    file, kw = parse_spec(spec)
    text = format_strategy(model, scheduler, **kw)
    path = Path(file)
    path.write_text(text)
    return path
