"""The system clause (`system ... endsystem`) checked against the model's
modules and actions; without one, the full parallel composition of all
modules in declaration order, as PRISM."""

from __future__ import annotations

from ..errors import SemanticError
from ..lang import ast
from .types import suggest


def check_system(program: ast.Program, modules, alphabet) -> ast.SystemExpr:
    names = [m.name for m in modules]
    sysexpr = program.system
    if sysexpr is None:
        if not names:
            raise SemanticError("the model has no modules", program.span)
        out: ast.SystemExpr = ast.SysModule(names[0])
        for n in names[1:]:
            out = ast.SysFullParallel(out, ast.SysModule(n))
        return out
    used: list[tuple[str, ast.Span | None]] = []

    def actions_ok(acts, node, what):
        seen = set()
        for a in acts:
            if a not in alphabet:
                raise SemanticError(
                    f'invalid action "{a}" in {what} of the system construct: no '
                    "module uses it",
                    node.span,
                    hint=suggest(a, alphabet),
                )
            if a in seen:
                raise SemanticError(
                    f'duplicated action "{a}" in the system construct', node.span
                )
            seen.add(a)

    def check(s):
        if isinstance(s, ast.SysModule):
            if s.name not in names:
                raise SemanticError(
                    f"unknown module `{s.name}` in the system construct",
                    s.span,
                    hint=suggest(s.name, names),
                )
            used.append((s.name, s.span))
        elif isinstance(s, ast.SysParallel):
            actions_ok(s.actions, s, "a parallel composition")
        elif isinstance(s, ast.SysHide):
            actions_ok(s.actions, s, "hiding")
        elif isinstance(s, ast.SysRename):
            actions_ok([a for a, _ in s.renames], s, "renaming")
        elif not isinstance(s, (ast.SysFullParallel, ast.SysInterleave)):
            raise SemanticError(  # pragma: no cover
                f"unknown system construct {type(s).__name__}", s.span
            )

    for s in ast.walk(sysexpr):  # pre-order, left to right, no recursion
        check(s)
    counts: dict[str, int] = {}
    for n, span in used:
        counts[n] = counts.get(n, 0) + 1
        if counts[n] == 2:
            raise SemanticError(
                f"module `{n}` appears more than once in the system construct", span
            )
    for n in names:
        if n not in counts:
            raise SemanticError(
                f"module `{n}` does not appear in the system construct", sysexpr.span
            )
    return sysexpr
