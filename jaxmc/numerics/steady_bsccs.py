"""The non-trivial BSCCs of a DTMC or CTMC as one system (`Bsccs`), and the
certificate of their long-run averages (`certify`; `steady_longrun`'s
module docstring says what it bounds and why it holds).

A `Bsccs` depends on the model alone (`steady_values._bsccs` keeps one per
model), so what is derived from it once is kept on it: the system on each
device layout (`device`), whether every BSCC is aperiodic (`aperiodic`),
and its entries on the device for the certificate. `certify` runs on the
device for large systems on an accelerator (`CERTIFY_ON_DEVICE`): the same
float64 evaluation and rounding allowance as the host's, where the
allowance covers any order of summation, so the bracket holds either way;
the host's O(transitions) numpy passes (several per solve) would otherwise
be most of a warm check's time on a GPU.
"""

from __future__ import annotations

import weakref
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..layout.device_pad import bucket, pad_tail
from .steady import _aperiodic


_U = np.finfo(np.float64).eps

#: Where `certify` evaluates: "auto" (the device for systems of at least
#: `CERTIFY_DEVICE_MIN_ENTRIES` entries on an accelerator, else the host),
#: "on" (the device: tests run it on the CPU) or "off".
CERTIFY_ON_DEVICE = "auto"
CERTIFY_DEVICE_MIN_ENTRIES = 1 << 20

#: Reward vectors whose derived data `Bsccs.per_reward` remembers.
REWARD_MEMO = 4


class Bsccs:
    """The non-trivial BSCCs' states (local indices `0..k-1`), their
    off-diagonal entries `(src, dst, val)`, exit rates `d`, BSCC index
    `lab` (`0..nb-1`) and representative `reps[b]` (a local state)."""

    def __init__(self, k, src, dst, val, d, lab, reps):
        self.k, self.src, self.dst, self.val, self.d = k, src, dst, val, d
        self.lab, self.reps, self.nb = lab, reps, len(reps)
        self.order = np.argsort(lab, kind="stable")
        self.starts = np.searchsorted(lab[self.order], np.arange(self.nb))
        self.deg = np.bincount(src, minlength=k)
        self._devices: dict = {}
        self._is_aperiodic: bool | None = None
        self._certifier = None
        self._rewards: dict = {}

    def segment(self, ufunc, x):
        if self.nb == 1:
            return np.array([ufunc.reduce(x)])
        return ufunc.reduceat(x[self.order], self.starts)

    def device(self, key, make):
        """The system on a device layout, `make()` the first time for `key`
        (the layout asked for), kept for later solves."""
        got = self._devices.get(key)
        if got is None:
            got = self._devices[key] = make()
        return got

    def per_reward(self, r, key: str, make):
        """`make()` once per reward vector `r` (by identity: a model's
        reward rates are kept with it, `steady_values._reward_rates`, so a
        warm check passes the same array) and `key`; the last
        `REWARD_MEMO` vectors are remembered. Callers never write to `r`."""
        got = self._rewards.get(id(r))
        if got is None or got[0]() is not r:
            if len(self._rewards) >= REWARD_MEMO:
                self._rewards.pop(next(iter(self._rewards)))
            got = self._rewards[id(r)] = (weakref.ref(r), {})
        memo = got[1]
        if key not in memo:
            memo[key] = make()
        return memo[key]

    def aperiodic(self) -> bool:
        """Whether every BSCC is aperiodic (`steady._aperiodic`), once."""
        if self._is_aperiodic is None:
            self._is_aperiodic = _aperiodic(self.lab, self.nb, self.src, self.dst)
        return self._is_aperiodic

    def certify_on_device(self) -> bool:
        if CERTIFY_ON_DEVICE != "auto":
            return CERTIFY_ON_DEVICE == "on"
        large = len(self.src) >= CERTIFY_DEVICE_MIN_ENTRIES
        return large and jax.default_backend() != "cpu"


