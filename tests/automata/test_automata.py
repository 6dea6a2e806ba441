"""The LTL automata against LTL's semantics on lasso words `u·v^ω`
(`lasso.holds`, a direct fixed-point evaluator): the LDBA accepts exactly
the lassos that satisfy the formula, the deterministic automaton of
progressions reaches `tt` exactly on the co-safe ones and `ff` exactly on the
violated safe ones; automaton sizes of known families."""

from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path

import pytest


sys.path.insert(0, str(Path(__file__).resolve().parent))

from lasso import dfa_accepts, holds, ldba_accepts  # noqa: E402

from jaxmc.automata import formula as L  # noqa: E402
from jaxmc.automata.automaton import LDBA, Residual  # noqa: E402
from jaxmc.automata.progression import FALSE  # noqa: E402


a, b, c = L.ap(0), L.ap(1), L.ap(2)
na, nb = L.negate(a), L.negate(b)


def imp(x, y):
    return L.disj(L.negate(x), y)


def lassos(letters: int, max_u: int, max_v: int):
    for nu in range(max_u + 1):
        for nv in range(1, max_v + 1):
            for u in itertools.product(range(letters), repeat=nu):
                for v in itertools.product(range(letters), repeat=nv):
                    yield list(u), list(v)


# Formula families of the literature: the classic ones and Dwyer et al.'s
# specification patterns (global scope and "before r"/"after q" scopes).
FAMILIES = {
    "F a": L.eventually(a),
    "G a": L.always(a),
    "G F a": L.always(L.eventually(a)),
    "F G a": L.eventually(L.always(a)),
    "a U b": L.until(a, b),
    "a W b": L.weak_until(a, b),
    "a R b": L.release(a, b),
    "a M b": L.strong_release(a, b),
    "X X a": L.nxt(L.nxt(a)),
    "G(a => F b)": L.always(imp(a, L.eventually(b))),  # response
    "G F a & G F b": L.conj(L.always(L.eventually(a)), L.always(L.eventually(b))),
    "G F a => G F b": imp(L.always(L.eventually(a)), L.always(L.eventually(b))),
    "F G a | G F b": L.disj(L.eventually(L.always(a)), L.always(L.eventually(b))),
    "absence before b": imp(L.eventually(b), L.until(na, b)),
    "existence after a": L.disj(L.always(na), L.eventually(L.conj(a, L.eventually(b)))),
    "precedence": L.weak_until(nb, a),  # b is preceded by a
    "response chain": L.always(imp(a, L.eventually(L.conj(b, L.nxt(L.eventually(c)))))),
    "universality between": L.always(imp(L.conj(a, L.eventually(c)), L.until(b, c))),
    "X (a U G b)": L.nxt(L.until(a, L.always(b))),
    "G(a => X(b R a))": L.always(imp(a, L.nxt(L.release(b, a)))),
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_ldba_on_every_short_lasso(name):
    f = FAMILIES[name]
    k = len(L.propositions(f))
    aut = LDBA(f)
    for u, v in lassos(1 << k, 2, 3 if k <= 2 else 2):
        assert ldba_accepts(aut, u, v) == holds(f, u, v), (name, u, v)


def _random_formula(rng, depth):
    if depth == 0 or rng.random() < 0.2:
        p = L.ap(rng.randrange(2))
        return p if rng.random() < 0.7 else L.negate(p)
    op = rng.choice(["and", "or", "X", "F", "G", "U", "W", "R", "M", "F", "G"])
    if op in ("X", "F", "G"):
        return L.make(op, _random_formula(rng, depth - 1))
    return L.make(op, _random_formula(rng, depth - 1), _random_formula(rng, depth - 1))


@pytest.mark.parametrize("seed", range(3))
def test_random_formulas_on_random_lassos(seed):
    rng = random.Random(seed)
    for _ in range(40):
        f = _random_formula(rng, 3)
        aut = LDBA(f)
        dfa = Residual(f)
        for _ in range(12):
            u = [rng.randrange(4) for _ in range(rng.randrange(0, 4))]
            v = [rng.randrange(4) for _ in range(rng.randrange(1, 4))]
            truth = holds(f, u, v)
            assert ldba_accepts(aut, u, v) == truth, (L.to_text(f), u, v)
            if L.is_cosafe(f):
                assert dfa_accepts(dfa, u, v) == truth, (L.to_text(f), u, v)
            if L.is_safe(f):
                neg = Residual(L.negate(f))
                assert dfa_accepts(neg, u, v) == (not truth), (L.to_text(f), u, v)


def _reachable(aut: Residual, letters: int) -> set[int]:
    seen, todo = {aut.initial}, [aut.initial]
    while todo:
        q = todo.pop()
        for x in range(letters):
            r = aut.step(q, x)
            if r not in seen:
                seen.add(r)
                todo.append(r)
    return seen


@pytest.mark.parametrize(
    ("f", "size"),
    [
        # minimal DFAs (with the rejecting sink where there is one)
        (L.eventually(a), 2),
        (L.until(a, b), 3),
        (L.nxt(a), 4),  # X a, a, tt, ff
        (L.eventually(L.conj(a, L.eventually(b))), 3),
        (L.conj(L.eventually(a), L.eventually(b)), 4),
        (L.always(a), 2),
        (L.eventually(L.conj(a, L.nxt(b))), 3),
    ],
)
def test_sizes_of_known_automata(f, size):
    k = len(L.propositions(f))
    assert len(_reachable(Residual(f), 1 << k)) == size


def test_good_prefixes_of_co_safe_formulas():
    # a U b accepts after reading b, rejects after reading neither
    aut = Residual(L.until(a, b))
    assert aut.accepting(aut.step(aut.initial, 0b10))
    assert aut.dead(aut.step(aut.initial, 0b00))
    q = aut.step(aut.initial, 0b01)
    assert not aut.accepting(q) and not aut.dead(q)
    # propositionally equivalent progressions are one state
    g = L.disj(L.eventually(a), L.conj(L.eventually(a), L.eventually(b)))
    assert Residual(g).initial == Residual(L.eventually(a), Residual(g).prog).initial


def test_negation_normal_form():
    for f in FAMILIES.values():
        assert L.negate(L.negate(f)) == f
        for u, v in lassos(8, 1, 2):
            assert holds(L.negate(f), u, v) != holds(f, u, v)


def test_ldba_jumps_only_from_the_initial_component():
    aut = LDBA(L.always(L.eventually(a)))
    jumps = aut.jumps(aut.initial)
    assert jumps and all(aut.in_accepting_component(j) for j in jumps)
    assert all(aut.jumps(j) == () for j in jumps)
    assert not aut.in_accepting_component(aut.initial)
    assert aut.step(aut.initial, 1) != FALSE
