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
    """
    index = {v: i for i, v in enumerate(variables)}
    leaves: list = []

    def fail(msg, node):
        hint = (
            "parameters may only appear in probabilities, rates, reward values and "
            "time bounds, as smooth functions (+ - * / ^ min max log); "
            "pass `rebuild=True` to rebuild the state space for each value instead"
        )
        if error is not None:
            return error(msg, node.span or e.span, hint)
        return UnsupportedError(msg, node.span or e.span, hint=hint)

    def host(node) -> int:
        """Evaluate a parameter-free subtree on the host; a leaf slot."""
        lo = lower(node, index, bools=bools)
        if lo.is_constant:
            v = lo.on_columns(cols, 1)[0]
            leaves.append(float(v) if lo.kind.value == "double" else v.item())
        else:
            leaves.append(np.asarray(lo.on_columns(cols, n)))
        return len(leaves) - 1

    def go(node):
        p = mentions(node, params)
        if p is None:
            slot = host(node)
            return lambda L, th, slot=slot: L[slot]
        if isinstance(node, ast.Ident):
            name = node.name
            return lambda L, th, name=name: jnp.asarray(th[name], jnp.float64)
        if isinstance(node, ast.Unary) and node.op == ast.UnaryOp.NEG:
            f = go(node.operand)
            return lambda L, th: -f(L, th)
        if isinstance(node, ast.Binary) and node.op in _ARITH:
            op = _ARITH[node.op]
            f, g = go(node.left), go(node.right)
            return lambda L, th: op(
                jnp.asarray(f(L, th), jnp.float64), jnp.asarray(g(L, th), jnp.float64)
            )
        if isinstance(node, ast.Ite):
            if mentions(node.cond, params):
                raise fail(
                    f"parameter `{mentions(node.cond, params)}` appears in the "
                    f"condition of `? :` in {what}",
                    node.cond,
                )
            c = host(node.cond)
            f, g = go(node.then), go(node.else_)
            return lambda L, th: jnp.where(L[c], f(L, th), g(L, th))
        if isinstance(node, ast.Call) and node.func in ("min", "max", "pow", "log"):
            fs = [go(a) for a in node.args]
            if node.func == "pow":
                return lambda L, th: jnp.power(
                    jnp.asarray(fs[0](L, th), jnp.float64), fs[1](L, th)
                )
            if node.func == "log":
                return lambda L, th: jnp.log(jnp.asarray(fs[0](L, th), jnp.float64)) / jnp.log(
                    jnp.asarray(fs[1](L, th), jnp.float64)
                )
            red = jnp.minimum if node.func == "min" else jnp.maximum

            def mm(L, th):
                out = jnp.asarray(fs[0](L, th), jnp.float64)
                for h in fs[1:]:
                    out = red(out, h(L, th))
                return out

            return mm
        raise fail(f"parameter `{p}` appears in a non-smooth position in {what}", node)

    fn = go(e)
    return Compiled(fn, leaves)


def evaluate_scalar(e: ast.Expr, params: frozenset[str], theta, *, what="expression"):
    """A state-independent expression (a time bound) as a jnp scalar."""
    c = compile_expr(e, params, (), frozenset(), (), 1, what=what)
    return jnp.asarray(c(c.leaves, theta), jnp.float64).reshape(())
