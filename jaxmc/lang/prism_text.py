"""AST → the text PRISM's `toString()` gives a property, for output that must
match PRISM's byte for byte (`-exportresults` headings, filter printouts).

PRISM prints binary operators without spaces (`s=7&d>x`), `? :` as `a?b:c`,
temporal operators and bounds as `F<=5 x=0`, and brackets an operand only
where its precedence is below its position's (`Expression.toStringPrecLt`
/ `toStringPrecLeq`); jaxmc's AST keeps no parentheses, so brackets the user
wrote where none are needed are not reproduced. `!` brackets a binary
operand (`!(s=0)`), as users write it. `jaxmc.lang.printer` is jaxmc's own,
spaced, printer.
"""

from __future__ import annotations

from . import ast


__all__ = ["prism_string", "prism_property_string"]

# PRISM's `Expression.Precedence`, loosest first; BASIC never brackets its
# operands (operators with their own brackets: P, R, S, filter, functions).
_TEMPORAL_BINARY, _TEMPORAL_UNARY, _ITE, _IMPLIES, _IFF, _OR, _AND = range(7)
_NOT, _EQUALITY, _RELOP, _PLUS_MINUS, _TIMES_DIVIDE, _POW = range(7, 13)
_UNARY_MINUS, _BASIC = 13, 14

_BINARY = {
    ast.BinaryOp.IMPLIES: _IMPLIES,
    ast.BinaryOp.IFF: _IFF,
    ast.BinaryOp.OR: _OR,
    ast.BinaryOp.AND: _AND,
    ast.BinaryOp.EQ: _EQUALITY,
    ast.BinaryOp.NE: _EQUALITY,
    ast.BinaryOp.LT: _RELOP,
    ast.BinaryOp.LE: _RELOP,
    ast.BinaryOp.GT: _RELOP,
    ast.BinaryOp.GE: _RELOP,
    ast.BinaryOp.ADD: _PLUS_MINUS,
    ast.BinaryOp.SUB: _PLUS_MINUS,
    ast.BinaryOp.MUL: _TIMES_DIVIDE,
    ast.BinaryOp.DIV: _TIMES_DIVIDE,
    ast.BinaryOp.POW: _POW,
}
#: Operators whose left operand is bracketed at equal precedence too.
_LEFT_LEQ = {ast.BinaryOp.IMPLIES, ast.BinaryOp.EQ, ast.BinaryOp.NE}
#: Operators whose right operand is bracketed at equal precedence too.
_RIGHT_LEQ = {ast.BinaryOp.SUB, ast.BinaryOp.DIV, ast.BinaryOp.EQ, ast.BinaryOp.NE}


def _precedence(e: ast.Expr) -> int:
    if isinstance(e, ast.Temporal):
        return _TEMPORAL_BINARY if e.left is not None else _TEMPORAL_UNARY
    if isinstance(e, ast.Ite):
        return _ITE
    if isinstance(e, ast.Binary):
        return _BINARY[e.op]
    if isinstance(e, ast.Unary):
        return _NOT if e.op is ast.UnaryOp.NOT else _UNARY_MINUS
    return _BASIC


def prism_string(e: ast.Expr) -> str:
    """PRISM's `toString()` of expression (or property formula) `e`."""
    out: list[str] = []
    # items: text, or (expr, parent precedence, bracket at equal precedence)
    stack: list = [(e, _BASIC, False)]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        node, parent, leq = item if isinstance(item, tuple) else (item, _BASIC, False)
        pieces = _pieces(node)
        if parent != _BASIC:
            mine = _precedence(node)
            if mine < parent or (leq and mine == parent):
                pieces = ["(", *pieces, ")"]
        stack.extend(reversed(pieces))
    return "".join(out)


def prism_property_string(name: str | None, e: ast.Expr) -> str:
    """PRISM's `Property.toString()`: `"name": expr`, or `expr`."""
    text = prism_string(e)
    return f'"{name}": {text}' if name else text


