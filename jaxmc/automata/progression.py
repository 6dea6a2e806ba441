"""Formula progression ("after function") on canonical Boolean combinations.

`af(φ, σ)` is the formula that the rest of a word must satisfy after its first
letter `σ` (a set of true propositions, as a bit mask) when the word is to
satisfy `φ` (Esparza, Křetínský, Sickert, "One theorem to rule them all",
LICS 2018):

    af(p) = tt if p ∈ σ else ff        af(X a) = a
    af(F a) = af(a) ∨ F a              af(G a) = af(a) ∧ G a
    af(a U b) = af(b) ∨ (af(a) ∧ a U b)  af(a W b) likewise with W
    af(a R b) = af(b) ∧ (af(a) ∨ a R b)  af(a M b) likewise with M

A state of the automata built on it is a Boolean combination of temporal
subformulas (and propositions under `X`), held as a reduced ordered BDD over
those atoms: propositionally equivalent formulas are one state, which makes
the automata finite. For a co-safe formula, a finite word is a good prefix iff
its progression is (propositionally) `tt`; for a safe one, a bad prefix iff it
is `ff`.
"""

from __future__ import annotations

from .formula import FF, TT


FALSE, TRUE = 0, 1


class BDD:
    """Reduced ordered binary decision diagrams with a unique table; nodes are
    ints (0 false, 1 true), variables ordered by index."""

    def __init__(self) -> None:
        self.nodes: list[tuple[int, int, int]] = [(1 << 62, 0, 0), (1 << 62, 1, 1)]
        self.unique: dict[tuple[int, int, int], int] = {}
        self.memo: dict[tuple[int, int, int], int] = {}

    def mk(self, var: int, lo: int, hi: int) -> int:
        if lo == hi:
            return lo
        key = (var, lo, hi)
        node = self.unique.get(key)
        if node is None:
            node = len(self.nodes)
            self.nodes.append(key)
            self.unique[key] = node
        return node

    def var(self, v: int) -> int:
        return self.mk(v, FALSE, TRUE)

    def ite(self, f: int, g: int, h: int) -> int:
        """If-then-else: `(f ∧ g) ∨ (¬f ∧ h)`."""
        if f == TRUE or g == h:
            return g
        if f == FALSE:
            return h
        if g == TRUE and h == FALSE:
            return f
        key = (f, g, h)
        r = self.memo.get(key)
        if r is not None:
            return r
        v = min(self.nodes[f][0], self.nodes[g][0], self.nodes[h][0])
        f0, f1 = self._cof(f, v)
        g0, g1 = self._cof(g, v)
        h0, h1 = self._cof(h, v)
        r = self.mk(v, self.ite(f0, g0, h0), self.ite(f1, g1, h1))
        self.memo[key] = r
        return r

    def _cof(self, f: int, v: int) -> tuple[int, int]:
        var, lo, hi = self.nodes[f]
        return (lo, hi) if var == v else (f, f)

    def and_(self, f: int, g: int) -> int:
        return self.ite(f, g, FALSE)

    def or_(self, f: int, g: int) -> int:
        return self.ite(f, TRUE, g)

    def not_(self, f: int) -> int:
        return self.ite(f, FALSE, TRUE)

    def support(self, f: int) -> set[int]:
        """The variables `f` depends on."""
        out: set[int] = set()
        seen: set[int] = set()
        stack = [f]
        while stack:
            n = stack.pop()
            if n <= TRUE or n in seen:
                continue
            seen.add(n)
            var, lo, hi = self.nodes[n]
            out.add(var)
            stack += [lo, hi]
        return out


