"""Syntactic rewriting of expressions: substitution of identifiers (formula
expansion, module renaming) and collection of the identifiers used.

Rewritten nodes keep their spans, so an error found after expansion points
at the text it came from (for an expanded formula: its definition).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping

from ..lang import ast
from ..lang.tree import map_tree


def map_expr(e: ast.Node, f: Callable[[ast.Node], ast.Node | None]) -> ast.Node:
    """Bottom-up rebuild: `f(node)` returns a replacement or None to recurse.

    Children of every node (including `TimeBound`, `Threshold` and the
    structure index of `RewardOp`) are visited. The walk uses an explicit
    stack, so expressions of any depth can be rewritten; a subtree shared by
    several parents is rewritten once.
    """
    return map_tree(e, f)


def map_children(e: ast.Node, f: Callable[[ast.Node], ast.Node]) -> ast.Node:
    """Rebuild `e` with `f` applied to each direct child node (inside tuples
    too); `e` itself is returned when nothing changed."""
    changes = {}
    for fld in dataclasses.fields(e):
        if fld.name in ("span", "order"):
            continue
        v = getattr(e, fld.name)
        nv = _map_value(v, f)
        if nv is not v:
            changes[fld.name] = nv
    return dataclasses.replace(e, **changes) if changes else e


def _map_value(v, f):
    if isinstance(v, ast.Node):
        return f(v)
    if isinstance(v, tuple):
        out = tuple(_map_value(x, f) for x in v)
        return out if any(a is not b for a, b in zip(out, v)) else v
    return v


def substitute(e: ast.Node, mapping: Mapping[str, ast.Expr]) -> ast.Node:
    """Replace every `Ident(name)` with `mapping[name]` when present."""
    if not mapping:
        return e

    def f(n):
        if isinstance(n, ast.Ident) and n.name in mapping:
            return mapping[n.name]
        return None

    return map_expr(e, f)


def rename_idents(e: ast.Node, renames: Mapping[str, str]) -> ast.Node:
    """Rename identifiers (keeping each node's span)."""

    def f(n):
        if isinstance(n, ast.Ident) and n.name in renames:
            return ast.Ident(renames[n.name], span=n.span)
        return None

    return map_expr(e, f)


def idents(e: ast.Node) -> Iterator[ast.Ident]:
    """Every `Ident` node in `e` (pre-order)."""
    for n in ast.walk(e):
        if isinstance(n, ast.Ident):
            yield n


def mentions(e: ast.Node | None, names: frozenset[str] | set[str]) -> str | None:
    """The first identifier of `names` (e.g. a parameter) that `e` mentions,
    or None."""
    if e is None or not names:
        return None
    for node in ast.walk(e):
        if isinstance(node, ast.Ident) and node.name in names:
            return node.name
    return None
