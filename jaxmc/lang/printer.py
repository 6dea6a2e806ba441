"""AST → PRISM text, with as few parentheses as the grammar allows.

The output parses back to an equal AST (`parse(format(ast)) == ast`, spans
aside): each operator is printed at its precedence level, and an operand is
parenthesised only when its own level binds looser than its position needs
(`grammars/common.lark` lists the levels).
"""

from __future__ import annotations

from . import ast


__all__ = ["format_expr", "format_program", "format_properties"]


# Precedence levels, loosest first; an operand printed at a position that
# requires level L is parenthesised when its own level is below L.
_TEMPORAL_BINARY = 0
_TEMPORAL_UNARY = 1
_ITE = 2
_LEVEL = {
    ast.BinaryOp.IMPLIES: 3,
    ast.BinaryOp.IFF: 4,
    ast.BinaryOp.OR: 5,
    ast.BinaryOp.AND: 6,
    ast.BinaryOp.EQ: 8,
    ast.BinaryOp.NE: 8,
    ast.BinaryOp.LT: 9,
    ast.BinaryOp.LE: 9,
    ast.BinaryOp.GT: 9,
    ast.BinaryOp.GE: 9,
    ast.BinaryOp.ADD: 10,
    ast.BinaryOp.SUB: 10,
    ast.BinaryOp.MUL: 11,
    ast.BinaryOp.DIV: 11,
    ast.BinaryOp.POW: 13,
}
_NOT = 7
_NEG = 12
_ATOM = 14

_BUILTINS = frozenset(ast.FUNCTIONS)


def _level(e: ast.Expr) -> int:
    if isinstance(e, ast.Temporal):
        return _TEMPORAL_BINARY if e.left is not None else _TEMPORAL_UNARY
    if isinstance(e, ast.Ite):
        return _ITE
    if isinstance(e, ast.Binary):
        return _LEVEL[e.op]
    if isinstance(e, ast.Unary):
        return _NOT if e.op is ast.UnaryOp.NOT else _NEG
    if isinstance(e, (ast.IntLit, ast.RealLit)) and e.value < 0:
        return _NEG
    return _ATOM


def _at(e: ast.Expr, level: int) -> str:
    """`e` printed where the grammar needs at least `level`."""
    return _format(e, level)


#: A piece of printed text: a string, or an expression to print there (at
#: a precedence level, or at any level when given alone).
_Piece = str | ast.Expr | tuple


def _bound(b: ast.TimeBound) -> list[_Piece]:
    kind = b.kind
    if kind is ast.TimeBoundKind.INTERVAL:
        pieces: list[_Piece] = ["[", (b.low, _ITE), ",", (b.high, _ITE), "]"]
    else:
        upper = kind in (ast.TimeBoundKind.LE, ast.TimeBoundKind.LT)
        pieces = [kind.value, (b.high if upper else b.low, _ITE)]
    if b.ref is None:
        return pieces
    # Storm's braced bound: F^{rew{"r"}<=b}, F^{steps<=k}, F^{time<=t}
    ref: list[_Piece] = [b.ref.value]
    if isinstance(b.structure, str):
        ref.append(f'{{"{b.structure}"}}')
    elif b.structure is not None:
        ref += ["{", (b.structure, _ITE), "}"]
    return ["^{", *ref, *pieces, "}"]


def _relop(threshold: ast.Threshold | None) -> list[_Piece]:
    if threshold is None:
        return ["=?"]
    return [threshold.cmp.value, (threshold.value, _ITE)]


def _opt(opt: ast.Opt | None) -> str:
    return opt.value if opt is not None else ""


def _real(e: ast.RealLit) -> str:
    if e.text:
        return e.text
    text = repr(float(e.value))
    if e.value < 0:
        return f"-{text[1:]}"
    return text


def format_expr(e: ast.Expr) -> str:
    """PRISM text for expression (or property) `e`."""
    return _format(e, None)


def _format(e: ast.Expr, level: int | None) -> str:
    # An explicit stack of pieces rather than recursion: expressions may be
    # nested thousands of levels deep.
    out: list[str] = []
    stack: list[_Piece] = [(e, level)]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        node, at = item if isinstance(item, tuple) else (item, None)
        pieces = _pieces(node)
        if at is not None and _level(node) < at:
            pieces = ["(", *pieces, ")"]
        stack.extend(reversed(pieces))
    return "".join(out)


