"""Writing Storm's explicit format (DRN; described in `jaxmc.explore.drn`,
which reads it), and the text of a state valuation both ways: Storm writes
a state's valuation as the comment `//[x=1\t& b\t& !c]` under its line."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

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
    (`[x=1\\t& b\\t& !c]`), or None where they are missing or not integers and
    booleans. Storm may print a true boolean without its name; it is
    recognised by its position, named where another state names it."""
    if not texts or any(t is None for t in texts):
        return None
    parsed = []
    for t in texts:
        t = t.strip()
        if not (t.startswith("[") and t.endswith("]")):
            return None
        parsed.append([x.strip() for x in t[1:-1].split("&")] if t != "[]" else [])
    k = len(parsed[0])
    if any(len(p) != k for p in parsed):
        return None
    names: list[str | None] = [None] * k
    kinds: list[str | None] = [None] * k
    states = np.zeros((len(parsed), k), dtype=np.int64)
    for i, terms in enumerate(parsed):
        for j, term in enumerate(terms):
            name, eq, value = term.partition("=")
            if eq:
                kind = "int"
                try:
                    states[i, j] = int(value)
                except ValueError:
                    return None
            else:
                kind, states[i, j] = "bool", int(not name.startswith("!"))
                name = name.lstrip("!")
            if name and not _IDENT.fullmatch(name):
                return None
            if (name and names[j] not in (None, name)) or kinds[j] not in (None, kind):
                return None
            names[j] = names[j] or name or None
            kinds[j] = kind
    if any(x is None for x in names) or len(set(names)) != k:
        return None
    variables = tuple(
        StateVar(name, 0, 1, True) if kinds[j] == "bool" else
        StateVar(name, int(states[:, j].min()), int(states[:, j].max()))
        for j, name in enumerate(names)
    )  # fmt: skip
    return variables, states


def _fmt(v: float) -> str:
    """The shortest text that reads back as `v` ("1" for 1.0)."""
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(float(v))


def _rewards_text(values: list[np.ndarray], i: int) -> str:
    if not values:
        return ""
    return " [" + ", ".join(_fmt(float(v[i])) for v in values) + "]"


def format_drn(model: ExplicitModel) -> str:
    """The DRN text of `model` (states numbered as in `model`)."""
    n, mt = model.num_states, model.model_type
    if mt not in TYPES.values():
        raise UnsupportedError(f"DRN export of a {mt.value} is not supported")
    if not np.all(np.isfinite(model.val)):
        raise UnsupportedError("DRN export: the model has non-finite values")
    ctmc = mt == ModelType.CTMC
    row = model.row_of_entry()
    exit_rate = (
        np.add.reduceat(model.val, model.row_ptr[:-1])
        if model.num_choices
        else np.zeros(0)
    )
    prob = model.val / exit_rate[row] if ctmc else model.val
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
        a = np.zeros(model.num_choices)
        if r.transition is not None:
            a = np.bincount(row, weights=prob * np.asarray(r.transition, float),
                            minlength=model.num_choices)  # fmt: skip
        action_r.append(a)
    label_names = [k for k in model.labels if np.asarray(model.labels[k]).any()]
    for k in label_names:
        if '"' in k:
            raise UnsupportedError(
                f"DRN export: the label `{k}` contains a quotation mark",
                hint="DRN cannot write such labels (as Storm); rename it",
            )
    quoted = [f' "{k}"' if re.search(r"\s", k) else " " + k for k in label_names]
    masks = np.zeros((len(label_names), n), dtype=bool)
    for j, k in enumerate(label_names):
        masks[j] = np.asarray(model.labels[k], bool)
    actions = _choice_actions(model, row)
    out = [
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
        str(model.num_choices),
        "@model",
    ]
    vals = [_fmt(float(v)) for v in model.val.tolist()]
    col = model.col.tolist()
    cp, rp = model.choice_ptr.tolist(), model.row_ptr.tolist()
    for s in range(n):
        head = f"state {s}"
        if ctmc:
            head += " !" + _fmt(float(exit_rate[cp[s] : cp[s + 1]].sum()))
        head += _rewards_text(state_r, s)
        head += "".join(q for q, m in zip(quoted, masks[:, s].tolist()) if m)
        out.append(head)
        if model.variables:
            out.append("//" + _valuation(model, s))
        for c in range(cp[s], cp[s + 1]):
            out.append(f"\taction {actions[c]}{_rewards_text(action_r, c)}")
            out.extend(f"\t\t{col[e]} : {vals[e]}" for e in range(rp[c], rp[c + 1]))
    return "\n".join(out) + "\n"


def _choice_actions(model: ExplicitModel, row: np.ndarray) -> list[str]:
    """The action written for each choice: an MDP's label; for a DTMC/CTMC
    the actions of the choice's entries joined by `_` (Storm's notation for
    a choice with several labels), `__NOLABEL__` for none."""
    if model.choice_action is not None:
        acts = [a or NOLABEL for a in model.choice_action]
    elif model.entry_action is not None:
        per: list[set[str]] = [set() for _ in range(model.num_choices)]
        for r, a in zip(row.tolist(), model.entry_action.tolist()):
            if model.action_names[a] is not None:
                per[r].add(model.action_names[a])
        acts = ["_".join(sorted(x)) or NOLABEL for x in per]
    else:
        acts = [NOLABEL] * model.num_choices
    for a in acts:
        if re.search(r"\s", a):
            raise UnsupportedError(f"DRN export: the action `{a}` contains whitespace")
    return acts


def _valuation(model: ExplicitModel, s: int) -> str:
    terms = []
    for v, x in zip(model.variables, model.states[s].tolist()):
        terms.append((v.name if x else "!" + v.name) if v.is_bool else f"{v.name}={x}")
    return "[" + "\t& ".join(terms) + "]"


def export_drn(model: ExplicitModel, path: PathLike) -> Path:
    """Write `model` as a DRN file; **returns** the path written."""
    path = Path(path)
    path.write_text(format_drn(model))
    return path
