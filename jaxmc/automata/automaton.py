"""Automata for LTL formulas, built lazily from formula progression.

`Residual` — the deterministic automaton whose states are the progressions
`af(φ, u)` of the prefixes `u` read so far. For a syntactically co-safe `φ`
it is a DFA of the good prefixes (accepting state `tt`); for a safe one its
state `ff` is reached exactly on the bad prefixes.

`LDBA` — a limit-deterministic Büchi automaton with generalized (transition
marks on states) acceptance for any `φ`, from the Master Theorem of
Esparza, Křetínský and Sickert ("One theorem to rule them all", LICS 2018):
a word `w` satisfies `φ` iff there are sets `X` of μ-subformulas (F, U, M) and
`Y` of ν-subformulas (G, W, R) such that, for all large enough `i`,

1. `w[i:]` satisfies `af(φ, w[:i])[X]ν`   (a safety formula),
2. `GF (ψ[Y]μ)` holds for every `ψ ∈ X`  (co-safe `ψ[Y]μ`),
3. `FG (ψ[X]ν)` holds for every `ψ ∈ Y`  (safe `ψ[X]ν`),

where `ψ[X]ν` replaces a μ-subformula not in `X` by `ff`, and one in `X` by its
ν-counterpart (`F a → tt`, `a U b → a W b`, `a M b → a R b`), and `ψ[Y]μ`
replaces a ν-subformula in `Y` by `tt`, one not in `Y` by its μ-counterpart
(`G a → ff`, `a W b → a U b`, `a R b → a M b`).

The automaton's initial component is `Residual` (deterministic). From a state
`q` it may jump (an ε-choice, `jumps`) to the accepting component for a guess
`(X, Y)` of subformulas of `q`: there it is deterministic and checks 1. and 3.
as one safety formula `q[X]ν ∧ ⋀_{ψ∈Y} G(ψ[X]ν)` (dead when it becomes
`ff`) and 2. with one monitor per `ψ ∈ X` that follows `F(ψ[Y]μ)` and marks
the state and restarts whenever it reaches `tt`. A run is accepting iff it
stays alive in the accepting component and every monitor marks infinitely
often. Its product with an MDP is an MDP whose maximal probability of
accepting equals the maximal probability of `φ` (limit-deterministic
automata suffice for MDPs: Courcoubetis and Yannakakis, JACM 1995); for a
Markov chain the maximum is the probability of `φ`.
"""

from __future__ import annotations

from itertools import combinations

from ..errors import UnsupportedError
from .formula import (
    FF,
    MU_OPS,
    NU_OPS,
    TT,
    always,
    eventually,
    make,
    release,
    strong_release,
    subformulas,
    until,
    weak_until,
)
from .progression import FALSE, TRUE, Progression


#: The most μ- and ν-subformulas one state of the initial component may guess
#: about (2^n jumps from it).
MAX_GUESSES = 12


def sub_nu(f: tuple, xs: frozenset) -> tuple:
    """`f[X]ν`: μ-subformulas in `X` weakened to ν, the others `ff`."""
    op = f[0]
    if op in ("tt", "ff", "ap", "nap"):
        return f
    if op in MU_OPS and f not in xs:
        return FF
    args = [sub_nu(a, xs) for a in f[1:]]
    if op == "F":
        return TT
    if op == "U":
        return weak_until(*args)
    if op == "M":
        return release(*args)
    return make(op, *args)


def sub_mu(f: tuple, ys: frozenset) -> tuple:
    """`f[Y]μ`: ν-subformulas in `Y` `tt`, the others strengthened to μ."""
    op = f[0]
    if op in ("tt", "ff", "ap", "nap"):
        return f
    if op in NU_OPS and f in ys:
        return TT
    args = [sub_mu(a, ys) for a in f[1:]]
    if op == "G":
        return FF
    if op == "W":
        return until(*args)
    if op == "R":
        return strong_release(*args)
    return make(op, *args)


class Residual:
    """The deterministic automaton of progressions; states are BDD nodes of
    `prog` (`TRUE`: every continuation satisfies the formula, `FALSE`: none
    does)."""

    def __init__(self, formula: tuple, prog: Progression | None = None):
        self.formula = formula
        self.prog = prog or Progression()
        self.initial = self.prog.to_bdd(formula)

    def step(self, q: int, letter: int) -> int:
        return self.prog.step(q, letter)

    def accepting(self, q: int) -> bool:
        return q == TRUE

    def dead(self, q: int) -> bool:
        return q == FALSE

    def terminal(self, q: int) -> bool:
        """Decided: every continuation is accepted, or none is."""
        return q <= TRUE


