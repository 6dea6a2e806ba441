"""The diagonal (DIA) layout of the Gauss-Seidel sweeps
(`jaxmc.layout.sweep_dia.dia_layout` / `kernels.sweep_dia.dia_sweep`):
found where the states form a box in PRISM's lexicographic order, one
sweep equal to the gather layout's (`gs_sweep`) to rounding, remainders
and batches included, and the same values and gradients through `jaxmc.parametric`."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

import jaxmc
from jaxmc import _config
from jaxmc.kernels.sweep import gs_sweep
from jaxmc.kernels.sweep_dia import dia_sweep
from jaxmc.layout import sweep_dia as _dia
from jaxmc.layout.sweep import Pattern
from jaxmc.solvers.sor import Relevance


WALK = """dtmc
const int N;
const double p;
const double reset;
module walk
  x : [0..N] init 0;
  y : [0..N-1] init 0;
  f : bool init false;
  [] !f & x<N -> 0.98*p*(1-reset) : (x'=x+1) + 0.98*(1-p)/3 : (x'=max(x-1,0))
     + 0.98*(1-p)/3 : (y'=min(y+1,N-1)) + 0.98*(1-p)/3 : (y'=max(y-1,0))
     + 0.98*p*reset : (x'=0) + 0.02 : (f'=true)&(x'=0)&(y'=0);
  [] f | x=N -> true;
endmodule
label "goal" = x=N & !f;
"""


# the walk without resets, with `p` a parameter
PLAIN = WALK.replace("0.98*p*(1-reset) : (x'=x+1)", "0.98*p : (x'=x+1)").replace(
    "     + 0.98*p*reset : (x'=0) + 0.02", "     + 0.02"
)


def walk_pattern(n: int, p: float = 0.3, reset: float = 0.0, monkeypatch=None):
    """The walk's maybe-state system on all states (rows of the goal and
    failure states empty), its `Pattern` with PRISM's state order, and the
    entries' values."""
    m = jaxmc.build(jaxmc.load_model_string(WALK, {"N": n, "p": p, "reset": reset}))
    N = m.num_states
    P = sp.csr_matrix((m.val, m.col, m.row_ptr), shape=(N, N))
    goal = np.asarray(m.labels["goal"])
    maybe = ~goal & (P.diagonal() != 1.0)
    Q = sp.diags(maybe.astype(float)) @ P @ sp.diags(maybe.astype(float))
    Q = Q.tocoo()
    o = np.lexsort((Q.col, Q.row))
    r, c, v = Q.row[o], Q.col[o], Q.data[o]
    b = np.where(maybe, np.asarray(P[:, np.flatnonzero(goal)].sum(axis=1)).ravel(), 0.0)
    lex = np.lexsort(np.asarray(m.states).T[::-1])
    if reset and monkeypatch is not None:
        # the resets (x'=0: a different offset per x, and no longer a
        # bipartite graph) are a fifth of the entries
        monkeypatch.setattr(_dia, "DIA_MAX_REMAINDER", 0.3)
        monkeypatch.setattr(_dia, "DIA_MAX_COLORS", 32)
    return Pattern(r, c, (N, N), lex), r, c, v, b


def sweeps(pat, r, c, v, b, k=None, classes=False):
    """One SOR sweep from the same iterate on both layouts, in the model's
    state order."""
    n = pat.shape[0]
    a = jax.tree_util.tree_map(jnp.asarray, pat.arrays)
    dg = jnp.asarray(1 - np.bincount(r, weights=np.where(r == c, v, 0.0), minlength=n))
    off = jnp.asarray(np.where(r == c, 0.0, v))
    rhs = jnp.asarray(b)
    x = jnp.asarray(np.random.default_rng(1).random(n))
    omega = 1.6
    cl = None
    if k is not None:  # k points: values scaled per point
        scale = jnp.linspace(0.9, 1.0, k)
        off = off[:, None] * scale
        rhs = jnp.broadcast_to(rhs[:, None], (n, k))
        dg = jnp.broadcast_to(dg[:, None], (n, k))
        x = jnp.broadcast_to(x[:, None], (n, k)) * scale
        omega = jnp.linspace(1.2, 1.7, k)
        if classes:  # every entry its own class: the table is the weights
            w = off / dg[jnp.asarray(r)]
            cl = {"cls": jnp.arange(r.size, dtype=jnp.int32), "table": w}
    out = []
    for dia in (False, True):
        if dia:
            lay = a["dia"]["fwd"]
            sweep, to_p, from_p = dia_sweep(
                off, dg, rhs, lay, lay["order"], pat.dia[0], n, cl
            )
        else:
            sweep, to_p, from_p = gs_sweep(
                off, dg, rhs, a["lay"], a["order"], pat.bounds, n, cl
            )
        y, ok = sweep(to_p(x), omega, check=(Relevance(), 1e-6, None))
        out.append((np.asarray(from_p(y)), np.asarray(ok)))
    return out


