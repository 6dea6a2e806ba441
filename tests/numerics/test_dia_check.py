"""The compact diagonal layout through `jaxmc.check` (`layout="dia"`): the
solves run in PRISM's lexicographic state order, where a box-shaped state
space is a few diagonals, and give CSR's values; models that are no few
diagonals in that order fall back to the compact layout (MDPs too:
tests/api/test_api_layouts.py); on a
GPU "auto" picks it for the steady-state device solves where it fits
(checked here with the GPU test patched in); `dia_order`'s test against
`CompactDIA`'s own limits."""

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import jaxmc
from jaxmc.layout import CSR, CompactDIA, dia_order, ordered_dia
from jaxmc.numerics import DeviceModel, steady_solve


def lex_rank(model, states=None):
    return DeviceModel(model).lex_rank(states)


EXAMPLES = (
    Path(__file__).resolve().parents[2].parent / "shared" / "models" / "prism-examples"
)
needs_examples = pytest.mark.skipif(
    not EXAMPLES.is_dir(), reason="../shared/models absent"
)

# Two queues in tandem (the shape of PRISM's tandem, small): a 2-D box.
TANDEM = """
ctmc
const int c = 6;
module q1
  s1 : [0..c] init 0;
  [] s1<c -> 4:(s1'=s1+1);
  [go] s1>0 -> 3:(s1'=s1-1);
endmodule
module q2
  s2 : [0..c] init 0;
  [go] s2<c -> 1:(s2'=s2+1);
  [] s2>0 -> 2:(s2'=s2-1);
endmodule
rewards "cust" true : s1 + s2; endrewards
"""
PROPS = [
    "S=? [ s2=c ]",
    "R=? [ S ]",
    "P=? [ F<=1.5 s2=c ]",
    "P=? [ s1<c U>=0.5 s2=c ]",
    "R=? [ F s2=c ]",
    "R=? [ C<=1 ]",
    "R=? [ I=2 ]",
]


@pytest.mark.parametrize("prop", PROPS)
def test_dia_gives_csr_values(prop):
    # (a tight epsilon: on a GPU the fused kernels take several Jacobi steps
    # per loop trip, so the two layouts may stop a few steps apart)
    m = jaxmc.load_model_string(TANDEM)
    ref = jaxmc.check(m, prop, layout="csr", epsilon=1e-12)
    got = jaxmc.check(m, prop, layout="dia", epsilon=1e-12)
    assert got.value == pytest.approx(ref.value, rel=1e-9)
    assert got.layout == "dia", got.layout


@pytest.mark.parametrize("method", ["jacobi", "power", "bicgstab"])
def test_dia_linear_methods(method):
    m = jaxmc.load_model_string(TANDEM)
    ref = jaxmc.check(m, "R=? [ F s2=c ]", layout="csr", method=method, epsilon=1e-10)
    got = jaxmc.check(m, "R=? [ F s2=c ]", layout="dia", method=method, epsilon=1e-10)
    assert got.value == pytest.approx(ref.value, rel=1e-8)
    assert got.layout == "dia"


def test_dia_falls_back_where_it_does_not_fit():
    # a ring of 40 states with two jumps of varying length: in lexicographic
    # order they make more diagonals than the layout allows -> compact
    ring = """
dtmc
const int N = 40;
module r
  x : [0..N-1] init 0;
  [] true -> 0.5:(x'=mod(x+1,N)) + 0.25:(x'=mod(3*x+7,N)) + 0.25:(x'=mod(5*x+1,N));
endmodule
"""
    m = jaxmc.load_model_string(ring)
    ref = jaxmc.check(m, "S=? [ x=0 ]", layout="csr")
    got = jaxmc.check(m, "S=? [ x=0 ]", layout="dia")
    assert got.value == pytest.approx(ref.value, rel=1e-10)
    assert got.layout == "compact"


def test_auto_picks_dia_for_gpu_steady_state(monkeypatch):
    """On a GPU (patched in), "auto" asks for the diagonal layout where the
    states have lexicographic ranks, with the warp layout as the fallback
    that `build_ordered` takes for a system that is no few diagonals; an
    explicit layout stays (falling back to compact)."""
    from jaxmc.numerics.matrices import build_ordered

    m = jaxmc.build(jaxmc.load_model_string(TANDEM))
    n = m.num_states
    rows = m.state_of_choice()[m.row_of_entry()]
    A = sp.csr_matrix((np.asarray(m.val), (np.asarray(m.col), rows)), shape=(n, n))
    A.setdiag(0)
    A.eliminate_zeros()
    A.sort_indices()
    monkeypatch.setattr(steady_solve, "on_gpu", lambda: True)
    auto, warp = DeviceModel(m, "auto"), DeviceModel(m, "warp")
    assert steady_solve.system_kind(A, auto, lex_rank(m)) == ("dia", "auto")
    assert steady_solve.system_kind(A, auto, None)[0] in ("warp", "warp2")
    assert steady_solve.system_kind(A, warp, lex_rank(m)) == ("warp", "compact")
    assert steady_solve.system_kind(A, None, lex_rank(m))[0] == "csr"
    mat, order = build_ordered(
        A.indptr, A.indices, A.data, A.shape, "dia", lex_rank(m), "auto"
    )
    assert isinstance(mat, CompactDIA) and order is not None
    shuffled = np.random.default_rng(0).permutation(n)
    mat, order = build_ordered(
        A.indptr, A.indices, A.data, A.shape, "dia", shuffled, "auto"
    )
    assert (
        jaxmc.numerics.matrices.layout_name(mat) in ("warp", "warp2") and order is None
    )


