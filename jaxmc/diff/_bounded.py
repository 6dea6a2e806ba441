"""Step- and time-bounded properties of a `Problem`: the `k` steps of a
DTMC/MDP as a checkpointed `lax.scan`, and a CTMC's time-bounded until
(`U<=t`, `U[t1,t2]`, `U>=t`) by uniformisation, differentiable in the rates
and in `t` (the uniformised sums of `I=t` and `C<=t`: `jaxmc.diff._rewards`)."""

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
from ..numerics.ctmc import UNIF_FACTOR
from ..numerics.foxglynn import fox_glynn


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

        def plan(arrays, theta):
            h = arrays[tag]
            P, _ = self._probs(arrays, theta)

            def step(x, _):
                v = self._bellman(arrays, h, P, x, opt)
                return jnp.where(h["maybe"], v, h["psi"])

            return _checkpointed_scan(step, h["psi"], None, k)

        return plan

    def _bellman(self, arrays, h, P, x, opt):
        """One step `opt(P x)` over the entries `h["row"]`, `h["col"]`."""
        q = jax.ops.segment_sum(
            P * x[h["col"]],
            h["row"],
            num_segments=self.model.num_choices,
            indices_are_sorted=True,
        )
        return self._group(arrays, q, opt)

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

        def plan(arrays, theta):
            h = arrays[tag]
            P, _ = self._probs(arrays, theta)

            def step(x, _):
                return jnp.where(h["active"], self._bellman(arrays, h, P, x, opt), 0.0)

            return _checkpointed_scan(step, first(arrays, theta), None, k)

        return plan

    # ----------------------------------------------------- uniformisation

    def _ctmc_bounded(self, phi, psi, high):
        """`φ U<=t ψ` on a CTMC; `high` (t) a number or an expression of the
        parameters: `sum_i w_i P^i ψ` on the uniformised chain in which the
        states outside `maybe` (ψ, and those that cannot reach ψ inside φ)
        are absorbing."""
        no = self.graph(graph.prob0, phi, psi)
        maybe = phi & ~psi & ~no
        x0 = jnp.asarray(psi.astype(np.float64))
        return self._uniformised(~maybe, lambda a, t: x0, high)

    def _ctmc_until(self, node):
        """`φ U[low, high] ψ` on a CTMC (PRISM's two phases): the values of
        `φ U<=high-low ψ` (of `φ U ψ` if `high` is None), kept in φ, then
        `low` time units of the chain in which ¬φ is absorbing at 0."""
        phi, psi = self._mask(node.phi), self._mask(node.psi)
        low, high = node.low, node.high
        if high is not None and not isinstance(high, ast.Node) and high < low:
            return lambda a, t: jnp.zeros(self.n)
        if high is None:
            first = self._until(phi, psi, None)
        elif low == 0:
            return self._ctmc_bounded(phi, psi, high)
        else:
            first = self._ctmc_bounded(phi, psi, float(high) - low)
        if low == 0:
            return first
        keep = jnp.asarray(phi)
        return self._uniformised(
            ~phi, lambda a, t: jnp.where(keep, first(a, t), 0.0), low
        )

    def _uniformised(self, absorbing, x0, time, cumulative=False):
        """`(arrays, theta) -> sum_i w_i P^i x0(arrays, theta)`, `P = I +
        Q/q` the uniformised chain with the `absorbing` states' rates zeroed
        (as `jaxmc.numerics.ctmc` does it, a step is `x + (R x - E x) / q`).

        - `time`: t, a number or an expression of the parameters.
        - `w_i`: the Poisson(q t) probabilities; with `cumulative`, PRISM's
          weights of `C<=t`, `(1 - F(i)) / q` (`F` the Poisson cdf), summed
          from the right so that they keep their relative accuracy.

        The rate `q = 1.02 max E` is derived from the rates at each point
        and held constant under differentiation (`stop_gradient`): the
        exact sum does not depend on `q`, so neither does its derivative.
        The weights are the Poisson probabilities computed in log space from
        i = 0 (differentiable in the rates and in t; Fox–Glynn's left
        window saves no step of the sum). The number of terms is static: it
        is Fox–Glynn's right end (`jaxmc.numerics.foxglynn`, accuracy
        `epsilon / 8` as PRISM) for 1.5 times the build point's `q t`,
        rounded up; `Problem.ensure` raises it for concrete points beyond
        that (under `jax.grad`/`vmap` with traced values it stays)."""
        km = np.flatnonzero(~absorbing[self.soe])
        tag = self._put(
            f"unif{len(self.host)}",
            {
                "km": km.astype(np.int32),
                "rows": self.soe[km].astype(np.int32),
                "cols": self.col[km].astype(np.int32),
            },
        )
        n = self.n
        if isinstance(time, ast.Node):

            def t_of(theta):
                return evaluate_scalar(time, self.params, theta, what="the time bound")

        else:
            t_fixed = float(time)

            def t_of(theta):
                return jnp.asarray(t_fixed, jnp.float64)

        def rate(arrays, theta):
            h = arrays[tag]
            R = self.tv(arrays["tv"], theta)[h["km"]]
            E = jax.ops.segment_sum(
                R, h["rows"], num_segments=n, indices_are_sorted=True
            )
            top = jnp.max(E, initial=0.0)
            return R, E, jnp.where(top > 0, UNIF_FACTOR * top, 1.0)

        def lam_fn(arrays, theta):
            return rate(arrays, theta)[2] * t_of(theta)

        e0 = np.bincount(self.soe[km], weights=self.model.val[km], minlength=n)
        lam0 = (
            UNIF_FACTOR
            * float(e0.max(initial=0.0))
            * float(np.asarray(t_of(self.build_params)))
        )
        eps = self.opts.epsilon / 8.0
        site = {"lam_fn": lam_fn, "eps": eps}
        site_terms(site, 1.5 * lam0)
        self.statics.setdefault("unif", []).append(site)

        def plan(arrays, theta):
            h = arrays[tag]
            R, E, q = rate(arrays, theta)
            q = lax.stop_gradient(q)
            lam = q * t_of(theta)
            K = site["K"]
            i = jnp.arange(K + 1, dtype=jnp.float64)
            logw = (
                -lam
                + i * jnp.log(jnp.maximum(lam, 1e-300))
                - jax.scipy.special.gammaln(i + 1)
            )
            w = jnp.where(lam > 0, jnp.exp(logw), (i == 0).astype(jnp.float64))
            if cumulative:  # 1 - F(i) = sum_{j > i} w_j
                w = (jnp.cumsum(w[::-1])[::-1] - w) / q

            def step(c, wi):
                v, acc = c
                acc = acc + wi * v
                v = v + (spmv(R, h["rows"], h["cols"], n, v) - E * v) / q
                return (v, acc)

            v0 = x0(arrays, theta)
            _, acc = _checkpointed_scan(step, (v0, jnp.zeros_like(v0)), w, K + 1)
            return acc

        return plan


def site_terms(site: dict, lam: float) -> None:
    """Size a uniformisation site for Poisson parameters up to `lam`: its
    `cap` and its number of terms `K` (Fox–Glynn's right end for `cap`,
    rounded up to a multiple of 32 so that nearby values share one
    compilation)."""
    cap = max(float(lam), 1.0)
    right = fox_glynn(cap, site["eps"])[1]
    site["cap"] = cap
    site["K"] = int(32 * math.ceil((right + 1) / 32))
