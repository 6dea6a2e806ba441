"""Progress of long iterative solves (`jaxmc.solvers.progress`): the loops
report `(iterations, residual)` to a host function when one is set at trace
time, and trace no callback otherwise (so that their executables stay in
JAX's persistent cache)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

from jaxmc import solvers
from jaxmc.layout import CSR
from jaxmc.solvers import Status, progress as _progress
from jaxmc.solvers._linear import fixed_point


def _chain(n, seed=0):
    """A substochastic random matrix (slowly mixing: many iterations) and `b`."""
    rng = np.random.default_rng(seed)
    A = sp.random(n, n, density=0.2, random_state=rng, format="csr") + sp.eye(n, k=1)
    A = sp.csr_matrix(A.multiply(0.995 / np.asarray(A.sum(1)).reshape(-1, 1)))
    A.sort_indices()
    b = np.zeros(n)
    b[-1] = 0.005
    return A, b


@pytest.fixture
def reports(monkeypatch):
    got = []
    monkeypatch.setattr(_progress, "MIN_STATES", 0)
    monkeypatch.setattr(_progress, "EVERY", 8)
    _progress.set_reporter(lambda it, res: got.append((it, res)))
    yield got
    _progress.set_reporter(None)


def test_loops_report_iterations_and_residual(reports):
    A, b = _chain(37)  # a shape no other test traces: a fresh trace with the reporter
    csr = CSR.from_arrays(A.indptr, A.indices, A.data, A.shape)
    sol = solvers.power(csr, b, jnp.zeros(37), epsilon=1e-10, relative=False)
    assert sol.status == Status.CONVERGED
    its = [it for it, _ in reports]
    assert len(its) >= 3 and its == sorted(its) and len(set(its)) == len(its)
    assert all(it % 8 < 2 for it in its)  # two steps per trip: reported as it passes 8k
    assert its[-1] <= int(sol.iterations)
    assert all(np.isfinite(r) and r > 0 for _, r in reports)
    # the values do not depend on the reports
    _progress.set_reporter(None)
    ref = np.linalg.solve(np.eye(37) - A.toarray(), b)
    np.testing.assert_allclose(np.asarray(sol.value), ref, rtol=1e-5)


def test_no_reporter_traces_no_callback():
    step = lambda x: 0.5 * x + 1.0  # noqa: E731
    jaxpr = jax.make_jaxpr(lambda x: fixed_point(step, x, 1e-9, False, 100).value)(
        jnp.zeros(5)
    )
    assert "callback" not in str(jaxpr)


def test_small_solves_trace_no_callback(monkeypatch):
    _progress.set_reporter(lambda it, res: None)
    try:
        step = lambda x: 0.5 * x + 1.0  # noqa: E731
        jaxpr = jax.make_jaxpr(lambda x: fixed_point(step, x, 1e-9, False, 100).value)(
            jnp.zeros(5)
        )
        assert "callback" not in str(jaxpr)  # below MIN_STATES
        monkeypatch.setattr(_progress, "MIN_STATES", 0)
        jaxpr = jax.make_jaxpr(lambda x: fixed_point(step, x, 1e-9, False, 100).value)(
            jnp.zeros(5)
        )
        assert "callback" in str(jaxpr)
    finally:
        _progress.set_reporter(None)


def test_gauss_seidel_reports(reports):
    A, b = _chain(41, seed=2)
    sol = solvers.gauss_seidel(A, b, np.zeros(41), epsilon=1e-12, relative=False)
    assert sol.status == Status.CONVERGED
    assert reports and all(it % 16 == 0 for it, _ in reports)


def test_cli_progress_line(capsys):
    from jaxmc.cli.args import parser as _parser
    from jaxmc.cli.output import Printer as _Printer

    show = _Printer(_parser().parse_args(["m.pm"]))
    show.tty = True
    show.checking(1, 2, 'P=? [ F "goal" ]')
    show.solving(4096, 3.2e-5, 0.2)  # under a second: nothing more
    show.solving(8192, 1.5e-6, 2.5)
    err = capsys.readouterr().err
    assert "8,192 iterations, residual 1.5e-06, 2.5 s" in err and "4,096" not in err
    assert "checking 1/2" in err
