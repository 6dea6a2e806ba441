"""`check_properties`: a properties file checked against a `CheckedProgram`.

What the property checker (`jaxmc.props`) can rely on in `CheckedProperty.expr`:

- formulas (of the model and of the properties file) are expanded, and every
  constant is folded into a literal (parameters stay `Ident`s); the only
  remaining `Ident`s name state variables or parameters;
- every `LabelRef` resolves, in PRISM's order, to the built-in `"init"` or
  `"deadlock"`, a model label, a properties-file label, or a named property:
  `CheckedProperties.label_kind(name)` says which, and
  `CheckedProperties.resolve_label(name)` returns the (checked) expression of
  a properties-file label or named property (None for built-in and model
  labels, which the explicit model carries);
- `P`, `E`, `A` contain a path formula: one temporal operator over state
  formulas, a state formula, or an LTL formula (temporal operators combined
  with `!`, `&`, `|`, `=>`, `<=>` over Boolean state formulas); `R` contains
  `F φ`, `C<=t`, `C`, `I=t`, `S` or an LTL formula (the planner refuses one
  that is not co-safe); temporal operators and reward paths appear nowhere
  else;
- time bounds are folded: for DTMCs and MDPs they are int literals (step
  bounds), for CTMCs int or double literals; none is negative. Probability
  thresholds are in [0, 1];
- `RewardOp.structure` is None (the model has at least one reward structure),
  the name of an existing structure, or an `IntLit` index in range;
- `S` (steady-state) operators only occur for DTMCs and CTMCs;
- `CheckedProperty.type` is the value type: `P=?`, `R=?`, `S=?` are double,
  thresholded operators, `E`/`A` and labels bool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import JaxmcError, SemanticError
from ..lang import ast
from .check import BUILTIN_LABELS
from .constants import check_setting, constant_setting
from .formulas import FormulaTable
from .located import attach_source
from .operators import OperatorTyping
from .program import CheckedProgram
from .resolve import ConstantResolver, Names, fold
from .types import Type, can_assign, type_of


@dataclass(frozen=True)
class CheckedProperty:
    """One property. `error` is set (and `expr` is the unchecked text) only
    when `check_properties(..., errors="keep")` kept a property that failed."""

    expr: ast.Expr
    name: str | None = None
    type: Type | None = None
    text: str | None = None
    span: ast.Span | None = field(default=None, compare=False)
    error: JaxmcError | None = field(default=None, compare=False)
    #: The collection the property was checked in: its file's constants,
    #: formulas and labels, and the properties it refers to by name (so a
    #: property can be checked by itself).
    properties: CheckedProperties | None = field(
        default=None, compare=False, repr=False
    )


@dataclass(frozen=True, eq=False)
class CheckedProperties(Sequence):
    """The checked properties of a file, in order; also a sequence of
    `CheckedProperty`. Look one up by name or 0-based index with `get`."""

    properties: tuple[CheckedProperty, ...]
    #: Values of the properties file's constants (model constants are in the
    #: `CheckedProgram`).
    constants: Mapping[str, int | float | bool] = field(default_factory=dict)
    #: Properties-file labels, expanded and folded.
    labels: Mapping[str, ast.Expr] = field(default_factory=dict)
    #: Properties-file formulas, expanded and folded.
    formulas: Mapping[str, ast.Expr] = field(default_factory=dict)
    #: For each label name used: "builtin", "model", "properties" or "property".
    label_kinds: Mapping[str, str] = field(default_factory=dict)
    source: str | None = None
    file: str | None = None
    warnings: tuple[str, ...] = ()

    def __getitem__(self, i):
        return self.properties[i]

    def __len__(self) -> int:
        return len(self.properties)

    def get(self, key: int | str) -> CheckedProperty:
        """The property with this name, or at this 0-based index."""
        if isinstance(key, int):
            return self.properties[key]
        for p in self.properties:
            if p.name == key:
                return p
        names = [p.name for p in self.properties if p.name]
        raise KeyError(
            f"no property named {key!r}"
            + (f" (named: {', '.join(names)})" if names else "")
        )

    def label_kind(self, name: str) -> str | None:
        return self.label_kinds.get(name)

    def resolve_label(self, name: str) -> ast.Expr | None:
        """The expression a properties-file label or named property stands
        for; None for built-in labels, model labels and unknown names."""
        if name in self.labels:
            return self.labels[name]
        for p in self.properties:
            if p.name == name and p.error is None:
                return p.expr
        return None


class _FixedFormulas(FormulaTable):
    """The model's formulas, already expanded by `check_program`."""

    def __init__(self, formulas: Mapping[str, ast.Expr]):
        super().__init__(())
        self.fixed = dict(formulas)

    def names(self):
        return list(self.fixed)

    def __contains__(self, name):
        return name in self.fixed

    def expanded(self, name, stack=()):
        return self.fixed[name]


