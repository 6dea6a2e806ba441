"""Pieces shared by the Pallas (Triton) kernels: masked loads and stores
that work across JAX versions, compiler parameters, PRISM's per-row change
measure, the kind of a `b`/`inv` vector, table lookups, and the power-of-two
tile width."""

from __future__ import annotations

import jax.numpy as jnp
from jax.experimental import pallas as pl

from ..layout.compact import CompactVector


try:  # jax 0.10/0.11: jax.experimental.pallas.triton
    from jax.experimental.pallas import triton as _pltr
except ImportError:  # pragma: no cover - very old or very new jax
    _pltr = None


def compiler_params(num_warps, num_stages):
    if _pltr is None:
        return None
    cls = getattr(_pltr, "CompilerParams", None) or getattr(
        _pltr, "TritonCompilerParams", None
    )
    if cls is None:  # pragma: no cover
        return None
    return cls(num_warps=num_warps, num_stages=num_stages)


def load(ref, idx, mask, other, evict=None):
    """`ref[idx]` where `mask` (`other` elsewhere); `mask=None` loads all
    (Triton then takes no `other`)."""
    if mask is None:
        other = None
    if _pltr is not None and hasattr(_pltr, "load"):
        kw = {"eviction_policy": evict} if evict else {}
        return _pltr.load(ref.at[idx], mask=mask, other=other, **kw)
    return pl.load(ref, (idx,), mask=mask, other=other)  # pragma: no cover


def store(ref, idx, val, mask):
    if _pltr is not None and hasattr(_pltr, "store"):
        return _pltr.store(ref.at[idx], val, mask=mask)
    return pl.store(ref, (idx,), val, mask=mask)  # pragma: no cover


def change(y, xo, mask, relative):
    """PRISM's per-row change `|y - x|` (relative: `/ |y|`) of a kernel
    block, and where `y` is non-finite. `d` is 0 on masked and non-finite
    rows (the flag carries those: Triton's max may drop NaNs, so callers
    reduce the two apart) and inf where the change itself is NaN with a
    finite `y` (a NaN start vector)."""
    d = jnp.abs(y - xo)
    d = jnp.where(y == xo, 0, d)
    if relative:
        d = jnp.where(d == 0, 0, d / jnp.abs(y))
    bad = mask & ~jnp.isfinite(y)
    d = jnp.where(jnp.isnan(d), jnp.inf, d)
    return jnp.where(mask & ~bad, d, 0), bad


def vec_spec(v):
    """('dense',) or ('compact', idx dtype) or None, for b / inv."""
    if v is None:
        return None
    if isinstance(v, CompactVector):
        return "compact"
    return "dense"


def scalars(tab_ref, select):
    """The entries of a table of at most `select` entries as scalars (read
    once per program, before any loop), else None."""
    if not select or tab_ref.shape[0] > select:
        return None
    return [tab_ref[k] for k in range(tab_ref.shape[0])]


def lookup(tab_ref, vi, tab):
    """`table[vi]`: a gather, or with `tab` (`scalars`) a chain of selects
    (no memory access per element)."""
    if tab is None:
        return tab_ref[vi]
    v = jnp.broadcast_to(tab[0], vi.shape)
    for k in range(1, len(tab)):
        v = jnp.where(vi == k, tab[k], v)
    return v


def pow2(k: int) -> int:
    return 1 << max(0, (k - 1).bit_length())
