"""Vectorised state-space construction: `CheckedProgram` → `ExplicitModel`.

The exploration is a breadth-first search whose unit of work is a *batch* of
states, not a state. States are numbered in discovery order, so the queue is
the id range `[done, found)`; each step takes up to `chunk_size` states from
it and, with numpy operations over the whole batch:

1. evaluates every command's guard (one lowered numpy function per command);
2. composes the enabled commands along the system clause into *choices*
   (tuples of commands, one per synchronising module), per state;
3. expands each choice into its update combinations, multiplying the
   probabilities (rates) and accumulating the successors' packed-key deltas;
4. looks the successor keys up in the visited-state hash table and numbers the
   new ones in order of first occurrence, which is BFS order;
5. merges duplicate successors of a row and sorts the columns.

Python loops run per command, per update and per batch, never per state or
per transition.

Semantics follow PRISM:

- synchronisation: `||` synchronises on the actions common to both operands'
  alphabets, `|||` on none, `|[a,b]|` on the listed ones; `/ {a}` hides (the
  action becomes unlabelled and no longer synchronises), `{a <- b}` renames.
  A synchronised action needs an enabled command in every operand that
  synchronises on it; probabilities (rates) of the commands multiply.
- DTMC: all enabled choices of a state are merged, each weighted by
  1/(number of choices) (PRISM's and Storm's uniform resolution of local
  nondeterminism, with a warning). CTMC: the rates of all choices add up.
  MDP: each choice is a row labelled with its action.
- deadlocks: a state without any enabled choice gets a self-loop
  (probability/rate 1) and the `"deadlock"` label, with a warning, as PRISM
  does; `deadlocks="error"` raises instead.
- updates with probability exactly 0 are dropped (their successors are not
  reachable through them), as in PRISM and Storm.

Provenance (`ExplicitModel.provenance`, a `Provenance`): entry `e` of the
transition arrays is the sum over its contributions
`j in range(entry_ptr[e], entry_ptr[e+1])` of
`weight[j] * prod(p(u) for u in products[product[j]] if u >= 0)`, where `p(u)`
is the probability (rate) expression of global update `u` (table `updates`:
command index, update index within the command) evaluated in the entry's
source state. `products` has one column per module (`-1`: the module does not
take part); an all `-1` row is a deadlock self-loop (value 1).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import ExplorationError, UnsupportedError
from ..lang import ast
from ..lang.ast import ModelType
from ..semantics.program import CheckedCommand, CheckedProgram
from . import memory
from .growth import BuildProgress, Growth, describe
from .lower import Codegen, Kind, Lowered, lower
from .model import ExplicitModel, RewardStructure, StateVar
from .statetable import Encoding, StateTable


#: PRISM's default tolerance for probabilities summing to one.
SUM_TOLERANCE = 1e-5
#: Deadlock states named by the error of `deadlocks="error"`.
MAX_DEADLOCK_EXAMPLES = 5
#: Per-batch output arrays are joined every this many batches (`compact`).
COMPACT_EVERY = 1024
#: Seconds between two calls of the `progress` callback.
PROGRESS_INTERVAL = 0.5
#: Largest number of valuations enumerated for an `init ... endinit` block.
MAX_INIT_ENUMERATION = 1 << 27


class Provenance:
    """Which updates produced each transition entry (see the module docstring).

    `updates`, `entry_ptr` and `weight` are stored; `products` and `product`
    (the table of distinct update tuples and each contribution's row in it)
    are decoded on first access from one int64 code per contribution, so that
    building does not pay for them when nobody asks.
    """

    def __init__(self, updates, entry_ptr, weight, codes, radix, module_offset, n_module_updates):
        self.updates = updates  # int64 [u, 2]: (command index, update index)
        self.entry_ptr = entry_ptr  # int64 [nnz + 1]
        self._weight = weight  # float64 [c], or None when all ones
        self._codes = codes  # int64 [c] (mixed radix) or [c, n_modules] gids
        self._radix = radix
        self._offset = module_offset
        self._n_upd = n_module_updates
        self._decoded = None

    def _decode(self):
        if self._decoded is None:
            if self._codes.ndim == 2:
                products, inv = np.unique(self._codes, axis=0, return_inverse=True)
            else:
                uniq, inv = np.unique(self._codes, return_inverse=True)
                k = len(self._n_upd)
                products = np.full((uniq.size, k), -1, dtype=np.int64)
                for m in range(k):
                    digit = (uniq // self._radix[m]) % (self._n_upd[m] + 1)
                    products[:, m] = np.where(digit > 0, self._offset[m] + digit - 1, -1)
            self._decoded = (products, inv.reshape(-1).astype(np.int64))
        return self._decoded

    @property
    def weight(self) -> np.ndarray:
        """float64 [c]: factor of each contribution (1/k for a DTMC state with
        k choices, PRISM's uniform resolution; 1 otherwise)."""
        if self._weight is None:
            return np.ones(int(self.entry_ptr[-1]))
        return self._weight

    @property
    def products(self) -> np.ndarray:
        """int64 [q, n_modules]: distinct tuples of global update ids (-1 = absent)."""
        return self._decode()[0]

    @property
    def product(self) -> np.ndarray:
        """int64 [c]: row of `products` of each contribution."""
        return self._decode()[1]


# ------------------------------------------------------------------ compilation


@dataclass
class _Update:
    gid: int
    prob: Lowered
    assigns: list[tuple[int, Lowered]]
    span: ast.Span | None
    #: `fused(C) -> (prob, key delta per word, out-of-range mask, new values)`.
    fused: Callable | None = None


@dataclass
class _Command:
    cmd: CheckedCommand
    module: int
    guard: Lowered
    updates: list[_Update]


@dataclass
class _RewardItem:
    transition: bool
    action: str | None
    guard: Lowered
    value: Lowered


class _Compiled:
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
        self.commands: list[_Command] = []
        self.by_index: dict[int, _Command] = {}
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
                    upd = _Update(gid, low(u.prob), assigns, u.span or c.span)
                    upd.fused = self._fuse(u, index, bools, params)
                    ups.append(upd)
                cc = _Command(c, k, low(c.guard), ups)
                self.commands.append(cc)
                self.by_index[c.index] = cc
        # Per command position: number of updates, first update's index within
        # its module; `cmd_pos` maps command indices to positions.
        self.n_upd = np.array([len(c.updates) for c in self.commands], dtype=np.int64)
        self.first_local = np.array(
            [self.local_update[c.updates[0].gid] if c.updates else 0 for c in self.commands],
            dtype=np.int64,
        )
        self.cmd_pos = np.zeros(max(self.by_index, default=0) + 1, dtype=np.int64)
        for p, c in enumerate(self.commands):
            self.cmd_pos[c.cmd.index] = p
        self.module_offset = np.cumsum([0] + self.n_module_updates[:-1]).astype(np.int64)
        # Mixed-radix code of a product of updates (one digit per module).
        radix, prod = [], 1
        for cnt in self.n_module_updates:
            radix.append(prod)
            prod *= cnt + 1
        self.code_fits = prod < (1 << 62)
        self.radix = np.array(radix, dtype=np.int64) if self.code_fits else None
        self.rewards = [
            [_RewardItem(i.transition, i.action, low(i.guard), low(i.value)) for i in r.items]
            for r in checked.rewards
        ]
        for node in ast.walk(checked.system):
            if isinstance(node, ast.SysModule) and node.name not in self.module_pos:
                raise self.error(f"unknown module `{node.name}` in the system clause", node.span)

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
                raise self.error(f"update assigns a double to `{name}`", e.span or u.span)
            body.append(f"a{j} = np.asarray({code}, np.int64)")
            names.append(f"a{j}")
            lo, hi = cg.const(np.int64(self.lows[vi])), cg.const(np.int64(self.highs[vi]))
            bad.append(f"_or(_lt(a{j}, {lo}), _gt(a{j}, {hi}))")
            stride = cg.const(np.int64(self.enc.stride[vi]))
            words.setdefault(int(self.enc.word[vi]), []).append(
                f"_mul(_sub(a{j}, {cg.column(vi)}), {stride})"
            )
        body.append(f"bad = {' | '.join(bad) if bad else 'False'}")
        deltas = [" + ".join(words.get(w, ["0"])) for w in range(self.enc.n_words)]
        body.append(f"return p, ({', '.join(deltas)},), bad, ({''.join(n + ', ' for n in names)})")
        return cg.compile(body)

    def witness(self, state: np.ndarray) -> str:
        parts = []
        for v, x in zip(self.vars, state.tolist()):
            parts.append(f"{v.name}={'true' if x else 'false'}" if v.is_bool else f"{v.name}={x}")
        return "(" + ", ".join(parts) + ")"

    def error(self, message: str, span: ast.Span | None, hint: str | None = None) -> ExplorationError:
        err = ExplorationError(message, span, hint=hint)
        if self.checked.source is not None:
            err.with_source(self.checked.source, self.checked.file)
        elif span is not None and span.file is None and self.checked.file:
            import dataclasses

            err.span = dataclasses.replace(span, file=self.checked.file)
            err.args = (err._render(),)
        return err


# ------------------------------------------------------------------ composition

# A synchronisation vector: the resulting label (None = unlabelled) and its
# participants, (module position, action) pairs; the vector fires in a state
# with one enabled command of each participant (PRISM's semantics of the
# system clause, flattened once, as JANI's synchronisation vectors).
_Vector = tuple[str | None, tuple[tuple[int, str | None], ...]]


def sync_vectors(comp: _Compiled, node) -> tuple[frozenset[str], list[_Vector]]:
    """The alphabet and synchronisation vectors of a system (sub)expression."""
    if isinstance(node, ast.SysModule):
        pos = comp.module_pos[node.name]
        mod = comp.checked.modules[pos]
        vecs: list[_Vector] = []
        if any(c.action is None for c in mod.commands):
            vecs.append((None, ((pos, None),)))
        for a in sorted(mod.alphabet):
            vecs.append((a, ((pos, a),)))
        return mod.alphabet, vecs
    if isinstance(node, ast.SysHide):
        alpha, vecs = sync_vectors(comp, node.operand)
        hidden = frozenset(node.actions)
        return alpha - hidden, [(None if a in hidden else a, p) for a, p in vecs]
    if isinstance(node, ast.SysRename):
        alpha, vecs = sync_vectors(comp, node.operand)
        ren = dict(node.renames)
        return (
            frozenset(ren.get(a, a) for a in alpha),
            [(ren.get(a, a) if a is not None else None, p) for a, p in vecs],
        )
    la, lv = sync_vectors(comp, node.left)
    ra, rv = sync_vectors(comp, node.right)
    if isinstance(node, ast.SysFullParallel):
        sync = la & ra
    elif isinstance(node, ast.SysInterleave):
        sync = frozenset()
    elif isinstance(node, ast.SysParallel):
        sync = frozenset(node.actions)
    else:
        raise UnsupportedError(f"system construct `{type(node).__name__}`", node.span)
    out: list[_Vector] = []
    for a, p in lv:
        if a is None or a not in sync:
            out.append((a, p))
        else:
            out.extend((a, p + q) for b, q in rv if b == a)
    out.extend((a, p) for a, p in rv if a is None or a not in sync)
    return la | ra, out


def _product(sa: np.ndarray, cols_a: list[np.ndarray], sb: np.ndarray, cb: np.ndarray, n: int):
    """Per-state cross product of enabled command sets (synchronisation)."""
    ob = np.argsort(sb, kind="stable")
    cnt_b = np.bincount(sb, minlength=n)
    start_b = np.cumsum(cnt_b) - cnt_b
    rep = cnt_b[sa]
    total = int(rep.sum())
    ia = np.repeat(np.arange(sa.size), rep)
    within = np.arange(total) - np.repeat(np.cumsum(rep) - rep, rep)
    ib = ob[start_b[sa[ia]] + within]
    return sa[ia], [c[ia] for c in cols_a] + [cb[ib]]


class _Composer:
    """Turns the guard masks of a batch into choices, along the system's
    synchronisation vectors."""

    def __init__(self, comp: _Compiled):
        self.comp = comp
        self.k = len(comp.checked.modules)
        _, vecs = sync_vectors(comp, comp.checked.system)
        # Unlabelled first, then by action name: a fixed choice order.
        self.vectors = sorted(vecs, key=lambda v: (v[0] is not None, v[0] or ""))
        self.members: dict[tuple[int, str | None], list[int]] = {}
        for m, mod in enumerate(comp.checked.modules):
            for c in mod.commands:
                self.members.setdefault((m, c.action), []).append(c.index)

    def run(self, masks: dict[int, np.ndarray], n: int):
        """Choices of the batch: `(src, cmds [nc, K], label)`, unsorted."""
        enabled: dict[tuple[int, str | None], tuple[np.ndarray, np.ndarray]] = {}

        def pairs(key):
            got = enabled.get(key)
            if got is None:
                srcs, cmds = [], []
                for ci in self.members.get(key, ()):
                    src = np.flatnonzero(masks[ci])
                    if src.size:
                        srcs.append(src)
                        cmds.append(np.full(src.size, ci, dtype=np.int64))
                if not srcs:
                    got = (np.zeros(0, np.int64), np.zeros(0, np.int64))
                elif len(srcs) == 1:
                    got = (srcs[0], cmds[0])
                else:
                    got = (np.concatenate(srcs), np.concatenate(cmds))
                enabled[key] = got
            return got

        blocks = []
        for label, parts in self.vectors:
            src, c0 = pairs(parts[0])
            if src.size == 0:
                continue
            cols = [c0]
            for key in parts[1:]:
                sb, cb = pairs(key)
                if sb.size == 0:
                    src = sb
                    break
                src, cols = _product(src, cols, sb, cb, n)
            if src.size:
                blocks.append((label, src, [m for m, _ in parts], cols))
        return blocks


# ---------------------------------------------------------------------- helpers


class _Gather:
    """Columns of the states `idx` of a batch, gathered on first use."""

    def __init__(self, cols: list[np.ndarray], idx: np.ndarray):
        self.cols, self.idx, self.cache = cols, idx, {}

    def __getitem__(self, i: int) -> np.ndarray:
        c = self.cache.get(i)
        if c is None:
            c = self.cache[i] = self.cols[i][self.idx]
        return c


def _as_float(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _first_occurrence_unique(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of `keys` in order of first occurrence, and the inverse."""
    if keys.shape[1] == 1:
        u, first, inv = np.unique(keys[:, 0], return_index=True, return_inverse=True)
        u = u[:, None]
    else:
        u, first, inv = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    perm = np.argsort(first, kind="stable")
    rank = np.empty_like(perm)
    rank[perm] = np.arange(perm.size)
    return u[perm], rank[inv]


def _init_bounds(pred: ast.Expr, comp: _Compiled) -> tuple[list[int], list[int]]:
    """Variable bounds implied by the top-level conjuncts `x = c`, `x <= c`,
    `b`, `!b`, ... of an `init` predicate: the enumeration of candidate initial
    states only ranges over these (the predicate is still evaluated on each)."""
    lows = [int(v) for v in comp.lows]
    highs = [int(v) for v in comp.highs]
    index = {n: i for i, n in enumerate(comp.names)}
    flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}
    stack = [pred]
    while stack:
        e = stack.pop()
        if isinstance(e, ast.Binary) and e.op == ast.BinaryOp.AND:
            stack += [e.left, e.right]
            continue
        if isinstance(e, ast.Ident) and e.name in index:
            lows[index[e.name]] = max(lows[index[e.name]], 1)
            continue
        if isinstance(e, ast.Unary) and e.op == ast.UnaryOp.NOT and isinstance(e.operand, ast.Ident):
            if e.operand.name in index:
                highs[index[e.operand.name]] = min(highs[index[e.operand.name]], 0)
            continue
        if not isinstance(e, ast.Binary) or e.op.value not in flip:
            continue
        op, var, lit = e.op.value, e.left, e.right
        if isinstance(var, (ast.IntLit, ast.BoolLit)):
            op, var, lit = flip[op], e.right, e.left
        if not (isinstance(var, ast.Ident) and var.name in index):
            continue
        if not isinstance(lit, (ast.IntLit, ast.BoolLit)):
            continue
        i, c = index[var.name], int(lit.value)
        if op in ("=", ">="):
            lows[i] = max(lows[i], c)
        if op in ("=", "<="):
            highs[i] = min(highs[i], c)
        if op == ">":
            lows[i] = max(lows[i], c + 1)
        if op == "<":
            highs[i] = min(highs[i], c - 1)
    return lows, highs


# ------------------------------------------------------------------------ build


def build(
    checked: CheckedProgram,
    *,
    max_states: int | None = None,
    deadlocks: str = "fix",
    progress: Callable[[BuildProgress], None] | None = None,
    params: Mapping[str, int | float | bool] | None = None,
    prob_checks: bool = True,
    chunk_size: int = 1 << 17,
) -> ExplicitModel:
    """Explore the reachable state space of `checked`.

    **Arguments:**

    - `checked`: the output of `jaxmc.semantics.check_program`.
    - `max_states`: stop with `ExplorationError` once more states are found;
      the message names the variables whose range keeps widening across BFS
      levels (with the values seen so far) and the levels explored.
    - `deadlocks`: `"fix"` (PRISM's default: self-loop and warning) or
      `"error"` (PRISM's `-nofixdl`: after exploring, raise
      `ExplorationError` with the number of deadlock states and the
      valuations of the first few).
    - `progress`: called with a `jaxmc.explore.BuildProgress` (states found,
      queued, BFS levels done, seconds) every `PROGRESS_INTERVAL` seconds and
      once at the end (`done=True`).

    Before its large allocations (the visited-state table, the transition
    arrays) the build compares what they need with the memory the machine
    has available, and stops with an `ExplorationError` saying both rather
    than being killed by the operating system.
    - `params`: values of the constants left symbolic (`checked.parameters`).
    - `prob_checks`: check that the probabilities of every DTMC/MDP choice sum
      to one (PRISM's `-noprobchecks` turns this off; DTMC rows are then
      normalised by their sum, as PRISM's symbolic construction does).
    - `chunk_size`: most states expanded per batch (bounds peak memory).

    **Returns:** an `ExplicitModel`, states numbered in BFS order (initial
    states first), with `"init"`, `"deadlock"` and the model's labels, the
    reward structures, and the `Provenance` of every transition entry.
    """
    if deadlocks not in ("fix", "error"):
        raise ValueError(f"`deadlocks` must be 'fix' or 'error', not {deadlocks!r}")
    mt = checked.model_type
    if mt not in (ModelType.DTMC, ModelType.CTMC, ModelType.MDP):
        raise UnsupportedError(f"cannot build a {mt.value} model")
    t0 = time.perf_counter()
    comp = _Compiled(checked, params)
    # Both branches of `c ? a : b` are evaluated, so floating-point warnings
    # are expected; the results actually used are checked explicitly.
    with np.errstate(all="ignore"):
        try:
            return _Builder(comp, mt, max_states, deadlocks, progress, chunk_size, t0, prob_checks).run()
        except ExplorationError as err:  # evaluation errors of lowered expressions
            if err.source is None and checked.source is not None:
                err.with_source(checked.source, checked.file)
            raise


class _Builder:
    def __init__(self, comp, mt, max_states, deadlocks, progress, chunk_size, t0, prob_checks=True):
        self.comp, self.mt = comp, mt
        self.prob_checks = prob_checks
        self.max_states, self.deadlocks = max_states, deadlocks
        self.progress, self.chunk_size, self.t0 = progress, max(1, chunk_size), t0
        self.table = StateTable(comp.enc.n_words)
        self.composer = _Composer(comp)
        self.nd = mt == ModelType.MDP
        self.trew_structs = [i for i, items in enumerate(comp.rewards) if any(x.transition for x in items)]
        # Per-batch outputs.
        self.n_choices: list[np.ndarray] = []
        self.row_len: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []
        self.trews: list[list[np.ndarray]] = [[] for _ in self.trew_structs]
        # States where a reward item is negative, per structure (PRISM
        # refuses those even where the items' sum is not).
        self.negative_at: dict[int, list[np.ndarray]] = {}
        self.actions: list[np.ndarray] = []
        self.contrib_per_entry: list[np.ndarray] = []
        self.contrib_code: list[np.ndarray] = []
        self.contrib_weight: list[np.ndarray] = []
        self.deadlock: list[np.ndarray] = []
        self.nondet_states = 0
        self.label_names: list[str | None] = [None]
        self.label_id: dict[str | None, int] = {None: 0}
        self.dead_examples: list[np.ndarray] = []  # deadlocks="error": the first few
        self.growth = Growth(len(comp.vars))
        self.done = 0  # states expanded (the queue is [done, len(table)))

    # -------------------------------------------------------------- initial
    def initial(self) -> np.ndarray:
        comp = self.comp
        checked = comp.checked
        if checked.init is None:
            state = np.array([[v.init for v in comp.vars]], dtype=np.int64)
            return state
        lows, highs = _init_bounds(checked.init, comp)
        widths = [max(0, h - lo + 1) for lo, h in zip(lows, highs)]
        total = 1
        for w in widths:
            total *= w
        if total == 0:
            raise comp.error("no state satisfies the `init ... endinit` predicate", checked.init.span)
        if total > MAX_INIT_ENUMERATION:
            raise comp.error(
                f"the `init ... endinit` block ranges over {total} valuations, "
                f"more than the {MAX_INIT_ENUMERATION} that can be enumerated",
                checked.init.span,
                hint="constrain more variables with `x = value` conjuncts in the block",
            )
        pred = comp.lower(checked.init)
        found = []
        n_found = 0
        step = 1 << 20
        # Lexicographic order, first variable most significant (PRISM's order).
        strides = np.ones(len(widths), dtype=np.int64)
        for i in range(len(widths) - 2, -1, -1):
            strides[i] = strides[i + 1] * widths[i + 1]
        for start in range(0, total, step):
            idx = np.arange(start, min(total, start + step), dtype=np.int64)
            cols = [(idx // strides[i]) % widths[i] + lows[i] for i in range(len(widths))]
            ok = pred.unchecked(cols, idx.size)
            if ok.any():
                found.append(np.stack([c[ok] for c in cols], axis=1))
                n_found += found[-1].shape[0]
                if self.max_states is not None and n_found > self.max_states:
                    raise self.too_many()
        if not found:
            raise comp.error("no state satisfies the `init ... endinit` predicate", checked.init.span)
        return np.concatenate(found)

    def too_many(self) -> ExplorationError:
        found = len(self.table)
        why, var = describe(self.growth, self.comp.vars, found, found - self.done)
        span = self.comp.vars[var].span if var is not None else None
        return self.comp.error(
            f"more than {self.max_states:,} states (max_states): {why}",
            span,
            hint="bound the variables that keep growing (a counter that only grows "
            "makes the state space as large as its range), or raise max_states "
            "(--max-states; None for no limit)",
        )

    def add_states(self, keys: np.ndarray) -> np.ndarray:
        if self.max_states is not None and len(self.table) + keys.shape[0] > self.max_states:
            raise self.too_many()
        need = self.table.growth_bytes(keys.shape[0])
        at = f"at {len(self.table):,} states"
        memory.ensure(need, "the table of visited states", at)
        return self.table.add(keys)

    def compact(self) -> None:
        """Join the per-batch arrays: a model explored one state per batch (a
        long chain) would otherwise hold a dozen small numpy arrays per state,
        whose headers outweigh their data many times."""
        names = ("n_choices", "row_len", "cols", "vals", "actions", "deadlock")
        for name in names + ("contrib_per_entry", "contrib_code", "contrib_weight"):
            lst = getattr(self, name)
            if len(lst) > 1:
                lst[:] = [np.concatenate(lst)]
        for lst in self.trews:
            if len(lst) > 1:
                lst[:] = [np.concatenate(lst)]

    def held_bytes(self) -> int:
        """Bytes of the per-batch transition arrays so far (assembling the
        model copies them once more)."""
        return sum(a.nbytes for lst in (self.cols, self.vals, self.contrib_code,
                                        self.contrib_weight, self.contrib_per_entry)
                   for a in lst)  # fmt: skip

    def report(self, done: bool = False) -> None:
        found = len(self.table)
        self.progress(BuildProgress(found, found - self.done, self.growth.levels,
                                    time.perf_counter() - self.t0, done))  # fmt: skip

    # ------------------------------------------------------------------ run
    def run(self) -> ExplicitModel:
        comp = self.comp
        init_states = self.initial()
        init_keys = comp.enc.encode([init_states[:, i] for i in range(init_states.shape[1])], init_states.shape[0])
        # Distinct by construction (one valuation, or an enumeration).
        init_ids = self.add_states(init_keys)
        level_end = len(self.table)  # the queue [done, level_end) is one BFS level
        last_report = time.perf_counter()
        while self.done < len(self.table):
            hi = min(level_end, self.done + self.chunk_size)
            self.expand(self.done, hi)
            self.done = hi
            if len(self.cols) >= COMPACT_EVERY:
                self.compact()
            if hi == level_end:
                self.growth.level_done()
                level_end = len(self.table)
            now = time.perf_counter()
            if now - last_report >= PROGRESS_INTERVAL:
                last_report = now
                if self.progress is not None:
                    self.report()
                memory.ensure(self.held_bytes(), "assembling the transition arrays",
                              f"at {len(self.table):,} states")  # fmt: skip
        if self.progress is not None:
            self.report(done=True)
        if self.dead_examples:
            raise self.deadlock_error()
        return self.assemble(init_ids)

    def deadlock_error(self) -> ExplorationError:
        """PRISM's `-nofixdl`: the model has deadlock states (after the whole
        state space is explored, so that the count is exact)."""
        comp = self.comp
        count = int(sum(int(d.sum()) for d in self.deadlock))
        shown = "\n".join(f"  {comp.witness(s)}" for s in self.dead_examples)
        rest = count - len(self.dead_examples)
        more = f"\n  ... and {rest} more" if rest > 0 else ""
        span = comp.checked.program.span
        file = comp.checked.file
        where = None if span is None else ast.Span(file, span.line, span.column)
        err = ExplorationError(
            f"the model has {count} deadlock state{'s' if count != 1 else ''} "
            f"(states without an enabled command):\n{shown}{more}",
            where,
            hint="add commands for these states (e.g. a self-loop `[] done -> true;`), "
            "or let deadlocks be fixed with self-loops (PRISM's default, -fixdl)",
        )
        return err

    # --------------------------------------------------------------- expand
    def expand(self, lo: int, hi: int) -> None:
        comp, mt = self.comp, self.mt
        n = hi - lo
        keys = self.table.keys[lo:hi]
        states = comp.enc.decode(keys)
        self.growth.expanded(states)
        cols = [np.ascontiguousarray(states[:, i]) for i in range(states.shape[1])]

        # 1. guards
        masks = {c.cmd.index: np.asarray(c.guard.unchecked(cols, n), dtype=bool) for c in comp.commands}
        # 2. composition into choices
        blocks = self.composer.run(masks, n)
        k = self.composer.k
        c_src_l, c_cmds_l, c_lab_l = [], [], []
        for a, src, mods, cmd_cols in blocks:
            if a not in self.label_id:
                self.label_id[a] = len(self.label_names)
                self.label_names.append(a)
            cmds = np.full((src.size, k), -1, dtype=np.int64)
            for m, c in zip(mods, cmd_cols):
                cmds[:, m] = c
            c_src_l.append(src)
            c_cmds_l.append(cmds)
            c_lab_l.append(np.full(src.size, self.label_id[a], dtype=np.int64))
        has = np.zeros(n, dtype=bool)
        for s in c_src_l:
            has[s] = True
        dead = np.flatnonzero(~has)
        room = MAX_DEADLOCK_EXAMPLES - len(self.dead_examples)
        if dead.size and self.deadlocks == "error" and room > 0:
            self.dead_examples += [states[i] for i in dead[:room]]
        self.deadlock.append(~has)
        # Deadlock states get a synthetic choice with no command: a self-loop.
        c_src_l.append(dead)
        c_cmds_l.append(np.full((dead.size, k), -1, dtype=np.int64))
        c_lab_l.append(np.full(dead.size, -1, dtype=np.int64))
        c_src = np.concatenate(c_src_l)
        order = np.argsort(c_src, kind="stable")
        c_src = c_src[order]
        c_cmds = np.concatenate(c_cmds_l)[order]
        c_lab = np.concatenate(c_lab_l)[order]
        nc = c_src.size
        per_state = np.bincount(c_src, minlength=n)

        # 3. update combinations of each choice. Probabilities and key deltas
        # are evaluated once per (choice, update) on the choice's source state,
        # then gathered into the expanded rows (one row per combination).
        reps = np.ones((k, nc), dtype=np.int64)
        tables = []  # per module: (P [nc, U], D [nc, U, W], local [nc]) or None
        for m in range(k):
            cm = c_cmds[:, m]
            part = np.flatnonzero(cm >= 0)
            if part.size == 0:
                tables.append(None)
                continue
            pos = comp.cmd_pos[cm[part]]
            reps[m, part] = comp.n_upd[pos]
            width = int(reps[m].max())
            P = np.ones((nc, width))
            D = np.zeros((nc, width, comp.enc.n_words), dtype=np.int64)
            local = np.full(nc, -1, dtype=np.int64)
            local[part] = comp.first_local[pos]
            order = np.argsort(pos, kind="stable")
            ps = pos[order]
            bounds = np.flatnonzero(np.diff(ps)) + 1
            for a, b in zip(np.concatenate([[0], bounds]).tolist(), np.concatenate([bounds, [ps.size]]).tolist()):
                rows = part[order[a:b]]
                cmd = comp.commands[int(ps[a])]
                gat = _Gather(cols, c_src[rows])
                for j, u in enumerate(cmd.updates):
                    p, d, bad, new = u.fused(gat)
                    if bad is not False and np.any(bad):
                        self.locate_range_error(cmd, u, new, rows, c_src, states)
                    P[rows, j] = p
                    for w, dw in enumerate(d):
                        D[rows, j, w] = dw
            tables.append((P, D, local))
        total = reps.prod(axis=0) if k else np.ones(nc, dtype=np.int64)
        ne = int(total.sum())
        # Per expanded entry: probability, choice, combination index, code,
        # successor id, sort key, order (8 bytes each) and two key copies.
        memory.ensure(ne * (56 + 16 * comp.enc.n_words), "the successors of a batch",
                      f"at {len(self.table):,} states")  # fmt: skip
        if ne == nc:  # one update per choice: no expansion
            e_choice = np.arange(nc)
            r = np.zeros(nc, dtype=np.int64)
        else:
            e_choice = np.repeat(np.arange(nc), total)
            r = np.arange(ne) - np.repeat(np.cumsum(total) - total, total)
        prob = np.ones(ne)
        delta = np.zeros((ne, comp.enc.n_words), dtype=np.int64)
        code = np.zeros(ne, dtype=np.int64)
        gids = None if comp.code_fits else np.full((ne, k), -1, dtype=np.int64)
        stride = np.ones(nc, dtype=np.int64)
        for m in range(k - 1, -1, -1):
            if tables[m] is None:
                continue
            P, D, local = tables[m]
            if P.shape[1] == 1:
                digit = 0
                if ne == nc:
                    prob *= P[:, 0]
                    delta += D[:, 0]
                else:
                    prob *= P[e_choice, 0]
                    delta += D[e_choice, 0]
            else:
                digit = (r // stride[e_choice]) % reps[m][e_choice]
                stride = stride * reps[m]
                prob *= P[e_choice, digit]
                delta += D[e_choice, digit]
            lu = local if ne == nc else local[e_choice]
            inside = lu >= 0
            if gids is None:
                code += np.where(inside, lu + digit + 1, 0) * comp.radix[m]
            else:
                gids[:, m] = np.where(inside, comp.module_offset[m] + lu + digit, -1)
        positive = bool((prob > 0).all())
        if not positive:
            self.check_signs(prob, e_choice, c_cmds, c_src, states)
        self.check_sums(prob, e_choice, c_cmds, c_src, states, nc)
        # Zero-probability updates do not make their successors reachable.
        keep = None if positive else prob != 0
        if keep is not None and not keep.all():
            e_choice, prob, delta = e_choice[keep], prob[keep], delta[keep]
            code = code[keep] if gids is None else gids[keep]
            ne = e_choice.size
        elif gids is not None:
            code = gids
        e_src = c_src[e_choice]

        # 4. successors → ids
        succ = keys[e_src] + delta
        ids = self.table.find(succ)
        miss = np.flatnonzero(ids < 0)
        if miss.size:
            uniq, inv = _first_occurrence_unique(succ[miss])
            ids[miss] = self.add_states(uniq)[inv]

        # 5. rows, merging duplicates
        if mt == ModelType.DTMC:
            many = per_state > 1
            self.nondet_states += int(many.sum())
            if self.prob_checks:
                weight = 1.0 / per_state[e_src]
            else:
                weight = 1.0 / np.bincount(c_src[e_choice], weights=prob, minlength=n)[e_src]
            row = e_src
        else:
            weight = np.ones(ne)
            row = e_choice if self.nd else e_src
        val = prob * weight
        sort_key = (row << 32) | ids
        order = np.argsort(sort_key, kind="stable")
        sk = sort_key[order]
        start = np.ones(ne, dtype=bool)
        start[1:] = sk[1:] != sk[:-1]
        starts = np.flatnonzero(start)
        merged = np.add.reduceat(val[order], starts) if ne else val[:0]
        self.cols.append(ids[order][starts])
        self.vals.append(merged)
        n_rows = nc if self.nd else n
        self.row_len.append(np.bincount(row[order][starts], minlength=n_rows))
        self.n_choices.append(per_state if self.nd else np.ones(n, dtype=np.int64))
        if self.nd:
            self.actions.append(c_lab)
        elif ne:
            # a DTMC/CTMC entry has the action of its commands where they
            # agree on one (PRISM writes it in .tra files), else none
            lab = np.maximum(c_lab[e_choice][order], 0)
            low = np.minimum.reduceat(lab, starts)
            self.actions.append(np.where(low == np.maximum.reduceat(lab, starts), low, 0))
        self.contrib_per_entry.append(np.diff(np.append(starts, ne)).astype(np.int32))
        if mt == ModelType.DTMC:  # weights are 1 otherwise (made on demand)
            self.contrib_weight.append(weight[order])
        self.contrib_code.append(code[order])
        # transition rewards: per choice, then per merged entry (weighted mean)
        for slot, ri in enumerate(self.trew_structs):
            r_choice = np.zeros(nc)
            for item in comp.rewards[ri]:
                if not item.transition:
                    continue
                lab = self.label_id.get(item.action)
                if lab is None:
                    continue
                match = c_lab == lab
                if not match.any():
                    continue
                g = np.asarray(item.guard.unchecked(cols, n), dtype=bool)[c_src]
                hit = match & g
                if hit.any():
                    active = np.zeros(n, dtype=bool)
                    active[c_src[hit]] = True
                    v = _as_float(item.value.unchecked(cols, n, active))[c_src]
                    r_choice[hit] += v[hit]
                    if (v[hit] < 0).any():
                        bad = hit & (v < 0)
                        self.negative_at.setdefault(ri, []).append(lo + c_src[bad])
            contrib = (val * r_choice[e_choice])[order]
            num = np.add.reduceat(contrib, starts) if ne else contrib[:0]
            with np.errstate(all="ignore"):
                self.trews[slot].append(np.where(merged != 0, num / merged, 0.0))

    def locate_range_error(self, cmd, u, new, rows, c_src, states) -> None:
        comp = self.comp
        for (vi, _), vals in zip(u.assigns, new):
            vals = np.broadcast_to(vals, rows.shape)
            bad = (vals < comp.lows[vi]) | (vals > comp.highs[vi])
            if bad.any():
                r = int(np.flatnonzero(bad)[0])
                self.range_error(cmd, u, vi, int(vals[r]), states[c_src[rows[r]]])

    def range_error(self, cmd: _Command, u: _Update, vi: int, value: int, state) -> None:
        comp = self.comp
        v = comp.vars[vi]
        c = cmd.cmd
        raise comp.error(
            f"update of command in module `{c.module}` assigns `{v.name}` = {value}, "
            f"outside its range [{v.low}..{v.high}], in state {comp.witness(state)}",
            c.span or u.span,
            hint=f"widen the range of `{v.name}` or guard the command",
        )

    def fail(self, choice: int, what: str, c_cmds, c_src, states) -> ExplorationError:
        comp = self.comp
        cmds = tuple(comp.by_index[int(c)].cmd for c in c_cmds[choice] if c >= 0)
        span = cmds[0].span if cmds else None
        names = ", ".join(f"`{c.module}`" + (f" [{c.action}]" if c.action else "") for c in cmds)
        return comp.error(
            f"{what} in state {comp.witness(states[c_src[choice]])} "
            f"(command(s) of module(s) {names})",
            span,
        )

    def check_signs(self, prob, e_choice, c_cmds, c_src, states):
        finite = np.isfinite(prob)
        if not finite.all():
            c = int(e_choice[np.argmin(finite)])
            raise self.fail(c, "probability/rate is not finite", c_cmds, c_src, states)
        if (prob < 0).any():
            word = "rate" if self.mt == ModelType.CTMC else "probability"
            c = int(e_choice[np.argmax(prob < 0)])
            raise self.fail(c, f"negative {word}", c_cmds, c_src, states)

    def check_sums(self, prob, e_choice, c_cmds, c_src, states, nc):
        if self.mt != ModelType.CTMC and self.prob_checks:
            sums = np.bincount(e_choice, weights=prob, minlength=nc)
            bad = np.abs(sums - 1.0) > SUM_TOLERANCE
            if bad.any():
                c = int(np.argmax(bad))
                raise self.fail(c, f"probabilities sum to {float(sums[c])!r}, not 1", c_cmds, c_src, states)

    # ------------------------------------------------------------- assemble
    def assemble(self, init_ids: np.ndarray) -> ExplicitModel:
        comp, mt = self.comp, self.mt
        n = len(self.table)
        # The concatenated transition arrays and provenance, the decoded
        # states (int64, then int32), the pointers and the labels.
        per_state = 12 * len(comp.vars) + 24 + len(comp.checked.labels) + 2
        need = self.held_bytes() + n * per_state
        memory.ensure(need, "the transition arrays", f"of {n:,} states")
        states = comp.enc.decode(self.table.keys[:n])
        cols = [np.ascontiguousarray(states[:, i]) for i in range(states.shape[1])]
        n_choices = np.concatenate(self.n_choices) if self.n_choices else np.zeros(0, np.int64)
        choice_ptr = np.concatenate([[0], np.cumsum(n_choices)]).astype(np.int64)
        row_len = np.concatenate(self.row_len)
        row_ptr = np.concatenate([[0], np.cumsum(row_len)]).astype(np.int64)
        col = np.concatenate(self.cols).astype(np.int64)
        val = np.concatenate(self.vals).astype(np.float64)
        deadlock = np.concatenate(self.deadlock)
        warnings = list(comp.checked.warnings)
        if deadlock.any():
            first = int(np.argmax(deadlock))
            warnings.append(
                f"deadlocks in {int(deadlock.sum())} states were fixed with self-loops "
                f"(e.g. state {comp.witness(states[first])})"
            )
        if self.nondet_states:
            warnings.append(
                f"{self.nondet_states} states of the DTMC have several enabled choices; "
                "they are resolved uniformly at random, as PRISM does"
            )
        init = np.zeros(n, dtype=bool)
        init[init_ids] = True
        labels = {"init": init, "deadlock": deadlock}
        for name, e in comp.checked.labels.items():
            labels[name] = np.asarray(comp.lower(e).unchecked(cols, n), dtype=bool)
        rewards = []
        for ri, (r, items) in enumerate(zip(comp.checked.rewards, comp.rewards)):
            state_r = None
            if any(not x.transition for x in items):
                state_r = np.zeros(n)
                for item in items:
                    if item.transition:
                        continue
                    g = np.asarray(item.guard.unchecked(cols, n), dtype=bool)
                    if g.any():
                        v = np.where(g, _as_float(item.value.unchecked(cols, n, g)), 0.0)
                        state_r += v
                        if (v < 0).any():
                            self.negative_at.setdefault(ri, []).append(np.flatnonzero(v < 0))
            trans_r = None
            if ri in self.trew_structs:
                trans_r = np.concatenate(self.trews[self.trew_structs.index(ri)])
            negative = None
            if ri in self.negative_at:
                negative = np.zeros(n, dtype=bool)
                negative[np.concatenate(self.negative_at[ri])] = True
            rewards.append(RewardStructure(r.name, state_r, trans_r, negative))
        choice_action = entry_action = None
        names = np.array(self.label_names + [None], dtype=object)
        if self.nd:
            choice_action = tuple(names[np.concatenate(self.actions)].tolist())
        elif self.actions and np.concatenate(self.actions).any():
            entry_action = tuple(names[np.concatenate(self.actions)].tolist())
        variables = tuple(StateVar(v.name, v.low, v.high, v.is_bool) for v in comp.vars)
        return ExplicitModel(
            model_type=mt,
            variables=variables,
            states=states.astype(np.int32),
            initial_states=np.asarray(init_ids, dtype=np.int64),
            choice_ptr=choice_ptr,
            row_ptr=row_ptr,
            col=col,
            val=val,
            labels=labels,
            rewards=tuple(rewards),
            choice_action=choice_action,
            entry_action=entry_action,
            provenance=self.provenance(col.size),
            warnings=tuple(warnings),
        )

    def provenance(self, nnz: int) -> Provenance:
        comp = self.comp
        counts = np.concatenate(self.contrib_per_entry) if self.contrib_per_entry else np.zeros(0, np.int32)
        assert counts.size == nnz
        entry_ptr = np.zeros(nnz + 1, dtype=np.int64)
        np.cumsum(counts, dtype=np.int64, out=entry_ptr[1:])
        return Provenance(
            updates=np.array(comp.updates, dtype=np.int64).reshape(-1, 2),
            entry_ptr=entry_ptr,
            weight=np.concatenate(self.contrib_weight) if self.contrib_weight else None,
            codes=np.concatenate(self.contrib_code),
            radix=comp.radix,
            module_offset=comp.module_offset,
            n_module_updates=list(comp.n_module_updates),
        )
