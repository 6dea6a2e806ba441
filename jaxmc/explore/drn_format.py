"""Writing Storm's explicit format (DRN; described in `jaxmc.explore.drn`,
which reads it), and the text of a state valuation both ways: Storm writes
a state's valuation as the comment `//[x=1\t& b\t& !c]` under its line."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from .._arrays import unique
from ..errors import UnsupportedError
from ..lang.ast import ModelType
from .model import ExplicitModel, StateVar
from .textfile import PathLike


#: DRN's model types (`@type:`) that jaxmc reads and writes.
TYPES = {"DTMC": ModelType.DTMC, "CTMC": ModelType.CTMC, "MDP": ModelType.MDP}
#: The action of a choice without a label.
NOLABEL = "__NOLABEL__"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_valuations(texts: list[str | None]):
    """The variables and state matrix of Storm's valuation comments
    (`[x=1\t& b\t& !c]`), or None where they are missing or not integers and
    booleans. Storm may print a true boolean without its name; it is
    recognised by its position, named where another state names it."""
    if not texts or any(t is None for t in texts):
        return None
    inner = [t.strip()[1:-1] for t in texts]  # type: ignore[union-attr]
    if not all(t.strip().startswith("[") and t.strip().endswith("]") for t in texts):
        return None
    k = inner[0].count("&") + 1 if inner[0].strip() else 0
    if any(t.count("&") != k - 1 for t in inner) or k == 0:
        return None
    terms = [x.strip() for x in "&".join(inner).split("&")]
    names: list[str] = []
    is_bool: list[bool] = []
    states = np.zeros((len(texts), k), dtype=np.int64)
    for j in range(k):
        col = terms[j::k]
        named = next((x for x in col if x), "")
        name, eq, _ = named.partition("=")
        name = name.lstrip("!")
        if not _IDENT.fullmatch(name):
            return None
        if eq:  # an integer variable: `name=value` in every state
            prefix = name + "="
            if not all(x.startswith(prefix) for x in col):
                return None
            try:
                states[:, j] = np.array([x[len(prefix) :] for x in col], np.int64)
            except ValueError:
                return None
        else:  # a boolean: `name`, `!name` or (true, as Storm may print it) ``
            if not all(x in ("", name, "!" + name) for x in col):
                return None
            states[:, j] = [not x.startswith("!") for x in col]
        names.append(name)
        is_bool.append(not eq)
    if len(set(names)) != k:
        return None
    variables = tuple(
        StateVar(name, 0, 1, True) if is_bool[j] else
        StateVar(name, int(states[:, j].min()), int(states[:, j].max()))
        for j, name in enumerate(names)
    )  # fmt: skip
    return variables, states


def _fmt(v: float) -> str:
    """The shortest text that reads back as `v` ("1" for 1.0)."""
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(float(v))


def _texts(values) -> np.ndarray:
    """The `_fmt` text of each value (object array; each distinct value is
    formatted once)."""
    values = np.asarray(values, dtype=np.float64)
    uniq, inv = np.unique(values, return_inverse=True)
    text = np.array([_fmt(float(v)) for v in uniq] + [""], dtype=object)
    return text[inv.reshape(-1)]


def _ints(values) -> np.ndarray:
    return np.asarray(values).astype(str).astype(object)


def _bracket(columns: list[np.ndarray]) -> np.ndarray | str:
    """` [r1, r2, ...]` per row of the reward columns ("" without any)."""
    if not columns:
        return ""
    out = " [" + _texts(columns[0])
    for c in columns[1:]:
        out = out + ", " + _texts(c)
    return out + "]"


def format_drn(model: ExplicitModel) -> str:
    """The DRN text of `model` (states numbered as in `model`)."""
    n, m, mt = model.num_states, model.num_choices, model.model_type
    if mt not in TYPES.values():
        raise UnsupportedError(f"DRN export of a {mt.value} is not supported")
    if not np.all(np.isfinite(model.val)):
        raise UnsupportedError("DRN export: the model has non-finite values")
    row = model.row_of_entry()
    total = np.add.reduceat(model.val, model.row_ptr[:-1]) if m else np.zeros(0)
    ctmc = mt == ModelType.CTMC
    prob = model.val / total[row] if ctmc else model.val
    names, state_r, action_r = [], [], []
    for i, r in enumerate(model.rewards):
        name = r.name if r.name else f"rew{i}"
        if re.search(r"\s", name):
            raise UnsupportedError(
                f'DRN export: the reward structure name "{name}" contains whitespace',
                hint="DRN separates reward model names by spaces; rename it",
            )
        names.append(name)
        state_r.append(np.zeros(n) if r.state is None else np.asarray(r.state, float))
        a = np.zeros(m)
        if r.transition is not None:  # the expected reward of the choice
            weights = prob * np.asarray(r.transition, float)
            a = np.bincount(row, weights=weights, minlength=m)
        action_r.append(a)
    head = "state " + _ints(np.arange(n))
    if ctmc:  # the exit rate: the one choice's total
        head = head + " !" + _texts(total[model.choice_ptr[:-1]])
    head = head + _bracket(state_r)
    for k, mask in model.labels.items():
        mask = np.asarray(mask, bool)
        if not mask.any():
            continue
        if '"' in k:
            raise UnsupportedError(
                f"DRN export: the label `{k}` contains a quotation mark",
                hint="DRN cannot write such labels (as Storm); rename it",
            )
        word = f' "{k}"' if re.search(r"\s", k) else " " + k
        head = head + np.where(mask, word, "").astype(object)
    act = "\taction " + choice_actions(model, row) + _bracket(action_r)
    ent = "\t\t" + _ints(model.col) + " : " + _texts(model.val)
    # Line numbers: each state's line (and valuation), then per choice its
    # action line and its entries.
    per = 2 if model.variables else 1
    cp, rp = model.choice_ptr, model.row_ptr
    state_of = model.state_of_choice()
    out = np.empty(n * per + m + model.num_transitions, dtype=object)
    at_state = np.arange(n) * per + cp[:-1] + rp[cp[:-1]]
    out[at_state] = head
    if model.variables:
        out[at_state + 1] = _valuations(model)
    out[(state_of + 1) * per + np.arange(m) + rp[:-1]] = act
    c = row
    out[(state_of[c] + 1) * per + c + 1 + np.arange(row.size)] = ent
    header = [
        "// Exported by jaxmc",
        f"@type: {mt.value.upper()}",
        "@value_type: double",
        "@parameters",
        "",
        "@reward_models",
        " ".join(names),
        "@nr_states",
        str(n),
        "@nr_choices",
        str(m),
        "@model",
    ]
    return "\n".join(header + out.tolist()) + "\n"


def choice_actions(
    model: ExplicitModel, row: np.ndarray, sep: str = "_", none: str = NOLABEL
) -> np.ndarray:
    """The action written for each choice: an MDP's label; for a DTMC/CTMC
    the actions of the choice's entries joined by `sep` (Storm's DRN writes
    a choice with several labels with `_`, its UMB with `,`), `none` for
    none."""
    m = model.num_choices
    if model.choice_action is not None:
        acts = np.array([a or none for a in model.choice_action], dtype=object)
    else:
        acts = np.full(m, none, dtype=object)
        if model.entry_action is not None:
            names = np.array(model.action_names, dtype=object)
            ids = np.asarray(model.entry_action, dtype=np.int64)
            keep = np.flatnonzero(names[ids] != None)  # noqa: E711
            key = unique(row[keep] * len(names) + ids[keep])
            pairs = np.stack([key // len(names), key % len(names)])
            first = np.ones(pairs.shape[1], dtype=bool)
            first[1:] = pairs[0, 1:] != pairs[0, :-1]
            acts[pairs[0, first]] = names[pairs[1, first]]
            for r in unique(pairs[0, ~first]).tolist():  # several actions
                these = sorted(names[pairs[1, pairs[0] == r]].tolist())
                acts[r] = sep.join(these)
    for a in set(acts.tolist()) if sep == "_" else ():
        if re.search(r"\s", a):
            raise UnsupportedError(f"DRN export: the action `{a}` contains whitespace")
    return acts


def _valuations(model: ExplicitModel) -> np.ndarray:
    """`//[x=1\t& b\t& !c]` per state (true booleans by name, false `!name`)."""
    out = None
    for j, v in enumerate(model.variables):
        col = model.states[:, j]
        if v.is_bool:
            term = np.where(col != 0, v.name, "!" + v.name).astype(object)
        else:
            term = v.name + "=" + _ints(col)
        out = term if out is None else out + "\t& " + term
    return "//[" + out + "]"


def export_drn(model: ExplicitModel, path: PathLike) -> Path:
    """Write `model` as a DRN file; **returns** the path written."""
    path = Path(path)
    path.write_text(format_drn(model))
    return path