def check_properties(
    pf: ast.PropertiesFile,
    checked: CheckedProgram,
    constants: Mapping[str, object] | str | None = None,
    *,
    source: str | None = None,
    file: str | None = None,
    errors: str = "raise",
    known: Sequence[str] = (),
) -> CheckedProperties:
    """Check a properties file against a checked model.

    **Arguments:**
    - `pf`: the parsed properties file.
    - `checked`: the model, from `check_program`.
    - `constants`: values for the properties file's undefined constants, on
      top of the model's own setting (`checked.constant_setting`), as PRISM's
      one `-const` serves both files. Names of the model's undefined
      constants may appear with the value the model was checked with.
    - `source`, `file`: the properties text and path, for error messages.
    - `errors`: `"raise"` (default) raises on the first bad property;
      `"keep"` records the error in `CheckedProperty.error` and goes on (as
      PRISM, which reports an error for that property only). Errors in the
      file's constants, formulas or labels are always raised.
    - `known`: names declared elsewhere (by other properties files of the
      same model) that the setting may mention.

    **Raises:** `SemanticError`, `UnsupportedError` (located); a value for a
    constant that is defined (model or properties file), or for a name that
    neither the model, the file nor `known` declares, is an error that lists
    the constants that can be given values.
    """
    try:
        return _PropsChecker(pf, checked, constants, source, file, errors, known).run()
    except JaxmcError as err:
        raise attach_source(err, source, file) from None


