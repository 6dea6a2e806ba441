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

The program is compiled once (`compile`), composed along the system clause
(`compose`), each batch expanded (`expand`) and the model assembled at the
end (`assemble`); this module drives the search.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import numpy as np

from ..errors import ExplorationError, UnsupportedError
from ..lang import ast
from ..lang.ast import ModelType
from ..semantics.program import CheckedProgram
from . import memory
from .actions import ActionOrder
from .assemble import assemble
from .compile import Compiled
from .compose import Composer
from .expand import check, expand
from .growth import BuildProgress, Growth, describe
from .model import ExplicitModel
from .rows import all_fill, join
from .statetable import table_for


#: Per-batch output arrays are joined every this many batches (`compact`).
COMPACT_EVERY = 1024
#: Seconds between two calls of the `progress` callback.
PROGRESS_INTERVAL = 0.5
#: Largest number of valuations enumerated for an `init ... endinit` block.
MAX_INIT_ENUMERATION = 1 << 27
#: States are numbered in int32 (the table's slots, the columns' chunks).
MAX_STATES = 1 << 31
#: Transition entries (before merging) a batch aims at (its temporaries
#: take ~100-200 bytes per entry; smaller batches are no slower on the
#: CPU, and herman's as much as 1.3x faster: benchmarks/RESULTS.md, issue
#: 21's memory), `_next_batch`; a batch that would make more than 1.5x as
#: many is cut (`expand.expand`).
ENTRY_BUDGET = 1 << 17
MIN_BATCH = 64


def _next_batch(batch: int, n: int, entries: int, chunk_size: int) -> int:
    """States of the next batch, after a batch of `n` states (`batch` asked
    for) made `entries` entries: as many as `ENTRY_BUDGET` entries at the
    same entries per state, at most 4x `batch` (the first batch, of
    `MIN_BATCH` states, may be unlike the rest: herman's initial level is
    its whole state space), between `MIN_BATCH` and `chunk_size`."""
    fit = int(ENTRY_BUDGET * n / max(1, entries))
    return max(MIN_BATCH, min(chunk_size, 4 * batch, fit))


def _init_bounds(pred: ast.Expr, comp: Compiled) -> tuple[list[int], list[int]]:
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
        if (
            isinstance(e, ast.Unary)
            and e.op == ast.UnaryOp.NOT
            and isinstance(e.operand, ast.Ident)
        ):
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