class Progression:
    """Formulas as BDDs over their atoms, and `af` on them; shared by the
    automata of one formula (its states are BDD nodes of one table)."""

    def __init__(self) -> None:
        self.bdd = BDD()
        self.var_of: dict[tuple, int] = {}
        self.atom_of: list[tuple] = []
        self._to: dict[tuple, int] = {}
        self._af: dict[tuple[tuple, int], int] = {}
        self._step: dict[tuple[int, int], int] = {}
        self._sub: dict[tuple[object, int], int] = {}

    def atom(self, f: tuple) -> int:
        """The BDD of the single atom `f` (a temporal formula or `("ap", i)`)."""
        v = self.var_of.get(f)
        if v is None:
            v = len(self.atom_of)
            self.var_of[f] = v
            self.atom_of.append(f)
        return self.bdd.var(v)

    def to_bdd(self, f: tuple) -> int:
        """`f` as a Boolean combination of its atoms."""
        r = self._to.get(f)
        if r is not None:
            return r
        op, b = f[0], self.bdd
        if op == "tt":
            r = TRUE
        elif op == "ff":
            r = FALSE
        elif op == "ap":
            r = self.atom(f)
        elif op == "nap":
            r = b.not_(self.atom(("ap", f[1])))
        elif op == "and":
            r = b.and_(self.to_bdd(f[1]), self.to_bdd(f[2]))
        elif op == "or":
            r = b.or_(self.to_bdd(f[1]), self.to_bdd(f[2]))
        else:
            r = self.atom(f)
        self._to[f] = r
        return r

    def af(self, f: tuple, letter: int) -> int:
        """`af(f, letter)` as a BDD; `letter` has bit `i` set iff proposition
        `i` holds."""
        key = (f, letter)
        r = self._af.get(key)
        if r is not None:
            return r
        op, b = f[0], self.bdd
        if op == "tt":
            r = TRUE
        elif op == "ff":
            r = FALSE
        elif op in ("ap", "nap"):
            r = TRUE if ((letter >> f[1]) & 1) == (op == "ap") else FALSE
        elif op == "and":
            r = b.and_(self.af(f[1], letter), self.af(f[2], letter))
        elif op == "or":
            r = b.or_(self.af(f[1], letter), self.af(f[2], letter))
        elif op == "X":
            r = self.to_bdd(f[1])
        elif op == "F":
            r = b.or_(self.af(f[1], letter), self.atom(f))
        elif op == "G":
            r = b.and_(self.af(f[1], letter), self.atom(f))
        elif op in ("U", "W"):
            keep = b.and_(self.af(f[1], letter), self.atom(f))
            r = b.or_(self.af(f[2], letter), keep)
        elif op in ("R", "M"):
            keep = b.or_(self.af(f[1], letter), self.atom(f))
            r = b.and_(self.af(f[2], letter), keep)
        else:  # pragma: no cover - formulas are built by `formula`
            raise ValueError(f"unknown LTL operator {op!r}")
        self._af[key] = r
        return r

    def step(self, node: int, letter: int) -> int:
        """The successor of state `node` on `letter`: `af` of each atom."""
        if node <= TRUE:
            return node
        key = (node, letter)
        r = self._step.get(key)
        if r is None:
            var, lo, hi = self.bdd.nodes[node]
            cond = self.af(self.atom_of[var], letter)
            r = self.bdd.ite(cond, self.step(hi, letter), self.step(lo, letter))
            self._step[key] = r
        return r

    def substitute(self, node: int, fn, key: object) -> int:
        """`node` with every temporal atom `a` replaced by `fn(a)` (a
        formula); `key` names `fn` for the memo."""
        if node <= TRUE:
            return node
        k = (key, node)
        r = self._sub.get(k)
        if r is None:
            var, lo, hi = self.bdd.nodes[node]
            a = self.atom_of[var]
            cond = self.atom(a) if a[0] == "ap" else self.to_bdd(fn(a))
            r = self.bdd.ite(
                cond, self.substitute(hi, fn, key), self.substitute(lo, fn, key)
            )
            self._sub[k] = r
        return r

    def formula(self, node: int) -> tuple:
        """A formula for BDD `node` (for messages and tests)."""
        from .formula import conj, disj, negate

        if node == TRUE:
            return TT
        if node == FALSE:
            return FF
        var, lo, hi = self.bdd.nodes[node]
        a = self.atom_of[var]
        return disj(conj(a, self.formula(hi)), conj(negate(a), self.formula(lo)))
