"""`CheckedProgram`: a PRISM model after semantic analysis, ready to explore.

What the checker guarantees to the builder:

- every defined constant is folded: expressions contain no `Ident` naming a
  constant (only state variables, and parameters when asked for);
- formulas are expanded in place, module renaming is applied (renamed modules
  appear as ordinary modules), so expressions name only state variables;
- every expression is type-checked (`types` maps nothing; ask
  `semantics.types.type_of`) and bounds/initial values are folded to ints;
- `system` is always present: the model's `system ... endsystem` clause, or
  PRISM's default, the full parallel composition `M1 || M2 || ... || Mk` of the
  modules in declaration order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..lang import ast


@dataclass(frozen=True)
class CheckedVar:
    """A state variable. `module` is None for globals. Bools have low=0,
    high=1. `init` is None when the model uses an `init ... endinit` block."""

    name: str
    module: str | None
    is_bool: bool
    low: int
    high: int
    init: int | None
    span: ast.Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class CheckedUpdate:
    """One branch `prob : assigns`; `prob` is `RealLit(1.0)`-like for the
    shorthand `-> (x'=e);`. `assigns` maps variable name → expression."""

    prob: ast.Expr
    assigns: tuple[tuple[str, ast.Expr], ...]
    span: ast.Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class CheckedCommand:
    """A command of one module. `index` numbers the commands of the whole model
    (in module order, then source order) and is what transition provenance
    refers to."""

    index: int
    module: str
    action: str | None
    guard: ast.Expr
    updates: tuple[CheckedUpdate, ...]
    span: ast.Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class CheckedModule:
    name: str
    variables: tuple[str, ...]
    commands: tuple[CheckedCommand, ...]
    #: Actions of the module's labelled commands (its synchronisation alphabet).
    alphabet: frozenset[str]


@dataclass(frozen=True)
class CheckedRewardItem:
    transition: bool
    action: str | None
    guard: ast.Expr
    value: ast.Expr
    span: ast.Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class CheckedRewardStruct:
    name: str | None
    items: tuple[CheckedRewardItem, ...]


@dataclass(frozen=True, eq=False)
class CheckedProgram:
    program: ast.Program
    model_type: ast.ModelType
    #: Values of every constant of the model (defined or given by override).
    constants: Mapping[str, int | float | bool]
    #: Globals first, then each module's variables, in declaration order
    #: (PRISM's variable order, used for `.sta` files and state encoding).
    variables: tuple[CheckedVar, ...]
    modules: tuple[CheckedModule, ...]
    #: The `init ... endinit` predicate, if any (then every `CheckedVar.init`
    #: is None).
    init: ast.Expr | None
    #: Model labels, expanded and folded.
    labels: Mapping[str, ast.Expr]
    rewards: tuple[CheckedRewardStruct, ...]
    system: ast.SystemExpr
    #: Formulas, expanded and folded (properties may use them).
    formulas: Mapping[str, ast.Expr] = field(default_factory=dict)
    #: Names of constants left symbolic as parameters (issue: gradients).
    parameters: tuple[str, ...] = ()
    #: The constant setting the model was checked with (PRISM's `-const`),
    #: names of properties-file constants included: `check_properties` uses
    #: it for the properties file's undefined constants, so that one setting
    #: serves the model and its properties.
    constant_setting: Mapping[str, object] = field(default_factory=dict)
    #: The model file's text and path, for error messages.
    source: str | None = None
    file: str | None = None
    warnings: tuple[str, ...] = ()

    def variable(self, name: str) -> CheckedVar:
        for v in self.variables:
            if v.name == name:
                return v
        raise KeyError(name)
