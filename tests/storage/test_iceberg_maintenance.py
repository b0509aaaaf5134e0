"""The location policy holds against Iceberg's own maintenance: remove_orphan_files and
expire_snapshots (real Spark, real Iceberg runtime) leave the sidecar alone, and a table with a
pointer stays loadable by pyiceberg (nothing custom in `statistics`)."""

from __future__ import annotations

import dataclasses
import os
import time
from urllib.parse import urlparse

import pytest

from pando_iceberg.storage import LayoutPointer, LayoutSidecar, layout_pointer, list_sidecars

NS = "pando_storage"
pytestmark = pytest.mark.spark


def _local(loc: str) -> str:
    return urlparse(loc).path if "://" in loc or loc.startswith("file:") else loc


def test_sidecar_survives_orphan_removal_and_snapshot_expiry(spark, catalog, lakehouse_cfg, sidecar):
    cat = lakehouse_cfg.catalog.name
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    spark.sql(f"DROP TABLE IF EXISTS {NS}.maint")
    spark.sql(f"CREATE TABLE {NS}.maint (id BIGINT, v STRING) USING iceberg")
    for i in range(3):
        spark.sql(f"INSERT INTO {NS}.maint VALUES ({i}, 'r{i}')")

    tbl = catalog.load_table(f"{NS}.maint")
    base = tbl.current_snapshot().snapshot_id
    sc = dataclasses.replace(sidecar, table_uuid=str(tbl.metadata.table_uuid), base_snapshot_id=base)
    path, size = sc.write(tbl.io, tbl.location())
    assert not path.startswith(tbl.location().rstrip("/") + "/")
    with tbl.transaction() as tx:
        tx.set_properties(LayoutPointer(sc.layout_id, sc.file_name, base, base).to_properties())

    orphan = os.path.join(_local(tbl.location()), "data", "orphan-planted.parquet")
    with open(orphan, "wb") as f:
        f.write(b"not referenced by metadata")
    time.sleep(0.05)

    jvm = spark._jvm
    # Spark's catalog caches the table: without a refresh it still sees the metadata from before
    # pyiceberg's property commit, and the orphan action then deletes the *current* metadata.json.
    spark.sql(f"REFRESH TABLE {NS}.maint")
    jtable = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, f"{cat}.{NS}.maint")
    jtable.refresh()
    assert dict(jtable.properties()).get("pando.layout-id") == sc.layout_id
    actions = jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
    later = int(time.time() * 1000) + 60_000
    shuffle = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")  # the action joins listings with metadata
    try:
        results = []
        for explicit in (False, True, "prefix"):
            action = actions.deleteOrphanFiles(jtable).olderThan(later)
            if explicit:
                action = action.location(jtable.location())
            if explicit == "prefix":  # FileIO prefix listing instead of directory listing
                action = action.usePrefixListing(True)
            results.append((explicit, [str(p) for p in action.execute().orphanFileLocations()]))
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", shuffle)
    for explicit, removed in results:
        assert all(".pando/" not in p for p in removed), removed
        if not explicit:
            assert any(p.endswith("orphan-planted.parquet") for p in removed), removed  # the action did run
    assert not os.path.exists(orphan)

    spark.sql(f"CALL {cat}.system.expire_snapshots(table => '{NS}.maint', "
              f"older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)")
    assert spark.sql(f"SELECT count(*) FROM {NS}.maint.snapshots").collect()[0][0] == 1

    assert os.path.getsize(_local(path)) == size
    tbl = catalog.load_table(f"{NS}.maint")  # still loadable by pyiceberg
    assert not tbl.metadata.statistics
    ptr = layout_pointer(tbl.properties)
    assert ptr is not None and ptr.layout_id == sc.layout_id
    back = LayoutSidecar.read(tbl.io, ptr.sidecar_location(tbl.location()), expected_layout_id=ptr.layout_id,
                              expected_table_uuid=tbl.metadata.table_uuid)
    assert back == sc
    assert [f.location for f in list_sidecars(tbl.io, tbl.location())] == [path]
    assert spark.sql(f"SELECT count(*) FROM {NS}.maint").collect()[0][0] == 3


# ---- a real Pando layout under Iceberg's own maintenance and schema / spec evolution --------
# One laid-out table (real Spark rewrite); each test applies one kind of maintenance to it (in
# file order), then checks: pruned == unpruned (pyiceberg and Spark), whether the layout still
# prunes or why it does not, and what layout_health recommends.

