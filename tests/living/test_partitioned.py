"""Per-partition Pando layouts (issue 9, paper §7 two-level scheme) on a lineitem table
partitioned by months(l_shipdate): lay out all partitions, re-lay out one with `where`, appends
to an old and a new partition, incremental layout, Iceberg's own rewrite and snapshot expiry in
one partition; after each, every filter of a random workload reads the same rows pruned and
unpruned (pyiceberg planner and Spark)."""

from __future__ import annotations

import numpy as np
import pytest

from pando_iceberg.planner import plan_scan, read_arrow
from pando_iceberg.procedures import ProcedureError, call
from pando_iceberg.spark.pruned import run_sql
from pando_iceberg.spark.rewrite import PandoRewriteError, RewriteOptions, rewrite_table
from pando_iceberg.storage.partitions import PartitionedLayoutSidecar
from pando_iceberg.storage.paths import sidecar_path
from pando_iceberg.storage.pointer import layout_pointer

from pando_iceberg.tpch import copy_table

from _living import check_pruning

pytestmark = pytest.mark.spark

T = "living.pli"
RANGE = "l_shipdate >= date '1994-01-01' AND l_shipdate < date '1995-01-01'"
WL_FILTERS = [
    "l_quantity < 10",
    "l_quantity >= 40 AND l_discount > 0.05",
    "l_shipdate >= date '1994-03-01' AND l_shipdate < date '1994-05-01' AND l_returnflag = 'R'",
    "l_discount < 0.02",
]
D = "living.pord"  # orders: a join-induced literal cut per partition layout
URGENT = f"l_orderkey IN (SELECT o_orderkey FROM {D} WHERE o_orderpriority = '1-URGENT')"
WORKLOAD = [f"SELECT count(*) FROM {T} WHERE {f}" for f in WL_FILTERS] + [
    f"SELECT count(*) FROM {T} JOIN {D} ON l_orderkey = o_orderkey WHERE o_orderpriority = '1-URGENT'"]
OPTS = RewriteOptions(k=2, sample_rate=1.0, min_block_rows=150, seed=3)


def random_filters(seed: int, n: int = 10) -> list[str]:
    rng = np.random.default_rng(seed)
    out = ["l_quantity < 10", None, "l_returnflag = 'R' AND l_quantity >= 45", URGENT,
           f"l_orderkey IN (SELECT o_orderkey FROM {D} WHERE o_orderpriority <> '1-URGENT') AND l_quantity > 30"]
    for _ in range(n):
        m = int(rng.integers(1, 13))
        q = int(rng.integers(1, 50))
        d = round(float(rng.integers(0, 11)) / 100, 2)
        out.append(rng.choice([
            f"l_quantity >= {q} AND l_discount > {d}",
            f"l_shipdate >= date '1994-{m:02d}-10' AND l_quantity < {q}",
            f"l_discount <= {d} OR l_quantity = {q}",
            f"l_shipdate < date '1994-{m:02d}-01' OR l_shipdate >= date '1995-01-20'",
        ]))
    return out


def check(spark, catalog, filters) -> int:
    """check_pruning (pyiceberg, Spark pruned_table) plus every filter through Spark ``run_sql``
    against plain Spark SQL; returns the files the pruned plans read."""
    files = check_pruning(spark, catalog, T, filters)
    for flt in filters:
        sql = f"SELECT count(*), sum(l_extendedprice), max(l_comment) FROM {T}" + (f" WHERE {flt}" if flt else "")
        got = run_sql(spark, catalog, sql)
        assert [tuple(r) for r in got.rows] == [tuple(r) for r in spark.sql(sql).collect()], flt
    return sum(files.values())


def _sidecar(catalog):
    table = catalog.load_table(T)
    ptr = layout_pointer(table.properties)
    assert ptr.format_version == 2
    return PartitionedLayoutSidecar.read(table.io, sidecar_path(table.location(), ptr.sidecar))


def _explain(catalog, flt):
    return plan_scan(catalog.load_table(T), flt).explain


