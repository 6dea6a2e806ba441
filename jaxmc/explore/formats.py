"""PRISM's explicit model files: `.tra`, `.sta`, `.lab`, `.srew`, `.trew`.

The formats, as PRISM 4.x writes them (`-exportmodel`):

- `.tra`: `# Transitions (DTMC)` (comment optional), then `n nnz` and lines
  `s t v` for DTMCs/CTMCs; `n choices nnz` and lines `s c t v [action]` for
  MDPs (`c` is the index of the choice within state `s`).
- `.sta`: `(x,y,z)` then `i:(v1,v2,v3)`, booleans written `true`/`false`.
- `.lab`: `0="init" 1="deadlock" 2="name" ...` then `s: i j ...` for every
  state carrying at least one label.
- `.srew`: `n k` then `s r` for the `k` states with a non-zero reward.
- `.trew`: `n k` then `s t r` (DTMC/CTMC), or `n choices k` then `s c t r`
  (MDP), for the `k` non-zero entries.

Lines starting with `#` are comments. Files are written here; they are read
back by `jaxmc.explore.explicit_import`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..lang.ast import ModelType
from .model import ExplicitModel, RewardStructure
from .reorder import lexicographic
from .textfile import PathLike


_TYPE_NAMES = {ModelType.DTMC: "DTMC", ModelType.CTMC: "CTMC", ModelType.MDP: "MDP"}


def _fmt_values(values: np.ndarray, precision: int | None = None) -> np.ndarray:
    """Decimal text of each value ("1" for 1.0; see `_fmt`)."""
    values = np.asarray(values, dtype=np.float64)
    uniq, inv = np.unique(values, return_inverse=True)
    text = np.array([_fmt(float(v), precision) for v in uniq], dtype=object)
    return text[inv.reshape(-1)]


#: Significant digits of exported values (PRISM's default export precision).
EXPORT_PRECISION = 16


def _fmt(v: float, precision: int | None = None) -> str:
    """`v` rounded to `precision` (default `EXPORT_PRECISION`) significant
    digits, in the shortest text that reads back as that rounded value."""
    digits = EXPORT_PRECISION if precision is None else precision
    if math.isfinite(v) and v == int(v) and abs(v) < 10.0**digits:
        return str(int(v))
    rounded = float(format(v, f".{digits}g"))
    if math.isfinite(rounded) and rounded == int(rounded) and abs(rounded) < 1e16:
        return str(int(rounded))
    return repr(rounded)


def _join_lines(columns: Sequence[np.ndarray]) -> str:
    if len(columns[0]) == 0:
        return ""
    parts = [np.asarray(c).astype(str).astype(object) for c in columns]
    out = parts[0]
    for p in parts[1:]:
        out = out + " " + p
    return "\n".join(out.tolist()) + "\n"


def _choice_index(model: ExplicitModel) -> np.ndarray:
    """Index of each choice within its state."""
    state = model.state_of_choice()
    return np.arange(model.num_choices) - model.choice_ptr[state]


def format_tra(
    model: ExplicitModel, *, actions: bool = True, precision: int | None = None
) -> str:
    """The `.tra` text of `model` (with action labels if `actions`; values
    at `precision` significant digits)."""
    n = model.num_states
    name = _TYPE_NAMES.get(model.model_type, str(model.model_type.value).upper())
    head = [f"# Transitions ({name})"]
    row = model.row_of_entry()
    vals = _fmt_values(model.val, precision)
    if model.is_nondeterministic:
        head.append(f"{n} {model.num_choices} {model.num_transitions}")
        src = model.state_of_choice()[row]
        cols = [src, _choice_index(model)[row], model.col, vals]
        if actions and model.choice_action is not None:
            act = np.array(
                ["" if a is None else " " + a for a in model.choice_action] or [""],
                dtype=object,
            )[row]
            body = _join_lines(cols)
            lines = body.splitlines()
            body = "".join(f"{ln}{a}\n" for ln, a in zip(lines, act.tolist()))
        else:
            body = _join_lines(cols)
    else:
        head.append(f"{n} {model.num_transitions}")
        src = model.state_of_choice()[row]
        body = _join_lines([src, model.col, vals])
        if actions and model.entry_action is not None:
            names = np.array(
                ["" if a is None else " " + a for a in model.action_names], dtype=object
            )
            labels = names[model.entry_action].tolist()
            body = "".join(f"{ln}{a}\n" for ln, a in zip(body.splitlines(), labels))
    return "\n".join(head) + "\n" + body


def format_sta(model: ExplicitModel) -> str:
    """The `.sta` text: variable names, then each state's valuation."""
    names = ",".join(v.name for v in model.variables)
    n = model.num_states
    if not model.variables:
        return "# States\n()\n" + "".join(f"{i}:()\n" for i in range(n))
    cols = []
    for j, v in enumerate(model.variables):
        c = model.states[:, j]
        if v.is_bool:
            cols.append(np.where(c != 0, "true", "false").astype(object))
        else:
            cols.append(c.astype(str).astype(object))
    text = cols[0]
    for c in cols[1:]:
        text = text + "," + c
    idx = np.arange(n).astype(str).astype(object)
    lines = idx + ":(" + text + ")"
    return f"# States\n({names})\n" + "\n".join(lines.tolist()) + ("\n" if n else "")