def _pieces(e: ast.Expr) -> list[_Piece]:  # noqa: C901 - one dispatch
    """The text of `e`, one level deep: strings and operands to print."""
    if isinstance(e, ast.IntLit):
        return [str(e.value) if e.value >= 0 else f"-{-e.value}"]
    if isinstance(e, ast.RealLit):
        return [_real(e)]
    if isinstance(e, ast.BoolLit):
        return ["true" if e.value else "false"]
    if isinstance(e, ast.Ident):
        return [e.name]
    if isinstance(e, ast.Primed):
        return [f"{e.name}'"]
    if isinstance(e, ast.LabelRef):
        return [f'"{e.name}"']
    if isinstance(e, ast.Unary):
        # `!` binds looser than `=` in PRISM (`!s=0` is `!(s=0)`) but tighter
        # in Storm and in most readers' eyes: always bracket a binary operand.
        return ["!" if e.op is ast.UnaryOp.NOT else "-", (e.operand, _NEG)]
    if isinstance(e, ast.Binary):
        level = _LEVEL[e.op]
        if e.op is ast.BinaryOp.POW:  # atom ^ neg (right associative)
            return [(e.left, _ATOM), "^", (e.right, _NEG)]
        return [(e.left, level), f" {e.op.value} ", (e.right, level + 1)]
    if isinstance(e, ast.Ite):
        # cond and then are one level tighter than ?: (PRISM's ExpressionITE).
        return [(e.cond, _ITE + 1), " ? ", (e.then, _ITE + 1), " : ", (e.else_, _ITE)]
    if isinstance(e, ast.Call):
        builtin = e.func in _BUILTINS or e.func == "multi"
        head = f"{e.func}(" if builtin else f"func({e.func}, "
        pieces: list[_Piece] = [head]
        for i, a in enumerate(e.args):
            pieces += [", ", a] if i else [a]
        return [*pieces, ")"]
    if isinstance(e, ast.Temporal):
        bound = _bound(e.bound) if e.bound is not None else []
        right: _Piece = (e.right, _TEMPORAL_UNARY)
        if bound:
            text = _format(e.right, _TEMPORAL_UNARY)
            # `F<=k -x` would read as the bound k-x
            right = f"({text})" if text.startswith("-") else text
        if e.left is None:
            return [e.op.value, *bound, " ", right]
        return [(e.left, _TEMPORAL_UNARY), f" {e.op.value}", *bound, " ", right]
    if isinstance(e, ast.RewardPath):
        if e.kind is ast.RewardPathKind.LONG_RUN:
            return ["S"]
        if e.bound is None:
            return [e.kind.value]
        return [e.kind.value, *_bound(e.bound)]
    if isinstance(e, ast.ProbOp):
        return [f"P{_opt(e.opt)}", *_relop(e.threshold), " [ ", e.path, " ]"]
    if isinstance(e, ast.RewardOp):
        if e.structure is None:
            index: list[_Piece] = []
        elif isinstance(e.structure, str):
            index = [f'{{"{e.structure}"}}']
        else:
            index = ["{", (e.structure, _ITE), "}"]
        opt = _opt(e.opt)
        return ["R", *index, opt, *_relop(e.threshold), " [ ", e.path, " ]"]
    if isinstance(e, ast.SteadyOp):
        return [f"S{_opt(e.opt)}", *_relop(e.threshold), " [ ", e.operand, " ]"]
    if isinstance(e, ast.PathQuantifier):
        return [f"{e.quantifier.value} [ ", e.path, " ]"]
    if isinstance(e, ast.Filter):
        states: list[_Piece] = [", ", e.states] if e.states is not None else []
        return [f"filter({e.op}, ", e.operand, *states, ")"]
    raise TypeError(f"not an expression: {e!r}")


# -------------------------------------------------------------------- models


def _const(c: ast.ConstDecl) -> str:
    keyword = c.keyword
    if not keyword and c.type is not ast.ValueType.INT:
        keyword = c.type.value
    head = f"const {keyword} {c.name}" if keyword else f"const {c.name}"
    value = f" = {format_expr(c.value)}" if c.value is not None else ""
    return f"{head}{value};"


def _var(v: ast.VarDecl) -> str:
    if v.low is not None or v.high is not None:
        vtype = f"[{format_expr(v.low)}..{format_expr(v.high)}]"
    else:
        vtype = v.type.value if isinstance(v.type, ast.ValueType) else v.type
    init = f" init {format_expr(v.init)}" if v.init is not None else ""
    return f"{v.name} : {vtype}{init};"


def _update(u: ast.Update) -> str:
    if not u.assigns:
        body = "true"
    else:
        body = " & ".join(f"({a.var}'={format_expr(a.expr)})" for a in u.assigns)
    if u.prob is None:
        return body
    return f"{format_expr(u.prob)} : {body}"


def _command(c: ast.Command) -> str:
    updates = " + ".join(_update(u) for u in c.updates)
    return f"[{c.action or ''}] {format_expr(c.guard)} -> {updates};"


def _module(m: ast.Module | ast.RenamedModule) -> str:
    if isinstance(m, ast.RenamedModule):
        renames = ", ".join(f"{a}={b}" for a, b in m.renames)
        return f"module {m.name} = {m.base} [{renames}] endmodule"
    lines = [f"module {m.name}"]
    if m.variables:
        lines.append("")
        lines += [f"\t{_var(v)}" for v in m.variables]
    if m.invariant is not None:
        lines += ["", f"\tinvariant {format_expr(m.invariant)} endinvariant"]
    if m.commands:
        lines.append("")
        lines += [f"\t{_command(c)}" for c in m.commands]
    lines += ["", "endmodule"]
    return "\n".join(lines)