@pytest.fixture(scope="module")
def table(spark, tpch, lakehouse_cfg):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS living")
    spark.sql(f"DROP TABLE IF EXISTS {T}")
    copy_table(spark, "tpch.orders", D)
    spark.sql(f"CREATE TABLE {T} USING iceberg PARTITIONED BY (months(l_shipdate)) "
              f"TBLPROPERTIES ('format-version'='2') AS SELECT * FROM tpch.lineitem WHERE {RANGE}")
    spark.sql(f"INSERT INTO {T} SELECT * FROM tpch.lineitem WHERE {RANGE} AND l_quantity > 45")  # 2 files per month
    return lakehouse_cfg.pyiceberg_properties()


def test_bad_where_is_refused_by_name(spark, catalog, ctx, table):
    with pytest.raises(PandoRewriteError, match=r"names column\(s\) l_quantity that are not partition source columns"
                                                r".*accepted: a predicate on the partition source column\(s\) l_shipdate"):
        rewrite_table(spark, T, WORKLOAD, OPTS, io_properties=table, where="l_quantity < 3")
    with pytest.raises(PandoRewriteError, match="is not a valid SQL predicate"):
        rewrite_table(spark, T, WORKLOAD, OPTS, io_properties=table, where="l_shipdate >= (")
    with pytest.raises(PandoRewriteError, match="no partition of living.pli with live rows matches"):
        rewrite_table(spark, T, WORKLOAD, OPTS, io_properties=table, where="l_shipdate < date '1990-01-01'")
    with pytest.raises(ProcedureError, match="selects partitions, but tpch.orders is not partitioned"):
        call(ctx, "CALL pando.system.rewrite_data_files(table => 'tpch.orders', strategy => 'pando', "
                  "where => \"o_orderdate < date '1995-01-01'\")")
    with pytest.raises(ProcedureError, match="optimize_layout: table living.pli is partitioned"):
        call(ctx, f"CALL pando.system.optimize_layout(table => '{T}', workload => 'SELECT 1 FROM {T} WHERE l_quantity < 3')")
    assert layout_pointer(catalog.load_table(T).properties) is None  # nothing committed


def test_failed_rewrite_leaves_the_table_as_it_was(spark, catalog, table, monkeypatch):
    import os
    import re

    import pando_iceberg.spark.iceberg_jvm as jv

    def fail(*args, **kwargs):
        raise RuntimeError("injected: the catalog is unreachable")

    tbl = catalog.load_table(T)
    location = re.sub(r"^file:(//)?", "", tbl.location().rstrip("/"))  # "file:/..." or "file:///..."
    listing = lambda d: sorted(os.listdir(d)) if os.path.isdir(d) else []  # noqa: E731
    assert listing(f"{location}/data")  # the table's own files: the listing sees the data directory
    snapshot, data, sidecars = tbl.current_snapshot().snapshot_id, listing(f"{location}/data"), listing(f"{location}.pando")
    monkeypatch.setattr(jv, "commit_replace", fail)
    with pytest.raises(RuntimeError, match="injected"):
        rewrite_table(spark, T, WORKLOAD, OPTS, io_properties=table, where="l_shipdate < date '1994-03-01'")
    tbl = catalog.load_table(T)
    assert tbl.current_snapshot().snapshot_id == snapshot and layout_pointer(tbl.properties) is None
    assert listing(f"{location}/data") == data and listing(f"{location}.pando") == sidecars  # files and sidecar removed


