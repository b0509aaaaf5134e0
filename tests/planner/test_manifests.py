"""The decoded-manifest cache (planner/manifests.py): bounded, reused, right on new snapshots, and
the same plan as pyiceberg's own ``DataScan.plan_files()`` — on pyiceberg-written tables (no
Spark) and on a Spark-written partitioned table with merge-on-read position deletes."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import AlwaysTrue, And, EqualTo, GreaterThanOrEqual, IsNull, LessThan, Or
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from pando_iceberg.planner import manifests as manifests_module
from pando_iceberg.planner.manifests import (
    ManifestEntryCache,
    deep_size,
    estimate_entries_bytes,
    plan_files,
    snapshot_manifests,
)

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "region", StringType(), required=False),
                NestedField(3, "note", StringType(), required=False))
ARROW = pa.schema([("id", pa.int64()), ("region", pa.string()), ("note", pa.string())])


@pytest.fixture()
def table(tmp_path):
    """A table partitioned by region, 6 appends (6 manifests, 12 data files)."""
    cat = SqlCatalog("mc", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    cat.create_namespace("db")
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))
    t = cat.create_table("db.t", SCHEMA, partition_spec=spec)
    for i in range(6):
        ids = list(range(i * 100, i * 100 + 100))
        t.append(pa.table({"id": ids, "region": ["eu" if x % 2 else "us" for x in ids],
                           "note": [f"row {x} " + "x" * (x % 7) for x in ids]}, schema=ARROW))
    return t


def _signature(tasks):
    """What a plan is: each file, its delete files, its residual."""
    return sorted((t.file.file_path, tuple(sorted(d.file_path for d in t.delete_files)), str(t.residual)) for t in tasks)


FILTERS = [AlwaysTrue(), EqualTo("region", "eu"), And(GreaterThanOrEqual("id", 150), LessThan("id", 320)),
           And(EqualTo("region", "us"), LessThan("id", 50)), GreaterThanOrEqual("id", 10_000)]


@pytest.mark.parametrize("flt", FILTERS, ids=str)
def test_same_plan_as_pyiceberg(table, flt):
    cache = ManifestEntryCache()
    own = _signature(table.scan(row_filter=flt).plan_files())
    assert _signature(plan_files(table, flt, cache=cache)) == own
    assert _signature(plan_files(table, flt, cache=cache)) == own  # the second plan from the cache


@pytest.fixture()
def evolved(tmp_path):
    """A table written unpartitioned (3 appends), then partitioned by region (3 more): manifests
    of both specs, the unpartitioned ones planned without projecting the filter."""
    cat = SqlCatalog("mc", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    cat.create_namespace("db")
    t = cat.create_table("db.e", Schema(NestedField(1, "id", LongType(), required=True),
                                        *SCHEMA.fields[1:]))
    arrow = pa.schema([pa.field("id", pa.int64(), nullable=False), ("region", pa.string()), ("note", pa.string())])
    for i in range(6):
        if i == 3:
            with t.update_spec() as update:
                update.add_identity("region")
        ids = list(range(i * 100, i * 100 + 100))
        t.append(pa.table({"id": ids, "region": ["eu" if x % 2 else "us" for x in ids],
                           "note": [f"row {x}" for x in ids]}, schema=arrow))
    return t


@pytest.mark.parametrize("flt", FILTERS + [IsNull("id"), Or(IsNull("id"), LessThan("id", 120))], ids=str)
def test_unpartitioned_manifests_same_plan_as_pyiceberg(evolved, flt, monkeypatch):
    """Unpartitioned manifests skip pyiceberg's manifest and partition evaluators (no partition
    field to judge) and plan the same files; a filter that binds to false (``id IS NULL`` on a
    required column) still reads nothing; partitioned manifests keep pyiceberg's evaluators."""
    specs = {m.partition_spec_id for m in evolved.current_snapshot().manifests(evolved.io)}
    assert len(specs) == 2, "the fixture must hold manifests of both specs"
    built = []
    original = manifests_module.CachedManifestPlanner._build_manifest_evaluator
    monkeypatch.setattr(manifests_module.CachedManifestPlanner, "_build_manifest_evaluator",
                        lambda self, spec_id: built.append(spec_id) or original(self, spec_id))
    own = _signature(evolved.scan(row_filter=flt).plan_files())
    assert _signature(plan_files(evolved, flt, cache=ManifestEntryCache())) == own
    assert built == [evolved.spec().spec_id]  # only the partitioned spec's
    if isinstance(flt, IsNull):
        assert own == []


