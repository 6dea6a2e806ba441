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

import math
from collections.abc import Mapping, Sequence

from ..errors import JaxmcError, SemanticError, UnsupportedError
from ..lang import ast
from .evaluate import is_literal, literal_value
from .formulas import FormulaTable
from .located import attach_source, where
from .modules import expand_modules
from .program import (
    CheckedCommand,
    CheckedModule,
    CheckedProgram,
    CheckedRewardItem,
    CheckedRewardStruct,
    CheckedUpdate,
    CheckedVar,
)
from .resolve import ConstantResolver, Names, fold, normalize_overrides
from .rewrite import idents
from .system import check_system
from .types import Type, can_assign, is_numeric, suggest, type_of


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
        return _ProgramChecker(
            program, constants, tuple(parameters), source, file
        ).run()
    except JaxmcError as err:
        raise attach_source(err, source, file) from None


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
        modules = expand_modules(p, self.formulas)
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
            v.name: (Type.BOOL if v.type == Type.BOOL else Type.INT)
            for v, _ in var_decls
        }
        self.scope = Names(
            {**self.const_types, **self.var_types}, self.formulas.names()
        )
        self.owner = {v.name: m for v, m in var_decls}

        init = None
        if p.init is not None:
            init = self._expr(p.init, Type.BOOL, "the `init ... endinit` block")
        variables = tuple(
            self._variable(v, m, has_init_block=p.init is not None)
            for v, m in var_decls
        )

        checked_modules = []
        index = 0
        for m in modules:
            cm, index = self._module(m, model_type, index)
            checked_modules.append(cm)
        alphabet = (
            set().union(*(m.alphabet for m in checked_modules))
            if checked_modules
            else set()
        )

        labels = self._labels()
        rewards = self._rewards(alphabet)
        system = check_system(p, modules, alphabet)
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
                    f"`{name}` is already declared ({other_kind}) at "
                    f"{where(other_span)}",
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
                raise SemanticError(
                    f"type error: {what} must be a number, not {t.value}", e.span
                )
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
                    f"{what} is not constant: it uses variable `{i.name}`",
                    i.span or e.span,
                )
        folded = self._expr(e2, Type.INT, what)
        if not is_literal(folded):
            raise SemanticError(
                f"{what} must be constant, but depends on parameters",
                e.span,
                hint="parameters cannot be used in variable ranges or initial values",
            )
        return int(literal_value(folded))

    def _variable(
        self, v: ast.VarDecl, module: str | None, has_init_block: bool
    ) -> CheckedVar:
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
                folded = self._expr(
                    v.init, Type.BOOL, f"the initial value of `{v.name}`"
                )
                if not is_literal(folded):
                    raise SemanticError(
                        f"the initial value of `{v.name}` is not constant", v.init.span
                    )
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
                    f"the initial value {init} of variable `{v.name}` is outside its "
                    f"range [{low}..{high}]",
                    v.init.span or v.span,
                )
        elif not has_init_block:
            init = low
        return CheckedVar(v.name, module, False, low, high, init, span=v.span)

    def _module(
        self, m: ast.Module, model_type, index: int
    ) -> tuple[CheckedModule, int]:
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

    def _command(
        self, c: ast.Command, m: ast.Module, model_type, index: int
    ) -> CheckedCommand:
        guard = self._expr(c.guard, Type.BOOL, "a guard")
        updates = []
        for u in c.updates:
            span = u.span or c.span
            if u.prob is None:
                prob: ast.Expr = ast.RealLit(1.0, text="1.0", span=span)
            else:
                what = (
                    "a rate"
                    if model_type == ast.ModelType.CTMC
                    else "an update probability"
                )
                prob = self._expr(u.prob, "numeric", what)
                self._check_constant_prob(prob, model_type, u.prob.span or span)
            assigns = []
            seen: dict[str, ast.Assign] = {}
            for a in u.assigns:
                if a.var in seen:
                    raise SemanticError(
                        f"variable `{a.var}` is assigned twice in the same update",
                        a.span or span,
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
                        f"module `{m.name}` cannot modify variable `{a.var}`, which "
                        f"belongs to module `{owner}`",
                        a.span or span,
                        hint="a module may read every variable but only write its own "
                        "(and globals)",
                    )
                if owner is None and c.action:
                    raise SemanticError(
                        f"synchronous command `[{c.action}]` cannot modify global "
                        f"variable `{a.var}`",
                        a.span or span,
                        hint="PRISM only lets unlabelled `[]` commands update global "
                        "variables",
                    )
                vt = self.var_types[a.var]
                expr = self.formulas.expand(a.expr)
                t = type_of(expr, self.scope)
                if not can_assign(vt, t):
                    hint = None
                    if vt == Type.INT and t == Type.DOUBLE:
                        hint = (
                            "`/` always gives a double; use floor(), ceil() or round() "
                            "to get an int"
                        )
                    raise SemanticError(
                        f"type error in update to variable `{a.var}`: it is "
                        f"{vt.value}, the value is {t.value}",
                        a.expr.span or a.span or span,
                        hint=hint,
                    )
                assigns.append((a.var, fold(expr, self.env, self.var_types)))
            updates.append(CheckedUpdate(prob, tuple(assigns), span=span))
        return CheckedCommand(
            index=index,
            module=m.name,
            action=c.action,
            guard=guard,
            updates=tuple(updates),
            span=c.span,
        )

    def _check_constant_prob(self, prob: ast.Expr, model_type, span) -> None:
        if not is_literal(prob):
            return
        p = float(literal_value(prob))
        if model_type == ast.ModelType.CTMC:
            if not p >= 0 or math.isinf(p):
                raise SemanticError(
                    f"rate {p} is not a non-negative finite number", span
                )
        elif not 0 <= p <= 1:
            raise SemanticError(
                f"probability {p} is outside [0, 1]",
                span,
                hint="in a CTMC these would be rates; declare the model `ctmc`"
                if p > 1
                else None,
            )

    # --------------------------------------------------- labels and rewards

    def _labels(self) -> dict[str, ast.Expr]:
        out: dict[str, ast.Expr] = {}
        spans: dict[str, ast.Span | None] = {}
        for lab in self.p.labels:
            if lab.name in BUILTIN_LABELS:
                raise SemanticError(
                    f'cannot define a label called "{lab.name}": it is a built-in '
                    "label",
                    lab.span,
                )
            if lab.name in out:
                raise SemanticError(
                    f'label "{lab.name}" is already declared at '
                    f"{where(spans[lab.name])}",
                    lab.span,
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
                        f'reward structure "{r.name}" is already declared at '
                        f"{where(names[r.name])}",
                        r.span,
                    )
                names[r.name] = r.span
            items = []
            for it in r.items:
                if (
                    it.transition
                    and it.action is not None
                    and it.action not in alphabet
                ):
                    self.warnings.append(
                        f"{where(it.span)}: action `{it.action}` of a transition "
                        "reward is not used by any module"
                    )
                guard = self._expr(it.guard, Type.BOOL, "a reward guard")
                value = self._expr(it.value, "numeric", "a reward value")
                items.append(
                    CheckedRewardItem(
                        it.transition, it.action, guard, value, span=it.span
                    )
                )
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
