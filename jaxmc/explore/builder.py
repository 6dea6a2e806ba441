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
from .lower import INVALID_INT, Kind, Lowered, lower
from .model import ExplicitModel, RewardStructure, StateVar
from .statetable import Encoding, StateTable


#: PRISM's default tolerance for probabilities summing to one.
SUM_TOLERANCE = 1e-5
#: Largest number of valuations enumerated for an `init ... endinit` block.
MAX_INIT_ENUMERATION = 1 << 27


@dataclass(frozen=True)
class Provenance:
    """Which updates produced each transition entry (see the module docstring)."""

    updates: np.ndarray  # int64 [u, 2]: (command index, update index)
    products: np.ndarray  # int64 [q, n_modules]: global update ids, -1 = absent
    entry_ptr: np.ndarray  # int64 [nnz + 1]
    product: np.ndarray  # int64 [c]: row of `products` of each contribution
    weight: np.ndarray  # float64 [c]


# ------------------------------------------------------------------ compilation


@dataclass
class _Update:
    gid: int
    prob: Lowered
    assigns: list[tuple[int, Lowered]]
    span: ast.Span | None


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

        def low(e: ast.Expr) -> Lowered:
            return lower(e, index, bools=bools, params=params)

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
                    ups.append(_Update(gid, low(u.prob), assigns, u.span or c.span))
                cc = _Command(c, k, low(c.guard), ups)
                self.commands.append(cc)
                self.by_index[c.index] = cc
        self.local_update_arr = np.array(self.local_update + [0], dtype=np.int64)
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
        self.alphabet = self._alphabet(checked.system)

    def _alphabet(self, node) -> frozenset[str]:
        if isinstance(node, ast.SysModule):
            if node.name not in self.module_pos:
                raise ExplorationError(f"unknown module `{node.name}` in the system clause", node.span)
            return self.checked.modules[self.module_pos[node.name]].alphabet
        if isinstance(node, ast.SysHide):
            return self._alphabet(node.operand) - frozenset(node.actions)
        if isinstance(node, ast.SysRename):
            ren = dict(node.renames)
            return frozenset(ren.get(a, a) for a in self._alphabet(node.operand))
        return self._alphabet(node.left) | self._alphabet(node.right)

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

# A transition set: (src [t] local state indices, cmds [t, K] command indices,
# -1 where the module does not take part).
_Set = tuple[np.ndarray, np.ndarray]


def _concat(sets: list[_Set], k: int) -> _Set:
    sets = [s for s in sets if s[0].size]
    if not sets:
        return np.zeros(0, np.int64), np.zeros((0, k), np.int64)
    if len(sets) == 1:
        return sets[0]
    return np.concatenate([s[0] for s in sets]), np.concatenate([s[1] for s in sets])


def _product(a: _Set, b: _Set, n: int) -> _Set:
    """Per-state cross product of two transition sets (synchronisation)."""
    (sa, ca), (sb, cb) = a, b
    if sa.size == 0 or sb.size == 0:
        return sa[:0], ca[:0]
    ob = np.argsort(sb, kind="stable")
    cnt_b = np.bincount(sb, minlength=n)
    start_b = np.cumsum(cnt_b) - cnt_b
    rep = cnt_b[sa]
    total = int(rep.sum())
    ia = np.repeat(np.arange(sa.size), rep)
    within = np.arange(total) - np.repeat(np.cumsum(rep) - rep, rep)
    ib = ob[start_b[sa[ia]] + within]
    return sa[ia], np.maximum(ca[ia], cb[ib])


