"""LTL formulas in negation normal form, as nested tuples.

A formula is one of
`("tt",)`, `("ff",)`, `("ap", i)`, `("nap", i)` (atomic proposition `i` and
its negation), `("and", a, b)`, `("or", a, b)`, `("X", a)`, `("F", a)`,
`("G", a)`, `("U", a, b)`, `("W", a, b)` (weak until), `("R", a, b)`
(release), `("M", a, b)` (strong release). Tuples compare and hash by
structure, so equal formulas are one dictionary key. Negation is pushed to the
propositions (`negate`); the constructors fold `tt`/`ff`.

`F`, `U`, `M` are the least-fixed-point ("mu") operators, `G`, `W`, `R` the
greatest-fixed-point ("nu") ones (Esparza, Křetínský, Sickert, LICS 2018).
"""

from __future__ import annotations


TT = ("tt",)
FF = ("ff",)
MU_OPS = frozenset({"F", "U", "M"})
NU_OPS = frozenset({"G", "W", "R"})
TEMPORAL_OPS = MU_OPS | NU_OPS | {"X"}


def ap(i: int) -> tuple:
    return ("ap", i)


def conj(a: tuple, b: tuple) -> tuple:
    if a == FF or b == FF:
        return FF
    if a == TT:
        return b
    if b == TT or a == b:
        return a
    return ("and", a, b)


def disj(a: tuple, b: tuple) -> tuple:
    if a == TT or b == TT:
        return TT
    if a == FF:
        return b
    if b == FF or a == b:
        return a
    return ("or", a, b)


def nxt(a: tuple) -> tuple:
    return a if a in (TT, FF) else ("X", a)


def eventually(a: tuple) -> tuple:
    return a if a in (TT, FF) else ("F", a)


def always(a: tuple) -> tuple:
    return a if a in (TT, FF) else ("G", a)


def until(a: tuple, b: tuple) -> tuple:
    if b in (TT, FF) or a == FF:
        return b
    if a == TT:
        return eventually(b)
    return ("U", a, b)


def weak_until(a: tuple, b: tuple) -> tuple:
    if a == TT or b == TT:
        return TT
    if a == FF:
        return b
    if b == FF:
        return always(a)
    return ("W", a, b)


def release(a: tuple, b: tuple) -> tuple:
    """`a R b`: `b` holds up to and including the first position where `a`
    does (forever if `a` never does)."""
    if b in (TT, FF) or a == TT:
        return b
    if a == FF:
        return always(b)
    return ("R", a, b)


def strong_release(a: tuple, b: tuple) -> tuple:
    """`a M b`: as `a R b`, and `a` does hold somewhere."""
    if b == FF or a == FF:
        return FF
    if a == TT:
        return b
    if b == TT:
        return eventually(a)
    return ("M", a, b)


_MAKE = {
    "and": conj,
    "or": disj,
    "X": nxt,
    "F": eventually,
    "G": always,
    "U": until,
    "W": weak_until,
    "R": release,
    "M": strong_release,
}


def make(op: str, *args: tuple) -> tuple:
    """The formula `op(args)` with constants folded."""
    return _MAKE[op](*args)


def negate(f: tuple) -> tuple:
    """`¬f` in negation normal form."""
    op = f[0]
    if op == "tt":
        return FF
    if op == "ff":
        return TT
    if op == "ap":
        return ("nap", f[1])
    if op == "nap":
        return ("ap", f[1])
    if op == "and":
        return disj(negate(f[1]), negate(f[2]))
    if op == "or":
        return conj(negate(f[1]), negate(f[2]))
    if op == "X":
        return nxt(negate(f[1]))
    if op == "F":
        return always(negate(f[1]))
    if op == "G":
        return eventually(negate(f[1]))
    a, b = negate(f[1]), negate(f[2])
    # ¬(a U b) = ¬a R ¬b, ¬(a W b) = ¬a M ¬b, and back
    return {"U": release, "R": until, "W": strong_release, "M": weak_until}[op](a, b)


def subformulas(f: tuple) -> set[tuple]:
    """All subformulas of `f` (itself included)."""
    out: set[tuple] = set()
    stack = [f]
    while stack:
        g = stack.pop()
        if g in out:
            continue
        out.add(g)
        if g[0] not in ("tt", "ff", "ap", "nap"):
            stack.extend(g[1:])
    return out


def operators(f: tuple) -> set[str]:
    return {g[0] for g in subformulas(f)}


def is_cosafe(f: tuple) -> bool:
    """Syntactically co-safe: no `G`, `W`, `R` (its good prefixes decide it)."""
    return not (operators(f) & NU_OPS)


def is_safe(f: tuple) -> bool:
    """Syntactically safe: no `F`, `U`, `M` (its bad prefixes decide it)."""
    return not (operators(f) & MU_OPS)


def propositions(f: tuple) -> set[int]:
    return {g[1] for g in subformulas(f) if g[0] in ("ap", "nap")}


def to_text(f: tuple, names=None) -> str:
    """`f` in PRISM's syntax (propositions as `names[i]` or `p<i>`)."""
    op = f[0]
    if op in ("tt", "ff"):
        return "true" if op == "tt" else "false"
    if op in ("ap", "nap"):
        name = names[f[1]] if names is not None else f"p{f[1]}"
        return name if op == "ap" else f"!{name}"
    if op in ("and", "or"):
        sym = "&" if op == "and" else "|"
        return f"({to_text(f[1], names)} {sym} {to_text(f[2], names)})"
    if len(f) == 2:
        return f"{op} {to_text(f[1], names)}"
    return f"({to_text(f[1], names)} {op} {to_text(f[2], names)})"