def _label_order(model: ExplicitModel) -> list[str]:
    names = ["init", "deadlock"]
    names += [k for k in model.labels if k not in ("init", "deadlock")]
    return names


def format_lab(model: ExplicitModel, names: Sequence[str] | None = None) -> str:
    """The `.lab` text: label names (`names`, default: "init", "deadlock",
    then the model's), then the labels of each labelled state."""
    names = _label_order(model) if names is None else list(names)
    n = model.num_states
    head = " ".join(f'{i}="{name}"' for i, name in enumerate(names))
    masks = np.stack(
        [np.asarray(model.labels.get(k, np.zeros(n, bool)), bool) for k in names]
    )
    states = np.nonzero(masks.any(axis=0))[0]
    lines = []
    for s in states.tolist():
        ids = np.nonzero(masks[:, s])[0].tolist()
        lines.append(f"{s}: " + " ".join(map(str, ids)))
    return "# Labels\n" + head + "\n" + "".join(ln + "\n" for ln in lines)


def _reward_comment(r: RewardStructure) -> str:
    return f'# Reward structure "{r.name}"' if r.name else "# Reward structure"


def format_srew(
    model: ExplicitModel, index: int = 0, *, precision: int | None = None
) -> str:
    """The `.srew` text of reward structure `index` (0-based)."""
    r = model.rewards[index]
    n = model.num_states
    state = np.zeros(n) if r.state is None else np.asarray(r.state, np.float64)
    nz = np.nonzero(state)[0]
    body = _join_lines([nz, _fmt_values(state[nz], precision)]) if nz.size else ""
    return f"{_reward_comment(r)}\n# State rewards\n{n} {nz.size}\n{body}"


def format_trew(
    model: ExplicitModel, index: int = 0, *, precision: int | None = None
) -> str:
    """The `.trew` text of reward structure `index` (0-based)."""
    r = model.rewards[index]
    n = model.num_states
    nnz = model.num_transitions
    tr = np.zeros(nnz) if r.transition is None else np.asarray(r.transition, float)
    nz = np.nonzero(tr)[0]
    row = model.row_of_entry()[nz]
    src = model.state_of_choice()[row]
    head = f"{_reward_comment(r)}\n# Transition rewards\n"
    if model.is_nondeterministic:
        head += f"{n} {model.num_choices} {nz.size}\n"
        cols = [
            src,
            _choice_index(model)[row],
            model.col[nz],
            _fmt_values(tr[nz], precision),
        ]
    else:
        head += f"{n} {nz.size}\n"
        cols = [src, model.col[nz], _fmt_values(tr[nz], precision)]
    return head + (_join_lines(cols) if nz.size else "")


def export_explicit(
    model: ExplicitModel,
    base: PathLike,
    *,
    parts: Sequence[str] = ("tra", "sta", "lab", "srew", "trew"),
    actions: bool = True,
) -> list[Path]:
    """Write `model` as PRISM explicit files `base.tra`, `base.sta`, ...

    States are numbered as PRISM numbers them (lexicographic order of their
    valuations: `jaxmc.explore.reorder`), each choice's entries sorted by
    target state.

    With several reward structures, PRISM's naming is used: `base1.srew`,
    `base2.srew`, ... (one file per structure); with one, `base.srew`.

    **Returns:** the paths written.
    """
    base = Path(base)
    written: list[Path] = []
    model = lexicographic(model)

    def put(path: Path, text: str) -> None:
        path.write_text(text)
        written.append(path)

    for part in parts:
        if part == "tra":
            put(base.with_name(base.name + ".tra"), format_tra(model, actions=actions))
        elif part == "sta":
            put(base.with_name(base.name + ".sta"), format_sta(model))
        elif part == "lab":
            put(base.with_name(base.name + ".lab"), format_lab(model))
        elif part in ("srew", "trew"):
            fmt = format_srew if part == "srew" else format_trew
            k = len(model.rewards)
            for i in range(k):
                suffix = f"{i + 1}" if k > 1 else ""
                put(base.with_name(f"{base.name}{suffix}.{part}"), fmt(model, i))
        else:
            raise ValueError(f"unknown explicit file kind {part!r}")
    return written
