"""Parallel composition: the enabled commands of a batch of states combined
into choices along the system clause's synchronisation vectors."""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from ..lang import ast
from .compile import Compiled


# A synchronisation vector: the resulting label (None = unlabelled) and its
# participants, (module position, action) pairs; the vector fires in a state
# with one enabled command of each participant (PRISM's semantics of the
# system clause, flattened once, as JANI's synchronisation vectors).
_Vector = tuple[str | None, tuple[tuple[int, str | None], ...]]


def sync_vectors(comp: Compiled, node) -> tuple[frozenset[str], list[_Vector]]:
    """The alphabet and synchronisation vectors of a system (sub)expression."""
    if isinstance(node, ast.SysModule):
        pos = comp.module_pos[node.name]
        mod = comp.checked.modules[pos]
        vecs: list[_Vector] = []
        if any(c.action is None for c in mod.commands):
            vecs.append((None, ((pos, None),)))
        for a in sorted(mod.alphabet):
            vecs.append((a, ((pos, a),)))
        return mod.alphabet, vecs
    if isinstance(node, ast.SysHide):
        alpha, vecs = sync_vectors(comp, node.operand)
        hidden = frozenset(node.actions)
        return alpha - hidden, [(None if a in hidden else a, p) for a, p in vecs]
    if isinstance(node, ast.SysRename):
        alpha, vecs = sync_vectors(comp, node.operand)
        ren = dict(node.renames)
        return (
            frozenset(ren.get(a, a) for a in alpha),
            [(ren.get(a, a) if a is not None else None, p) for a, p in vecs],
        )
    la, lv = sync_vectors(comp, node.left)
    ra, rv = sync_vectors(comp, node.right)
    if isinstance(node, ast.SysFullParallel):
        sync = la & ra
    elif isinstance(node, ast.SysInterleave):
        sync = frozenset()
    elif isinstance(node, ast.SysParallel):
        sync = frozenset(node.actions)
    else:
        raise UnsupportedError(f"system construct `{type(node).__name__}`", node.span)
    out: list[_Vector] = []
    for a, p in lv:
        if a is None or a not in sync:
            out.append((a, p))
        else:
            out.extend((a, p + q) for b, q in rv if b == a)
    out.extend((a, p) for a, p in rv if a is None or a not in sync)
    return la | ra, out


def _product(
    sa: np.ndarray, cols_a: list[np.ndarray], sb: np.ndarray, cb: np.ndarray, n: int
):
    """Per-state cross product of enabled pair sets (synchronisation): the
    rows of `(sa, cols_a)` times the rows of `(sb, cb)` with the same state,
    in the order of `a`, then `b`."""
    ob = np.argsort(sb, kind="stable")
    cnt_b = np.bincount(sb, minlength=n)
    start_b = np.cumsum(cnt_b) - cnt_b
    rep = cnt_b[sa]
    total = int(rep.sum())
    if total == sa.size and (rep == 1).all():  # one partner each: no repeat
        ib = ob[start_b[sa]]
        return sa, cols_a + [cb[ib]]
    ia = np.repeat(np.arange(sa.size), rep)
    within = np.arange(total) - np.repeat(np.cumsum(rep) - rep, rep)
    ib = ob[start_b[sa[ia]] + within]
    return sa[ia], [c[ia] for c in cols_a] + [cb[ib]]


