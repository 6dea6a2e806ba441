"""The numpy functions that lowered expressions call (`jaxmc.explore.lower`),
and the located errors they raise.

Functions that PRISM makes fail for some arguments come in pairs: `_ipow`
computes a value on every state (0 where it fails), `_ipow_bad` says where it
fails; the generated code passes the failures through `Checks.check`, which
raises only for states where the expression is evaluated (its active mask).
"""

from __future__ import annotations

import numpy as np

from ..lang import ast


INT_MIN = -(2**31)
INT_MAX = 2**31 - 1


def _mand(m, x):
    """The active mask `m` (None: all states) restricted to `x`."""
    return x if m is None else np.logical_and(m, x)


def _ovf(x):
    return (x < INT_MIN) | (x > INT_MAX)


def _ipow_raw(a, b):
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    # PRISM: `Math.pow` on the doubles, then an exact conversion to int
    return b, np.power(a.astype(np.float64), b.astype(np.float64))


def _ipow_bad(a, b):
    b, res = _ipow_raw(a, b)
    return (b < 0) | ~(np.abs(res) <= INT_MAX)


def _ipow(a, b):
    b, res = _ipow_raw(a, b)
    bad = (b < 0) | ~(np.abs(res) <= INT_MAX)
    return np.where(bad, 0, res).astype(np.int64)


def _imod(a, b):
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    return np.mod(a, np.where(b <= 0, 1, b))


def _to_int(x):
    x = np.asarray(x, dtype=np.float64)
    return np.where(_int_bad(x), 0, x).astype(np.int64)


def _int_bad(x):
    return ~((x >= INT_MIN) & (x <= INT_MAX))  # NaN compares false


def _floor(x):
    return _to_int(np.floor(x))


def _ceil(x):
    return _to_int(np.ceil(x))


def _round(x):
    return _to_int(np.floor(np.add(x, 0.5)))


def _floor_bad(x):
    return _int_bad(np.floor(np.asarray(x, dtype=np.float64)))


def _ceil_bad(x):
    return _int_bad(np.ceil(np.asarray(x, dtype=np.float64)))


def _round_bad(x):
    return _int_bad(np.floor(np.add(np.asarray(x, dtype=np.float64), 0.5)))


def _fpow(a, b):
    return np.power(np.asarray(a, dtype=np.float64), b)


def _div(a, b):
    return np.true_divide(np.asarray(a, dtype=np.float64), b)


def _log(x, b):
    return np.log(np.asarray(x, dtype=np.float64)) / np.log(np.asarray(b, np.float64))


RUNTIME = {
    "np": np,
    "_mand": _mand,
    "_ovf": _ovf,
    "_floor": _floor,
    "_ceil": _ceil,
    "_round": _round,
    "_floor_bad": _floor_bad,
    "_ceil_bad": _ceil_bad,
    "_round_bad": _round_bad,
    "_imod": _imod,
    "_ipow": _ipow,
    "_ipow_bad": _ipow_bad,
    "_fpow": _fpow,
    "_div": _div,
    "_log": _log,
    "_where": np.where,
    "_and": np.logical_and,
    "_or": np.logical_or,
    "_not": np.logical_not,
    "_eq": np.equal,
    "_ne": np.not_equal,
    "_lt": np.less,
    "_le": np.less_equal,
    "_gt": np.greater,
    "_ge": np.greater_equal,
    "_add": np.add,
    "_sub": np.subtract,
    "_mul": np.multiply,
    "_neg": np.negative,
    "_min": np.minimum,
    "_max": np.maximum,
}


class Checks:
    """The error checks of one compiled function: `add` registers a check
    (a message maker, the node's span, a hint) and returns its id; the
    generated code calls `check(bad, mask, id, C, N, *values)`."""

    def __init__(
        self, index: dict[str, int], bools: frozenset[str], error: type[Exception]
    ):
        self.index = index
        self.bools = bools
        self.error = error
        self.entries: list[tuple] = []

    def add(self, message, span: ast.Span | None, hint: str | None) -> int:
        self.entries.append((message, span, hint))
        return len(self.entries) - 1

    def check(self, bad, mask, eid: int, C, N, *values) -> None:
        if mask is not None:
            bad = np.logical_and(bad, mask)
        if not np.any(bad):
            return
        bad = np.asarray(bad)
        if bad.ndim == 0:
            n = N if N is not None else self._rows(C)
            if n == 0:
                return
            j = 0
        else:
            j = int(np.argmax(bad))
        message, span, hint = self.entries[eid]
        vals = [_scalar(v, j) for v in values]
        raise self.error(
            f"{message(*vals)} in state {self.witness(C, j)}", span, hint=hint
        )

    def _rows(self, C) -> int:
        for i in self.index.values():
            return len(np.atleast_1d(C[i]))
        return 1

    def witness(self, C, j: int) -> str:
        parts = []
        for name, i in sorted(self.index.items(), key=lambda kv: kv[1]):
            try:
                x = int(np.atleast_1d(C[i])[j])
            except (IndexError, KeyError, TypeError):
                continue
            parts.append(
                f"{name}={'true' if x else 'false'}"
                if name in self.bools
                else f"{name}={x}"
            )
        return "(" + ", ".join(parts) + ")"


def _scalar(v, j: int):
    a = np.asarray(v)
    x = a if a.ndim == 0 else a[j]
    return x.item()
