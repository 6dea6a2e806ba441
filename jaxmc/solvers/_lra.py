"""Optimal long-run average reward (gain) of each end component of an MDP,
by relative value iteration with certified bounds.

Inside an end component every state reaches every other one, so the optimal
gain `g` is one number per component. Value iteration
`x_{k+1}(s) = opt_c [ r_c + sum_t P(c, t) x_k(t) ]` brackets it: with
`d = x_{k+1} - x_k`, `min_s d(s) <= g <= max_s d(s)` over the component's
states, for `max` and `min` alike (Puterman, Theorem 8.5.5 and its dual).
The span of `d` tends to 0 when every policy is aperiodic, which the
aperiodicity transformation `P' = tau P + (1 - tau) I` ensures without
changing any policy's stationary distributions, hence the gains (the
rewards are kept). The iterate is renormalised to 0 at one state per
component each step (relative value iteration), so it stays bounded.

All components iterate together in one `lax.while_loop`; each stops
counting when its span meets its tolerance.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..layout.device_pad import bucket, pad_tail
from ._results import RUNNING, Status


#: Weight of `P` in the aperiodicity transformation (the rest stays put).
TAU = 0.7


def lra_value_iteration(
    state_of_choice: np.ndarray,
    entry_choice: np.ndarray,
    entry_target: np.ndarray,
    entry_prob: np.ndarray,
    choice_reward: np.ndarray,
    component: np.ndarray,
    count: int,
    opt: str,
    *,
    epsilon: float,
    relative: bool,
    max_iters: int,
):
    """The gain of each of `count` end components, within bounds.

    The system is the components' states (`0..n-1`, `component[s]` in
    `0..count-1`) with only the choices that stay in their component:
    `state_of_choice[c]` (non-decreasing), the entries `(entry_choice`
    (non-decreasing)`, entry_target, entry_prob)`, `choice_reward[c]` the
    expected one-step reward.

    A component stops when half its bracket's width is at most `epsilon`
    (times the midpoint's magnitude if `relative`, with a floor of
    `epsilon * 1e-6` times the largest reward, so that a gain of exactly
    0 stops too).

    **Returns:** `(lower, upper, iterations, status)`: the bounds of each
    gain (float64 [count]), the sweeps run and a `Status` (MAX_ITERS if some
    component did not meet its tolerance; the bounds hold anyway).
    """
    n, m, e = len(component), len(state_of_choice), len(entry_choice)
    reward = np.asarray(choice_reward, dtype=np.float64)
    scale = float(np.max(np.abs(reward), initial=0.0))
    # Sizes padded up to buckets, so that similar systems share one
    # compilation: the padded states form one more component (`count`), a
    # choice each (the last state takes the rest), rewards 0, no entries
    # (padded entries have probability 0): its gain is exactly 0. Padded
    # components are empty, their brackets void (met at once).
    N = bucket(n + 1)
    M = bucket(m + N - n)
    E, K = bucket(e), bucket(count + 1)
    soc = np.concatenate(
        [state_of_choice, np.arange(n, N), np.full(M - m - (N - n), N - 1)]
    )
    comp = pad_tail(np.asarray(component, np.int64), N, count)
    first = np.zeros(K, dtype=np.int64)
    first[: count + 1] = N
    np.minimum.at(first, comp, np.arange(N))
    lo, hi, it, status = _loop(
        jnp.asarray(soc, jnp.int32),
        jnp.asarray(pad_tail(np.asarray(entry_choice), E, M - 1), jnp.int32),
        jnp.asarray(pad_tail(np.asarray(entry_target), E, 0), jnp.int32),
        jnp.asarray(pad_tail(np.asarray(entry_prob, np.float64), E, 0.0)),
        jnp.asarray(pad_tail(reward, M, 0.0)),
        jnp.asarray(comp, jnp.int32),
        jnp.asarray(first, jnp.int32),
        jnp.float64(epsilon),
        jnp.float64(epsilon * 1e-6 * scale),
        jnp.int32(max_iters),
        n=N,
        m=M,
        count=K,
        maximise=opt == "max",
        relative=relative,
    )
    return (
        np.asarray(lo, np.float64)[:count],
        np.asarray(hi, np.float64)[:count],
        int(it),
        Status(int(status)),
    )


def gain_tolerance_met(lower, upper, epsilon, relative, reward_scale):
    """Whether each bracket `[lower, upper]` meets `lra_value_iteration`'s
    stopping rule (`reward_scale`: the largest reward magnitude)."""
    floor = epsilon * 1e-6 * reward_scale
    return _met(np.asarray(lower), np.asarray(upper), epsilon, relative, floor, np)


def _met(lo, hi, eps, relative, floor, xp):
    half = 0.5 * (hi - lo)
    tol = eps * xp.abs(0.5 * (hi + lo)) if relative else eps
    # (an empty component's bracket is void: upper -inf, lower inf)
    return (half <= 0) | (half <= xp.maximum(tol, floor))


@partial(jax.jit, static_argnames=("n", "m", "count", "maximise", "relative"))
def _loop(
    soc, ech, etg, epr, reward, comp, first, eps, floor, max_iters,
    *, n, m, count, maximise, relative,
):  # fmt: skip
    def best(q):
        if maximise:
            return jax.ops.segment_max(q, soc, num_segments=n, indices_are_sorted=True)
        return -jax.ops.segment_max(-q, soc, num_segments=n, indices_are_sorted=True)

    def sweep(x):
        spread = jax.ops.segment_sum(
            epr * x[etg], ech, num_segments=m, indices_are_sorted=True
        )
        q = reward + TAU * spread + (1.0 - TAU) * x[soc]
        y = best(q)
        d = y - x
        lo = -jax.ops.segment_max(-d, comp, num_segments=count)
        hi = jax.ops.segment_max(d, comp, num_segments=count)
        return y - y[first][comp], lo, hi

    def done(lo, hi):
        return _met(lo, hi, eps, relative, floor, jnp)

    def cond(state):
        return state[4] == RUNNING

    def body(state):
        x, lo, hi, k, _ = state
        y, new_lo, new_hi = sweep(x)
        # a component's bounds only tighten (each pair is valid)
        lo, hi = jnp.maximum(lo, new_lo), jnp.minimum(hi, new_hi)
        k = k + 1
        status = jnp.where(
            jnp.all(done(lo, hi)),
            int(Status.CONVERGED),
            jnp.where(k >= max_iters, int(Status.MAX_ITERS), RUNNING),
        )
        status = jnp.where(jnp.all(jnp.isfinite(y)), status, int(Status.NONFINITE))
        return y, lo, hi, k, status.astype(jnp.int32)

    x0 = jnp.zeros(n, jnp.float64)
    inf = jnp.full(count, jnp.inf)
    state = (x0, -inf, inf, jnp.int32(0), jnp.int32(RUNNING))
    _, lo, hi, k, status = jax.lax.while_loop(cond, body, state)
    return lo, hi, k, status
