"""Which updates produced each transition entry of a built model.

Provenance (`ExplicitModel.provenance`, a `Provenance`): entry `e` of the
transition arrays is the sum over its contributions
`j in range(entry_ptr[e], entry_ptr[e+1])` of
`weight[j] * prod(p(u) for u in products[product[j]] if u >= 0)`, where `p(u)`
is the probability (rate) expression of global update `u` (table `updates`:
command index, update index within the command) evaluated in the entry's
source state. `products` has one column per module (`-1`: the module does not
take part); an all `-1` row is a deadlock self-loop (value 1).
"""

from __future__ import annotations

import numpy as np


class Provenance:
    """Which updates produced each transition entry (see the module docstring).

    `updates` is stored; `entry_ptr` is made on access from the number of
    contributions of each entry (`counts`, None where every entry has one);
    `weight` from the stored weights (None where all are 1); `products` and
    `product` (the table of distinct update tuples and each contribution's
    row in it) are decoded on first access from one code per contribution
    (in the smallest unsigned type that holds them), so that building does
    not pay for them when nobody asks.
    """

    def __init__(
        self, updates, entry_ptr, weight, codes, radix, module_offset,
        n_module_updates, counts=None, nnz=None,
    ):  # fmt: skip
        self.updates = updates  # int64 [u, 2]: (command index, update index)
        if entry_ptr is not None:  # given as pointers
            counts = np.diff(entry_ptr)
            counts = None if (counts == 1).all() else counts
            nnz = entry_ptr.shape[0] - 1
        self._counts = counts  # int [nnz], or None when all ones
        self._nnz = nnz
        self._weight = weight  # float64 [c], or None when all ones
        self._codes = codes  # uint/int [c] (mixed radix) or int64 [c, n_modules]
        self._radix = radix
        self._offset = module_offset
        self._n_upd = n_module_updates
        self._decoded = None

    def _decode(self):
        if self._decoded is None:
            if self._codes.ndim == 2:
                products, inv = np.unique(self._codes, axis=0, return_inverse=True)
            else:
                uniq, inv = np.unique(self._codes, return_inverse=True)
                uniq = uniq.astype(np.int64)
                k = len(self._n_upd)
                products = np.full((uniq.size, k), -1, dtype=np.int64)
                for m in range(k):
                    digit = (uniq // self._radix[m]) % (self._n_upd[m] + 1)
                    products[:, m] = np.where(
                        digit > 0, self._offset[m] + digit - 1, -1
                    )
            self._decoded = (products, inv.reshape(-1).astype(np.int64))
        return self._decoded

    @property
    def entry_ptr(self) -> np.ndarray:
        """int64 [nnz + 1]: the contributions of entry `e` are
        `entry_ptr[e]:entry_ptr[e+1]`."""
        if self._counts is None:
            return np.arange(self._nnz + 1, dtype=np.int64)
        out = np.zeros(self._nnz + 1, dtype=np.int64)
        np.cumsum(self._counts, dtype=np.int64, out=out[1:])
        return out

    @property
    def weight(self) -> np.ndarray:
        """float64 [c]: factor of each contribution (1/k for a DTMC state with
        k choices, PRISM's uniform resolution; 1 otherwise)."""
        if self._weight is None:
            return np.ones(self._codes.shape[0])
        return self._weight

    @property
    def products(self) -> np.ndarray:
        """int64 [q, n_modules]: distinct tuples of global update ids (-1 = absent)."""
        return self._decode()[0]

    @property
    def product(self) -> np.ndarray:
        """int64 [c]: row of `products` of each contribution."""
        return self._decode()[1]
