"""Parse tree → AST, for expressions and properties (`ExprTransformer`).

The transformer walks lark's tree without recursion and gives every node its
`Span`; it records the nesting depth of what it builds (refusing more than
`MAX_NESTING` levels) and the chains of an associative operator, which
`jaxmc.lang.parser` then rebalances (`tree.balance_chains`). Declarations,
modules and whole files are built by its subclass in `jaxmc.lang.transform`.
"""

from __future__ import annotations

import re

from lark import Token, v_args
from lark.visitors import Transformer_NonRecursive

from ..errors import PrismSyntaxError, UnsupportedError
from . import ast
from .tree import ASSOCIATIVE, CHAIN_LIMIT


_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
#: The deepest nesting of an expression that is accepted (a chain of `+`,
#: `*`, `&` or `|` counts as the depth of its balanced tree).
MAX_NESTING = 10_000
#: PRISM's `int` is Java's 32-bit int.
_INT_MAX = 2**31 - 1

_BINARY = {op.value: op for op in ast.BinaryOp}
_TEMPORAL = {op.value: op for op in ast.TemporalOp}
#: Symbolic filter operators and their names (PRISM's ExpressionFilter).
_FILTER_SYMBOLS = {"&": "forall", "|": "exists", "+": "sum"}


def tok_span(tok: Token, file: str | None) -> ast.Span:
    return ast.Span(file, tok.line, tok.column, tok.end_line, tok.end_column)


def _exprs(children) -> list:
    return [c for c in children if isinstance(c, ast.Node)]


def _tokens(children, *types: str) -> list[Token]:
    return [
        c for c in children if isinstance(c, Token) and (not types or c.type in types)
    ]


class Sugar:
    """Intermediate values (not AST nodes) passed between builder methods."""

    def __init__(self, kind: str, *values, span: ast.Span | None = None):
        self.kind = kind
        self.values = values
        self.span = span


