"""The compact diagonal layout (`jaxmc.layout.CompactDIA`) and its Pallas
kernel (`jaxmc.kernels.dia_pallas`, interpret mode on a CPU): the SpMV and
the fused solver steps against scipy and the plain-JAX reference, on
banded random matrices (partial diagonals, a last block of fewer rows) and
on tandem in PRISM's lexicographic state order; and the matrices it
refuses."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

import jaxmc
from jaxmc import solvers
from jaxmc.kernels.dia_pallas import fused_dia
from jaxmc.kernels.spmv import spmv
from jaxmc.kernels.spmv_pallas import fused
from jaxmc.layout import CSR, CompactDIA, CompactVector, lex_order, make_layout


TANDEM = (
    Path(__file__).resolve().parents[2].parent
    / "shared"
    / "models"
    / "prism-examples"
    / "ctmcs"
    / "tandem"
    / "tandem.sm"
)
ON_GPU = jax.default_backend() == "gpu"


def banded(n: int, offsets, seed: int = 0, density: float = 0.7) -> sp.csr_matrix:
    """A random matrix on the given diagonals, each with some entries
    missing, values from a small set (a table of a few entries)."""
    rng = np.random.default_rng(seed)
    rows, cols, vals = [], [], []
    for o in offsets:
        i = np.arange(max(0, -o), min(n, n - o))
        i = i[rng.random(i.size) < density]
        rows.append(i)
        cols.append(i + o)
        vals.append(rng.choice([0.25, 0.5, 1.5, 3.0], size=i.size))
    A = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n, n),
    )
    A.sum_duplicates()
    A.sort_indices()
    return A


def to_csr(A):
    return CSR.from_arrays(A.indptr, A.indices, A.data, A.shape)


@pytest.mark.parametrize(
    "n,offsets,rows",
    [(300, (-7, -1, 0, 2, 40), 64), (1000, (-300, 1, 299), 256), (17, (-3, 3), 16)],
)
def test_spmv_matches_scipy(n, offsets, rows):
    A = banded(n, offsets)
    L = CompactDIA.from_csr(to_csr(A), block_rows=rows)
    assert set(L.offsets) <= set(offsets)
    x = jnp.asarray(np.random.default_rng(1).standard_normal(n))
    y = A @ np.asarray(x)
    np.testing.assert_allclose(
        np.asarray(spmv(L, x, impl="reference")), y, rtol=1e-13, atol=1e-13
    )
    np.testing.assert_allclose(
        np.asarray(spmv(L, x, impl="pallas")), y, rtol=1e-13, atol=1e-13
    )
    # the masked path only (no interior blocks) gives the same
    np.testing.assert_allclose(
        np.asarray(fused(L, x, interpret=not ON_GPU, tile=False)),
        y,
        rtol=1e-13,
        atol=1e-13,
    )


@pytest.mark.parametrize("skip", [True, False])
def test_fused_steps_match_the_reference(skip):
    n = 700
    A = banded(n, (-64, -1, 1, 63), seed=3, density=0.5)
    L = CompactDIA.from_csr(to_csr(A), block_rows=64)
    rng = np.random.default_rng(2)
    x = jnp.asarray(rng.random(n) + 0.5)
    diag = rng.choice([2.0, 4.0, 8.0], size=n)
    b = rng.choice([0.0, 1.0], size=n)
    inv = CompactVector.from_array(1.0 / diag)
    ref = (np.asarray(b) + A @ np.asarray(x)) / diag
    for bb in (CompactVector.from_array(b), jnp.asarray(b)):
        y, d, nf = fused_dia(
            L, x, bb, inv, epilogue="jacobi", diff=True, interpret=not ON_GPU, skip=skip
        )
        np.testing.assert_allclose(np.asarray(y), ref, rtol=1e-13)
        with np.errstate(divide="ignore", invalid="ignore"):
            want = np.max(np.abs(ref - np.asarray(x)) / np.abs(ref))
        assert float(d) == pytest.approx(want, rel=1e-12)
        assert int(nf) == 0
    y = fused_dia(
        L, x, jnp.asarray(b), None, epilogue="power", interpret=not ON_GPU, skip=skip
    )
    np.testing.assert_allclose(np.asarray(y), b + A @ np.asarray(x), rtol=1e-13)
    # a non-finite row is reported
    xb = x.at[5].set(jnp.inf)
    _, d, nf = fused_dia(
        L, xb, None, inv, epilogue="jacobi", diff=True, interpret=not ON_GPU, skip=skip
    )
    assert int(nf) == 1 and np.isnan(float(d))


def test_blocks_skip_the_diagonals_they_do_not_use():
    n = 512
    # rows 0..255 on diagonal +1 only, rows 256.. on diagonal -1 only
    A = sp.lil_matrix((n, n))
    for i in range(255):
        A[i, i + 1] = 0.5
    for i in range(256, n):
        A[i, i - 1] = 0.25
    L = CompactDIA.from_csr(to_csr(A.tocsr()), block_rows=128)
    act = np.asarray(L.active).reshape(-1, len(L.offsets))
    assert L.offsets == (-1, 1)
    np.testing.assert_array_equal(act[:4], [[0, 1]] * 2 + [[1, 0]] * 2)
    assert not act[4:].any()  # the padding past the last row
    x = jnp.arange(n, dtype=jnp.float64)
    np.testing.assert_allclose(
        np.asarray(spmv(L, x, impl="pallas")), A.tocsr() @ np.asarray(x)
    )
    L2 = L.with_block_rows(256)
    assert np.asarray(L2.active).reshape(-1, 2)[:2].tolist() == [[0, 1], [1, 0]]
    np.testing.assert_allclose(
        np.asarray(spmv(L2, x, impl="pallas")), A.tocsr() @ np.asarray(x)
    )


def test_refuses_what_is_not_a_few_diagonals():
    A = sp.random(
        300, 300, density=0.05, random_state=np.random.default_rng(0), format="csr"
    )
    assert not CompactDIA.fits(to_csr(A))
    with pytest.raises(ValueError, match="not a diagonal matrix"):
        CompactDIA.from_csr(to_csr(A))
    with pytest.raises(ValueError, match="square"):
        CompactDIA.from_csr(to_csr(sp.random(3, 4, density=0.5, format="csr")))
    with pytest.raises(ValueError, match="distinct values"):
        B = sp.diags(np.arange(1, 70001, dtype=float), 0, format="csr")
        CompactDIA.from_csr(to_csr(B))
    assert isinstance(make_layout(to_csr(banded(50, (0, 1))), "dia"), CompactDIA)
    # a repeated (row, column), with the columns of its row out of order
    dup = CSR.from_arrays(
        np.array([0, 3, 4]),
        np.array([1, 0, 1, 1]),
        np.array([1.0, 2.0, 3.0, 4.0]),
        (2, 2),
    )
    with pytest.raises(ValueError, match="repeated"):
        CompactDIA.from_csr(dup)


def test_value_table_beyond_its_sample():
    """Values that the table's sample (every 64th entry) misses are found
    and added: 3,000 distinct values on 3 diagonals, checked against scipy."""
    n = 1000
    rng = np.random.default_rng(5)
    A = sp.diags(
        [
            rng.integers(1, 1000, n - 1) / 7.0,
            rng.integers(1, 1000, n) / 3.0,
            rng.integers(1, 1000, n - 1) / 11.0,
        ],
        [-1, 0, 1],
        format="csr",
    )
    L = CompactDIA.from_csr(to_csr(A))
    assert L.vidx.dtype == np.uint16 and L.table.size > 256
    x = jnp.asarray(rng.standard_normal(n))
    np.testing.assert_allclose(
        np.asarray(spmv(L, x, impl="reference")), A @ np.asarray(x), rtol=1e-13
    )


@pytest.mark.skipif(not TANDEM.exists(), reason="shared PRISM models absent")
def test_tandem_steady_state_jacobi_in_lexicographic_order():
    """tandem c=15 is 6 diagonals in PRISM's order; the Jacobi solve of its
    steady-state system on the diagonal layout is the CSR one."""
    em = jaxmc.build(jaxmc.load_model(TANDEM, {"c": 15}))
    n = em.num_states
    R = sp.csr_matrix((em.val, em.col, em.row_ptr), shape=(n, n))
    diag = np.asarray(R.sum(axis=1)).ravel() - R.diagonal()
    A = (R - sp.diags(R.diagonal())).T.tocsr()
    A.eliminate_zeros()
    o = lex_order(em.states)
    A = A[o][:, o].tocsr()
    A.sort_indices()
    diag = diag[o]
    L = CompactDIA.from_csr(to_csr(A), block_rows=64)
    assert len(L.offsets) == 6
    x0 = jnp.full(n, 1.0 / n)
    sol = solvers.jacobi(
        L, CompactVector.from_array(diag), None, x0, epsilon=1e-10, max_iters=100_000
    )
    ref = solvers.jacobi(
        to_csr(A), jnp.asarray(diag), None, x0, epsilon=1e-10, max_iters=100_000
    )
    np.testing.assert_allclose(np.asarray(sol.value), np.asarray(ref.value), rtol=1e-9)


@pytest.mark.gpu
def test_kernel_on_the_gpu():
    A = banded(100_000, (-513, -1, 1, 512, 2000), seed=5)
    L = CompactDIA.from_csr(to_csr(A))
    x = jnp.asarray(np.random.default_rng(0).random(100_000))
    np.testing.assert_allclose(
        np.asarray(spmv(L, x, impl="pallas")), A @ np.asarray(x), rtol=1e-13
    )
