"""PRISM formulas: text-level macros, expanded lazily with cycle detection."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import SemanticError
from ..lang import ast
from .rewrite import idents, substitute


class FormulaTable:
    """Formulas, expanded lazily with cycle detection (text-level macros)."""

    def __init__(
        self, decls: Sequence[ast.FormulaDecl], outer: FormulaTable | None = None
    ):
        self.decls = {d.name: d for d in decls}
        self.outer = outer
        self._expanded: dict[str, ast.Expr] = {}

    def names(self) -> list[str]:
        return list(self.decls) + (self.outer.names() if self.outer else [])

    def __contains__(self, name: str) -> bool:
        return name in self.decls or (self.outer is not None and name in self.outer)

    def expanded(self, name: str, stack: tuple[str, ...] = ()) -> ast.Expr:
        if name not in self.decls:
            assert self.outer is not None
            return self.outer.expanded(name)
        if name in self._expanded:
            return self._expanded[name]
        d = self.decls[name]
        if name in stack:
            cycle = " -> ".join(stack[stack.index(name) :] + (name,))
            raise SemanticError(f"cyclic dependency among formulas: {cycle}", d.span)
        body = self._expand(d.expr, stack + (name,))
        self._expanded[name] = body
        return body

    def _expand(self, e: ast.Node, stack: tuple[str, ...]) -> ast.Node:
        used = {i.name for i in idents(e) if i.name in self}
        if not used:
            return e
        return substitute(e, {n: self.expanded(n, stack) for n in used})

    def expand(self, e: ast.Node) -> ast.Node:
        return self._expand(e, ())
