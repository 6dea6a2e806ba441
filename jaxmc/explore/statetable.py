"""State encoding and the visited-state set of the exploration.

A state is a vector of variable values. It is packed into `W` int64 words by
mixed-radix encoding of the offsets `v - low` (variables are grouped greedily
into words whose range product fits in 63 bits; most models need one word).
Packing makes an update a key *delta*: assigning `x := e` adds
`(e - x) * stride[x]` to the word holding `x`, so successors never need to be
materialised as full state vectors.

`StateTable` maps keys to dense state ids with a vectorised open-addressing
hash table (linear probing, load factor at most 1/2, int32 slots). Batches are
looked up and inserted with a handful of numpy passes per probe round, never a
Python loop per state. `DirectTable` is the same map for one-word keys whose
whole range is small (`DIRECT_MAX_KEYS`): an int32 array indexed by the key
itself (one gather per lookup, no hashing or probing); it is allocated zeroed
by the operating system, so only the pages that reachable keys touch take
memory. `table_for` picks one. Ids are handed out in insertion order, which
the builder makes the BFS order: `find_or_add` numbers a batch's new keys in
order of first occurrence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np


_MULT = np.uint64(0x9E3779B97F4A7C15)
_MULT2 = np.uint64(0xC2B2AE3D27D4EB4F)
# splitmix64's finaliser (Steele, Lea, Flood 2014)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
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

    def decode(self, keys: np.ndarray, dtype=np.int64) -> np.ndarray:
        """States `[n, nvars]` (`dtype`) of keys `[n, n_words]`."""
        n = keys.shape[0]
        out = np.empty((n, len(self.lows)), dtype=dtype)
        for i, c in enumerate(self.decode_columns(keys)):
            out[:, i] = c
        return out

    def decode_columns(self, keys: np.ndarray) -> list[np.ndarray]:
        """The values of each variable (int64 `[n]`) of keys `[n, n_words]`."""
        out: list[np.ndarray] = [None] * len(self.lows)  # type: ignore[list-item]
        for w, members in self._members:
            # Successive quotients, the remainder by a multiply and subtract:
            # keys are non-negative, and numpy's `%` (signed, Python's
            # semantics) costs about three floor divisions.
            q = keys[:, w]
            for i, width, low in members[:-1]:
                nxt = q // width
                c = q - nxt * width
                q = nxt
                out[i] = c + low if low else c
            i, _, low = members[-1]
            out[i] = q + low if low else q
        return out

    @cached_property
    def _members(self) -> list[tuple[int, list[tuple[int, int, int]]]]:
        """Per word, its variables `(index, width, low)` by increasing stride."""
        words: dict[int, list[tuple[int, int, int]]] = {}
        for i, w in enumerate(self.word):
            words.setdefault(int(w), []).append(
                (i, int(self.widths[i]), int(self.lows[i]))
            )
        return list(words.items())


def _hash(keys: np.ndarray, bits: int) -> np.ndarray:
    """Slots of `keys` in a table of `2**bits`: the words combined, then
    mixed by splitmix64's finaliser before the top `bits` are taken. A
    multiplicative hash alone (the top bits of `k * _MULT`) leaves packed
    keys that differ in a few fields in long runs of neighbouring slots,
    and linear probing then walks them (brp: benchmarks/RESULTS.md, "The
    host builder's state table")."""
    k = keys.view(np.uint64)
    h = k[:, 0] * _MULT
    for j in range(1, k.shape[1]):
        h = (h ^ (h >> np.uint64(29))) * _MULT2 + k[:, j] * _MULT
    h = (h ^ (h >> np.uint64(30))) * _MIX1
    h = (h ^ (h >> np.uint64(27))) * _MIX2
    h ^= h >> np.uint64(31)
    return (h >> np.uint64(64 - bits)).astype(np.int64)


#: Largest key range (product of the variables' widths, one word) that
#: `table_for` maps directly: 4 bytes of address space per possible key.
DIRECT_MAX_KEYS = 1 << 25


def table_for(enc: Encoding) -> StateTable | DirectTable:
    """The visited-state table for keys of `enc`."""
    if enc.n_words == 1:
        span = int(np.prod([int(w) for w in enc.widths], dtype=object))
        if span <= DIRECT_MAX_KEYS:
            return DirectTable(span)
    return StateTable(enc.n_words)


def _first_occurrence(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of `keys` (`[b, W]`) in order of first occurrence, and
    each row's index among them."""
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


class _Keys:
    """The keys in id order, in an array grown geometrically."""

    def __init__(self, n_words: int, capacity: int = 1 << 10):
        self.n_words = n_words
        self.size = 0
        self.keys = np.empty((capacity, n_words), dtype=np.int64)

    def __len__(self) -> int:
        return self.size

    def _key_growth(self, b: int) -> int:
        cap = self.keys.shape[0]
        while self.size + b > cap:
            cap *= 2
        return 0 if cap == self.keys.shape[0] else cap * self.n_words * 8

    def _append(self, keys: np.ndarray) -> np.ndarray:
        b = keys.shape[0]
        if self.size + b > self.keys.shape[0]:
            cap = self.keys.shape[0]
            while self.size + b > cap:
                cap *= 2
            grown = np.empty((cap, self.n_words), dtype=np.int64)
            grown[: self.size] = self.keys[: self.size]
            self.keys = grown
        self.keys[self.size : self.size + b] = keys
        self.size += b
        return np.arange(self.size - b, self.size, dtype=np.int64)

    def find_or_add(
        self, keys: np.ndarray, before_add: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """Ids of `keys` (`[b, n_words]`); the absent ones are added, numbered
        in order of first occurrence in `keys`. `before_add(count)` is called
        with the number of new keys before they are added (it may raise)."""
        ids = self.find(keys)
        miss = np.flatnonzero(ids < 0)
        if miss.size:
            uniq, inv = _first_occurrence(keys[miss])
            if before_add is not None:
                before_add(uniq.shape[0])
            ids[miss] = self.add(uniq)[inv]
        return ids

    def release(self) -> None:
        """Drop the keys and the lookup structure (`len` stays)."""
        self.keys = self.keys[:0].copy()


class DirectTable(_Keys):
    """One-word keys in `[0, span)` mapped by an int32 array indexed by the
    key (`id + 1`; 0 = absent)."""

    def __init__(self, span: int, capacity: int = 1 << 10):
        super().__init__(1, capacity)
        self.span = span
        # calloc: the pages no key touches are never materialised
        self._slot = np.zeros(span, dtype=np.int32)

    def find(self, keys: np.ndarray) -> np.ndarray:
        """Ids of `keys` (`[b, 1]`), -1 where absent."""
        return self._slot[keys[:, 0]].astype(np.int64) - 1

    def find_or_add(
        self, keys: np.ndarray, before_add: Callable[[int], None] | None = None
    ) -> np.ndarray:
        k = keys[:, 0]
        slot = self._slot
        got = slot[k]
        miss = np.flatnonzero(got == 0)
        if miss.size == 0:
            return got.astype(np.int64) - 1
        km = k[miss]
        # The first occurrence of each new key: the smallest position that
        # writes it (`minimum.at`, written over a marker larger than any).
        pos = np.arange(miss.size, dtype=np.int32)
        slot[km] = np.iinfo(np.int32).max
        np.minimum.at(slot, km, pos)
        first = slot[km]
        is_first = first == pos
        count = int(np.count_nonzero(is_first))
        if before_add is not None:
            try:
                before_add(count)
            except BaseException:
                slot[km] = 0
                raise
        rank = np.cumsum(is_first, dtype=np.int64) - 1
        new_ids = self._append(km[is_first][:, None])
        slot[km[is_first]] = (new_ids + 1).astype(np.int32)
        got = got.astype(np.int64) - 1
        got[miss] = self.size - count + rank[first]
        return got

    def growth_bytes(self, b: int) -> int:
        """Bytes that `add`ing `b` more keys allocates (0 when they fit)."""
        return self._key_growth(b)

    def add(self, keys: np.ndarray) -> np.ndarray:
        """Insert distinct keys known to be absent; returns their new ids."""
        ids = self._append(keys)
        self._slot[keys[:, 0]] = (ids + 1).astype(np.int32)
        return ids

    def release(self) -> None:
        super().release()
        self._slot = None


class StateTable(_Keys):
    """Find-or-insert of packed state keys, giving dense ids in insertion order."""

    def __init__(self, n_words: int, capacity: int = 1 << 10):
        super().__init__(n_words, capacity)
        self._bits = 11
        self._slots = np.full(1 << self._bits, -1, dtype=np.int32)

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
        need = self._key_growth(b)
        bits = self._bits
        while 2 * (self.size + b) > (1 << bits):
            bits += 1
        if bits != self._bits:
            need += (1 << bits) * 4
        return need

    def add(self, keys: np.ndarray) -> np.ndarray:
        """Insert distinct keys known to be absent; returns their new ids."""
        b = keys.shape[0]
        if b == 0:
            return np.arange(self.size, self.size, dtype=np.int64)
        ids = self._append(keys)
        if 2 * self.size > (1 << self._bits):
            while 2 * self.size > (1 << self._bits):
                self._bits += 1
            self._slots = None
            self._slots = np.full(1 << self._bits, -1, dtype=np.int32)
            self._insert(np.arange(self.size, dtype=np.int64))
        else:
            self._insert(ids)
        return ids

    def _insert(self, ids: np.ndarray) -> None:
        mask = (1 << self._bits) - 1
        slot = _hash(self.keys[ids], self._bits)
        pending = ids.astype(np.int32)
        while pending.size:
            free = self._slots[slot] < 0
            cand, cslot = pending[free], slot[free]
            self._slots[cslot] = cand  # colliding writers: one of them wins
            won = np.zeros(pending.size, dtype=bool)
            won[free] = self._slots[cslot] == cand
            pending = pending[~won]
            slot = (slot[~won] + 1) & mask

    def release(self) -> None:
        super().release()
        self._slots = None