def build(
    checked: CheckedProgram,
    *,
    max_states: int | None = None,
    deadlocks: str = "fix",
    progress: Callable[[BuildProgress], None] | None = None,
    params: Mapping[str, int | float | bool] | None = None,
    prob_checks: bool = True,
    chunk_size: int = 1 << 17,
    explorer: str = "auto",
    devices=None,
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
    - `explorer`: `"host"` (this module, numpy), `"device"` (jitted on the
      JAX backend, `jaxmc.explore.device`; a program it does not support
      raises `UnsupportedError`) or `"auto"`: for now the host builder on
      every backend (see `_use_device`). Both give the same model; errors
      are the host builder's.
    - `devices`: explore partitioned over several devices
      (`jaxmc.explore.device.sharded`: each device owns the states its hash
      selects; successors are exchanged all-to-all): a count (the first of
      `jax.devices()`), a sequence of `jax.Device`s or a
      `jax.sharding.Mesh`; 1 runs the partitioned explorer on one device.
      None (the default): one device. For the device explorer only
      (`explorer="device"` or `"auto"`); the model is the same.

    **Returns:** an `ExplicitModel`, states numbered in BFS order (initial
    states first), with `"init"`, `"deadlock"` and the model's labels, the
    reward structures, and the `Provenance` of every transition entry.
    """
    if explorer not in ("auto", "host", "device"):
        raise ValueError(
            f"`explorer` must be 'auto', 'host' or 'device', not {explorer!r}"
        )
    if deadlocks not in ("fix", "error"):
        raise ValueError(f"`deadlocks` must be 'fix' or 'error', not {deadlocks!r}")
    if devices is not None and explorer == "host":
        raise ValueError(
            "`devices` partitions the device explorer; explorer='host' runs "
            "on the host (use explorer='device')"
        )
    mt = checked.model_type
    if mt not in (ModelType.DTMC, ModelType.CTMC, ModelType.MDP):
        raise UnsupportedError(f"cannot build a {mt.value} model")
    t0 = time.perf_counter()
    comp = Compiled(checked, params)
    # Both branches of `c ? a : b` are evaluated, so floating-point warnings
    # are expected; the results actually used are checked explicitly.
    with np.errstate(all="ignore"):
        try:
            host = Builder(
                comp, mt, max_states, deadlocks, progress, chunk_size, t0, prob_checks
            )
            if _use_device(explorer) or devices is not None:
                model = _explore_on_device(host, explorer, params, devices)
                if model is not None:
                    return model
            return host.run()
        except ExplorationError as err:  # evaluation errors of lowered expressions
            if err.source is None and checked.source is not None:
                err.with_source(checked.source, checked.file)
            raise


def _use_device(explorer: str) -> bool:
    """Whether to run the device explorer. "auto" keeps the host builder on
    every backend for now: measured end to end (compilation included), the
    device explorer is slower than the host builder on the CPU and on most
    of the GPU set (`benchmarks/build.py --set gpu`, benchmarks/RESULTS.md);
    `explorer="device"` asks for it."""
    return explorer == "device"


def _explore_on_device(
    host: Builder, explorer: str, params, devices=None
) -> ExplicitModel | None:
    """The model explored by `jaxmc.explore.device` (partitioned over
    `devices` where given), or None where the host builder must run (an
    error to locate; with `"auto"`, an unsupported program)."""
    from .device import NeedsHost, explore, explore_sharded

    kw = dict(
        params=params, max_states=host.max_states, deadlocks=host.deadlocks,
        prob_checks=host.prob_checks, chunk_size=host.chunk_size,
        progress=host.progress,
    )  # fmt: skip
    try:
        if devices is None:
            model, _ = explore(host.comp, host.mt, host.initial(), **kw)
        else:
            model, _, _ = explore_sharded(
                host.comp, host.mt, host.initial(), devices, **kw
            )
    except NeedsHost:
        return None
    except UnsupportedError:
        if explorer == "device":
            raise
        return None
    return model


class Builder:
    """One exploration in progress: the visited-state table, the queue
    `[done, len(table))`, and the per-batch outputs that `expand` appends
    to and `assemble` joins into the model."""

    def __init__(
        self,
        comp,
        mt,
        max_states,
        deadlocks,
        progress,
        chunk_size,
        t0,
        prob_checks=True,
    ):
        self.comp, self.mt = comp, mt
        self.prob_checks = prob_checks
        self.max_states, self.deadlocks = max_states, deadlocks
        self.progress, self.chunk_size, self.t0 = progress, max(1, chunk_size), t0
        self.table = table_for(comp.enc)
        self.composer = Composer(comp)
        self.nd = mt == ModelType.MDP
        # Chunk types: successor ids (< 2**31, see `before_add`), the
        # actions of DTMC/CTMC entries, the provenance codes.
        self.col_dtype = np.int32
        self.action_dtype = np.min_scalar_type(len(self.composer.vectors) + 1)
        self.code_dtype = comp.code_dtype
        self.trew_structs = [
            i
            for i, items in enumerate(comp.rewards)
            if any(x.transition for x in items)
        ]
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
        self.actions_order = ActionOrder()
        self.last_entries = 0  # entries of the last batch (`expand`)
        self.over = False  # whether `max_states` was exceeded
        self.dead_examples: list[np.ndarray] = []  # deadlocks="error": the first few
        self.growth = Growth(len(comp.vars), self._decode)
        self.done = 0  # states expanded (the queue is [done, len(table)))
        self.batch_end = 0  # the end of the batch being expanded
        self._merged = 0  # chunks of each per-batch list already joined
        self.held = 0  # bytes of the per-entry chunks (`held_bytes`)

    def _decode(self, lo: int, hi: int) -> np.ndarray:
        return self.comp.enc.decode(self.table.keys[lo:hi], np.int32)

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
            raise comp.error(
                "no state satisfies the `init ... endinit` predicate", checked.init.span
            )
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
            cols = [
                (idx // strides[i]) % widths[i] + lows[i] for i in range(len(widths))
            ]
            ok = pred.unchecked(cols, idx.size)
            if ok.any():
                found.append(np.stack([c[ok] for c in cols], axis=1))
                n_found += found[-1].shape[0]
                if self.max_states is not None and n_found > self.max_states:
                    raise self.too_many()
        if not found:
            raise comp.error(
                "no state satisfies the `init ... endinit` predicate", checked.init.span
            )
        return np.concatenate(found)

    def as_one_batch(
        self, err: ExplorationError, lo: int, hi: int, found: int
    ) -> ExplorationError:
        """The error of expanding the states `[lo, hi)` (a `chunk_size` slice
        of a level, `found` states known before it) as one batch, where a
        part of it raised `err`: the model's errors do not depend on how a
        level is cut into batches."""
        self.done, self.batch_end = lo, hi
        check(self, lo, hi)  # a range, sign or sum error comes first
        if self.over:  # the successors of the whole slice overflow too
            return self.too_many(found)
        return err

    def too_many(self, found: int | None = None) -> ExplorationError:
        """The error of `max_states` (`found` states known, default all)."""
        self.over = True
        found = len(self.table) if found is None else found
        self.growth.upto(max(self.done, self.batch_end))
        why, var = describe(self.growth, self.comp.vars, found, found - self.done)
        span = self.comp.vars[var].span if var is not None else None
        return self.comp.error(
            f"more than {self.max_states:,} states (max_states): {why}",
            span,
            hint="bound the variables that keep growing (a counter that only grows "
            "makes the state space as large as its range), or raise max_states "
            "(--max-states; None for no limit)",
        )

    def before_add(self, count: int) -> None:
        """Checks before `count` new states are added to the table."""
        size = len(self.table)
        if self.max_states is not None and size + count > self.max_states:
            raise self.too_many()
        if size + count >= MAX_STATES:
            raise self.comp.error(
                f"more than {MAX_STATES - 1:,} states: too many to number", None
            )
        need = self.table.growth_bytes(count)
        memory.ensure(need, "the table of visited states", f"at {size:,} states")

    def add_states(self, keys: np.ndarray) -> np.ndarray:
        self.before_add(keys.shape[0])
        return self.table.add(keys)

    def _lists(self) -> list[list]:
        names = ("n_choices", "row_len", "cols", "vals", "actions", "deadlock",
                 "contrib_per_entry", "contrib_code", "contrib_weight")  # fmt: skip
        return [getattr(self, name) for name in names] + self.trews

    def compact(self) -> None:
        """Join the chunks appended since the last call into one per list: a
        model explored one state per batch (a long chain) would otherwise
        hold a dozen small numpy arrays per state, whose headers outweigh
        their data many times. Earlier chunks stay as they are (joining
        them again would copy everything at every call)."""
        m = self._merged
        for lst in self._lists():
            tail = lst[m:]
            if len(tail) < 2:
                continue
            if all_fill(tail):
                lst[m:] = [sum(tail)]
            else:
                dtype = next(c.dtype for c in tail if not isinstance(c, int))
                fill = 0 if lst is self.actions else 1
                lst[m:] = [join(tail, dtype, fill)]
        self._merged += 1

    def held_bytes(self) -> int:
        """Bytes of the per-batch transition arrays so far (assembling the
        model copies them once more; `rows.add_rows` counts them)."""
        return self.held

    def report(self, done: bool = False) -> None:
        found = len(self.table)
        self.progress(BuildProgress(found, found - self.done, self.growth.levels,
                                    time.perf_counter() - self.t0, done))  # fmt: skip

    # ------------------------------------------------------------------ run
    def run(self) -> ExplicitModel:
        comp = self.comp
        init_states = self.initial()
        init_keys = comp.enc.encode(
            [init_states[:, i] for i in range(init_states.shape[1])],
            init_states.shape[0],
        )
        # Distinct by construction (one valuation, or an enumeration).
        init_ids = self.add_states(init_keys)
        level_start, level_end = 0, len(self.table)  # the queue's BFS level
        last_report = time.perf_counter()
        batch = MIN_BATCH  # states per batch (`_next_batch`)
        while self.done < len(self.table):
            # A batch stays within one `chunk_size` slice of its level (the
            # slices order the actions' names, `actions.ActionOrder`).
            chunk = (self.done - level_start) // self.chunk_size
            grid = level_start + (chunk + 1) * self.chunk_size
            if self.done == grid - self.chunk_size:  # a slice begins
                whole = (self.done, min(level_end, grid), len(self.table))
            hi = self.batch_end = min(level_end, grid, self.done + batch)
            self.actions_order.at(self.growth.levels, chunk)
            try:
                hi = self.batch_end = expand(self, self.done, hi, 3 * ENTRY_BUDGET // 2)
            except ExplorationError as e:
                if (self.done, hi) == whole[:2]:
                    raise
                raise self.as_one_batch(e, *whole) from None
            batch = _next_batch(
                batch, hi - self.done, self.last_entries, self.chunk_size
            )
            self.done = hi
            if len(self.cols) - self._merged >= COMPACT_EVERY:
                self.compact()
            if hi == level_end:
                self.growth.level_done(hi)
                level_start, level_end = level_end, len(self.table)
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
        self.actions_order.finish(self)
        return assemble(self, init_ids)

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