def _under(e: ast.Expr, parent: ast.Expr, leq: bool = False) -> tuple:
    return (e, _precedence(parent), leq)


def _bound(b: ast.TimeBound) -> list:
    kind = b.kind
    if kind is ast.TimeBoundKind.INTERVAL:
        return ["[", b.low, ",", b.high, "]"]
    value = b.high if kind in (ast.TimeBoundKind.LE, ast.TimeBoundKind.LT) else b.low
    return [kind.value, value]


def _relop(opt: ast.Opt | None, threshold: ast.Threshold | None) -> list:
    head = opt.value if opt is not None else ""
    if threshold is None:
        return [f"{head}=?"]
    return [head + threshold.cmp.value, threshold.value]


def _real(e: ast.RealLit) -> str:
    if e.text:
        return e.text
    return repr(float(e.value))


def _pieces(e: ast.Expr) -> list:  # noqa: C901 - one dispatch
    """The text of `e`, one level deep: strings and operands to print."""
    if isinstance(e, ast.IntLit):
        return [str(e.value)]
    if isinstance(e, ast.RealLit):
        return [_real(e)]
    if isinstance(e, ast.BoolLit):
        return ["true" if e.value else "false"]
    if isinstance(e, (ast.Ident, ast.Primed)):
        return [e.name + ("'" if isinstance(e, ast.Primed) else "")]
    if isinstance(e, ast.LabelRef):
        return [f'"{e.name}"']
    if isinstance(e, ast.Unary):
        if e.op is ast.UnaryOp.NOT and isinstance(e.operand, ast.Binary):
            return ["!(", e.operand, ")"]
        return [e.op.value, _under(e.operand, e)]
    if isinstance(e, ast.Binary):
        return [
            _under(e.left, e, e.op in _LEFT_LEQ),
            e.op.value,
            _under(e.right, e, e.op in _RIGHT_LEQ),
        ]
    if isinstance(e, ast.Ite):
        return [
            _under(e.cond, e, True), "?", _under(e.then, e, True), ":",
            _under(e.else_, e),
        ]  # fmt: skip
    if isinstance(e, ast.Call):
        pieces: list = [f"{e.func}("]
        for i, a in enumerate(e.args):
            pieces += [", ", a] if i else [a]
        return [*pieces, ")"]
    if isinstance(e, ast.Temporal):
        bound = _bound(e.bound) if e.bound is not None else []
        if e.left is None:
            return [e.op.value, *bound, " ", _under(e.right, e)]
        return [
            _under(e.left, e, True), " ", e.op.value, *bound, " ",
            _under(e.right, e, True),
        ]  # fmt: skip
    if isinstance(e, ast.RewardPath):
        if e.kind is ast.RewardPathKind.LONG_RUN or e.bound is None:
            return [e.kind.value]
        return [e.kind.value, *_bound(e.bound)]
    if isinstance(e, ast.ProbOp):
        return ["P", *_relop(e.opt, e.threshold), " [ ", e.path, " ]"]
    if isinstance(e, ast.RewardOp):
        if e.structure is None:
            index: list = []
        elif isinstance(e.structure, str):
            index = [f'{{"{e.structure}"}}']
        else:
            index = ["{", e.structure, "}"]
        return ["R", *index, *_relop(e.opt, e.threshold), " [ ", e.path, " ]"]
    if isinstance(e, ast.SteadyOp):
        return ["S", *_relop(e.opt, e.threshold), " [ ", e.operand, " ]"]
    if isinstance(e, ast.PathQuantifier):
        return [f"{e.quantifier.value} [ ", e.path, " ]"]
    if isinstance(e, ast.Filter):
        states: list = [", ", e.states] if e.states is not None else []
        return [f"filter({e.op}, ", e.operand, *states, ")"]
    raise TypeError(f"not an expression: {e!r}")
