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
    """Per-state cross product of enabled command sets (synchronisation)."""
    ob = np.argsort(sb, kind="stable")
    cnt_b = np.bincount(sb, minlength=n)
    start_b = np.cumsum(cnt_b) - cnt_b
    rep = cnt_b[sa]
    total = int(rep.sum())
    ia = np.repeat(np.arange(sa.size), rep)
    within = np.arange(total) - np.repeat(np.cumsum(rep) - rep, rep)
    ib = ob[start_b[sa[ia]] + within]
    return sa[ia], [c[ia] for c in cols_a] + [cb[ib]]


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
        """Choices of the batch: `(src, cmds [nc, K], label)`, unsorted."""
        enabled: dict[tuple[int, str | None], tuple[np.ndarray, np.ndarray]] = {}

        def pairs(key):
            got = enabled.get(key)
            if got is None:
                srcs, cmds = [], []
                for ci in self.members.get(key, ()):
                    src = np.flatnonzero(masks[ci])
                    if src.size:
                        srcs.append(src)
                        cmds.append(np.full(src.size, ci, dtype=np.int64))
                if not srcs:
                    got = (np.zeros(0, np.int64), np.zeros(0, np.int64))
                elif len(srcs) == 1:
                    got = (srcs[0], cmds[0])
                else:
                    got = (np.concatenate(srcs), np.concatenate(cmds))
                enabled[key] = got
            return got

        blocks = []
        for label, parts in self.vectors:
            src, c0 = pairs(parts[0])
            if src.size == 0:
                continue
            cols = [c0]
            for key in parts[1:]:
                sb, cb = pairs(key)
                if sb.size == 0:
                    src = sb
                    break
                src, cols = _product(src, cols, sb, cb, n)
            if src.size:
                blocks.append((label, src, [m for m, _ in parts], cols))
        return blocks
