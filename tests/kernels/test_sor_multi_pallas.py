"""The fused multi-vector SOR kernel (`jaxmc.kernels.sor_multi_pallas`)
behind `gs_sweep`, in Pallas' interpret mode: one sweep equals the XLA
path's (same reads in the same order) on random bipartite systems, systems
with overflow entries and a leftover colour, and the walk, with class
tables or stored values and every kind of `omega`; full `sor` solves
agree; the default on a CPU stays the XLA path."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from test_diff_sor import walk_system

from jaxmc import _config
from jaxmc.kernels import sor_multi_pallas as K
from jaxmc.kernels.sweep import gs_sweep
from jaxmc.layout.sweep import Pattern
from jaxmc.solvers.sor import Relevance, sor


def random_system(n, seed, bipartite=True, long_row=False, clique=0):
    """`(rows, cols, vals)`, sorted, of a substochastic matrix with
    self-loops: each state has 1-4 random successors (of the other parity
    when `bipartite`); `long_row`: state 0 has ~40 (overflow entries);
    `clique`: states `0..clique-1` all joined (more colours than
    `coloring` gives out: a leftover colour with entries inside it)."""
    rng = np.random.default_rng(seed)
    pairs = set()
    for s in range(n):
        for _ in range(rng.integers(1, 5)):
            t = int(rng.integers(0, n))
            if bipartite and (t - s) % 2 == 0:
                t = (t + 1) % n
            pairs.add((s, t))
        pairs.add((s, s))
    if long_row:
        pairs |= {(0, t) for t in range(1, n, 2)[:40]}
    pairs |= {(a, b) for a in range(clique) for b in range(clique)}
    rc = np.array(sorted(pairs))
    r, c = rc[:, 0], rc[:, 1]
    v = rng.random(r.size) + 0.05
    v *= 0.9 / np.bincount(r, weights=v, minlength=n)[r]
    return r, c, v


def setup(r, c, v, k, kind, seed=0):
    """`gs_sweep`'s inputs for `x = (rhs + off x) / dg`: `kind` "table"
    (class ids + a `[C, k]` table), "dense" (`[nnz, k]` values) or
    "shared" (`[nnz]` values, `[n]` diagonal)."""
    n = int(r.max()) + 1
    rng = np.random.default_rng(seed)
    pat = Pattern(r, c, (n, n))
    arrays = jax.tree_util.tree_map(jnp.asarray, pat.arrays)
    dg = 1.0 - np.bincount(r, weights=np.where(r == c, v, 0.0), minlength=n)
    off = np.where(r == c, 0.0, v)
    rhs = jnp.asarray(rng.random((n, k)) * 0.1)
    sc = 1.0 - 0.05 * np.arange(k) / k
    classes = None
    if kind == "table":
        uq, cls = np.unique(np.round(off / dg[r], 3), return_inverse=True)
        classes = {
            "cls": jnp.asarray(cls.astype(np.int32)),
            "table": jnp.asarray(uq[:, None] * sc),
        }
        off_, dg_ = jnp.asarray(off), jnp.asarray(dg)
    elif kind == "dense":
        off_, dg_ = (
            jnp.asarray(off[:, None] * sc),
            jnp.asarray(np.repeat(dg[:, None], k, 1)),
        )
    else:
        off_, dg_ = jnp.asarray(off), jnp.asarray(dg)
    return pat, arrays, off_, dg_, rhs, classes


def in_mode(mode, f, *args):
    """`jax.jit(f)(*args)` (as numpy) with `jaxmc._config.SOR_KERNEL = mode`
    (read when `gs_sweep` is traced: a fresh jitted function each time),
    and how many kernel calls `f` traced."""
    old = _config.SOR_KERNEL
    _config.SOR_KERNEL = mode
    g = lambda *a: f(*a)  # noqa: E731  (a new function: jit's cache must not hand back another mode's trace)
    try:
        calls = str(jax.make_jaxpr(g)(*args)).count("pallas_call")
        out = jax.tree_util.tree_map(np.asarray, jax.jit(g)(*args))
        return out, calls
    finally:
        _config.SOR_KERNEL = old


def sweeps(mode, pat, arrays, off, dg, rhs, classes, x, omega, count=1):
    """`count` sweeps of `x` with `jaxmc._config.SOR_KERNEL = mode`."""
    n = pat.shape[0]

    def f(x, omega):
        sweep, _, _ = gs_sweep(
            off, dg, rhs, arrays["lay"], arrays["order"], pat.bounds, n, classes
        )
        for _ in range(count):
            x = sweep(x, omega)
        return x

    return in_mode(mode, f, x, omega)


def check_sweep(r, c, v, k, kind, omega, count=1):
    pat, arrays, off, dg, rhs, classes = setup(r, c, v, k, kind)
    x = jnp.asarray(np.random.default_rng(1).random((pat.shape[0], k)))
    ref, n_ref = sweeps("off", pat, arrays, off, dg, rhs, classes, x, omega, count)
    got, n_got = sweeps(
        "interpret", pat, arrays, off, dg, rhs, classes, x, omega, count
    )
    blocks = sum(hi > lo for lo, hi in zip(pat.bounds[:-1], pat.bounds[1:]))
    assert (
        n_ref == 0 and n_got == count * blocks
    )  # the kernel really ran, once per block
    assert np.all(np.isfinite(ref))
    # Same reads, same order of operations: equal up to the compilers'
    # contraction of `a * b + c` (exact on the H200, ~1 ulp of the terms on
    # a CPU, where the SOR blend's cancellation makes that ~1e-15 of the
    # column's scale).
    err = np.max(np.abs(got - ref), axis=0) / np.max(np.abs(ref), axis=0)
    assert np.all(err <= 1e-15), err
    return pat


OMEGAS = {
    "gs": lambda k: None,
    "scalar": lambda k: jnp.float64(1.3),
    "columns": lambda k: jnp.linspace(0.8, 1.7, k),
}


@pytest.mark.parametrize("kind", ["table", "dense", "shared"])
@pytest.mark.parametrize("omega", list(OMEGAS))
@pytest.mark.parametrize("k", [3, 4])
def test_sweep_matches_xla_bipartite(kind, omega, k):
    r, c, v = random_system(60, seed=k, bipartite=True)
    pat = check_sweep(r, c, v, k, kind, OMEGAS[omega](k), count=2)
    assert len(pat.bounds) == 3  # red-black


def test_sweep_matches_xla_overflow_and_leftover_colour():
    """Overflow entries (a long row) and a clique of 34 states: more than
    `coloring`'s 32 colours, so the last block has entries inside it
    (Jacobi among themselves), which the kernel must read from the
    sweep's input, as the XLA path does."""
    r, c, v = random_system(90, seed=5, bipartite=False, long_row=True, clique=34)
    pat = check_sweep(r, c, v, 5, "table", OMEGAS["columns"](5))
    lo = pat.bounds[-2]
    order = pat.arrays["order"]
    pos = np.empty_like(order)
    pos[order] = np.arange(order.size)
    inside = (pos[r] >= lo) & (pos[c] >= lo) & (r != c)
    assert inside.any(), "no leftover colour: the test would not cover it"
    assert any(o.size for o in pat.arrays["lay"]["ovf"]), "no overflow entries"


