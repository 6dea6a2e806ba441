"""A PRISM path formula (`jaxmc.lang.ast`) as an LTL formula over atomic
propositions: its maximal state subformulas (labels, comparisons, nested
`P`/`R`/`S` operators), numbered in order of first appearance, as PRISM's
LTL model checker does."""

from __future__ import annotations

from ..errors import UnsupportedError
from ..lang import ast
from ..lang.ast import BinaryOp, TemporalOp, UnaryOp
from ..semantics.operators import has_temporal
from . import formula as L


def is_ltl(path: ast.Expr) -> bool:
    """Whether a path formula needs the LTL machinery: it is not one temporal
    operator over state formulas (nor a state formula)."""
    if isinstance(path, ast.Temporal):
        operands = [x for x in (path.left, path.right) if x is not None]
        return any(has_temporal(x) for x in operands)
    return has_temporal(path)


def ltl_formula(path: ast.Expr) -> tuple[tuple, list[ast.Expr]]:
    """`(formula, propositions)`: `path` as an LTL formula (`formula`
    module) whose proposition `i` is the state formula `propositions[i]`.

    Time-bounded operators inside LTL are refused, as PRISM does (its
    regression suite expects the error).
    """
    props: list[ast.Expr] = []
    index: dict[ast.Expr, int] = {}

    def prop(e: ast.Expr) -> tuple:
        # `true` and `false` stay propositions, read like any other (as in
        # PRISM, where `R [ X true ]` accumulates one step's reward)
        i = index.get(e)
        if i is None:
            i = index[e] = len(props)
            props.append(e)
        return L.ap(i)

    def conv(e: ast.Expr) -> tuple:
        if not has_temporal(e):
            return prop(e)
        if isinstance(e, ast.Unary) and e.op == UnaryOp.NOT:
            return L.negate(conv(e.operand))
        if isinstance(e, ast.Binary) and e.op in _BOOL:
            a, b = conv(e.left), conv(e.right)
            if e.op == BinaryOp.AND:
                return L.conj(a, b)
            if e.op == BinaryOp.OR:
                return L.disj(a, b)
            if e.op == BinaryOp.IMPLIES:
                return L.disj(L.negate(a), b)
            return L.disj(L.conj(a, b), L.conj(L.negate(a), L.negate(b)))
        if isinstance(e, ast.Temporal):
            return temporal(e)
        raise UnsupportedError(
            "a temporal operator here (LTL combines path formulas with !, &, |, "
            "=> and <=> only)",
            e.span,
        )

    def temporal(e: ast.Temporal) -> tuple:
        right = conv(e.right)
        left = conv(e.left) if e.left is not None else None
        op = e.op
        if e.bound is not None:
            raise UnsupportedError(
                "time-bounded operators inside LTL formulas are not supported "
                "(as in PRISM)",
                e.bound.span or e.span,
                hint="use one bounded operator over state formulas, e.g. "
                "P=? [ F<=k φ ], or nest it in its own P operator",
            )
        if op == TemporalOp.NEXT:
            return L.nxt(right)
        if op == TemporalOp.EVENTUALLY:
            return L.eventually(right)
        if op == TemporalOp.GLOBALLY:
            return L.always(right)
        make = {
            TemporalOp.UNTIL: L.until,
            TemporalOp.WEAK_UNTIL: L.weak_until,
            TemporalOp.RELEASE: L.release,
        }[op]
        return make(left, right)

    return conv(path), props


_BOOL = (BinaryOp.AND, BinaryOp.OR, BinaryOp.IMPLIES, BinaryOp.IFF)
