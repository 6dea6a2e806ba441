"""Partial evaluation of PRISM expressions into jittable functions of the
parameters.

An expression such as `(s<3 ? p : 0.5)` or `2*r` is split into its
parameter-free subtrees, evaluated once on the host with the builder's own
lowering (`jaxmc.explore.lower`, so PRISM's integer/real rules are the
builder's), and the parameter-dependent nodes above them, rebuilt as `jnp`
operations. The host results become array *leaves* of a `Compiled`, never
constants baked into a jaxpr, so a large model does not bloat compilation.

Parameters may appear only where the result is a smooth real function:
`+ - * / ^`, unary minus, `min`/`max`, `log`, and the branches (not the
condition) of `c ? a : b`. A parameter in a condition, a comparison, or an
integer function (`floor`, `ceil`, `round`, `mod`) would make the structure
or the value jump with the parameter; it is rejected with an error naming
the expression (PRISM's parametric engine rejects these too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax.numpy as jnp
import numpy as np

from ..errors import UnsupportedError
from ..explore.lower import lower
from ..lang import ast


def mentions(e: ast.Node | None, names: frozenset[str] | set[str]) -> str | None:
    """The first parameter of `names` that `e` mentions, or None."""
    if e is None or not names:
        return None
    for node in ast.walk(e):
        if isinstance(node, ast.Ident) and node.name in names:
            return node.name
    return None


class Compiled:
    """`fn(leaves, theta) -> value` with host-evaluated `leaves` (numpy arrays
    or Python scalars), the jittable form of one expression on a fixed set of
    states."""

    def __init__(self, fn, leaves: list):
        self.fn = fn
        self.leaves = leaves

    def __call__(self, leaves, theta: Mapping[str, object]):
        return self.fn(leaves, theta)


_ARITH = {
    ast.BinaryOp.ADD: jnp.add,
    ast.BinaryOp.SUB: jnp.subtract,
    ast.BinaryOp.MUL: jnp.multiply,
    ast.BinaryOp.DIV: jnp.divide,
    ast.BinaryOp.POW: jnp.power,
}
_ARITH.update({op.value: f for op, f in list(_ARITH.items())})
_ARITH["pow"] = jnp.power


def compile_expr(
    e: ast.Expr,
    params: frozenset[str],
    variables: Sequence[str],
    bools: frozenset[str],
    cols: Sequence[np.ndarray],
    n: int,
    *,
    what: str = "expression",
    error=None,
) -> Compiled:
    """Compile `e` for the states whose variable columns are `cols` (length
    `n` each).

    **Arguments:**
    - `params`: the names of the parameters (symbolic `Ident`s).
    - `variables`, `bools`: state variable names in column order, boolean ones.
    - `what`: how to name `e` in error messages ("the probability of ...").
    - `error`: `error(message, span, hint) -> Exception`, to attach the model
      source to rejections.

    The tree is walked with an explicit stack and the result is a list of
    instructions run in a loop (no recursion at compile or trace time), so
    expressions of any depth compile. Host subtrees under `c ? a : b` are
    evaluated lazily, as PRISM does: an error in `a` counts only in states
    where `c` holds.
    """
    index = {v: i for i, v in enumerate(variables)}
    leaves: list = []
    uses = _param_nodes(e, params)

    def fail(msg, node):
        hint = (
            "parameters may only appear in probabilities, rates, reward values and "
            "time bounds, as smooth functions (+ - * / ^ min max log); "
            "pass `rebuild=True` to rebuild the state space for each value instead"
        )
        if error is not None:
            return error(msg, node.span or e.span, hint)
        return UnsupportedError(msg, node.span or e.span, hint=hint)

    def host(node, active) -> int:
        """Evaluate a parameter-free subtree on the host; a leaf slot."""
        lo = lower(node, index, bools=bools)
        if lo.is_constant:
            v = lo.on_columns(cols, 1)[0]
            leaves.append(float(v) if lo.kind.value == "double" else v.item())
        else:
            leaves.append(np.asarray(lo.on_columns(cols, n, active)))
        return len(leaves) - 1

    program: list[tuple] = []  # (op, *operands): operands are program indices
    out: list[int] = []  # program index of each finished node
    stack = [(e, None, False)]
    while stack:
        node, active, done = stack.pop()
        p = uses.get(id(node))
        if p is None:
            program.append(("leaf", host(node, active)))
            out.append(len(program) - 1)
            continue
        if isinstance(node, ast.Ident):
            program.append(("param", node.name))
            out.append(len(program) - 1)
            continue
        if isinstance(node, ast.Ite):
            if uses.get(id(node.cond)) is not None:
                raise fail(
                    f"parameter `{uses[id(node.cond)]}` appears in the "
                    f"condition of `? :` in {what}",
                    node.cond,
                )
            if not done:
                c = host(node.cond, active)
                cv = np.asarray(leaves[c], dtype=bool)
                on = cv if active is None else active & cv
                off = ~cv if active is None else active & ~cv
                stack.append((node, c, True))
                stack.append((node.else_, off, False))
                stack.append((node.then, on, False))
                continue
            b, a = out.pop(), out.pop()
            program.append(("ite", active, a, b))  # `active` holds the slot here
            out.append(len(program) - 1)
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
        program.append((_op_name(node), *args))
        out.append(len(program) - 1)

    return Compiled(_Program(tuple(program)), leaves)


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
    if isinstance(node, ast.Binary) and node.op in _ARITH:
        return (node.left, node.right)
    if isinstance(node, ast.Call) and node.func in ("min", "max", "pow", "log"):
        return tuple(node.args)
    return None


def _op_name(node) -> str:
    if isinstance(node, ast.Unary):
        return "neg"
    if isinstance(node, ast.Binary):
        return node.op.value
    return node.func


def _f64(x):
    return jnp.asarray(x, jnp.float64)


class _Program:
    """Runs the instructions of `compile_expr` in order: `fn(leaves, theta)`."""

    def __init__(self, program: tuple):
        self.program = program

    def __call__(self, L, th):
        vals: list = []
        for op, *a in self.program:
            if op == "leaf":
                v = L[a[0]]
            elif op == "param":
                v = jnp.asarray(th[a[0]], jnp.float64)
            elif op == "ite":
                v = jnp.where(L[a[0]], vals[a[1]], vals[a[2]])
            elif op == "neg":
                v = -vals[a[0]]
            elif op in ("min", "max"):
                red = jnp.minimum if op == "min" else jnp.maximum
                v = _f64(vals[a[0]])
                for i in a[1:]:
                    v = red(v, vals[i])
            elif op == "log":
                v = jnp.log(_f64(vals[a[0]])) / jnp.log(_f64(vals[a[1]]))
            else:  # + - * / ^ pow
                v = _ARITH[op](_f64(vals[a[0]]), _f64(vals[a[1]]))
            vals.append(v)
        return vals[-1]


def evaluate_scalar(e: ast.Expr, params: frozenset[str], theta, *, what="expression"):
    """A state-independent expression (a time bound) as a jnp scalar."""
    c = compile_expr(e, params, (), frozenset(), (), 1, what=what)
    return jnp.asarray(c(c.leaves, theta), jnp.float64).reshape(())
