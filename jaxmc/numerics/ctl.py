"""CTL path quantifiers `E [ψ]` and `A [ψ]` over the model's graph.

PRISM reads `E`/`A` as in CTL: "some path" / "every path" of the underlying
graph (for an MDP, the union of all choices), with no probabilities: in a fair
coin model `P>=1 [ F "tails" ]` holds but `A [ F "tails" ]` does not (the path
that throws heads forever exists). Only unbounded operators are supported,
as in PRISM.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ..explore.model import ExplicitModel
from .graph import _b, _entries, _exists_reach


def _graph(model: ExplicitModel) -> sp.csr_matrix:
    src, _, dst = _entries(model)
    n = model.num_states
    g = sp.csr_matrix((np.ones(len(src), dtype=np.int8), (src, dst)), shape=(n, n))
    g.sum_duplicates()
    return g


def exists_next(model: ExplicitModel, phi) -> np.ndarray:
    """`E [X φ]`: some successor satisfies φ."""
    phi = _b(phi, model.num_states)
    return (_graph(model) @ phi.astype(np.int64)) > 0


def forall_next(model: ExplicitModel, phi) -> np.ndarray:
    """`A [X φ]`: every successor satisfies φ."""
    return ~exists_next(model, ~_b(phi, model.num_states))


def exists_until(model: ExplicitModel, phi, psi) -> np.ndarray:
    """`E [φ U ψ]`: backward reachability of ψ through φ."""
    n = model.num_states
    return _exists_reach(model, _b(psi, n), _b(phi, n))


def exists_globally(model: ExplicitModel, phi) -> np.ndarray:
    """`E [G φ]`: an infinite path inside φ exists, i.e. φ-states that reach,
    inside φ, a cycle of φ-states (a non-trivial SCC or a self-loop)."""
    n = model.num_states
    phi = _b(phi, n)
    g = _graph(model)
    keep = sp.diags(phi.astype(np.int8), dtype=np.int8)
    sub = (keep @ g @ keep).tocsr()
    ncomp, labels = csgraph.connected_components(
        sub, directed=True, connection="strong"
    )
    sizes = np.bincount(labels, minlength=ncomp)
    self_loop = sub.diagonal() > 0
    on_cycle = phi & ((sizes[labels] > 1) | self_loop)
    return _exists_reach(model, on_cycle, phi)


def forall_until(model: ExplicitModel, phi, psi) -> np.ndarray:
    """`A [φ U ψ] = ¬E [¬ψ U (¬φ ∧ ¬ψ)] ∧ ¬E [G ¬ψ]`."""
    n = model.num_states
    phi, psi = _b(phi, n), _b(psi, n)
    return ~exists_until(model, ~psi, ~phi & ~psi) & ~exists_globally(model, ~psi)


def forall_globally(model: ExplicitModel, phi) -> np.ndarray:
    """`A [G φ] = ¬E [F ¬φ]`."""
    n = model.num_states
    return ~exists_until(model, np.ones(n, bool), ~_b(phi, n))
