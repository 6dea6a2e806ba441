"""The abstract syntax of PRISM models and properties.

Every node is a frozen dataclass, so ASTs are hashable (usable as static jit
arguments) and compare structurally. Source positions (`span`) are carried by
every node but excluded from equality: a model pretty-printed and parsed again
compares equal to the original.

The AST is pure syntax. Scoping, typing, constant values and renaming are the
job of `jaxmc.semantics`; this module knows nothing about them.

One expression hierarchy serves models and properties alike, as in PRISM:
property operators (`P`, `R`, `S`, `filter`) and temporal operators (`U`, `F`,
...) are expressions too, and the checker decides where each may appear.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Span:
    """A region of source text: 1-based lines and columns, end inclusive."""

    file: str | None
    line: int
    column: int
    end_line: int | None = None
    end_column: int | None = None

    def __str__(self) -> str:
        return f"{self.file or '<string>'}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Node:
    span: Span | None = field(default=None, compare=False, repr=False, kw_only=True)


# --------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class IntLit(Node):
    value: int


@dataclass(frozen=True)
class RealLit(Node):
    """A double literal; `text` keeps the spelling so printing round-trips."""

    value: float
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class BoolLit(Node):
    value: bool


@dataclass(frozen=True)
class Ident(Node):
    """A constant, variable or formula name (which one is decided by semantics)."""

    name: str


@dataclass(frozen=True)
class Primed(Node):
    """`x'` on the left of an assignment is not an expression; this is only
    produced to report the common slip `x'` used inside an expression."""

    name: str


class UnaryOp(str, enum.Enum):
    NOT = "!"
    NEG = "-"


class BinaryOp(str, enum.Enum):
    IFF = "<=>"
    IMPLIES = "=>"
    OR = "|"
    AND = "&"
    EQ = "="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"
    POW = "^"


@dataclass(frozen=True)
class Unary(Node):
    op: UnaryOp
    operand: Expr


@dataclass(frozen=True)
class Binary(Node):
    op: BinaryOp
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Ite(Node):
    """`cond ? then : else`."""

    cond: Expr
    then: Expr
    else_: Expr


#: Built-in functions, with their arity (`None` = at least one argument).
FUNCTIONS: dict[str, tuple[int, int | None]] = {
    "min": (1, None),
    "max": (1, None),
    "floor": (1, 1),
    "ceil": (1, 1),
    "round": (1, 1),
    "pow": (2, 2),
    "mod": (2, 2),
    "log": (2, 2),
}


@dataclass(frozen=True)
class Call(Node):
    """A built-in function call, written `f(a, b)` or `func(f, a, b)`."""

    func: str
    args: tuple[Expr, ...]


# ------------------------------------------------------------ property expressions


@dataclass(frozen=True)
class LabelRef(Node):
    """`"name"` in a property: a label, a built-in label (`"init"`,
    `"deadlock"`) or a reference to a named property; semantics decides."""

    name: str


class TimeBoundKind(str, enum.Enum):
    LE = "<="
    LT = "<"
    GE = ">="
    GT = ">"
    EQ = "="
    INTERVAL = "[]"


class BoundRef(str, enum.Enum):
    """What a bound in Storm's syntax (`F^{steps<=k}`) counts."""

    STEPS = "steps"
    TIME = "time"
    REWARD = "rew"


@dataclass(frozen=True)
class TimeBound(Node):
    """A step or time bound on a temporal operator: `<=k`, `>t`, `[a,b]`, `=t`.

    For `INTERVAL`, `low` and `high` are both set; for the one-sided kinds only
    `low` (for `>=`, `>`, `=`) or only `high` (for `<=`, `<`) is.

    `ref` is None for PRISM's bounds (time on a CTMC, steps otherwise) and
    says what Storm's braced bounds count: `F^{steps<=k}`, `F^{time<=t}`,
    `F^{rew{"r"}<=b}` (the reward accumulated along the path); `structure`
    is the reward structure of a `rew` bound: its name (`str`), 1-based
    index (`Expr`) or None for the first.
    """

    kind: TimeBoundKind
    low: Expr | None = None
    high: Expr | None = None
    ref: BoundRef | None = None
    structure: str | Expr | None = None


class TemporalOp(str, enum.Enum):
    NEXT = "X"
    UNTIL = "U"
    EVENTUALLY = "F"
    GLOBALLY = "G"
    WEAK_UNTIL = "W"
    RELEASE = "R"


@dataclass(frozen=True)
class Temporal(Node):
    """A path formula. `left` is None for the unary operators X, F, G."""

    op: TemporalOp
    left: Expr | None
    right: Expr
    bound: TimeBound | None = None


