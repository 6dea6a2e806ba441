"""End-component quotients: collapse the end components of an MDP into
single states (`quotient`) and read a result solved on the quotient back on
the original states (`expand_result`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import ModelCheckingError
from ..explore.model import ExplicitModel
from .matrices import resolve_layout, sparse_model
from .result import NumericResult


def expand_result(res: NumericResult, rep: np.ndarray, **extra) -> NumericResult:
    """`res`, solved on a quotient (`quotient`), read back on the original
    states: values and per-state extras (interval-iteration bounds) at
    `rep[s]`; `extra` added."""
    lifted = {
        k: np.asarray(v)[rep] if isinstance(v, np.ndarray) else v
        for k, v in (res.extra or {}).items()
    }
    lifted.update(extra)
    return replace(
        res,
        values=res.values[rep],
        extra=lifted,
        lower=None if res.lower is None else res.lower[rep],
        upper=None if res.upper is None else res.upper[rep],
    )


def quotient(model: ExplicitModel, probs, labels, count, inside, layout: str = "csr"):
    """Collapse end components: every state with `labels[s] = k >= 0` becomes
    one state; choices inside (`inside[c]`) are dropped, the others kept with
    successors renamed. Returns `(M, rep, keep, idx, probs)`: the quotient
    `SparseModel`, the new state of every old state, the old index of every
    kept choice, the old index of every kept entry and their probabilities.
    The caller restricts per-choice data with `keep`. The quotient's matrix
    is in `layout` (resolved for `model`)."""
    n = model.num_states
    ec = labels >= 0
    others = np.nonzero(~ec)[0]
    rep = np.empty(n, dtype=np.int64)
    rep[others] = np.arange(len(others))
    rep[ec] = len(others) + labels[ec]
    n2 = len(others) + count
    soc = model.state_of_choice()
    keep = np.nonzero(~inside)[0]
    keep = keep[np.argsort(rep[soc[keep]], kind="stable")]
    new_state = rep[soc[keep]]
    counts = np.bincount(new_state, minlength=n2)
    if (counts == 0).any():
        raise ModelCheckingError("an end component without exit was not removed")
    choice_ptr = np.concatenate([[0], np.cumsum(counts)])
    starts, ends = model.row_ptr[keep], model.row_ptr[keep + 1]
    lens = ends - starts
    idx = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(lens.sum())
    row_ptr = np.concatenate([[0], np.cumsum(lens)])
    M = sparse_model(
        choice_ptr,
        row_ptr,
        rep[model.col[idx]],
        np.zeros(len(idx)),
        nondeterministic=True,
        kind=resolve_layout(model, layout),
    )
    return M, rep, keep, idx, probs[idx]
