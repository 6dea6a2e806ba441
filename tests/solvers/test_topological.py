"""Gauss-Seidel in topological order (`jaxmc.solvers.gauss_seidel`) and the
default method of DTMC linear systems (`numerics.methods.AUTO`): where the
graph is (nearly) acyclic a sweep is a back-substitution."""

import numpy as np
import pytest
import scipy.sparse as sp

import jaxmc
from jaxmc.solvers import Status, gauss_seidel
from jaxmc.solvers._gauss_seidel import _component_rank, scc_labels, topological_order


def _dag(n=400, seed=0, cycles=()):
    """A random substochastic matrix whose edges go from higher to lower
    index (acyclic), plus the given cycle edges."""
    rng = np.random.default_rng(seed)
    u = rng.integers(1, n, 4 * n)
    v = rng.integers(0, n, 4 * n)
    keep = u > v
    rows = np.concatenate([u[keep]] + [np.array(c[0:1]) for c in cycles])
    cols = np.concatenate([v[keep]] + [np.array(c[1:2]) for c in cycles])
    A = sp.csr_matrix((rng.random(rows.size), (rows, cols)), shape=(n, n))
    s = np.asarray(A.sum(1)).ravel()
    A = sp.csr_matrix(sp.diags(0.9 / np.maximum(s, 1e-300)) @ A)
    b = 0.1 * rng.random(n)
    return A, b


def _is_topological(A, order):
    pos = np.empty(A.shape[0], int)
    pos[order] = np.arange(order.size)
    _, lab = scc_labels(A)
    c = A.tocoo()
    between = lab[c.row] != lab[c.col]
    return bool(np.all(pos[c.col[between]] < pos[c.row[between]]))


def test_topological_order_both_ways():
    A, _ = _dag(cycles=[(5, 9), (9, 30), (30, 5)])  # one 3-state component
    assert _is_topological(A, topological_order(A))
    # the fallback (Kahn's algorithm on the component graph) gives an order too
    count, lab = scc_labels(A)
    c = A.tocoo()
    between = lab[c.row] != lab[c.col]
    rank = _component_rank(count, lab[c.row[between]], lab[c.col[between]])[lab]
    assert _is_topological(A, np.lexsort((np.arange(A.shape[0]), rank)))


def test_acyclic_system_in_two_sweeps():
    A, b = _dag()
    ref = np.linalg.solve(np.eye(A.shape[0]) - A.toarray(), b)
    topo = gauss_seidel(A, b, np.zeros_like(b), epsilon=1e-12)
    assert topo.status == Status.CONVERGED and int(topo.iterations) == 2
    np.testing.assert_allclose(topo.value, ref, rtol=1e-13)
    # index order: the same fixed point, many more sweeps on this matrix
    # (its edges point down the index order)
    plain = gauss_seidel(
        sp.csr_matrix(A[::-1, ::-1]),
        b[::-1],
        np.zeros_like(b),
        epsilon=1e-12,
        order="index",
    )
    assert int(plain.iterations) > 2
    np.testing.assert_allclose(plain.value[::-1], ref, rtol=1e-9)
    with pytest.raises(ValueError, match="order"):
        gauss_seidel(A, b, np.zeros_like(b), order="bfs")


ACYCLIC = """dtmc
const int N = 300;
module chain
  s : [0..N] init 0;
  [] s<N-1 -> 0.5 : (s'=s+1) + 0.3 : (s'=min(s+2,N-1)) + 0.2 : (s'=N);
endmodule
label "goal" = s=N-1;
"""

CYCLIC = """dtmc
module walk
  s : [0..20] init 10;
  [] s>0 & s<20 -> 0.5 : (s'=s-1) + 0.5 : (s'=s+1);
endmodule
label "goal" = s=20;
"""


def test_default_method_by_structure():
    """`jaxmc.check` without a method: topological Gauss-Seidel on an
    acyclic chain (exact in 2 sweeps, then certified in at most one trip of
    sound value iteration), the certified BiCGStab solve on a walk (one
    component); PRISM's Jacobi with criterion "change"."""
    from jaxmc.solvers._sound import STEPS_PER_TRIP

    chain = jaxmc.load_model_string(ACYCLIC)
    r = jaxmc.check(chain, 'P=? [ F "goal" ]')
    assert r.method == "gauss_seidel" and r.iterations <= 2 + STEPS_PER_TRIP
    assert r.bound is not None and r.bound <= 1e-6 * r.value
    jac = jaxmc.check(chain, 'P=? [ F "goal" ]', method="jacobi")
    assert jac.method == "jacobi" and jac.iterations > 2
    np.testing.assert_allclose(r.value, jac.value, rtol=2e-6)
    walk = jaxmc.load_model_string(CYCLIC)
    w = jaxmc.check(walk, 'P=? [ F "goal" ]')
    assert w.method == "bicgstab"
    np.testing.assert_allclose(w.value, 0.5, rtol=1e-6)
    assert abs(w.value - 0.5) <= w.bound
    c = jaxmc.check(walk, 'P=? [ F "goal" ]', criterion="change")
    assert c.method == "jacobi" and c.bound is None
    np.testing.assert_allclose(c.value, 0.5, rtol=1e-4)  # (PRISM's criterion)


SLOW_TAIL = """dtmc
module m
  s : [0..332] init 0;
  [] s<300 -> 0.7 : (s'=s+1) + 0.3 : (s'=min(s+2,300));
  [] s>=300 & s<330 -> 0.495 : (s'=s+1) + 0.495 : (s'=max(s-1,300)) + 0.01 : (s'=332);
endmodule
label "goal" = s=330;
"""


def test_slow_cyclic_part_hands_over_to_jacobi():
    """A nearly acyclic chain (300 states) ending in a slowly mixing walk (30
    states, 9%): the topological Gauss-Seidel chosen for the structure stops
    after `AUTO_GS_MAX_SWEEPS` and Jacobi finishes from its iterate."""
    import scipy.sparse as sp

    from jaxmc.numerics import methods

    m = jaxmc.load_model_string(SLOW_TAIL)
    r = jaxmc.check(m, 'P=? [ F "goal" ]', epsilon=1e-10)
    e = jaxmc.build(m)
    P = sp.csr_matrix((e.val, e.col, e.row_ptr), shape=(e.num_states,) * 2).toarray()
    s = e.states[:, 0]
    goal = s == 330
    maybe = ~goal & (s != 332) & (s != 331)
    A = np.eye(maybe.sum()) - P[np.ix_(maybe, maybe)]
    x = np.linalg.solve(A, P[np.ix_(maybe, goal)].sum(1))
    ref = x[np.flatnonzero(maybe) == np.flatnonzero(e.labels["init"])[0]][0]
    assert r.method == "sound_value_iteration"
    assert r.iterations > methods.AUTO_GS_MAX_SWEEPS
    np.testing.assert_allclose(r.value, ref, rtol=1e-9)
    assert abs(r.value - ref) <= r.bound
