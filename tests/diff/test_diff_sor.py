"""Over-relaxed (SOR) multicolour Gauss-Seidel (`jaxmc.solvers.sor`, `kernels.sweep`):
the automatic `omega`, its divergence guard, plain Gauss-Seidel on demand,
and accuracy against direct solves."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as sla
from jax import lax

import jaxmc
from jaxmc.kernels.sweep import gs_sweep
from jaxmc.layout.sweep import Pattern
from jaxmc.options import SolveOptions
from jaxmc.solvers import Status
from jaxmc.solvers.sor import Relevance, fixed_point_loop, iterate, sor, sor_shrinking


EXAMPLES = (
    Path(__file__).resolve().parents[2].parent / "shared" / "models" / "prism-examples"
)

# The walk of benchmarks/grad.py with one bias parameter: slowly mixing, and
# strongly non-normal for large p (the drift makes the symmetrizing scaling
# span ~(3p/(1-p))^N), where too large an omega blows the iterate up.
WALK = """dtmc
const int N;
const double p;
module walk
  x : [0..N] init 0;
  y : [0..N-1] init 0;
  f : bool init false;
  [] !f & x<N -> 0.98*p : (x'=x+1) + 0.98*(1-p)/3 : (x'=max(x-1,0))
     + 0.98*(1-p)/3 : (y'=min(y+1,N-1)) + 0.98*(1-p)/3 : (y'=max(y-1,0))
     + 0.02 : (f'=true)&(x'=0)&(y'=0);
  [] f | x=N -> true;
endmodule
label "goal" = x=N & !f;
"""


def walk_system(n: int, p: float):
    """`(Q, b, init)`: the walk's maybe-state system `x = Q x + b` for
    `P=? [ F "goal" ]`."""
    m = jaxmc.build(jaxmc.load_model_string(WALK, {"N": n, "p": p}))
    N = m.num_states
    P = sp.csr_matrix((m.val, m.col, m.row_ptr), shape=(N, N))
    goal = np.asarray(m.labels["goal"])
    idx = np.flatnonzero(~goal & (P.diagonal() != 1.0))
    Q = P[idx][:, idx].tocsr()
    b = np.asarray(P[idx][:, np.flatnonzero(goal)].sum(axis=1)).ravel()
    return Q, b, int(np.searchsorted(idx, m.initial_states[0]))


def solver(Q):
    """`run(rhs, omega, eps) -> (x, sweeps, done, w)` for `x = Q x + rhs`
    (rhs `[n]` or `[n, k]`)."""
    Qc = Q.tocoo()
    o = np.lexsort((Qc.col, Qc.row))
    r, c, v = Qc.row[o], Qc.col[o], Qc.data[o]
    n = Q.shape[0]
    pat = Pattern(r, c, Q.shape)
    a = jax.tree_util.tree_map(jnp.asarray, pat.arrays)
    dg = jnp.asarray(1 - np.bincount(r, weights=np.where(r == c, v, 0.0), minlength=n))
    off = jnp.asarray(np.where(r == c, 0.0, v))

    def sweep_for(rhs):
        d = dg if rhs.ndim == 1 else dg[:, None]
        return gs_sweep(off, d, rhs, a["lay"], a["order"], pat.bounds, n)

    def run(rhs, omega, eps=1e-10, max_iters=100_000, weights=None):
        rhs = jnp.asarray(rhs)
        sweep, to_p, from_p = sweep_for(rhs)
        rel = Relevance(None if weights is None else to_p(jnp.asarray(weights)))
        sol, w = sor(sweep, jnp.zeros_like(rhs), eps, max_iters, omega, rel)
        done = np.asarray(sol.status == Status.CONVERGED)
        sweeps = int(jnp.max(sol.iterations))  # (the loop runs to the slowest column)
        return np.asarray(from_p(sol.value)), sweeps, done, np.asarray(w)

    run.sweep_for = sweep_for
    return run


@pytest.mark.parametrize("p", [0.3, 0.5])
def test_sor_matches_direct_solve_with_fewer_sweeps(p):
    """Forward and transposed (adjoint) systems of the walk: automatic SOR
    agrees with a sparse LU solve entry by entry (values span ~20 orders of
    magnitude) and needs well under the sweeps of plain Gauss-Seidel."""
    Q, b, i0 = walk_system(48, p)
    lu = sla.splu(sp.csc_matrix(sp.eye(Q.shape[0]) - Q))
    e0 = np.zeros(Q.shape[0])
    e0[i0] = 1.0
    for M, rhs, ref in [
        (Q, b, lu.solve(b)),
        (Q.T.tocsr(), e0, lu.solve(e0, trans="T")),
    ]:
        run = solver(M)
        x, it, done, w = run(rhs, None)
        x1, it1, done1, w1 = run(rhs, 1.0)
        assert done and done1 and w1 == 1.0
        pos = ref > 0
        assert np.all(x[~pos] == 0)
        np.testing.assert_allclose(x[pos], ref[pos], rtol=1e-8)
        np.testing.assert_allclose(x1[pos], ref[pos], rtol=1e-8)
        assert w > 1.1, w
        assert it < 0.8 * it1, (it, it1)


def test_adjoint_stop_rule_weighted_by_relevance():
    """The gradient's adjoint solve stops by `Relevance`: entry `s` of the
    adjoint `lam` weighs `w_s = max(b_s, max_c |x_c|)` (the values row `s`
    of `dA x + db` is made of). Every gradient term `lam_s w_s` comes out
    as accurate as with the per-entry rule, with fewer sweeps: the adjoint
    spans ~18 orders of magnitude here and its far entries cannot matter."""
    Q, b, i0 = walk_system(120, 0.3)
    n = Q.shape[0]
    lu = sla.splu(sp.csc_matrix(sp.eye(n) - Q))
    x = lu.solve(b)
    e0 = np.zeros(n)
    e0[i0] = 1.0
    lam = lu.solve(e0, trans="T")
    Qc = Q.tocoo()
    w = np.array(b)
    np.maximum.at(w, Qc.row, x[Qc.col])
    run = solver(Q.T.tocsr())
    plain, it_plain, done_plain, _ = run(e0, None)
    weighted, it_w, done_w, _ = run(e0, None, weights=w)
    assert done_plain and done_w
    assert lam.min() < 1e-15 * lam.max()
    assert it_w < 0.95 * it_plain, (it_w, it_plain)  # 294 vs 334 sweeps
    big = np.max(lam * w)
    for got in (plain, weighted):
        assert np.max(np.abs(got - lam) * w) <= 1e-8 * big
        assert np.sum(np.abs(got - lam) * w) <= 1e-8 * np.sum(lam * w)
    # without weights every entry is relatively accurate, with them not all
    pos = lam > 0
    np.testing.assert_allclose(plain[pos], lam[pos], rtol=1e-8)
    assert np.max(np.abs(weighted[pos] - lam[pos]) / lam[pos]) > 1e-8


def test_large_omega_is_guarded():
    """A forced omega of 1.95 makes the iterate of the non-normal walk grow
    by orders of magnitude; the guard backs off (and restores the last good
    iterate), and the solve still converges to the right values."""
    Q, b, _ = walk_system(32, 0.5)
    ref = sla.spsolve(sp.csc_matrix(sp.eye(Q.shape[0]) - Q), b)
    run = solver(Q)
    # unguarded, this omega does blow up: check that the test means something
    sweep, _, from_p = run.sweep_for(jnp.asarray(b))
    x = lax.fori_loop(0, 64, lambda i, x: sweep(x, 1.95), jnp.zeros(b.size))
    assert np.max(np.abs(np.asarray(from_p(x)) - ref)) > 1.0
    xs, it, done, w = run(b, 1.95)
    assert done and w < 1.95
    np.testing.assert_allclose(xs, ref, rtol=1e-8)


def test_omega_one_is_plain_gauss_seidel():
    """`omega=1.0` runs the plain Gauss-Seidel loop: bit for bit `_jacobi`."""
    Q, b, _ = walk_system(20, 0.4)
    sweep, _, _ = solver(Q).sweep_for(jnp.asarray(b))
    x0 = jnp.zeros(Q.shape[0])
    sol = fixed_point_loop(sweep, x0, 1e-10, 100_000)
    plain, ok = sol.value, sol.status == Status.CONVERGED
    assert ok
    np.testing.assert_array_equal(iterate(sweep, x0, 1e-10, 100_000, 1.0).value, plain)
    # ...and w = 1 inside the SOR sweep is exactly Gauss-Seidel too
    np.testing.assert_array_equal(sweep(plain, jnp.float64(1.0)), sweep(plain))


def test_columns_choose_their_own_omega():
    """A `[n, k]` solve (the batched path) relaxes every column on its own:
    each column ends exactly where its one-vector solve does."""
    Q, b, i0 = walk_system(32, 0.5)
    run = solver(Q)
    e = np.zeros_like(b)
    e[i0] = 1.0
    B = np.stack([b, 0.5 * b + 0.1, e], axis=1)
    X, _, done, w = run(B, None)
    assert done.all() and w.shape == (3,)
    for j in range(3):
        x, _, ok, wj = run(B[:, j], None)
        assert ok and wj == w[j]
        np.testing.assert_array_equal(X[:, j], x)


def test_options_validate_omega():
    assert SolveOptions().omega is None and SolveOptions(omega=1.0).omega == 1.0
    for bad in (0.0, 2.0, -1.0):
        with pytest.raises(ValueError, match="omega"):
            SolveOptions(omega=bad)


def test_solve_and_grad_agree_with_plain_gauss_seidel():
    """Through the public API (`omega=` of `jaxmc.solve`): automatic SOR and
    plain Gauss-Seidel give the same value and gradient on the walk, and
    both match a central difference."""
    model = jaxmc.load_model_string(
        WALK, {"N": 24}, parameters=("p",), params={"p": 0.4}
    )
    prop = 'P=? [ F "goal" ]'
    vals = {}
    for om in (None, 1.0):

        def f(th, om=om):
            return jaxmc.solve(model, prop, params=th, omega=om)

        vals[om] = (float(f({"p": 0.4})), float(jax.grad(f)({"p": 0.4})["p"]))
        h = 1e-5
        fd = (float(f({"p": 0.4 + h})) - float(f({"p": 0.4 - h}))) / (2 * h)
        np.testing.assert_allclose(vals[om][1], fd, rtol=1e-5)
    np.testing.assert_allclose(vals[None], vals[1.0], rtol=1e-9)


@pytest.mark.skipif(not EXAMPLES.exists(), reason="shared models not available")
def test_example_models_agree_with_plain_gauss_seidel():
    """PRISM examples large enough for the automatic omega to engage: the
    values (and a gradient) agree with plain Gauss-Seidel."""
    path = EXAMPLES / "ctmcs/tandem/tandem.sm"
    point = {"mu1b": 1.8, "kappa": 4.0}
    prop = "P=? [ sm<c U sc=c ]"
    model = jaxmc.load_model(path, {"c": 15}, parameters=tuple(point))
    f = {
        om: (lambda th, om=om: jaxmc.solve(model, prop, params=th, omega=om))
        for om in (None, 1.0)
    }
    np.testing.assert_allclose(float(f[None](point)), float(f[1.0](point)), rtol=1e-9)
    g0, g1 = jax.grad(f[None])(point), jax.grad(f[1.0])(point)
    for k in point:
        np.testing.assert_allclose(float(g0[k]), float(g1[k]), rtol=1e-7)


REWARD_WALK = """dtmc
const int N;
const double p;
const double c;
module walk
  x : [0..N] init 0;
  [] x<N -> p : (x'=x+1) + (1-p) : (x'=max(x-1,0));
  [] x=N -> true;
endmodule
rewards "r"
  x>0 & x<N : c;
  x=0 : 1;
endrewards
rewards "t"
  [] x<N : 0.5;
endrewards
rewards "z"
  x<N : c;
endrewards
"""


@pytest.mark.parametrize(
    "prop, point, name",
    [
        (
            'R{"z"}=? [ F x=20 ]',
            {"p": 0.6, "c": 0.0},
            "c",
        ),  # every reward 0 at the point
        ('R{"r"}=? [ F x=20 ]', {"p": 0.6, "c": 0.3}, "p"),
        (
            'R{"t"}=? [ F x=20 ]',
            {"p": 0.6, "c": 0.3},
            "p",
        ),  # transition rewards x probabilities
    ],
)
def test_reward_gradients_with_the_weighted_adjoint(prop, point, name):
    """Reward gradients where the relevance weighting (`linear_solve`'s
    `relevance`) could go wrong: a parametric reward whose value is 0 at
    the point (its derivative is not bounded by its value: the weighting is
    off for parametric rewards) and transition rewards (bounded per state
    by their largest `|t|`). Central finite differences as the reference."""
    model = jaxmc.load_model_string(
        REWARD_WALK, {"N": 20}, parameters=("p", "c"), params=point
    )
    g = jax.grad(lambda th: jaxmc.solve(model, prop, params=th, epsilon=1e-13))(
        {k: jnp.asarray(v) for k, v in point.items()}
    )[name]
    h = 1e-6
    up, dn = dict(point), dict(point)
    up[name] += h
    dn[name] -= h
    fd = (
        float(jaxmc.solve(model, prop, params=up, epsilon=1e-13))
        - float(jaxmc.solve(model, prop, params=dn, epsilon=1e-13))
    ) / (2 * h)
    assert abs(float(g) - fd) <= 1e-5 * abs(fd), (float(g), fd)


def test_shrinking_batch_gives_each_column_its_full_batch_result():
    """`_sor_shrinking`: when at most half of a batch's columns still run,
    they move to a batch of half the width (a new sweep over those columns
    only); every column still ends with exactly the values, `done` flag
    and sweeps it gets in the full batch. Columns of very different
    difficulty (right-hand sides on different scales and a point source),
    so the batch does shrink, down to a width of 2."""
    Q, b, i0 = walk_system(24, 0.45)
    run = solver(Q)
    n = b.size
    rng = np.random.default_rng(0)
    cols = [b * s for s in (1.0, 1e-3, 0.5)] + [rng.random(n) * 1e-2 for _ in range(4)]
    e = np.zeros(n)
    e[i0] = 1.0
    B = jnp.asarray(np.stack(cols + [e], axis=1))  # k = 8
    X, _, done, _ = run(B, None, 1e-10)
    sweep, to_p, from_p = run.sweep_for(B)
    widths = []

    def build(c):
        if c is None:
            return sweep
        widths.append(int(c.shape[0]))
        return run.sweep_for(B[:, c])[0]

    sol = jax.jit(
        lambda: sor_shrinking(
            build, jnp.zeros_like(B), 1e-10, 100_000, None, None, min_width=2
        )
    )()
    xs, ds = sol.value, sol.status == Status.CONVERGED
    assert widths == [4, 2]  # shrank twice (traced once)
    np.testing.assert_array_equal(np.asarray(ds), done)
    np.testing.assert_array_equal(np.asarray(from_p(xs)), X)
