"""The residual certificate of the sound DTMC/CTMC linear solves
(`jaxmc.numerics.sound`): bounds on the error of an iterate `x` of
`x = bb + P x` on `maybe` from its residual and from the expected number
of steps to leave `maybe` (`sound`'s module docstring says why they hold).

Every product is `P`'s rows of the `maybe` states only, so the rows are
read from a `Rows`: `HostRows` (a scipy matrix: the masked system's, or the
model's whole system, whose rows of `maybe` are the masked system's), or
`DeviceRows`, the model's whole system on the device, made once per model
(`device_rows`): there the O(transitions) products of a certificate run as
one jitted pass each, in float64, with the host's rounding allowances,
which hold for any order of summation. `CERTIFY_ON_DEVICE` says where.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ..layout.device_pad import bucket, pad_tail


_EPS = float(np.finfo(np.float64).eps)

#: Where the certificate's products run for a model's own system: "auto"
#: (the device for systems of at least `CERTIFY_DEVICE_MIN_ENTRIES` entries
#: on an accelerator, else the host), "on" (the device: tests run it on the
#: CPU) or "off". Read at each call.
CERTIFY_ON_DEVICE = "auto"
CERTIFY_DEVICE_MIN_ENTRIES = 1 << 20


class HostRows:
    """The rows of a host (scipy CSR) matrix: `A @ v`, `|A| @ v` (`|A|`
    made once, unless the entries are non-negative: `nonneg`, or found
    here) and the entries per row `k`. With `idx`, `A` holds those rows of
    a square matrix only (in order): the products and `k` are 0 on the
    other rows (which the certificate does not read)."""

    def __init__(self, A, idx=None, nonneg=None):
        self.A, self.idx, self.nonneg = A, idx, nonneg
        self.k = self._spread(np.diff(A.indptr).astype(np.float64))
        self._abs = None

    def _spread(self, y):
        if self.idx is None:
            return y
        out = np.zeros(self.A.shape[1])
        out[self.idx] = y
        return out

    def mv(self, v):
        return self._spread(self.A @ v)

    def absmv(self, v):
        if self._abs is None:
            nonneg = self.nonneg
            if nonneg is None:
                nonneg = self.A.data.size == 0 or bool(self.A.data.min() >= 0)
            self._abs = self.A if nonneg else abs(self.A)
        return self._spread(self._abs @ v)


def rows_of(A):
    """`A` as a `Rows` (a scipy matrix wrapped in `HostRows`)."""
    return A if isinstance(A, (HostRows, DeviceRows)) else HostRows(A)


class DeviceRows:
    """A host CSR matrix's entries on the device, padded to the size
    buckets of `layout.device_pad` (a dummy row `n` takes the padding), for
    the certificate's two kernels (`residual_max`, `steps_supersolution`)."""

    def __init__(self, A):
        n, nnz = A.shape[0], A.nnz
        self.n = n
        npad, epad = bucket(n + 1), bucket(nnz)
        row = np.repeat(np.arange(n), np.diff(A.indptr))
        vals = np.asarray(A.data, np.float64)

        def put(a, fill, size, dtype):
            return jnp.asarray(pad_tail(np.asarray(a, dtype), size, fill))

        self.row = put(row, n, epad, np.int32)
        self.col = put(A.indices, n, epad, np.int32)
        self.val = put(vals, 0.0, epad, np.float64)
        self.absval = self.val if vals.min(initial=0.0) >= 0 else jnp.abs(self.val)
        self.k = put(np.diff(A.indptr), 0, npad, np.float64)

    def mv(self, v):
        return np.asarray(_mv_kernel(self.val, self.row, self.col, self.pad(v)))[
            : self.n
        ]

    def pad(self, v, fill=0.0):
        return jnp.asarray(pad_tail(np.asarray(v, np.float64), self.k.shape[0], fill))

    def padmask(self, maybe):
        return jnp.asarray(pad_tail(np.asarray(maybe, bool), self.k.shape[0], False))


@jax.jit
def _mv_kernel(val, row, col, v):
    return jax.ops.segment_sum(val * v[col], row, v.shape[0])


def use_device(nnz: int) -> bool:
    if CERTIFY_ON_DEVICE != "auto":
        return CERTIFY_ON_DEVICE == "on"
    return nnz >= CERTIFY_DEVICE_MIN_ENTRIES and jax.default_backend() != "cpu"


def residual_max(R, bb, x, maybe) -> float:
    """An upper bound on `max |bb + P x - x|` over `maybe`, the rounding of
    its computation included."""
    R = rows_of(R)
    if isinstance(R, DeviceRows):
        out = _residual_kernel(
            R.val, R.absval, R.row, R.col, R.k, R.pad(bb), R.pad(x), R.padmask(maybe)
        )
        return float(out)
    r = bb + R.mv(x) - x
    slack = (R.k + 4.0) * _EPS * (np.abs(bb) + R.absmv(np.abs(x)) + np.abs(x))
    return float(np.max(np.where(maybe, np.abs(r) + slack, 0.0), initial=0.0))


@jax.jit
def _residual_kernel(val, absval, row, col, k, bb, x, maybe):
    n = k.shape[0]
    Px = jax.ops.segment_sum(val * x[col], row, n)
    Pa = jax.ops.segment_sum(absval * jnp.abs(x)[col], row, n)
    r = bb + Px - x
    slack = (k + 4.0) * _EPS * (jnp.abs(bb) + Pa + jnp.abs(x))
    return jnp.max(jnp.where(maybe, jnp.abs(r) + slack, 0.0), initial=0.0)


