"""`check_program`: scoping, typing, constants, formulas and renaming of a
PRISM model, producing the `CheckedProgram` the builder explores.

The order of work follows PRISM's `ModulesFile.tidyUp` and its semantic
checks:

1. model type (missing → MDP with a warning, as PRISM);
2. formulas are expanded at the text level, *before* module renaming (so a
   renamed module renames the variables inside the formulas it uses);
3. renamed modules are built from their base modules;
4. names (constants, formulas, variables) must be unique; modules and reward
   structures have their own name spaces, labels theirs;
5. constants are evaluated in dependency order; `-const` values are only
   for constants *without* a definition in the file (a value for a defined
   constant is an error, as in PRISM); every constant left undefined is
   reported at once, unless it is a parameter;
6. every expression is type-checked, then folded with the constant values.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from ..errors import JaxmcError, SemanticError, UnsupportedError
from ..lang import ast
from .constants import (
    ConstRange,
    ConstValue,
    MissingConstantsError,
    coerce_value,
    parse_constants,
)
from .evaluate import Value, is_literal, literal_value
from .fold import fold as _fold
from .program import (
    CheckedCommand,
    CheckedModule,
    CheckedProgram,
    CheckedRewardItem,
    CheckedRewardStruct,
    CheckedUpdate,
    CheckedVar,
)
from .rewrite import idents, rename_idents, substitute
from .types import Type, can_assign, is_numeric, suggest, type_of, unknown_identifier


SUPPORTED_MODEL_TYPES = (ast.ModelType.DTMC, ast.ModelType.CTMC, ast.ModelType.MDP)
BUILTIN_LABELS = ("init", "deadlock")


def check_program(
    program: ast.Program,
    constants: Mapping[str, object] | str | None = None,
    *,
    source: str | None = None,
    file: str | None = None,
    parameters: Sequence[str] = (),
) -> CheckedProgram:
    """Check a parsed model and resolve everything the builder needs.

    **Arguments:**
    - `program`: the parsed model.
    - `constants`: values of undefined constants: a mapping name → value (a
      Python `int`/`float`/`bool`, a string, or a `ConstValue`), or a `-const`
      string `"N=3,p=0.2"`. Ranges must be expanded first
      (`constants.expand_constants`). Names the model does not declare are
      kept in `CheckedProgram.constant_setting` for the properties
      (`check_properties` reports those that no file declares).
    - `source`, `file`: the model text and path, attached to errors.
    - `parameters`: undefined constants to keep symbolic (as `Ident`s).

    **Returns:** a `CheckedProgram` (see `jaxmc.semantics.program`).

    **Raises:** `SemanticError` or `UnsupportedError`, located.
    """
    try:
        return _ProgramChecker(program, constants, tuple(parameters), source, file).run()
    except JaxmcError as err:
        raise attach_source(err, source, file) from None


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


def attach_source(err: JaxmcError, source: str | None, file: str | None) -> JaxmcError:
    if source is not None:
        err.with_source(source, file)
    elif file is not None and err.span is not None and err.span.file is None:
        err.span = dataclasses.replace(err.span, file=file)
        err.args = (err._render(),)
    return err


def _where(span: ast.Span | None) -> str:
    if span is None:
        return "elsewhere"
    return f"{span.file or '<string>'}:{span.line}"


def normalize_overrides(constants: Mapping[str, object] | str | None) -> dict[str, object]:
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


# ---------------------------------------------------------------- constants


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
        formulas: "FormulaTable | None" = None,
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
            d.name for d in undefined if d.name not in self.overrides and d.name not in self.parameters
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
                    f"constant `{d.name}` is defined in the file, so it cannot be given a value",
                    d.span,
                    hint="only undefined constants (declared without `= ...`) take values: "
                    f"leave `{d.name}` out of the constants given, or remove its definition",
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
        scope = _Names(self.all_types(), self.extra_names)
        for ident in idents(expr):
            if ident.name in self.decls:
                continue
            if ident.name in self.outer_types:
                continue
            if ident.name in self.extra_names:
                raise SemanticError(
                    f"definition of constant `{name}` is not constant: it uses `{ident.name}`",
                    ident.span,
                    hint="constants may only depend on other constants",
                )
            raise unknown_identifier(ident, scope)
        t = type_of(expr, scope)
        if not can_assign(d.type, t):
            raise SemanticError(
                f"type mismatch in definition of constant `{name}`: declared {d.type.value}, value is {t.value}",
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


class _Names(Mapping):
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


# ----------------------------------------------------------------- formulas


class FormulaTable:
    """Formulas, expanded lazily with cycle detection (text-level macros)."""

    def __init__(self, decls: Sequence[ast.FormulaDecl], outer: "FormulaTable | None" = None):
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


# ------------------------------------------------------------------ program


class _ProgramChecker:
    def __init__(self, program, constants, parameters, source, file):
        self.p: ast.Program = program
        self.overrides = normalize_overrides(constants)
        self.parameters = parameters
        self.source = source
        self.file = file
        self.warnings: list[str] = []

    # -------------------------------------------------------------- driver

    def run(self) -> CheckedProgram:
        p = self.p
        model_type = self._model_type()
        decls = {d.name for d in p.constants}
        for name in self.parameters:
            if name not in decls:
                raise SemanticError(
                    f"parameter `{name}` is not a constant of the model",
                    hint=suggest(name, decls),
                )
        self.formulas = FormulaTable(p.formulas)
        modules = self._modules()
        self._check_unique_names(modules)

        var_decls: list[tuple[ast.VarDecl, str | None]] = [(v, None) for v in p.globals]
        for m in modules:
            var_decls += [(v, m.name) for v in m.variables]
        var_names = [v.name for v, _ in var_decls]

        self.consts = ConstantResolver(
            p.constants,
            self.overrides,
            self.parameters,
            formulas=self.formulas,
            extra_names=var_names,
        )
        self.consts.run()
        self.warnings += self.consts.warnings
        self.env = self.consts.env
        self.const_types = self.consts.types
        self.var_types = {
            v.name: (Type.BOOL if v.type == Type.BOOL else Type.INT) for v, _ in var_decls
        }
        self.scope = _Names(
            {**self.const_types, **self.var_types}, self.formulas.names()
        )
        self.owner = {v.name: m for v, m in var_decls}

        init = None
        if p.init is not None:
            init = self._expr(p.init, Type.BOOL, "the `init ... endinit` block")
        variables = tuple(self._variable(v, m, has_init_block=p.init is not None) for v, m in var_decls)

        checked_modules = []
        index = 0
        for m in modules:
            cm, index = self._module(m, model_type, index)
            checked_modules.append(cm)
        alphabet = set().union(*(m.alphabet for m in checked_modules)) if checked_modules else set()

        labels = self._labels()
        rewards = self._rewards(alphabet)
        system = self._system(modules, checked_modules, alphabet)
        formulas = self._checked_formulas()

        values = {k: v for k, v in self.env.items() if not isinstance(v, ast.Node)}
        return CheckedProgram(
            program=p,
            model_type=model_type,
            constants=values,
            variables=variables,
            modules=tuple(checked_modules),
            init=init,
            labels=labels,
            rewards=rewards,
            system=system,
            formulas=formulas,
            parameters=tuple(n for n in self.parameters if n not in self.overrides),
            constant_setting=dict(self.overrides),
            source=self.source,
            file=self.file,
            warnings=tuple(self.warnings),
        )

    def _model_type(self) -> ast.ModelType:
        t = self.p.model_type
        if t is None:
            self.warnings.append(
                "no model type (dtmc, ctmc, mdp) given; assuming mdp, as PRISM does"
            )
            return ast.ModelType.MDP
        if t not in SUPPORTED_MODEL_TYPES:
            raise UnsupportedError(
                f"{t.value} models are not supported",
                self.p.span,
                hint="jaxmc handles dtmc, ctmc and mdp models",
            )
        return t

    # ------------------------------------------------------------- modules

    def _modules(self) -> list[ast.Module]:
        """Formula-expanded modules, renamed modules built from their base."""
        by_name: dict[str, ast.Module | ast.RenamedModule] = {}
        for m in self.p.modules:
            if m.name in by_name:
                raise SemanticError(
                    f"module `{m.name}` is already declared at {_where(by_name[m.name].span)}",
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
                out = self.formulas.expand(m)
            else:
                if m.base not in by_name:
                    raise SemanticError(
                        f"module `{m.name}` renames unknown module `{m.base}`",
                        m.span,
                        hint=suggest(m.base, by_name),
                    )
                if m.base in stack or m.base == name:
                    raise SemanticError(f"cyclic module renaming involving `{m.name}`", m.span)
                out = self._rename(m, build(m.base, stack + (name,)))
            built[name] = out
            return out

        return [build(m.name, ()) for m in self.p.modules]

    def _rename(self, rm: ast.RenamedModule, base: ast.Module) -> ast.Module:
        renames: dict[str, str] = {}
        for old, new in rm.renames:
            if old in renames:
                raise SemanticError(
                    f"`{old}` is renamed twice in the definition of module `{rm.name}`", rm.span
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
            dataclasses.replace(
                rename_idents(v, renames), name=renames.get(v.name, v.name)
            )
            for v in base.variables
        )
        commands = []
        for c in base.commands:
            c2 = rename_idents(c, renames)
            updates = tuple(
                dataclasses.replace(
                    u,
                    assigns=tuple(
                        dataclasses.replace(a, var=renames.get(a.var, a.var)) for a in u.assigns
                    ),
                )
                for u in c2.updates
            )
            action = renames.get(c.action, c.action) if c.action else c.action
            commands.append(dataclasses.replace(c2, action=action, updates=updates))
        return ast.Module(rm.name, variables, tuple(commands), span=rm.span)

    def _check_unique_names(self, modules: list[ast.Module]) -> None:
        """Constants, formulas and variables share one name space."""
        items: list[tuple[str, str, ast.Span | None]] = []
        items += [(c.name, "constant", c.span) for c in self.p.constants]
        items += [(f.name, "formula", f.span) for f in self.p.formulas]
        items += [(v.name, "variable", v.span) for v in self.p.globals]
        for m in modules:
            items += [(v.name, "variable", v.span or m.span) for v in m.variables]

        def key(item):
            s = item[2]
            return (0, s.line, s.column) if s is not None else (1, 0, 0)

        seen: dict[str, tuple[str, ast.Span | None]] = {}
        for name, kind, span in sorted(items, key=key):
            if name in seen:
                other_kind, other_span = seen[name]
                raise SemanticError(
                    f"`{name}` is already declared ({other_kind}) at {_where(other_span)}",
                    span,
                    hint=f"rename this {kind}",
                )
            seen[name] = (kind, span)

    # ---------------------------------------------------------- expressions

    def _expr(self, e: ast.Expr, want: Type | str, what: str) -> ast.Expr:
        """Expand, type-check (against `want`: a type or "numeric") and fold."""
        e = self.formulas.expand(e)
        t = type_of(e, self.scope)
        if want == "numeric":
            if not is_numeric(t):
                raise SemanticError(f"type error: {what} must be a number, not {t.value}", e.span)
        elif not can_assign(want, t):
            raise SemanticError(
                f"type error: {what} must be {want.value}, not {t.value}", e.span
            )
        return fold(e, self.env, self.var_types)

    def _const_int(self, e: ast.Expr, what: str) -> int:
        e2 = self.formulas.expand(e)
        for i in idents(e2):
            if i.name in self.var_types:
                raise SemanticError(
                    f"{what} is not constant: it uses variable `{i.name}`", i.span or e.span
                )
        folded = self._expr(e2, Type.INT, what)
        if not is_literal(folded):
            raise SemanticError(
                f"{what} must be constant, but depends on parameters",
                e.span,
                hint="parameters cannot be used in variable ranges or initial values",
            )
        return int(literal_value(folded))

    def _variable(self, v: ast.VarDecl, module: str | None, has_init_block: bool) -> CheckedVar:
        if not isinstance(v.type, Type) or v.type == Type.DOUBLE:
            kind = v.type.value if isinstance(v.type, Type) else v.type
            raise UnsupportedError(
                f"variable `{v.name}` of kind `{kind}` is not supported",
                v.span,
                hint="jaxmc supports bounded integers `[lo..hi]` and booleans",
            )
        if has_init_block and v.init is not None:
            raise SemanticError(
                "cannot use both `init ... endinit` and initial values for variables",
                v.init.span or v.span,
                hint=f"remove `init ...` from the declaration of `{v.name}`",
            )
        if v.type == Type.BOOL:
            low, high = 0, 1
            init = None
            if v.init is not None:
                folded = self._expr(v.init, Type.BOOL, f"the initial value of `{v.name}`")
                if not is_literal(folded):
                    raise SemanticError(f"the initial value of `{v.name}` is not constant", v.init.span)
                init = int(bool(literal_value(folded)))
            elif not has_init_block:
                init = 0
            return CheckedVar(v.name, module, True, 0, 1, init, span=v.span)
        if v.low is None or v.high is None:
            raise UnsupportedError(
                f"unbounded integer variable `{v.name}` is not supported",
                v.span,
                hint="give it a range: `x : [0..N]`",
            )
        low = self._const_int(v.low, f"the lower bound of `{v.name}`")
        high = self._const_int(v.high, f"the upper bound of `{v.name}`")
        if low > high:
            raise SemanticError(
                f"the range [{low}..{high}] of variable `{v.name}` is empty", v.span
            )
        init = None
        if v.init is not None:
            init = self._const_int(v.init, f"the initial value of `{v.name}`")
            if not low <= init <= high:
                raise SemanticError(
                    f"the initial value {init} of variable `{v.name}` is outside its range [{low}..{high}]",
                    v.init.span or v.span,
                )
        elif not has_init_block:
            init = low
        return CheckedVar(v.name, module, False, low, high, init, span=v.span)

    def _module(self, m: ast.Module, model_type, index: int) -> tuple[CheckedModule, int]:
        commands = []
        alphabet = set()
        for c in m.commands:
            commands.append(self._command(c, m, model_type, index))
            index += 1
            if c.action:
                alphabet.add(c.action)
        cm = CheckedModule(
            name=m.name,
            variables=tuple(v.name for v in m.variables),
            commands=tuple(commands),
            alphabet=frozenset(alphabet),
        )
        return cm, index

    def _command(self, c: ast.Command, m: ast.Module, model_type, index: int) -> CheckedCommand:
        guard = self._expr(c.guard, Type.BOOL, "a guard")
        updates = []
        for u in c.updates:
            span = u.span or c.span
            if u.prob is None:
                prob: ast.Expr = ast.RealLit(1.0, text="1.0", span=span)
            else:
                what = "a rate" if model_type == ast.ModelType.CTMC else "an update probability"
                prob = self._expr(u.prob, "numeric", what)
                self._check_constant_prob(prob, model_type, u.prob.span or span)
            assigns = []
            seen: dict[str, ast.Assign] = {}
            for a in u.assigns:
                if a.var in seen:
                    raise SemanticError(
                        f"variable `{a.var}` is assigned twice in the same update", a.span or span
                    )
                seen[a.var] = a
                if a.var not in self.var_types:
                    hint = suggest(a.var, self.var_types)
                    if a.var in self.const_types:
                        msg = f"cannot assign to constant `{a.var}`"
                    else:
                        msg = f"unknown variable `{a.var}` in assignment"
                    raise SemanticError(msg, a.span or span, hint=hint)
                owner = self.owner[a.var]
                if owner is not None and owner != m.name:
                    raise SemanticError(
                        f"module `{m.name}` cannot modify variable `{a.var}`, which belongs to module `{owner}`",
                        a.span or span,
                        hint="a module may read every variable but only write its own (and globals)",
                    )
                if owner is None and c.action:
                    raise SemanticError(
                        f"synchronous command `[{c.action}]` cannot modify global variable `{a.var}`",
                        a.span or span,
                        hint="PRISM only lets unlabelled `[]` commands update global variables",
                    )
                vt = self.var_types[a.var]
                expr = self.formulas.expand(a.expr)
                t = type_of(expr, self.scope)
                if not can_assign(vt, t):
                    hint = None
                    if vt == Type.INT and t == Type.DOUBLE:
                        hint = "`/` always gives a double; use floor(), ceil() or round() to get an int"
                    raise SemanticError(
                        f"type error in update to variable `{a.var}`: it is {vt.value}, the value is {t.value}",
                        a.expr.span or a.span or span,
                        hint=hint,
                    )
                assigns.append((a.var, fold(expr, self.env, self.var_types)))
            updates.append(CheckedUpdate(prob, tuple(assigns), span=span))
        return CheckedCommand(
            index=index, module=m.name, action=c.action, guard=guard, updates=tuple(updates), span=c.span
        )

    def _check_constant_prob(self, prob: ast.Expr, model_type, span) -> None:
        if not is_literal(prob):
            return
        p = float(literal_value(prob))
        if model_type == ast.ModelType.CTMC:
            if not p >= 0 or math.isinf(p):
                raise SemanticError(f"rate {p} is not a non-negative finite number", span)
        elif not 0 <= p <= 1:
            raise SemanticError(
                f"probability {p} is outside [0, 1]",
                span,
                hint="in a CTMC these would be rates; declare the model `ctmc`" if p > 1 else None,
            )

    # --------------------------------------------------- labels and rewards

    def _labels(self) -> dict[str, ast.Expr]:
        out: dict[str, ast.Expr] = {}
        spans: dict[str, ast.Span | None] = {}
        for lab in self.p.labels:
            if lab.name in BUILTIN_LABELS:
                raise SemanticError(
                    f'cannot define a label called "{lab.name}": it is a built-in label', lab.span
                )
            if lab.name in out:
                raise SemanticError(
                    f'label "{lab.name}" is already declared at {_where(spans[lab.name])}', lab.span
                )
            spans[lab.name] = lab.span
            out[lab.name] = self._expr(lab.expr, Type.BOOL, f'label "{lab.name}"')
        return out

    def _rewards(self, alphabet: set[str]) -> tuple[CheckedRewardStruct, ...]:
        out = []
        names: dict[str, ast.Span | None] = {}
        for r in self.p.rewards:
            if r.name is not None:
                if r.name in names:
                    raise SemanticError(
                        f'reward structure "{r.name}" is already declared at {_where(names[r.name])}',
                        r.span,
                    )
                names[r.name] = r.span
            items = []
            for it in r.items:
                if it.transition and it.action is not None and it.action not in alphabet:
                    self.warnings.append(
                        f"{_where(it.span)}: action `{it.action}` of a transition reward is not used by any module"
                    )
                guard = self._expr(it.guard, Type.BOOL, "a reward guard")
                value = self._expr(it.value, "numeric", "a reward value")
                items.append(CheckedRewardItem(it.transition, it.action, guard, value, span=it.span))
            out.append(CheckedRewardStruct(r.name, tuple(items)))
        return tuple(out)

    def _checked_formulas(self) -> dict[str, ast.Expr]:
        out = {}
        for name in self.formulas.decls:
            try:
                e = self.formulas.expanded(name)
                type_of(e, self.scope)
                out[name] = fold(e, self.env, self.var_types)
            except SemanticError:
                # PRISM only checks formulas where they are used; an unused
                # ill-typed formula is not an error. Keep the raw expansion so
                # a property using it reports the error at its use.
                out[name] = self.formulas.expanded(name)
        return out

    # -------------------------------------------------------------- system

    def _system(self, modules, checked, alphabet) -> ast.SystemExpr:
        names = [m.name for m in modules]
        sysexpr = self.p.system
        if sysexpr is None:
            if not names:
                raise SemanticError("the model has no modules", self.p.span)
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
                        f'invalid action "{a}" in {what} of the system construct: no module uses it',
                        node.span,
                        hint=suggest(a, alphabet),
                    )
                if a in seen:
                    raise SemanticError(f'duplicated action "{a}" in the system construct', node.span)
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
