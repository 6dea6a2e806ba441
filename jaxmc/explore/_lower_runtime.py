"""The numpy functions that lowered expressions call (`jaxmc.explore.lower`),
and the located errors they raise.

The operators are PRISM's, defined once in `jaxmc.semantics.functions` and
bound here to an array namespace (`runtime`). Functions that PRISM makes fail
for some arguments come in pairs: `_ipow` computes a value on every state (0
where it fails), `_ipow_bad` says where it fails; the generated code passes
the failures through `Checks.check`, which raises only for states where the
expression is evaluated (its active mask).
"""

from __future__ import annotations

import functools

import numpy as np

from ..lang import ast
from ..semantics import functions as F


INT_MIN = F.INT_MIN
INT_MAX = F.INT_MAX


def _mand(xp, m, x):
    """The active mask `m` (None: all states) restricted to `x`."""
    return x if m is None else xp.logical_and(m, x)


@functools.cache
def runtime(xp) -> dict:
    """The names the generated code calls, bound to the array namespace `xp`
    (numpy for the builder, jax.numpy for the parametric path): PRISM's
    operators from `jaxmc.semantics.functions`, the plain ones as `xp`'s own
    functions."""

    def bind(f, *args):
        return functools.partial(f, xp, *args)

    ns = {
        "np": xp,
        "_mand": bind(_mand),
        "_ovf": F.int_out_of_range,
        "_imod": bind(F.imod),
        "_ipow": bind(F.ipow),
        "_ipow_bad": bind(F.ipow_bad),
        "_fpow": bind(F.fpow),
        "_div": bind(F.fdiv),
        "_log": bind(F.flog),
        "_fmin": bind(F.fmin),
        "_fmax": bind(F.fmax),
        "_deq": bind(F.deq),
        "_dne": bind(F.dne),
        "_f64": lambda x: xp.asarray(x, dtype=xp.float64),
        "_where": xp.where,
        "_and": xp.logical_and,
        "_or": xp.logical_or,
        "_not": xp.logical_not,
        "_eq": xp.equal,
        "_ne": xp.not_equal,
        "_lt": xp.less,
        "_le": xp.less_equal,
        "_gt": xp.greater,
        "_ge": xp.greater_equal,
        "_add": xp.add,
        "_sub": xp.subtract,
        "_mul": xp.multiply,
        "_neg": xp.negative,
        "_min": xp.minimum,
        "_max": xp.maximum,
    }
    for f in F.ROUNDING:
        ns[f"_{f}"] = bind(F.rounding, f)
        ns[f"_{f}_bad"] = bind(F.rounding_bad, f)
    return ns


RUNTIME = runtime(np)


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