class RewardPathKind(str, enum.Enum):
    CUMULATIVE = "C"  # C<=t (bound set) or total reward C (bound None)
    INSTANT = "I"  # I=t
    LONG_RUN = "S"  # S


@dataclass(frozen=True)
class RewardPath(Node):
    """The reward-only path formulas `C<=t`, `C`, `I=t`, `S`.

    (`F φ` under `R` is an ordinary `Temporal`.)
    """

    kind: RewardPathKind
    bound: TimeBound | None = None


class Opt(str, enum.Enum):
    MIN = "min"
    MAX = "max"


@dataclass(frozen=True)
class Threshold(Node):
    """The `~ p` of a bounded operator (`P>=0.9 [...]`); a query `=?` has none."""

    cmp: BinaryOp  # one of LT, LE, GT, GE
    value: Expr


@dataclass(frozen=True)
class ProbOp(Node):
    """`P=? [path]`, `Pmin=? [path]`, `P>=p [path]`, `Pmax<p [path]`."""

    path: Expr
    opt: Opt | None = None
    threshold: Threshold | None = None


@dataclass(frozen=True)
class RewardOp(Node):
    """`R{"name"}=? [path]`, `R{2}min=? [path]`, `R<=r [path]`.

    `structure` is the reward structure's name (a `str`), its 1-based index
    (an `Expr`), or None for the first (default) structure.
    """

    path: Expr
    structure: str | Expr | None = None
    opt: Opt | None = None
    threshold: Threshold | None = None


@dataclass(frozen=True)
class SteadyOp(Node):
    """`S=? [expr]`, `S>=p [expr]`."""

    operand: Expr
    opt: Opt | None = None
    threshold: Threshold | None = None


class Quantifier(str, enum.Enum):
    EXISTS = "E"
    FORALL = "A"


@dataclass(frozen=True)
class PathQuantifier(Node):
    """CTL-style `E [path]` / `A [path]`."""

    quantifier: Quantifier
    path: Expr


#: PRISM's filter operators.
FILTER_OPS = (
    "min", "max", "argmin", "argmax", "count", "sum", "avg", "first", "range",
    "forall", "exists", "print", "printall", "state",
)  # fmt: skip


@dataclass(frozen=True)
class Filter(Node):
    """`filter(op, prop, states)`; `states` None means `true`."""

    op: str
    operand: Expr
    states: Expr | None = None


Expr = (
    IntLit | RealLit | BoolLit | Ident | Primed | Unary | Binary | Ite | Call
    | LabelRef | Temporal | RewardPath | ProbOp | RewardOp | SteadyOp
    | PathQuantifier | Filter
)  # fmt: skip


# -------------------------------------------------------------------- declarations


class ModelType(str, enum.Enum):
    DTMC = "dtmc"
    CTMC = "ctmc"
    MDP = "mdp"
    # Parsed so that they can be rejected with a located UnsupportedError.
    PTA = "pta"
    POMDP = "pomdp"
    POPTA = "popta"
    IDTMC = "idtmc"
    IMDP = "imdp"
    LTS = "lts"


#: Keyword → model type, including PRISM's old synonyms.
MODEL_TYPE_KEYWORDS: dict[str, ModelType] = {
    "dtmc": ModelType.DTMC,
    "probabilistic": ModelType.DTMC,
    "ctmc": ModelType.CTMC,
    "stochastic": ModelType.CTMC,
    "mdp": ModelType.MDP,
    "nondeterministic": ModelType.MDP,
    "pta": ModelType.PTA,
    "pomdp": ModelType.POMDP,
    "popta": ModelType.POPTA,
    "idtmc": ModelType.IDTMC,
    "imdp": ModelType.IMDP,
    "lts": ModelType.LTS,
}


class ValueType(str, enum.Enum):
    INT = "int"
    DOUBLE = "double"
    BOOL = "bool"


@dataclass(frozen=True)
class ConstDecl(Node):
    """`const int N = 3;`, `const double p;`. PRISM's `rate`/`prob` are DOUBLE.

    `keyword` keeps the spelling (`double`, `rate`, `prob`, or "" for the
    untyped `const N = 3;`) so printing round-trips; it is not compared.
    """

    name: str
    type: ValueType
    value: Expr | None = None
    keyword: str = field(default="", compare=False)


@dataclass(frozen=True)
class VarDecl(Node):
    """`x : [lo..hi] init e;` or `b : bool init e;` (`init` optional).

    `type` is INT (with `low`/`high`), BOOL, or one of the unsupported kinds
    kept as a string (`"clock"`, `"int"` unbounded) for a located rejection.
    """

    name: str
    type: ValueType | str
    low: Expr | None = None
    high: Expr | None = None
    init: Expr | None = None