def test_sweep_matches_xla_walk():
    Q, b, _ = walk_system(12, 0.4)
    Qc = Q.tocoo()
    o = np.lexsort((Qc.col, Qc.row))
    for kind in ("table", "shared"):
        check_sweep(
            Qc.row[o], Qc.col[o], Qc.data[o], 6, kind, OMEGAS["columns"](6), count=3
        )


def test_sor_solve_agrees_with_xla():
    """A full automatic-`omega` `sor` solve of the walk, 4 columns, class
    table: the kernel path gives the XLA path's sweeps, `omega`s and
    values."""
    Q, b, _ = walk_system(12, 0.4)
    Qc = Q.tocoo()
    o = np.lexsort((Qc.col, Qc.row))
    pat, arrays, off, dg, _, classes = setup(
        Qc.row[o], Qc.col[o], Qc.data[o], 4, "table"
    )
    n = pat.shape[0]
    rhs = jnp.asarray(b[:, None] * np.linspace(0.5, 1.0, 4))

    def solve(rhs):
        sweep, _, from_p = gs_sweep(
            off, dg, rhs, arrays["lay"], arrays["order"], pat.bounds, n, classes
        )
        sol, w = sor(sweep, jnp.zeros_like(rhs), 1e-10, 20_000, None, Relevance())
        return from_p(sol.value), jnp.max(sol.iterations), sol.status == 0, w

    (x0, it0, d0, w0), _ = in_mode("off", solve, rhs)
    (x1, it1, d1, w1), calls = in_mode("interpret", solve, rhs)
    assert calls > 0
    assert d0.all() and d1.all() and it0 == it1 > 50
    # (the sweeps agree to ~1 ulp on a CPU, see `check_sweep`, and `w` is
    # estimated from their changes)
    np.testing.assert_allclose(w1, w0, rtol=1e-13)
    np.testing.assert_allclose(x1, x0, rtol=1e-14)


