"""Upper bounds on expected reachability rewards, the start vector from
above that interval iteration needs (for probabilities it is simply 1).

The construction of Baier, Klein, Leuschner, Parker and Wunderlich
("Ensuring the reliability of your model checker: interval iteration for
Markov decision processes", CAV 2017), in its layered form:

- exit states (those not iterated on: the target, and any state of known
  value) get `d = 1`;
- a maybe state `s` joins the next layer once its choices reach earlier
  layers: for `max` (and DTMCs) *every* choice must have a positive
  probability into earlier layers, for `min` *some* enabled choice (which
  is then fixed as `s`'s choice); `d_s` is the least (max) or largest (min)
  over those choices of `sum_{t earlier} P(c, t) d_t`.

By induction `d_s` is a lower bound on the probability of reaching an exit
from `s` through strictly earlier layers, i.e. without coming back to `s`
(under every scheduler for max; under the fixed choices for min). So each
state is visited at most `1/d_s` times in expectation and the expected
total reward from any state is at most `sum_s r_s / d_s + max exit value`,
where `r_s` is `s`'s largest choice reward (max) or that of its fixed
choice (min). For min this bounds the value of one proper scheduler, hence
the minimum.

Every maybe state joins some layer when the maybe states contain no end
component (max: `Pmin(F target) = 1`) or can all reach an exit with enabled
choices (min: `Pmax(F target) = 1`), which is what `jaxmc.numerics.rewards`
guarantees. The bound can be large (products of probabilities along the
layers); interval iteration only pays its logarithm in iterations.
"""

from __future__ import annotations

import numpy as np

from .._arrays import unique
from ..errors import ModelCheckingError


#: Relative margin added to the bound for floating-point rounding.
ROUNDING_MARGIN = 1e-9


def reward_upper_bound(
    soc: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    probs: np.ndarray,
    b: np.ndarray,
    maybe: np.ndarray,
    fixed: np.ndarray,
    opt: str | None,
    give_up: bool = False,
) -> float:
    """A scalar upper bound on the least solution of `x_s = opt_{c in s}
    (b_c + sum_t P(c,t) x_t)` on `maybe` (`x = fixed` elsewhere).

    **Arguments:**
    - `soc`: state of each choice [m] (sorted); `rows`, `cols`, `probs`:
      choice, successor and probability of each entry.
    - `b`: per-choice reward (nonnegative; `+inf` marks a disabled choice
      of a `min` problem).
    - `maybe`, `fixed`: the iterated states and the values of the others.
    - `opt`: `"min"`, `"max"` or `None` (a DTMC: every choice counts).
    - `give_up`: return inf as soon as the bound is (on long chains the
      layers' exit probabilities underflow, and the remaining layers, one
      loop trip each, would cost time for nothing), without checking that
      every state is reached.
    """
    n = len(maybe)
    m = len(soc)
    maybe = np.asarray(maybe, dtype=bool)
    b = np.asarray(b, dtype=np.float64)
    exits = ~maybe
    top = float(np.max(np.where(exits & np.isfinite(fixed), fixed, 0.0), initial=0.0))
    if not maybe.any():
        return top
    choose = opt == "min"
    enabled = np.isfinite(b) & maybe[soc]
    if (np.where(enabled, b, 0.0) < 0).any():
        raise ModelCheckingError("reward upper bounds need nonnegative rewards")
    keep = (probs > 0) & enabled[rows]
    r, c, p = rows[keep], cols[keep], probs[keep]
    # Entries grouped by successor, to find the choices a new layer feeds.
    order = np.argsort(c, kind="stable")
    r, c, p = r[order], c[order], p[order]
    in_ptr = np.concatenate([[0], np.cumsum(np.bincount(c, minlength=n))])
    choice_ptr = np.searchsorted(soc, np.arange(n + 1))  # soc is sorted

    d = np.where(exits, 1.0, 0.0)
    q = np.zeros(m)  # sum over processed successors of P(c, t) d_t
    hit = np.zeros(m, dtype=bool)  # choice has a processed successor
    per_state = np.bincount(soc[enabled], minlength=n)  # enabled choices
    pending = per_state.copy()  # enabled choices without processed successor
    done = exits.copy()
    total = 0.0
    frontier = np.nonzero(exits)[0]
    while frontier.size:
        starts, ends = in_ptr[frontier], in_ptr[frontier + 1]
        lens = ends - starts
        idx = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(lens.sum())
        ch = r[idx]
        np.add.at(q, ch, p[idx] * d[c[idx]])
        new_hits = unique(ch[~hit[ch]])
        hit[new_hits] = True
        np.subtract.at(pending, soc[new_hits], 1)
        cand = unique(soc[ch])
        cand = cand[~done[cand]]
        ready = cand[
            (pending[cand] == 0) if not choose else (pending[cand] < per_state[cand])
        ]
        if not ready.size:
            break
        # d and reward of each ready state from the current q (a state's value
        # is frozen when it joins: only strictly earlier layers count). The
        # ready states' choices are gathered through `choice_ptr`, so a layer
        # costs its own size, not the model's.
        starts, ends = choice_ptr[ready], choice_ptr[ready + 1]
        lens = ends - starts
        cs = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(lens.sum())
        loc = np.repeat(np.arange(ready.size), lens)  # position in `ready`
        sel = enabled[cs] & hit[cs]
        cs, loc = cs[sel], loc[sel]
        if choose:
            # the choice with the largest exit probability
            best = np.full(ready.size, -1.0)
            np.maximum.at(best, loc, q[cs])
            is_best = q[cs] == best[loc]
            rew = np.full(ready.size, np.inf)
            np.minimum.at(rew, loc[is_best], b[cs[is_best]])
            d[ready] = best
            total += float(np.sum(rew / best))
        else:
            low = np.full(ready.size, np.inf)
            np.minimum.at(low, loc, q[cs])
            rew = np.zeros(ready.size)
            np.maximum.at(rew, loc, b[cs])
            d[ready] = low
            total += float(np.sum(rew / low))
        done[ready] = True
        frontier = ready
        if give_up and not total < np.inf:
            return float(np.inf)
    if not done.all():
        raise ModelCheckingError(
            "no upper bound on the expected reward: some states cannot reach the "
            "target with probability 1"
        )
    # A relative margin over the rounding of the products and sums above.
    return (total + top) * (1.0 + ROUNDING_MARGIN)


def reward_upper_bound_model(M, probs, b, maybe, fixed, opt) -> float:
    """`reward_upper_bound` for a `jaxmc.layout.SparseModel` `M` whose entry
    probabilities are `probs`."""
    return reward_upper_bound(
        np.asarray(M.group_ids),
        np.asarray(M.csr.row_ids),
        np.asarray(M.csr.indices),
        np.asarray(probs, dtype=np.float64),
        b,
        maybe,
        fixed,
        opt,
    )
