"""The independent reference for the LTL automata: LTL semantics evaluated
directly on ultimately periodic ("lasso") words `u·v^ω`, and acceptance of
such a word by the automata (a run of the deterministic automaton, or an
accepting cycle of the LDBA's product with the lasso)."""

from __future__ import annotations

import numpy as np
from scipy.sparse import csgraph, csr_matrix


def holds(f: tuple, u: list[int], v: list[int]) -> bool:
    """Whether `u·v^ω` satisfies `f` (letters as bit masks of propositions),
    by the fixed-point characterisation of every operator on the lasso's
    positions (position `len(u)+len(v)-1` is followed by `len(u)`)."""
    word = list(u) + list(v)
    n = len(word)
    succ = np.array(list(range(1, n)) + [len(u)])
    memo: dict[tuple, np.ndarray] = {}

    def ev(g: tuple) -> np.ndarray:
        if g in memo:
            return memo[g]
        op = g[0]
        if op == "tt":
            r = np.ones(n, bool)
        elif op == "ff":
            r = np.zeros(n, bool)
        elif op in ("ap", "nap"):
            bits = np.array([(w >> g[1]) & 1 for w in word], bool)
            r = bits if op == "ap" else ~bits
        elif op == "and":
            r = ev(g[1]) & ev(g[2])
        elif op == "or":
            r = ev(g[1]) | ev(g[2])
        elif op == "X":
            r = ev(g[1])[succ]
        else:
            a = ev(g[1]) if len(g) == 3 else np.ones(n, bool)
            b = ev(g[-1])
            least = op in ("F", "U", "M")
            r = np.zeros(n, bool) if least else np.ones(n, bool)
            for _ in range(n + 2):
                nxt = r[succ]
                if op in ("F", "U", "G", "W"):
                    # F b = tt U b, G b = b W ff
                    if op == "G":
                        new = b & nxt
                    elif op == "F":
                        new = b | nxt
                    else:
                        new = b | (a & nxt)
                else:  # R, M: b ∧ (a ∨ next)
                    new = b & (a | nxt)
                if np.array_equal(new, r):
                    break
                r = new
        memo[g] = r
        return r

    return bool(ev(f)[0])


def dfa_accepts(aut, u: list[int], v: list[int]) -> bool:
    """Whether the deterministic `Residual` reaches an accepting state."""
    word = list(u) + list(v)
    q, i, seen = aut.initial, 0, set()
    while (i, q) not in seen:
        if aut.accepting(q):
            return True
        seen.add((i, q))
        q = aut.step(q, word[i])
        i = i + 1 if i + 1 < len(word) else len(u)
    return aut.accepting(q)


def ldba_accepts(aut, u: list[int], v: list[int]) -> bool:
    """Whether some run of the LDBA on `u·v^ω` is accepting: a reachable
    cycle of (position, state) in the accepting component, alive, whose
    states' marks cover the required monitors."""
    word = list(u) + list(v)
    n = len(word)
    start = (0, aut.initial)
    ids, nodes, edges = {start: 0}, [start], []
    k = 0
    while k < len(nodes):
        i, q = nodes[k]
        succs = [((i + 1) if i + 1 < n else len(u), aut.step(q, word[i]))]
        succs += [(i, j) for j in aut.jumps(q)]
        for s in succs:
            if s not in ids:
                ids[s] = len(nodes)
                nodes.append(s)
            edges.append((k, ids[s]))
        k += 1
    src, dst = np.array(edges).T
    g = csr_matrix((np.ones(len(src)), (src, dst)), shape=(len(nodes),) * 2)
    _, comp = csgraph.connected_components(g, directed=True, connection="strong")
    for c in np.unique(comp):
        members = np.flatnonzero(comp == c)
        inner = [(a, b) for a, b in edges if comp[a] == c and comp[b] == c]
        if not inner:
            continue
        qs = [nodes[m][1] for m in members]
        if any(aut.dead(q) or not aut.in_accepting_component(q) for q in qs):
            continue
        marks = 0
        for q in qs:
            marks |= aut.marks(q)
        need = aut.required(qs[0])
        if marks & need == need:
            return True
    return False
