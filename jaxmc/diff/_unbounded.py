"""Unbounded reachability and reward solves of a `Problem`: one linear
solve `(I - A) x = b` differentiated implicitly (DTMC, and CTMC on the
embedded DTMC), and for MDPs value iteration, then the optimal
scheduler's linear system, differentiated implicitly."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._arrays import union1d
from ..kernels.coo import coo_spmv as spmv
from ..layout.sweep import Pattern
from ..solvers import fixed_point_loop, linear_solve, method_name


class UnboundedSolves:
    """The linear-system schemes of `jaxmc.diff.Problem` (a mixin)."""

    # ------------------------------------------------------------ DTMC linear

    def _dtmc_linear(self, maybe, fixed, reward):
        """`x = P x + r` on `maybe`, `x = fixed` elsewhere (`reward(arrays,
        theta, P, val) -> r[n]` or None)."""
        soe, col = self.soe, self.col
        km = np.flatnonzero(maybe[soe] & maybe[col])
        kb = np.flatnonzero(maybe[soe] & ~maybe[col] & (fixed[col] != 0))
        pat = Pattern(soe[km], col[km], (self.n, self.n), self.lex)
        tag = f"lin{len(self.host)}"
        self.host[tag] = {
            "pat": pat.arrays,
            "classes": self._value_classes(km),
            "km": km.astype(np.int32),
            "kb": kb.astype(np.int32),
            "kb_rows": soe[kb].astype(np.int32),
            "kb_fixed": fixed[col[kb]],
            "kb_bound": np.maximum(
                _row_bound(soe[kb], fixed[col[kb]], self.n),
                getattr(reward, "bound", 0.0),
            ),
            "fixed": np.where(maybe, 0.0, fixed),
            "maybe": maybe,
        }
        if reward is None:
            # b is zero but on the fixed states and next to them
            nz = union1d(np.flatnonzero(np.where(maybe, 0.0, fixed)), soe[kb])
            if nz.size <= self.n // 4:
                self.host[tag]["rhs_rows"] = nz.astype(np.int32)
        weigh = reward is None or not getattr(reward, "parametric", True)
        n, opts = self.n, self.opts

        def plan(arrays, theta):
            h = arrays[tag]
            P, val = self._probs(arrays, theta)
            b = h["fixed"] + jax.ops.segment_sum(
                P[h["kb"]] * h["kb_fixed"],
                h["kb_rows"],
                num_segments=n,
                indices_are_sorted=True,
            )
            if reward is not None:
                b = b + jnp.where(h["maybe"], reward(arrays, theta, P, val), 0.0)
            rel = {"b_scale": jnp.maximum(h["kb_bound"], jnp.abs(b))} if weigh else None
            sol = linear_solve(
                P[h["km"]],
                pat,
                h["pat"],
                b,
                opts,
                classes=h["classes"],
                relevance=rel,
                rhs_rows=h.get("rhs_rows") if weigh else None,
            )
            return self.log.record(method_name(opts.omega), sol)

        return plan

    def _value_classes(self, km: np.ndarray) -> dict:
        """Entries of the linear system `A = P[km]` whose Jacobi weights
        `A[e] / (1 - A_ii)` are the same function of the parameters, found
        numerically at three random points near the build point: `{"cls":
        [nnz] class of each entry, "rep": [C] one entry per class}`, or `{}`
        when there are too many classes to gain anything. A batched solve
        (`jaxmc.sweep`) then reads a `[C, k]` table per sweep instead of
        `[nnz, k]` values, after checking at the actual points that the
        classes hold (`jaxmc.solvers.adjoint`); a wrong guess costs speed, never
        accuracy."""
        if not self.names or km.size == 0:
            return {}
        rng = np.random.default_rng(12345)
        arrays = jax.tree_util.tree_map(
            jnp.asarray, {"tv": self.host["tv"], "soe": self.host["soe"]}
        )
        rows, cols = self.soe[km], self.col[km]
        diag = rows == cols
        keys = []
        for _ in range(3):
            theta = {
                k: jnp.asarray(v * (1.0 + 0.2 * (rng.random() - 0.5)))
                for k, v in self.build_params.items()
            }
            with np.errstate(all="ignore"):
                a = np.asarray(self._probs(arrays, theta)[0])[km]
                dg = 1.0 - np.bincount(rows[diag], weights=a[diag], minlength=self.n)
                keys.append(np.where(diag, 0.0, a) / dg[rows])
        keys = np.stack(keys, axis=1)
        if not np.all(np.isfinite(keys)):
            return {}
        _, rep, cls = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        if rep.size > max(256, km.size // 16):
            return {}
        return {"cls": cls.reshape(-1).astype(np.int32), "rep": rep.astype(np.int32)}

    # ------------------------------------------------------------ MDP

    def _mdp(self, maybe, fixed, choice_reward, disabled, opt):
        """Optimal values of `x_s = opt_c (r_c + sum P x)` on `maybe`."""
        m = self.model
        nc = m.num_choices
        row, col, coc = self.row, self.col, self.coc
        km = np.flatnonzero(maybe[col] & maybe[coc[row]])
        kb = np.flatnonzero(maybe[coc[row]] & ~maybe[col] & (fixed[col] != 0))
        st_rows = coc[row[km]]
        pat = Pattern(st_rows, col[km], (self.n, self.n), self.lex)
        if disabled is None:
            disabled = np.zeros(nc, bool)
        tag = f"mdp{len(self.host)}"
        self.host.setdefault("coc", coc.astype(np.int32))
        self.host[tag] = {
            "pat": pat.arrays,
            "km": km.astype(np.int32),
            "km_choice": row[km].astype(np.int32),
            "kb": kb.astype(np.int32),
            "kb_choice": row[kb].astype(np.int32),
            "kb_fixed": fixed[col[kb]],
            "kb_bound": np.maximum(
                _row_bound(coc[row[kb]], fixed[col[kb]], self.n),
                getattr(choice_reward, "bound", 0.0),
            ),
            "fixed": np.where(maybe, 0.0, fixed),
            "maybe": maybe,
            "cmaybe": maybe[coc] & ~disabled,
            "disabled": disabled,
            "row": row.astype(np.int32),
            "col": col.astype(np.int32),
        }
        n, opts = self.n, self.opts
        weigh = choice_reward is None or not getattr(choice_reward, "parametric", True)
        big = jnp.inf if opt == "min" else -jnp.inf
        red = jax.ops.segment_max if opt == "max" else jax.ops.segment_min

        def plan(arrays, theta):
            h = arrays[tag]
            P, val = self._probs(arrays, theta)
            b = jax.ops.segment_sum(
                P[h["kb"]] * h["kb_fixed"],
                h["kb_choice"],
                num_segments=nc,
                indices_are_sorted=True,
            )
            if choice_reward is not None:
                b = b + choice_reward(arrays, theta, P, val)
            b = jnp.where(h["disabled"], big, b)
            A = P[h["km"]]
            coc_ = arrays["coc"]

            def q_of(x):
                return b + jax.ops.segment_sum(
                    A * x[h["pat"]["cols"]],
                    h["km_choice"],
                    num_segments=nc,
                    indices_are_sorted=True,
                )

            def bellman(x):
                v = red(q_of(x), coc_, num_segments=n, indices_are_sorted=True)
                return jnp.where(h["maybe"], v, h["fixed"])

            # Value iteration (forward only: never differentiated).
            vi = fixed_point_loop(
                lambda x: bellman(lax.stop_gradient(x)),
                lax.stop_gradient(h["fixed"]),
                jnp.asarray(opts.epsilon, jnp.float64),
                opts.max_iters,
            )
            x_vi = lax.stop_gradient(self.log.record("value_iteration", vi))
            x_vi = jnp.where(vi.status == 0, x_vi, jnp.nan)
            sigma = lax.stop_gradient(self._scheduler(h, q_of(x_vi), x_vi, opt))
            # The chosen scheduler's linear system, solved for a correction
            # to x_vi so that gradients are those of the policy's value.
            chosen = sigma[coc_] == jnp.arange(nc, dtype=jnp.int32)
            a_sig = jnp.where(chosen[h["km_choice"]], A, 0.0)
            b_sig = jax.ops.segment_sum(
                jnp.where(chosen & h["cmaybe"], b, 0.0),
                coc_,
                num_segments=n,
                indices_are_sorted=True,
            )
            c = jnp.where(h["maybe"], b_sig, h["fixed"])
            r = c + spmv(a_sig, h["pat"]["rows"], h["pat"]["cols"], n, x_vi) - x_vi
            r = jnp.where(h["maybe"], r, 0.0)
            rel = (
                {"b_scale": jnp.maximum(h["kb_bound"], jnp.abs(c)), "offset": x_vi}
                if weigh
                else None
            )
            sol = linear_solve(a_sig, pat, h["pat"], r, opts, relevance=rel)
            return x_vi + self.log.record(method_name(opts.omega), sol)

        return plan

    def _scheduler(self, h, q, x, opt):
        """An optimal choice per state, preferring progress towards the
        non-maybe states among (near-)optimal choices, so that the induced
        chain leaves the maybe states with probability 1."""
        n, nc = self.n, self.model.num_choices
        coc = self.host["coc"]
        coc_j = jnp.asarray(coc)
        tol = 1e-9 * jnp.maximum(1.0, jnp.abs(x))
        good = (jnp.abs(q - x[coc_j]) <= tol[coc_j]) & h["cmaybe"]
        cidx = jnp.arange(nc, dtype=jnp.int32)

        def body(c):
            reached, sigma, _ = c
            hit = (
                jax.ops.segment_max(
                    reached[h["col"]].astype(jnp.int32),
                    h["row"],
                    num_segments=nc,
                    indices_are_sorted=True,
                )
                > 0
            )
            cand = good & hit & ~reached[coc_j]
            best = jax.ops.segment_min(
                jnp.where(cand, cidx, nc),
                coc_j,
                num_segments=n,
                indices_are_sorted=True,
            )
            new = best < nc
            return (
                reached | new,
                jnp.where(new, best, sigma).astype(jnp.int32),
                jnp.any(new),
            )

        reached0 = ~h["maybe"]
        sigma0 = jnp.full(n, -1, jnp.int32)
        reached, sigma, _ = lax.while_loop(
            lambda c: c[2], body, (reached0, sigma0, jnp.asarray(True))
        )
        # Fallback (should not happen): the first optimal choice.
        first = jax.ops.segment_min(
            jnp.where(good, cidx, nc), coc_j, num_segments=n, indices_are_sorted=True
        )
        return jnp.where(sigma >= 0, sigma, jnp.minimum(first, nc - 1)).astype(
            jnp.int32
        )

    def _dtmc_linear_general(self, maybe):
        """`(arrays, theta, fixed) -> x` with `x = P x` on `maybe` and
        `x = fixed` elsewhere (fixed is traced)."""
        soe, col, n = self.soe, self.col, self.n
        km = np.flatnonzero(maybe[soe] & maybe[col])
        kb = np.flatnonzero(maybe[soe] & ~maybe[col])
        pat = Pattern(soe[km], col[km], (n, n), self.lex)
        tag = self._put(
            f"abs{len(self.host)}",
            {
                "pat": pat.arrays,
                "km": km.astype(np.int32),
                "kb": kb.astype(np.int32),
                "kb_rows": soe[kb].astype(np.int32),
                "kb_cols": col[kb].astype(np.int32),
                "maybe": maybe,
            },
        )
        opts = self.opts

        def solve(arrays, theta, fixed):
            h = arrays[tag]
            P, _ = self._probs(arrays, theta)
            b = jnp.where(h["maybe"], 0.0, fixed) + jax.ops.segment_sum(
                P[h["kb"]] * fixed[h["kb_cols"]],
                h["kb_rows"],
                num_segments=n,
                indices_are_sorted=True,
            )
            if not maybe.any():
                return b
            sol = linear_solve(P[h["km"]], pat, h["pat"], b, opts)
            return self.log.record(method_name(opts.omega), sol)

        return solve


def _row_bound(rows: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """`[n]`: the largest `|values|` per row (0 for rows without any): a
    bound on the scale of a right-hand side made of these values times
    probabilities, and so of its derivative (`linear_solve`'s
    `relevance`)."""
    out = np.zeros(n)
    np.maximum.at(out, rows, np.abs(values))
    return out
