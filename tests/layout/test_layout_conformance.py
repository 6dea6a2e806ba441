"""Every layout and kernel against scipy on the transition matrices of every
model of PRISM's regression suite (`../shared/models/prism-tests`, the
models the conformance suite checks).

One compilation per layout, not per model: the models' matrices are stacked
into one block-diagonal matrix (DTMCs and CTMCs square, MDPs with their
choice rows), so each layout is built, run and compared once on all of
them. The blocks keep each model's own row lengths, column bands and
distinct values; a 32-row segment may straddle two models, which a layout
must handle anyway. The Pallas kernels run in interpret mode on CPU.
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

import jaxmc
from jaxmc.kernels import spmv
from jaxmc.layout import CSR, build_layout


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import corpus  # noqa: E402


jax.config.update("jax_enable_x64", True)

pytestmark = pytest.mark.skipif(
    not corpus.available(), reason="../shared/models not present"
)

#: Every layout name `jaxmc.check(layout=...)` accepts, less "auto".
KINDS = ("csr", "ell", "sell", "warp", "warp2", "vector", "compact", "compact2")
SQUARE_ONLY = ("compact", "compact2")  # the compact Jacobi/power layouts
PALLAS = ("warp", "warp2", "vector", "compact", "compact2")


@cache
def _stacked() -> dict[str, tuple[sp.csr_matrix, int]]:
    """{"square": (block-diagonal matrix, number of models), "choices": ...}."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))
    from conformance import cases

    pairs = sorted(
        {(str(c.model), c.consts) for c in cases.all_cases() if c.skip is None}
    )
    blocks: dict[str, list] = {"square": [], "choices": []}
    for path, consts in pairs:
        try:
            em = jaxmc.build(jaxmc.load_model(path, consts or None))
        except jaxmc.JaxmcError:
            # out of scope or an expected error: the conformance suite covers it
            continue
        rows = len(em.row_ptr) - 1
        A = sp.csr_matrix((em.val, em.col, em.row_ptr), shape=(rows, em.num_states))
        blocks["square" if rows == em.num_states else "choices"].append(A)
    return {k: (sp.block_diag(v, format="csr"), len(v)) for k, v in blocks.items() if v}


def test_the_corpus_is_there():
    stacked = _stacked()
    assert stacked["square"][1] >= 100  # DTMCs and CTMCs of the suite
    assert stacked["choices"][1] >= 20  # MDPs


@pytest.mark.parametrize("impl", ["reference", "pallas"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("which", ["square", "choices"])
def test_layout_spmv_matches_scipy_on_every_suite_model(which, kind, impl):
    if impl == "pallas" and kind not in PALLAS:
        pytest.skip("no Pallas kernel for this layout")
    if which == "choices" and kind in SQUARE_ONLY:
        pytest.skip("compact layouts are built for square matrices")
    A, _ = _stacked()[which]
    A.sort_indices()
    csr = CSR.from_arrays(A.indptr, A.indices, A.data, A.shape)
    layout = build_layout(csr, kind)
    x = np.random.default_rng(7).random(A.shape[1]) + 0.5
    got = np.asarray(spmv(layout, jnp.asarray(x), impl=impl))
    want = A @ x
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)