def _rewards(r: ast.RewardStruct) -> str:
    head = f'rewards "{r.name}"' if r.name is not None else "rewards"
    lines = [head]
    for item in r.items:
        action = f"[{item.action or ''}] " if item.transition else ""
        lines.append(
            f"\t{action}{format_expr(item.guard)} : {format_expr(item.value)};"
        )
    lines.append("endrewards")
    return "\n".join(lines)


_SYS_INTERLEAVE, _SYS_FULL, _SYS_PAR, _SYS_POST, _SYS_ATOM = range(5)


def _sys_level(s: ast.SystemExpr) -> int:
    if isinstance(s, ast.SysInterleave):
        return _SYS_INTERLEAVE
    if isinstance(s, ast.SysFullParallel):
        return _SYS_FULL
    if isinstance(s, ast.SysParallel):
        return _SYS_PAR
    if isinstance(s, (ast.SysHide, ast.SysRename)):
        return _SYS_POST
    return _SYS_ATOM


def format_system(s: ast.SystemExpr) -> str:
    """PRISM text for a system composition (the inside of system...endsystem)."""
    # Without recursion, as `_format`: a generated model may compose
    # thousands of modules.
    out: list[str] = []
    stack: list = [(s, _SYS_INTERLEAVE)]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        node, level = item
        pieces = _sys_pieces(node)
        if _sys_level(node) < level:
            pieces = ["(", *pieces, ")"]
        stack.extend(reversed(pieces))
    return "".join(out)


def _sys_pieces(s: ast.SystemExpr) -> list:
    if isinstance(s, ast.SysModule):
        return [s.name]
    if isinstance(s, ast.SysInterleave):
        return [(s.left, _SYS_PAR), " ||| ", (s.right, _SYS_INTERLEAVE)]
    if isinstance(s, ast.SysFullParallel):
        # n-ary in the grammar, left-nested in the AST
        return [(s.left, _SYS_FULL), " || ", (s.right, _SYS_PAR)]
    if isinstance(s, ast.SysParallel):
        actions = ",".join(s.actions)
        return [(s.left, _SYS_POST), f" |[{actions}]| ", (s.right, _SYS_POST)]
    if isinstance(s, ast.SysHide):
        return [(s.operand, _SYS_POST), f" / {{{', '.join(s.actions)}}}"]
    if isinstance(s, ast.SysRename):
        pairs = ", ".join(f"{a} <- {b}" for a, b in s.renames)
        return [(s.operand, _SYS_POST), f" {{{pairs}}}"]
    raise TypeError(f"not a system expression: {s!r}")


def format_program(p: ast.Program) -> str:
    """PRISM text for a whole model file, declarations in source order."""
    parts: list[str] = []
    if p.model_type is not None:
        parts.append(p.model_type.value)
    order = p.order
    if not order:
        order = (
            *p.constants, *p.globals, *p.formulas, *p.labels, *p.modules,
            *p.rewards, *((p.init,) if p.init is not None else ()),
            *((p.system,) if p.system is not None else ()),
        )  # fmt: skip
    globals_ = {id(g) for g in p.globals}
    for node in order:
        if isinstance(node, ast.ConstDecl):
            parts.append(_const(node))
        elif isinstance(node, ast.VarDecl) and id(node) in globals_:
            parts.append(f"global {_var(node)}")
        elif isinstance(node, ast.FormulaDecl):
            parts.append(f"formula {node.name} = {format_expr(node.expr)};")
        elif isinstance(node, ast.LabelDecl):
            parts.append(f'label "{node.name}" = {format_expr(node.expr)};')
        elif isinstance(node, (ast.Module, ast.RenamedModule)):
            parts.append(_module(node))
        elif isinstance(node, ast.RewardStruct):
            parts.append(_rewards(node))
        elif node is p.init:
            parts.append(f"init {format_expr(node)} endinit")
        elif node is p.system:
            parts.append(f"system {format_system(node)} endsystem")
        else:  # pragma: no cover
            raise TypeError(f"unexpected item in Program.order: {node!r}")
    return "\n\n".join(parts) + "\n"


# ------------------------------------------------------------ property files


def format_property(prop: ast.Property) -> str:
    """`"name": expr;` or `expr;`."""
    # A property sits at the ?: level of the grammar (no bare temporal operator).
    text = _at(prop.expr, _ITE)
    if prop.name is not None:
        return f'"{prop.name}": {text};'
    return f"{text};"


def format_properties(pf: ast.PropertiesFile) -> str:
    """PRISM text for a property file, declarations and properties in order."""
    order = pf.order or (*pf.constants, *pf.formulas, *pf.labels, *pf.properties)
    parts = []
    for node in order:
        if isinstance(node, ast.ConstDecl):
            parts.append(_const(node))
        elif isinstance(node, ast.FormulaDecl):
            parts.append(f"formula {node.name} = {format_expr(node.expr)};")
        elif isinstance(node, ast.LabelDecl):
            parts.append(f'label "{node.name}" = {format_expr(node.expr)};')
        elif isinstance(node, ast.Property):
            parts.append(format_property(node))
        else:  # pragma: no cover
            raise TypeError(f"unexpected item in PropertiesFile.order: {node!r}")
    return "\n".join(parts) + "\n"
