"""Join pruning by FK bounds (planner/joins.py; the Snowflake seed's join pruning): pure unit
tests, no Spark. Bounds are encoded with pyiceberg's own ``to_bytes`` and decoded by the code
under test, so the representation is Iceberg's."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest
from pyiceberg.conversions import to_bytes
from pyiceberg.types import DateType, DecimalType, IntegerType, LongType, NestedField, StringType, TimestampType

from pando_iceberg.expr import keys as keyset
from pando_iceberg.planner.joins import bounds_may_contain, file_bounds, iceberg_key_values


def _tasks(field: NestedField, ranges: list[tuple]) -> list:
    """Fake FileScanTask-shaped objects carrying only manifest bounds (None: no bound stored)."""
    def enc(v):
        return None if v is None else {field.field_id: to_bytes(field.field_type, v)}

    return [SimpleNamespace(file=SimpleNamespace(lower_bounds=enc(lo), upper_bounds=enc(hi))) for lo, hi in ranges]


def _keep(field, ranges, keys):
    lower, upper = file_bounds(_tasks(field, ranges), field)
    return bounds_may_contain(iceberg_key_values(keys, field.field_type), lower, upper).tolist()


def test_integer_keys_against_file_ranges():
    f = NestedField(1, "fk", IntegerType(), required=False)
    keys = keyset.normalize_keys([5, 17, 40])  # a roaring bitmap, as key sets are stored
    ranges = [(0, 4), (5, 5), (6, 16), (10, 20), (41, 100), (40, 40), (-10, 0)]
    assert _keep(f, ranges, keys) == [False, True, False, True, False, True, False]


def test_long_keys_above_32_bits():
    f = NestedField(1, "fk", LongType(), required=False)
    keys = keyset.normalize_keys([2**40, 2**40 + 10])
    assert _keep(f, [(0, 2**40 - 1), (2**40 + 1, 2**40 + 9), (2**40 + 5, 2**41)], keys) == [False, False, True]


def test_missing_or_null_bounds_keep_the_file():
    """A file without bounds (no statistics, or only NULLs in the column) proves nothing: kept."""
    f = NestedField(1, "fk", IntegerType(), required=False)
    keys = keyset.normalize_keys([5])
    assert _keep(f, [(None, None), (None, 9), (6, None), (6, 9)], keys) == [True, True, True, False]


def test_empty_key_set_prunes_every_file_with_bounds():
    """No dimension row matches: no fact row can join (a file without bounds is still kept)."""
    f = NestedField(1, "fk", IntegerType(), required=False)
    assert _keep(f, [(1, 2), (None, None)], keyset.normalize_keys([])) == [False, True]


def test_string_keys_including_truncated_bounds():
    f = NestedField(1, "fk", StringType(), required=False)
    keys = keyset.normalize_keys(["apple", "kiwi", "pear"])
    # Iceberg may truncate string bounds (lower a prefix, upper a bumped prefix): still ordered.
    ranges = [("a", "b"), ("b", "k"), ("kiwi", "kiwi"), ("ki", "kj"), ("pf", "pz"), ("q", "z"), ("", "")]
    assert _keep(f, ranges, keys) == [True, False, True, True, False, False, False]


def test_date_keys_from_arrow():
    f = NestedField(1, "d", DateType(), required=False)
    keys = pa.array([dt.date(2024, 1, 10), dt.date(2024, 3, 1), None])  # a NULL key never joins
    ranges = [(dt.date(2024, 1, 1), dt.date(2024, 1, 9)), (dt.date(2024, 1, 1), dt.date(2024, 1, 31)),
              (dt.date(2024, 2, 1), dt.date(2024, 2, 29)), (dt.date(2024, 3, 1), dt.date(2024, 3, 1))]
    assert _keep(f, [tuple((d - dt.date(1970, 1, 1)).days for d in r) for r in ranges], keys) == \
        [False, True, False, True]


def test_timestamp_keys_from_arrow():
    f = NestedField(1, "t", TimestampType(), required=False)
    t0 = dt.datetime(2024, 1, 1, 12, 0, 0)
    keys = pa.array([t0], pa.timestamp("ms"))
    us = int((t0 - dt.datetime(1970, 1, 1)).total_seconds() * 1_000_000)
    assert _keep(f, [(us - 10, us - 1), (us, us), (us - 1, us + 1)], keys) == [False, True, True]


def test_decimal_keys():
    f = NestedField(1, "amount", DecimalType(10, 2), required=False)
    keys = pa.array([Decimal("1.50"), Decimal("100.25")], pa.decimal128(10, 2))
    ranges = [(Decimal("0.00"), Decimal("1.49")), (Decimal("1.50"), Decimal("2.00")),
              (Decimal("2.00"), Decimal("100.24")), (Decimal("100.00"), Decimal("999.99"))]
    assert _keep(f, ranges, keys) == [False, True, False, True]


def test_mismatched_key_type_is_refused_with_a_clear_error():
    with pytest.raises(TypeError, match="cannot be compared with int bounds"):
        iceberg_key_values(keyset.normalize_keys(["a"]), IntegerType())


def test_vectorized_over_many_files_equals_a_direct_check():
    rng = np.random.default_rng(1)
    keys = np.unique(rng.integers(0, 1_000_000, 500))
    lo = rng.integers(0, 1_000_000, 20_000)
    hi = lo + rng.integers(0, 3_000, 20_000)
    got = bounds_may_contain(keys, lo.tolist(), hi.tolist())
    want = np.array([bool(((keys >= a) & (keys <= b)).any()) for a, b in zip(lo[:2000], hi[:2000])])
    assert np.array_equal(got[:2000], want)
    assert 0 < got.sum() < len(got)