class Pairs:
    """The enabled (state, command) pairs of one module in a batch, numbered
    per module: the pairs of each (module, action) used by the system are
    contiguous, command by command, states ascending within a command.

    - `src[p]`: the state of pair `p`; `blocks`: `(command index, start,
      stop)` of each command's pairs;
    - `used`: bool per pair, or None where every pair takes part in some
      choice (a pair of a synchronised action whose partners are not
      enabled in its state takes part in none: its updates are not
      evaluated, as the builder evaluates updates only where they fire).
    """

    __slots__ = ("src", "blocks", "used", "size", "synced", "_parts", "_full")

    def __init__(self):
        self._parts: list[np.ndarray] = []
        self.blocks: list[tuple[int, int, int]] = []
        self.size = 0
        self.used: np.ndarray | None = None
        self.synced = False  # some pairs are of a synchronised action
        self._full: list[tuple[int, int]] = []  # ranges used by 1-part vectors

    def add(self, ci: int, src: np.ndarray) -> np.ndarray:
        start = self.size
        self.size += src.size
        self._parts.append(src)
        self.blocks.append((ci, start, self.size))
        return np.arange(start, self.size, dtype=np.int64)

    def finish(self, partial: list[np.ndarray]) -> None:
        """Join the states; `partial`: the pair columns of products."""
        parts = self._parts
        self.src = (
            parts[0] if len(parts) == 1 else
            np.concatenate(parts) if parts else np.zeros(0, np.int64)
        )  # fmt: skip
        if self.synced:
            full = self._full
            if len(full) == 1 and full[0] == (0, self.size):
                return
            used = np.zeros(self.size, dtype=bool)
            for a, b in full:
                used[a:b] = True
            for col in partial:
                used[col] = True
            self.used = used


class Composer:
    """Turns the guard masks of a batch into choices, along the system's
    synchronisation vectors."""

    def __init__(self, comp: Compiled):
        self.comp = comp
        self.k = len(comp.checked.modules)
        _, vecs = sync_vectors(comp, comp.checked.system)
        # Unlabelled first, then by action name: a fixed choice order.
        self.vectors = sorted(vecs, key=lambda v: (v[0] is not None, v[0] or ""))
        self.members: dict[tuple[int, str | None], list[int]] = {}
        for m, mod in enumerate(comp.checked.modules):
            for c in mod.commands:
                self.members.setdefault((m, c.action), []).append(c.index)

    def run(self, masks: dict[int, np.ndarray], n: int):
        """Choices of the batch: `(pairs, blocks)`, `pairs` a `Pairs` per
        module and `blocks` `(label, src, modules, pair columns)` per
        non-empty vector, in vector order (choices unsorted), each with its
        vector's index first."""
        pairs = [Pairs() for _ in range(self.k)]
        partial: list[list[np.ndarray]] = [[] for _ in range(self.k)]
        enabled: dict[tuple[int, str | None], tuple[np.ndarray, np.ndarray]] = {}

        def get(key):
            got = enabled.get(key)
            if got is None:
                pm = pairs[key[0]]
                start = pm.size
                srcs, ids = [], []
                for ci in self.members.get(key, ()):
                    src = masks[ci].nonzero()[0]
                    if src.size:
                        srcs.append(src)
                        ids.append(pm.add(ci, src))
                if not srcs:
                    got = (np.zeros(0, np.int64), np.zeros(0, np.int64))
                elif len(srcs) == 1:
                    got = (srcs[0], ids[0])
                else:
                    got = (np.concatenate(srcs), np.arange(start, pm.size))
                enabled[key] = got
            return got

        blocks = []
        for v, (label, parts) in enumerate(self.vectors):
            src, c0 = get(parts[0])
            if src.size == 0:
                continue
            if len(parts) == 1:
                m = parts[0][0]
                pairs[m]._full.append((int(c0[0]), int(c0[-1]) + 1))
                blocks.append((v, label, src, [m], [c0]))
                continue
            for m, _ in parts:
                pairs[m].synced = True
            cols = [c0]
            for key in parts[1:]:
                sb, cb = get(key)
                if sb.size == 0:
                    src = sb
                    break
                src, cols = _product(src, cols, sb, cb, n)
            if src.size:
                mods = [m for m, _ in parts]
                for m, col in zip(mods, cols):
                    partial[m].append(col)
                blocks.append((v, label, src, mods, cols))
        for m in range(self.k):
            pairs[m].finish(partial[m])
        return pairs, blocks
