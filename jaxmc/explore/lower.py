"""Lowering of PRISM expressions to vectorised numpy functions.

An expression over state variables is compiled once into straight-line Python
source (one numpy call per AST node, each result in its own local), so
evaluating it on a batch of states costs one numpy call per node, never a
Python loop per state. The exploration evaluates each guard, probability and
assignment this way on a whole BFS frontier. The compiler walks the tree with
an explicit stack and the generated code has no nesting, so expressions of
any size or depth (`s=0|s=1|...|s=99999`, 2,000 nested `? :`) compile.

PRISM's semantics (`parser.ast.Expression.evaluate`, floating-point mode),
with the operators defined once in `jaxmc.semantics.functions`:

- `/` is always real (IEEE) division: `1/2` is `0.5`, `x/0` is `±Infinity`
  or `NaN`, never an error;
- `+ - *` and unary `-` of ints are ints; a result outside the 32-bit range is
  an error (PRISM uses `Math.addExact` & co.);
- `pow(a, b)`/`a^b` is an int when both operands are ints (`Math.pow`, then an
  exact conversion to int); a negative exponent or a result outside the
  32-bit range is an error. With a double operand it is `Math.pow`;
- `mod(i, j)` is the non-negative modulo; `j <= 0` is an error;
- `floor`, `ceil`, `round` return ints (`round(x) = floor(x + 0.5)`); a
  non-finite argument or a result outside the 32-bit range is an error;
- `log(x, b) = ln(x) / ln(b)` (never an error);
- double `min`/`max` fold as `(d < acc) ? d : acc` (a NaN after the first
  argument is ignored); `=` on doubles is `Double.equals`;
- `a | b`, `a & b`, `a => b` and `c ? a : b` are lazy, per state: an error
  in an operand that PRISM would not evaluate in that state is no error.

Laziness is implemented with an *active mask* per subexpression: the right
operand of `a | b` is evaluated on the whole batch, but only its states where
`a` is false (and the whole expression is active) count; a check raises the
located error (`error` class, the expression's span, and the first offending
state's variable values) only if an active state hits it. Checks are emitted
only where they can fire: int ranges of variables (`ranges`) and constants are
propagated through the arithmetic, so `s+1` with `s` in `[0..7]` costs no
overflow check.

`lower_parametric` is the same evaluator with parameters left symbolic: the
parameter-free parts run here on numpy, the rest on another array namespace
(jax.numpy, traced by `jax.grad`/`vmap`) with the same operators.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import ExplorationError
from ..lang import ast
from ._lower_gen import Kind as Kind, _Gen
from ._lower_param import Parametric as Parametric, lower_parametric as _parametric


@dataclass(frozen=True, eq=False)
class Lowered:
    """An expression compiled to numpy.

    `lowered(states)` evaluates on an int array `[batch, nvars]` and returns an
    array `[batch]` (int64, float64 or bool by `kind`). `lowered.on_columns(cols,
    n, active)` does the same on a sequence of per-variable 1-D arrays (anything
    that supports `cols[i]`, e.g. a lazy gather), avoiding the 2-D slice;
    `active` (bool `[n]`, default all) says in which states the value is
    needed: evaluation errors elsewhere are ignored (their values are
    meaningless).
    """

    expr: ast.Expr
    kind: Kind
    #: Indices of the variables the expression reads.
    reads: tuple[int, ...]
    source: str = field(repr=False)
    _fn: object = field(repr=False)

    def on_columns(self, cols, n: int, active=None) -> np.ndarray:
        with np.errstate(all="ignore"):
            return self.unchecked(cols, n, active)

    def unchecked(self, cols, n: int, active=None) -> np.ndarray:
        """`on_columns` without silencing numpy's floating-point warnings
        (for callers that do it once around many evaluations)."""
        out = self._fn(cols, active, n)
        if type(out) is not np.ndarray or out.ndim == 0:
            out = np.full(n, out)
        return out

    def __call__(self, states: np.ndarray, active=None) -> np.ndarray:
        states = np.asarray(states)
        return self.on_columns(_Columns(states), states.shape[0], active)

    @property
    def is_constant(self) -> bool:
        return not self.reads


class _Columns:
    def __init__(self, states: np.ndarray):
        self.states = states

    def __getitem__(self, i: int) -> np.ndarray:
        return self.states[:, i]


#: `opaque(node) -> array [n]`: values of nodes the lowering does not know
#: (property operators, names that are no state variables), computed by the
#: caller on every state.
Opaque = Callable[[ast.Expr], np.ndarray]


def lower(
    expr: ast.Expr,
    variables: Sequence[str] | Mapping[str, int],
    *,
    bools: frozenset[str] | set[str] = frozenset(),
    params: Mapping[str, int | float | bool] | None = None,
    ranges: Mapping[str, tuple[int, int]] | None = None,
    error: type[Exception] = ExplorationError,
    opaque: Opaque | None = None,
) -> Lowered:
    """Compile `expr` into a vectorised numpy function.

    **Arguments:**

    - `expr`: an expression over state variables (constants already folded).
    - `variables`: variable names in column order, or a name → column map.
    - `bools`: the names of boolean variables (stored as 0/1 in the columns).
    - `params`: values of constants left symbolic (parameters), if any.
    - `ranges`: `name -> (low, high)` of int variables (optional: tighter
      ranges only spare overflow checks).
    - `error`: the `JaxmcError` class raised on an evaluation error.
    - `opaque`: values of other nodes (see `Opaque`).

    **Returns:** a `Lowered` function.
    """
    gen = _Gen(_index(variables), bools, params, ranges, error, opaque)
    code, kind = gen.expr(expr)
    fn, source = gen.compile([f"return {code}"])
    return Lowered(expr, kind, tuple(sorted(gen.reads)), source, fn)


def lower_parametric(
    expr: ast.Expr,
    params: frozenset[str] | set[str],
    variables: Sequence[str] | Mapping[str, int],
    cols: Sequence[np.ndarray],
    n: int,
    *,
    xp,
    bools: frozenset[str] | set[str] = frozenset(),
    what: str = "expression",
    error: Callable | None = None,
) -> Parametric:
    """Compile `expr`, with the constants `params` left symbolic, into a
    function of the parameters on the array namespace `xp` (jax.numpy: traced,
    differentiable in the parameters), for the states whose variable columns
    are `cols` (length `n` each).

    Parameter-free subtrees are evaluated here, once, by `lower` (numpy,
    exact integers, located errors; under `c ? a : b` only in the states
    where their branch is taken) and become the result's `leaves`; the nodes
    that mention a parameter run on `xp` with the same operators
    (`jaxmc.semantics.functions`). A parameter outside a smooth position
    (conditions, comparisons, integer functions) is rejected with
    `error(message, span, hint)` (default `UnsupportedError`), naming `expr`
    as `what`.

    **Returns:** a `Parametric`: `p(p.leaves, theta) -> value` (a scalar when
    `expr` does not depend on the state, else an array `[n]`).
    """
    return _parametric(
        expr, params, variables, cols, n,
        xp=xp, host=lower, bools=frozenset(bools), what=what, error=error,
    )  # fmt: skip


def _index(variables) -> dict[str, int]:
    if isinstance(variables, Mapping):
        return dict(variables)
    return {name: i for i, name in enumerate(variables)}


class Codegen:
    """Several expressions compiled into one Python function, sharing column
    loads: `expr()` returns the code of an expression (and its kind),
    `column()` the name of a variable's column, `compile()` builds
    `f(C, M=None, N=None) -> value of the last line's `return``. Used by the
    builder to fuse a whole update (probability, assignments, range checks,
    key deltas) into one call, which matters when BFS levels are small."""

    def __init__(
        self,
        variables: Sequence[str] | Mapping[str, int],
        *,
        bools: frozenset[str] | set[str] = frozenset(),
        params: Mapping[str, int | float | bool] | None = None,
        ranges: Mapping[str, tuple[int, int]] | None = None,
        error: type[Exception] = ExplorationError,
    ):
        self._gen = _Gen(_index(variables), bools, params, ranges, error, None)

    def expr(self, e: ast.Expr) -> tuple[str, Kind]:
        return self._gen.expr(e)

    def column(self, i: int) -> str:
        self._gen.reads.add(i)
        return f"c{i}"

    def const(self, value) -> str:
        return self._gen.const(value)

    def compile(self, body: Sequence[str]):
        return self._gen.compile(body)[0]