def test_entries_reused_across_plans(table):
    cache = ManifestEntryCache()
    plan_files(table, AlwaysTrue(), cache=cache)
    manifests = len(table.current_snapshot().manifests(table.io))
    assert cache.stats.decodes == manifests == 6 and len(cache) == 6
    for flt in FILTERS:
        plan_files(table, flt, cache=cache)
    assert cache.stats.decodes == 6, "a cached manifest was decoded again"
    assert cache.stats.hits >= 6


def test_tiny_bound_is_kept_and_evicts_lru(table):
    manifests = table.current_snapshot().manifests(table.io)
    one = estimate_entries_bytes(manifests[0].fetch_manifest_entry(table.io, discard_deleted=True))
    cache = ManifestEntryCache(max_bytes=int(one * 2.5))  # room for two manifests, not three
    own = _signature(table.scan().plan_files())
    for _ in range(3):
        assert _signature(plan_files(table, None, cache=cache)) == own
        assert 0 < cache.bytes <= cache.max_bytes and len(cache) == 2
    assert cache.stats.evictions > 0
    # the most recently used manifests stay: touching one keeps it over the other
    first, second = [m for m in manifests if m in cache]
    cache.get(first)
    cache.entries(table.io, next(m for m in manifests if m not in cache))
    assert first in cache and second not in cache
    nothing = ManifestEntryCache(max_bytes=0)  # 0 disables keeping anything, planning still right
    assert _signature(plan_files(table, None, cache=nothing)) == own and len(nothing) == 0 and nothing.bytes == 0


def test_size_estimate_is_honest(table):
    entries = table.current_snapshot().manifests(table.io)[0].fetch_manifest_entry(table.io, discard_deleted=True)
    exact = deep_size(entries)
    est = estimate_entries_bytes(entries)
    assert exact > 1000 * len(entries) / 10  # a DataFile with metrics is hundreds of bytes, not a pointer
    assert 0.8 * exact <= est <= 1.25 * exact, (est, exact)


def test_new_snapshot_planned_right(table):
    cache = ManifestEntryCache()
    before = plan_files(table, None, cache=cache)
    t = table
    t.append(pa.table({"id": [5000, 5001], "region": ["eu", "apac"], "note": ["new", "new"]}, schema=ARROW))
    after_append = plan_files(t, None, cache=cache)
    assert _signature(after_append) == _signature(t.scan().plan_files())
    assert len(after_append) == len(before) + 2  # one new file per region partition
    assert _signature(plan_files(t, EqualTo("region", "apac"), cache=cache)) == \
        _signature(t.scan(row_filter=EqualTo("region", "apac")).plan_files())
    t.delete(EqualTo("region", "us"))  # drops whole files (copy-on-write at partition level)
    after_delete = plan_files(t, None, cache=cache)
    assert _signature(after_delete) == _signature(t.scan().plan_files())
    assert all("region=us" not in task.file.file_path for task in after_delete)
    # the old snapshot is still planned as it was (time travel through the same cache)
    old = table.metadata.snapshots[5].snapshot_id
    assert _signature(plan_files(t, None, snapshot_id=old, cache=cache)) == _signature(before)


