"""Constant folding of PRISM expressions (`fold`), iteratively.

Partial evaluation with PRISM's rules (`jaxmc.semantics.evaluate`): what can
be computed is computed, the rest is kept with its spans. The walk uses an
explicit stack, so expressions of any size or depth fold.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..lang import ast
from .evaluate import (
    Value,
    _Evaluator,
    binary,
    call,
    is_literal,
    literal,
    literal_value,
    static_type,
    type_of_value,
)
from .rewrite import map_children
from .types import Type


def fold(
    expr: ast.Expr,
    env: Mapping[str, Value | ast.Expr],
    types: Mapping[str, Type] | None = None,
) -> ast.Expr:
    """Partially evaluate `expr`.

    Identifiers bound in `env` are replaced (a value becomes a literal; an
    `ast.Expr` is substituted as is), subexpressions whose operands are all
    literals are folded into literals, everything else is kept (with its
    span). Boolean connectives simplify with a literal operand
    (`false & x` → `false`, `true & x` → `x`); conditionals with a literal
    condition select their branch.

    `types` gives the types of identifiers left symbolic (state variables,
    parameters); it is only needed to keep `c ? 1 : x` double-typed when the
    int branch is selected and `x` is a double.

    Property operators (`P`, `R`, ...) are folded inside their operands.
    Arithmetic errors are raised only for subexpressions that are evaluated:
    division by zero folds to `Infinity`/`NaN` like PRISM.
    """
    return _Folder(env, types or {}).fold(expr)


class _Folder:
    def __init__(self, env, types):
        self.env = env
        self.types = types

    def lookup_type(self, name: str) -> Type | None:
        if name in self.types:
            return self.types[name]
        v = self.env.get(name)
        if v is None:
            return None
        if isinstance(v, (bool, int, float)):
            return type_of_value(v)
        return static_type(v, self.lookup_type)

    def type_of(self, e: ast.Expr) -> Type | None:
        return static_type(e, self.lookup_type)

    def fold(self, root: ast.Expr) -> ast.Expr:  # noqa: C901 - one dispatch
        B = ast.BinaryOp
        out: list[ast.Expr] = []
        stack: list[tuple] = [(root, 0, None)]
        while stack:
            e, stage, extra = stack.pop()
            sp = e.span
            if is_literal(e):
                out.append(e)
            elif isinstance(e, ast.Ident):
                v = self.env.get(e.name, e) if e.name in self.env else e
                out.append(literal(v, sp) if isinstance(v, (bool, int, float)) else v)
            elif isinstance(e, ast.Unary):
                if stage == 0:
                    stack += [(e, 1, None), (e.operand, 0, None)]
                    continue
                x = out.pop()
                if is_literal(x):
                    node = ast.Unary(e.op, literal(literal_value(x)), span=sp)
                    out.append(literal(_Evaluator(None, {}).eval(node), sp))
                else:
                    out.append(ast.Unary(e.op, x, span=sp))
            elif isinstance(e, ast.Binary):
                lazy = e.op in (B.AND, B.OR, B.IMPLIES)
                if stage == 0:
                    stack += [(e, 1, None), (e.left, 0, None)]
                    continue
                if stage == 1:
                    left = out[-1]
                    if lazy and is_literal(left):
                        lv = bool(literal_value(left))
                        if lv == (e.op == B.OR):  # false & x, true | x, false => x
                            out[-1] = ast.BoolLit(e.op != B.AND, span=sp)
                            continue
                    stack += [(e, 2, None), (e.right, 0, None)]
                    continue
                right, left = out.pop(), out.pop()
                out.append(self.binary(e, left, right, lazy))
            elif isinstance(e, ast.Ite):
                if stage == 0:
                    stack += [(e, 1, None), (e.cond, 0, None)]
                elif stage == 1:
                    c = out[-1]
                    if is_literal(c):
                        taken, other = (
                            (e.then, e.else_) if literal_value(c) else (e.else_, e.then)
                        )
                        stack += [(e, 2, other), (taken, 0, None)]
                    else:
                        stack += [(e, 3, None), (e.else_, 0, None), (e.then, 0, None)]
                elif stage == 2:
                    t = out.pop()
                    c = out.pop()
                    if (
                        self.type_of(t) == Type.INT
                        and self.type_of(extra) == Type.DOUBLE
                    ):
                        if is_literal(t):
                            out.append(literal(float(literal_value(t)), sp))
                        else:
                            # keep the conditional so that the expression stays double
                            out.append(c)
                            stack += [
                                (e, 3, None),
                                (e.else_, 0, None),
                                (e.then, 0, None),
                            ]
                    else:
                        out.append(t)
                else:
                    b, a, c = out.pop(), out.pop(), out.pop()
                    out.append(ast.Ite(c, a, b, span=sp))
            elif isinstance(e, ast.Call):
                if stage == 0:
                    stack.append((e, 1, None))
                    stack += [(a, 0, None) for a in reversed(e.args)]
                    continue
                k = len(e.args)
                args = tuple(out[len(out) - k :])
                del out[len(out) - k :]
                if all(is_literal(a) for a in args):
                    vals = [literal_value(a) for a in args]
                    out.append(literal(call(e.func, vals, e), sp))
                else:
                    out.append(ast.Call(e.func, args, span=sp))
            else:
                # property-level nodes: fold inside (through bounds and thresholds)
                out.append(map_children(e, self._fold_child))
        return out[0]

    def binary(self, e: ast.Binary, left, right, lazy: bool) -> ast.Expr:
        B, sp = ast.BinaryOp, e.span
        if lazy and is_literal(left):  # `true & x`, `false | x`, `true => x`
            return (
                literal(bool(literal_value(right)), sp) if is_literal(right) else right
            )
        if is_literal(left) and is_literal(right):
            return literal(
                binary(e.op, literal_value(left), literal_value(right), e), sp
            )
        if e.op in (B.AND, B.OR) and is_literal(right):
            rv = bool(literal_value(right))
            if e.op == B.AND:
                return left if rv else ast.BoolLit(False, span=sp)
            return ast.BoolLit(True, span=sp) if rv else left
        return ast.Binary(e.op, left, right, span=sp)

    def _fold_child(self, c: ast.Node) -> ast.Node:
        if isinstance(c, (ast.TimeBound, ast.Threshold)):
            return map_children(c, self._fold_child)
        return self.fold(c)
