"""Uniqueness of a dimension column per snapshot (planner/uniqueness.py) on a real
pyiceberg table (SQLite catalog, local files; no Spark): manifest statistics refute it without
reading data, otherwise the column is read once and the answer cached per snapshot."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from pando_iceberg.planner.caches import UNIQUENESS
from pando_iceberg.planner.uniqueness import is_unique, key_basis, stats_refute_uniqueness


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


def test_dimension_columns_read_once_per_snapshot_and_new_literals_filter_them(catalog, monkeypatch):
    """A held-out query's new literal on a dimension is a filter of its cached columns (no read);
    only the columns a join needs are read, a join needing another column reads again (and keeps
    both), a new snapshot is read again, and columns above the byte bound are not kept."""
    from pando_iceberg.expr import TableFilter
    from pando_iceberg.expr import keys as keyset
    from pando_iceberg.planner import caches
    from pando_iceberg.planner.keysets import dimension_columns, dimension_keys

    schema = pa.schema([("k", pa.int64()), ("a", pa.string()), ("b", pa.int64()), ("wide", pa.string())])
    t = catalog.create_table("d.small", schema=schema)
    t.append(pa.table({"k": pa.array(range(10), pa.int64()), "a": [f"v{i % 3}" for i in range(10)],
                       "b": pa.array([i % 2 for i in range(10)], pa.int64()), "wide": ["x" * 100] * 10}))
    schema = catalog.load_table("d.small").schema().as_arrow()
    fact = pa.schema([("fk", pa.int64())])
    join = lambda where: TableFilter.from_sql(f"fk IN (SELECT k FROM d.small WHERE {where})", fact, "d.f",
                                              schemas={"d.small": schema}).joins[0]
    keys = lambda where: sorted(keyset.keys_array(dimension_keys(catalog, join(where)).keys))
    caches.KEY_SETS.clear()
    caches.DIMENSION_COLUMNS.clear()
    reads = []
    real_scan = type(t).scan
    monkeypatch.setattr(type(t), "scan", lambda self, *a, **kw: reads.append(kw) or real_scan(self, *a, **kw))
    caches.UNIQUENESS.clear()
    assert is_unique(catalog.load_table("d.small"), "k")  # reads k (and plans its stats), kept for key sets
    assert all(r["selected_fields"] == ("k",) for r in reads) and len(caches.DIMENSION_COLUMNS) == 1
    reads.clear()
    assert keys("a = 'v0'") == [0, 3, 6, 9]
    assert keys("a = 'v1'") == [1, 4, 7]
    assert len(reads) == 1 and len(caches.DIMENSION_COLUMNS) == 1  # one read, two literals
    assert set(reads[0]["selected_fields"]) == {"k", "a"}  # not the wide column
    assert keys("a = 'v1' AND b = 0") == [4]
    assert len(reads) == 2 and set(reads[1]["selected_fields"]) == {"k", "a", "b"}
    assert keys("b = 1") == [1, 3, 5, 7, 9] and len(reads) == 2
    t.append(pa.table({"k": pa.array([10], pa.int64()), "a": ["v1"], "b": pa.array([0], pa.int64()),
                       "wide": ["y"]}))
    assert keys("a = 'v1'") == [1, 4, 7, 10]
    assert len(reads) == 3
    kept = dimension_columns(catalog.load_table("d.small"), ["a"])  # two data files, kept as one chunk
    assert len(reads) == 3 and {c.num_chunks for c in kept.columns} == {1}
    assert kept.schema.field("a").type == pa.large_string() and kept.num_rows == 11
    small = caches.DIMENSION_COLUMNS
    small.clear()
    monkeypatch.setattr(small, "max_bytes", 10)  # columns above the bound are read, not kept
    assert keys("a = 'v2'") == [2, 5, 8] and keys("a = 'v0'") == [0, 3, 6, 9]
    assert len(reads) == 5 and len(small) == 0 and small.bytes == 0


def test_predicates_decide_only_while_the_chain_holds_the_same_rows(catalog):
    """``holds_rows_of``: the snapshot itself, not an append after it, not a dropped table and
    not another schema; ``predicates_decide`` needs every table of ``exact_at`` to hold."""
    from pando_iceberg.expr import CutOrigin
    from pando_iceberg.planner.literal_cuts import holds_rows_of, predicates_decide

    t = catalog.create_table("d.dim2", schema=pa.schema([("k", pa.int64()), ("a", pa.string())]))
    t.append(pa.table({"k": pa.array([1, 2], pa.int64()), "a": ["x", "y"]}))
    u = catalog.create_table("d.sub", schema=pa.schema([("k", pa.int64())]))
    u.append(pa.table({"k": pa.array([1], pa.int64())}))
    s0, u0 = t.current_snapshot().snapshot_id, u.current_snapshot().snapshot_id
    origin = CutOrigin("d.dim2", "k", "k IN (SELECT k FROM d.sub)", s0, "unique", {"d.dim2": s0, "d.sub": u0})
    assert holds_rows_of(t, s0) and predicates_decide(catalog, origin)
    assert not predicates_decide(catalog, CutOrigin("d.dim2", "k", "a = 'x'", s0))  # exact_at unknown
    u.append(pa.table({"k": pa.array([2], pa.int64())}))  # a sub-dimension of the chain changed
    assert not predicates_decide(catalog, origin)
    t.append(pa.table({"k": pa.array([3], pa.int64()), "a": ["z"]}))
    t = catalog.load_table("d.dim2")
    assert not holds_rows_of(t, s0) and holds_rows_of(t, t.current_snapshot().snapshot_id)
    with t.update_schema() as upd:  # same rows, another schema: a name may denote another field
        upd.rename_column("a", "b")
    t = catalog.load_table("d.dim2")
    assert not holds_rows_of(t, t.current_snapshot().snapshot_id)
    assert not holds_rows_of(t, 12345)  # an unknown (e.g. expired) snapshot


def test_evaluation_ready_keeps_values_types_and_nullability():
    from pando_iceberg.expr.evaluate import evaluation_ready

    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("s", pa.string())], metadata={b"m": b"1"})
    table = pa.Table.from_batches([pa.record_batch([pa.array([1, 2]), pa.array(["a", None])], schema=schema),
                                   pa.record_batch([pa.array([3]), pa.array(["c"])], schema=schema)])
    ready = evaluation_ready(table)
    assert ready.to_pylist() == table.to_pylist() and ready.schema.metadata == {b"m": b"1"}
    assert not ready.schema.field("k").nullable and ready.schema.field("s").type == pa.large_string()
    assert [c.num_chunks for c in ready.columns] == [1, 1]
    assert evaluation_ready(table.slice(0, 0)).num_rows == 0
