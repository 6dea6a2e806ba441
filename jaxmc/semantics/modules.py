"""Modules of a model, formula-expanded, with renamed modules
(`module M2 = M1 [x=y, ...] endmodule`) built from their base modules."""

from __future__ import annotations

import dataclasses

from ..errors import SemanticError, UnsupportedError
from ..lang import ast
from .formulas import FormulaTable
from .located import where
from .rewrite import rename_idents
from .types import suggest


def expand_modules(program: ast.Program, formulas: FormulaTable) -> list[ast.Module]:
    """Formula-expanded modules, renamed modules built from their base."""
    by_name: dict[str, ast.Module | ast.RenamedModule] = {}
    for m in program.modules:
        if m.name in by_name:
            raise SemanticError(
                f"module `{m.name}` is already declared at "
                f"{where(by_name[m.name].span)}",
                m.span,
            )
        by_name[m.name] = m
    built: dict[str, ast.Module] = {}

    def build(name: str, stack: tuple[str, ...]) -> ast.Module:
        if name in built:
            return built[name]
        m = by_name[name]
        if isinstance(m, ast.Module):
            if m.invariant is not None:
                raise UnsupportedError(
                    "module invariants are only meaningful for PTAs", m.invariant.span
                )
            out = formulas.expand(m)
        else:
            if m.base not in by_name:
                raise SemanticError(
                    f"module `{m.name}` renames unknown module `{m.base}`",
                    m.span,
                    hint=suggest(m.base, by_name),
                )
            if m.base in stack or m.base == name:
                raise SemanticError(
                    f"cyclic module renaming involving `{m.name}`", m.span
                )
            out = rename_module(m, build(m.base, stack + (name,)))
        built[name] = out
        return out

    return [build(m.name, ()) for m in program.modules]


def rename_module(rm: ast.RenamedModule, base: ast.Module) -> ast.Module:
    renames: dict[str, str] = {}
    for old, new in rm.renames:
        if old in renames:
            raise SemanticError(
                f"`{old}` is renamed twice in the definition of module `{rm.name}`",
                rm.span,
            )
        renames[old] = new
    # PRISM accepts renamings of names that do not occur in the base
    # module (they are no-ops), so they are not checked here.
    base_vars = [v.name for v in base.variables]
    for v in base_vars:
        if v not in renames:
            raise SemanticError(
                f"module `{rm.name}` must rename variable `{v}` of module `{rm.base}`",
                rm.span,
                hint=f"add `{v}={v}_{rm.name}` (or another fresh name) to the renaming",
            )
    variables = tuple(
        dataclasses.replace(rename_idents(v, renames), name=renames.get(v.name, v.name))
        for v in base.variables
    )
    commands = []
    for c in base.commands:
        c2 = rename_idents(c, renames)
        updates = tuple(
            dataclasses.replace(
                u,
                assigns=tuple(
                    dataclasses.replace(a, var=renames.get(a.var, a.var))
                    for a in u.assigns
                ),
            )
            for u in c2.updates
        )
        action = renames.get(c.action, c.action) if c.action else c.action
        commands.append(dataclasses.replace(c2, action=action, updates=updates))
    return ast.Module(rm.name, variables, tuple(commands), span=rm.span)
