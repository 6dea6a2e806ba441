"""A compiled program (`jaxmc.explore.compile.Compiled`) prepared for the
device: the bit-packed state encoding, the guards and updates as jax.numpy
functions, and the synchronisation vectors as static tables.

Encoding. Each variable keeps `v - low` in the bits its range needs
(`(high - low).bit_length()`), packed greedily into `uint32` words; word 0
uses at most 31 bits, so bit 31 of word 0 is free (the table's contract,
`table.py`). A field never carries into its neighbour, so an assignment
`x := e` is the word delta `(e - x) << shift` in wrapping `uint32`
arithmetic, and a product of updates adds its updates' deltas.

Choices. `compose.Composer` orders a state's choices by synchronisation
vector (unlabelled first, then by action), and within a vector by the
tuple of enabled commands, first participant most significant, each
participant's commands in command order. The update combinations of a
choice follow, last module's update least significant (`expand`). The
tables here let a device function enumerate exactly that order from the
guard values: `cands[v, j]` lists the commands that participant `j` of
vector `v` may contribute.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from ... import _config
from ...errors import UnsupportedError
from ...lang.ast import ModelType
from ..compile import Compiled
from ..compose import Composer
from ..lower import Codegen
from .lowering import on_device, update_function


#: XLA options of the explorer's jitted functions on the CPU: its loop is
#: large, data-dependent code run once per model, where XLA's optimisation
#: passes and LLVM's cost more compile time than they save at run time.
CPU_COMPILE_OPTIONS = {
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
    "xla_cpu_use_fusion_emitters": False,
}


def compiler_options() -> dict | None:
    """`compiler_options` for the explorer's `jax.jit`s on the default
    backend (`CPU_COMPILE_OPTIONS` on the CPU where accepted, else None)."""
    import jax

    if jax.default_backend() != "cpu" or not CPU_COMPILE_OPTIONS:
        return None
    items = tuple(sorted(CPU_COMPILE_OPTIONS.items()))
    return dict(items) if _config._accepted(items) else None


@dataclass(frozen=True)
class Packing:
    """Bit fields of the variables in `n_words` uint32 words."""

    lows: np.ndarray  # int64 [nvars]
    word: np.ndarray  # int64 [nvars]
    shift: np.ndarray  # int64 [nvars]
    bits: np.ndarray  # int64 [nvars]
    n_words: int

    @staticmethod
    def for_ranges(lows, highs) -> Packing:
        word, shift, bits = [], [], []
        w, used, room = 0, 0, 31
        for lo, hi in zip(lows, highs):
            b = int(hi - lo).bit_length()
            if b > 32:
                raise UnsupportedError(f"a variable range [{lo}..{hi}] over 32 bits")
            if used + b > room:
                w, used, room = w + 1, 0, 32
            word.append(w)
            shift.append(used)
            bits.append(b)
            used += b
        a = np.asarray
        return Packing(a(lows, np.int64), a(word, np.int64), a(shift, np.int64),
                       a(bits, np.int64), w + 1)  # fmt: skip

    def encode_host(self, states: np.ndarray) -> np.ndarray:
        """uint32 keys `[n, n_words]` of int states `[n, nvars]`."""
        keys = np.zeros((states.shape[0], self.n_words), dtype=np.uint64)
        for i in range(len(self.lows)):
            off = (states[:, i].astype(np.int64) - self.lows[i]).astype(np.uint64)
            keys[:, self.word[i]] |= off << np.uint64(self.shift[i])
        return keys.astype(np.uint32)

    def decode(self, keys, lows=None) -> list:
        """int64 columns (one `[n]` array per variable) of uint32 keys
        (`lows`: the variables' lower bounds, default `self.lows`)."""
        lows = self.lows if lows is None else lows
        cols = []
        for i in range(len(self.lows)):
            w = keys[:, int(self.word[i])].astype(jnp.int64)
            mask = (1 << int(self.bits[i])) - 1
            cols.append(((w >> int(self.shift[i])) & mask) + lows[i])
        return cols

    def layout(self) -> tuple:
        """What the packing's device code depends on (not the lower bounds)."""
        return (tuple(self.word.tolist()), tuple(self.shift.tolist()),
                tuple(self.bits.tolist()), self.n_words)  # fmt: skip

    def delta(self, var: int, new, old):
        """The uint32 word delta of assigning `new` where the value is `old`."""
        d = (new - old) << int(self.shift[var])
        return (d & 0xFFFFFFFF).astype(jnp.uint32)


class Program:
    """The static description of a program for the device explorer."""

    def __init__(self, comp: Compiled, mt: ModelType, params=None):
        if not comp.code_fits:
            raise UnsupportedError(
                "the product of the modules' update counts does not fit the "
                "provenance code",
                hint="use explorer='host'",
            )
        self.comp, self.mt = comp, mt
        self.pack = Packing.for_ranges(comp.lows, comp.highs)
        checked = comp.checked
        index = {n: i for i, n in enumerate(comp.names)}
        bools = {v.name for v in comp.vars if v.is_bool}
        cmds = comp.commands
        self.n_cmds = len(cmds)
        self.n_modules = len(checked.modules)
        self.guards = [on_device(c.guard) for c in cmds]
        # Updates in global order (command by command), each fused into one
        # function by the host lowering's code generator.
        self.updates = []  # (command position, fn, assigned variable indices)
        first_gid, n_upd = [], []
        for p, c in enumerate(cmds):
            first_gid.append(len(self.updates))
            n_upd.append(len(c.updates))
            for u in c.cmd.updates:
                cg = Codegen(index, bools=bools, params=params, ranges=comp.ranges)
                fn = update_function(cg, u.prob, u.assigns)
                self.updates.append((p, fn, [index[n] for n, _ in u.assigns]))
        self.n_updates = len(self.updates)
        if not cmds:  # a placeholder, never a candidate: the gathers' operand
            first_gid, n_upd = [0], [0]
        self.first_gid = np.asarray(first_gid, np.int32)
        self.n_upd = np.asarray(n_upd, np.int32)
        self.first_local = comp.first_local.astype(np.int64)
        if not cmds:
            self.first_local = np.zeros(1, np.int64)
        self.module_of = np.asarray([c.module for c in cmds] or [0], np.int32)
        self.radix = comp.radix.astype(np.int64)
        self._vectors(Composer(comp))
        self.values = {
            "lows": np.asarray(comp.lows, np.int64),
            "highs": np.asarray(comp.highs, np.int64),
            "guards": [f.consts for f in self.guards],
            "updates": [f.consts for _, f, _ in self.updates],
        }
        tables = (self.cands, self.part_module, self.n_upd, self.first_gid,
                  self.first_local, self.module_of, self.radix)  # fmt: skip
        self.signature = (
            mt, self.pack.layout(), self.n_modules, self.n_vectors,
            tuple(f.source for f in self.guards),
            tuple((p, f.source, tuple(a)) for p, f, a in self.updates),
            tuple((t.dtype.str, t.shape, t.tobytes()) for t in tables),
            id(self) if params else None,
        )  # fmt: skip

    def _vectors(self, composer: Composer) -> None:
        """Static tables of the synchronisation vectors, plus a last,
        participant-less vector standing for a deadlock's self-loop."""
        comp = self.comp
        vecs = composer.vectors
        self.n_vectors = len(vecs)  # index n_vectors: the deadlock self-loop
        self.vector_label = [a for a, _ in vecs]
        kp = max([len(p) for _, p in vecs] + [1])
        lc = 1
        cands_l = []
        for _, parts in vecs:
            row = []
            for key in parts:
                members = composer.members.get(key, [])
                row.append([int(comp.cmd_pos[ci]) for ci in members])
                lc = max(lc, len(members))
            cands_l.append(row)
        v1 = self.n_vectors + 1
        self.cands = np.full((v1, kp, lc), -1, np.int32)
        self.part_module = np.full((v1, kp), -1, np.int32)
        for v, (row, (_, parts)) in enumerate(zip(cands_l, vecs)):
            for j, (members, (m, _)) in enumerate(zip(row, parts)):
                self.cands[v, j, : len(members)] = members
                self.part_module[v, j] = m
        self.max_parts, self.max_cands = kp, lc

    # ------------------------------------------------------------ device
    def evaluate(self, keys, valid, values):
        """Guards and updates on a batch of keys `[b, w]` (`values`: the
        program's `values`, traced).

        Returns `(G [b, C] bool, P [b, U] float64, D [b, U, w] uint32,
        bad [b, U] bool, guard_bad [b] bool)`: `bad` marks an update whose
        evaluation fails or assigns out of range where its command is
        enabled; `guard_bad` a guard whose evaluation fails."""
        b = keys.shape[0]
        cols = self.pack.decode(keys, values["lows"])
        lows, highs = values["lows"], values["highs"]
        g_list, gbad = [], jnp.zeros(b, bool)
        for f, consts in zip(self.guards, values["guards"]):
            g, bad = f(cols, None, b, consts)
            g_list.append(g & valid)
            gbad = gbad | (bad & valid)
        G = jnp.stack(g_list, axis=1) if g_list else jnp.zeros((b, 1), bool)
        w = self.pack.n_words
        p_list, d_list, bad_list = [], [], []
        for (p, f, assigned), consts in zip(self.updates, values["updates"]):
            active = G[:, p]
            prob, new, bad = f(cols, active, b, consts)
            out = bad
            words = [jnp.zeros(b, jnp.uint32) for _ in range(w)]
            for vi, val in zip(assigned, new):
                out = out | (val < lows[vi]) | (val > highs[vi])
                wi = int(self.pack.word[vi])
                words[wi] = words[wi] + self.pack.delta(vi, val, cols[vi])
            p_list.append(prob)
            d_list.append(jnp.stack(words, axis=1))
            bad_list.append(out & active)
        u = len(p_list)
        P = jnp.stack(p_list, axis=1) if u else jnp.zeros((b, 1))
        D = jnp.stack(d_list, axis=1) if u else jnp.zeros((b, 1, w), jnp.uint32)
        B = jnp.stack(bad_list, axis=1) if u else jnp.zeros((b, 1), bool)
        return G, P, D, B, gbad