def test_default_on_cpu_is_xla(monkeypatch):
    monkeypatch.setattr(_config, "SOR_KERNEL", "auto")
    assert jax.default_backend() != "cpu" or K.active() is None
    monkeypatch.setattr(K.jax, "default_backend", lambda: "gpu")
    assert K.active() == K.active(1024) == "native"
    assert K.active(134) is None and K.active(K.AUTO_MIN_K // 2) is None
    monkeypatch.setattr(_config, "SOR_KERNEL", "interpret")
    assert K.active() == "interpret"
    monkeypatch.setattr(_config, "SOR_KERNEL", "off")
    assert K.active() is None
    monkeypatch.setattr(_config, "SOR_KERNEL", "bogus")
    with pytest.raises(ValueError, match="SOR_KERNEL"):
        K.active()


def test_single_vector_keeps_xla_path():
    r, c, v = random_system(40, seed=2)
    pat, arrays, off, dg, _, _ = setup(r, c, v, 1, "shared")
    rhs = jnp.asarray(np.random.default_rng(0).random(pat.shape[0]))
    x = jnp.ones(pat.shape[0])
    ref, _ = sweeps("off", pat, arrays, off, dg, rhs, None, x, jnp.float64(1.2))
    got, calls = sweeps(
        "interpret", pat, arrays, off, dg, rhs, None, x, jnp.float64(1.2)
    )
    assert calls == 0
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("tiles, tile", [(1, None), (1, 8), (3, 16)])
@pytest.mark.parametrize("weights", [None, "rows", "entries"])
def test_fused_stop_rule_matches_xla(weights, tiles, tile, monkeypatch):
    """`sweep(x, omega, check=...)`: the kernel's per-column stop-rule flags
    (computed as it writes) equal the XLA path's `Relevance.converged` on
    the same sweep: converged columns pass, perturbed ones fail, a column
    with an inf fails; with row weights (`[n]`) and per-entry weights
    (`[n, k]`, some zero) as well as without; one row tile per program, or
    3 (a loop in each program, the last one partly past the block); tiles
    of many rows, of 2 rows (`TILE` 16 at `k` = 5) and of one row (8: the
    flags without a reduction over rows)."""
    monkeypatch.setattr(K, "CHECK_TILES", tiles)
    monkeypatch.setattr(K, "CHECK_MIN_PROGRAMS", 1)
    if tile:
        monkeypatch.setattr(K, "TILE", tile)
    r, c, v = random_system(70, seed=3)
    k = 5
    pat, arrays, off, dg, rhs, classes = setup(r, c, v, k, "table")
    n = pat.shape[0]
    rng = np.random.default_rng(4)
    omega = jnp.linspace(1.0, 1.3, k)
    sweep, to_p, _ = gs_sweep(
        off, dg, rhs, arrays["lay"], arrays["order"], pat.bounds, n, classes
    )
    x = jax.jit(lambda x: lax.fori_loop(0, 400, lambda i, x: sweep(x, omega), x))(
        jnp.zeros((n, k))
    )
    x = np.array(x)
    x[:, 2] *= 1.0 + 1e-3 * rng.random(n)  # far from converged
    x[5, 3] *= 1.0 + 1e-4  # one entry off
    x[7, 4] = np.inf
    w = None
    if weights == "rows":
        w = jnp.asarray(rng.random(n) * (rng.random(n) > 0.2))
    elif weights == "entries":
        w = jnp.asarray(rng.random((n, k)) * (rng.random((n, k)) > 0.2))
    rel = Relevance(w)

    def f(x):
        sw, _, _ = gs_sweep(
            off, dg, rhs, arrays["lay"], arrays["order"], pat.bounds, n, classes
        )
        return sw(x, omega, check=(rel, 1e-6, rel.measure(x)))

    (y0, ok0), calls0 = in_mode("off", f, jnp.asarray(x))
    (y1, ok1), calls1 = in_mode("interpret", f, jnp.asarray(x))
    assert calls0 == 0 and calls1 > 0
    np.testing.assert_array_equal(ok1, ok0)
    assert ok0[0] and ok0[1] and not ok0[2] and not ok0[3] and not ok0[4], ok0
    fin = np.isfinite(y0)
    np.testing.assert_allclose(y1[fin], y0[fin], rtol=1e-14)


def test_sweep_through_the_kernel_with_sparse_rhs(monkeypatch):
    """A whole `jaxmc.sweep` of a reachability on a walk through the kernel
    (interpret mode): its right-hand side is non-zero next to the target
    only, which the kernel reads as compact rows (`rhs_rows`), and its stop
    rule is fused; the values equal the XLA path's, and the kernel really
    read the compact right-hand side."""
    import jaxmc

    text = "\n".join(
        [
            "dtmc",
            "const double p;",
            "module walk",
            "  x : [0..6] init 0;",
            "  y : [0..3] init 0;",
            "  f : bool init false;",
            "  [] !f & x<6 -> 0.9*p : (x'=x+1) + 0.9*(1-p)/2 : (x'=max(x-1,0)) + "
            "0.9*(1-p)/2 : (y'=mod(y+1,4))"
            " + 0.1 : (f'=true);",
            "  [] f | x=6 -> true;",
            "endmodule",
            'label "goal" = x=6;',
        ]
    )
    ps = {"p": np.linspace(0.3, 0.7, 4)}
    seen = []
    update = K.block_update

    def spy(*a, **kw):
        seen.append((kw.get("rp_rows") is not None, kw.get("check") is not None))
        return update(*a, **kw)

    monkeypatch.setattr(K, "block_update", spy)
    out = {}
    for mode in ("off", "interpret"):
        monkeypatch.setattr(_config, "SOR_KERNEL", mode)
        model = jaxmc.load_model_string(text, parameters=("p",), params={"p": 0.5})
        out[mode] = jaxmc.sweep(model, 'P=? [ F "goal" ]', params=ps, epsilon=1e-10)
    assert (True, True) in seen and (True, False) in seen
    np.testing.assert_allclose(out["interpret"], out["off"], rtol=1e-13)
    assert np.all(out["off"] > 0.01)
