"""`jaxmc.sweep`: batches of parameter points sharing one structure."""

from pathlib import Path

import numpy as np
import pytest

import jaxmc
from jaxmc.errors import ConvergenceError


PARAM = (
    Path(__file__).resolve().parents[2].parent
    / "shared"
    / "models"
    / "prism-tests"
    / "functionality"
    / "verify"
    / "param"
)

pytestmark = pytest.mark.skipif(
    not PARAM.exists(), reason="shared models not available"
)


def test_sweep_shapes_chunks_and_progress():
    model = jaxmc.load_model(PARAM / "dtmcs/dtmc_steady_2.prism", parameters=("p",))
    ps = np.linspace(0.05, 0.95, 11)
    seen = []
    out = jaxmc.sweep(
        model,
        "S=?[ s=1 ]",
        params={"p": ps},
        chunk=4,
        progress=lambda d, t, e: seen.append((d, t)),
    )
    np.testing.assert_allclose(out, ps / 2, rtol=1e-9)
    assert seen == [(4, 11), (8, 11), (11, 11)]
    one = jaxmc.sweep(
        model, "S=?[ s=1 ]", params={"p": ps}, chunk=1
    )  # unbatched, point by point
    np.testing.assert_allclose(one, out, rtol=1e-12)
    grid = jaxmc.sweep(model, "S=?[ s=2 ]", params={"p": ps.reshape(11, 1)})
    assert grid.shape == (11, 1)
    np.testing.assert_allclose(grid[:, 0], (1 - ps) / 2, rtol=1e-9)


@pytest.mark.parametrize("chunk", [1, 3])
def test_sweep_workers_give_the_same_values(chunk):
    """Chunks solved concurrently on host threads (`workers`) give exactly
    the values of one chunk after the other, in the points' order, and the
    progress reports count up in order."""
    model = jaxmc.load_model(PARAM / "dtmcs/dtmc_pctl.prism", parameters=("p",))
    ps = np.linspace(0.05, 0.95, 10)
    prop = 'R{"time"}=? [ F s>1 ]'
    one = jaxmc.sweep(model, prop, params={"p": ps}, chunk=chunk, workers=1)
    seen = []
    many = jaxmc.sweep(
        model,
        prop,
        params={"p": ps},
        chunk=chunk,
        workers=3,
        progress=lambda d, t, e: seen.append(d),
    )
    np.testing.assert_array_equal(many, one)
    np.testing.assert_allclose(one, (-2 * ps - 2) / (ps - 2), rtol=1e-10)
    assert seen == sorted(seen) and seen[-1] == ps.size


def test_sweep_ctmc_time_bound_grows_terms():
    """Uniformisation's static number of terms is enlarged for the largest
    rate x time of the batch (a point far above the build point)."""
    text = (
        (PARAM / "ctmcs/ctmc_rewards.prism")
        .read_text()
        .replace("const double x;", "const double x;\nconst double T;")
    )
    model = jaxmc.load_model_string(text, parameters=("x", "T"))
    T = np.array([0.1, 1.0, 5.0, 40.0])
    x = 5.0
    out = jaxmc.sweep(model, "P=? [ F<=T s=2 ]", params={"x": x, "T": T})
    cdf = 1 - (7 * np.exp(-x * T) - x * np.exp(-7 * T)) / (7 - x)
    np.testing.assert_allclose(out, cdf, rtol=1e-9, atol=1e-12)


def test_sweep_reports_invalid_points():
    model = jaxmc.load_model(PARAM / "dtmcs/dtmc_pctl.prism", parameters=("p",))
    with pytest.raises(ConvergenceError, match="SOR did not converge"):
        # p = 2 is not a probability: the linear system has no valid solution
        jaxmc.sweep(
            model,
            'R{"time"}=? [ F s>1 ]',
            params={"p": np.array([0.3, 2.0])},
            max_iters=2000,
        )


def test_sweep_multi_vector_path_matches_sequential_solves():
    """`sweep` runs the Jacobi solve as one `[n, k]` iteration with per-point
    values and a per-column convergence mask; points that converge at very
    different iteration counts (p near 0 vs near 1) still give the values of
    the one-point solves."""
    model = jaxmc.load_model(PARAM / "dtmcs/dtmc_pctl.prism", parameters=("p",))
    ps = np.array([0.01, 0.2, 0.5, 0.9, 0.999])
    for prop, exact in [
        ("P=? [ F s=2 ]", -ps / (2 * ps - 4)),
        ('R{"time"}=? [ F s>1 ]', (-2 * ps - 2) / (ps - 2)),
    ]:
        out = jaxmc.sweep(model, prop, params={"p": ps}, chunk=3)
        seq = np.array([float(jaxmc.solve(model, prop, params={"p": p})) for p in ps])
        np.testing.assert_allclose(out, seq, rtol=1e-11)
        np.testing.assert_allclose(out, exact, rtol=1e-10)


