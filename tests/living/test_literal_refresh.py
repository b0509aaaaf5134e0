"""Dimension inserts, deletes and updates vs a fact table laid out with a literal cut: pruning is
never wrong (pyiceberg and Spark), and refresh_literal_cuts makes pruning of new rows effective."""

from __future__ import annotations

import pytest

from pando_iceberg.maintenance.literal_cuts import refresh_literal_cuts
from pando_iceberg.planner import plan_scan
from pando_iceberg.procedures import call
from pando_iceberg.spark.incremental import current_layout, incremental_rewrite
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table
from pando_iceberg.tpch import copy_table

from _living import check_pruning

pytestmark = pytest.mark.spark

F, D = "living.rf_li", "living.rf_ord"
URGENT = f"l_orderkey IN (SELECT o_orderkey FROM {D} WHERE o_orderpriority = '1-URGENT')"
FILTERS = [
    "l_shipdate < date '1993-06-01'",
    URGENT,
    f"l_orderkey IN (SELECT o_orderkey FROM {D} WHERE o_orderpriority = '1-URGENT') AND l_quantity > 30",
    f"l_orderkey IN (SELECT o_orderkey FROM {D} WHERE o_orderpriority <> '1-URGENT')",
    f"l_orderkey IN (SELECT o_orderkey FROM {D} WHERE o_orderdate >= date '1996-06-01')",
]
WORKLOAD = [
    f"SELECT count(*) FROM {F} JOIN {D} ON l_orderkey = o_orderkey WHERE o_orderpriority = '1-URGENT'",
    f"SELECT count(*) FROM {F} JOIN {D} ON l_orderkey = o_orderkey WHERE o_orderpriority = '1-URGENT' AND l_quantity > 30",
    f"SELECT count(*) FROM {F} WHERE l_shipdate < date '1993-06-01'",
]
OLD = "o_orderdate < date '1997-01-01'"


def _urgent(items, cut_of):
    """The one item about the '1-URGENT' literal cut (the workload names that priority; the
    learning draws may add cuts on others)."""
    found = [i for i in items if "'1-URGENT'" in cut_of(i) and "<>" not in cut_of(i)]
    assert len(found) == 1, [cut_of(i) for i in items]
    return found[0]


def _cut_info(spark, io):
    layout = current_layout(spark, F, io).layout
    return _urgent([c for c in layout.cuts if hasattr(c, "origin")], lambda c: c.key)


