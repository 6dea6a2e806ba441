"""Steady-state properties of a `Problem`: stationary distributions of
the BSCCs by power iteration, made differentiable through the stationary
equations (`solvers.implicit_gmres`), combined with the absorption
probabilities into the BSCCs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..kernels.coo import coo_spmv_t as spmv_t
from ..layout.sweep import Pattern
from ..numerics import graph
from ..solvers import fixed_point_loop, implicit_gmres
from ._values import StateRewards


class SteadySolves:
    """The steady-state scheme of `jaxmc.diff.Problem` (a mixin)."""

    # ------------------------------------------------------------ steady state

    def _steady_reward(self, ridx):
        sr = StateRewards(self.checked, self.model, ridx)
        key = self._put(
            f"lr{ridx}",
            {
                "s": sr.arrays,
                "t": sr.transition if sr.transition is not None else np.zeros(0),
            },
        )
        has_t = sr.transition is not None
        n = self.n

        def f(arrays, theta, P, val):
            h = arrays[key]
            r = sr(h["s"], theta)
            if has_t:  # DTMC: expected one-step reward; CTMC: rate (val = rates)
                w = val if self.is_ctmc else P
                r = r + jax.ops.segment_sum(
                    w * h["t"], arrays["soe"], num_segments=n, indices_are_sorted=True
                )
            return r

        return self._steady(f)

    def _steady(self, f):
        """`sum_B P(reach B) sum_{s in B} pi_B(s) f(s)` at every state."""
        n = self.n
        labels, count = self.graph(graph.bsccs)
        inb = labels >= 0
        soe, col = self.soe, self.col
        kin = np.flatnonzero(inb[soe])  # entries inside BSCCs (rows in a BSCC)
        sizes = np.bincount(labels[inb], minlength=count)
        pi0 = np.zeros(n)
        pi0[inb] = 1.0 / sizes[labels[inb]]
        rep = np.zeros(n, bool)
        first = np.full(count, -1)
        idx = np.flatnonzero(inb)
        first_idx = np.unique(labels[idx], return_index=True)[1]
        first[labels[idx[first_idx]]] = idx[first_idx]
        rep[first[first >= 0]] = True
        pat = Pattern(soe[kin], col[kin], (n, n), self.lex)
        lab = np.where(inb, labels, count)
        tag = self._put(
            f"ss{len(self.host)}",
            {
                "kin": kin.astype(np.int32),
                "pat": pat.arrays,
                "pi0": pi0,
                "inb": inb,
                "rep": rep,
                "lab": lab.astype(np.int32),
            },
        )
        # Absorption into the BSCCs: x = P x + b on transient states.
        trans = ~inb
        absorb = self._dtmc_linear_general(trans)
        opts = self.opts
        ctmc = self.is_ctmc

        def plan(arrays, theta):
            h = arrays[tag]
            P, val = self._probs(arrays, theta)
            W = (val if ctmc else P)[h["kin"]]
            rows = h["pat"]["rows"]
            E = jax.ops.segment_sum(W, rows, num_segments=n, indices_are_sorted=True)

            def flow(pi):  # pi (D - W)  as a column vector: D pi - W^T pi
                return (E if ctmc else h["inb"].astype(jnp.float64)) * pi - spmv_t(
                    W, h["pat"], n, pi
                )

            q = (
                lax.stop_gradient(1.02 * jnp.maximum(jnp.max(E), 1e-300))
                if ctmc
                else 2.0
            )

            def power(pi):
                return pi - flow(pi) / q

            pw = fixed_point_loop(
                lambda p: power(lax.stop_gradient(p)),
                h["pi0"],
                jnp.asarray(opts.epsilon, jnp.float64),
                opts.max_iters,
            )
            pi_p = lax.stop_gradient(self.log.record("power", pw))
            pi_p = jnp.where(pw.status == 0, pi_p, jnp.nan)

            def matvec(pi):
                y = jnp.where(h["inb"], flow(pi), pi)
                mass = jax.ops.segment_sum(pi, h["lab"], num_segments=count + 1)
                return jnp.where(h["rep"], mass[h["lab"]], y)

            rhs = h["rep"].astype(jnp.float64) - matvec(pi_p)
            corr = implicit_gmres(matvec, rhs, max(opts.epsilon, 1e-14))
            pi = pi_p + self.log.record("gmres", corr)
            g_b = jax.ops.segment_sum(
                jnp.where(h["inb"], pi * f(arrays, theta, P, val), 0.0),
                h["lab"],
                num_segments=count + 1,
            )
            g = jnp.where(h["inb"], g_b[h["lab"]], 0.0)
            return absorb(arrays, theta, g)

        return plan
