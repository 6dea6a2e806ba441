"""Parse tree → AST for whole files (`AstBuilder`): declarations, modules,
commands, reward structures, the system clause, models and properties files,
on top of the expressions and properties of `ExprTransformer`."""

from __future__ import annotations

from lark import Token, v_args

from ..errors import PrismSyntaxError, UnsupportedError
from . import ast
from .transform_expr import ExprTransformer, Sugar


CONST_TYPES = {
    "int": ast.ValueType.INT,
    "double": ast.ValueType.DOUBLE,
    "bool": ast.ValueType.BOOL,
    "rate": ast.ValueType.DOUBLE,
    "prob": ast.ValueType.DOUBLE,
    "": ast.ValueType.INT,
}


@v_args(meta=True)
class AstBuilder(ExprTransformer):
    """The transformer of a model or properties file (`props`)."""

    # ----------------------------------------------------------- declarations

    def const_type(self, meta, children):
        return Sugar("type", children[0].value)

    old_const_type = const_type

    def const_decl(self, meta, children):
        keyword = ""
        if isinstance(children[0], Sugar):
            keyword = children[0].values[0]
            children = children[1:]
        name = children[0].value
        value = children[1] if len(children) > 1 else None
        return ast.ConstDecl(
            name, CONST_TYPES[keyword], value, keyword=keyword, span=self._span(meta)
        )

    def formula_decl(self, meta, children):
        name, expr = children
        return ast.FormulaDecl(name.value, expr, span=self._span(meta))

    def label_decl(self, meta, children):
        name, expr = children
        return ast.LabelDecl(self._label_name(name), expr, span=self._span(meta))

    def model_type(self, meta, children):
        return Sugar(
            "model_type",
            ast.MODEL_TYPE_KEYWORDS[children[0].value],
            span=self._span(meta),
        )

    def range_type(self, meta, children):
        low, high = children
        return Sugar("range", low, high)

    def var_kind(self, meta, children):
        return children[0].value

    def kind_type(self, meta, children):
        kind = children[0]
        return Sugar("kind", ast.ValueType.BOOL if kind == "bool" else kind)

    def var_decl(self, meta, children):
        name, vtype = children[0], children[1]
        init = children[2] if len(children) > 2 else None
        span = self._span(meta)
        if vtype.kind == "range":
            low, high = vtype.values
            return ast.VarDecl(
                name.value, ast.ValueType.INT, low, high, init, span=span
            )
        return ast.VarDecl(name.value, vtype.values[0], init=init, span=span)

    def global_decl(self, meta, children):
        return Sugar("global", children[0])

    # ---------------------------------------------------------------- modules

    def invariant(self, meta, children):
        return Sugar("invariant", children[0])

    def module(self, meta, children):
        name = children[0].value
        variables = tuple(c for c in children[1:] if isinstance(c, ast.VarDecl))
        commands = tuple(c for c in children[1:] if isinstance(c, ast.Command))
        inv = next((c.values[0] for c in children if isinstance(c, Sugar)), None)
        return ast.Module(name, variables, commands, inv, span=self._span(meta))

    def rename(self, meta, children):
        old, new = children
        return (old.value, new.value)

    def renamed_module(self, meta, children):
        name, base, *renames = children
        return ast.RenamedModule(
            name.value, base.value, tuple(renames), span=self._span(meta)
        )

    def assign(self, meta, children):
        var, expr = children
        return ast.Assign(var.value[:-1], expr, span=self._span(meta))

    def update(self, meta, children):
        return Sugar("update", tuple(children), span=self._span(meta))

    def no_assign(self, meta, children):
        return Sugar("update", (), span=self._span(meta))

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
        return Sugar("init", children[0], span=self._span(meta))

    def system_block(self, meta, children):
        return Sugar("system", children[0], span=self._span(meta))

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
        return ast.SysHide(
            operand, tuple(a.value for a in actions), span=self._span(meta)
        )

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
            if isinstance(item, Sugar):
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
