"""A `CheckedProgram` compiled for exploration (`Compiled`).

Every guard, probability (rate), assignment and reward of the program is
lowered to a numpy function over a batch of states (`jaxmc.explore.lower`);
each update is also fused into one function giving its probability, the
out-of-range check of its assignments and the delta of the packed state keys
(`Encoding`). The global numbering of updates and the mixed-radix code of a
product of updates (one digit per module) are what `Provenance` records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import ExplorationError, UnsupportedError
from ..lang import ast
from ..semantics.program import CheckedCommand, CheckedProgram
from .lower import Codegen, Kind, Lowered, lower
from .statetable import Encoding


@dataclass
class Update:
    gid: int
    prob: Lowered
    assigns: list[tuple[int, Lowered]]
    span: ast.Span | None
    #: `fused(C) -> (prob, key delta per word, out-of-range mask, new values)`.
    fused: Callable | None = None


@dataclass
class Command:
    cmd: CheckedCommand
    module: int
    guard: Lowered
    updates: list[Update]


@dataclass
class RewardItem:
    transition: bool
    action: str | None
    guard: Lowered
    value: Lowered


class Compiled:
    def __init__(self, checked: CheckedProgram, params: Mapping[str, object] | None):
        missing = [p for p in checked.parameters if not params or p not in params]
        if missing:
            raise UnsupportedError(
                f"parameter `{missing[0]}` needs a value to build the state space",
                hint="pass `params={name: value}` to build()",
            )
        self.checked = checked
        self.vars = checked.variables
        self.names = [v.name for v in self.vars]
        index = {n: i for i, n in enumerate(self.names)}
        bools = {v.name for v in self.vars if v.is_bool}
        self.ranges = {v.name: (v.low, v.high) for v in self.vars if not v.is_bool}

        def low(e: ast.Expr) -> Lowered:
            return lower(e, index, bools=bools, params=params, ranges=self.ranges)

        self.lower = low
        self.lows = np.array([v.low for v in self.vars], dtype=np.int64)
        self.highs = np.array([v.high for v in self.vars], dtype=np.int64)
        self.enc = Encoding.for_ranges([(v.low, v.high) for v in self.vars])
        self.module_pos = {m.name: k for k, m in enumerate(checked.modules)}
        self.commands: list[Command] = []
        self.by_index: dict[int, Command] = {}
        self.updates: list[tuple[int, int]] = []
        self.local_update: list[int] = []  # index of each global update in its module
        self.n_module_updates = [0] * len(checked.modules)
        for k, m in enumerate(checked.modules):
            for c in m.commands:
                ups = []
                for j, u in enumerate(c.updates):
                    gid = len(self.updates)
                    self.updates.append((c.index, j))
                    self.local_update.append(self.n_module_updates[k])
                    self.n_module_updates[k] += 1
                    assigns = [(index[name], low(e)) for name, e in u.assigns]
                    upd = Update(gid, low(u.prob), assigns, u.span or c.span)
                    upd.fused = self._fuse(u, index, bools, params)
                    ups.append(upd)
                cc = Command(c, k, low(c.guard), ups)
                self.commands.append(cc)
                self.by_index[c.index] = cc
        # Per command position: number of updates, first update's index within
        # its module; `cmd_pos` maps command indices to positions.
        self.n_upd = np.array([len(c.updates) for c in self.commands], dtype=np.int64)
        self.first_local = np.array(
            [
                self.local_update[c.updates[0].gid] if c.updates else 0
                for c in self.commands
            ],
            dtype=np.int64,
        )
        self.cmd_pos = np.zeros(max(self.by_index, default=0) + 1, dtype=np.int64)
        for p, c in enumerate(self.commands):
            self.cmd_pos[c.cmd.index] = p
        self.module_offset = np.cumsum([0] + self.n_module_updates[:-1]).astype(
            np.int64
        )
        # Mixed-radix code of a product of updates (one digit per module).
        radix, prod = [], 1
        for cnt in self.n_module_updates:
            radix.append(prod)
            prod *= cnt + 1
        self.code_fits = prod < (1 << 62)
        self.radix = np.array(radix, dtype=np.int64) if self.code_fits else None
        #: The type of a provenance code (`Provenance`): the smallest that
        #: holds every code (int64 global update ids where none fits).
        self.code_dtype = np.dtype(
            np.min_scalar_type(prod - 1) if self.code_fits else np.int64
        )
        self.rewards = [
            [
                RewardItem(i.transition, i.action, low(i.guard), low(i.value))
                for i in r.items
            ]
            for r in checked.rewards
        ]
        for node in ast.walk(checked.system):
            if isinstance(node, ast.SysModule) and node.name not in self.module_pos:
                raise self.error(
                    f"unknown module `{node.name}` in the system clause", node.span
                )

    def _fuse(self, u, index, bools, params) -> Callable:
        """One function computing an update's probability, range check and
        packed-key delta on a batch (see `Codegen`)."""
        cg = Codegen(index, bools=bools, params=params, ranges=self.ranges)
        p_code, _ = cg.expr(u.prob)
        body = [f"p = {p_code}"]
        bad, words, names = [], {}, []
        for j, (name, e) in enumerate(u.assigns):
            vi = index[name]
            code, kind = cg.expr(e)
            if kind == Kind.DOUBLE:
                raise self.error(
                    f"update assigns a double to `{name}`", e.span or u.span
                )
            body.append(f"a{j} = np.asarray({code}, np.int64)")
            names.append(f"a{j}")
            lo, hi = (
                cg.const(np.int64(self.lows[vi])),
                cg.const(np.int64(self.highs[vi])),
            )
            bad.append(f"_or(_lt(a{j}, {lo}), _gt(a{j}, {hi}))")
            stride = cg.const(np.int64(self.enc.stride[vi]))
            words.setdefault(int(self.enc.word[vi]), []).append(
                f"_mul(_sub(a{j}, {cg.column(vi)}), {stride})"
            )
        body.append(f"bad = {' | '.join(bad) if bad else 'False'}")
        deltas = [" + ".join(words.get(w, ["0"])) for w in range(self.enc.n_words)]
        body.append(
            f"return p, ({', '.join(deltas)},), bad, "
            f"({''.join(n + ', ' for n in names)})"
        )
        return cg.compile(body)

    def witness(self, state: np.ndarray) -> str:
        parts = []
        for v, x in zip(self.vars, state.tolist()):
            parts.append(
                f"{v.name}={'true' if x else 'false'}" if v.is_bool else f"{v.name}={x}"
            )
        return "(" + ", ".join(parts) + ")"

    def error(
        self, message: str, span: ast.Span | None, hint: str | None = None
    ) -> ExplorationError:
        err = ExplorationError(message, span, hint=hint)
        if self.checked.source is not None:
            err.with_source(self.checked.source, self.checked.file)
        elif span is not None and span.file is None and self.checked.file:
            import dataclasses

            err.span = dataclasses.replace(span, file=self.checked.file)
            err.args = (err._render(),)
        return err