def test_lex_rank_of_a_subset():
    m = jaxmc.build(jaxmc.load_model_string(TANDEM))
    full = lex_rank(m)
    idx = np.flatnonzero(np.arange(m.num_states) % 3 != 1)
    sub = lex_rank(m, idx)
    assert sorted(sub) == list(range(idx.size))
    np.testing.assert_array_equal(np.argsort(sub), np.argsort(full[idx]))


@pytest.mark.parametrize("distinct", [4, 3000])
def test_device_build_matches_host_build(distinct):
    """`ordered_dia`'s device passes (run here by XLA on the CPU) build the
    layout the host's numpy builds, also where the value table's sample
    misses values."""
    side = 40
    n = side * side
    rng = np.random.default_rng(7)
    i = np.arange(n)
    r = np.concatenate([i[i % side < side - 1], i[i >= side]])
    c = np.concatenate([i[i % side < side - 1] + 1, i[i >= side] - side])
    scramble = rng.permutation(n)
    vals = rng.integers(1, distinct + 1, r.size) / 7.0
    A = sp.csr_matrix((vals, (scramble[r], scramble[c])), shape=(n, n))
    A.sort_indices()
    rank = np.empty(n, np.int64)
    rank[scramble] = np.arange(n)
    csr = CSR.from_arrays(A.indptr, A.indices, A.data, A.shape)
    host, p1 = ordered_dia(csr, rank, on_device=False)
    dev, p2 = ordered_dia(csr, rank, on_device=True)
    np.testing.assert_array_equal(p1.order, p2.order)
    assert host.offsets == dev.offsets and host.zero == dev.zero and host.nnz == dev.nnz
    for f in ("vidx", "table", "active"):
        np.testing.assert_array_equal(
            np.asarray(getattr(host, f)), np.asarray(getattr(dev, f))
        )


def test_dia_order_agrees_with_the_layout():
    """`dia_order` accepts exactly what `CompactDIA.from_csr` takes in that
    order: a 2-D grid walk in a scrambled numbering (its row-major rank
    recovers 5 diagonals) and the same matrix with random long jumps."""
    side = 30
    n = side * side
    rng = np.random.default_rng(3)
    i = np.arange(n)
    r, c = [], []
    for d, ok in (
        (1, i % side < side - 1),
        (-1, i % side > 0),
        (side, i < n - side),
        (-side, i >= side),
    ):
        r.append(i[ok])
        c.append(i[ok] + d)
    rows, cols = np.concatenate(r), np.concatenate(c)
    scramble = rng.permutation(n)  # scramble[k]: the new index of grid cell k
    A = sp.csr_matrix(
        (rng.choice([0.5, 0.25], rows.size), (scramble[rows], scramble[cols])),
        shape=(n, n),
    )
    rank = np.empty(n, np.int64)
    rank[scramble] = np.arange(n)  # each row's row-major place in the grid
    csr = CSR.from_arrays(A.indptr, A.indices, A.data, A.shape)
    perm = dia_order(csr, rank)
    assert perm is not None
    L, P = ordered_dia(csr, rank)
    assert sorted(L.offsets) == [-side, -1, 1, side]
    x = rng.standard_normal(n)
    y = np.asarray(jaxmc.kernels.spmv(L, P.apply(x), impl="reference"))
    np.testing.assert_allclose(P.undo(y), A @ x, rtol=1e-12, atol=1e-14)
    assert dia_order(csr, rng.permutation(n)) is None  # a random order: no diagonals
    jumps = A + sp.csr_matrix(
        (np.ones(60), (rng.integers(0, n, 60), rng.integers(0, n, 60))), shape=(n, n)
    )
    csr2 = CSR.from_arrays(jumps.indptr, jumps.indices, jumps.data, jumps.shape)
    assert dia_order(csr2, rank) is None
    with pytest.raises(ValueError):
        CompactDIA.from_csr(
            CSR.from_arrays(
                *(lambda B: (B.indptr, B.indices, B.data, B.shape))(
                    jumps[np.argsort(rank)][:, np.argsort(rank)].tocsr()
                )
            )
        )


@needs_examples
def test_prism_tandem_is_dia_in_lex_order():
    m = jaxmc.load_model(str(EXAMPLES / "ctmcs" / "tandem" / "tandem.sm"), "c=15")
    ref = jaxmc.check(m, 'R{"customers"}=? [ S ]', layout="csr")
    got = jaxmc.check(m, 'R{"customers"}=? [ S ]', layout="dia")
    assert got.layout == "dia"
    assert got.value == pytest.approx(ref.value, rel=1e-10)


def test_sampled_refusal():
    """A matrix with many diagonals is refused from a sample of its entries
    (no full pass); one with few is not, whatever the sample."""
    from jaxmc.layout.dia import _too_many_offsets

    n = 200_000
    rng = np.random.default_rng(11)
    few = sp.diags([np.full(n - 1, 0.5), np.full(n - 7, 0.25)], [1, 7], format="csr")
    many = sp.csr_matrix(
        (np.ones(n), (np.arange(n), rng.integers(0, n, n))), shape=(n, n)
    )
    ident = np.arange(n)
    assert not _too_many_offsets(
        CSR.from_arrays(few.indptr, few.indices, few.data, few.shape), ident, None
    )
    assert _too_many_offsets(
        CSR.from_arrays(many.indptr, many.indices, many.data, many.shape), ident, None
    )
    assert (
        ordered_dia(
            CSR.from_arrays(many.indptr, many.indices, many.data, many.shape), ident
        )
        is None
    )
