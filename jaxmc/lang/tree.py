"""Tree walks without recursion, and balanced trees for long chains.

Generated PRISM models have expressions of 10^4-10^5 terms (`s=0|s=1|...`)
and nestings thousands deep (`c1 ? a1 : c2 ? a2 : ...`). Python's recursion
limit (1000 frames) would end a recursive walk over them in a
`RecursionError`, so every walk over the AST in the front end uses an explicit
stack (`map_tree` here, `ast.walk`, the type checker and the printer).

Long chains of an associative operator (`+`, `*`, `&`, `|`) are also rebuilt as
balanced trees when parsed (`balance_chains`): their depth is then
logarithmic, so that later stages that do recurse, and the dataclasses'
own `==` and `hash`, stay far from the limit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from . import ast


#: Operators whose chains may be re-associated: exact for `&`, `|` and for
#: ints (32-bit wrap-around arithmetic is associative too); for doubles a
#: balanced sum or product may differ from PRISM's left-to-right one in the
#: last bits, which is why short chains, the common case, are left alone.
ASSOCIATIVE = frozenset(
    {ast.BinaryOp.ADD, ast.BinaryOp.MUL, ast.BinaryOp.AND, ast.BinaryOp.OR}
)

#: Chains of at most this many operands keep the shape they were written in.
CHAIN_LIMIT = 64

_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        fields = dataclasses.fields(cls)
        names = tuple(f.name for f in fields if f.name not in ("span", "order"))
        _FIELDS[cls] = names
    return names


class Splice:
    """What `map_tree`'s `f` may return to replace a node by a combination
    of other nodes *after* they are mapped: `combine(mapped operands)`."""

    __slots__ = ("operands", "combine")

    def __init__(self, operands: list, combine: Callable[[list], ast.Node]):
        self.operands = operands
        self.combine = combine


def map_tree(
    root: ast.Node, f: Callable[[ast.Node], ast.Node | Splice | None]
) -> ast.Node:
    """Rebuild `root` bottom-up: `f(node)` returns a replacement (used as is,
    not visited further), a `Splice`, or None to rebuild `node` from its
    mapped children.

    `f` is called in pre-order, children left to right, as a recursive walk
    would; a node object that occurs several times (a shared subtree) is
    mapped once. Nodes whose children are unchanged are returned as they are.
    """
    done: dict[int, ast.Node] = {}
    # (node, None) to visit; (node, True) to rebuild; (node, splice) to combine
    stack: list[tuple[ast.Node, object]] = [(root, None)]
    while stack:
        node, state = stack.pop()
        key = id(node)
        if state is True:
            done[key] = _rebuild(node, done)
            continue
        if isinstance(state, Splice):
            done[key] = state.combine([done[id(x)] for x in state.operands])
            continue
        if key in done:
            continue
        replacement = f(node)
        if isinstance(replacement, Splice):
            stack.append((node, replacement))
            stack.extend((c, None) for c in reversed(replacement.operands))
            continue
        if replacement is not None:
            done[key] = replacement
            continue
        stack.append((node, True))
        stack.extend((c, None) for c in reversed(ast.children(node)))
    return done[id(root)]


def _rebuild(node: ast.Node, done: dict[int, ast.Node]) -> ast.Node:
    changes = {}
    for name in _fields(type(node)):
        value = getattr(node, name)
        new = _mapped(value, done)
        if new is not value:
            changes[name] = new
    return dataclasses.replace(node, **changes) if changes else node


def _mapped(value, done):
    if isinstance(value, ast.Node):
        return done[id(value)]
    if isinstance(value, tuple):
        out = tuple(_mapped(v, done) for v in value)
        return out if any(a is not b for a, b in zip(out, value)) else value
    return value


# ------------------------------------------------------------ balanced chains


def chain_operands(e: ast.Binary) -> list[ast.Expr]:
    """The operands of the maximal chain of `e.op` rooted at `e`, left to
    right (`(a+b)+(c+d)` gives a, b, c, d)."""
    out: list[ast.Expr] = []
    stack: list[ast.Expr] = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Binary) and n.op is e.op:
            stack.append(n.right)
            stack.append(n.left)
        else:
            out.append(n)
    return out


def balanced(op: ast.BinaryOp, operands: list[ast.Expr]) -> ast.Expr:
    """`operands` joined by `op` as a balanced tree; each inner node spans the
    text from its first operand to its last."""
    level = list(operands)
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level) - 1, 2):
            left, right = level[i], level[i + 1]
            nxt.append(ast.Binary(op, left, right, span=_join(left.span, right.span)))
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def _join(a: ast.Span | None, b: ast.Span | None) -> ast.Span | None:
    if a is None or b is None:
        return a or b
    return ast.Span(a.file, a.line, a.column, b.end_line, b.end_column)


def balance_chains(root: ast.Node, limit: int = CHAIN_LIMIT) -> ast.Node:
    """`root` with every chain of more than `limit` operands of an associative
    operator (see `ASSOCIATIVE`) rebuilt as a balanced tree. Chains are
    flattened across parentheses, so that the result only depends on the
    operands in order (printing and parsing again gives the same tree)."""

    def f(n: ast.Node) -> Splice | None:
        if not (isinstance(n, ast.Binary) and n.op in ASSOCIATIVE):
            return None
        operands = chain_operands(n)
        if len(operands) <= limit:
            return None
        return Splice(operands, lambda mapped: balanced(n.op, mapped))

    return map_tree(root, f)
