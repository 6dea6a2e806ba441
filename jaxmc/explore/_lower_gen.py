"""The compiler behind `jaxmc.explore.lower`: PRISM expressions to straight-line
numpy code, with PRISM's lazy evaluation of `| & => ? :` as active masks.

Two passes over the tree, each with an explicit stack (no recursion): the
first finds each node's kind, the range of its int values and whether it can
fail; the second emits one line per node, and a check after each line that
can fail (see `_lower_runtime.Checks`).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedError
from ..lang import ast
from ._lower_runtime import INT_MAX, INT_MIN, RUNTIME, Checks


Interval = tuple[int, int] | None
_FULL = (INT_MIN, INT_MAX)
_HINT_INT = "PRISM integers are 32-bit; use a double (e.g. `1.0*x`) for large values"


class Kind(str, enum.Enum):  # noqa: UP042 - `.value` is used
    """The numpy-level type of an expression."""

    INT = "int"
    DOUBLE = "double"
    BOOL = "bool"


_CMP = {
    ast.BinaryOp.EQ: "_eq",
    ast.BinaryOp.NE: "_ne",
    ast.BinaryOp.LT: "_lt",
    ast.BinaryOp.LE: "_le",
    ast.BinaryOp.GT: "_gt",
    ast.BinaryOp.GE: "_ge",
}
_ARITH = {ast.BinaryOp.ADD: "_add", ast.BinaryOp.SUB: "_sub", ast.BinaryOp.MUL: "_mul"}
_LAZY = (ast.BinaryOp.AND, ast.BinaryOp.OR, ast.BinaryOp.IMPLIES)


def _children(e: ast.Expr) -> tuple[ast.Expr, ...]:
    if isinstance(e, ast.Unary):
        return (e.operand,)
    if isinstance(e, ast.Binary):
        return (e.left, e.right)
    if isinstance(e, ast.Ite):
        return (e.cond, e.then, e.else_)
    if isinstance(e, ast.Call):
        return tuple(e.args)
    return ()


def _postorder(root: ast.Expr) -> list[ast.Expr]:
    """The nodes of `root`, children before parents (no recursion)."""
    out, stack = [], [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            out.append(node)
            continue
        stack.append((node, True))
        stack.extend((c, False) for c in reversed(_children(node)))
    return out


@dataclass
class _Info:
    """What the first pass knows about a node: its kind, the range of its int
    values (None: unknown/not int), whether it or a descendant may raise, and
    the code of a leaf."""

    kind: Kind
    iv: Interval = None
    err: bool = False
    leaf: str | None = None


def _join(a: Kind, b: Kind) -> Kind:
    if a == Kind.DOUBLE or b == Kind.DOUBLE:
        return Kind.DOUBLE
    if a == Kind.BOOL and b == Kind.BOOL:
        return Kind.BOOL
    return Kind.INT


def _fits(iv: Interval) -> bool:
    return iv is not None and INT_MIN <= iv[0] and iv[1] <= INT_MAX


def _clip(iv: Interval) -> Interval:
    if iv is None:
        return _FULL
    return (max(iv[0], INT_MIN), min(iv[1], INT_MAX))


def _arith_iv(op: ast.BinaryOp, a: Interval, b: Interval) -> Interval:
    a, b = a or _FULL, b or _FULL
    if op == ast.BinaryOp.ADD:
        return (a[0] + b[0], a[1] + b[1])
    if op == ast.BinaryOp.SUB:
        return (a[0] - b[1], a[1] - b[0])
    ps = [x * y for x in a for y in b]
    return (min(ps), max(ps))


def _pow_iv(a: Interval, b: Interval) -> Interval:
    """A bound on int `a^b`, or None when it may fail (negative exponent or
    a result outside 32 bits)."""
    a, b = a or _FULL, b or _FULL
    if b[0] < 0:
        return None
    m = max(abs(a[0]), abs(a[1]))
    if m <= 1:
        return (-1, 1)
    if b[1] > 62:
        return None
    r = m ** b[1]
    return (-r, r) if r <= INT_MAX else None


class _Gen:
    """Emits the SSA lines of one or several expressions (see `Codegen`)."""

    def __init__(self, index, bools, params, ranges, error, opaque):
        self.index = index
        self.bools = frozenset(bools)
        self.params = dict(params or {})
        self.ranges = dict(ranges or {})
        self.error = error
        self.opaque = opaque
        self.reads: set[int] = set()
        self.bool_reads: set[int] = set()
        self.consts: dict[str, object] = {}
        self.lines: list[str] = []
        self.checks = Checks(index, self.bools, error)
        self.n_tmp = 0

    # ----------------------------------------------------------- helpers
    def const(self, value) -> str:
        name = f"k{len(self.consts)}"
        self.consts[name] = value
        return name

    def tmp(self, prefix: str = "t") -> str:
        self.n_tmp += 1
        return f"{prefix}{self.n_tmp}"

    def emit(self, code: str, prefix: str = "t") -> str:
        name = self.tmp(prefix)
        self.lines.append(f"{name} = {code}")
        return name

    def check(self, bad: str, mask: str, message, node, *vals: str, hint=None) -> None:
        eid = self.checks.add(message, node.span, hint)
        args = "".join(f", {v}" for v in vals)
        self.lines.append(f"_ck({bad}, {mask}, {eid}, C, N{args})")

    def compile(self, body: Sequence[str]):
        lines = ["def _f(C, M=None, N=None):"]
        for i in sorted(self.reads):
            lines.append(f"    c{i} = C[{i}]")
            if i in self.bool_reads:
                lines.append(f"    b{i} = c{i} != 0")
        lines += [f"    {ln}" for ln in self.lines]
        lines += [f"    {ln}" for ln in body]
        source = "\n".join(lines)
        namespace = dict(RUNTIME)
        namespace["_ck"] = self.checks.check
        namespace.update(self.consts)
        exec(compile(source, "<jaxmc-lowered>", "exec"), namespace)
        return namespace["_f"], source

    # ------------------------------------------------- pass 1: analysis
    def analyse(self, root: ast.Expr) -> dict[int, _Info]:
        info: dict[int, _Info] = {}
        for node in _postorder(root):
            if id(node) not in info:
                info[id(node)] = self.info(node, [info[id(c)] for c in _children(node)])
        return info

    def info(self, e: ast.Expr, kids: list[_Info]) -> _Info:  # noqa: C901 - one dispatch
        B = ast.BinaryOp
        err = any(k.err for k in kids)
        if isinstance(e, ast.BoolLit):
            return _Info(Kind.BOOL, leaf="True" if e.value else "False")
        if isinstance(e, ast.IntLit):
            return self.int_const(int(e.value), e)
        if isinstance(e, ast.RealLit):
            return _Info(Kind.DOUBLE, leaf=self.const(np.float64(e.value)))
        if isinstance(e, ast.Ident):
            return self.ident(e)
        if isinstance(e, ast.Unary):
            (x,) = kids
            if e.op == ast.UnaryOp.NOT:
                return _Info(Kind.BOOL, err=err)
            if x.kind == Kind.INT:
                iv = x.iv or _FULL
                iv = (-iv[1], -iv[0])
                return _Info(Kind.INT, _clip(iv), err or not _fits(iv))
            return _Info(x.kind, err=err)
        if isinstance(e, ast.Binary):
            a, b = kids
            if e.op in _LAZY or e.op == B.IFF or e.op in _CMP:
                return _Info(Kind.BOOL, err=err)
            if e.op in _ARITH:
                kind = _join(a.kind, b.kind)
                if kind != Kind.INT:
                    return _Info(kind, err=err)
                iv = _arith_iv(e.op, a.iv, b.iv)
                return _Info(Kind.INT, _clip(iv), err or not _fits(iv))
            if e.op == B.DIV:
                return _Info(Kind.DOUBLE, err=err)
            if e.op == B.POW:
                return self.pow_info(a, b, err)
            raise UnsupportedError(f"operator `{e.op.value}`", e.span)
        if isinstance(e, ast.Ite):
            _, a, b = kids
            kind = _join(a.kind, b.kind)
            iv = None
            if kind == Kind.INT:
                ia, ib = a.iv or _FULL, b.iv or _FULL
                iv = (min(ia[0], ib[0]), max(ia[1], ib[1]))
            return _Info(kind, iv, err)
        if isinstance(e, ast.Call):
            return self.call_info(e, kids, err)
        return self.opaque_node(e)

    def int_const(self, v: int, node: ast.Node) -> _Info:
        if not INT_MIN <= v <= INT_MAX:
            raise self.error(
                f"integer {v} is outside the 32-bit range of PRISM's int",
                node.span,
                hint=_HINT_INT,
            )
        return _Info(Kind.INT, (v, v), leaf=self.const(np.int64(v)))

    def ident(self, e: ast.Ident) -> _Info:
        if e.name in self.index:
            i = self.index[e.name]
            self.reads.add(i)
            if e.name in self.bools:
                self.bool_reads.add(i)
                return _Info(Kind.BOOL, leaf=f"b{i}")
            return _Info(Kind.INT, tuple(self.ranges.get(e.name, _FULL)), leaf=f"c{i}")
        if e.name in self.params:
            v = self.params[e.name]
            if isinstance(v, (bool, np.bool_)):
                return _Info(Kind.BOOL, leaf="True" if v else "False")
            if isinstance(v, (int, np.integer)):
                return self.int_const(int(v), e)
            return _Info(Kind.DOUBLE, leaf=self.const(np.float64(v)))
        if self.opaque is not None:
            return self.opaque_node(e)
        raise UnsupportedError(
            f"unknown name `{e.name}` in an expression to evaluate on states",
            e.span,
            hint="constants must be folded (or given as parameters) before exploration",
        )

    def opaque_node(self, e: ast.Expr) -> _Info:
        if self.opaque is None:
            raise UnsupportedError(
                f"`{type(e).__name__}` cannot appear in a model expression", e.span
            )
        v = np.asarray(self.opaque(e))
        if v.dtype == np.bool_:
            kind = Kind.BOOL
        elif v.dtype.kind in "iu":
            kind, v = Kind.INT, v.astype(np.int64)
        else:
            kind, v = Kind.DOUBLE, v.astype(np.float64)
        return _Info(kind, _FULL if kind == Kind.INT else None, leaf=self.const(v))

    def pow_info(self, a: _Info, b: _Info, err: bool) -> _Info:
        if a.kind == Kind.INT and b.kind == Kind.INT:
            iv = _pow_iv(a.iv, b.iv)
            return _Info(Kind.INT, iv or _FULL, err or iv is None)
        return _Info(Kind.DOUBLE, err=err)

    def call_info(self, e: ast.Call, kids: list[_Info], err: bool) -> _Info:
        f = e.func
        if f in ("min", "max"):
            kind = Kind.INT
            for k in kids:
                kind = _join(kind, k.kind)
            if kind != Kind.INT:
                return _Info(kind, err=err)
            ivs = [k.iv or _FULL for k in kids]
            pick = min if f == "min" else max
            return _Info(
                Kind.INT, (pick(i[0] for i in ivs), pick(i[1] for i in ivs)), err
            )
        if f in ("floor", "ceil", "round") and len(kids) == 1:
            return _Info(Kind.INT, _FULL, True)
        if f == "pow" and len(kids) == 2:
            return self.pow_info(kids[0], kids[1], err)
        if f == "mod" and len(kids) == 2:
            hi = (kids[1].iv or _FULL)[1]
            return _Info(
                Kind.INT, (0, max(hi - 1, 0)), err or (kids[1].iv or _FULL)[0] <= 0
            )
        if f == "log" and len(kids) == 2:
            return _Info(Kind.DOUBLE, err=err)
        raise UnsupportedError(f"function `{f}` is not supported", e.span)

    # ------------------------------------------------ pass 2: emission
    def expr(self, root: ast.Expr, mask: str = "M") -> tuple[str, Kind]:
        """Emit the lines computing `root` (active where `mask`); return the
        name of its value and its kind."""
        info = self.analyse(root)
        out: list[str] = []
        stack = [(root, mask, 0)]
        while stack:
            node, m, stage = stack.pop()
            nfo = info[id(node)]
            if nfo.leaf is not None:
                out.append(nfo.leaf)
                continue
            kids = _children(node)
            lazy = isinstance(node, ast.Ite) or (
                isinstance(node, ast.Binary) and node.op in _LAZY
            )
            if stage == 0:
                stack.append((node, m, 1))
                if lazy:
                    stack.append((kids[0], m, 0))
                else:
                    stack.extend((c, m, 0) for c in reversed(kids))
            elif stage == 1 and lazy:
                stack.append((node, m, 2))
                self.push_lazy(node, m, out[-1], info, stack)
            else:
                args = out[len(out) - len(kids) :]
                del out[len(out) - len(kids) :]
                out.append(self.node(node, nfo, [info[id(c)] for c in kids], args, m))
        return out[0], info[id(root)].kind

    def push_lazy(self, node, m, first: str, info, stack) -> None:
        """Push the operands after the first of a lazy node, each with the
        mask of the states where PRISM evaluates it."""
        if isinstance(node, ast.Ite):
            tm = em = m
            if info[id(node.then)].err:
                tm = self.emit(f"_mand({m}, {first})", "m")
            if info[id(node.else_)].err:
                em = self.emit(f"_mand({m}, _not({first}))", "m")
            stack.append((node.else_, em, 0))
            stack.append((node.then, tm, 0))
            return
        rm = m
        if info[id(node.right)].err:
            cond = f"_not({first})" if node.op == ast.BinaryOp.OR else first
            rm = self.emit(f"_mand({m}, {cond})", "m")
        stack.append((node.right, rm, 0))

    def as_double(self, code: str, kind: Kind) -> str:
        return code if kind == Kind.DOUBLE else f"np.asarray({code}, np.float64)"

    def node(self, e, nfo: _Info, kids: list[_Info], args: list[str], m: str) -> str:  # noqa: C901
        B = ast.BinaryOp
        if isinstance(e, ast.Unary):
            (x,) = args
            if e.op == ast.UnaryOp.NOT:
                return self.emit(f"_not({x})")
            t = self.emit(f"_neg({x})")
            if nfo.kind == Kind.INT and not _fits(_neg_iv(kids[0].iv)):
                self.overflow(t, m, e, "-", x)
            return t
        if isinstance(e, ast.Binary):
            a, b = args
            op = e.op
            if op == B.AND:
                return self.emit(f"_and({a}, {b})")
            if op == B.OR:
                return self.emit(f"_or({a}, {b})")
            if op == B.IMPLIES:
                return self.emit(f"_or(_not({a}), {b})")
            if op == B.IFF:
                return self.emit(f"_eq({a}, {b})")
            if op in _CMP:
                fn = _CMP[op]
                if op in (B.EQ, B.NE) and Kind.DOUBLE in (kids[0].kind, kids[1].kind):
                    fn = "_deq" if op == B.EQ else "_dne"  # Java's Double.equals
                return self.emit(f"{fn}({a}, {b})")
            if op in _ARITH:
                if nfo.kind == Kind.DOUBLE:
                    a, b = (
                        self.as_double(a, kids[0].kind),
                        self.as_double(b, kids[1].kind),
                    )
                t = self.emit(f"{_ARITH[op]}({a}, {b})")
                if nfo.kind == Kind.INT and not _fits(
                    _arith_iv(op, kids[0].iv, kids[1].iv)
                ):
                    self.overflow(t, m, e, op.value, a, b)
                return t
            if op == B.DIV:
                return self.emit(f"_div({a}, {b})")
            return self.pow(e, nfo, kids, a, b, m)
        if isinstance(e, ast.Ite):
            c, a, b = args
            if nfo.kind == Kind.DOUBLE:
                a, b = self.as_double(a, kids[1].kind), self.as_double(b, kids[2].kind)
            return self.emit(f"_where({c}, {a}, {b})")
        return self.call(e, nfo, kids, args, m)

    def overflow(self, t: str, m: str, e, op: str, *operands: str) -> None:
        def message(v, *xs):
            expr = f"{op}{xs[0]}" if len(xs) == 1 else f"{xs[0]} {op} {xs[1]}"
            return f"integer overflow: {expr} = {v} is outside the 32-bit range"

        self.check(
            f"_ovf({t})", m, message, e, t, *operands,
            hint=_HINT_INT,
        )  # fmt: skip

    def pow(self, e, nfo: _Info, kids: list[_Info], a: str, b: str, m: str) -> str:
        if nfo.kind != Kind.INT:
            return self.emit(f"_fpow({a}, {b})")
        t = self.emit(f"_ipow({a}, {b})")
        if _pow_iv(kids[0].iv, kids[1].iv) is None:

            def message(x, y):
                if y < 0:
                    return f"negative exponent in integer power: pow({x}, {y})"
                return f"overflow evaluating integer power: pow({x}, {y})"

            self.check(
                f"_ipow_bad({a}, {b})", m, message, e, a, b,
                hint="use a double base (`pow(2.0, y)`) for negative or big exponents",
            )  # fmt: skip
        return t

    def call(
        self, e: ast.Call, nfo: _Info, kids: list[_Info], args: list[str], m: str
    ) -> str:
        f = e.func
        if f in ("min", "max"):
            fn = f"_{f}"
            if nfo.kind == Kind.DOUBLE:
                args = [self.as_double(c, k.kind) for c, k in zip(args, kids)]
                fn = f"_f{f}"  # PRISM's left fold, NaN-ignoring after the first
            out = args[0]
            for c in args[1:]:
                out = self.emit(f"{fn}({out}, {c})")
            return self.emit(f"np.asarray({out})") if len(args) == 1 else out
        if f in ("floor", "ceil", "round"):
            (x,) = args
            t = self.emit(f"_{f}({x})")

            def message(v, f=f):
                return f"cannot convert {f}({_fmt(v)}) to a 32-bit int"

            self.check(f"_{f}_bad({x})", m, message, e, x)
            return t
        if f == "pow":
            return self.pow(e, nfo, kids, args[0], args[1], m)
        if f == "mod":
            a, b = args
            t = self.emit(f"_imod({a}, {b})")
            if (kids[1].iv or _FULL)[0] <= 0:
                self.check(
                    f"_le({b}, 0)", m,
                    lambda x, y: f"modulo with non-positive divisor: mod({x}, {y})",
                    e, a, b,
                )  # fmt: skip
            return t
        (a, b) = args
        return self.emit(f"_log({a}, {b})")


def _neg_iv(iv: Interval) -> Interval:
    iv = iv or _FULL
    return (-iv[1], -iv[0])


def _fmt(x) -> str:
    x = float(x)
    if np.isnan(x):
        return "NaN"
    if np.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return repr(x)
