"""Stage 1: PRISM text → AST (`jaxmc.lang.ast`).

lark parses with the LALR grammars of `grammars/` (see `grammar.py`); the
`_Builder` transformer below turns the parse tree into AST nodes, each with a
`Span`. It builds syntax only: no scoping, no typing, no constant values.

Every lark exception is translated into a `PrismSyntaxError` (see `_errors.py`),
so that a user never sees a parser traceback.
"""

from __future__ import annotations

import re
from pathlib import Path

import lark
from lark import Token, v_args
from lark.visitors import Transformer_NonRecursive

from ..errors import JaxmcError, PrismSyntaxError, UnsupportedError
from . import ast
from ._errors import translate_lark_error
from .tree import ASSOCIATIVE, CHAIN_LIMIT, balance_chains
from .grammar import ReservedName, get_parser
from .source import read_source


__all__ = [
    "parse_model",
    "parse_model_file",
    "parse_properties",
    "parse_properties_file",
    "parse_expression",
]


# ----------------------------------------------------------------- public API


def parse_model(text: str, file: str | None = None) -> ast.Program:
    """Parse the text of a PRISM model file (`.pm`, `.sm`, `.nm`, `.prism`).

    **Arguments:**
    - `text`: the model source.
    - `file`: its file name, used in spans and error messages.

    **Returns:** an `ast.Program`.

    **Raises:** `PrismSyntaxError` for text outside the PRISM language and
    `UnsupportedError` for PRISM constructs jaxmc does not parse (observables).
    """
    tree = _parse("prism", text, file, "start")
    return _build(tree, text, file)


def parse_model_file(path: str | Path) -> ast.Program:
    """Read and parse a model file; spans carry its path."""
    path = Path(path)
    return parse_model(read_source(path), str(path))


def parse_properties(text: str, file: str | None = None) -> ast.PropertiesFile:
    """Parse the text of a PRISM property file (`.props`, `.pctl`, `.csl`).

    As in PRISM, the `;` after a property is optional (a new property may start
    on the next line); constants, formulas and labels may be declared.
    """
    tree = _parse("props", text, file, "start")
    return _build(tree, text, file, props=True)


def parse_properties_file(path: str | Path) -> ast.PropertiesFile:
    """Read and parse a property file; spans carry its path."""
    path = Path(path)
    return parse_properties(read_source(path), str(path))


def parse_expression(text: str, file: str | None = None) -> ast.Expr:
    """Parse a single expression, which may be a property (`P=? [F s=2]`).

    Used for `-const N=3` values and properties given on the command line.
    """
    tree = _parse("props", text, file, "expr")
    return _build(tree, text, file, props=True)


# ------------------------------------------------------------------- driving


def _parse(grammar: str, text: str, file: str | None, start: str) -> lark.Tree:
    parser = get_parser(grammar)
    try:
        return parser.parse(text, start=start)
    except lark.exceptions.UnexpectedInput as e:
        raise translate_lark_error(e, text, file, parser) from None
    except ReservedName as e:
        tok = e.token
        raise PrismSyntaxError(
            f"'{tok.value}' is a PRISM keyword and cannot be used as a name",
            _tok_span(tok, file),
            source=text,
            hint="choose another name",
        ) from None


def _build(tree, text: str, file: str | None, props: bool = False):
    # The builder walks the parse tree without recursion (a generated model's
    # expressions may be thousands of levels deep); long chains of `+`, `*`,
    # `&`, `|` are then rebuilt as balanced trees (see `tree.balance_chains`).
    builder = _Builder(file, props)
    try:
        result = builder.transform(tree)
    except lark.exceptions.VisitError as e:
        orig = e.orig_exc
        if isinstance(orig, JaxmcError):
            if orig.source is None:
                orig.with_source(text, file)
            raise orig from None
        raise  # a bug in the builder: let it show
    if builder.long_chain:
        result = balance_chains(result)
    return result


# ------------------------------------------------------------------- builder

_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
#: The deepest nesting of an expression that is accepted (a chain of `+`,
#: `*`, `&` or `|` counts as the depth of its balanced tree).
MAX_NESTING = 10_000
#: PRISM's `int` is Java's 32-bit int.
_INT_MAX = 2**31 - 1