def test_empty_table(tmp_path):
    cat = SqlCatalog("mc2", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    cat.create_namespace("db")
    t = cat.create_table("db.e", SCHEMA)
    assert plan_files(t, None, cache=ManifestEntryCache()) == []


def test_bad_bound_named():
    with pytest.raises(ValueError, match="max_bytes"):
        ManifestEntryCache(max_bytes=-1)


@pytest.mark.spark
def test_merge_on_read_deletes_and_partitions_match_pyiceberg(spark, catalog):
    """Spark writes a partitioned v2 table, then merge-on-read DELETE/UPDATE add position delete
    files: the cached plan has the same files and the same delete files per file as pyiceberg's."""
    name = "mcache.mor"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS mcache")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} (id BIGINT, part INT, v STRING) USING iceberg PARTITIONED BY (part) "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', "
              "'write.update.mode'='merge-on-read')")
    for lo in (0, 1000, 2000):
        spark.sql(f"INSERT INTO {name} SELECT id, CAST(id % 3 AS INT), CAST(id AS STRING) FROM range({lo}, {lo + 1000})")
    spark.sql(f"DELETE FROM {name} WHERE id % 10 = 0 AND part = 1")
    spark.sql(f"UPDATE {name} SET v = 'u' WHERE id BETWEEN 1500 AND 1600")
    table = catalog.load_table(name)
    cache = ManifestEntryCache()
    for flt in (AlwaysTrue(), EqualTo("part", 1), And(GreaterThanOrEqual("id", 1400), LessThan("id", 1700))):
        own = table.scan(row_filter=flt).plan_files()
        assert any(t.delete_files for t in own), "the fixture must exercise delete files"
        for _ in range(2):
            assert _signature(plan_files(table, flt, cache=cache)) == _signature(own)
    # and pyiceberg reads the same rows through the cached tasks as Spark sees
    from pyiceberg.io.pyarrow import ArrowScan

    tasks = plan_files(table, None, cache=cache)
    rows = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table(tasks).num_rows
    assert rows == spark.sql(f"SELECT count(*) FROM {name}").collect()[0][0] == 2900


def test_plan_scan_plans_through_the_process_cache(table):
    from pando_iceberg.planner import plan_scan
    from pando_iceberg.planner.manifests import DEFAULT_MANIFEST_CACHE

    first = plan_scan(table, "region = 'eu' AND id < 300")
    decodes = DEFAULT_MANIFEST_CACHE.stats.decodes
    assert all(m in DEFAULT_MANIFEST_CACHE for m in table.current_snapshot().manifests(table.io))
    second = plan_scan(table, "id >= 420")
    assert DEFAULT_MANIFEST_CACHE.stats.decodes == decodes  # the second query decoded nothing
    assert first.paths == {t.file.file_path for t in table.scan(row_filter="region = 'eu' AND id < 300").plan_files()}
    assert second.paths == {t.file.file_path for t in table.scan(row_filter="id >= 420").plan_files()}


def test_bound_from_the_environment(monkeypatch):
    monkeypatch.setenv("PANDO_MANIFEST_CACHE_BYTES", "12345")
    assert ManifestEntryCache().max_bytes == 12345
    monkeypatch.setenv("PANDO_MANIFEST_CACHE_BYTES", "lots")
    with pytest.raises(ValueError, match="PANDO_MANIFEST_CACHE_BYTES='lots'"):
        ManifestEntryCache()
    monkeypatch.delenv("PANDO_MANIFEST_CACHE_BYTES")
    assert ManifestEntryCache().max_bytes == 256 * 1024 * 1024


