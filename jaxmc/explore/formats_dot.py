"""PRISM's Graphviz export of the transition graph (`-exporttransdot`,
`-exporttransdotstates`, `-exportmodel FILE.dot`), as PRISM's `DotExporter`
writes it: a box per state (labelled with its index, and its valuation with
`states`), an edge per transition labelled with its probability or rate
(and action); an MDP's choices go through a point node `n<s>_<c>` whose
incoming edge is labelled `<c>:<action>`.
"""

from __future__ import annotations

import numpy as np

from .formats import _choice_index, _fmt_values
from .model import ExplicitModel


def _valuations(model: ExplicitModel) -> list[str]:
    cols = []
    for j, v in enumerate(model.variables):
        c = np.asarray(model.states)[:, j]
        cols.append(np.where(c != 0, "true", "false") if v.is_bool else c.astype(str))
    if not cols:
        return ["()"] * model.num_states
    return ["(" + ",".join(r) + ")" for r in zip(*cols)]


def format_dot(
    model: ExplicitModel, *, states: bool = False, actions: bool = True, precision=None
) -> str:
    """The `.dot` text of `model` (`states`: valuations in the state boxes)."""
    vals = _fmt_values(model.val, precision).tolist()
    col = np.asarray(model.col).tolist()
    row_ptr = np.asarray(model.row_ptr).tolist()
    choice_ptr = np.asarray(model.choice_ptr).tolist()
    within = _choice_index(model).tolist()
    names = _valuations(model) if states else None
    entry_names = None
    if actions and not model.is_nondeterministic and model.entry_action is not None:
        entry_names = [model.action_names[a] for a in model.entry_action.tolist()]
    out = ["digraph M {", 'node [label="",shape="box"];']
    for s in range(model.num_states):
        label = f"{s}\\n{names[s]}" if names else str(s)
        out.append(f'{s} [label="{label}"];')
        for c in range(choice_ptr[s], choice_ptr[s + 1]):
            src = str(s)
            if model.is_nondeterministic:
                j = within[c]
                src = f"n{s}_{j}"
                act = model.choice_action[c] if model.choice_action else None
                text = f"{j}:{act}" if actions and act else str(j)
                out.append(f'{s} -> {src}  [label="{text}",arrowhead="none"];')
                out.append(f'{src} [ shape=point,width=0.1,height=0.1,label="" ];')
            for e in range(row_ptr[c], row_ptr[c + 1]):
                text = vals[e]
                if entry_names is not None and entry_names[e]:
                    text += ":" + entry_names[e]
                out.append(f'{src} -> {col[e]} [label="{text}"];')
    return "\n".join(out) + "\n}\n"