def test_the_walk_is_four_diagonals():
    pat, *_ = walk_pattern(12)
    assert pat.dia is not None
    fwd, t = pat.dia
    assert fwd == (-12, -1, 1, 12)  # x -/+ 1 (12 values of y), y -/+ 1
    assert t == tuple(sorted(-o for o in fwd))
    assert pat.arrays["dia"]["fwd"]["r_ent"].size == 0


@pytest.mark.parametrize("reset", [0.0, 0.1])
def test_one_sweep_equals_the_gather_layout(reset, monkeypatch):
    pat, r, c, v, b = walk_pattern(12, reset=reset, monkeypatch=monkeypatch)
    if reset:  # the resets (x'=0) are on no diagonal: scatter-added
        assert pat.arrays["dia"]["fwd"]["r_ent"].size > 0
    (y0, ok0), (y1, ok1) = sweeps(pat, r, c, v, b)
    np.testing.assert_allclose(y1, y0, rtol=1e-13, atol=1e-300)
    assert ok0 == ok1


@pytest.mark.parametrize("classes", [False, True])
def test_batched_sweep_equals_the_gather_layout(classes, monkeypatch):
    pat, r, c, v, b = walk_pattern(10, reset=0.1, monkeypatch=monkeypatch)
    (y0, ok0), (y1, ok1) = sweeps(pat, r, c, v, b, k=3, classes=classes)
    assert y1.shape == (pat.shape[0], 3)
    np.testing.assert_allclose(y1, y0, rtol=1e-13, atol=1e-300)
    np.testing.assert_array_equal(ok0, ok1)


def test_irregular_matrices_keep_the_gather_layout():
    rng = np.random.default_rng(0)
    n = 400
    A = sp.random(n, n, density=0.02, random_state=rng, format="coo")
    o = np.lexsort((A.col, A.row))
    pat = Pattern(A.row[o], A.col[o], (n, n), np.arange(n))
    assert pat.dia is None and "dia" not in pat.arrays


def _value_and_grad(dia: str):
    with _config.override(diff_dia=dia):
        model = jaxmc.load_model_string(
            PLAIN, {"N": 14, "reset": 0.0}, parameters=("p",), params={"p": 0.4}
        )
        problem = jaxmc.parametric(model, 'P=? [ F "goal" ]', params={"p": 0.4})
        v, g = jax.value_and_grad(lambda p: problem({"p": p}))(0.4)
        return float(v), float(g)


def test_values_and_gradients_do_not_depend_on_the_layout():
    v_on, g_on = _value_and_grad("on")
    v_off, g_off = _value_and_grad("off")
    assert v_on == pytest.approx(v_off, rel=1e-9)
    assert g_on == pytest.approx(g_off, rel=1e-7)
    # and the gradient is the derivative (central differences)
    h = 1e-5
    with _config.override(diff_dia="on"):
        model = jaxmc.load_model_string(
            PLAIN, {"N": 14, "reset": 0.0}, parameters=("p",), params={"p": 0.4}
        )
        problem = jaxmc.parametric(model, 'P=? [ F "goal" ]', params={"p": 0.4})
        fd = (float(problem({"p": 0.4 + h})) - float(problem({"p": 0.4 - h}))) / (2 * h)
    assert g_on == pytest.approx(fd, rel=1e-5)
