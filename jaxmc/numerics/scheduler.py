"""Optimal memoryless schedulers of MDPs for `Pmin/Pmax [ φ U ψ ]` and
`Rmin/Rmax [ F ψ ]`, picked from the certified values of a solve and
verified on the DTMC they induce.

Picking the choice that attains the optimum in the (approximate) values is
not enough (Storm's issue #940): inside an end component every choice that
stays in it attains the same value, and a scheduler that keeps to them
never reaches the target. So, as in the textbook constructions:

- `Pmax`: on the states with probability 1 (prob1E), an attractor choice:
  one that stays among them and has a successor one step closer to ψ; on the
  other states with a positive value, among the choices that attain the
  optimum (within the solve's error), one with a successor closer to those
  states in the graph of optimal choices; the states of value 0 are
  arbitrary (any choice).
- `Pmin`: on prob0E, a choice whose successors all stay in it (the last
  one, as PRISM picks); elsewhere a choice attaining the minimum (no end
  component is left among those states once prob0E is removed, so this is
  optimal); prob1A is arbitrary.
- `Rmin`: on the states of finite value, a choice that stays among them,
  attains the minimum and has a successor closer to ψ in the graph of such
  choices (zero-reward end components otherwise trap the scheduler);
  infinite states are arbitrary.
- `Rmax`: on the finite states (where every scheduler reaches ψ) a choice
  attaining the maximum; on the infinite states one that keeps a positive
  probability of never reaching ψ (into prob0E, then staying there).

`defined` marks the states where the choice matters, as PRISM's
strategies do (its `-2`, arbitrary, elsewhere; there the scheduler still
names a choice, the first or the one above, so that it induces a DTMC).

Verification: the induced DTMC is solved exactly (`jaxmc.numerics.induced`)
and compared with the solve's per-state bounds; where it falls outside,
policy iteration from the picked scheduler (switching only on a strict
improvement) repairs it, and its fixed point is optimal. A scheduler whose
exact values still contradict the certified bounds is an error, never
returned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ..errors import ModelCheckingError
from ..explore.model import ExplicitModel, RewardStructure
from . import graph
from .induced import chosen_rows, induced_dtmc, reach_reward_values, until_values
from .result import NumericResult
from .transitions import choice_rewards


#: Policy-iteration steps after which a repair gives up.
MAX_REPAIRS = 200


@dataclass(frozen=True)
class Scheduler:
    """A memoryless deterministic scheduler of an MDP.

    - `choice`: int64 [n], the index of the chosen choice within each
      state's row group (`model.choice_ptr[s] + choice[s]` is its row).
    - `actions`: the action label of each state's chosen choice (None for
      an unlabelled command).
    - `defined`: bool [n], the states where the choice matters (elsewhere
      any choice is optimal: PRISM leaves them out of its exports).
    - `objective`: what it optimises, e.g. `"Pmax [ φ U ψ ]"`.
    - `values`: the exact values of the induced DTMC (direct solve).
    - `deviation`: the largest distance of `values` from the solve's values.
    - `repairs`: the policy-iteration steps the verification needed.
    """

    choice: np.ndarray
    actions: tuple
    defined: np.ndarray
    objective: str
    values: np.ndarray
    deviation: float = 0.0
    repairs: int = 0

    def rows(self, model: ExplicitModel) -> np.ndarray:
        """The global choice (row) index of each state's chosen choice."""
        return chosen_rows(model, self.choice)

    def induced(self, model: ExplicitModel) -> ExplicitModel:
        """The DTMC this scheduler induces on `model`."""
        return induced_dtmc(model, self.choice)


# ------------------------------------------------------------------ helpers


