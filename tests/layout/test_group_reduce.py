"""`group_reduce`'s gather path (`jaxmc.layout.GroupIndex`) gives the bits
of `segment_max`/`segment_min`: empty states, NaN, infinities, signed
zeros, overflow states, both index forms, under jit and vmap; and MDP
model checking gives the same results with and without it."""

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmc
from jaxmc.layout import sparse_model as layout_model
from jaxmc.layout.grouped import choose_width, group_index, group_reduce
from jaxmc.layout.sparse_model import from_arrays


jax.config.update("jax_enable_x64", True)

MODELS = Path(__file__).resolve().parents[2].parent / "shared" / "models"


def _counts(rng, n, kind):
    """Choice counts per state for a named structure."""
    if kind == "mixed":  # 0, 1 and many choices
        return rng.choice([0, 1, 1, 2, 3, 3, 4, 7, 20], size=n)
    if kind == "huge":  # one state owns most choices
        c = rng.integers(0, 3, size=n)
        c[rng.integers(n)] = 500
        return c
    if kind == "uniform":
        return np.full(n, 4)
    if kind == "empty_ends":  # no choices at the first and last states
        c = rng.integers(1, 5, size=n)
        c[0] = c[-1] = 0
        return c
    raise ValueError(kind)


def _values(rng, m, dtype):
    v = rng.standard_normal(m).astype(dtype)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], dtype=dtype)
    hit = rng.random(m) < 0.15
    v[hit] = rng.choice(special, size=int(hit.sum()))
    return v


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    nan = np.isnan(a)
    np.testing.assert_array_equal(nan, np.isnan(b))
    # bitwise elsewhere (distinguishes -0.0 from 0.0); NaN payloads may differ
    np.testing.assert_array_equal(a[~nan].view(np.uint8), b[~nan].view(np.uint8))


def _reference(v, ptr, op):
    ids = jnp.asarray(np.repeat(np.arange(len(ptr) - 1), np.diff(ptr)), dtype=jnp.int32)
    return group_reduce(jnp.asarray(v), ids, len(ptr) - 1, op), ids


