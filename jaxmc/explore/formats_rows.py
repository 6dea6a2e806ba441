"""PRISM's "rows" export (`-exportmodel FILE:rows`, `-exportrows`): one line
per row of the matrix, as PRISM's sparse engine writes it.

- `.tra`: `n nnz` (MDP: `n choices nnz`), no comment header, then per state
  (MDP: per choice) `s v:t v:t ...`; an MDP's line ends with its action.
- `.trew`: the same shape over the transition matrix's rows, listing the
  non-zero rewards only (a row without any is just `s`), without actions.

The `.sta`, `.lab` and `.srew` files are PRISM's plain ones.
"""

from __future__ import annotations

import numpy as np

from .formats import _fmt_values
from .model import ExplicitModel


def _rows(model: ExplicitModel, keep: np.ndarray, values: np.ndarray, precision):
    """One line per row (choice): `s` then ` v:t` for the kept entries."""
    text = np.full(model.num_transitions, "", dtype=object)
    idx = np.nonzero(keep)[0]
    vals = _fmt_values(values[idx], precision)
    text[idx] = " " + vals + ":" + np.asarray(model.col)[idx].astype(str).astype(object)
    row_ptr = np.asarray(model.row_ptr)
    src = model.state_of_choice()
    out = []
    for c in range(model.num_choices):
        out.append(str(src[c]) + "".join(text[row_ptr[c] : row_ptr[c + 1]].tolist()))
    return out


def _head(model: ExplicitModel, nnz: int) -> str:
    n = model.num_states
    if model.is_nondeterministic:
        return f"{n} {model.num_choices} {nnz}\n"
    return f"{n} {nnz}\n"


def format_tra(model: ExplicitModel, *, actions: bool = True, precision=None) -> str:
    """The rows `.tra` text."""
    keep = np.ones(model.num_transitions, bool)
    lines = _rows(model, keep, np.asarray(model.val, np.float64), precision)
    if model.is_nondeterministic and actions and model.choice_action is not None:
        lines = [f"{ln} {a or ''}" for ln, a in zip(lines, model.choice_action)]
    return _head(model, model.num_transitions) + "".join(ln + "\n" for ln in lines)


def format_trew(model: ExplicitModel, index: int = 0, *, precision=None) -> str:
    """The rows `.trew` text of reward structure `index` (0-based)."""
    r = model.rewards[index]
    nnz = model.num_transitions
    tr = np.zeros(nnz) if r.transition is None else np.asarray(r.transition, float)
    keep = tr != 0
    lines = _rows(model, keep, tr, precision)
    return _head(model, int(keep.sum())) + "".join(ln + "\n" for ln in lines)