def test_layout_all_then_one_partition(spark, catalog, ctx, table):
    filters = random_filters(1)
    before = sum(_explain(catalog, f).pando_rows for f in WL_FILTERS)
    r = rewrite_table(spark, T, WORKLOAD, OPTS, io_properties=table)
    assert len(r.partitions_laid_out) == 12 and r.partitions_kept == 0
    sc = _sidecar(catalog)
    assert sorted(sc.partitions) == [f"l_shipdate_month=1994-{m:02d}" for m in range(1, 13)]
    ex = _explain(catalog, "l_quantity < 10")
    assert ex.fallback_reason is None and ex.files_outside_layout == 0 and ex.blocks_chosen < ex.blocks_total
    assert ex.blocks_total == sum(e.layout.num_blocks for e in sc.partitions.values())
    literal = [c for e in sc.partitions.values() for c in e.layout.cuts if hasattr(c, "origin")]
    assert literal and all(c.origin.snapshot_id is not None for c in literal)  # join-induced cuts, per partition
    urgent = _explain(catalog, URGENT)
    assert urgent.fallback_reason is None and urgent.blocks_chosen < urgent.blocks_total
    # Each new file holds rows of one month (Iceberg's partition pruning on the new files).
    march = _explain(catalog, "l_shipdate >= date '1994-03-01' AND l_shipdate < date '1994-04-01'")
    assert march.iceberg_files == len(sc.partitions["l_shipdate_month=1994-03"].paths)
    check(spark, catalog, filters)
    after = sum(_explain(catalog, f).pando_rows for f in WL_FILTERS)
    assert after < 0.8 * before, (after, before)  # the workload reads fewer rows with the per-partition trees

    # Re-lay out March only (through the procedure): the other 11 layouts are kept byte for byte.
    kept = {n: e.sidecar_bytes for n, e in sc.partitions.items()}
    res = call(ctx, f"CALL pando.system.rewrite_data_files(table => '{T}', strategy => 'pando', "
                    f"where => \"l_shipdate >= date '1994-03-01' AND l_shipdate < date '1994-04-01'\", "
                    f"workload => '{WORKLOAD[0]}', options => map('k', '1', 'min-block-rows', '100', "
                    f"'sample-rate', '1.0'))")
    assert any("1 partition(s) laid out, 11 partition layout(s) kept" in n for n in res.notes)
    after = _sidecar(catalog)
    assert {n for n in kept if after.partitions[n].sidecar_bytes == kept[n]} == set(kept) - {"l_shipdate_month=1994-03"}
    assert after.partitions["l_shipdate_month=1994-03"].layout.k == 1
    check(spark, catalog, random_filters(2))


def test_appends_to_old_and_new_partitions(spark, catalog, table):
    spark.sql(f"INSERT INTO {T} SELECT * FROM tpch.lineitem WHERE l_shipdate >= date '1994-06-01' "
              f"AND l_shipdate < date '1994-06-15' AND l_quantity < 20")
    spark.sql(f"INSERT INTO {T} SELECT * FROM tpch.lineitem WHERE l_shipdate >= date '1995-01-01' "
              f"AND l_shipdate < date '1995-02-01'")
    ex = _explain(catalog, "l_quantity < 10")
    assert ex.files_outside_layout == 2  # one new file in June, one in the new month (no layout)
    check(spark, catalog, random_filters(3))
    # The new month gets a layout with `where`; June's appended file stays outside its layout.
    r = rewrite_table(spark, T, WORKLOAD, OPTS, io_properties=table, where="l_shipdate >= date '1995-01-01'")
    assert r.partitions_laid_out == ["l_shipdate_month=1995-01"] and r.partitions_kept == 12
    assert _explain(catalog, "l_quantity < 10").files_outside_layout == 1
    check(spark, catalog, random_filters(4))