def test_manifest_list_read_once_per_snapshot_and_bounded(table, monkeypatch):
    """A snapshot's manifest list is read once (pyiceberg re-reads it on every plan); a new
    snapshot's list is read anew, and at most MANIFEST_LISTS' bound of lists are kept."""
    from pyiceberg.table.snapshots import Snapshot

    from pando_iceberg.planner.caches import MANIFEST_LISTS

    reads = []
    original = Snapshot.manifests

    def counting(self, io):
        reads.append(self.manifest_list)
        return original(self, io)

    monkeypatch.setattr(Snapshot, "manifests", counting)
    MANIFEST_LISTS.clear()
    snap = table.current_snapshot()
    first = snapshot_manifests(table.io, snap)
    assert snapshot_manifests(table.io, snap) is first and reads == [snap.manifest_list]
    assert [m.manifest_path for m in first] == [m.manifest_path for m in original(snap, table.io)]
    for flt in FILTERS:
        plan_files(table, flt, cache=ManifestEntryCache())
    assert reads == [snap.manifest_list]
    table.append(pa.table({"id": [7_000], "region": ["eu"], "note": ["new"]}, schema=ARROW))
    before = len(reads)  # pyiceberg's append reads its parent's list itself
    planned = plan_files(table, AlwaysTrue())
    assert reads[before:] == [table.current_snapshot().manifest_list]
    assert _signature(planned) == _signature(table.scan().plan_files())
    monkeypatch.setattr(MANIFEST_LISTS, "max_entries", 1)
    table.append(pa.table({"id": [7_001], "region": ["us"], "note": ["newer"]}, schema=ARROW))
    snapshot_manifests(table.io, table.current_snapshot())
    assert len(MANIFEST_LISTS) == 1 and table.current_snapshot().manifest_list in MANIFEST_LISTS


def test_load_table_reuses_parsed_metadata_until_the_table_changes(table):
    """``catalog.load_table``: the current table every time; a metadata file already parsed is not
    read again; a commit (another writer's, through the catalog) is seen at once; an unknown
    table fails as the catalog's own load does."""
    from pyiceberg.exceptions import NoSuchTableError

    from pando_iceberg.catalog import TABLE_METADATA, load_table

    cat = table.catalog
    TABLE_METADATA.clear()
    first = load_table(cat, "db.t")
    assert first.metadata_location == table.metadata_location
    assert first.metadata == cat.load_table("db.t").metadata
    again = load_table(cat, ("db", "t"))
    assert again.metadata is first.metadata and again.name() == ("db", "t") and again is not first
    assert type(again.io) is type(first.io) and again.io.properties == first.io.properties
    assert [t.file.file_path for t in again.scan().plan_files()] == [t.file.file_path for t in first.scan().plan_files()]
    cat.load_table("db.t").append(pa.table({"id": [9_999], "region": ["eu"], "note": ["new"]}, schema=ARROW))
    after = load_table(cat, "db.t")
    assert after.metadata_location != first.metadata_location
    assert after.current_snapshot().snapshot_id != first.current_snapshot().snapshot_id
    assert after.scan(row_filter=EqualTo("id", 9_999)).to_arrow().num_rows == 1
    with pytest.raises(NoSuchTableError):
        load_table(cat, "db.missing")


def test_load_tables_one_round_trip(table):
    """``catalog.load_tables``: the tables whose current metadata was parsed before, in one SELECT;
    a table not parsed yet, an unknown one, and a stale location are left for ``load_table``."""
    from sqlalchemy import event

    from pando_iceberg.catalog import TABLE_METADATA, load_table, load_tables

    cat = table.catalog
    cat.create_table("db.u", SCHEMA)
    TABLE_METADATA.clear()
    load_table(cat, "db.t")
    statements = []
    listener = lambda conn, cursor, statement, *rest: statements.append(statement)  # noqa: E731
    event.listen(cat.engine, "before_cursor_execute", listener)
    try:
        got = load_tables(cat, ["db.t", "db.u", "db.missing", ("db", "t")])
    finally:
        event.remove(cat.engine, "before_cursor_execute", listener)
    assert len(statements) == 1
    assert set(got) == {"db.t", ("db", "t")}  # db.u was never parsed: load_table reads it
    assert got["db.t"].metadata_location == cat.load_table("db.t").metadata_location
    assert got["db.t"].name() == ("db", "t")
    load_table(cat, "db.u")
    cat.load_table("db.t").append(pa.table({"id": [1], "region": ["eu"], "note": ["x"]}, schema=ARROW))
    assert set(load_tables(cat, ["db.t", "db.u"])) == {"db.u"}  # db.t's new metadata file is not parsed yet
    assert load_table(cat, "db.t").metadata_location == cat.load_table("db.t").metadata_location
