"""The order of a model's action names (`ExplicitModel.action_names`).

The builder numbers the actions in the order its batches first meet them:
batch by batch, each batch's choices in the order of the synchronisation
vectors. That order depends on where batches begin; it is kept the one of
batches of `chunk_size` states per BFS level (the device explorer rebuilds
the same, `device.finish.label_ids`), whatever size the batches actually
have: each action keeps the smallest `(level, chunk of the level, vector)`
it was met at, and the names are renumbered by it at the end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np


if TYPE_CHECKING:
    from .builder import Builder


class ActionOrder:
    def __init__(self):
        self.where: tuple[int, int] = (0, 0)  # (level, chunk) of the batch
        self.first: dict[str, tuple[int, int, int]] = {}

    def at(self, level: int, chunk: int) -> None:
        """The next batch lies in `chunk` (a `chunk_size` slice) of `level`."""
        self.where = (level, chunk)

    def id(self, bfs: Builder, name: str | None, vector: int) -> int:
        """The (provisional) id of action `name`, met in the current batch
        by a choice of `vector`."""
        lab = bfs.label_id.get(name)
        if lab is None:
            lab = bfs.label_id[name] = len(bfs.label_names)
            bfs.label_names.append(name)
        if name is not None:
            key = (*self.where, vector)
            if key < self.first.get(name, key):
                self.first[name] = key
            self.first.setdefault(name, key)
        return lab

    def finish(self, bfs: Builder) -> None:
        """Renumber the names (and the ids in the action chunks) by the
        place each was first met."""
        names = bfs.label_names
        new = [None] + sorted(names[1:], key=lambda a: self.first[a])
        if new == names:
            return
        index = {a: i for i, a in enumerate(new)}
        perm = np.array([index[a] for a in names], dtype=np.int64)
        for i, c in enumerate(bfs.actions):
            if isinstance(c, int):
                continue
            if bfs.nd:  # -1: a deadlock's self-loop
                bfs.actions[i] = np.where(c >= 0, perm[c], -1).astype(c.dtype)
            else:
                bfs.actions[i] = perm[c].astype(c.dtype)
        bfs.label_names[:] = new
        bfs.label_id.clear()
        bfs.label_id.update(index)
