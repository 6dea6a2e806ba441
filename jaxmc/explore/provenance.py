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

    `updates`, `entry_ptr` and `weight` are stored; `products` and `product`
    (the table of distinct update tuples and each contribution's row in it)
    are decoded on first access from one int64 code per contribution, so that
    building does not pay for them when nobody asks.
    """

    def __init__(
        self, updates, entry_ptr, weight, codes, radix, module_offset, n_module_updates
    ):
        self.updates = updates  # int64 [u, 2]: (command index, update index)
        self.entry_ptr = entry_ptr  # int64 [nnz + 1]
        self._weight = weight  # float64 [c], or None when all ones
        self._codes = codes  # int64 [c] (mixed radix) or [c, n_modules] gids
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
    def weight(self) -> np.ndarray:
        """float64 [c]: factor of each contribution (1/k for a DTMC state with
        k choices, PRISM's uniform resolution; 1 otherwise)."""
        if self._weight is None:
            return np.ones(int(self.entry_ptr[-1]))
        return self._weight

    @property
    def products(self) -> np.ndarray:
        """int64 [q, n_modules]: distinct tuples of global update ids (-1 = absent)."""
        return self._decode()[0]

    @property
    def product(self) -> np.ndarray:
        """int64 [c]: row of `products` of each contribution."""
        return self._decode()[1]