def test_incremental_per_partition(spark, catalog, ctx, table):
    # Appends to two laid-out months and to a month without a layout (1995-02).
    spark.sql(f"INSERT INTO {T} SELECT * FROM tpch.lineitem WHERE l_shipdate >= date '1994-07-01' "
              f"AND l_shipdate < date '1994-08-01' AND l_quantity > 25")
    spark.sql(f"INSERT INTO {T} SELECT * FROM tpch.lineitem WHERE l_shipdate >= date '1994-09-01' "
              f"AND l_shipdate < date '1994-09-03'")
    spark.sql(f"INSERT INTO {T} SELECT * FROM tpch.lineitem WHERE l_shipdate >= date '1995-02-01' "
              f"AND l_shipdate < date '1995-03-01'")
    before = _sidecar(catalog)
    outside = _explain(catalog, None).files_outside_layout
    assert outside == 4  # June's earlier append + the three new files
    # No block gets that many rows: nothing committed, so no file counted as rewritten (it said 3).
    res = call(ctx, f"CALL pando.system.rewrite_data_files(table => '{T}', strategy => 'pando', "
                    "options => map('mode', 'incremental', 'min-block-rows', '1000000000'))")
    (row,) = res.rows
    assert row[0] == 0 and row[1] == 0 and any("nothing committed" in n for n in res.notes), (row, res.notes)
    res = call(ctx, f"CALL pando.system.rewrite_data_files(table => '{T}', strategy => 'pando', "
                    "options => map('mode', 'incremental', 'min-block-rows', '20'))")
    (row,) = res.rows
    assert row[1] > 0 and any("partition(s) extended" in n for n in res.notes), res.notes
    assert any("1 partition(s) without a layout left as they are (e.g. l_shipdate_month=1995-02)" in n
               for n in res.notes), res.notes
    after = _sidecar(catalog)
    changed = {n for n in before.partitions if after.partitions[n].sidecar_bytes != before.partitions[n].sidecar_bytes}
    assert {"l_shipdate_month=1994-06", "l_shipdate_month=1994-07"} <= changed <= {
        "l_shipdate_month=1994-06", "l_shipdate_month=1994-07", "l_shipdate_month=1994-09"}
    assert "l_shipdate_month=1995-02" not in after.partitions
    # July's new rows went into new files of July's blocks (the old blocks' files untouched).
    july = after.partitions["l_shipdate_month=1994-07"]
    assert july.paths > before.partitions["l_shipdate_month=1994-07"].paths
    ex = _explain(catalog, None)
    assert 1 <= ex.files_outside_layout < outside  # 1995-02 (no layout) and any carry-over files
    check(spark, catalog, random_filters(6))


def test_layout_health_per_partition_and_relayout_of_the_degraded(spark, catalog, ctx, table):
    # October doubles (a second copy of its rows): half of its rows are outside its layout.
    spark.sql(f"INSERT INTO {T} SELECT * FROM tpch.lineitem WHERE l_shipdate >= date '1994-10-01' "
              f"AND l_shipdate < date '1994-11-01'")
    res = call(ctx, f"CALL pando.system.layout_health(table => '{T}', max_rows_outside => 0.3)")
    by = {r[0]: r for r in res.rows}
    assert by["l_shipdate_month=1995-02"][1] == "no layout" and "no layout yet" in by["l_shipdate_month=1995-02"][8]
    assert by["l_shipdate_month=1994-10"][1] == "degraded" and 0.4 < by["l_shipdate_month=1994-10"][5] < 0.55
    assert "rows outside the layout" in by["l_shipdate_month=1994-10"][8]
    assert by["l_shipdate_month=1994-03"][1] == "ok" and by["l_shipdate_month=1994-03"][7] is not None
    assert [r[0] for r in res.rows if r[1] == "degraded"] == ["l_shipdate_month=1994-10"]
    star = by["*"]
    assert star[1] == "recommendation"
    call_sql = star[8].split(": ", 1)[1]
    assert call_sql == (f"CALL pando.system.rewrite_data_files(table => '{T}', strategy => 'pando', where => "
                        "\"(`l_shipdate` >= CAST('1994-10-01' AS DATE) AND `l_shipdate` < CAST('1994-11-01' AS DATE)) OR "
                        "(`l_shipdate` >= CAST('1995-02-01' AS DATE) AND `l_shipdate` < CAST('1995-03-01' AS DATE))\")")
    # The printed CALL re-lays out October and lays out the new February, nothing else (the
    # recorded workload is reused).
    before = _sidecar(catalog)
    out = call(ctx, call_sql)
    assert any("2 partition(s) laid out" in n for n in out.notes), out.notes
    after = _sidecar(catalog)
    assert {n for n in before.partitions if after.partitions[n].sidecar_bytes != before.partitions[n].sidecar_bytes} \
        == {"l_shipdate_month=1994-10"}
    assert set(after.partitions) - set(before.partitions) == {"l_shipdate_month=1995-02"}
    again = {r[0]: r for r in call(ctx, f"CALL pando.system.layout_health(table => '{T}', max_rows_outside => 0.3)").rows}
    assert again["l_shipdate_month=1994-10"][1] == "ok" and again["*"][1] == "ok", again
    described = call(ctx, f"CALL pando.system.describe_layout(table => '{T}')").rows
    assert sum(r[0] == "partition" for r in described) == 12 + 2  # 1994 + 1995-01, 1995-02
    check(spark, catalog, random_filters(7))