class LDBA:
    """The limit-deterministic automaton of `formula` (see the module
    docstring); states are ints, made on demand."""

    def __init__(self, formula: tuple):
        self.formula = formula
        self.prog = Progression()
        self.keys: list[tuple] = []
        self.ids: dict[tuple, int] = {}
        self.dead_state = self._id(("dead",))
        self.initial = self._id(("i", self.prog.to_bdd(formula)))
        self._options: list[tuple] = []
        self._option_ids: dict[tuple, int] = {}
        self._jumps: dict[int, tuple[int, ...]] = {}
        self._steps: dict[tuple[int, int], int] = {}

    def _id(self, key: tuple) -> int:
        i = self.ids.get(key)
        if i is None:
            i = len(self.keys)
            self.keys.append(key)
            self.ids[key] = i
        return i

    # ----------------------------------------------------------- queries

    def dead(self, q: int) -> bool:
        return q == self.dead_state

    def terminal(self, q: int) -> bool:
        """Decided: no continuation is accepted."""
        return q == self.dead_state or self.keys[q] == ("i", FALSE)

    def in_accepting_component(self, q: int) -> bool:
        return self.keys[q][0] == "a"

    def marks(self, q: int) -> int:
        """The monitors (bit `k`) that completed on the step into `q`."""
        key = self.keys[q]
        return key[4] if key[0] == "a" else 0

    def required(self, q: int) -> int:
        """The monitors (bits) that must mark infinitely often from `q`."""
        key = self.keys[q]
        if key[0] != "a":
            return 0
        return (1 << len(self._options[key[1]][2])) - 1

    # ------------------------------------------------------- transitions

    def step(self, q: int, letter: int) -> int:
        k = (q, letter)
        r = self._steps.get(k)
        if r is None:
            r = self._step(q, letter)
            self._steps[k] = r
        return r

    def _step(self, q: int, letter: int) -> int:
        key, prog = self.keys[q], self.prog
        if key[0] == "dead":
            return q
        if key[0] == "i":
            return self._id(("i", prog.step(key[1], letter)))
        _, opt, safety, monitors, _ = key
        safety = prog.step(safety, letter)
        if safety == FALSE:
            return self.dead_state
        restart = self._options[opt][2]
        marks, out = 0, []
        for k, m in enumerate(monitors):
            m = prog.step(m, letter)
            if m == TRUE:
                marks |= 1 << k
                m = restart[k]
            out.append(m)
        return self._id(("a", opt, safety, tuple(out), marks))

    def jumps(self, q: int) -> tuple[int, ...]:
        """The accepting-component states that `q` may jump to (ε)."""
        r = self._jumps.get(q)
        if r is None:
            r = self._make_jumps(q)
            self._jumps[q] = r
        return r

    def _make_jumps(self, q: int) -> tuple[int, ...]:
        key = self.keys[q]
        if key[0] != "i" or key[1] == FALSE:
            return ()
        node, prog = key[1], self.prog
        subs: set[tuple] = set()
        for v in prog.bdd.support(node):
            subs |= subformulas(prog.atom_of[v])
        mus = sorted((f for f in subs if f[0] in MU_OPS), key=repr)
        nus = sorted((f for f in subs if f[0] in NU_OPS), key=repr)
        if len(mus) + len(nus) > MAX_GUESSES:
            raise UnsupportedError(
                f"this LTL formula has {len(mus) + len(nus)} temporal "
                f"subformulas under F/U/G/W/R; at most {MAX_GUESSES} are supported",
                hint="split the property, or write it with fewer temporal operators",
            )
        out = []
        for xs in _subsets(mus):
            for ys in _subsets(nus):
                opt = self._option(xs, ys)
                _, safe_y, restart = self._options[opt]
                safety = prog.substitute(node, lambda a, xs=xs: sub_nu(a, xs), xs)
                safety = prog.bdd.and_(safety, safe_y)
                if safety != FALSE:
                    out.append(self._id(("a", opt, safety, restart, 0)))
        return tuple(dict.fromkeys(out))

    def _option(self, xs: frozenset, ys: frozenset) -> int:
        k = (xs, ys)
        i = self._option_ids.get(k)
        if i is None:
            prog = self.prog
            safe_y = TRUE
            for psi in sorted(ys, key=repr):
                g = prog.to_bdd(always(sub_nu(psi, xs)))
                safe_y = prog.bdd.and_(safe_y, g)
            restart = tuple(
                prog.to_bdd(eventually(sub_mu(psi, ys))) for psi in sorted(xs, key=repr)
            )
            i = len(self._options)
            self._options.append((k, safe_y, restart))
            self._option_ids[k] = i
        return i


def _subsets(items: list) -> list[frozenset]:
    return [frozenset(c) for r in range(len(items) + 1) for c in combinations(items, r)]
