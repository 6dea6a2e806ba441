"""Reward properties of a `Problem`: the reward vectors as functions of
the parameters, and reachability, total, cumulative and instantaneous
rewards (CTMC `C<=t`/`I=t` by uniformisation, `jaxmc.diff._bounded`;
long-run rewards: `jaxmc.diff._steady`)."""

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
        n = self.n
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
                disabled = self._leaving(inf) & maybe[self.coc]
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

    def _ctmc_instant(self, ridx, t):
        """`R [I=t]` (CTMC): the state rewards expected at time `t` (as
        PRISM, transition rewards do not count), `sum_i w_i P^i r` on the
        uniformised chain."""
        sr = StateRewards(self.checked, self.model, ridx)
        key = self._put(f"inst{len(self.host)}", sr.arrays)
        return self._uniformised(
            np.zeros(self.n, bool), lambda a, th: sr(a[key], th), t
        )

    def _ctmc_cumulative(self, ridx, t):
        """`R [C<=t]` (CTMC): state rewards are rates, and a transition
        reward is earned per jump, at rate `sum_j R(s, j) trans(s, j)`;
        their sum with PRISM's cumulative weights on the uniformised
        chain."""
        sr = StateRewards(self.checked, self.model, ridx)
        has_t = sr.transition is not None
        key = self._put(
            f"cumr{len(self.host)}",
            {"s": sr.arrays, "t": sr.transition if has_t else np.zeros(0)},
        )
        n = self.n

        def rates(a, theta):
            r = sr(a[key]["s"], theta)
            if has_t:
                val = self.tv(a["tv"], theta)
                r = r + jax.ops.segment_sum(
                    val * a[key]["t"], a["soe"], num_segments=n, indices_are_sorted=True
                )
            return r

        return self._uniformised(np.zeros(n, bool), rates, t, cumulative=True)

    def _total_reward(self, ridx, opt):
        """`R [C]`, as `jaxmc.numerics.total_rewards` decides it: infinite
        where a BSCC (DTMC; CTMC on the embedded chain) or end component
        (MDP) with positive reward is reached with positive probability
        (max: under some scheduler) or cannot be avoided (min); else a
        reachability reward of the states that can still earn some.
        Which rewards are positive is decided at the build point (a
        structure, like the graph)."""
        n = self.n
        true = np.ones(n, bool)
        zeros = np.zeros(n)
        rf = self._reward_fn(ridx, self.is_mdp)
        r0 = self._at_build(lambda a, t: rf(a, t, *self._probs(a, t)))
        if not self.is_mdp:
            labels, count = self.graph(graph.bsccs)
            inb = labels >= 0
            pos = np.zeros(count + 1, dtype=bool)
            np.logical_or.at(pos, np.where(inb, labels, count), r0 > 0)
            inf = ~self.graph(graph.prob0, true, inb & pos[labels])
            inner = self._dtmc_linear(~inf & ~inb, zeros, rf)
        elif opt == "max":
            labels, count, inside = self.graph(graph.mecs)
            pos = np.zeros(count + 1, dtype=bool)
            np.logical_or.at(pos, np.where(inside, labels[self.coc], count), r0 > 0)
            inf = ~self.graph(graph.prob0A, true, (labels >= 0) & pos[labels])
            # States that can reach no positive reward are worth 0 (left out,
            # so that the optimal scheduler's system is nonsingular).
            earns = np.bincount(self.coc, weights=r0 > 0, minlength=n) > 0
            zero = self.graph(graph.prob0A, true, earns)
            inner = self._mdp(~inf & ~zero, zeros, rf, None, opt)
        else:
            labels, _, _ = self.graph(graph.mecs, None, r0 == 0)
            zero = labels >= 0
            inf = ~self.graph(graph.prob1E, true, zero)
            maybe = ~inf & ~zero
            disabled = self._leaving(inf) & maybe[self.coc]
            inner = self._mdp(maybe, zeros, rf, disabled, opt)
        key = self._put(f"inf{len(self.host)}", inf)
        return lambda a, t: jnp.where(a[key], jnp.inf, inner(a, t))

    def _leaving(self, bad) -> np.ndarray:
        """The choices with a positive-probability successor in `bad`."""
        keep = self.model.val > 0
        hits = self.row[keep][bad[self.col[keep]]]
        return np.bincount(hits, minlength=self.model.num_choices) > 0

    def _at_build(self, fn) -> np.ndarray:
        """`fn(arrays, theta)` at the build point, on the host arrays made
        so far (to decide structure from values: which rewards are
        positive)."""
        arrays = jax.tree_util.tree_map(jnp.asarray, self.host)
        theta = {k: jnp.asarray(v, jnp.float64) for k, v in self.build_params.items()}
        return np.asarray(fn(arrays, theta))