def test_iceberg_rewrite_and_expiry_in_one_partition(spark, catalog, lakehouse_cfg, table):
    cat = lakehouse_cfg.catalog.name
    spark.sql(f"CALL {cat}.system.rewrite_data_files(table => '{T}', strategy => 'binpack', "
              f"where => \"l_shipdate >= date '1994-02-01' AND l_shipdate < date '1994-03-01'\", "
              f"options => map('rewrite-all', 'true'))")
    spark.sql(f"REFRESH TABLE {T}")
    ex = _explain(catalog, "l_quantity < 10")
    assert ex.fallback_reason is None and ex.files_outside_layout >= 2  # February's binpacked file(s) + June's
    spark.sql(f"CALL {cat}.system.expire_snapshots(table => '{T}', retain_last => 1)")
    check(spark, catalog, random_filters(5))


def test_nightly_partitions_runbook(spark, catalog, ctx, table):
    from pathlib import Path

    from pando_iceberg.runner import run_script

    spark.sql(f"INSERT INTO {T} SELECT * FROM tpch.lineitem WHERE l_shipdate >= date '1995-03-01' "
              f"AND l_shipdate < date '1995-04-01'")  # a new month
    n = spark.sql(f"SELECT count(*) FROM {T}").first()[0]
    text = (Path(__file__).resolve().parents[2] / "procedures" / "nightly_partitions.sql").read_text()
    results = run_script(ctx, text, {"table": T, "min_block_rows": "20", "max_rows_outside": "0.3",
                                     "retain_last": "10", "catalog": ctx.cfg.catalog.name})
    refreshed = results[0][1]  # the orders did not change since the layouts: nothing to refresh
    assert refreshed.rows and {r[2] for r in refreshed.rows} == {"unchanged"}, refreshed.rows
    health = results[2][1]
    flagged = {r[0] for r in health.rows if r[1] in ("degraded", "no layout")}
    # The new March 1995 (February 1994's binpacked rows were laid out by the incremental step).
    assert "l_shipdate_month=1995-03" in flagged and "l_shipdate_month=1994-02" not in flagged, health.rows
    incremental = dict(zip(results[1][1].names, results[1][1].rows[0]))
    assert incremental["added_data_files_count"] > 0
    assert health.rows[-1][1] == "action" and "re-laid out" in health.rows[-1][8]
    after = {r[0]: r for r in call(ctx, f"CALL pando.system.layout_health(table => '{T}', max_rows_outside => 0.3)").rows}
    assert after["*"][1] == "ok" and after["l_shipdate_month=1995-03"][1] == "ok", after
    assert spark.sql(f"SELECT count(*) FROM {T}").first()[0] == n
    check(spark, catalog, random_filters(8))


def test_renamed_cut_column_after_a_partial_relayout(spark, catalog, table):
    """A cut's column renamed after some partitions were laid out: its cuts are ignored in every
    partition (each layout judged against its own base snapshot's schema), pruning stays exact."""
    spark.sql(f"ALTER TABLE {T} RENAME COLUMN l_quantity TO l_qty")
    try:
        t = catalog.load_table(T)
        for flt in ("l_qty < 10", "l_qty >= 40 AND l_discount > 0.05", "l_discount < 0.02"):
            pruned, full = plan_scan(t, flt), plan_scan(t, flt, use_layout=False)
            assert pruned.explain.fallback_reason is None
            assert read_arrow(t, pruned).num_rows == read_arrow(t, full).num_rows, flt
        assert any("l_quantity" in n for n in plan_scan(t, "l_qty < 10").explain.notes)
    finally:
        spark.sql(f"ALTER TABLE {T} RENAME COLUMN l_qty TO l_quantity")
