"""The device explorer's find-or-put table against a dictionary: ids, new
flags, numbering in order of first position, invalid rows, overflow."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmc.explore.device import table as T


def _reference(store: dict, keys: np.ndarray, valid: np.ndarray):
    ids = np.full(keys.shape[0], -1, np.int64)
    new = np.zeros(keys.shape[0], bool)
    for i, (k, v) in enumerate(zip(map(tuple, keys.tolist()), valid)):
        if not v:
            continue
        if k not in store:
            store[k] = len(store)
            new[i] = True
        ids[i] = store[k]
    return ids, new


@pytest.mark.parametrize("width", [1, 2, 3])
def test_matches_dictionary(width):
    rng = np.random.default_rng(width)
    cap = 512
    table = T.create(cap, width)
    fop = jax.jit(T.find_or_put)
    store: dict = {}
    for _ in range(6):
        m = 64
        # few distinct values so that repeats within and across calls occur
        keys = rng.integers(0, 6, size=(m, width)).astype(np.uint32)
        keys[:, 0] |= np.uint32(rng.integers(0, 2)) << np.uint32(30)
        valid = rng.random(m) < 0.8
        table, ids, new = fop(table, jnp.asarray(keys), jnp.asarray(valid))
        ref_ids, ref_new = _reference(store, keys, valid)
        np.testing.assert_array_equal(np.asarray(ids), ref_ids)
        np.testing.assert_array_equal(np.asarray(new), ref_new)
        assert int(table.size) == len(store)
        assert not bool(table.overflow)


def test_overflow_flag():
    table = T.create(4, 1)
    keys = jnp.arange(6, dtype=jnp.uint32)[:, None]
    table, _, _ = T.find_or_put(table, keys, jnp.ones(6, bool))
    assert bool(table.overflow)
    table = T.create(4, 1)
    table, ids, _ = T.find_or_put(table, keys[:4], jnp.ones(4, bool))
    assert not bool(table.overflow)
    np.testing.assert_array_equal(np.asarray(ids), [0, 1, 2, 3])