@pytest.mark.parametrize("kind", ["mixed", "huge", "uniform", "empty_ends"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gather_matches_segment(kind, dtype):
    rng = np.random.default_rng(sum(map(ord, kind)))
    n = 300
    ptr = np.concatenate(([0], np.cumsum(_counts(rng, n, kind))))
    v = _values(rng, int(ptr[-1]), dtype)
    for width in (None, 1, 2, 5, 40):
        for table in (False, True):
            G = group_index(ptr, width=width, table=table, max_padding=None)
            assert G is not None
            for op in ("max", "min"):
                ref, ids = _reference(v, ptr, op)
                got = group_reduce(jnp.asarray(v), ids, n, op, groups=G)
                _same_bits(got, ref)
                if width is None:  # under jit too (one compile per case)
                    jitted = jax.jit(
                        lambda v, G: group_reduce(v, None, n, op, groups=G)
                    )
                    _same_bits(jitted(jnp.asarray(v), G), ref)


def test_overflow_structure():
    """A state past `width` sends exactly its extra choices to the overflow."""
    ptr = np.array([0, 0, 1, 3, 3, 10, 12])
    G = group_index(ptr, width=2, max_padding=None)
    np.testing.assert_array_equal(G.rest_state, [4])
    np.testing.assert_array_equal(G.rest_choice, [5, 6, 7, 8, 9])
    np.testing.assert_array_equal(G.rest_seg, [0] * 5)
    G = group_index(ptr, width=2, table=True, max_padding=None)
    np.testing.assert_array_equal(
        G.table, [[0, 0], [0, 0], [1, 2], [2, 2], [3, 4], [10, 11]]
    )


def test_choose_width():
    assert choose_width(np.full(100, 4)) == 4
    assert choose_width(np.array([0, 1, 1, 0])) == 1
    assert choose_width(np.zeros(5, int)) == 1
    # one huge state does not widen every row
    c = np.full(1000, 2)
    c[3] = 10_000
    assert choose_width(c) == 2
    # a tail within the padding limit: no overflow (consensus: 1-6 choices)
    c = np.array([3] * 900 + [6] * 100)
    assert choose_width(c) == 6
    # past the limit: the tail goes to the overflow
    assert choose_width(c, max_padding=1.5) == 3


def test_fallbacks():
    assert group_index(np.array([0, 0, 0])) is None  # no choices
    assert group_index(np.array([0])) is None  # no states
    # padding over the limit: segment_max
    ptr = np.concatenate(([0], np.cumsum([1] * 10 + [0] * 90)))
    assert group_index(ptr, width=1) is not None
    assert group_index(ptr, width=3) is None
    M = from_arrays(
        np.array([0, 0, 0]),
        np.array([0]),
        np.array([], int),
        np.array([]),
        nondeterministic=True,
    )
    assert M.groups is None
    _same_bits(M.group_reduce(jnp.zeros(0), "max"), jnp.full(2, -jnp.inf))


def _mdp(rng, n=50):
    counts = _counts(rng, n, "mixed")
    ptr = np.concatenate(([0], np.cumsum(counts)))
    m = int(ptr[-1])
    row_ptr = np.arange(m + 1)  # one entry per choice
    col = rng.integers(0, n, size=m)
    return from_arrays(ptr, row_ptr, col, np.ones(m), nondeterministic=True), ptr


def test_sparse_model_pytree_jit_vmap():
    rng = np.random.default_rng(1)
    M, ptr = _mdp(rng)
    assert M.groups is not None
    m = M.n_choices
    V = np.stack([_values(rng, m, np.float64) for _ in range(3)])
    refs = [[_reference(v, ptr, op)[0] for v in V] for op in ("max", "min")]
    for i, op in enumerate(("max", "min")):
        f = eqx.filter_jit(lambda M, v: M.group_reduce(v, op))
        _same_bits(f(M, jnp.asarray(V[0])), refs[i][0])
        batched = jax.vmap(lambda v: M.group_reduce(v, op))(jnp.asarray(V))
        for k in range(3):
            _same_bits(batched[k], refs[i][k])
        # a batch of models (the structure broadcast with the values)
        Ms = jax.vmap(lambda vals: M.with_values(vals))(jnp.ones((3, m)))
        both = eqx.filter_vmap(lambda M, v: M.group_reduce(v, op))(Ms, jnp.asarray(V))
        for k in range(3):
            _same_bits(both[k], refs[i][k])
    leaves = jax.tree_util.tree_leaves(M)
    assert all(isinstance(x, jax.Array) for x in leaves)
    # tree_at/unflatten keep the index; it can be switched off
    M2 = M.with_values(jnp.full(m, 2.0))
    assert M2.groups.ptr is M.groups.ptr and M2.groups.width == M.groups.width
    off = eqx.tree_at(lambda M: M.groups, M, None)
    _same_bits(off.group_reduce(jnp.asarray(V[0]), "max"), refs[0][0])


def test_numerics_sparse_model_gets_index():
    """`numerics`' `sparse_model` (what `jaxmc.check` uses) builds the same
    index as `from_arrays`; a `SparseModel` without one (e.g. built under
    jit) reduces through `segment_max` to the same bits."""
    from jaxmc.numerics.matrices import sparse_model

    rng = np.random.default_rng(2)
    M, ptr = _mdp(rng)
    M2 = sparse_model(
        ptr,
        np.arange(M.n_choices + 1),
        np.asarray(M.csr.indices),
        np.ones(M.n_choices),
        nondeterministic=True,
    )
    assert M2.groups is not None and M2.groups.width == M.groups.width
    np.testing.assert_array_equal(M2.groups.ptr, M.groups.ptr)
    np.testing.assert_array_equal(M2.groups.rest_choice, M.groups.rest_choice)

    def build_and_reduce(ids, v):
        S = layout_model.SparseModel(
            csr=M.csr,
            matrix=M.matrix,
            group_ids=ids,
            n_states=M.n_states,
            n_choices=M.n_choices,
            nondeterministic=True,
        )
        assert S.groups is None
        return S.group_reduce(v, "max")

    v = jnp.asarray(_values(rng, M.n_choices, np.float64))
    _same_bits(jax.jit(build_and_reduce)(M.group_ids, v), M.group_reduce(v, "max"))


def test_bellman_step_fused_matches():
    from jaxmc.kernels.fused import bellman_step

    rng = np.random.default_rng(3)
    M, _ = _mdp(rng)
    off = eqx.tree_at(lambda M: M.groups, M, None)
    b = jnp.asarray(rng.random(M.n_choices))
    x = jnp.asarray(rng.random(M.n_states))
    for op in ("max", "min"):
        for rel in (True, False):
            got = jax.jit(lambda M, b, x: bellman_step(M, b, x, op, rel))(M, b, x)
            ref = bellman_step(off, b, x, op, rel)
            for g, r in zip(got, ref):
                _same_bits(g, r)


def _check_both(monkeypatch, path, prop, consts=None):
    model = jaxmc.load_model(str(path), consts)
    with_gather = jaxmc.check(model, prop, method="value_iteration").value
    from jaxmc.numerics import matrices

    # both places that build a model's GroupIndex: without it, max/min over
    # choices is a segment reduction (the path being compared with)
    monkeypatch.setattr(layout_model, "group_index", lambda *a, **k: None)
    monkeypatch.setattr(matrices, "group_index", lambda *a, **k: None)

    without = jaxmc.check(
        jaxmc.load_model(str(path), consts), prop, method="value_iteration"
    ).value
    return with_gather, without


@pytest.mark.parametrize(
    "prop,expected",
    [
        ('Rmin=? [ F "goal2" ]', 19 / 15),
        ('Rmin=? [ F ("goal1"|"goal2") ]', 1.2),
        ('Rmax=? [ F ("goal1"|"goal2") ]', 3.5),
    ],
)
def test_prism_mdp_results_unchanged(monkeypatch, prop, expected):
    path = MODELS / "prism-tests/functionality/verify/mdps/rewards/robot.nm"
    if not path.exists():
        pytest.skip("shared PRISM tests not available")
    a, b = _check_both(monkeypatch, path, prop)
    assert a == pytest.approx(expected, rel=1e-5)
    assert a == b  # the same bits through the whole solve


def test_consensus_unchanged(monkeypatch):
    path = MODELS / "prism-examples/mdps/consensus/coin2.nm"
    if not path.exists():
        pytest.skip("shared PRISM examples not available")
    for prop in (
        'Pmin=? [ F "finished"&"all_coins_equal_1" ]',
        'R{"steps"}max=? [ F "finished" ]',
    ):
        a, b = _check_both(monkeypatch, path, prop, "K=2")
        assert a == b
        monkeypatch.undo()
    # PRISM's analytic bound (K-1)/(2K) for K=2
    a, _ = _check_both(
        monkeypatch, path, 'Pmin=? [ F "finished"&"all_coins_equal_1" ]', "K=2"
    )
    assert a >= 0.25 - 1e-6
