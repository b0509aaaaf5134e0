"""A staged scan (``iceberg_jvm.staged_scan``) is split into tasks the way Iceberg's own scan of the
same files is: Iceberg's adaptive split size, not the table's fixed 128 MB (which made a pruned
scan of a few dozen MB one task on one core)."""

from __future__ import annotations

import pytest

from pando_iceberg.spark import iceberg_jvm as jv
from pando_iceberg.spark import jvm_staging

pytestmark = pytest.mark.spark

T = "stagedsplit.events"
FILES = 12


@pytest.fixture(scope="module")
def small_files(spark):
    """A table of FILES small files: Iceberg weighs each at its open cost (4 MB), so its own scan
    of them is several 16 MB task groups, and one group at 128 MB."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS stagedsplit")
    spark.sql(f"DROP TABLE IF EXISTS {T}")
    spark.sql(f"CREATE TABLE {T} (id bigint, v double) USING iceberg")
    for i in range(FILES):
        spark.range(i * 100, (i + 1) * 100, numPartitions=1).selectExpr("id", "id * 0.5 AS v") \
            .writeTo(T).append()
    return T


def _partitions(df) -> int:
    """Input partitions of the plan's one Iceberg scan (``executed_nodes``: the final and the
    initial plan, each scan once by its plan id)."""
    found = {int(n.id()): int(n.inputPartitions().size())
             for n, _ in jv.executed_nodes(df) if n.nodeName().startswith("BatchScan")}
    assert len(found) == 1, found
    return next(iter(found.values()))


@pytest.mark.parametrize("in_jvm", [True, False])
@pytest.mark.parametrize("adaptive", [True, False])
def test_a_staged_scan_has_the_tasks_icebergs_own_scan_has(spark, small_files, monkeypatch, in_jvm, adaptive):
    if not in_jvm:
        monkeypatch.setattr(jvm_staging, "task_set_view", lambda *a: False)
    spark.sql(f"ALTER TABLE {T} SET TBLPROPERTIES ('read.split.adaptive-size.enabled'='{str(adaptive).lower()}')")
    jtable = jv.load_table(spark, T)
    snapshot = int(jtable.currentSnapshot().snapshotId())
    paths = {r.file_path for r in spark.sql(f"SELECT file_path FROM {T}.files").collect()}
    assert len(paths) == FILES
    own = _partitions(spark.table(T))
    with jv.staged_scan(spark, jtable, T, snapshot, paths, view="staged_split_v") as got:
        staged = spark.table("staged_split_v") if isinstance(got, str) else got  # the set's id: the view's
        assert isinstance(got, str) == in_jvm
        assert _partitions(staged) == own
        assert staged.count() == FILES * 100
    jv.drop_temp_views(spark, ["staged_split_v"])
    if adaptive:
        assert own > 1  # the case the fixed split size got wrong: one task for all the files
    else:
        assert own == 1


@pytest.mark.parametrize("adaptive", [True, False])
def test_a_swapped_relation_has_the_tasks_icebergs_own_scan_has(spark, small_files, adaptive):
    """The relation of a query analysed ahead, swapped onto a staged set
    (``iceberg_jvm.swapped_plan``), takes the split size Iceberg's own scan of the files takes, as
    the staged set's view does."""
    from pyspark.sql import DataFrame

    spark.sql(f"ALTER TABLE {T} SET TBLPROPERTIES ('read.split.adaptive-size.enabled'='{str(adaptive).lower()}')")
    jtable = jv.load_table(spark, T)
    snapshot = int(jtable.currentSnapshot().snapshotId())
    paths = {r.file_path for r in spark.sql(f"SELECT file_path FROM {T}.files").collect()}
    own = _partitions(spark.table(T))
    with jv.staged_scan(spark, jtable, T, snapshot, paths, view="staged_split_unused", view_later=True) as set_id:
        assert isinstance(set_id, str)
        analysed = spark._jsparkSession.sql(f"SELECT * FROM {T}")
        swapped = jv.swapped_plan(spark, analysed, [(str(jtable.uuid()), jv.table_metadata_location(jtable), set_id)])
        df = DataFrame(swapped, spark)
        assert _partitions(df) == own and (own > 1 if adaptive else own == 1)
        assert df.count() == FILES * 100
    assert not spark._jsparkSession.sessionState().catalog().getTempView("staged_split_unused").isDefined()


def test_planned_partitions_in_one_call_counts_what_the_node_walk_counts(spark, small_files):
    """``iceberg_jvm.planned_partitions``: the input partitions of every Iceberg scan of the executed
    plan, built without running it; the one JVM call counts what the py4j walk counts (a self-join:
    both scans), and what each scan's own node says."""
    spark.sql(f"ALTER TABLE {T} SET TBLPROPERTIES ('read.split.adaptive-size.enabled'='true')")
    one = spark.table(T)
    own = _partitions(one)
    assert jv.planned_partitions(one) == jv.planned_partitions(one, in_jvm=False) == own > 1
    pair = spark.sql(f"SELECT a.id FROM {T} a JOIN {T} b ON a.id = b.id + 1")
    assert jv.planned_partitions(pair) == jv.planned_partitions(pair, in_jvm=False) == 2 * own
    assert jv.planned_partitions(spark.range(5)) == 0  # no Iceberg scan