def certify(B: Bsccs, r, h, bordered: bool = False):
    """`(lo, hi, floor)` per BSCC: the certified bracket `[min D, max D]` of
    each gain, `D = r + Q h` evaluated in float64 with an allowance for its
    rounding (`(m + 3) u` times the sum of the magnitudes of a row's
    `m + 2` terms), and the largest allowance (what float64 can certify at
    best with this `h`). Non-finite `h` gives `(-inf, inf, inf)`.

    `bordered`: `h` holds the bordered system's unknowns (each BSCC's gain
    at its representative, `steady_longrun._split`), read with those
    entries as 0. On the device (`certify_on_device`) `h` may be a device
    array: it is read there, not moved to the host, and `r` is moved
    there once per reward vector (`per_reward`)."""
    if B.certify_on_device():
        return _certify_device(B, r, h, bordered)
    h = np.asarray(h, dtype=np.float64)
    if bordered:
        h = h.copy()
        h[B.reps] = 0.0
    if not np.all(np.isfinite(h)):
        inf = np.full(B.nb, np.inf)
        return -inf, inf, inf
    terms = B.val * h[B.dst]
    D = r + np.bincount(B.src, weights=terms, minlength=B.k) - B.d * h
    mag = (
        np.abs(r)
        + np.bincount(B.src, weights=np.abs(terms), minlength=B.k)
        + np.abs(B.d * h)
    )
    err = (B.deg + 3) * _U * 1.01 * mag
    lo, hi = B.segment(np.minimum, D - err), B.segment(np.maximum, D + err)
    return lo, hi, B.segment(np.maximum, err)


def _certify_device(B: Bsccs, r, h, bordered: bool):
    """`certify` on the device: the system's entries are moved there once,
    padded to size buckets (`layout.device_pad`, so that systems of similar
    size share one compilation): the padding is a dummy state `k` with no
    entries, in a dummy BSCC `nb`, dropped from the result. `h` is padded
    on the device (a device array stays there); only the `3 nb` bounds
    come back."""
    if B._certifier is None:
        k, nnz = B.k, len(B.src)
        kp, ep = bucket(k + 1), bucket(nnz)

        def padded(x, fill, size, dtype):
            return jnp.asarray(pad_tail(np.asarray(x, dtype), size, fill))

        is_rep = np.zeros(k, dtype=bool)
        is_rep[B.reps] = True
        B._certifier = (
            padded(B.src, k, ep, np.int32),
            padded(B.dst, k, ep, np.int32),
            padded(B.val, 0.0, ep, np.float64),
            padded(B.d, 0.0, kp, np.float64),
            padded(B.deg, 0, kp, np.int32),
            padded(B.lab, B.nb, kp, np.int32),
            padded(is_rep, False, kp, bool),
        )
    src, dst, val, d, deg, lab, is_rep = B._certifier
    kp = d.shape[0]
    rp = B.per_reward(
        r, "certify", lambda: jnp.asarray(pad_tail(np.asarray(r, np.float64), kp, 0.0))
    )
    hp = _pad(jnp.asarray(h, jnp.float64), kp)
    mask = is_rep if bordered else jnp.zeros_like(is_rep)
    lo, hi, floor = _certify_kernel(
        src, dst, val, d, deg, lab, mask, rp, hp, nb=B.nb + 1
    )
    n = B.nb
    return np.asarray(lo)[:n], np.asarray(hi)[:n], np.asarray(floor)[:n]


@partial(jax.jit, static_argnames="size")
def _pad(h, size):
    return jnp.zeros(size, h.dtype).at[: h.shape[0]].set(h)


@partial(jax.jit, static_argnames="nb")
def _certify_kernel(src, dst, val, d, deg, lab, is_rep, r, h, *, nb):
    k = d.shape[0]
    h = jnp.where(is_rep, 0.0, h)
    terms = val * h[dst]
    D = r + jax.ops.segment_sum(terms, src, k) - d * h
    mag = jnp.abs(r) + jax.ops.segment_sum(jnp.abs(terms), src, k) + jnp.abs(d * h)
    err = (deg + 3).astype(jnp.float64) * (_U * 1.01) * mag
    lo = jax.ops.segment_min(D - err, lab, nb)
    hi = jax.ops.segment_max(D + err, lab, nb)
    floor = jax.ops.segment_max(err, lab, nb)
    finite = jnp.all(jnp.isfinite(h))  # (as the host: no bracket otherwise)
    inf = jnp.inf
    return (
        jnp.where(finite, lo, -inf),
        jnp.where(finite, hi, inf),
        jnp.where(finite, floor, inf),
    )