@pytest.mark.parametrize("skewed", [False, True])
def test_multi_vector_jacobi_rule_matches_single(skewed):
    """The `custom_vmap` rule of the Gauss-Seidel solver (per-colour ELL
    slots, plus scatter-added overflow entries when a row is very long)
    against the one-vector loop,
    with batched values and a shared right-hand side; a point whose matrix
    is not a contraction comes back NaN without spoiling the others."""
    import jax
    import jax.numpy as jnp

    from jaxmc.layout.sweep import Pattern
    from jaxmc.solvers.adjoint import jacobi_solver

    rng = np.random.default_rng(1)
    n = 120
    side = np.arange(n) < n // 2  # bipartite: 2 colours, 60 rows each
    rows, cols = np.nonzero(
        (rng.random((n, n)) < 0.05) & (side[:, None] != side[None, :])
    )
    if skewed:  # one dense row in a colour of short rows: its tail overflows
        rows = np.concatenate([rows, np.zeros(n // 2, int)])
        cols = np.concatenate([cols, np.arange(n // 2, n)])
        rows, cols = np.unique(np.stack([rows, cols]), axis=1)
        o = np.lexsort((cols, rows))
        rows, cols = rows[o], cols[o]
    pat = Pattern(rows, cols, (n, n))
    assert any(o.size for o in pat.arrays["lay"]["ovf"]) == skewed
    assert len(pat.bounds) > 2  # a real colouring (not one Jacobi block)
    a = jax.tree_util.tree_map(jnp.asarray, pat.arrays)
    k = 5
    off = rng.random((k, rows.size))
    off /= 1.3 * np.maximum(1, np.bincount(rows, minlength=n))[rows]
    off[4] *= 40.0  # diverges
    dg = 1.0 + rng.random((k, n))
    rhs = rng.random(n)
    solver = jacobi_solver(n, 1e-12, 5000, pat.bounds)

    def jac(*args):  # the values (NaN where a point did not converge)
        return solver(*args)[0]

    # stop-rule weights (`Relevance`): none, shared, or one vector per point
    weights = rng.random((k, n)) * (rng.random((k, n)) < 0.8)
    for w, w_axis in (
        (None, None),
        (jnp.asarray(weights[0]), None),
        (jnp.asarray(weights), 0),
    ):
        batched = jax.jit(
            jax.vmap(jac, in_axes=(0, 0, None, None, None, None, None, w_axis))
        )(
            jnp.asarray(off),
            jnp.asarray(dg),
            jnp.asarray(rhs),
            a["order"],
            a["lay"],
            a["rows"],
            {},
            w,
        )
        for i in range(k):
            wi = w if w_axis is None else w[i]
            single = jac(
                jnp.asarray(off[i]),
                jnp.asarray(dg[i]),
                jnp.asarray(rhs),
                a["order"],
                a["lay"],
                a["rows"],
                {},
                wi,
            )
            if i == 4:
                assert (
                    np.isnan(np.asarray(single)).all()
                    and np.isnan(np.asarray(batched[i])).all()
                )
            else:
                np.testing.assert_allclose(batched[i], single, rtol=1e-13)
                M = np.diag(dg[i]) - np.asarray(
                    jnp.zeros((n, n)).at[rows, cols].add(off[i])
                )
                exact = np.linalg.solve(M, rhs)
                if w is None:  # every entry to the relative tolerance
                    np.testing.assert_allclose(batched[i], exact, rtol=1e-10)
                else:  # the weighted sum the weights stand for
                    err = np.sum(
                        np.asarray(wi) * np.abs(np.asarray(batched[i]) - exact)
                    )
                    assert err <= 1e-10 * np.sum(np.asarray(wi) * np.abs(exact))


def test_hybrid_ell_layout_covers_every_entry_once():
    """Slot-major ELL + overflow: every entry exactly once, each in its own
    row; rows of about equal length give no overflow, one very long row
    does not widen the ELL part to its length."""
    from jaxmc.layout.sweep import hybrid_ell

    rng = np.random.default_rng(3)
    for n, dense_rows in [(50, 0), (200, 1), (200, 3), (1, 0)]:
        counts = rng.integers(0, 6, n)
        counts[:dense_rows] = n
        rows = np.repeat(np.arange(n), counts)
        ell, ovf = hybrid_ell(rows, n)
        nnz = rows.size
        w = ell.shape[0]
        assert ell.shape == (w, n)
        stored = ell[ell < nnz]
        assert np.array_equal(np.sort(np.concatenate([stored, ovf])), np.arange(nnz))
        slot_rows = np.broadcast_to(np.arange(n), ell.shape)[ell < nnz]
        assert np.array_equal(rows[stored], slot_rows)
        if dense_rows == 0:
            assert ovf.size == 0 and w == counts.max()
        else:
            assert w < n and ovf.size > 0
    ell, ovf = hybrid_ell(np.zeros(0, np.int64), 4)
    assert ell.shape == (0, 4) and ovf.size == 0


def test_coloring_is_proper_and_two_colours_bipartite_graphs():
    """Gauss-Seidel colours: no off-diagonal entry (either direction) inside
    a colour; a grid walk (bipartite) gets 2 colours, a graph with odd
    cycles more; several components and self-loops are fine."""
    from jaxmc.layout.sweep import coloring

    side = 30
    i = np.arange(side * side)
    x, y = i // side, i % side
    nbrs = [
        np.minimum(x + 1, side - 1) * side + y,
        np.maximum(x - 1, 0) * side + y,
        x * side + np.minimum(y + 1, side - 1),
        x * side + np.maximum(y - 1, 0),
    ]
    rows = np.repeat(i, 4)
    cols = np.stack(nbrs, 1).reshape(-1)
    c = coloring(rows, cols, side * side)
    off = rows != cols
    assert c.max() == 1 and np.all(c[rows[off]] != c[cols[off]])
    rng = np.random.default_rng(0)
    for n, p in [(60, 0.1), (200, 0.03), (7, 1.0)]:
        r, q = np.nonzero(rng.random((n, n)) < p)
        c = coloring(r, q, n)
        off = r != q
        assert c.max() >= 2  # odd cycles: not 2-colourable
        assert np.all(c[r[off]] != c[q[off]])
        assert set(np.unique(c)) == set(range(c.max() + 1))
    assert coloring(np.zeros(0, int), np.zeros(0, int), 3).tolist() == [0, 0, 0]


def test_weight_classes_path_matches_plain_and_falls_back():
    """Batched solves gather the Jacobi weights from a `[C, k]` table when
    the entries' classes hold at the points (checked exactly), else use the
    plain `[nnz, k]` values: both give the one-point results. A parametric
    walk has a few classes."""
    import jax
    import jax.numpy as jnp

    from jaxmc.layout.sweep import Pattern
    from jaxmc.solvers.adjoint import jacobi_solver

    rng = np.random.default_rng(2)
    n = 80
    rows, cols = np.nonzero(rng.random((n, n)) < 0.06)
    pat = Pattern(rows, cols, (n, n))
    a = jax.tree_util.tree_map(jnp.asarray, pat.arrays)
    k, C = 4, 3
    cls = rng.integers(0, C, rows.size)
    table = rng.random((k, C)) / (1.5 * np.bincount(rows, minlength=n).max())
    off = table[:, cls]  # [k, nnz]: equal weights within a class
    dg = np.repeat(1.0 + rng.random((k, 1)), n, axis=1)  # constant per point
    rhs = rng.random(n)
    rep = np.array([np.flatnonzero(cls == c)[0] for c in range(C)], np.int32)
    solver = jacobi_solver(n, 1e-12, 5000, pat.bounds)

    def jac(*args):  # the values (NaN where a point did not converge)
        return solver(*args)[0]

    single = np.stack(
        [
            jac(
                jnp.asarray(off[i]),
                jnp.asarray(dg[i]),
                jnp.asarray(rhs),
                a["order"],
                a["lay"],
                a["rows"],
                {},
                None,
            )
            for i in range(k)
        ]
    )
    wrong = cls.copy()
    wrong[:5] = (wrong[:5] + 1) % C
    for guess in (cls, wrong):
        classes = {"cls": jnp.asarray(guess, jnp.int32), "rep": jnp.asarray(rep)}
        batched = jax.jit(
            jax.vmap(jac, in_axes=(0, 0, None, None, None, None, None, None))
        )(
            jnp.asarray(off),
            jnp.asarray(dg),
            jnp.asarray(rhs),
            a["order"],
            a["lay"],
            a["rows"],
            classes,
            None,
        )
        np.testing.assert_allclose(batched, single, rtol=1e-13)

    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from grad import model_text

    pt = {"p0": 0.3, "p1": 0.4}
    model = jaxmc.load_model_string(
        model_text(2), {"N": 8}, parameters=("p0", "p1"), params=pt
    )
    problem = jaxmc.parametric(model, 'P=? [ F "goal" ]', params=pt)
    found = [
        h["classes"]
        for h in problem.host.values()
        if isinstance(h, dict) and "classes" in h
    ]
    assert found and 2 <= found[0]["rep"].size <= 12