class _PropsChecker(OperatorTyping):
    def __init__(self, pf, checked, constants, source, file, errors, known=()):
        if errors not in ("raise", "keep"):
            raise ValueError("`errors` should be 'raise' or 'keep'")
        self.pf: ast.PropertiesFile = pf
        self.m: CheckedProgram = checked
        explicit = constant_setting(constants)
        self.overrides = {**checked.constant_setting, **explicit}
        check_setting(pf, checked, explicit, self.overrides, known)
        self.source = source
        self.file = file
        self.errors = errors
        self.label_kinds: dict[str, str] = {}
        self.warnings: list[str] = []

    def run(self) -> CheckedProperties:
        m, pf = self.m, self.pf
        prog = m.program
        self.model_const_types = {c.name: c.type for c in prog.constants}
        self.var_types = {
            v.name: (Type.BOOL if v.is_bool else Type.INT) for v in m.variables
        }
        model_formulas = _FixedFormulas(m.formulas)
        self.formulas = FormulaTable(pf.formulas, outer=model_formulas)
        self._check_names()

        model_env: dict[str, object] = dict(m.constants)
        for p in m.parameters:
            model_env.setdefault(p, ast.Ident(p))
        overrides = {
            k: v for k, v in self.overrides.items() if k not in self.model_const_types
        }
        self.consts = ConstantResolver(
            pf.constants,
            overrides,
            (),
            outer_env=model_env,
            outer_types=self.model_const_types,
            formulas=self.formulas,
            extra_names=list(self.var_types),
            allow_missing=True,
        )
        self.consts.run()
        self.warnings += self.consts.warnings
        self.env = {**model_env, **self.consts.env}
        self.types = {**self.model_const_types, **self.consts.types, **self.var_types}
        self.scope = Names(self.types, self.formulas.names())

        self.prop_names = {p.name: p for p in pf.properties if p.name is not None}
        self.pf_label_decls = {lab.name: lab for lab in pf.labels}
        self.labels: dict[str, ast.Expr] = {}
        for lab in pf.labels:
            need = self.consts.missing_in(self.formulas.expand(lab.expr))
            if need:
                raise self.consts.missing_error(need)
            self.labels[lab.name] = self._state_expr(
                lab.expr, Type.BOOL, f'label "{lab.name}"'
            )

        self._prop_types: dict[str, Type] = {}
        self._typing: list[str] = []
        out = []
        if self.errors == "raise":
            need: list[str] = []
            for p in pf.properties:
                need += self.consts.missing_in(self.formulas.expand(p.expr))
            if need:
                raise self.consts.missing_error(
                    [n for n in self.consts.decls if n in need]
                )
        for p in pf.properties:
            try:
                out.append(self._property(p))
            except JaxmcError as err:
                if self.errors == "raise":
                    raise
                attach_source(err, self.source, self.file)
                out.append(
                    CheckedProperty(
                        p.expr, p.name, None, self._text(p), span=p.span, error=err
                    )
                )
        values = {
            k: v for k, v in self.consts.env.items() if not isinstance(v, ast.Node)
        }
        formulas = {}
        for name in self.formulas.decls:
            try:
                e = self.formulas.expanded(name)
                formulas[name] = fold(e, self.env, self.var_types)
            except JaxmcError:
                formulas[name] = self.formulas.decls[name].expr
        collection = CheckedProperties(
            properties=tuple(out),
            constants=values,
            labels=self.labels,
            formulas=formulas,
            label_kinds=dict(self.label_kinds),
            source=self.source,
            file=self.file,
            warnings=tuple(self.warnings),
        )
        for p in out:  # frozen: set the back reference once, here
            object.__setattr__(p, "properties", collection)
        return collection

    # ------------------------------------------------------------- names

    def _check_names(self) -> None:
        taken: dict[str, str] = {}
        for c in self.m.program.constants:
            taken[c.name] = "a model constant"
        for f in self.m.formulas:
            taken[f] = "a model formula"
        for v in self.m.variables:
            taken[v.name] = "a model variable"
        for kind, decls in (
            ("constant", self.pf.constants),
            ("formula", self.pf.formulas),
        ):
            for d in decls:
                if d.name in taken:
                    raise SemanticError(
                        f"{kind} `{d.name}` is already declared ({taken[d.name]})",
                        d.span,
                    )
                taken[d.name] = f"a properties-file {kind}"
        labels: set[str] = set()
        for lab in self.pf.labels:
            if lab.name in BUILTIN_LABELS:
                raise SemanticError(
                    f'cannot define a label called "{lab.name}": it is a built-in '
                    "label",
                    lab.span,
                )
            if lab.name in self.m.labels:
                raise SemanticError(
                    f'label "{lab.name}" is already defined in the model', lab.span
                )
            if lab.name in labels:
                raise SemanticError(f'label "{lab.name}" is declared twice', lab.span)
            labels.add(lab.name)
        names: set[str] = set()
        for p in self.pf.properties:
            if p.name is not None:
                if p.name in names:
                    raise SemanticError(
                        f'property name "{p.name}" is used twice', p.span
                    )
                names.add(p.name)

    # -------------------------------------------------------- expressions

    def _state_expr(self, e: ast.Expr, want, what: str) -> ast.Expr:
        e = self.formulas.expand(e)
        t = type_of(e, self.scope, self._hook)
        if want is not None and not can_assign(want, t):
            raise SemanticError(
                f"type error: {what} must be {want.value}, not {t.value}", e.span
            )
        return fold(e, self.env, self.var_types)

    def _property(self, p: ast.Property) -> CheckedProperty:
        e = self.formulas.expand(p.expr)
        need = self.consts.missing_in(e)
        if need:
            raise self.consts.missing_error(need)
        t = self._type_property(p.name, e)
        folded = fold(e, self.env, self.var_types)
        folded = self._normalize(folded)
        return CheckedProperty(folded, p.name, t, self._text(p), span=p.span)

    def _type_property(self, name: str | None, e: ast.Expr) -> Type:
        if name is not None and name in self._prop_types:
            return self._prop_types[name]
        t = type_of(e, self.scope, self._hook)
        if name is not None:
            self._prop_types[name] = t
        return t

    def _text(self, p: ast.Property) -> str | None:
        s = p.expr.span
        if (
            self.source is None
            or s is None
            or s.end_line is None
            or s.end_column is None
        ):
            return None
        lines = self.source.splitlines()
        try:
            if s.line == s.end_line:
                return (
                    lines[s.line - 1][s.column - 1 : s.end_column - 1].strip() or None
                )
            parts = [lines[s.line - 1][s.column - 1 :]]
            parts += lines[s.line : s.end_line - 1]
            parts.append(lines[s.end_line - 1][: s.end_column - 1])
            return " ".join(x.strip() for x in parts).strip() or None
        except IndexError:
            return None

    # ---------------------------------------------------------- normalizing

    def _normalize(self, e: ast.Expr) -> ast.Expr:
        """Fold reward-structure indices to `IntLit`s (they are `Expr`s)."""
        from .rewrite import map_expr

        def f(n):
            if isinstance(n, ast.RewardOp) and isinstance(n.structure, ast.Node):
                s = fold(n.structure, self.env, self.var_types)
                import dataclasses

                return dataclasses.replace(
                    n,
                    structure=s,
                    path=self._normalize(n.path),
                    threshold=n.threshold,
                )
            return None

        return map_expr(e, f)
