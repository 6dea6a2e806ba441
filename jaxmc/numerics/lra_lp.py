"""The optimal gain of one end component by linear programming, certified
by one Bellman step: the fallback of `jaxmc.numerics.lra` for components
whose value iteration mixes too slowly to meet its tolerance.

In an end component (every state reaches every other one) the optimal gain
`g*` is constant and, for `max`, the optimum of the LP

    minimise g  subject to  g + h_s >= r_c + sum_t P(c, t) h_t
                            for every choice c of every state s

(Puterman, section 9.5; `min` is the same with `<=` and maximise), `h`
free but for `h = 0` at one state. The LP solver's answer is not trusted
as it is: for any `h`, `d = opt_c (r_c + P_c h) - h` brackets the gain,
`min_s d <= g* <= max_s d` (the bound value iteration stops on), and with
the LP's `h` (near the bias of an optimal policy) the bracket is about the
LP's tolerance wide.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from ..explore.model import ExplicitModel


#: Components of more states than this are left to value iteration.
LP_MAX_STATES = 50_000


def lp_gain(
    model: ExplicitModel,
    probs: np.ndarray,
    states: np.ndarray,
    choices: np.ndarray,
    reward: np.ndarray,
    opt: str,
) -> tuple[float, float] | None:
    """Certified `(lower, upper)` bounds on the optimal gain of the end
    component of `states` (indices) with its `choices` (indices of the
    choices that stay in it), or None if the LP solver found no optimum."""
    n = len(states)
    local = np.full(model.num_states, -1, dtype=np.int64)
    local[states] = np.arange(n)
    A, owner = _component_matrix(model, probs, local, choices)
    k = len(choices)
    # rows: g + h_s - P_c h  (>= r_c for max, <= r_c for min)
    own = sp.csr_matrix((np.ones(k), (np.arange(k), owner)), shape=(k, n))
    rows = sp.hstack([sp.csr_matrix(np.ones((k, 1))), own - A], format="csr")
    r = np.asarray(reward, dtype=np.float64)[choices]
    sign = -1.0 if opt == "max" else 1.0
    bounds = [(None, None)] + [(0.0, 0.0)] + [(None, None)] * (n - 1)
    c = np.zeros(n + 1)
    c[0] = -sign  # max: minimise g; min: maximise g
    res = linprog(c, A_ub=sign * rows, b_ub=sign * r, bounds=bounds, method="highs")
    if res.status != 0 or res.x is None:
        return None
    return certify(A, owner, r, res.x[1:], opt, n)


def certify(A, owner, r, h, opt, n) -> tuple[float, float]:
    """`(min_s d, max_s d)` for `d = opt_c (r_c + P_c h) - h` (module
    docstring): bounds on the component's optimal gain for any `h`."""
    q = r + A @ h
    best = np.full(n, -np.inf if opt == "max" else np.inf)
    (np.maximum if opt == "max" else np.minimum).at(best, owner, q)
    d = best - h
    return float(d.min()), float(d.max())


def _component_matrix(model, probs, local, choices):
    """The component's choices as a sparse [choices, states] matrix over
    its states (`local` numbering), and the state of each choice."""
    starts, ends = model.row_ptr[choices], model.row_ptr[choices + 1]
    lens = ends - starts
    idx = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(lens.sum())
    row = np.repeat(np.arange(len(choices)), lens)
    A = sp.csr_matrix(
        (probs[idx], (row, local[model.col[idx]])),
        shape=(len(choices), int(local.max()) + 1),
    )
    owner = local[model.state_of_choice()[choices]]
    return A, owner
