"""Constants resolved in dependency order (`ConstantResolver`), from the
file's definitions and the values given for undefined ones (`-const`);
shared by model and properties files."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import SemanticError, UnsupportedError
from ..lang import ast
from .constants import ConstRange, MissingConstantsError, coerce_value, parse_constants
from .evaluate import Value, is_literal, literal_value
from .fold import fold as _fold
from .formulas import FormulaTable
from .rewrite import idents
from .types import Type, can_assign, type_of, unknown_identifier


def fold(
    expr: ast.Expr,
    env: Mapping[str, Value | ast.Expr],
    types: Mapping[str, Type] | None = None,
) -> ast.Expr:
    """`fold.fold`, with a located `UnsupportedError` where the folding
    recursion is deeper than Python allows (an expression nested a few
    hundred levels deep, e.g. a long `c1 ? a1 : c2 ? a2 : ...`)."""
    try:
        return _fold(expr, env, types)
    except RecursionError:
        raise UnsupportedError(
            "expression nested too deeply to be evaluated",
            expr.span,
            hint="split it into formulas, or use fewer nested parentheses or `? :`",
        ) from None


def normalize_overrides(
    constants: Mapping[str, object] | str | None,
) -> dict[str, object]:
    if constants is None:
        return {}
    if isinstance(constants, str):
        constants = parse_constants(constants)
    out = {}
    for k, v in constants.items():
        if isinstance(v, ConstRange):
            raise SemanticError(
                f"constant `{k}` is given a range `{v.low}:{v.high}`",
                hint="expand ranges into single settings with `expand_constants` first",
            )
        out[k] = v
    return out


class ConstantResolver:
    """Evaluates a list of constant declarations in dependency order.

    Shared by model and properties files (a properties file's constants may
    use the model's). `env` maps each resolved constant to its value, or to
    a folded expression when it depends on a parameter.
    """

    def __init__(
        self,
        decls: Sequence[ast.ConstDecl],
        overrides: Mapping[str, object],
        parameters: Sequence[str],
        outer_env: Mapping[str, Value | ast.Expr] | None = None,
        outer_types: Mapping[str, Type] | None = None,
        formulas: FormulaTable | None = None,
        extra_names: Sequence[str] = (),
        allow_missing: bool = False,
    ):
        self.allow_missing = allow_missing
        #: constant → the undefined constants it needs (with `allow_missing`)
        self.missing: dict[str, tuple[str, ...]] = {}
        self.decls = {d.name: d for d in decls}
        self.overrides = overrides
        self.parameters = tuple(parameters)
        self.outer_env = dict(outer_env or {})
        self.outer_types = dict(outer_types or {})
        self.formulas = formulas
        self.extra_names = extra_names
        self.types: dict[str, Type] = {d.name: d.type for d in decls}
        self.env: dict[str, Value | ast.Expr] = {}
        self.warnings: list[str] = []
        self.used_overrides: set[str] = set()

    def run(self) -> None:
        undefined = [d for d in self.decls.values() if d.value is None]
        missing = [
            d.name
            for d in undefined
            if d.name not in self.overrides and d.name not in self.parameters
        ]
        if missing and self.allow_missing:
            for n in missing:
                self.missing[n] = (n,)
        elif missing:
            raise self.missing_error(missing)
        for d in self.decls.values():
            if d.value is not None and d.name in self.overrides:
                # PRISM: "Constant ... has already been defined"
                raise SemanticError(
                    f"constant `{d.name}` is defined in the file, so it cannot be "
                    "given a value",
                    d.span,
                    hint="only undefined constants (declared without `= ...`) take "
                    f"values: leave `{d.name}` out of the constants given, or remove "
                    "its definition",
                )
        for d in self.decls.values():
            if d.name not in self.missing:
                try:
                    self._resolve(d.name, [])
                except _Missing as m:
                    self.missing[d.name] = m.names

    def missing_in(self, e: ast.Node) -> list[str]:
        """The undefined constants (roots) that `e` needs, in declaration order."""
        need = set()
        for i in idents(e):
            need.update(self.missing.get(i.name, ()))
        return [n for n in self.decls if n in need]

    def missing_error(self, names: Sequence[str], span=None) -> SemanticError:
        return MissingConstantsError(
            names,
            span if span is not None else self.decls[names[0]].span,
            types={n: self.decls[n].type for n in names},
            in_properties=self.allow_missing,
        )

    def all_types(self) -> dict[str, Type]:
        return {**self.outer_types, **self.types}

    def _resolve(self, name: str, stack: list[str]) -> Value | ast.Expr:
        if name in self.env:
            return self.env[name]
        d = self.decls[name]
        if name in stack:
            cycle = " -> ".join(stack[stack.index(name) :] + [name])
            raise SemanticError(f"cyclic dependency among constants: {cycle}", d.span)
        if d.value is None:
            if name in self.parameters and name not in self.overrides:
                v: Value | ast.Expr = ast.Ident(name, span=d.span)
            else:
                v = coerce_value(name, self.overrides[name], d.type)
                self.used_overrides.add(name)
            self.env[name] = v
            return v
        expr = d.value
        if self.formulas is not None:
            expr = self.formulas.expand(expr)
        scope = Names(self.all_types(), self.extra_names)
        for ident in idents(expr):
            if ident.name in self.decls:
                continue
            if ident.name in self.outer_types:
                continue
            if ident.name in self.extra_names:
                raise SemanticError(
                    f"definition of constant `{name}` is not constant: it uses "
                    f"`{ident.name}`",
                    ident.span,
                    hint="constants may only depend on other constants",
                )
            raise unknown_identifier(ident, scope)
        t = type_of(expr, scope)
        if not can_assign(d.type, t):
            raise SemanticError(
                f"type mismatch in definition of constant `{name}`: declared "
                f"{d.type.value}, value is {t.value}",
                d.value.span or d.span,
            )
        env: dict[str, Value | ast.Expr] = dict(self.outer_env)
        need: list[str] = []
        for ident in idents(expr):
            if ident.name in self.decls:
                if ident.name in self.missing:
                    need += self.missing[ident.name]
                    continue
                try:
                    env[ident.name] = self._resolve(ident.name, stack + [name])
                except _Missing as m:
                    need += m.names
        if need:
            self.missing[name] = tuple(dict.fromkeys(need))
            raise _Missing(self.missing[name])
        v = fold(expr, env, self.all_types())
        if is_literal(v):
            val = literal_value(v)
            if d.type == Type.DOUBLE:
                val = float(val)
            v = val
        self.env[name] = v
        return v


class _Missing(Exception):
    def __init__(self, names):
        self.names = tuple(names)


class Names(Mapping):
    """A type scope whose iteration (used for did-you-mean hints) also lists
    names that have no type here (formulas, labels, ...)."""

    def __init__(self, types: Mapping[str, Type], extra: Sequence[str] = ()):
        self.types = types
        self.extra = extra

    def __getitem__(self, k):
        return self.types[k]

    def __iter__(self):
        seen = set()
        for k in list(self.types) + list(self.extra):
            if k not in seen:
                seen.add(k)
                yield k

    def __len__(self):
        return len(set(self.types) | set(self.extra))