EVO = f"{NS}.evo"
EVO_ROWS = """SELECT id, CASE WHEN id % 13 = 0 THEN NULL ELSE (id % 200) - 50.0 END AS x,
  concat(char(65 + id % 26), cast(id % 7 AS STRING)) AS s, CAST(id % 500 AS INT) AS n
FROM range({lo}, {hi})"""
EVO_WORKLOAD = [f"SELECT * FROM {EVO} WHERE x < 0", f"SELECT * FROM {EVO} WHERE x >= 100",
                f"SELECT * FROM {EVO} WHERE s LIKE 'B%'", f"SELECT * FROM {EVO} WHERE n < 60",
                f"SELECT * FROM {EVO} WHERE s >= 'P' AND n >= 400"]


@pytest.fixture(scope="module")
def evo(spark, catalog, lakehouse_cfg):
    from pando_iceberg.procedures import ProcedureContext
    from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table

    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    spark.sql(f"DROP TABLE IF EXISTS {EVO}")
    spark.sql(f"CREATE TABLE {EVO} USING iceberg TBLPROPERTIES ('format-version'='2') AS "
              + EVO_ROWS.format(lo=0, hi=3000))
    spark.sql(f"INSERT INTO {EVO} " + EVO_ROWS.format(lo=3000, hi=6000))
    rewrite_table(spark, EVO, EVO_WORKLOAD, RewriteOptions(k=2, sample_rate=1.0, min_block_rows=400, seed=5),
                  io_properties=lakehouse_cfg.pyiceberg_properties())
    return ProcedureContext(lakehouse_cfg, catalog, lambda: spark)


def _evo_check(spark, catalog, flt):
    """pyiceberg pruned rows == Spark pruned rows == plain Spark rows; the plan's explain record."""
    from pando_iceberg.planner import plan_scan, read_arrow
    from pando_iceberg.spark.pruned import pruned_table

    spark.sql(f"REFRESH TABLE {EVO}")
    want = sorted(spark.sql(f"SELECT id FROM {EVO} WHERE {flt}").collect())
    with pruned_table(spark, catalog, EVO, flt) as (df, plan):
        assert sorted(df.select("id").collect()) == want, flt
    table = catalog.load_table(EVO)
    got = read_arrow(table, plan_scan(table, flt), columns=("id",)).column(0).to_pylist()
    assert sorted(got) == [r[0] for r in want], flt
    return plan.explain


def _health(ctx):
    from pando_iceberg.procedures import call

    return dict(call(ctx, f"CALL pando.system.layout_health(table => '{EVO}')").rows)


def _cat(lakehouse_cfg):
    return lakehouse_cfg.catalog.name


def test_rewrite_manifests_and_expire_snapshots_keep_the_layout(spark, catalog, evo, lakehouse_cfg):
    spark.sql(f"CALL {_cat(lakehouse_cfg)}.system.rewrite_manifests(table => '{EVO}')")
    spark.sql(f"CALL {_cat(lakehouse_cfg)}.system.expire_snapshots(table => '{EVO}', "
              "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)")
    assert spark.sql(f"SELECT count(*) FROM {EVO}.snapshots").collect()[0][0] == 1  # the layout's snapshot is gone
    for flt in ("x < 0", "s LIKE 'B%'", "n < 60 AND x IS NULL"):
        ex = _evo_check(spark, catalog, flt)
        assert ex.fallback_reason is None
    ex = _evo_check(spark, catalog, "x < 0")
    assert ex.blocks_chosen < ex.blocks_total and not ex.notes  # the layout still prunes
    health = _health(evo)
    assert health["status"] == "ok" and health["files_outside_layout"] == "0", health


def test_add_and_widen_columns_keep_the_layout(spark, catalog, evo):
    spark.sql(f"ALTER TABLE {EVO} ADD COLUMN extra STRING")
    spark.sql(f"ALTER TABLE {EVO} ALTER COLUMN n TYPE BIGINT")  # int -> long: same field id, same values
    for flt in ("extra IS NULL AND n < 60", "n < 60", "extra = 'a'", "n >= 400 AND s >= 'P'"):
        ex = _evo_check(spark, catalog, flt)
        assert ex.fallback_reason is None
    ex = _evo_check(spark, catalog, "n < 60")
    assert ex.blocks_chosen < ex.blocks_total and not ex.notes
    assert _health(evo)["status"] == "ok"


