"""The sort-based set operations of `jaxmc._arrays` against numpy's."""

import numpy as np
import pytest

from jaxmc._arrays import union1d, unique, unique_counts


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
@pytest.mark.parametrize("size", [0, 1, 2, 1000])
def test_unique_matches_numpy(dtype, size):
    rng = np.random.default_rng(size)
    a = rng.integers(-50, 50, size).astype(dtype).reshape(-1, 1)
    got = unique(a)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, np.unique(a))
    vals, counts = unique_counts(a)
    want_vals, want_counts = np.unique(a, return_counts=True)
    np.testing.assert_array_equal(vals, want_vals)
    np.testing.assert_array_equal(counts, want_counts)


def test_union1d_matches_numpy():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 100, 300), rng.integers(50, 200, 40)
    np.testing.assert_array_equal(union1d(a, b), np.union1d(a, b))
    assert unique([3, 1, 3]).tolist() == [1, 3]
