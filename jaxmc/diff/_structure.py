"""The structure a parametric problem was compiled on, against the graph at
another parameter point.

The state space is built once, at a build point where every
parameter-dependent probability is positive, and its qualitative
precomputation (prob0/prob1 sets, BSCCs) is done on that graph. At another
point some of those probabilities may be 0 (`lambda = 0`): the transitions are
then absent from the model at that point. The values computed on the built
structure stay right as long as the precomputation gives the same sets on
the graph of the positive entries at that point; `GraphLog` records every
precomputation a problem ran and re-runs them on that graph to tell.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping

import numpy as np

from ..explore.model import ExplicitModel


class GraphLog:
    """Runs the graph precomputations of a problem on its built model,
    recording each call (function, mask arguments, result)."""

    def __init__(self, model: ExplicitModel):
        self.model = model
        self.calls: list[tuple[Callable, tuple, object]] = []

    def __call__(self, fn: Callable, *args):
        out = fn(self.model, *args)
        self.calls.append((fn, args, out))
        return out

    def differs(self, val: np.ndarray) -> str | None:
        """None if every recorded precomputation gives the same result on the
        graph of the entries positive in `val` (the entry values at another
        point); else the name of the first one that does not."""
        keep = np.asarray(val) > 0
        if keep.all():
            return None
        pruned = dataclasses.replace(
            self.model, val=np.where(keep, self.model.val, 0.0)
        )
        for fn, args, out in self.calls:
            if not _same(out, fn(pruned, *args)):
                return fn.__name__
        return None


def _same(a, b) -> bool:
    if isinstance(a, tuple) and len(a) == 2 and isinstance(a[1], int):
        # (labels, count) of a decomposition: the same partition, whatever
        # the numbering
        (la, ca), (lb, cb) = a, b
        if ca != cb or not np.array_equal(la < 0, lb < 0):
            return False
        inside = la >= 0
        pairs = np.unique(np.stack([la[inside], lb[inside]]), axis=1)
        return pairs.shape[1] == ca
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return np.array_equal(np.asarray(a), np.asarray(b))


def generic_points(
    point: Mapping[str, float], tries: int = 4
) -> Iterator[dict[str, float]]:
    """Other build points to try when a parameter-dependent probability is 0
    at `point`: first with 0 and 1 replaced by 1/2 (a probability `p` beside
    `1-p`, a rate), then a few reproducible random points of the same
    magnitude."""
    first = {k: (0.5 if v in (0.0, 1.0) else v) for k, v in point.items()}
    if first != dict(point):
        yield first
    rng = np.random.default_rng(0)
    for _ in range(tries):
        yield {
            k: float(rng.uniform(0.05, 0.95) * max(1.0, abs(v)))
            for k, v in point.items()
        }
