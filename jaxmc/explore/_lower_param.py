"""The parametric backend of `jaxmc.explore.lower`: an expression whose
parameters stay symbolic, compiled into host-evaluated leaves and a
straight-line function of the parameters on an array namespace (jax.numpy
for `jax.jit`/`grad`/`vmap`).

The expression is split into its parameter-free subtrees, evaluated once on
the host by the builder's numpy lowering (so integer arithmetic, guards and
conditions stay exact, with located errors), and the parameter-dependent
nodes above them, emitted as one line each with the operators of
`jaxmc.semantics.functions` bound to the namespace. The host results are the
function's *leaves* (an argument, never constants baked into a jaxpr, so a
large model does not bloat compilation).

Parameters may appear only where the result is a smooth real function:
`+ - * / ^`, unary minus, `min`/`max`, `log`, and the branches (not the
condition) of `c ? a : b`. A parameter in a condition, a comparison, or an
integer function (`floor`, `ceil`, `round`, `mod`) would make the structure
or the value jump with the parameter; it is rejected with an error naming
the expression (PRISM's parametric engine rejects these too). Every
parameter-dependent node is a double (parameters are read as doubles).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import UnsupportedError
from ..lang import ast
from ._lower_runtime import runtime


#: Binary operators allowed on a parameter, and their runtime names.
_SMOOTH = {
    ast.BinaryOp.ADD: "_add",
    ast.BinaryOp.SUB: "_sub",
    ast.BinaryOp.MUL: "_mul",
    ast.BinaryOp.DIV: "_div",
    ast.BinaryOp.POW: "_fpow",
}
_HINT = (
    "parameters may only appear in probabilities, rates, reward values and "
    "time bounds, as smooth functions (+ - * / ^ min max log); "
    "pass `rebuild=True` to rebuild the state space for each value instead"
)


@dataclass(frozen=True, eq=False)
class Parametric:
    """`fn(leaves, theta) -> value`: an expression on a fixed set of states as
    a function of the parameters `theta` (name → scalar or traced value),
    with its host-evaluated `leaves` (numpy arrays or Python scalars)."""

    fn: Callable
    leaves: list
    source: str = field(repr=False)

    def __call__(self, leaves, theta: Mapping[str, object]):
        return self.fn(leaves, theta)


def _param_nodes(e: ast.Expr, params) -> dict[int, str]:
    """`id(node) -> a parameter it mentions`, for the nodes that mention one."""
    found: dict[int, str] = {}
    if not params:
        return found
    order, stack = [], [e]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(ast.children(node))
    for node in reversed(order):  # children before parents
        if isinstance(node, ast.Ident) and node.name in params:
            found[id(node)] = node.name
            continue
        for c in ast.children(node):
            if id(c) in found:
                found[id(node)] = found[id(c)]
                break
    return found


def _smooth_children(node) -> tuple | None:
    if isinstance(node, ast.Unary) and node.op == ast.UnaryOp.NEG:
        return (node.operand,)
    if isinstance(node, ast.Binary) and node.op in _SMOOTH:
        return (node.left, node.right)
    if isinstance(node, ast.Call) and node.func in ("min", "max", "pow", "log"):
        return tuple(node.args)
    return None


def _line(node, args: list[str]) -> str:
    """The code of a smooth node on the values `args` of its operands."""
    if isinstance(node, ast.Unary):
        return f"_neg(_f64({args[0]}))"
    if isinstance(node, ast.Binary):
        return f"{_SMOOTH[node.op]}(_f64({args[0]}), _f64({args[1]}))"
    if node.func == "pow":
        return f"_fpow({args[0]}, {args[1]})"
    if node.func == "log":
        return f"_log({args[0]}, {args[1]})"
    out = f"_f64({args[0]})"
    for a in args[1:]:  # PRISM's left fold of double min/max
        out = f"_f{node.func}({out}, {a})"
    return out


def lower_parametric(
    e: ast.Expr,
    params: frozenset[str] | set[str],
    variables: Sequence[str] | Mapping[str, int],
    cols: Sequence[np.ndarray],
    n: int,
    *,
    xp,
    host: Callable,
    bools: frozenset[str] = frozenset(),
    what: str = "expression",
    error=None,
) -> Parametric:
    """Compile `e` for the states whose variable columns are `cols` (length
    `n` each); see `jaxmc.explore.lower.lower_parametric`."""
    leaves: list = []
    uses = _param_nodes(e, params)

    def fail(msg, node):
        if error is not None:
            return error(msg, node.span or e.span, _HINT)
        return UnsupportedError(msg, node.span or e.span, hint=_HINT)

    def leaf(node, active) -> int:
        lo = host(node, variables, bools=bools)
        if lo.is_constant:
            v = lo.on_columns(cols, 1)[0]
            leaves.append(float(v) if lo.kind.value == "double" else v.item())
        else:
            leaves.append(np.asarray(lo.on_columns(cols, n, active)))
        return len(leaves) - 1

    lines: list[str] = []

    def emit(code: str) -> str:
        lines.append(f"t{len(lines)} = {code}")
        return f"t{len(lines) - 1}"

    out: list[str] = []  # the value of each finished node
    stack = [(e, None, False)]
    while stack:
        node, active, done = stack.pop()
        p = uses.get(id(node))
        if p is None:
            out.append(f"L[{leaf(node, active)}]")
            continue
        if isinstance(node, ast.Ident):
            out.append(emit(f"_f64(T[{node.name!r}])"))
            continue
        if isinstance(node, ast.Ite):
            if uses.get(id(node.cond)) is not None:
                raise fail(
                    f"parameter `{uses[id(node.cond)]}` appears in the "
                    f"condition of `? :` in {what}",
                    node.cond,
                )
            if not done:
                c = leaf(node.cond, active)
                cv = np.asarray(leaves[c], dtype=bool)
                on = cv if active is None else active & cv
                off = ~cv if active is None else active & ~cv
                stack.append((node, c, True))  # `active` holds the slot here
                stack.append((node.else_, off, False))
                stack.append((node.then, on, False))
                continue
            b, a = out.pop(), out.pop()
            out.append(emit(f"_where(L[{active}], _f64({a}), _f64({b}))"))
            continue
        kids = _smooth_children(node)
        if kids is None:
            raise fail(f"parameter `{p}` is in a non-smooth position in {what}", node)
        if not done:
            stack.append((node, active, True))
            stack.extend((k, active, False) for k in reversed(kids))
            continue
        args = out[len(out) - len(kids) :]
        del out[len(out) - len(kids) :]
        out.append(emit(_line(node, args)))

    body = ["def _f(L, T):", *(f"    {ln}" for ln in lines), f"    return {out[0]}"]
    source = "\n".join(body)
    namespace = dict(runtime(xp))
    exec(compile(source, "<jaxmc-parametric>", "exec"), namespace)
    return Parametric(namespace["_f"], leaves, source)
