"""Parameters -> transition values (`jaxmc.diff._values.TransitionValues`):
the values at other points than the build point against a model built
there, derivatives against finite differences, and the size of what the
gradient keeps from its forward pass (it must not grow with the number of
parameter-dependent updates)."""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmc


sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from grad import model_text  # noqa: E402  (the walk of benchmarks/grad.py)


# Two modules synchronising on `go`, so each transition is a product of two
# updates' probabilities (two provenance columns); a state-dependent factor
# (`p*(s+1)/(N+1)`), a state-independent one (`q`), parameter-free ones,
# and merged contributions (both of b's updates reach t=2 from t=2).
SYNC = """dtmc
const int N = 4;
const double p;
const double q;
module a
  s : [0..N] init 0;
  [go] s<N -> p*(s+1)/(N+1) : (s'=s+1) + 1 - p*(s+1)/(N+1) : (s'=s);
  [] s=N -> 0.25 : (s'=0) + 0.75 : (s'=N);
endmodule
module b
  t : [0..2] init 0;
  [go] true -> q : (t'=min(t+1,2)) + (1-q) : (t'=t);
endmodule
label "top" = s=N;
"""


def values_fn(text, consts, point, prop):
    """`(f, arrays)`: the problem's `TransitionValues` and its arrays."""
    model = jaxmc.load_model_string(text, consts, parameters=tuple(point), params=point)
    prob = jaxmc.parametric(model, prop, params=point)
    return prob.tv, prob.arrays["tv"], prob.model


def built(text, consts, point):
    return jaxmc.build(jaxmc.load_model_string(text, {**consts, **point}))


@pytest.mark.parametrize(
    "text, consts, build, others",
    [
        (
            SYNC,
            {},
            {"p": 0.3, "q": 0.4},
            [{"p": 0.7, "q": 0.15}, {"p": 0.05, "q": 0.9}],
        ),
        (
            model_text(3),
            {"N": 6},
            {"p0": 0.3, "p1": 0.3, "p2": 0.3},
            [{"p0": 0.2, "p1": 0.5, "p2": 0.8}],
        ),
    ],
)
def test_values_match_a_model_built_at_the_point(text, consts, build, others):
    tv, arrays, model = values_fn(
        text, consts, build, 'P=? [ F "top" ]' if text is SYNC else 'P=? [ F "goal" ]'
    )
    f = jax.jit(tv.__call__)
    for point in others:
        ref = built(text, consts, point)
        assert np.array_equal(ref.col, model.col) and np.array_equal(
            ref.row_ptr, model.row_ptr
        )
        th = {k: jnp.asarray(v) for k, v in point.items()}
        np.testing.assert_allclose(
            np.asarray(f(arrays, th)), ref.val, rtol=1e-12, atol=1e-15
        )


def test_sync_model_has_two_columns_and_merged_entries():
    tv, arrays, _ = values_fn(SYNC, {}, {"p": 0.3, "q": 0.4}, 'P=? [ F "top" ]')
    assert tv.merged
    assert len(arrays["src"]) == 2  # a factor of each module's update
    # q and 1-q take one slot each; p*(s+1)/(N+1) and its complement one per state
    assert 1 in tv._sizes and max(tv._sizes) > 1


def test_value_derivatives_against_finite_differences():
    point = {"p": 0.3, "q": 0.4}
    tv, arrays, _ = values_fn(SYNC, {}, point, 'P=? [ F "top" ]')
    f = jax.jit(tv.__call__)
    th = {k: jnp.asarray(v) for k, v in point.items()}
    rev = jax.jacrev(f, argnums=1)(arrays, th)
    fwd = jax.jacfwd(f, argnums=1)(arrays, th)
    h = 1e-6
    for k in point:
        up = {**th, k: th[k] + h}
        dn = {**th, k: th[k] - h}
        fd = (np.asarray(f(arrays, up)) - np.asarray(f(arrays, dn))) / (2 * h)
        assert np.abs(fd).max() > 0.1
        np.testing.assert_allclose(np.asarray(rev[k]), fd, atol=1e-8)
        np.testing.assert_allclose(np.asarray(fwd[k]), fd, atol=1e-8)


def test_batched_values():
    point = {"p": 0.3, "q": 0.4}
    tv, arrays, _ = values_fn(SYNC, {}, point, 'P=? [ F "top" ]')
    ps, qs = jnp.array([0.2, 0.5, 0.6]), jnp.array([0.1, 0.4, 0.7])
    got = jax.vmap(lambda p, q: tv(arrays, {"p": p, "q": q}))(ps, qs)
    for i in range(3):
        one = tv(arrays, {"p": ps[i], "q": qs[i]})
        np.testing.assert_allclose(np.asarray(got[i]), np.asarray(one), rtol=1e-14)


def _residual_bytes(P: int, n: int = 30) -> int:
    point = {f"p{k}": 0.3 for k in range(P)}
    tv, arrays, _ = values_fn(model_text(P), {"N": n}, point, 'P=? [ F "goal" ]')
    th = {k: jnp.asarray(v) for k, v in point.items()}
    _, lin = jax.linearize(lambda t: tv(arrays, t), th)
    return sum(x.nbytes for x in jax.tree_util.tree_leaves(lin) if hasattr(x, "nbytes"))


def test_gradient_residuals_do_not_grow_with_the_updates():
    """The walk with 16 parameters has 64 parameter-dependent updates, with 1
    it has 4: what the values' linearisation keeps for the backward pass
    must be about the same (it was a copy of all values per update, 16x)."""
    one, sixteen = _residual_bytes(1), _residual_bytes(16)
    assert sixteen < 1.5 * one, (one, sixteen)
