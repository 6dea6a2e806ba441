"""Reward properties of a `Problem`: the reward vectors as functions of
the parameters, and reachability, cumulative and instantaneous rewards
(long-run rewards: `jaxmc.diff._steady`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..numerics import graph
from ._bounded import _checkpointed_scan
from ._unbounded import _row_bound
from ._values import StateRewards


class RewardSolves:
    """The reward schemes of `jaxmc.diff.Problem` (a mixin)."""

    # ------------------------------------------------------------ rewards

    def _reward_fn(self, ridx, per_choice: bool):
        """`(arrays, theta, P, val) -> r` per state (DTMC/CTMC; a CTMC's
        state rewards are divided by the exit rate, as on the embedded
        chain) or per choice (MDP)."""
        sr = StateRewards(self.checked, self.model, ridx)
        key = self._put(
            f"rew{ridx}",
            {
                "s": sr.arrays,
                "t": sr.transition if sr.transition is not None else np.zeros(0),
                "row": self.row.astype(np.int32),
            },
        )
        n, nc = self.n, self.model.num_choices
        has_t = sr.transition is not None

        def r(arrays, theta, P, val):
            h = arrays[key]
            st = sr(h["s"], theta)
            if self.is_ctmc:
                E = jax.ops.segment_sum(
                    val, arrays["soe"], num_segments=n, indices_are_sorted=True
                )
                st = jnp.where(E > 0, st / jnp.where(E > 0, E, 1.0), 0.0)
            if per_choice:
                st = st[arrays["coc"]]
            if has_t:
                st = st + jax.ops.segment_sum(
                    P * h["t"],
                    h["row"] if per_choice else arrays["soe"],
                    num_segments=nc if per_choice else n,
                    indices_are_sorted=True,
                )
            return st

        # For the gradient's adjoint stop rule (`linear_solve`'s
        # `relevance`): rewards whose values depend on parameters have no
        # bound on their derivative from their values (a reward `p` at
        # p = 0), so they turn the weighting off; transition rewards are
        # constants times probabilities, bounded per state by the largest
        # `|t|` of its transitions.
        r.parametric = sr.parametric
        r.bound = _row_bound(self.soe, sr.transition, n) if has_t else np.zeros(n)
        return r

    def _reach_reward(self, ridx, target, opt):
        """`R [F target]`: infinite where the target is reached with
        probability below 1 (below 1 for some scheduler, with `max`)."""
        m, n = self.model, self.n
        true = np.ones(n, bool)
        if self.is_mdp:
            self.host.setdefault("coc", self.coc.astype(np.int32))
            finite = self.graph(
                graph.prob1A if opt == "max" else graph.prob1E, true, target
            )
            inf = ~finite
            maybe = ~target & finite
            disabled = None
            if opt == "min":
                keep = m.val > 0
                leaves = (
                    np.bincount(
                        self.row[keep][inf[self.col[keep]]], minlength=m.num_choices
                    )
                    > 0
                )
                disabled = leaves & maybe[self.coc]
            inner = self._mdp(
                maybe, np.zeros(n), self._reward_fn(ridx, True), disabled, opt
            )
        else:
            finite = self.graph(graph.prob1, true, target)
            inf = ~finite
            maybe = ~target & finite
            inner = self._dtmc_linear(maybe, np.zeros(n), self._reward_fn(ridx, False))
        key = self._put(f"inf{len(self.host)}", inf)
        return lambda a, t: jnp.where(a[key], jnp.inf, inner(a, t))

    def _cumulative(self, ridx, k, opt):
        """`R [C<=k]` (DTMC, MDP): `k` steps of `x <- opt(r + P x)`."""
        n, nc = self.n, self.model.num_choices
        rf = self._reward_fn(ridx, self.is_mdp)
        tag = self._put(
            f"cum{len(self.host)}",
            {"row": self.row.astype(np.int32), "col": self.col.astype(np.int32)},
        )

        def plan(arrays, theta):
            h = arrays[tag]
            P, val = self._probs(arrays, theta)
            r = rf(arrays, theta, P, val)

            def step(x, _):
                q = r + jax.ops.segment_sum(
                    P * x[h["col"]], h["row"], num_segments=nc, indices_are_sorted=True
                )
                return self._group(arrays, q, opt)

            return _checkpointed_scan(step, jnp.zeros(n), None, max(k, 0))

        return plan

    def _instant(self, ridx, k, opt):
        """`R [I=k]` (DTMC, MDP): the state rewards after `k` steps."""
        sr = StateRewards(self.checked, self.model, ridx)
        key = self._put(f"inst{len(self.host)}", sr.arrays)
        return self._steps(lambda a, t: sr(a[key], t), k, opt)
