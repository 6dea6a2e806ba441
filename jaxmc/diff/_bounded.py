"""Step- and time-bounded properties of a `Problem`: the `k` steps of a
DTMC/MDP as a checkpointed `lax.scan`, and a CTMC's `U<=t` by
uniformisation, differentiable in the rates and in `t`."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..explore.lower import lower_parametric
from ..kernels.coo import coo_spmv as spmv
from ..lang import ast
from ..numerics import graph


def evaluate_scalar(e, params, theta, *, what: str = "expression"):
    """A state-independent expression (a time bound) as a jnp scalar."""
    c = lower_parametric(e, params, (), (), 1, xp=jnp, what=what)
    return jnp.asarray(c(c.leaves, theta), jnp.float64).reshape(())


def _checkpointed_scan(step, x0, xs, length: int):
    """`lax.scan(step, x0, xs)` for the final carry only, with sqrt
    checkpointing: reverse mode stores O(sqrt(length)) carries."""
    if length == 0:
        return x0
    block = max(1, int(math.isqrt(length)))
    nb = -(-length // block)
    pad = nb * block - length
    if xs is None:
        xs = jnp.zeros((length,))
    valid = jnp.concatenate([jnp.ones(length, bool), jnp.zeros(pad, bool)])
    xs = jnp.concatenate([xs, jnp.zeros((pad,) + xs.shape[1:], xs.dtype)])
    xs = xs.reshape((nb, block) + xs.shape[1:])
    valid = valid.reshape(nb, block)

    @jax.checkpoint
    def inner(x, blk):
        def one(x, item):
            a, ok = item
            y = step(x, a)
            return jax.tree_util.tree_map(lambda u, v: jnp.where(ok, u, v), y, x), None

        x, _ = lax.scan(one, x, blk)
        return x, None

    x, _ = lax.scan(inner, x0, (xs, valid))
    return x


class BoundedSolves:
    """The bounded schemes of `jaxmc.diff.Problem` (a mixin)."""

    # ------------------------------------------------------------ bounded

    def _bounded(self, phi, psi, k, opt):
        no = self.graph(graph.prob0 if not self.is_mdp else graph.prob0A, phi, psi)
        maybe = phi & ~psi & ~no
        tag = self._put(
            f"bnd{len(self.host)}",
            {
                "maybe": maybe,
                "psi": psi.astype(np.float64),
                "row": self.row.astype(np.int32),
                "col": self.col.astype(np.int32),
            },
        )
        nc = self.model.num_choices

        def plan(arrays, theta):
            h = arrays[tag]
            P, _ = self._probs(arrays, theta)

            def step(x, _):
                q = jax.ops.segment_sum(
                    P * x[h["col"]], h["row"], num_segments=nc, indices_are_sorted=True
                )
                v = self._group(arrays, q, opt)
                return jnp.where(h["maybe"], v, h["psi"])

            return _checkpointed_scan(step, h["psi"], None, k)

        return plan

    def _steps(self, first, k, opt, active=None):
        """`k` steps `x <- opt(P x)` from `first(arrays, theta)`, kept at 0
        outside `active` (a mask; None: everywhere)."""
        tag = self._put(
            f"steps{len(self.host)}",
            {
                "active": np.ones(self.n, bool) if active is None else active,
                "row": self.row.astype(np.int32),
                "col": self.col.astype(np.int32),
            },
        )
        nc = self.model.num_choices

        def plan(arrays, theta):
            h = arrays[tag]
            P, _ = self._probs(arrays, theta)

            def step(x, _):
                q = jax.ops.segment_sum(
                    P * x[h["col"]], h["row"], num_segments=nc, indices_are_sorted=True
                )
                return jnp.where(h["active"], self._group(arrays, q, opt), 0.0)

            return _checkpointed_scan(step, first(arrays, theta), None, k)

        return plan

    def _ctmc_bounded(self, phi, psi, high):
        """`φ U<=t ψ` on a CTMC; `high` (t) a number or an expression of the
        parameters."""
        no = self.graph(graph.prob0, phi, psi)
        maybe = phi & ~psi & ~no
        km = np.flatnonzero(maybe[self.soe])
        tag = self._put(
            f"ctmc{len(self.host)}",
            {
                "km": km.astype(np.int32),
                "rows": self.soe[km].astype(np.int32),
                "cols": self.col[km].astype(np.int32),
                "psi": psi.astype(np.float64),
            },
        )
        n = self.n
        # Static number of Poisson terms, from the build point with margin.
        val0 = self.model.val
        e0 = np.bincount(self.soe[km], weights=val0[km], minlength=n)
        if isinstance(high, ast.Node):

            def time(theta):
                return evaluate_scalar(high, self.params, theta, what="the time bound")

        else:
            t_fixed = float(high)

            def time(theta):
                return jnp.asarray(t_fixed, jnp.float64)

        t0 = float(np.asarray(time(self.build_params)))
        lam0 = 1.02 * max(float(e0.max(initial=0.0)), 1e-300) * t0
        self.statics["cap"] = 1.5 * lam0
        self.statics["K"] = _poisson_terms(1.5 * lam0)

        def lam_fn(arrays, theta):
            h = arrays[tag]
            R = self.tv(arrays["tv"], theta)[h["km"]]
            E = jax.ops.segment_sum(
                R, h["rows"], num_segments=n, indices_are_sorted=True
            )
            t = time(theta)
            return 1.02 * jnp.max(E, initial=0.0) * t

        self.statics["lam_fn"] = lam_fn

        def plan(arrays, theta):
            h = arrays[tag]
            val = self.tv(arrays["tv"], theta)
            R = val[h["km"]]
            E = jax.ops.segment_sum(
                R, h["rows"], num_segments=n, indices_are_sorted=True
            )
            q = lax.stop_gradient(1.02 * jnp.maximum(jnp.max(E), 1e-300))
            t = time(theta)
            lam = q * t
            K = self.statics["K"]
            i = jnp.arange(K + 1, dtype=jnp.float64)
            logw = (
                -lam
                + i * jnp.log(jnp.maximum(lam, 1e-300))
                - jax.scipy.special.gammaln(i + 1)
            )
            w = jnp.where(lam > 0, jnp.exp(logw), (i == 0).astype(jnp.float64))

            def step(c, wi):
                v, acc = c
                acc = acc + wi * v
                v = v + (spmv(R, h["rows"], h["cols"], n, v) - E * v) / q
                return (v, acc)

            _, acc = _checkpointed_scan(step, (h["psi"], jnp.zeros(n)), w, K + 1)
            return acc

        return plan


def _poisson_terms(lam: float) -> int:
    """Terms `0..K` of the Poisson(λ) sum for a right tail below ~1e-14,
    rounded up to a multiple of 32 (so nearby λ share one compilation)."""
    k = lam + 12.0 * math.sqrt(max(lam, 1.0)) + 40.0
    return int(32 * math.ceil(k / 32))
