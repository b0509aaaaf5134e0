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


@pytest.mark.parametrize("seed", range(30))
def test_a_kept_lookup_answers_every_batch_as_the_row_by_row_in(seed):
    """``IntKeyLookup`` built once and asked batch after batch (a routing task): its bit table
    (dense keys) and its binary search (sparse keys) agree with ``value IN keys`` row by row,
    for int64 keys with negatives, 32- and 64-bit bitmaps, NULLs, values outside the keys'
    range, and unsigned 64-bit columns against signed keys."""
    rng = np.random.default_rng(1000 + seed)
    base = int(rng.choice([0, 7, 2**31, 2**40]))
    span = int(rng.choice([50, 5_000, 2_000_000, 2**36]))
    keys = base + rng.integers(0, span, int(rng.integers(1, 20_000)))
    if rng.random() < 0.3:
        keys = np.concatenate([keys, -rng.integers(1, 100, 5)])  # negatives: a sorted int64 array
    ks = keyset.normalize_keys(keys)
    lookup = keyset.IntKeyLookup(keyset.keys_array(ks))
    members = set(keys.tolist())
    for _ in range(3):
        n = int(rng.integers(1, 4000))
        values = base + rng.integers(-span // 3, span + span // 3, n)
        values[: n // 4] = rng.choice(keys, n // 4)  # members for sure
        nulls = rng.random(n) < 0.1
        want = np.array([(not nulls[i]) and int(values[i]) in members for i in range(n)])
        column = pa.array(values, mask=nulls, type=pa.int64())
        assert np.array_equal(keyset.member_mask(column, ks, lookup.ks, lookup), want), (seed, type(ks))
        assert np.array_equal(keyset.member_mask(column, ks), want), (seed, type(ks))
        if (values[~nulls] >= 0).all():
            unsigned = pa.array(values.astype(np.uint64), mask=nulls, type=pa.uint64())
            assert np.array_equal(keyset.member_mask(unsigned, ks, lookup.ks, lookup), want), seed


def test_the_lookup_keeps_a_bit_table_only_where_it_costs_no_more_than_the_keys():
    dense = keyset.IntKeyLookup(keyset.keys_array(keyset.normalize_keys(np.arange(0, 6_000_000, 4))))
    assert dense.bits is not None and dense.bits.nbytes <= 6_000_000 // 8 + 1
    sparse = keyset.IntKeyLookup(keyset.keys_array(keyset.normalize_keys(np.arange(0, 2**40, 2**30))))
    assert sparse.bits is None  # 1,024 keys over 2^40 values: searched
    once = keyset.IntKeyLookup(keyset.keys_array(keyset.normalize_keys(np.arange(0, 6_000_000, 4))), rows=10)
    assert once.bits is None  # a one-off question about 10 rows does not build 750 KB