class _Composer:
    """Builds the per-label transition sets of a batch along the system tree."""

    def __init__(self, comp: _Compiled):
        self.comp = comp
        self.k = len(comp.checked.modules)

    def run(self, masks: dict[int, np.ndarray], n: int) -> dict[str | None, _Set]:
        self.masks, self.n = masks, n
        return self._node(self.comp.checked.system)

    def _node(self, node) -> dict[str | None, _Set]:
        comp, k = self.comp, self.k
        if isinstance(node, ast.SysModule):
            pos = comp.module_pos[node.name]
            by_label: dict[str | None, list[_Set]] = {}
            for c in comp.checked.modules[pos].commands:
                src = np.flatnonzero(self.masks[c.index])
                if src.size == 0:
                    continue
                cmds = np.full((src.size, k), -1, dtype=np.int64)
                cmds[:, pos] = c.index
                by_label.setdefault(c.action, []).append((src, cmds))
            return {a: _concat(s, k) for a, s in by_label.items()}
        if isinstance(node, ast.SysHide):
            inner = self._node(node.operand)
            hidden = set(node.actions)
            out: dict[str | None, list[_Set]] = {}
            for a, s in inner.items():
                out.setdefault(None if a in hidden else a, []).append(s)
            return {a: _concat(s, k) for a, s in out.items()}
        if isinstance(node, ast.SysRename):
            inner = self._node(node.operand)
            ren = dict(node.renames)
            out = {}
            for a, s in inner.items():
                out.setdefault(ren.get(a, a) if a is not None else None, []).append(s)
            return {a: _concat(s, k) for a, s in out.items()}
        if isinstance(node, ast.SysFullParallel):
            sync = comp._alphabet(node.left) & comp._alphabet(node.right)
        elif isinstance(node, ast.SysInterleave):
            sync = frozenset()
        elif isinstance(node, ast.SysParallel):
            sync = frozenset(node.actions)
        else:
            raise UnsupportedError(f"system construct `{type(node).__name__}`", node.span)
        left, right = self._node(node.left), self._node(node.right)
        out_sets: dict[str | None, _Set] = {}
        for a in list(left) + [b for b in right if b not in left]:
            if a is not None and a in sync:
                if a in left and a in right:
                    out_sets[a] = _product(left[a], right[a], self.n)
            else:
                parts = [x[a] for x in (left, right) if a in x]
                out_sets[a] = _concat(parts, k)
        return out_sets


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


# ------------------------------------------------------------------------ build


