"""PRISM's tandem queueing network (`ctmcs/tandem/tandem.sm`) generated
directly as arrays, for the scaling benchmark at sizes the builder does not
reach within a device call (10⁸ states and more).

The model, as in the `.sm` file: server C holds `sc` in `0..c` customers in
phase `ph` in `1..2`, server M holds `sm` in `0..c`;

- an arrival, rate `4 c`, when `sc < c`: `sc + 1`;
- `route` (C's rate times M's rate 1, when `sm < c`): from phase 1 at rate
  1.8, from phase 2 at rate 2 (back to phase 1): `sc - 1, ph = 1, sm + 1`;
- phase 1 to 2 at rate 0.2 when `sc > 0`;
- a departure from M at rate 4 when `sm > 0`: `sm - 1`.

Every valuation with `ph = 1`, and with `ph = 2` and `sc > 0`, is reachable
from `(0, 1, 0)`: `(c + 1)(2 c + 1)` states. Their breadth-first distance
is `sc + 2 sm + [ph = 2]` (each customer in M arrived and was routed; a
phase-2 state took one more step), so the states are numbered by that
level (ties by `sm`, then `sc`, then `ph`): the BFS order of jaxmc's
builder up to the order within a level, which is what makes the matrix
banded for the row partition. `tests/bench/test_tandem_gen.py` checks the
states, the transitions and the levels against `jaxmc.build` at small `c`.
"""

from __future__ import annotations

import numpy as np


RATES = {"mu1a": 0.2, "mu1b": 1.8, "mu2": 2.0, "kappa": 4.0}


def _grid(sc, ph, sm, c: int):
    """The valuations' places in the full `(sm, sc, ph)` grid."""
    return (sm * (c + 1) + sc) * 2 + (ph - 1)


def _exit_rates(c: int, sc, ph, sm) -> np.ndarray:
    return (
        np.where(sc < c, 4.0 * c, 0.0)
        + np.where(
            (sc > 0) & (sm < c), np.where(ph == 1, RATES["mu1b"], RATES["mu2"]), 0
        )
        + np.where((sc > 0) & (ph == 1), RATES["mu1a"], 0.0)
        + np.where(sm > 0, RATES["kappa"], 0.0)
    )


def order(c: int):
    """`(sv, pos)`: `[n, 3]` int32 valuations `(sc, ph, sm)` in the
    benchmark's order, and `pos`, each grid place's state number (-1 for
    the unreachable `sc = 0, ph = 2`)."""
    sm, sc, ph = np.meshgrid(
        np.arange(c + 1, dtype=np.int64),
        np.arange(c + 1, dtype=np.int64),
        np.arange(1, 3, dtype=np.int64),
        indexing="ij",
    )
    sc, ph, sm = sc.ravel(), ph.ravel(), sm.ravel()  # grid order
    keep = (ph == 1) | (sc > 0)
    level = np.where(keep, sc + 2 * sm + (ph == 2), 3 * c + 2)
    perm = np.argsort(level, kind="stable")[: int(keep.sum())]
    pos = np.full(len(sc), -1, dtype=np.int64)
    pos[perm] = np.arange(len(perm))
    sv = np.stack([sc[perm], ph[perm], sm[perm]], axis=1).astype(np.int32)
    return sv, pos


def states(c: int) -> np.ndarray:
    """`[n, 3]` int32 valuations `(sc, ph, sm)` in the benchmark's order."""
    return order(c)[0]


def uniformised(c: int, factor: float = 1.02, chunk: int = 1 << 22):
    """`(indptr, indices, data)` of `P = I + Q / q` (q = `factor` times the
    largest exit rate, `4 c + 6`, as `benchmarks/scaling.py`'s
    `uniformised`), rows in the benchmark's order, columns sorted within
    each row; int64 indptr, int32 indices, float64 data. The rows are made
    in chunks of `chunk` states on a thread pool (numpy releases the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    sv, pos = order(c)
    n = len(sv)
    # the largest exit rate: the exit rate depends on sc and sm only
    # through sc in {0, c} and sm in {0, c}, so the corner values suffice
    corner = np.array([(a, p, b) for a in {0, 1, max(c - 1, 0), c}
                       for p in (1, 2) for b in {0, 1, max(c - 1, 0), c}
                       if p == 1 or a > 0])  # fmt: skip
    q = factor * float(_exit_rates(c, *corner.T).max())
    K = 5
    cols = np.empty((n, K), dtype=np.int32)
    vals = np.empty((n, K))
    lengths = np.empty(n, dtype=np.int64)

    def rows(lo):
        hi = min(lo + chunk, n)
        m = hi - lo
        sc, ph, sm = (sv[lo:hi, i].astype(np.int64) for i in range(3))
        moves = [  # (condition, rate, (dsc, new ph or 0 to keep, dsm))
            (sc < c, np.full(m, 4.0 * c), (1, 0, 0)),
            ((sc > 0) & (sm < c),
             np.where(ph == 1, RATES["mu1b"], RATES["mu2"]), (-1, 1, 1)),
            ((sc > 0) & (ph == 1), np.full(m, RATES["mu1a"]), (0, 2, 0)),
            (sm > 0, np.full(m, RATES["kappa"]), (0, 0, -1)),
        ]  # fmt: skip
        cc = np.empty((m, K), dtype=np.int64)
        vv = np.zeros((m, K))
        cc[:, 0] = np.arange(lo, hi)
        out = np.zeros(m)
        for k, (cond, rate, (dsc, nph, dsm)) in enumerate(moves, start=1):
            tph = np.full(m, nph) if nph else ph
            at = _grid(np.where(cond, sc + dsc, 0), np.where(cond, tph, 1),
                       np.where(cond, sm + dsm, 0), c)  # fmt: skip
            cc[:, k] = np.where(cond, pos[at], n)
            vv[:, k] = np.where(cond, rate / q, 0.0)
            out += np.where(cond, rate, 0.0)
        vv[:, 0] = 1.0 - out / q
        # each row's entries by column (absent ones, column n, last)
        by_col = np.argsort(cc, axis=1, kind="stable")
        cc = np.take_along_axis(cc, by_col, axis=1)
        vals[lo:hi] = np.take_along_axis(vv, by_col, axis=1)
        cols[lo:hi] = np.minimum(cc, n - 1)
        lengths[lo:hi] = (cc < n).sum(axis=1)

    with ThreadPoolExecutor() as pool:
        list(pool.map(rows, range(0, n, chunk)))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    keep = np.arange(K)[None, :] < lengths[:, None]
    return indptr, cols[keep], vals[keep]
