"""The find-or-put Pallas (Triton) kernel of `table`: lock-free open
addressing with linear probing, as in GPUexplore's shared state table.

One program handles `block` keys of the batch, one lane per key. Each round
every active lane looks at its current slot:

- it claims the slot with an atomic OR of the `CLAIMED` bit on the slot's
  state word (a test-and-set: exactly one lane sees the word empty). The
  owner writes the key's words and its batch position, then publishes the
  slot with an atomic OR of the `READY` bit (release: the key is visible to
  every lane that sees `READY`, whose atomic acquires it);
- a slot claimed but not yet ready is looked at again next round;
- a ready slot holding the lane's key is found;
- a ready slot holding another key sends the lane to the next slot.

Multi-word keys need no wider atomics: the state word alone decides who
writes a slot, and nobody compares against a slot before it is ready.

Each program adds its claims to the table's size once per round; when the
size passes the table's capacity (in keys) every program stops: the batch
overflows, and `_table_hash` rolls its claims back. Below the capacity
(at most half the slots) a free slot always exists, so probing ends.

The numbering of the new keys (first-occurrence order) is done after the
kernel, in XLA (`_table_hash.number`, shared with the XLA rounds): the owner
leaves its batch position in the slot's id word, `-(position + 2)`, and a
scatter-max over the slots found lowers it to the key's first position.
(A per-lane atomic max in the kernel would do the same, but jax 0.10's
Triton lowering takes vector integer atomic max/min for floats.)

Off the GPU the kernel runs in Pallas' interpret mode, where Triton's
atomics are emulated lane by lane in lane order or its reverse (`reverse`): a valid
interleaving of the GPU's, so the interpret-mode tests check the protocol's
logic (intra-block duplicates, claimed-not-ready slots, collisions).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl


try:  # jax 0.10/0.11: the Triton atomics live in jax.experimental.pallas.triton
    from jax.experimental.pallas import triton as _pltr
except ImportError:  # pragma: no cover - very old or very new jax
    _pltr = None

EMPTY = 0
CLAIMED = 1
READY = 2

_SEED = 0x9E3779B9
_M1 = 0x85EBCA6B
_M2 = 0xC2B2AE35


def hash_words(words):
    """A 32-bit hash (murmur3's finaliser folded over the words) of the
    uint32 word arrays `words`; the same in the kernel and in XLA."""
    h = jnp.full_like(words[0], _SEED)
    for x in words:
        h = (h ^ x) * jnp.uint32(_M1)
        h = h ^ lax.shift_right_logical(h, jnp.uint32(13))
        h = h * jnp.uint32(_M2)
        h = h ^ lax.shift_right_logical(h, jnp.uint32(16))
    return h


class _Triton:
    """Triton's per-lane atomics (acquire-release, GPU scope)."""

    @staticmethod
    def fetch_or(ref, idx, val, mask):
        return _pltr.atomic_or(ref, (idx,), val, mask=mask)

    @staticmethod
    def fetch_add_scalar(ref, val):
        return _pltr.atomic_add(ref, (0,), val)

    @staticmethod
    def store(ref, idx, val, mask):
        return _pltr.store(ref.at[idx], val, mask=mask)


class _Emulated:
    """The same atomics done one lane after another (interpret mode), in
    lane order or its reverse."""

    def __init__(self, reverse: bool):
        self.reverse = reverse

    def _rmw(self, op, ref, idx, val, mask):
        n = idx.shape[0]

        def body(t, olds):
            k = n - 1 - t if self.reverse else t
            i = idx[k]
            old = ref[i]
            ref[i] = jnp.where(mask[k], op(old, val[k]), old)
            return olds.at[k].set(old)

        return lax.fori_loop(0, n, body, jnp.zeros(idx.shape, ref.dtype))

    def fetch_or(self, ref, idx, val, mask):
        return self._rmw(jnp.bitwise_or, ref, idx, val, mask)

    def store(self, ref, idx, val, mask):
        # Lane by lane too: a masked scatter in interpret mode writes the
        # old value back at masked lanes, which may undo another lane's
        # store to the same slot.
        self._rmw(lambda old, new: new, ref, idx, val, mask)

    @staticmethod
    def fetch_add_scalar(ref, val):
        old = ref[0]
        ref[0] = old + val
        return old


def _load(ref, idx, mask, other, interpret):
    if interpret:
        return _pltr.load(ref.at[idx], mask=mask, other=other)
    # Volatile: table words written by other programs are read past L1.
    return _pltr.load(ref.at[idx], mask=mask, other=other, volatile=True)


def _kernel(
    keys_ref,
    valid_ref,
    occ_in,
    ids_in,
    tk_in,
    cnt_in,
    lim_ref,
    slot_ref,
    occ_ref,
    ids_ref,
    tk_ref,
    cnt_ref,
    *,
    m,
    w,
    cap,
    block,
    atomics,
    interpret,
):
    del occ_in, ids_in, tk_in, cnt_in  # aliased to the outputs
    max_fill = lim_ref[0]
    i32 = jnp.int32
    lane = pl.program_id(0) * block + jnp.arange(block, dtype=i32)
    inb = lane < m
    li = jnp.where(inb, lane, 0)
    valid = inb & (_load(valid_ref, li, inb, 0, interpret) != 0)
    words = [_load(keys_ref, li * w + j, inb, 0, interpret) for j in range(w)]
    start = (hash_words(words) & jnp.uint32(cap - 1)).astype(i32)
    tag = -(lane + 2)  # "new in this batch, first seen at `lane`"

    def cond(c):
        active, _, _, stop = c
        return (jnp.sum(active, dtype=i32) > 0) & ~stop

    def body(c):
        active, s, slot, _ = c
        old = atomics.fetch_or(occ_ref, s, jnp.full_like(s, CLAIMED), active)
        own = active & (old == EMPTY)
        for j in range(w):
            atomics.store(tk_ref, s * w + j, words[j], own)
        atomics.store(ids_ref, s, tag, own)
        atomics.fetch_or(occ_ref, s, jnp.full_like(s, CLAIMED | READY), own)
        ready = active & ((old & READY) != 0)
        eq = ready
        for j in range(w):
            eq = eq & (_load(tk_ref, s * w + j, ready, 0, interpret) == words[j])
        done = own | eq
        slot = jnp.where(done, s, slot)
        s = jnp.where(ready & ~eq, (s + 1) & (cap - 1), s)
        n_own = jnp.sum(own, dtype=i32)
        total = atomics.fetch_add_scalar(cnt_ref, n_own) + n_own
        return active & ~done, s, slot, total > max_fill

    init = (valid, start, jnp.full((block,), -1, i32), jnp.bool_(False))
    _, _, slot, _ = lax.while_loop(cond, body, init)
    atomics.store(slot_ref, li, slot, inb)


def _compiler_params():
    if _pltr is None:  # pragma: no cover
        return None
    cls = getattr(_pltr, "CompilerParams", None) or getattr(
        _pltr, "TritonCompilerParams", None
    )
    return cls(num_warps=4, num_stages=1) if cls is not None else None


@functools.partial(jax.jit, static_argnames=("block", "interpret", "reverse"))
def probe(occ, ids, tkeys, count, limit, keys, valid, *, block, interpret, reverse):
    """Run the kernel on a batch: returns `(slot, occ, ids, tkeys, count)`,
    `slot[i]` the slot of key `i` (-1 for invalid keys and keys left when
    the count passed `limit`), the id words of slots new in this batch
    holding `-(smallest position + 2)`, and `count` the number of claimed
    slots (past `limit` when the batch overflowed)."""
    m, w = keys.shape
    cap = occ.shape[0]
    atomics = _Emulated(reverse) if interpret else _Triton
    kern = functools.partial(
        _kernel,
        m=m,
        w=w,
        cap=cap,
        block=block,
        atomics=atomics,
        interpret=interpret,
    )
    out_shape = (
        jax.ShapeDtypeStruct((m,), jnp.int32),
        jax.ShapeDtypeStruct(occ.shape, occ.dtype),
        jax.ShapeDtypeStruct(ids.shape, ids.dtype),
        jax.ShapeDtypeStruct((cap * w,), jnp.uint32),
        jax.ShapeDtypeStruct((1,), jnp.int32),
    )
    slot, occ, ids, tk, cnt = pl.pallas_call(
        kern,
        grid=(pl.cdiv(m, block),),
        out_shape=out_shape,
        input_output_aliases={2: 1, 3: 2, 4: 3, 5: 4},
        interpret=interpret,
        compiler_params=None if interpret else _compiler_params(),
    )(
        keys.reshape(-1),
        valid.astype(jnp.int32),
        occ,
        ids,
        tkeys.reshape(-1),
        count.astype(jnp.int32).reshape(1),
        limit.astype(jnp.int32).reshape(1),
    )
    return slot, occ, ids, tk.reshape(cap, w), cnt[0]
