"""Incremental layout of appended rows: rewrite_data_files(strategy => 'pando',
options => map('mode', 'incremental')) — new files only, old blocks untouched, one replace
commit, carry-over of small per-block shares; pruned == unpruned after every change."""

from __future__ import annotations

import numpy as np
import pytest

from pando_iceberg.planner import plan_scan
from pando_iceberg.procedures import call
from pando_iceberg.spark.incremental import current_layout, incremental_rewrite
from pando_iceberg.spark.rewrite import PandoRewriteError, RewriteOptions, collect_arrow, rewrite_table
from pando_iceberg.tpch import copy_table

from _living import FILTERS, WORKLOAD, check_pruning, checksum, snapshots

pytestmark = pytest.mark.spark

T = "living.li"
LATE = "l_shipdate >= date '1997-01-01'"


def _incremental(ctx, **options) -> tuple:
    opts = ", ".join(f"'{k}', '{v}'" for k, v in {"mode": "incremental", **options}.items())
    r = call(ctx, f"CALL pando.system.rewrite_data_files(table => '{T}', strategy => 'pando', options => map({opts}))")
    return r.rows[0], r.notes


@pytest.fixture(scope="module")
def living(spark, tpch, lakehouse_cfg):
    """living.ord (orders, with its identifier field) and living.li = lineitem before 1997,
    laid out with k=2 from a workload with a join-induced cut on living.ord."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS living")
    copy_table(spark, "tpch.orders", "living.ord")
    spark.sql(f"DROP TABLE IF EXISTS {T}")
    spark.sql(f"CREATE TABLE {T} USING iceberg TBLPROPERTIES ('format-version'='2') AS "
              f"SELECT * FROM tpch.lineitem WHERE NOT ({LATE})")
    r = rewrite_table(spark, T, WORKLOAD, RewriteOptions(k=2, sample_rate=0.5, min_block_rows=3000, seed=3),
                      io_properties=lakehouse_cfg.pyiceberg_properties())
    assert any(hasattr(c, "origin") for c in current_layout(spark, T, lakehouse_cfg.pyiceberg_properties()).layout.cuts)
    return r


def test_appends_then_incremental_layout(spark, catalog, ctx, living, lakehouse_cfg):
    io = lakehouse_cfg.pyiceberg_properties()
    first = current_layout(spark, T, io)
    old_paths = first.layout_paths
    # A nightly batch with later dates (out of distribution) in two files.
    spark.sql(f"INSERT INTO {T} SELECT * FROM tpch.lineitem WHERE {LATE} AND l_orderkey % 2 = 0")
    spark.sql(f"INSERT INTO {T} SELECT * FROM tpch.lineitem WHERE {LATE} AND l_orderkey % 2 = 1")
    before_files = check_pruning(spark, catalog, T)
    before_sum, before_snaps = checksum(spark, T), snapshots(spark, T)

    row, notes = _incremental(ctx, **{"min-block-rows": "500"})
    rewritten, added, _, failed, layout_id, blocks, snapshot_id = row
    assert (rewritten, failed) == (2, 0) and added >= 1 and layout_id != living.layout_id
    snaps = snapshots(spark, T)
    assert snaps[:-1] == before_snaps and snaps[-1] == (snapshot_id, "replace")  # exactly one commit
    assert checksum(spark, T) == before_sum
    now = current_layout(spark, T, io)
    live = {r.file_path for r in spark.sql(f"SELECT file_path FROM {T}.files").collect()}
    assert old_paths <= live  # old blocks' files never rewritten
    assert old_paths <= now.layout_paths and now.layout_paths - old_paths  # the map only grows
    assert now.sidecar.properties["pando.previous-layout-id"] == living.layout_id
    total = spark.sql(f"SELECT sum(record_count) FROM {T}.files").collect()[0][0]
    assert int(now.layout.block_rows.sum()) == total - _carried(spark, T, now)
    after_files = check_pruning(spark, catalog, T)
    # The appended files were always read; now their rows sit in blocks the trees can skip
    # (min/max alone cannot skip them for a dimension predicate: every file has urgent orders).
    assert all(after_files[f] <= before_files[f] for f in FILTERS), (before_files, after_files)
    assert after_files[FILTERS[3]] < before_files[FILTERS[3]], (before_files, after_files, notes)
    ex = plan_scan(catalog.load_table(T), FILTERS[0]).explain
    assert ex.fallback_reason is None and ex.files_outside_layout == _files_outside(spark, T, now)


def _carried(spark, name, cur) -> int:
    return sum(r.record_count for r in spark.sql(f"SELECT file_path, record_count FROM {name}.files").collect()
               if r.file_path not in cur.layout_paths)


def _files_outside(spark, name, cur) -> int:
    return sum(1 for r in spark.sql(f"SELECT file_path FROM {name}.files").collect() if r.file_path not in cur.layout_paths)


def test_small_shares_are_carried_over_then_laid_out(spark, catalog, ctx, living, lakehouse_cfg):
    io = lakehouse_cfg.pyiceberg_properties()
    # In-distribution rows spread over every block.
    spark.sql(f"INSERT INTO {T} SELECT * FROM tpch.lineitem WHERE NOT ({LATE}) AND l_orderkey % 16 = 5")
    cur = current_layout(spark, T, io)
    outside = [r.file_path for r in spark.sql(f"SELECT file_path FROM {T}.files").collect()
               if r.file_path not in cur.layout_paths]
    appended = collect_arrow(spark.sql(f"SELECT * FROM tpch.lineitem WHERE NOT ({LATE}) AND l_orderkey % 16 = 5"))
    counts = np.bincount(cur.layout.route(appended))  # how the stored layout routes this batch
    assert len(outside) >= 1 and counts.max() > 0

    # A minimum above every share: nothing committed, the rows stay outside (always read).
    snaps = snapshots(spark, T)
    r = incremental_rewrite(spark, T, min_block_rows=10**9, io_properties=io)
    assert not r.committed and r.rows_laid_out == 0 and "nothing committed" in r.notes[0]
    assert snapshots(spark, T) == snaps
    check_pruning(spark, catalog, T, spark_too=False)

    # A minimum between the smallest and the largest share: some blocks get new files, the
    # rest go to carry-over files outside the layout.
    shares = np.sort(np.unique(counts[counts > 0]))
    r = incremental_rewrite(spark, T, min_block_rows=int(shares[len(shares) // 2]) + 1 if len(shares) > 1 else 1,
                            io_properties=io)
    assert r.committed and r.rows_laid_out > 0 and r.rows_carried_over > 0, r.notes
    cur = current_layout(spark, T, io)
    assert _files_outside(spark, T, cur) >= 1 and _carried(spark, T, cur) == r.rows_carried_over
    check_pruning(spark, catalog, T)

    # The next run with a minimum of 1 lays out what was carried over.
    r2 = incremental_rewrite(spark, T, min_block_rows=1, io_properties=io)
    cur = current_layout(spark, T, io)
    assert r2.rows_carried_over == 0 and _files_outside(spark, T, cur) == 0
    assert r2.rows_read == r.rows_carried_over
    check_pruning(spark, catalog, T)


def test_failed_incremental_run_leaves_the_table_as_it_was(spark, catalog, living, lakehouse_cfg, monkeypatch):
    """A failed commit of an incremental run (files and sidecar already written) leaves the table
    exactly as it was: same snapshot, same properties, no new data file or sidecar; the next run
    then lays the rows out."""
    import os
    import re

    import pando_iceberg.spark.iceberg_jvm as jv

    io = lakehouse_cfg.pyiceberg_properties()
    spark.sql(f"INSERT INTO {T} SELECT * FROM tpch.lineitem WHERE {LATE} AND l_orderkey % 8 = 1")
    tbl = catalog.load_table(T)
    location = re.sub(r"^file:(//)?", "", tbl.location().rstrip("/"))

    def listing(d: str) -> list[str]:
        assert os.path.isdir(d), d
        return sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs)

    before = (tbl.current_snapshot().snapshot_id, dict(tbl.properties), listing(f"{location}/data"),
              listing(f"{location}.pando"), checksum(spark, T))
    assert any(f.startswith("pando-") for f in before[2]) and before[3]  # the layout's files and sidecars
    commit = jv.commit_replace

    def fail(*args, **kwargs):
        raise RuntimeError("injected: the catalog is unreachable")

    monkeypatch.setattr(jv, "commit_replace", fail)
    with pytest.raises(RuntimeError, match="injected"):
        incremental_rewrite(spark, T, min_block_rows=1, io_properties=io)
    tbl = catalog.load_table(T)
    assert (tbl.current_snapshot().snapshot_id, dict(tbl.properties), listing(f"{location}/data"),
            listing(f"{location}.pando"), checksum(spark, T)) == before
    monkeypatch.setattr(jv, "commit_replace", commit)
    r = incremental_rewrite(spark, T, min_block_rows=1, io_properties=io)
    assert r.committed and r.rows_carried_over == 0 and checksum(spark, T) == before[-1]
    assert _files_outside(spark, T, current_layout(spark, T, io)) == 0


def test_incremental_errors(spark, ctx, living, lakehouse_cfg):
    with pytest.raises(PandoRewriteError, match="option 'mode' must be one of full, incremental, got 'later'"):
        _incremental(ctx, mode="later")
    with pytest.raises(PandoRewriteError, match="do not apply to mode 'incremental'.*accepted: mode, min-block-rows"):
        _incremental(ctx, k="2")
    spark.sql("DROP TABLE IF EXISTS living.plain")
    spark.sql("CREATE TABLE living.plain (a INT) USING iceberg")
    spark.sql("INSERT INTO living.plain VALUES (1)")
    with pytest.raises(PandoRewriteError, match="has no Pando layout to extend"):
        incremental_rewrite(spark, "living.plain", io_properties=lakehouse_cfg.pyiceberg_properties())
    # Nothing outside the layout: a no-op.
    r = incremental_rewrite(spark, T, io_properties=lakehouse_cfg.pyiceberg_properties())
    assert not r.committed and r.rewritten_data_files_count == 0


def test_nightly_incremental_runbook(spark, catalog, ctx, living):
    from pathlib import Path

    from pando_iceberg.runner import run_script

    before = checksum(spark, T)
    spark.sql(f"INSERT INTO {T} SELECT * FROM tpch.lineitem WHERE {LATE} AND l_orderkey % 8 = 3")
    added = checksum(spark, T)[0] - before[0]
    text = (Path(__file__).resolve().parents[2] / "procedures" / "nightly_incremental.sql").read_text()
    results = run_script(ctx, text, {"table": T, "min_block_rows": "1", "max_rows_outside": "0.5", "retain_last": "10",
                                     "catalog": ctx.cfg.catalog.name})
    refresh, incremental, health = results[0][1], results[1][1], results[2][1]
    assert refresh.names[:3] == ["cut", "dim_table", "mode"] and len(refresh.rows) >= 1
    assert dict(zip(incremental.names, incremental.rows[0]))["rewritten_data_files_count"] == 1
    metrics = dict(health.rows)
    assert metrics["status"] == "ok" and metrics["files_outside_layout"] == "0", metrics
    assert checksum(spark, T)[0] == before[0] + added
    check_pruning(spark, catalog, T, spark_too=False)


def test_row_level_deletes_on_appended_files(spark, catalog, living, lakehouse_cfg):
    """Merge-on-read deletes on an appended file: the incremental run reads it with the deletes
    applied, and deletes on laid-out files stay in force."""
    spark.sql(f"ALTER TABLE {T} SET TBLPROPERTIES ('write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')")
    spark.sql(f"INSERT INTO {T} SELECT * FROM tpch.lineitem WHERE {LATE} AND l_orderkey % 8 = 5")
    spark.sql(f"DELETE FROM {T} WHERE {LATE} AND l_orderkey % 8 = 5 AND l_quantity < 25")  # appended rows
    spark.sql(f"DELETE FROM {T} WHERE l_orderkey % 97 = 1")  # rows of laid-out files too
    deletes = spark.sql(f"SELECT count(*) FROM {T}.delete_files").collect()[0][0]
    assert deletes >= 1
    before = checksum(spark, T)
    r = incremental_rewrite(spark, T, min_block_rows=1, io_properties=lakehouse_cfg.pyiceberg_properties())
    assert r.committed and r.rows_read > 0
    assert checksum(spark, T) == before
    check_pruning(spark, catalog, T)