_BINARY = {op.value: op for op in ast.BinaryOp}
_TEMPORAL = {op.value: op for op in ast.TemporalOp}
_CONST_TYPES = {
    "int": ast.ValueType.INT,
    "double": ast.ValueType.DOUBLE,
    "bool": ast.ValueType.BOOL,
    "rate": ast.ValueType.DOUBLE,
    "prob": ast.ValueType.DOUBLE,
    "": ast.ValueType.INT,
}
#: Symbolic filter operators and their names (PRISM's ExpressionFilter).
_FILTER_SYMBOLS = {"&": "forall", "|": "exists", "+": "sum"}


def _tok_span(tok: Token, file: str | None) -> ast.Span:
    return ast.Span(file, tok.line, tok.column, tok.end_line, tok.end_column)


def _exprs(children) -> list:
    return [c for c in children if isinstance(c, ast.Node)]


def _tokens(children, *types: str) -> list[Token]:
    return [c for c in children if isinstance(c, Token) and (not types or c.type in types)]


class _Sugar:
    """Intermediate values (not AST nodes) passed between builder methods."""

    def __init__(self, kind: str, *values, span: ast.Span | None = None):
        self.kind = kind
        self.values = values
        self.span = span


@v_args(meta=True)
class _Builder(Transformer_NonRecursive):
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
        return ast.Span(self.file, meta.line, meta.column, meta.end_line, meta.end_column)

    def _label_name(self, tok: Token) -> str:
        name = tok.value[1:-1]
        if not _IDENT.fullmatch(name):
            raise PrismSyntaxError(
                f"invalid name {tok.value}: a label or property name must be an identifier",
                _tok_span(tok, self.file),
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
        return ast.TimeBound(ast.TimeBoundKind.INTERVAL, low, high, span=self._span(meta))

    def temporal_unary(self, meta, children):
        op = children[0]
        bound = next((c for c in children[1:-1] if isinstance(c, ast.TimeBound)), None)
        return ast.Temporal(_TEMPORAL[op.value], None, children[-1], bound, span=self._span(meta))

    def temporal_binary(self, meta, children):
        left, op = children[0], children[1]
        bound = next((c for c in children[2:-1] if isinstance(c, ast.TimeBound)), None)
        return ast.Temporal(_TEMPORAL[op.value], left, children[-1], bound, span=self._span(meta))

    def opt(self, meta, children):
        return ast.Opt(children[0].value)

    def query(self, meta, children):
        return _Sugar("query")

    def threshold(self, meta, children):
        op, value = children
        return ast.Threshold(_BINARY[op.value], value, span=self._span(meta))

    def reward_index(self, meta, children):
        (value,) = children
        if isinstance(value, ast.LabelRef):
            return _Sugar("index", value.name)
        return _Sugar("index", value)

    def cumul_bounded(self, meta, children):
        value = _exprs(children)[0]
        bound = ast.TimeBound(ast.TimeBoundKind.LE, high=value, span=value.span)
        return ast.RewardPath(ast.RewardPathKind.CUMULATIVE, bound, span=self._span(meta))

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
        return _Sugar("old_filter", states, requests, span=self._span(meta))

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
            elif isinstance(c, _Sugar) and c.kind == "index":
                structure = c.values[0]
            elif isinstance(c, _Sugar) and c.kind == "old_filter":
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
        return ast.PathQuantifier(ast.Quantifier(quant.value), path, span=self._span(meta))

    def filter_op(self, meta, children):
        return children[0]

    def filter(self, meta, children):
        op_tok = children[0]
        op = _FILTER_SYMBOLS.get(op_tok.value, op_tok.value)
        if op not in ast.FILTER_OPS:
            raise PrismSyntaxError(
                f"unknown filter operator '{op_tok.value}'",
                _tok_span(op_tok, self.file),
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

    # ----------------------------------------------------------- declarations

    def const_type(self, meta, children):
        return _Sugar("type", children[0].value)

    old_const_type = const_type

    def const_decl(self, meta, children):
        keyword = ""
        if isinstance(children[0], _Sugar):
            keyword = children[0].values[0]
            children = children[1:]
        name = children[0].value
        value = children[1] if len(children) > 1 else None
        return ast.ConstDecl(
            name, _CONST_TYPES[keyword], value, keyword=keyword, span=self._span(meta)
        )

    def formula_decl(self, meta, children):
        name, expr = children
        return ast.FormulaDecl(name.value, expr, span=self._span(meta))

    def label_decl(self, meta, children):
        name, expr = children
        return ast.LabelDecl(self._label_name(name), expr, span=self._span(meta))

    def model_type(self, meta, children):
        return _Sugar("model_type", ast.MODEL_TYPE_KEYWORDS[children[0].value], span=self._span(meta))

    def range_type(self, meta, children):
        low, high = children
        return _Sugar("range", low, high)

    def var_kind(self, meta, children):
        return children[0].value

    def kind_type(self, meta, children):
        kind = children[0]
        return _Sugar("kind", ast.ValueType.BOOL if kind == "bool" else kind)

    def var_decl(self, meta, children):
        name, vtype = children[0], children[1]
        init = children[2] if len(children) > 2 else None
        span = self._span(meta)
        if vtype.kind == "range":
            low, high = vtype.values
            return ast.VarDecl(name.value, ast.ValueType.INT, low, high, init, span=span)
        return ast.VarDecl(name.value, vtype.values[0], init=init, span=span)

    def global_decl(self, meta, children):
        return _Sugar("global", children[0])

    # ---------------------------------------------------------------- modules

    def invariant(self, meta, children):
        return _Sugar("invariant", children[0])

    def module(self, meta, children):
        name = children[0].value
        variables = tuple(c for c in children[1:] if isinstance(c, ast.VarDecl))
        commands = tuple(c for c in children[1:] if isinstance(c, ast.Command))
        inv = next((c.values[0] for c in children if isinstance(c, _Sugar)), None)
        return ast.Module(name, variables, commands, inv, span=self._span(meta))

    def rename(self, meta, children):
        old, new = children
        return (old.value, new.value)

    def renamed_module(self, meta, children):
        name, base, *renames = children
        return ast.RenamedModule(name.value, base.value, tuple(renames), span=self._span(meta))

    def assign(self, meta, children):
        var, expr = children
        return ast.Assign(var.value[:-1], expr, span=self._span(meta))

    def update(self, meta, children):
        return _Sugar("update", tuple(children), span=self._span(meta))

    def no_assign(self, meta, children):
        return _Sugar("update", (), span=self._span(meta))

    def single_update(self, meta, children):
        upd = children[0]
        return (ast.Update(None, upd.values[0], span=upd.span),)

    def prob_update(self, meta, children):
        prob, upd = children
        return ast.Update(prob, upd.values[0], span=self._span(meta))

    def interval_update(self, meta, children):
        raise UnsupportedError(
            "interval probabilities [lo,hi] (interval MDPs) are not supported",
            self._span(meta),
            hint="jaxmc checks DTMCs, CTMCs and MDPs with exact probabilities",
        )

    def prob_updates(self, meta, children):
        return tuple(children)

    def command(self, meta, children):
        action = None
        if isinstance(children[0], Token):
            action = children[0].value
            children = children[1:]
        guard, updates = children
        return ast.Command(action, guard, updates, span=self._span(meta))

    # ---------------------------------------------------------------- rewards

    def state_reward(self, meta, children):
        guard, value = children
        return ast.RewardItem(False, None, guard, value, span=self._span(meta))

    def trans_reward(self, meta, children):
        action = None
        if isinstance(children[0], Token):
            action = children[0].value
            children = children[1:]
        guard, value = children
        return ast.RewardItem(True, action, guard, value, span=self._span(meta))

    def rewards(self, meta, children):
        name = None
        if children and isinstance(children[0], Token):
            name = self._label_name(children[0])
            children = children[1:]
        return ast.RewardStruct(name, tuple(children), span=self._span(meta))

    # ------------------------------------------------------ init and system

    def init_block(self, meta, children):
        return _Sugar("init", children[0], span=self._span(meta))

    def system_block(self, meta, children):
        return _Sugar("system", children[0], span=self._span(meta))

    def sys_module(self, meta, children):
        return ast.SysModule(children[0].value, span=self._span(meta))

    def sys_interleave(self, meta, children):
        left, right = children
        return ast.SysInterleave(left, right, span=self._span(meta))

    def sys_full(self, meta, children):
        result = children[0]
        for right in children[1:]:
            span = ast.Span(
                self.file,
                result.span.line,
                result.span.column,
                right.span.end_line,
                right.span.end_column,
            )
            result = ast.SysFullParallel(result, right, span=span)
        return result

    def sys_parallel(self, meta, children):
        left, right = children[0], children[-1]
        actions = tuple(t.value for t in children[1:-1])
        return ast.SysParallel(left, right, actions, span=self._span(meta))

    def sys_hide(self, meta, children):
        operand, *actions = children
        return ast.SysHide(operand, tuple(a.value for a in actions), span=self._span(meta))

    def rename_pair(self, meta, children):
        old, new = children
        return (old.value, new.value)

    def sys_rename(self, meta, children):
        operand, *pairs = children
        return ast.SysRename(operand, tuple(pairs), span=self._span(meta))

    def observables(self, meta, children):
        raise UnsupportedError(
            "observables (partially observable models) are not supported",
            self._span(meta),
            hint="jaxmc checks DTMCs, CTMCs and MDPs",
        )

    # ------------------------------------------------------------- top level

    def start(self, meta, children):
        if self.props:
            return self._properties_file(meta, children)
        return self._program(meta, children)

    def _program(self, meta, children) -> ast.Program:
        model_type = None
        type_span = None
        constants, globals_, formulas, labels, modules, rewards = [], [], [], [], [], []
        init = system = None
        order: list[ast.Node] = []
        for item in children:
            if isinstance(item, _Sugar):
                if item.kind == "model_type":
                    if type_span is not None:
                        raise PrismSyntaxError(
                            "there are multiple model type declarations",
                            item.span,
                            hint=f"the model type was already declared at {type_span}",
                        )
                    model_type, type_span = item.values[0], item.span
                elif item.kind == "global":
                    globals_.append(item.values[0])
                    order.append(item.values[0])
                elif item.kind == "init":
                    if init is not None:
                        raise PrismSyntaxError(
                            "there are multiple init...endinit blocks", item.span
                        )
                    init = item.values[0]
                    order.append(init)
                elif item.kind == "system":
                    if system is not None:
                        raise PrismSyntaxError(
                            "there are multiple system...endsystem blocks", item.span
                        )
                    system = item.values[0]
                    order.append(system)
                continue
            order.append(item)
            if isinstance(item, ast.ConstDecl):
                constants.append(item)
            elif isinstance(item, ast.FormulaDecl):
                formulas.append(item)
            elif isinstance(item, ast.LabelDecl):
                labels.append(item)
            elif isinstance(item, (ast.Module, ast.RenamedModule)):
                modules.append(item)
            elif isinstance(item, ast.RewardStruct):
                rewards.append(item)
            else:  # pragma: no cover
                raise AssertionError(f"unexpected model item {item!r}")
        return ast.Program(
            model_type,
            tuple(constants),
            tuple(globals_),
            tuple(formulas),
            tuple(labels),
            tuple(modules),
            tuple(rewards),
            init,
            system,
            order=tuple(order),
            span=self._span(meta) or ast.Span(self.file, 1, 1),
        )

    def _properties_file(self, meta, children) -> ast.PropertiesFile:
        constants, formulas, labels, properties = [], [], [], []
        for item in children:
            if isinstance(item, ast.ConstDecl):
                constants.append(item)
            elif isinstance(item, ast.FormulaDecl):
                formulas.append(item)
            elif isinstance(item, ast.LabelDecl):
                labels.append(item)
            elif isinstance(item, ast.Property):
                properties.append(item)
            else:  # pragma: no cover
                raise AssertionError(f"unexpected property-file item {item!r}")
        return ast.PropertiesFile(
            tuple(constants),
            tuple(formulas),
            tuple(labels),
            tuple(properties),
            order=tuple(children),
            span=self._span(meta) or ast.Span(self.file, 1, 1),
        )
