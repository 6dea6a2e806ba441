"""PRISM's Matlab export (`-exportmodel FILE:matlab`, `-exportmatlab`).

Each file is a Matlab script with 1-based indices, as PRISM writes them:

- `.tra`: `P = sparse(n,n);` (DTMC), `R = ...` (CTMC) then `P(s,t)=v;`;
  an MDP has one matrix per choice index, `S1 = sparse(n,n);`, `S2 ...`
  (as many as the most choices of a state), then `S<c>(s,t)=v;`.
- `.sta`: `# States`, `% (x,y)`, `states=[`, one row `v1,v2` per state, `];`.
- `.lab`: `l_<name>=sparse(n,1);` per label, a blank line, then
  `l_<name>(s)=1;` state by state.
- `.srew`: `c<r> = sparse(n,1);` then `c<r>(s)=v;` (r: the structure's
  1-based index); `.trew`: `C<r> = sparse(n,n);` then `C<r>(s,t)=v;`, or for
  an MDP `C<r><c> = sparse(n,n);` per choice index and `C<r><c>(s,t)=v;`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..lang.ast import ModelType
from .formats import _choice_index, _fmt_values, _label_order
from .model import ExplicitModel


def _lines(parts: Sequence[np.ndarray]) -> str:
    if len(parts[0]) == 0:
        return ""
    out = np.asarray(parts[0]).astype(str).astype(object)
    for p in parts[1:]:
        out = out + np.asarray(p).astype(str).astype(object)
    return "".join(line + "\n" for line in out.tolist())


def _most_choices(model: ExplicitModel) -> int:
    counts = np.diff(np.asarray(model.choice_ptr))
    return int(counts.max()) if counts.size else 0


def _matrix(model, name: str, rows: np.ndarray, values, precision) -> str:
    """Matrix `name` (one per choice index for an MDP) with the entries
    `rows` (entry indices) and their `values`."""
    n = model.num_states
    src = model.state_of_choice()[model.row_of_entry()[rows]] + 1
    dst = np.asarray(model.col)[rows] + 1
    text = _fmt_values(values, precision)
    if model.is_nondeterministic:
        k = _most_choices(model)
        head = "".join(f"{name}{c} = sparse({n},{n});\n" for c in range(1, k + 1))
        which = _choice_index(model)[model.row_of_entry()[rows]] + 1
        names = np.char.add(name, which.astype(str)).astype(object)
    else:
        head = f"{name} = sparse({n},{n});\n"
        names = np.full(len(rows), name, dtype=object)
    body = _lines([names, "(", src, ",", dst, ")=", text, ";"]) if len(rows) else ""
    return head + body


def format_tra(model: ExplicitModel, *, precision: int | None = None) -> str:
    """The Matlab `.tra` text."""
    name = {ModelType.CTMC: "R", ModelType.DTMC: "P"}.get(model.model_type, "S")
    return _matrix(model, name, np.arange(model.num_transitions), model.val, precision)


def format_sta(model: ExplicitModel) -> str:
    """The Matlab `.sta` text."""
    names = ",".join(v.name for v in model.variables)
    cols = []
    for j, v in enumerate(model.variables):
        c = np.asarray(model.states)[:, j]
        cols.append(np.where(c != 0, "true", "false") if v.is_bool else c.astype(str))
    rows = [",".join(r) for r in zip(*cols)] if cols else [""] * model.num_states
    body = "".join(r + "\n" for r in rows)
    return f"# States\n% ({names})\nstates=[\n{body}];\n"


def format_lab(model: ExplicitModel, names: Sequence[str] | None = None) -> str:
    """The Matlab `.lab` text (labels `names`, default as `formats.format_lab`)."""
    names = _label_order(model) if names is None else list(names)
    n = model.num_states
    head = "".join(f"l_{k}=sparse({n},1);\n" for k in names)
    masks = np.stack(
        [np.asarray(model.labels.get(k, np.zeros(n, bool)), bool) for k in names]
    ) if names else np.zeros((0, n), bool)  # fmt: skip
    label, state = np.nonzero(masks.T)[::-1]
    # state by state, each state's labels in order
    order = np.lexsort((label, state))
    lines = [f"l_{names[label[i]]}({state[i] + 1})=1;\n" for i in order.tolist()]
    return head + "\n" + "".join(lines)


def format_srew(model: ExplicitModel, index: int = 0, *, precision=None) -> str:
    """The Matlab `.srew` text of reward structure `index` (0-based)."""
    r = model.rewards[index]
    n = model.num_states
    state = np.zeros(n) if r.state is None else np.asarray(r.state, np.float64)
    nz = np.nonzero(state)[0]
    name = f"c{index + 1}"
    text = _fmt_values(state[nz], precision)
    return f"{name} = sparse({n},1);\n" + _lines([name + "(", nz + 1, ")=", text, ";"])


def format_trew(model: ExplicitModel, index: int = 0, *, precision=None) -> str:
    """The Matlab `.trew` text of reward structure `index` (0-based)."""
    r = model.rewards[index]
    nnz = model.num_transitions
    tr = np.zeros(nnz) if r.transition is None else np.asarray(r.transition, float)
    nz = np.nonzero(tr)[0]
    return _matrix(model, f"C{index + 1}", nz, tr[nz], precision)
