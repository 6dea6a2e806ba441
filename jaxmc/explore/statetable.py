"""State encoding and the visited-state set of the exploration.

A state is a vector of variable values. It is packed into `W` int64 words by
mixed-radix encoding of the offsets `v - low` (variables are grouped greedily
into words whose range product fits in 63 bits; most models need one word).
Packing makes an update a key *delta*: assigning `x := e` adds
`(e - x) * stride[x]` to the word holding `x`, so successors never need to be
materialised as full state vectors.

`StateTable` maps keys to dense state ids with a vectorised open-addressing
hash table (linear probing, load factor at most 1/2). Batches are looked up and
inserted with a handful of numpy passes per probe round, never a Python loop
per state. Ids are handed out in insertion order, which the builder makes the
BFS order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


_MULT = np.uint64(0x9E3779B97F4A7C15)
_MULT2 = np.uint64(0xC2B2AE3D27D4EB4F)
_MAX_WORD = (1 << 63) - 1


@dataclass(frozen=True)
class Encoding:
    """Mixed-radix packing of states into `n_words` int64 words."""

    lows: np.ndarray  # int64 [nvars]
    widths: np.ndarray  # int64 [nvars]
    word: np.ndarray  # int64 [nvars]: which word holds each variable
    stride: np.ndarray  # int64 [nvars]
    n_words: int

    @staticmethod
    def for_ranges(ranges: Sequence[tuple[int, int]]) -> Encoding:
        lows, widths, word, stride = [], [], [], []
        w, prod = 0, 1
        for lo, hi in ranges:
            width = hi - lo + 1
            if width > _MAX_WORD:
                raise ValueError(f"variable range [{lo}..{hi}] too wide to encode")
            if prod * width > _MAX_WORD:
                w, prod = w + 1, 1
            lows.append(lo)
            widths.append(width)
            word.append(w)
            stride.append(prod)
            prod *= width
        return Encoding(
            np.array(lows, dtype=np.int64),
            np.array(widths, dtype=np.int64),
            np.array(word, dtype=np.int64),
            np.array(stride, dtype=np.int64),
            w + 1,
        )

    def encode(self, cols: Sequence[np.ndarray], n: int) -> np.ndarray:
        """Keys `[n, n_words]` of the states given as per-variable columns."""
        keys = np.zeros((n, self.n_words), dtype=np.int64)
        for i, c in enumerate(cols):
            keys[:, self.word[i]] += (
                np.asarray(c, np.int64) - self.lows[i]
            ) * self.stride[i]
        return keys

    def decode(self, keys: np.ndarray) -> np.ndarray:
        """States `[n, nvars]` (int64) of keys `[n, n_words]`."""
        n = keys.shape[0]
        out = np.empty((n, len(self.lows)), dtype=np.int64)
        for i in range(len(self.lows)):
            out[:, i] = (keys[:, self.word[i]] // self.stride[i]) % self.widths[
                i
            ] + self.lows[i]
        return out


def _hash(keys: np.ndarray, bits: int) -> np.ndarray:
    k = keys.view(np.uint64)
    h = k[:, 0] * _MULT
    for j in range(1, k.shape[1]):
        h = (h ^ (h >> np.uint64(29))) * _MULT2 + k[:, j] * _MULT
    return (h >> np.uint64(64 - bits)).astype(np.int64)


class StateTable:
    """Find-or-insert of packed state keys, giving dense ids in insertion order."""

    def __init__(self, n_words: int, capacity: int = 1 << 10):
        self.n_words = n_words
        self.size = 0
        self.keys = np.empty((capacity, n_words), dtype=np.int64)
        self._bits = 11
        self._slots = np.full(1 << self._bits, -1, dtype=np.int64)

    def __len__(self) -> int:
        return self.size

    def find(self, keys: np.ndarray) -> np.ndarray:
        """Ids of `keys` (`[b, n_words]`), -1 where absent."""
        b = keys.shape[0]
        out = np.full(b, -1, dtype=np.int64)
        if b == 0 or self.size == 0:
            return out
        mask = (1 << self._bits) - 1
        slot = _hash(keys, self._bits)
        if self.n_words == 1:
            return self._find1(keys[:, 0], slot, mask, out)
        active = np.arange(b)
        while active.size:
            s = slot[active]
            ids = self._slots[s]
            empty = ids < 0
            hit = ~empty
            hit[hit] = np.all(self.keys[ids[hit]] == keys[active[hit]], axis=1)
            out[active[hit]] = ids[hit]
            more = ~(empty | hit)
            active = active[more]
            slot[active] = (s[more] + 1) & mask
        return out

    def _find1(
        self, keys: np.ndarray, slot: np.ndarray, mask: int, out: np.ndarray
    ) -> np.ndarray:
        # One-word keys: the same probing with 1-D comparisons. The first
        # round runs on the whole batch without index indirection.
        stored = self.keys[:, 0]
        ids = self._slots[slot]
        hit = ids >= 0
        hit[hit] = stored[ids[hit]] == keys[hit]
        out[hit] = ids[hit]
        active = np.flatnonzero(~hit & (ids >= 0))
        while active.size:
            s = (slot[active] + 1) & mask
            slot[active] = s
            ids = self._slots[s]
            found = ids >= 0
            found[found] = stored[ids[found]] == keys[active[found]]
            out[active[found]] = ids[found]
            active = active[~found & (ids >= 0)]
        return out

    def growth_bytes(self, b: int) -> int:
        """Bytes that `add`ing `b` more keys allocates (a larger key array
        and/or a rebuilt slot table); 0 when they fit."""
        need = 0
        cap = self.keys.shape[0]
        while self.size + b > cap:
            cap *= 2
        if cap != self.keys.shape[0]:
            need += cap * self.n_words * 8
        bits = self._bits
        while 2 * (self.size + b) > (1 << bits):
            bits += 1
        if bits != self._bits:
            need += (1 << bits) * 8
        return need

    def add(self, keys: np.ndarray) -> np.ndarray:
        """Insert distinct keys known to be absent; returns their new ids."""
        b = keys.shape[0]
        ids = np.arange(self.size, self.size + b, dtype=np.int64)
        if b == 0:
            return ids
        while self.size + b > self.keys.shape[0]:
            grown = np.empty((2 * self.keys.shape[0], self.n_words), dtype=np.int64)
            grown[: self.size] = self.keys[: self.size]
            self.keys = grown
        self.keys[self.size : self.size + b] = keys
        self.size += b
        if 2 * self.size > (1 << self._bits):
            while 2 * self.size > (1 << self._bits):
                self._bits += 1
            self._slots = np.full(1 << self._bits, -1, dtype=np.int64)
            self._insert(np.arange(self.size, dtype=np.int64))
        else:
            self._insert(ids)
        return ids

    def _insert(self, ids: np.ndarray) -> None:
        mask = (1 << self._bits) - 1
        slot = _hash(self.keys[ids], self._bits)
        pending = ids
        while pending.size:
            free = self._slots[slot] < 0
            cand, cslot = pending[free], slot[free]
            self._slots[cslot] = cand  # colliding writers: one of them wins
            won = np.zeros(pending.size, dtype=bool)
            won[free] = self._slots[cslot] == cand
            pending = pending[~won]
            slot = (slot[~won] + 1) & mask
