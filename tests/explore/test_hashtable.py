"""The find-or-put hash tables (the Pallas kernel in interpret mode, the XLA
rounds) against the sorted reference and a dictionary: random keys with
duplicates within and across batches, in batches; overflow roll-back;
growing; the kernel's lowering to Triton."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmc.explore.device import _table_hash as H, _table_pallas as P, table as T


def _dictionary(store: dict, keys: np.ndarray, valid: np.ndarray):
    ids = np.full(keys.shape[0], -1, np.int64)
    new = np.zeros(keys.shape[0], bool)
    for i, (k, v) in enumerate(zip(map(tuple, keys.tolist()), valid)):
        if v:
            new[i] = k not in store
            ids[i] = store.setdefault(k, len(store))
    return ids, new


def _run(impl, batches, capacity, width, reverse=False):
    table = T.create(capacity, width, impl)
    out = []
    for keys, valid in batches:
        if impl == "pallas":
            table, ids, new = H.find_or_put(
                table, jnp.asarray(keys), jnp.asarray(valid), impl=impl, reverse=reverse
            )
        else:
            table, ids, new = T.find_or_put(table, keys, valid, impl=impl)
        out.append((np.asarray(ids), np.asarray(new), int(table.size)))
    n = int(table.size)
    return out, np.asarray(T.keys_by_id(table))[:n], bool(table.overflow)


def _batches(rng, width, n_batches, m, spread):
    out = []
    for _ in range(n_batches):
        keys = rng.integers(0, spread, size=(m, width)).astype(np.uint32)
        # high words too, so that every word of the key matters
        keys[:, -1] ^= np.uint32(rng.integers(0, 2**31))
        keys[:, -1] &= np.uint32(0x8000000F)
        valid = rng.random(m) < 0.85
        out.append((keys, valid))
    return out


@pytest.mark.parametrize(
    "width,impl,reverse",
    [
        pytest.param(1, "pallas", False, marks=pytest.mark.slow),
        (3, "pallas", False),
        (2, "pallas", True),
        (2, "rounds", False),
    ],
)
def test_hash_tables_equal_the_reference(width, impl, reverse):
    rng = np.random.default_rng(10 * width + reverse)
    batches = _batches(rng, width, 4, 96, 5)
    ref, ref_keys, _ = _run("sorted", batches, 600, width)
    got, got_keys, over = _run(impl, batches, 600, width, reverse)
    store: dict = {}
    for (keys, valid), (rid, rnew, rsize), (gid, gnew, gsize) in zip(batches, ref, got):
        did, dnew = _dictionary(store, keys, valid)
        np.testing.assert_array_equal(rid, did)
        np.testing.assert_array_equal(rnew, dnew)
        np.testing.assert_array_equal(gid, did)
        np.testing.assert_array_equal(gnew, dnew)
        assert gsize == rsize == len(store)
    np.testing.assert_array_equal(got_keys, ref_keys)
    assert not over


@pytest.mark.parametrize("impl", ["pallas", "rounds"])
def test_tiny_table_wraps_and_collides(impl):
    # capacity 5 -> 16 slots: probing runs past the last slot, most keys collide
    rng = np.random.default_rng(7)
    batches = [(rng.integers(0, 3, size=(40, 2)).astype(np.uint32), np.ones(40, bool))]
    batches[0][0][:, 0] = 0  # 3 distinct keys at most, many duplicates
    ref, ref_keys, _ = _run("sorted", batches, 5, 2)
    got, got_keys, over = _run(impl, batches, 5, 2)
    np.testing.assert_array_equal(got[0][0], ref[0][0])
    np.testing.assert_array_equal(got[0][1], ref[0][1])
    np.testing.assert_array_equal(got_keys, ref_keys)
    assert not over


@pytest.mark.parametrize("impl", ["pallas", "rounds"])
def test_overflow_rolls_back_and_grows(impl):
    table = T.create(6, 1, impl)
    first = np.arange(4, dtype=np.uint32)[:, None] * 7
    table, _, _ = T.find_or_put(table, first, np.ones(4, bool), impl=impl)
    before = np.asarray(T.keys_by_id(table))
    more = np.arange(40, 45, dtype=np.uint32)[:, None]  # 4 + 5 > 6
    after, ids, new = T.find_or_put(table, more, np.ones(5, bool), impl=impl)
    assert bool(after.overflow)
    assert int(after.size) == 4
    np.testing.assert_array_equal(np.asarray(ids), -1)
    assert not np.asarray(new).any()
    np.testing.assert_array_equal(np.asarray(T.keys_by_id(after)), before)
    np.testing.assert_array_equal(np.asarray(after.occ), np.asarray(table.occ))
    # grow: the stored keys in id order into a larger table keep their ids
    big = T.create(16, 1, impl)
    big, ids, _ = T.find_or_put(big, before, np.arange(before.shape[0]) < 4, impl=impl)
    np.testing.assert_array_equal(np.asarray(ids)[:4], [0, 1, 2, 3])
    big, ids, new = T.find_or_put(big, more, np.ones(5, bool), impl=impl)
    np.testing.assert_array_equal(np.asarray(ids), [4, 5, 6, 7, 8])
    assert np.asarray(new).all() and not bool(big.overflow)


def test_kernel_in_jit_and_empty_batch():
    table = T.create(8, 2, "pallas")
    keys = jnp.zeros((0, 2), jnp.uint32)
    out, ids, new = H.find_or_put(table, keys, jnp.zeros(0, bool), impl="pallas")
    assert ids.shape == (0,) and int(out.size) == 0
    step = jax.jit(lambda t, k, v: T.find_or_put(t, k, v, impl="rounds"))
    keys = jnp.array([[1, 2], [3, 4], [1, 2]], jnp.uint32)
    table, ids, new = step(table, keys, jnp.ones(3, bool))
    np.testing.assert_array_equal(np.asarray(ids), [0, 1, 0])
    np.testing.assert_array_equal(np.asarray(new), [True, True, False])


def test_kernel_lowers_to_triton():
    """The kernel uses only what Pallas' Triton lowering supports (checked
    without a GPU: lowering stops before Triton compiles for a device)."""
    table = T.create(100, 3, "pallas")
    keys = jnp.zeros((1000, 3), jnp.uint32)
    traced = P.probe.trace(
        table.occ,
        table.ids,
        table.keys,
        table.size,
        table.capacity,
        keys,
        jnp.ones(1000, bool),
        block=256,
        interpret=False,
        reverse=False,
    )
    try:
        text = traced.lower(lowering_platforms=("cuda",)).as_text()
    except ValueError as e:  # a jaxlib without the Triton bindings
        pytest.skip(str(e))
    assert "__gpu$xla.gpu.triton" in text


@pytest.mark.gpu
def test_kernel_on_gpu_equals_reference():
    if jax.default_backend() != "gpu":
        pytest.skip("needs a GPU")
    rng = np.random.default_rng(3)
    batches = _batches(rng, 2, 3, 200_000, 300)
    ref, ref_keys, _ = _run("sorted", batches, 400_000, 2)
    got, got_keys, _ = _run("pallas", batches, 400_000, 2)
    for (rid, rnew, rsize), (gid, gnew, gsize) in zip(ref, got):
        np.testing.assert_array_equal(gid, rid)
        np.testing.assert_array_equal(gnew, rnew)
        assert gsize == rsize
    np.testing.assert_array_equal(got_keys, ref_keys)


@pytest.mark.parametrize("impl", ["pallas", "rounds"])
def test_without_rollback_same_ids(impl):
    """`rollback=False` (the explorer's loop, which never overflows) gives
    the ids, `is_new` and size of the checked call."""
    rng = np.random.default_rng(7)
    a, b = H.create(256, 2), H.create(256, 2)
    for _ in range(3):
        keys = jnp.asarray(rng.integers(0, 20, size=(48, 2)).astype(np.uint32))
        valid = jnp.asarray(rng.random(48) < 0.8)
        a, ids_a, new_a = H.find_or_put(a, keys, valid, impl=impl)
        b, ids_b, new_b = H.find_or_put(b, keys, valid, impl=impl, rollback=False)
        np.testing.assert_array_equal(np.asarray(ids_a), np.asarray(ids_b))
        np.testing.assert_array_equal(np.asarray(new_a), np.asarray(new_b))
        assert int(a.size) == int(b.size) and not bool(b.overflow)