@pytest.fixture(scope="module")
def laid_out(spark, tpch, lakehouse_cfg):
    """rf_ord = orders before 1997; rf_li = their lineitems (referential integrity), laid out
    with a literal cut on o_orderpriority = '1-URGENT'."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS living")
    copy_table(spark, "tpch.orders", D)
    spark.sql(f"DELETE FROM {D} WHERE NOT ({OLD})")
    spark.sql(f"DROP TABLE IF EXISTS {F}")
    spark.sql(f"CREATE TABLE {F} USING iceberg TBLPROPERTIES ('format-version'='2') AS "
              f"SELECT l.* FROM tpch.lineitem l LEFT SEMI JOIN {D} o ON l.l_orderkey = o.o_orderkey")
    rewrite_table(spark, F, WORKLOAD, RewriteOptions(k=1, sample_rate=0.5, min_block_rows=2000, seed=5),
                  io_properties=lakehouse_cfg.pyiceberg_properties())
    return lakehouse_cfg.pyiceberg_properties()


def _blocks(catalog, flt) -> int:
    ex = plan_scan(catalog.load_table(F), flt).explain
    assert ex.fallback_reason is None, ex.fallback_reason
    return ex.blocks_chosen


def test_dimension_insert_then_refresh_then_incremental(spark, catalog, ctx, laid_out):
    io = laid_out
    before = _cut_info(spark, io)
    # The rewrite recorded the dimension's snapshot its keys were read at (item 0 of issue 9).
    dim_snapshot = spark.sql(f"SELECT snapshot_id FROM {D}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]
    assert before.origin.snapshot_id == dim_snapshot
    urgent_blocks = _blocks(catalog, URGENT)
    # Dimension insert: the 1997+ orders (new keys), then their lineitems (RI holds).
    spark.sql(f"INSERT INTO {D} SELECT * FROM tpch.orders WHERE NOT ({OLD})")
    check_pruning(spark, catalog, F, FILTERS)
    # The query's key set now has urgent keys the stored set lacks: both sides are read.
    stale_blocks = _blocks(catalog, URGENT)
    assert stale_blocks > urgent_blocks
    spark.sql(f"INSERT INTO {F} SELECT l.* FROM tpch.lineitem l JOIN tpch.orders o ON l.l_orderkey = o.o_orderkey "
              f"WHERE NOT ({OLD})")
    check_pruning(spark, catalog, F, FILTERS)

    r = call(ctx, f"CALL pando.system.refresh_literal_cuts(table => '{F}')")
    row = _urgent(r.rows, lambda r: r[0])
    cut, dim, mode, from_snap, to_snap, keys_before, added, removed, stale, partition = row
    # Only the appended dimension rows are read: the origin snapshot is known since the rewrite.
    assert (dim, mode, from_snap, removed, stale, partition) == (D, "incremental", dim_snapshot, 0, 0, None)
    assert keys_before == len(before.keys) and added > 0
    after = _cut_info(spark, io)
    assert len(after.keys) == keys_before + added and after.origin.snapshot_id == to_snap
    assert _blocks(catalog, URGENT) == urgent_blocks  # the query's keys ⊆ the stored set again
    check_pruning(spark, catalog, F, FILTERS)

    # The new lineitems are laid out with the refreshed set: urgent ones on the TRUE side.
    r = incremental_rewrite(spark, F, min_block_rows=1, io_properties=io)
    assert r.committed and r.rows_laid_out > 0
    assert _blocks(catalog, URGENT) == urgent_blocks
    urgent = plan_scan(catalog.load_table(F), URGENT).explain
    assert urgent.files_outside_layout == 0 and urgent.pando_files < urgent.total_files
    check_pruning(spark, catalog, F, FILTERS)

    # A second insert: only the appended rows are read (incremental mode).
    spark.sql(f"INSERT INTO {D} SELECT o_orderkey + 10000000, o_custkey, o_orderstatus, o_totalprice, o_orderdate, "
              f"o_orderpriority, o_clerk, o_shippriority, o_comment FROM tpch.orders WHERE o_orderkey < 200")
    row = _urgent([c.row() for c in refresh_literal_cuts(spark, F, io).cuts], lambda r: r[0])
    assert row[2] == "incremental" and row[6] > 0 and row[8] == 0
    check_pruning(spark, catalog, F, FILTERS, spark_too=False)


def test_dimension_delete_and_update_never_make_pruning_wrong(spark, catalog, laid_out):
    io = laid_out
    urgent_laid_out = [r[0] for r in spark.sql(
        f"SELECT DISTINCT o_orderkey FROM {D} o LEFT SEMI JOIN {F} l ON l.l_orderkey = o.o_orderkey "
        f"WHERE o_orderpriority = '1-URGENT' ORDER BY 1 LIMIT 40").collect()]
    other_laid_out = [r[0] for r in spark.sql(
        f"SELECT DISTINCT o_orderkey FROM {D} o LEFT SEMI JOIN {F} l ON l.l_orderkey = o.o_orderkey "
        f"WHERE o_orderpriority = '5-LOW' ORDER BY 1 LIMIT 40").collect()]
    # Delete dimension rows whose fact rows stay (RI broken on purpose: the hard case).
    spark.sql(f"DELETE FROM {D} WHERE o_orderkey IN ({', '.join(map(str, urgent_laid_out[:20]))})")
    check_pruning(spark, catalog, F, FILTERS)
    # Update: non-urgent orders with laid-out lineitems become urgent, urgent ones become low.
    spark.sql(f"UPDATE {D} SET o_orderpriority = '1-URGENT' WHERE o_orderkey IN ({', '.join(map(str, other_laid_out))})")
    spark.sql(f"UPDATE {D} SET o_orderpriority = '5-LOW' WHERE o_orderkey IN ({', '.join(map(str, urgent_laid_out[20:]))})")
    check_pruning(spark, catalog, F, FILTERS)

    stored = _cut_info(spark, io).keys
    res = refresh_literal_cuts(spark, F, io)
    info = _urgent(res.cuts, lambda c: c.cut)
    # Every changed key has laid-out fact rows: its membership is kept (stale but exact).
    assert info.mode == "full" and info.keys_kept_stale == 20 + len(other_laid_out) + len(urgent_laid_out[20:])
    assert info.keys_added == info.keys_removed == 0
    assert set(_cut_info(spark, io).keys) == set(stored)
    check_pruning(spark, catalog, F, FILTERS)

    # Nothing changed since: the refresh is a no-op.
    again = refresh_literal_cuts(spark, F, io)
    assert not again.changed and {c.mode for c in again.cuts} == {"unchanged"}


def test_control_flipping_keys_of_laid_out_rows_would_make_pruning_wrong(spark, catalog, laid_out, monkeypatch):
    """Control for the check above: a refresh that skips the laid-out-rows test (flips every
    changed key) makes the pruned read of the fact table miss rows."""
    import pando_iceberg.maintenance.literal_cuts as lc
    from pando_iceberg.planner import read_arrow

    keys = [r[0] for r in spark.sql(
        f"SELECT DISTINCT o_orderkey FROM {D} o LEFT SEMI JOIN {F} l ON l.l_orderkey = o.o_orderkey "
        f"WHERE o_orderpriority = '4-NOT SPECIFIED' ORDER BY 1 LIMIT 30").collect()]
    spark.sql(f"UPDATE {D} SET o_orderpriority = '1-URGENT' WHERE o_orderkey IN ({', '.join(map(str, keys))})")
    monkeypatch.setattr(lc, "_keys_in_laid_out_rows", lambda *a, **k: {g: a[-1][:0] for g in a[3]})
    info = _urgent(refresh_literal_cuts(spark, F, laid_out).cuts, lambda c: c.cut)
    assert info.keys_added >= len(keys) and info.keys_kept_stale == 0
    table = catalog.load_table(F)
    pruned, full = plan_scan(table, URGENT), plan_scan(table, URGENT, use_layout=False)
    assert read_arrow(table, pruned).num_rows < read_arrow(table, full).num_rows