@dataclass(frozen=True)
class FormulaDecl(Node):
    name: str
    expr: Expr


@dataclass(frozen=True)
class LabelDecl(Node):
    name: str
    expr: Expr


@dataclass(frozen=True)
class Assign(Node):
    """`(x' = e)`."""

    var: str
    expr: Expr


@dataclass(frozen=True)
class Update(Node):
    """`p : (x'=e) & (y'=f)`. `prob` is None in the single-update shorthand
    `-> (x'=e);`. An empty `assigns` is the `true` update (no change)."""

    prob: Expr | None
    assigns: tuple[Assign, ...]


@dataclass(frozen=True)
class Command(Node):
    """`[action] guard -> updates;` (`action` None for `[]`)."""

    action: str | None
    guard: Expr
    updates: tuple[Update, ...]


@dataclass(frozen=True)
class Module(Node):
    name: str
    variables: tuple[VarDecl, ...]
    commands: tuple[Command, ...]
    invariant: Expr | None = None  # PTA-only; kept for rejection


@dataclass(frozen=True)
class RenamedModule(Node):
    """`module M2 = M1 [x1=x2, a=b] endmodule`."""

    name: str
    base: str
    renames: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class RewardItem(Node):
    """`guard : value;` (state reward) or `[action] guard : value;`
    (transition reward; `action` None for `[]`)."""

    transition: bool
    action: str | None
    guard: Expr
    value: Expr


@dataclass(frozen=True)
class RewardStruct(Node):
    """`rewards "name" ... endrewards` (`name` None when unnamed)."""

    name: str | None
    items: tuple[RewardItem, ...]


# ------------------------------------------------------------------ system clause


@dataclass(frozen=True)
class SysModule(Node):
    name: str


@dataclass(frozen=True)
class SysFullParallel(Node):
    """`a || b`: synchronise on all shared actions."""

    left: SystemExpr
    right: SystemExpr


@dataclass(frozen=True)
class SysInterleave(Node):
    """`a ||| b`: no synchronisation."""

    left: SystemExpr
    right: SystemExpr


@dataclass(frozen=True)
class SysParallel(Node):
    """`a |[x,y]| b`: synchronise on the listed actions only."""

    left: SystemExpr
    right: SystemExpr
    actions: tuple[str, ...]


@dataclass(frozen=True)
class SysHide(Node):
    """`a / {x, y}`."""

    operand: SystemExpr
    actions: tuple[str, ...]


@dataclass(frozen=True)
class SysRename(Node):
    """`a {x <- y, ...}`: each pair is (old, new)."""

    operand: SystemExpr
    renames: tuple[tuple[str, str], ...]


SystemExpr = (
    SysModule | SysFullParallel | SysInterleave | SysParallel | SysHide | SysRename
)


@dataclass(frozen=True)
class Program(Node):
    """A whole model file, declarations in source order by kind.

    `model_type` is None when the file omits the keyword (PRISM then treats it
    as an MDP, with a warning; semantics decides).
    """

    model_type: ModelType | None
    constants: tuple[ConstDecl, ...] = ()
    globals: tuple[VarDecl, ...] = ()
    formulas: tuple[FormulaDecl, ...] = ()
    labels: tuple[LabelDecl, ...] = ()
    modules: tuple[Module | RenamedModule, ...] = ()
    rewards: tuple[RewardStruct, ...] = ()
    init: Expr | None = None
    system: SystemExpr | None = None
    #: The declarations in source order (for printing); not compared.
    order: tuple[Node, ...] = field(default=(), compare=False, repr=False)


# ----------------------------------------------------------------- property files


@dataclass(frozen=True)
class Property(Node):
    """One property: `"name": expr;` (`name` None when unnamed)."""

    expr: Expr
    name: str | None = None


@dataclass(frozen=True)
class PropertiesFile(Node):
    constants: tuple[ConstDecl, ...] = ()
    formulas: tuple[FormulaDecl, ...] = ()
    labels: tuple[LabelDecl, ...] = ()
    properties: tuple[Property, ...] = ()
    order: tuple[Node, ...] = field(default=(), compare=False, repr=False)


# ------------------------------------------------------------------------- helpers


def children(node: Node) -> tuple[Node, ...]:
    """The direct sub-nodes of `node` (for generic walks)."""
    out: list[Node] = []
    for f in dataclasses.fields(node):
        if f.name in ("span", "order"):
            continue
        _collect(getattr(node, f.name), out)
    return tuple(out)


def _collect(value: object, out: list[Node]) -> None:
    if isinstance(value, Node):
        out.append(value)
    elif isinstance(value, tuple):
        for v in value:
            _collect(v, out)


def walk(node: Node):
    """Pre-order iteration over `node` and all its descendants."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(children(n)))