def steps_supersolution(A, maybe, w):
    """Per-state upper bounds `s` on the expected number of steps to leave
    `maybe` (`A`: a `Rows` or a host matrix of the system), from a
    candidate `w` (e.g. a solution of `(I - P) w = 1`), or None: `s = alpha
    w` with `s >= 1 + P s` on `maybe` checked with an allowance for the
    rounding of the product; then every solution `T` of `T = 1 + P T` is at
    most `s`."""
    R = rows_of(A)
    if isinstance(R, DeviceRows):
        ok, s = _supersolution_kernel(
            R.val, R.row, R.col, R.k, R.padmask(maybe), R.pad(w)
        )
        return np.asarray(s)[: R.n] if bool(ok) else None
    w = np.where(maybe, np.maximum(np.nan_to_num(w, nan=0.0), 0.0), 0.0)
    Pw = R.mv(w)
    gap = (w - Pw) - (R.k + 8.0) * _EPS * (w + Pw)
    if not np.all(gap[maybe] > 0):
        return None
    alpha = float(np.max(1.0 / gap[maybe], initial=0.0)) * (1.0 + 16.0 * _EPS)
    return np.where(maybe, alpha * w, 0.0) * (1.0 + 16.0 * _EPS)


@jax.jit
def _supersolution_kernel(val, row, col, k, maybe, w):
    n = k.shape[0]
    w = jnp.where(maybe, jnp.maximum(jnp.nan_to_num(w, nan=0.0), 0.0), 0.0)
    Pw = jax.ops.segment_sum(val * w[col], row, n)
    gap = (w - Pw) - (k + 8.0) * _EPS * (w + Pw)
    ok = jnp.all(jnp.where(maybe, gap > 0, True))
    inv = jnp.where(maybe & (gap > 0), 1.0 / jnp.where(gap > 0, gap, 1.0), 0.0)
    alpha = jnp.max(inv, initial=0.0) * (1.0 + 16.0 * _EPS)
    return ok, jnp.where(maybe, alpha * w, 0.0) * (1.0 + 16.0 * _EPS)


def within(lo, hi, maybe, epsilon, relative) -> bool:
    half = 0.5 * (hi - lo)[maybe]
    if relative:
        return bool(np.all(half <= epsilon * np.abs(lo[maybe])))
    return bool(np.all(half <= epsilon))


def residual_bounds(A, bb, x, maybe, steps):
    """`(lower, upper)` from the residual of `x` (`A` a `Rows` or a host
    matrix of the system) and `steps`, an upper bound on the expected steps
    to leave `maybe`, or None if they are not finite."""
    r = np.where(maybe, bb + rows_of(A).mv(x) - x, 0.0)
    err = float(np.max(np.abs(r), initial=0.0)) * steps
    # (the residual's own rounding: a few units in the last place of x)
    err += 4.0 * _EPS * float(np.max(np.abs(x), initial=0.0))
    if not np.isfinite(err):
        return None
    # (outward by at least one unit in the last place, so that the bounds
    # are not rounded back onto x)
    lo = np.minimum(x - err, np.nextafter(x, -np.inf))
    hi = np.maximum(x + err, np.nextafter(x, np.inf))
    return np.where(maybe, lo, x), np.where(maybe, hi, x)


def certify_steps(A, bb, x, maybe, w, kw):
    """Per-state residual bounds on `x` from the expected steps' super-
    solution made of `w` (`steps_supersolution`), if they meet the
    criterion, else None: the error `e` of `x` solves `e = r + P e` with `r`
    the residual, so `|e| <= max|r| s`."""
    if w is None:
        return None
    R = rows_of(A)
    if isinstance(R, DeviceRows):  # one pass on the device, the same sums
        m, eps = R.padmask(maybe), float(kw["epsilon"])
        args = (R.val, R.absval, R.row, R.col, R.k, R.pad(bb), R.pad(x), m, R.pad(w))
        ok, lo, hi = _steps_bounds_kernel(*args, eps, bool(kw["relative"]))
        return (np.asarray(lo)[: R.n], np.asarray(hi)[: R.n]) if bool(ok) else None
    s = steps_supersolution(A, maybe, w)
    if s is None:
        return None
    err = residual_max(A, bb, x, maybe) * s * (1.0 + 1e-9)
    if not np.all(np.isfinite(err)):
        return None
    lo = np.minimum(x - err, np.nextafter(x, -np.inf))
    hi = np.maximum(x + err, np.nextafter(x, np.inf))
    lo, hi = np.where(maybe, lo, x), np.where(maybe, hi, x)
    if not within(lo, hi, maybe, kw["epsilon"], kw["relative"]):
        return None
    return lo, hi


@functools.partial(jax.jit, static_argnames="relative")
def _steps_bounds_kernel(val, absval, row, col, k, bb, x, maybe, w, epsilon, relative):
    """`certify_steps` on `DeviceRows`: `(ok, lo, hi)` from the supersolution
    and residual kernels and the host path's bounds, in the same order of
    operations (the same numbers)."""
    ok, s = _supersolution_kernel(val, row, col, k, maybe, w)
    rmax = _residual_kernel(val, absval, row, col, k, bb, x, maybe)
    err = rmax * s * (1.0 + 1e-9)
    ok = ok & jnp.all(jnp.isfinite(err))
    lo = jnp.minimum(x - err, jnp.nextafter(x, -jnp.inf))
    hi = jnp.maximum(x + err, jnp.nextafter(x, jnp.inf))
    lo, hi = jnp.where(maybe, lo, x), jnp.where(maybe, hi, x)
    half = 0.5 * (hi - lo)
    tol = epsilon * jnp.abs(lo) if relative else epsilon
    return ok & jnp.all(jnp.where(maybe, half <= tol, True)), lo, hi