def build(
    checked: CheckedProgram,
    *,
    max_states: int | None = None,
    deadlocks: str = "fix",
    progress: Callable[[int, int, float], None] | None = None,
    params: Mapping[str, int | float | bool] | None = None,
    chunk_size: int = 1 << 17,
) -> ExplicitModel:
    """Explore the reachable state space of `checked`.

    **Arguments:**

    - `checked`: the output of `jaxmc.semantics.check_program`.
    - `max_states`: stop with `ExplorationError` once more states are found.
    - `deadlocks`: `"fix"` (PRISM's default: self-loop and warning) or
      `"error"` (raise `ExplorationError` naming a deadlock state).
    - `progress`: called as `progress(states_found, queued, elapsed_s)` about
      every 0.5 s and once at the end.
    - `params`: values of the constants left symbolic (`checked.parameters`).
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
    return _Builder(comp, mt, max_states, deadlocks, progress, chunk_size, t0).run()


class _Builder:
    def __init__(self, comp, mt, max_states, deadlocks, progress, chunk_size, t0):
        self.comp, self.mt = comp, mt
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
        self.actions: list[np.ndarray] = []
        self.contrib_per_entry: list[np.ndarray] = []
        self.contrib_code: list[np.ndarray] = []
        self.contrib_weight: list[np.ndarray] = []
        self.deadlock: list[np.ndarray] = []
        self.nondet_states = 0
        self.label_names: list[str | None] = [None]
        self.label_id: dict[str | None, int] = {None: 0}

    # -------------------------------------------------------------- initial
    def initial(self) -> np.ndarray:
        comp = self.comp
        checked = comp.checked
        if checked.init is None:
            state = np.array([[v.init for v in comp.vars]], dtype=np.int64)
            return state
        widths = (comp.highs - comp.lows + 1).tolist()
        total = 1
        for w in widths:
            total *= w
        if total > MAX_INIT_ENUMERATION:
            raise comp.error(
                f"the `init ... endinit` block ranges over {total} valuations, "
                f"more than the {MAX_INIT_ENUMERATION} that can be enumerated",
                checked.init.span,
                hint="give initial values with `init` in the variable declarations",
            )
        pred = comp.lower(checked.init)
        found = []
        step = 1 << 20
        # Lexicographic order, first variable most significant (PRISM's order).
        strides = np.ones(len(widths), dtype=np.int64)
        for i in range(len(widths) - 2, -1, -1):
            strides[i] = strides[i + 1] * widths[i + 1]
        for start in range(0, total, step):
            idx = np.arange(start, min(total, start + step), dtype=np.int64)
            cols = [(idx // strides[i]) % widths[i] + comp.lows[i] for i in range(len(widths))]
            ok = pred.on_columns(cols, idx.size)
            if ok.any():
                found.append(np.stack([c[ok] for c in cols], axis=1))
        if not found:
            raise comp.error("no state satisfies the `init ... endinit` predicate", checked.init.span)
        return np.concatenate(found)

    def add_states(self, keys: np.ndarray) -> np.ndarray:
        ids = self.table.add(keys)
        if self.max_states is not None and len(self.table) > self.max_states:
            raise ExplorationError(
                f"more than {self.max_states} states; raise max_states",
                hint="pass a larger `max_states` to build() (or None for no limit)",
            )
        return ids

    # ------------------------------------------------------------------ run
    def run(self) -> ExplicitModel:
        comp = self.comp
        init_states = self.initial()
        init_keys = comp.enc.encode([init_states[:, i] for i in range(init_states.shape[1])], init_states.shape[0])
        uniq, _ = _first_occurrence_unique(init_keys)
        init_ids = self.add_states(uniq)
        done = 0
        last_report = time.perf_counter()
        while done < len(self.table):
            hi = min(len(self.table), done + self.chunk_size)
            self.expand(done, hi)
            done = hi
            now = time.perf_counter()
            if self.progress is not None and now - last_report >= 0.5:
                self.progress(len(self.table), len(self.table) - done, now - self.t0)
                last_report = now
        if self.progress is not None:
            self.progress(len(self.table), 0, time.perf_counter() - self.t0)
        return self.assemble(init_ids)

    # --------------------------------------------------------------- expand
    def expand(self, lo: int, hi: int) -> None:
        comp, mt = self.comp, self.mt
        n = hi - lo
        keys = self.table.keys[lo:hi]
        states = comp.enc.decode(keys)
        cols = [np.ascontiguousarray(states[:, i]) for i in range(states.shape[1])]

        # 1. guards
        masks = {c.cmd.index: np.asarray(c.guard.on_columns(cols, n), dtype=bool) for c in comp.commands}
        # 2. composition into choices
        sets = self.composer.run(masks, n)
        labels = sorted(sets, key=lambda a: (a is not None, a or ""))
        c_src_l, c_cmds_l, c_lab_l = [], [], []
        for a in labels:
            src, cmds = sets[a]
            if src.size == 0:
                continue
            if a not in self.label_id:
                self.label_id[a] = len(self.label_names)
                self.label_names.append(a)
            c_src_l.append(src)
            c_cmds_l.append(cmds)
            c_lab_l.append(np.full(src.size, self.label_id[a], dtype=np.int64))
        k = self.composer.k
        has = np.zeros(n, dtype=bool)
        for s in c_src_l:
            has[s] = True
        dead = np.flatnonzero(~has)
        if dead.size and self.deadlocks == "error":
            raise comp.error(
                f"deadlock in state {comp.witness(states[dead[0]])} "
                f"({dead.size} deadlock states in this batch)",
                None,
                hint="fix the model, or build with deadlocks='fix' (PRISM's default)",
            )
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

        # 3. update combinations of each choice
        e_choice = np.arange(nc)
        e_gid = np.full((nc, k), -1, dtype=np.int64)
        n_upd = np.array([len(c.updates) for c in comp.commands] + [1], dtype=np.int64)
        cmd_pos = np.full(max(comp.by_index, default=0) + 2, len(comp.commands), dtype=np.int64)
        for p, c in enumerate(comp.commands):
            cmd_pos[c.cmd.index] = p
        first_gid = np.array([c.updates[0].gid if c.updates else -1 for c in comp.commands] + [-1], dtype=np.int64)
        for m in range(k):
            cm = c_cmds[e_choice, m]
            part = cm >= 0
            if not part.any():
                continue
            pos = cmd_pos[np.where(part, cm, -1)]
            reps = np.where(part, n_upd[pos], 1)
            if np.all(reps == 1):
                e_gid[:, m] = np.where(part, first_gid[pos], -1)
                continue
            total = int(reps.sum())
            idx = np.repeat(np.arange(e_choice.size), reps)
            within = np.arange(total) - np.repeat(np.cumsum(reps) - reps, reps)
            e_choice = e_choice[idx]
            e_gid = e_gid[idx]
            e_gid[:, m] = np.where(part[idx], first_gid[pos[idx]] + within, -1)
        ne = e_choice.size
        e_src = c_src[e_choice]
        prob = np.ones(ne, dtype=np.float64)
        delta = np.zeros((ne, comp.enc.n_words), dtype=np.int64)
        upd_objs = [u for c in comp.commands for u in c.updates]
        for m in range(k):
            g = e_gid[:, m]
            sel = np.flatnonzero(g >= 0)
            if sel.size == 0:
                continue
            sel = sel[np.argsort(g[sel], kind="stable")]
            gs = g[sel]
            bounds = np.flatnonzero(np.diff(gs)) + 1
            starts = np.concatenate([[0], bounds])
            ends = np.concatenate([bounds, [gs.size]])
            for a, b in zip(starts.tolist(), ends.tolist()):
                rows = sel[a:b]
                u = upd_objs[int(gs[a])]
                src = e_src[rows]
                gat = _Gather(cols, src)
                if u.prob.is_constant:
                    prob[rows] *= float(u.prob.on_columns(gat, 1)[0])
                else:
                    prob[rows] *= _as_float(u.prob.on_columns(gat, rows.size))
                for vi, f in u.assigns:
                    new = f.on_columns(gat, rows.size)
                    if f.kind == Kind.BOOL:
                        new = new.astype(np.int64)
                    elif f.kind == Kind.DOUBLE:
                        raise comp.error(
                            f"update assigns a double to `{comp.names[vi]}`", u.span
                        )
                    bad = (new < comp.lows[vi]) | (new > comp.highs[vi])
                    if bad.any():
                        self.range_error(u, vi, new, bad, rows, e_choice, c_cmds, states, e_src)
                    delta[rows, comp.enc.word[vi]] += (new - gat[vi]) * comp.enc.stride[vi]
        self.check_probs(prob, e_choice, c_cmds, c_src, states, nc)
        # Zero-probability updates do not make their successors reachable.
        keep = prob != 0
        if not keep.all():
            e_choice, e_src, e_gid = e_choice[keep], e_src[keep], e_gid[keep]
            prob, delta = prob[keep], delta[keep]
            ne = e_choice.size

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
            weight = 1.0 / per_state[e_src]
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
        self.contrib_per_entry.append(np.diff(np.append(starts, ne)))
        self.contrib_weight.append(weight[order] if mt == ModelType.DTMC else np.ones(ne))
        self.contrib_code.append(self.codes(e_gid[order]))
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
                g = np.asarray(item.guard.on_columns(cols, n), dtype=bool)[c_src]
                hit = match & g
                if hit.any():
                    v = _as_float(item.value.on_columns(cols, n))[c_src]
                    r_choice[hit] += v[hit]
            contrib = (val * r_choice[e_choice])[order]
            num = np.add.reduceat(contrib, starts) if ne else contrib[:0]
            with np.errstate(all="ignore"):
                self.trews[slot].append(np.where(merged != 0, num / merged, 0.0))

    def codes(self, gids: np.ndarray) -> np.ndarray:
        comp = self.comp
        if not comp.code_fits:
            return gids  # kept as [c, K]; assemble() takes unique rows
        digits = np.where(gids >= 0, comp.local_update_arr[gids] + 1, 0)
        return digits @ comp.radix

    def range_error(self, u, vi, new, bad, rows, e_choice, c_cmds, states, e_src):
        comp = self.comp
        j = int(np.flatnonzero(bad)[0])
        v = comp.vars[vi]
        value = int(new[j])
        cmd_idx, _ = comp.updates[u.gid]
        cmd = comp.by_index[cmd_idx].cmd
        what = "an invalid value (mod/pow error)" if value == INVALID_INT else str(value)
        raise comp.error(
            f"update of command in module `{cmd.module}` assigns `{v.name}` = {what}, "
            f"outside its range [{v.low}..{v.high}], in state "
            f"{comp.witness(states[e_src[rows[j]]])}",
            cmd.span or u.span,
            hint=f"widen the range of `{v.name}` or guard the command",
        )

    def check_probs(self, prob, e_choice, c_cmds, c_src, states, nc):
        comp = self.comp

        def commands_of(choice: int) -> tuple[CheckedCommand, ...]:
            return tuple(comp.by_index[int(c)].cmd for c in c_cmds[choice] if c >= 0)

        def fail(choice: int, what: str) -> ExplorationError:
            cmds = commands_of(choice)
            span = cmds[0].span if cmds else None
            names = ", ".join(f"`{c.module}`" + (f" [{c.action}]" if c.action else "") for c in cmds)
            return comp.error(
                f"{what} in state {comp.witness(states[c_src[choice]])} "
                f"(command(s) of module(s) {names})",
                span,
            )

        finite = np.isfinite(prob)
        if not finite.all():
            raise fail(int(e_choice[np.argmin(finite)]), "probability/rate is not finite")
        if (prob < 0).any():
            word = "rate" if self.mt == ModelType.CTMC else "probability"
            raise fail(int(e_choice[np.argmax(prob < 0)]), f"negative {word}")
        if self.mt != ModelType.CTMC:
            sums = np.bincount(e_choice, weights=prob, minlength=nc)
            bad = np.abs(sums - 1.0) > SUM_TOLERANCE
            if bad.any():
                c = int(np.argmax(bad))
                raise fail(c, f"probabilities sum to {sums[c]!r}, not 1")

    # ------------------------------------------------------------- assemble
    def assemble(self, init_ids: np.ndarray) -> ExplicitModel:
        comp, mt = self.comp, self.mt
        n = len(self.table)
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
            labels[name] = np.asarray(comp.lower(e).on_columns(cols, n), dtype=bool)
        rewards = []
        for ri, (r, items) in enumerate(zip(comp.checked.rewards, comp.rewards)):
            state_r = None
            if any(not x.transition for x in items):
                state_r = np.zeros(n)
                for item in items:
                    if item.transition:
                        continue
                    g = np.asarray(item.guard.on_columns(cols, n), dtype=bool)
                    if g.any():
                        state_r += np.where(g, _as_float(item.value.on_columns(cols, n)), 0.0)
            trans_r = None
            if ri in self.trew_structs:
                trans_r = np.concatenate(self.trews[self.trew_structs.index(ri)])
            rewards.append(RewardStructure(r.name, state_r, trans_r))
        choice_action = None
        if self.nd:
            labs = np.concatenate(self.actions)
            names = np.array(self.label_names + [None], dtype=object)
            choice_action = tuple(names[labs].tolist())
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
            provenance=self.provenance(col.size),
            warnings=tuple(warnings),
        )

    def provenance(self, nnz: int) -> Provenance:
        comp = self.comp
        k = self.composer.k
        counts = np.concatenate(self.contrib_per_entry) if self.contrib_per_entry else np.zeros(0, np.int64)
        entry_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        weight = np.concatenate(self.contrib_weight)
        if comp.code_fits:
            codes = np.concatenate(self.contrib_code)
            uniq, inv = np.unique(codes, return_inverse=True)
            # Decode each distinct code back to global update ids per module.
            offsets = np.cumsum([0] + comp.n_module_updates[:-1])
            products = np.full((uniq.size, k), -1, dtype=np.int64)
            for m in range(k):
                digit = (uniq // comp.radix[m]) % (comp.n_module_updates[m] + 1)
                products[:, m] = np.where(digit > 0, self._module_gid(m, digit - 1, offsets), -1)
        else:
            rows = np.concatenate(self.contrib_code)
            products, inv = np.unique(rows, axis=0, return_inverse=True)
        assert entry_ptr[-1] == inv.size and counts.size == nnz
        return Provenance(
            updates=np.array(comp.updates, dtype=np.int64).reshape(-1, 2),
            products=products,
            entry_ptr=entry_ptr,
            product=inv.reshape(-1).astype(np.int64),
            weight=weight,
        )

    def _module_gid(self, m: int, local: np.ndarray, offsets) -> np.ndarray:
        # Global update ids of module m are contiguous (modules in order).
        return offsets[m] + np.maximum(local, 0)