def test_rename_and_drop_of_cut_columns_never_give_wrong_results(spark, catalog, evo):
    """A cut names its column; after a rename the name may later denote another column (a new
    one added under the old name, all NULL in the laid-out files). The planner must not prune
    the new column's rows by the old column's cut."""
    spark.sql(f"ALTER TABLE {EVO} RENAME COLUMN s TO s_old")
    for flt in ("s_old LIKE 'B%'", "s_old >= 'P' AND n >= 400", "x < 0"):
        _evo_check(spark, catalog, flt)
    spark.sql(f"ALTER TABLE {EVO} ADD COLUMN s STRING")  # a new column under the cut's column name
    spark.sql(f"INSERT INTO {EVO} VALUES (900001, 1.0, 'B1', 1, NULL, 'B-new')")
    for flt in ("s IS NULL", "s LIKE 'B%'", "NOT (s LIKE 'B%')", "s >= 'P' OR s IS NULL", "s_old LIKE 'B%'"):
        _evo_check(spark, catalog, flt)
    ex = _evo_check(spark, catalog, "s IS NULL")
    assert ex.fallback_reason is None and any("cuts on s ignored" in n for n in ex.notes), ex.notes
    spark.sql(f"ALTER TABLE {EVO} DROP COLUMN x")
    spark.sql(f"ALTER TABLE {EVO} ADD COLUMN x DOUBLE")  # the same again for x, with the same type
    for flt in ("x IS NULL", "x < 0", "x IS NULL AND n < 60", "NOT (x >= 100)"):
        _evo_check(spark, catalog, flt)
    ex = _evo_check(spark, catalog, "n < 60")  # n's cuts are untouched: they still prune
    assert ex.fallback_reason is None and ex.blocks_chosen < ex.blocks_total
    assert any("cuts on s, x ignored" in n for n in ex.notes), ex.notes
    health = _health(evo)
    assert health["status"] == "degraded" and "cuts on s, x no longer apply" in health["recommendation"], health


def test_partition_spec_evolution_new_files_are_read_and_health_says_relayout(spark, catalog, evo, lakehouse_cfg):
    spark.sql(f"ALTER TABLE {EVO} ADD PARTITION FIELD bucket(4, id)")
    spark.sql(f"INSERT INTO {EVO} (id, s_old, n, extra, s, x) "
              "SELECT id, 'Q', id % 500, NULL, NULL, NULL FROM range(10000, 14000)")
    for flt in ("n < 60", "id >= 10000 AND n < 10", "s_old = 'Q'"):
        ex = _evo_check(spark, catalog, flt)
        assert ex.fallback_reason is None and ex.files_outside_layout > 0
    health = _health(evo)
    assert health["status"] == "degraded" and "outside the layout" in health["recommendation"], health
    assert health["recommendation"].startswith("re-layout"), health


def test_icebergs_rewrite_and_orphan_removal_leave_a_stale_layout_reported(spark, catalog, evo, lakehouse_cfg):
    cat = _cat(lakehouse_cfg)
    spark.sql(f"CALL {cat}.system.rewrite_data_files(table => '{EVO}', "
              "options => map('rewrite-all', 'true', 'min-input-files', '1'))")
    spark.sql(f"CALL {cat}.system.expire_snapshots(table => '{EVO}', older_than => TIMESTAMP '2999-01-01 00:00:00', "
              "retain_last => 1)")
    jvm = spark._jvm  # Iceberg's action (the procedure refuses intervals under 24 hours)
    jtable = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, f"{cat}.{EVO}")
    removed = jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession) \
        .deleteOrphanFiles(jtable).olderThan(int(time.time() * 1000) + 60_000).execute().orphanFileLocations()
    assert all(".pando/" not in str(p) for p in removed)
    for flt in ("n < 60", "s LIKE 'B%'"):
        ex = _evo_check(spark, catalog, flt)
        assert ex.fallback_reason and "stale" in ex.fallback_reason, ex.fallback_reason
    health = _health(evo)
    assert health["status"] == "degraded" and "no live file belongs to the layout" in health["recommendation"], health