@v_args(meta=True)
class ExprTransformer(Transformer_NonRecursive):
    def __init__(self, file: str | None, props: bool):
        super().__init__(visit_tokens=False)
        self.file = file
        self.props = props
        #: id → (node, number of operands, deepest operand's depth) of the
        #: chains of an associative operator
        self._chains: dict[int, tuple[ast.Binary, int, int]] = {}
        #: whether some chain has more than CHAIN_LIMIT operands
        self.long_chain = False
        #: id → nesting depth of each built value (AST node, tuple, sugar)
        self._depth: dict[int, int] = {}

    def _call_userfunc(self, tree, new_children=None):
        result = super()._call_userfunc(tree, new_children)
        depth = self._depth
        chain = self._chains.get(id(result))
        if chain is not None:  # depth once balanced (see `tree.balance_chains`)
            _, n, operand_depth = chain
            d = operand_depth + (n - 1).bit_length()
        else:
            d = 1 + max((depth.get(id(c), 0) for c in new_children or ()), default=0)
        if d > MAX_NESTING and isinstance(result, ast.Node):
            raise PrismSyntaxError(
                f"expression nested more than {MAX_NESTING} levels deep",
                result.span,
                hint="write it with fewer nested parentheses or `? :`, "
                "or split it into formulas",
            )
        depth[id(result)] = d
        return result

    # ---------------------------------------------------------------- helpers

    def _span(self, meta) -> ast.Span | None:
        if getattr(meta, "empty", True):
            return None
        return ast.Span(
            self.file, meta.line, meta.column, meta.end_line, meta.end_column
        )

    def _label_name(self, tok: Token) -> str:
        name = tok.value[1:-1]
        if not _IDENT.fullmatch(name):
            raise PrismSyntaxError(
                f"invalid name {tok.value}: a label or property name must be an "
                "identifier",
                tok_span(tok, self.file),
                hint='write e.g. "goal_reached" (letters, digits and _)',
            )
        return name

    # ------------------------------------------------------------ expressions

    def number(self, meta, children):
        (tok,) = children
        text = tok.value
        span = self._span(meta)
        if any(c in text for c in ".eE"):
            return ast.RealLit(float(text), text=text, span=span)
        value = int(text)
        if value > _INT_MAX:
            # As PRISM ("Invalid integer literal"): an int is 32-bit, whatever
            # the constant's declared type.
            raise PrismSyntaxError(
                f"integer literal {text} does not fit in PRISM's 32-bit int "
                f"(at most {_INT_MAX})",
                span,
                hint=f"write a double, `{text}.0`, if a large value is meant",
            )
        return ast.IntLit(value, span=span)

    def true(self, meta, children):
        return ast.BoolLit(True, span=self._span(meta))

    def false(self, meta, children):
        return ast.BoolLit(False, span=self._span(meta))

    def ident(self, meta, children):
        return ast.Ident(children[0].value, span=self._span(meta))

    def binary(self, meta, children):
        left, op, right = children
        node = ast.Binary(_BINARY[op.value], left, right, span=self._span(meta))
        if node.op in ASSOCIATIVE:
            n1, d1 = self._operands(left, node.op)
            n2, d2 = self._operands(right, node.op)
            self._chains[id(node)] = (node, n1 + n2, max(d1, d2))
            self.long_chain = self.long_chain or n1 + n2 > CHAIN_LIMIT
        return node

    def _operands(self, e, op: ast.BinaryOp) -> tuple[int, int]:
        """The number of operands of `e` as part of a chain of `op`, and
        the depth of the deepest."""
        chain = self._chains.get(id(e))
        if chain is not None and chain[0].op is op:
            return chain[1], chain[2]
        return 1, self._depth.get(id(e), 1)

    def unary(self, meta, children):
        op, operand = children
        kind = ast.UnaryOp.NOT if op.value == "!" else ast.UnaryOp.NEG
        return ast.Unary(kind, operand, span=self._span(meta))

    def ite(self, meta, children):
        cond, then, else_ = children
        return ast.Ite(cond, then, else_, span=self._span(meta))

    def args(self, meta, children):
        return tuple(children)

    def func_name(self, meta, children):
        return children[0].value

    def call(self, meta, children):
        name, args = children
        return ast.Call(name.value, args, span=self._span(meta))

    def old_call(self, meta, children):
        name, args = children
        return ast.Call(name, args, span=self._span(meta))

    # ----------------------------------------------------- property operators

    def label_ref(self, meta, children):
        return ast.LabelRef(self._label_name(children[0]), span=self._span(meta))

    def _bound(self, kind, meta, children, side):
        value = _exprs(children)[0]
        span = self._span(meta)
        if side == "low":
            return ast.TimeBound(kind, low=value, span=span)
        return ast.TimeBound(kind, high=value, span=span)

    def bound_le(self, meta, children):
        return self._bound(ast.TimeBoundKind.LE, meta, children, "high")

    def bound_lt(self, meta, children):
        return self._bound(ast.TimeBoundKind.LT, meta, children, "high")

    def bound_ge(self, meta, children):
        return self._bound(ast.TimeBoundKind.GE, meta, children, "low")

    def bound_gt(self, meta, children):
        return self._bound(ast.TimeBoundKind.GT, meta, children, "low")

    def bound_eq(self, meta, children):
        return self._bound(ast.TimeBoundKind.EQ, meta, children, "low")

    def bound_interval(self, meta, children):
        low, high = children
        return ast.TimeBound(
            ast.TimeBoundKind.INTERVAL, low, high, span=self._span(meta)
        )

    # Storm's bounds (`F^{rew{"r"}<=b}`): one `(ref, structure, kind, low,
    # high)` per bound in the braces, turned into one `TimeBound`.

    def storm_single(self, meta, children):
        op, value = children
        kind = ast.TimeBoundKind(op.value)
        low_side = kind in (
            ast.TimeBoundKind.GE,
            ast.TimeBoundKind.GT,
            ast.TimeBoundKind.EQ,
        )
        if low_side:
            return Sugar("storm_relop", kind, value, None, span=self._span(meta))
        return Sugar("storm_relop", kind, None, value, span=self._span(meta))

    def storm_interval(self, meta, children):
        low, high = _exprs(children)
        kind = ast.TimeBoundKind.INTERVAL
        return Sugar("storm_relop", kind, low, high, span=self._span(meta))

    def bound_ref(self, meta, children):
        tok = children[0]
        index = next((c for c in children if isinstance(c, Sugar)), None)
        structure = index.values[0] if index is not None else None
        if isinstance(tok, Token) and tok.type == "STEPS":
            return Sugar("ref", ast.BoundRef.STEPS, None)
        if isinstance(tok, Token) and tok.type == "TIME":
            return Sugar("ref", ast.BoundRef.TIME, None)
        return Sugar("ref", ast.BoundRef.REWARD, structure)

    def storm_bound(self, meta, children):
        ref = next((c for c in children if c.kind == "ref"), None)
        relop = children[-1]
        kind, low, high = relop.values
        return ast.TimeBound(
            kind,
            low,
            high,
            ast.BoundRef.TIME if ref is None else ref.values[0],
            None if ref is None else ref.values[1],
            span=self._span(meta),
        )

    def bound_storm(self, meta, children):
        bounds = [c for c in children if isinstance(c, ast.TimeBound)]
        if len(bounds) > 1:
            raise UnsupportedError(
                f"{len(bounds)} bounds on one path formula (a multi-dimensional bound)",
                self._span(meta),
                hint='give one bound, e.g. F^{rew{"time"}<=10} "goal"; several '
                "are Storm's multi-dimensional reward unfolding, which jaxmc "
                "does not have",
            )
        return bounds[0]

    def bound_storm_rew(self, meta, children):
        index = next(c for c in children if isinstance(c, Sugar) and c.kind == "index")
        relop = children[-1]
        kind, low, high = relop.values
        return ast.TimeBound(
            kind,
            low,
            high,
            ast.BoundRef.REWARD,
            index.values[0],
            span=self._span(meta),
        )

    def temporal_unary(self, meta, children):
        op = children[0]
        bound = next((c for c in children[1:-1] if isinstance(c, ast.TimeBound)), None)
        return ast.Temporal(
            _TEMPORAL[op.value], None, children[-1], bound, span=self._span(meta)
        )

    def temporal_binary(self, meta, children):
        left, op = children[0], children[1]
        bound = next((c for c in children[2:-1] if isinstance(c, ast.TimeBound)), None)
        return ast.Temporal(
            _TEMPORAL[op.value], left, children[-1], bound, span=self._span(meta)
        )

    def opt(self, meta, children):
        return ast.Opt(children[0].value)

    def query(self, meta, children):
        return Sugar("query")

    def threshold(self, meta, children):
        op, value = children
        return ast.Threshold(_BINARY[op.value], value, span=self._span(meta))

    def reward_index(self, meta, children):
        (value,) = children
        if isinstance(value, ast.LabelRef):
            return Sugar("index", value.name)
        return Sugar("index", value)

    def cumul_bounded(self, meta, children):
        value = _exprs(children)[0]
        bound = ast.TimeBound(ast.TimeBoundKind.LE, high=value, span=value.span)
        return ast.RewardPath(
            ast.RewardPathKind.CUMULATIVE, bound, span=self._span(meta)
        )

    def cumul(self, meta, children):
        return ast.RewardPath(ast.RewardPathKind.CUMULATIVE, span=self._span(meta))

    def instant(self, meta, children):
        value = _exprs(children)[0]
        bound = ast.TimeBound(ast.TimeBoundKind.EQ, low=value, span=value.span)
        return ast.RewardPath(ast.RewardPathKind.INSTANT, bound, span=self._span(meta))

    def long_run(self, meta, children):
        return ast.RewardPath(ast.RewardPathKind.LONG_RUN, span=self._span(meta))

    def old_filter(self, meta, children):
        states = children[0]
        requests = {t.value for t in _tokens(children[1:], "MIN", "MAX")}
        return Sugar("old_filter", states, requests, span=self._span(meta))

    def _operator_parts(self, children):
        """Split the children of prob_op/reward_op/steady_op into
        (opt, threshold, structure, operand, old_filter)."""
        opt = threshold = structure = old = None
        operand = None
        for c in children:
            if isinstance(c, ast.Opt):
                opt = c
            elif isinstance(c, Token):  # Pmin, Pmax, Rmin, Rmax
                opt = ast.Opt(c.value[1:])
            elif isinstance(c, ast.Threshold):
                threshold = c
            elif isinstance(c, Sugar) and c.kind == "index":
                structure = c.values[0]
            elif isinstance(c, Sugar) and c.kind == "old_filter":
                old = c
            elif isinstance(c, ast.Node):
                operand = c
        return opt, threshold, structure, operand, old

    def _wrap_old_filter(self, node, old, threshold, span):
        """PRISM 3's `P=? [ φ {states}{max} ]`: PRISM wraps the operator in an
        (invisible) filter; `forall` for a bounded operator, else min/max/range
        as requested, or `state` when neither is."""
        if old is None:
            return node
        states, requests = old.values
        if threshold is not None:
            op = "forall"
        elif requests == {"min", "max"}:
            op = "range"
        elif requests:
            op = next(iter(requests))
        else:
            op = "state"
        return ast.Filter(op, node, states, span=span)

    def prob_op(self, meta, children):
        opt, threshold, _, path, old = self._operator_parts(children)
        span = self._span(meta)
        node = ast.ProbOp(path, opt, threshold, span=span)
        return self._wrap_old_filter(node, old, threshold, span)

    def reward_op(self, meta, children):
        opt, threshold, structure, path, old = self._operator_parts(children)
        span = self._span(meta)
        node = ast.RewardOp(path, structure, opt, threshold, span=span)
        return self._wrap_old_filter(node, old, threshold, span)

    def steady_op(self, meta, children):
        opt, threshold, _, operand, old = self._operator_parts(children)
        span = self._span(meta)
        node = ast.SteadyOp(operand, opt, threshold, span=span)
        return self._wrap_old_filter(node, old, threshold, span)

    def path_quant(self, meta, children):
        quant, path = children
        return ast.PathQuantifier(
            ast.Quantifier(quant.value), path, span=self._span(meta)
        )

    def filter_op(self, meta, children):
        return children[0]

    def filter(self, meta, children):
        op_tok = children[0]
        op = _FILTER_SYMBOLS.get(op_tok.value, op_tok.value)
        if op not in ast.FILTER_OPS:
            raise PrismSyntaxError(
                f"unknown filter operator '{op_tok.value}'",
                tok_span(op_tok, self.file),
                hint="filter operators are " + ", ".join(ast.FILTER_OPS),
            )
        rest = children[1:]
        states = rest[1] if len(rest) > 1 else None
        return ast.Filter(op, rest[0], states, span=self._span(meta))

    def multi(self, meta, children):
        # As in PRISM, which parses it as a function: a multi-objective query
        # is Call("multi", objectives), for the checker to reject or handle.
        return ast.Call("multi", children[1], span=self._span(meta))

    def property(self, meta, children):
        name = self._label_name(children[0]) if isinstance(children[0], Token) else None
        return ast.Property(children[-1], name, span=self._span(meta))
