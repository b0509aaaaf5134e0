"""Key sets (``expr.keys``): ``normalize_keys`` builds the bitmap of exactly the keys given, and
``member_mask`` answers ``value IN keys`` as the row-by-row definition does, on both of its paths
(a lookup table over small key ranges, a binary search above)."""

import numpy as np
import pyarrow as pa
import pytest
from pyroaring import BitMap, BitMap64

from pando_iceberg.expr import keys as keyset


@pytest.mark.parametrize("seed", range(40))
def test_member_mask_is_the_row_by_row_in(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    span = int(rng.choice([5, 300, 10**6, 2**40]))  # small ranges take the table, wide ones the search
    values = rng.integers(-span // 4, span, n)
    nulls = rng.random(n) < 0.1
    column = pa.array(values, mask=nulls, type=pa.int64())
    picked = rng.choice(values, size=int(rng.integers(1, 50))) + rng.integers(-2, 3, 1)  # members and near misses
    for keys in (picked[picked >= 0], picked):
        if len(keys) == 0:
            continue
        ks = keyset.normalize_keys(keys)
        want = np.array([(not nulls[i]) and int(values[i]) in set(keys.tolist()) for i in range(n)])
        assert np.array_equal(keyset.member_mask(column, ks), want), (seed, type(ks))
        assert np.array_equal(keyset.member_mask(column.cast(pa.int32()) if span < 2**31 else column, ks), want)


def test_normalize_keys_builds_the_bitmap_of_the_keys_given():
    rng = np.random.default_rng(7)
    for keys in (rng.integers(0, 150_000, 30_000), np.arange(0, 90_000, 3), np.array([5, 5, 1]),
                 rng.integers(0, 2**32, 1000, dtype=np.uint64)):
        got = keyset.normalize_keys(keys)
        assert isinstance(got, BitMap) and got == BitMap(keys.tolist())
    assert isinstance(keyset.normalize_keys(np.array([2**33, 1])), BitMap64)
    assert np.array_equal(keyset.normalize_keys(np.array([3, -1, 3])), [-1, 3])
