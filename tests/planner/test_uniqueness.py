"""Uniqueness of a dimension column per snapshot (planner/joins.py, issue 14) on a real
pyiceberg table (SQLite catalog, local files; no Spark): manifest statistics refute it without
reading data, otherwise the column is read once and the answer cached per snapshot."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from pando_iceberg.planner.joins import UNIQUENESS, is_unique, key_basis, stats_refute_uniqueness


@pytest.fixture
def catalog(tmp_path):
    cat = SqlCatalog("u", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    cat.create_namespace("d")
    return cat


def test_statistics_refute_a_foreign_key_and_keep_a_key(catalog):
    t = catalog.create_table("d.t", schema=pa.schema([("k", pa.int64()), ("fk", pa.int32()), ("s", pa.string()),
                                                      ("n", pa.int32())]))
    t.append(pa.table({"k": pa.array(range(100), pa.int64()), "fk": pa.array([i % 7 for i in range(100)], pa.int32()),
                       "s": [f"v{i}" for i in range(100)], "n": pa.array([None] + list(range(99)), pa.int32())}))
    assert stats_refute_uniqueness(t, "fk")  # 100 rows in a range of 7 values
    assert stats_refute_uniqueness(t, "n")  # a NULL
    assert not stats_refute_uniqueness(t, "k") and not stats_refute_uniqueness(t, "s")
    UNIQUENESS.clear()
    assert is_unique(t, "k") and is_unique(t, "S") and not is_unique(t, "fk") and not is_unique(t, "n")
    assert key_basis(t, "k") == "unique" and key_basis(t, "fk") is None


def test_a_new_snapshot_with_a_duplicate_is_checked_again(catalog):
    t = catalog.create_table("d.dim", schema=pa.schema([("k", pa.int64()), ("a", pa.string())]))
    t.append(pa.table({"k": pa.array([1, 2, 3], pa.int64()), "a": ["x", "y", "z"]}))
    assert is_unique(t, "k")
    t.append(pa.table({"k": pa.array([10], pa.int64()), "a": ["w"]}))  # still unique, new snapshot
    assert is_unique(catalog.load_table("d.dim"), "k")
    t.append(pa.table({"k": pa.array([2], pa.int64()), "a": ["dup"]}))  # no statistic refutes this one
    t = catalog.load_table("d.dim")
    assert not stats_refute_uniqueness(t, "k") and not is_unique(t, "k") and key_basis(t, "k") is None
