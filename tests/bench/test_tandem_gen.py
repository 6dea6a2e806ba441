"""`benchmarks/_tandem.py`, the scaling benchmark's direct generator of
PRISM's tandem network, against jaxmc's own build of `tandem.sm`: the same
states, the same uniformised matrix entry by entry (matched through the
states' valuations), levels equal to the builder's BFS distances, and the
rows ordered by level."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path


ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT.parent / "shared/models/prism-examples/ctmcs/tandem/tandem.sm"
sys.path.insert(0, str(ROOT / "benchmarks"))

import _tandem  # noqa: E402


pytestmark = pytest.mark.skipif(not MODEL.exists(), reason="no ../shared/models")


def _built(c):
    from scaling import uniformised

    import jaxmc

    explicit = jaxmc.build(jaxmc.load_model(str(MODEL), f"c={c}"))
    names = [v.name for v in explicit.variables]
    sv = explicit.states[:, [names.index(x) for x in ("sc", "ph", "sm")]]
    return explicit, sv, uniformised(explicit)


@pytest.mark.parametrize("c", [1, 2, 5, 12])
def test_generator_is_the_built_model(c):
    explicit, sv_built, P_built = _built(c)
    indptr, cols, vals = _tandem.uniformised(c)
    sv = _tandem.states(c)
    n = len(sv)
    assert n == explicit.num_states == (c + 1) * (2 * c + 1)
    # the same valuations; map generated state -> built state
    key = lambda a: (a[:, 2].astype(np.int64) * (c + 1) + a[:, 0]) * 2 + a[:, 1] - 1  # noqa: E731
    built_at = {k: i for i, k in enumerate(key(sv_built))}
    to_built = np.array([built_at[k] for k in key(sv)])
    assert sorted(to_built) == list(range(n))
    P = sp.csr_matrix((vals, cols, indptr), shape=(n, n))
    assert np.all(
        np.diff(cols)[np.diff(np.repeat(np.arange(n), np.diff(indptr))) == 0] > 0
    )
    perm = sp.csr_matrix((np.ones(n), (to_built, np.arange(n))), shape=(n, n))
    # P_gen[i, j] == P_built[to_built[i], to_built[j]]
    mapped = (perm.T @ P_built @ perm).tocsr()
    assert abs(mapped - P).max() < 1e-15
    # levels = BFS distance from the initial state, rows ordered by level
    init = int(np.flatnonzero(np.all(sv == [0, 1, 0], axis=1))[0])
    assert init == 0
    dist = shortest_path(P, unweighted=True, indices=0)
    level = sv[:, 0] + 2 * sv[:, 2] + (sv[:, 1] == 2)
    np.testing.assert_array_equal(dist, level)
    assert np.all(np.diff(level) >= 0)