class _Mdp:
    """Host arrays of an MDP that the constructions share."""

    def __init__(self, model: ExplicitModel):
        self.model = model
        self.n, self.m = model.num_states, model.num_choices
        self.soc = model.state_of_choice()
        self.row = model.row_of_entry()
        self.col = np.asarray(model.col, np.int64)
        self.p = np.asarray(model.val, np.float64)
        self.pos = self.p > 0
        self.first = np.asarray(model.choice_ptr[:-1], np.int64)

    def q(self, v: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
        """`b_c + sum_t P(c, t) v_t` for every choice (entries of
        probability 0 ignored, so that `inf` values stay `inf`)."""
        with np.errstate(invalid="ignore"):
            w = np.where(self.pos, self.p * v[self.col], 0.0)
        out = np.bincount(self.row, weights=w, minlength=self.m)
        return out if b is None else out + b

    def all_in(self, mask: np.ndarray) -> np.ndarray:
        """Choices whose successors all lie in `mask`."""
        bad = self.pos & ~mask[self.col]
        return np.bincount(self.row[bad], minlength=self.m) == 0

    def best(self, allowed: np.ndarray, score: np.ndarray, last=False):
        """Per state, the allowed choice of highest score (ties: the lowest
        index, or the highest with `last`), as an index within the state;
        -1 where no choice is allowed."""
        key = np.where(allowed, score, -np.inf)
        idx = np.arange(self.m)
        order = np.lexsort((-idx if last else idx, -key, self.soc))
        pick = order[self.first]
        ok = allowed[pick]
        return np.where(ok, pick - self.first, -1)

    def progress(self, allowed, goal, region, score) -> np.ndarray:
        """Per state of `region`, an allowed choice with a successor strictly
        closer to `goal` in the graph of allowed choices (breadth-first
        distance), of highest score among those; -1 where there is none."""
        n = self.n
        keep = self.pos & allowed[self.row] & region[self.soc[self.row]]
        src, dst = self.soc[self.row][keep], self.col[keep]
        tgt = np.nonzero(goal)[0]
        rows = np.concatenate([dst, np.full(len(tgt), n)])
        cols = np.concatenate([src, tgt])
        g = sp.csr_matrix(
            (np.ones(len(rows), np.int8), (rows, cols)), shape=(n + 1, n + 1)
        )
        d = csgraph.dijkstra(g, indices=n, unweighted=True)[:n]
        closest = np.full(self.m, np.inf)
        np.minimum.at(closest, self.row[self.pos], d[self.col[self.pos]])
        good = allowed & region[self.soc] & (closest < d[self.soc])
        return self.best(good, score)


def _bounds(res: NumericResult, tol: float, relative: bool):
    """Per-state `(lower, upper)` of the solve: its certified bounds, else
    its `bound` around the values, else `tol` (the uncertified case)."""
    v = np.asarray(res.values, np.float64)
    lo, hi = res.lower, res.upper
    extra = res.extra or {}
    if lo is None and "lower" in extra:
        lo, hi = extra["lower"], extra["upper"]
    if lo is not None:
        return np.asarray(lo, np.float64), np.asarray(hi, np.float64), True
    if res.bound is not None:
        e = np.full(len(v), float(res.bound))
        certified = True
    else:
        with np.errstate(invalid="ignore"):
            e = tol * np.maximum(1.0, np.abs(v)) if relative else np.full(len(v), tol)
        certified = False
    with np.errstate(invalid="ignore"):
        lo = np.where(np.isfinite(v), v - e, v)
        hi = np.where(np.isfinite(v), v + e, v)
    return lo, hi, certified


def _slack(v: np.ndarray) -> np.ndarray:
    """Rounding allowance of a direct solve compared with iterates."""
    with np.errstate(invalid="ignore"):
        return 1e-9 * np.maximum(1.0, np.where(np.isfinite(v), np.abs(v), 0.0))


def _within(w, lo, hi) -> np.ndarray:
    """Per state: `w` inside `[lo, hi]` up to rounding. An infinite value
    (both bounds infinite) must be matched exactly; a one-sided bound (the
    other infinite) is checked on its side, `w` finite."""
    both = np.isinf(lo) & np.isinf(hi)
    with np.errstate(invalid="ignore"):
        s = _slack(np.where(np.isfinite(hi), hi, lo))
        above = np.isinf(hi) | (w <= hi + s)
        below = np.isinf(lo) | (w >= lo - s)
    return np.where(both, (w == hi) | (w == lo), np.isfinite(w) & above & below)


# ------------------------------------------------------------- construction


def _finish(
    mdp: _Mdp,
    choice: np.ndarray,
    defined: np.ndarray,
    objective: str,
    res: NumericResult,
    evaluate: Callable[[np.ndarray], np.ndarray],
    improve: Callable[[np.ndarray, np.ndarray], np.ndarray],
    tol: float,
    relative: bool,
) -> Scheduler:
    """Verify `choice` on its induced DTMC; repair it by policy iteration
    (`improve(choice, values) -> choice`, the same array where nothing
    improves) where its values leave the solve's bounds."""
    lo, hi, certified = _bounds(res, tol, relative)
    w = evaluate(choice)
    repairs = 0
    while not _within(w, lo, hi).all():
        new = improve(choice, w)
        if np.array_equal(new, choice):
            break  # a policy-iteration fixed point: optimal
        repairs += 1
        if repairs > MAX_REPAIRS:
            raise ModelCheckingError(
                f"scheduler for {objective}: policy iteration did not settle "
                f"after {MAX_REPAIRS} steps",
                hint="solve with a smaller epsilon (the values the scheduler "
                "is picked from are too coarse)",
            )
        choice, w = new, evaluate(new)
    ok = _within(w, lo, hi)
    if certified and not ok.all():
        s = int(np.nonzero(~ok)[0][0])
        raise ModelCheckingError(
            f"scheduler for {objective}: the optimal scheduler's exact value "
            f"{w[s]!r} in state {s} is outside the solve's certified bounds "
            f"[{lo[s]!r}, {hi[s]!r}]",
            hint="the numerical solve is wrong here; please report it",
        )
    v = np.asarray(res.values, np.float64)
    with np.errstate(invalid="ignore"):
        diff = np.where(w == v, 0.0, np.abs(w - v))
    rows = chosen_rows(mdp.model, choice)
    acts = mdp.model.choice_action
    actions = tuple(acts[r] for r in rows.tolist()) if acts else (None,) * mdp.n
    return Scheduler(
        choice=choice.astype(np.int64),
        actions=actions,
        defined=defined,
        objective=objective,
        values=w,
        deviation=float(np.nanmax(diff, initial=0.0)),
        repairs=repairs,
    )


def _pick_slack(res: NumericResult, tol: float, relative: bool) -> float:
    """How far from the optimum a choice may look and still count as
    optimal: twice the solve's largest error."""
    lo, hi, _ = _bounds(res, tol, relative)
    v = np.asarray(res.values, np.float64)
    with np.errstate(invalid="ignore"):
        e = np.where(np.isfinite(v), np.maximum(hi - v, v - lo), 0.0)
    return 2.0 * float(np.max(e, initial=0.0)) + 1e-12


def _improver(mdp: _Mdp, region, allowed, opt, b=None):
    """One policy-improvement step on `region` over `allowed` choices:
    switch where another choice is strictly better than the current one."""
    sign = 1.0 if opt == "max" else -1.0

    def improve(choice, w):
        q = sign * mdp.q(w, b)
        cur = q[mdp.first + choice]
        best = mdp.best(allowed, q)
        cand = np.where(best >= 0, q[mdp.first + np.maximum(best, 0)], -np.inf)
        with np.errstate(invalid="ignore"):
            better = region & (best >= 0) & (cand > cur + _slack(w) * 1e-3)
        return np.where(better, best, choice)

    return improve


def until_scheduler(
    model: ExplicitModel,
    phi,
    psi,
    opt: str,
    res: NumericResult,
    *,
    tol: float = 1e-6,
    relative: bool = True,
) -> Scheduler:
    """The optimal memoryless scheduler for `P{opt} [ φ U ψ ]` on the MDP
    `model`, from the solve `res` of those values (`tol`, `relative`: the
    criterion it was solved to, used where it certifies no bound)."""
    mdp = _Mdp(model)
    phi, psi = np.asarray(phi, bool), np.asarray(psi, bool)
    soc = mdp.soc
    v = np.asarray(res.values, np.float64)
    slack = _pick_slack(res, tol, relative)
    choice = np.zeros(mdp.n, np.int64)
    if opt == "max":
        no, yes = graph.prob01_max(model, phi, psi)
        maybe = ~no & ~yes
        stay = mdp.all_in(yes)
        attract = mdp.progress(stay, psi, yes & ~psi, np.zeros(mdp.m))
        choice = np.where(yes & ~psi & (attract >= 0), attract, choice)
        fixed = np.where(yes, 1.0, np.where(no, 0.0, v))
        q = mdp.q(fixed)
        cand = maybe[soc] & (q >= fixed[soc] - slack)
        pick = mdp.progress(cand, yes, maybe, q)
        fallback = mdp.best(maybe[soc], q)
        choice = np.where(maybe, np.where(pick >= 0, pick, fallback), choice)
        defined = (yes & ~psi) | maybe
    else:
        no, yes = graph.prob01_min(model, phi, psi)
        maybe = ~no & ~yes
        stay = mdp.best(mdp.all_in(no) & no[soc], np.zeros(mdp.m), last=True)
        choice = np.where(no & (stay >= 0), stay, choice)
        fixed = np.where(yes, 1.0, np.where(no, 0.0, v))
        q = mdp.q(fixed)
        pick = mdp.best(maybe[soc], -q)
        choice = np.where(maybe, pick, choice)
        defined = no | maybe
    name = f"P{opt} [ φ U ψ ]"
    improve = _improver(mdp, maybe, maybe[soc], opt)

    def evaluate(c):
        return until_values(induced_dtmc(model, c), phi, psi)

    return _finish(mdp, choice, defined, name, res, evaluate, improve, tol, relative)


def reach_reward_scheduler(
    model: ExplicitModel,
    reward: RewardStructure,
    target,
    opt: str,
    res: NumericResult,
    *,
    tol: float = 1e-6,
    relative: bool = True,
) -> Scheduler:
    """The optimal memoryless scheduler for `R{opt} [ F target ]` on the MDP
    `model` (PRISM's convention: infinite where the target is not reached
    almost surely), from the solve `res` of those values."""
    mdp = _Mdp(model)
    target = np.asarray(target, bool)
    soc = mdp.soc
    true = np.ones(mdp.n, bool)
    r = choice_rewards(model, reward)
    v = np.asarray(res.values, np.float64)
    slack = _pick_slack(res, tol, relative)
    choice = np.zeros(mdp.n, np.int64)
    if opt == "min":
        finite = graph.prob1E(model, true, target)
        maybe = finite & ~target
        stay = mdp.all_in(finite) & maybe[soc]
        fixed = np.where(finite, np.where(target, 0.0, v), np.inf)
        q = mdp.q(fixed, r)
        cand = stay & (q <= fixed[soc] + slack)
        pick = mdp.progress(cand, target, maybe, -q)
        proper = mdp.progress(stay, target, maybe, -q)
        choice = np.where(maybe, np.where(pick >= 0, pick, proper), choice)
        defined = maybe
        allowed = stay
    else:
        finite = graph.prob1A(model, true, target)
        maybe = finite & ~target
        fixed = np.where(finite, np.where(target, 0.0, v), np.inf)
        q = mdp.q(fixed, r)
        choice = np.where(maybe, mdp.best(maybe[soc], q), choice)
        # infinite: into the states where the target can be avoided forever
        avoid = graph.prob0E(model, true, target)
        keep = mdp.best(mdp.all_in(avoid) & avoid[soc], np.zeros(mdp.m))
        choice = np.where(avoid & (keep >= 0), keep, choice)
        rest = ~finite & ~avoid
        toward = mdp.progress(np.ones(mdp.m, bool), avoid, rest, np.zeros(mdp.m))
        choice = np.where(rest & (toward >= 0), toward, choice)
        defined = maybe | ~finite
        allowed = maybe[soc]
    name = f"R{opt} [ F ψ ]"
    improve = _improver(mdp, maybe, allowed, opt, r)

    def evaluate(c):
        return reach_reward_values(induced_dtmc(model, c), r[mdp.first + c], target)

    return _finish(mdp, choice, defined, name, res, evaluate, improve, tol, relative)
