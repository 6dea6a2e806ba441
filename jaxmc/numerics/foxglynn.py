"""Fox–Glynn computation of Poisson probabilities (Fox & Glynn, "Computing
Poisson probabilities", CACM 31(4), 1988), as used by PRISM's FoxGlynn.java
for uniformisation.

`fox_glynn(q_t, epsilon)` returns a window `[left, right]` outside which the
Poisson(q_t) mass is at most `epsilon` (at most `epsilon/2` on each side),
and unnormalised weights on it, computed from the mode outwards by the
recurrence `w_{i+1} = w_i * q_t / (i + 1)` so that nothing underflows even for
large `q_t`. Probabilities are `weights / total_weight`. PRISM calls it with
accuracy `epsilon / 8` for transient and bounded-until computations.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ModelCheckingError


_SQRT2PI = math.sqrt(2.0 * math.pi)


#: The most uniformisation steps (Poisson terms) a bounded CTMC property may
#: take: PRISM counts them in a 32-bit int.
_MAX_STEPS = 2**31 - 1


def _right_k(lam: float, eps: float) -> float:
    # Corollary 1 (right truncation), with lambda replaced by max(lambda, 400).
    lam = max(lam, 400.0)
    a = (1.0 + 1.0 / lam) * math.exp(1.0 / 16.0) * math.sqrt(2.0)
    k = 3.0
    while True:
        d = 1.0 / (1.0 - math.exp(-(2.0 / 9.0) * (k * math.sqrt(2.0 * lam) + 1.5)))
        if a * d * math.exp(-k * k / 2.0) / (k * _SQRT2PI) <= eps / 2.0:
            return k
        k += 1.0


def _left_k(lam: float, eps: float) -> float:
    # Corollary 2 (left truncation), valid for lambda >= 25.
    b = (1.0 + 1.0 / lam) * math.exp(1.0 / (8.0 * lam))
    k = math.sqrt(2.0)
    while b * math.exp(-k * k / 2.0) / (k * _SQRT2PI) > eps / 2.0:
        k += 1.0
    return k


def fox_glynn(
    q_t: float,
    epsilon: float = 1e-6,
    underflow: float = 1e-300,
    overflow: float = 1e300,
) -> tuple[int, int, np.ndarray, float]:
    """Poisson(`q_t`) weights on a truncation window.

    **Arguments:**
    - `q_t`: the Poisson parameter (uniformisation rate times time), > 0.
    - `epsilon`: bound on the total mass outside `[left, right]`.
    - `underflow`, `overflow`: the float range, as in PRISM.

    **Returns:** `(left, right, weights, total_weight)` with `weights` float64
    of length `right - left + 1`; `weights[i - left] / total_weight` is
    `P(N = i)` up to rounding.
    """
    if not q_t > 0 or not math.isfinite(q_t):
        raise ModelCheckingError(
            f"Fox-Glynn needs a positive finite rate*time, got {q_t}"
        )
    if q_t > _MAX_STEPS:
        raise ModelCheckingError(
            f"uniformisation would need more than {_MAX_STEPS:,} steps "
            f"(rate * time = {q_t:.6g})",
            hint="a time bound this large is beyond transient analysis; "
            "an unbounded F/U (or S for the long run) may be what is meant",
        )
    mode = int(math.floor(q_t))
    if q_t < 25.0:
        if math.exp(-q_t) < underflow:
            raise ModelCheckingError("Fox-Glynn underflow: exp(-q t) too small")
        left = 0
    else:
        k = _left_k(q_t, epsilon)
        left = max(0, int(math.floor(mode - k * math.sqrt(q_t) - 1.5)))
    k = _right_k(q_t, epsilon)
    # For q_t < 400 the bound holds with 400 in place of q_t (Fox & Glynn),
    # in the window width too: with sqrt(2 q_t) the tail can exceed epsilon.
    right = int(math.ceil(mode + k * math.sqrt(2.0 * max(q_t, 400.0)) + 1.5))
    if left > mode:
        left = mode
    w = np.zeros(right - left + 1)
    w[mode - left] = overflow / (1e10 * (right - left + 1))
    for j in range(mode, left, -1):  # down from the mode
        w[j - 1 - left] = w[j - left] * (j / q_t)
    for j in range(mode, right):  # up from the mode
        w[j + 1 - left] = w[j - left] * (q_t / (j + 1))
    # Sum small terms first, from both ends towards the mode (PRISM does too).
    lo = np.sum(w[: mode - left][::1])
    hi = np.sum(w[mode - left :][::-1])
    total = float(lo + hi)
    return left, right, w, total


def poisson_window(q_t: float, epsilon: float = 1e-6) -> tuple[int, np.ndarray]:
    """`(left, probs)` with `probs[i] = P(N = left + i)` on the Fox–Glynn window."""
    left, _, w, total = fox_glynn(q_t, epsilon)
    return left, w / total
