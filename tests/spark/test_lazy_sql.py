"""``pando_iceberg.spark.sql``: a lazy DataFrame over pruned scans, its notes, its lifetime; and
the JVM side of one planning per query (``iceberg_jvm.chosen_tasks`` with the filter pyiceberg
planned with, written by ``spark/jvm_filter.py``)."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pyarrow.parquet as pq
import pytest
from pyiceberg.expressions import (
    AlwaysTrue,
    And,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThan,
    LessThanOrEqual,
    NotEqualTo,
    NotNull,
    Or,
    StartsWith,
)
from pyspark.sql import DataFrame

import pando_iceberg.spark as pspark
from pando_iceberg import settings
from pando_iceberg.spark import iceberg_jvm as jv
from pando_iceberg.spark import jvm_classes, jvm_staging
from pando_iceberg.spark.jvm_filter import java_expression
from pando_iceberg.spark.pruned import PrunedDataFrame, run_sql
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table

pytestmark = pytest.mark.spark

T = "lazyq.orders"
FILTER_SQL = (f"SELECT o_orderkey, o_totalprice FROM {T} "
              "WHERE o_orderdate >= date '1994-01-01' AND o_orderdate < date '1994-04-01'")
JOIN_SQL = (f"SELECT c.c_mktsegment, count(*) AS n, sum(o.o_totalprice) AS s FROM {T} o JOIN tpch.customer c "
            "ON o.o_custkey = c.c_custkey WHERE o.o_orderdate < date '1993-01-01' GROUP BY c.c_mktsegment")


@pytest.fixture(scope="module")
def laid_out(spark, tpch, lakehouse_cfg):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lazyq")
    spark.sql(f"DROP TABLE IF EXISTS {T}")
    # row groups of ~16 KiB: the rewrite's files hold several, as large files do (one_row_group_each)
    spark.sql(f"CREATE TABLE {T} USING iceberg TBLPROPERTIES ('format-version'='2', "
              "'write.parquet.row-group-size-bytes'='16384') AS SELECT * FROM tpch.orders")
    workload = [f"SELECT count(*) FROM {T} WHERE o_orderdate >= date '{y}-{m:02d}-01' AND o_orderdate < date '{y}-{m + 2:02d}-01'"
                for y in range(1992, 1999) for m in (1, 4, 7, 10)]
    return rewrite_table(spark, T, workload, RewriteOptions(k=1, sample_rate=1.0, min_block_rows=1500, seed=3),
                         io_properties=lakehouse_cfg.pyiceberg_properties())


def _pando_views(spark):
    """Temporary views named like the ones pruned_sql creates (SHOW TABLES lists temp views too)."""
    return [r.tableName for r in spark.sql("SHOW TABLES IN lazyq").collect()
            if r.isTemporary and r.tableName.startswith("__pando_scan_")]


def _jobs(spark, group):
    return spark.sparkContext.statusTracker().getJobIdsForGroup(group)


def test_sql_is_lazy_pruned_and_equal(spark, catalog, laid_out):
    group = "pando-lazy-test"
    sc = spark.sparkContext
    previous = {k: sc.getLocalProperty(k) for k in ("spark.jobGroup.id", "spark.job.description")}
    sc.setJobGroup(group, "sql() must not run a job")
    try:
        df = pspark.sql(spark, FILTER_SQL, catalog=catalog)
        assert _jobs(spark, group) == [], "sql() ran a Spark job: it must only plan"
    finally:
        for key, value in previous.items():  # None removes the property again
            sc.setLocalProperty(key, value)
    with df:
        assert isinstance(df, PrunedDataFrame)
        e = df.pando.explains[T]
        assert e.used_layout and e.pando_files < e.total_files  # the trees pruned
        assert "Pando + Iceberg" in df.pando.notes()[0]
        plan_text = df._jdf.queryExecution().toString()
        assert "BatchScan" in plan_text and "__pando_scan_" not in plan_text.split("== Physical Plan ==")[-1]
        df.explain()  # prints, must not fail
        assert _pando_views(spark) == []  # views only lived while Spark analysed the query
        assert sorted(df.collect()) == sorted(spark.sql(FILTER_SQL).collect())
        read = jv.scan_metrics(df)
        # composable: a derived DataFrame runs while the handle is open
        assert df.where("o_totalprice > 100000").count() == spark.sql(FILTER_SQL).where("o_totalprice > 100000").count()
    assert df.pando.closed
    # staged scans report no file counts; the rows Spark's scan produced are those of the chosen files
    assert 0 < read["numOutputRows"] <= e.pando_rows < e.total_rows


def test_an_unqualified_name_is_read_in_the_current_namespace(spark, catalog, laid_out):
    """Qualified names skip asking Spark for its current database; an unqualified one still
    resolves there, pruned, and equal to Spark's own answer."""
    previous = spark.catalog.currentDatabase()
    spark.catalog.setCurrentDatabase("lazyq")
    try:
        sql = FILTER_SQL.replace(T, "orders")
        with pspark.sql(spark, sql, catalog=catalog) as df:
            e = df.pando.explains[T]
            assert e.used_layout and e.pando_files < e.total_files
            assert sorted(df.collect()) == sorted(spark.sql(FILTER_SQL).collect())
    finally:  # this session starts with no current namespace ('') in its Iceberg catalog
        spark.sql(f"USE {previous}" if previous else f"USE {spark.catalog.currentCatalog()}")


def test_a_temporary_view_named_like_a_table_is_read_as_spark_reads_it(spark, catalog, laid_out):
    """Spark reads an unqualified name as a temporary view when one has it, even where a table of
    the current namespace has the name too: the view is not planned, the rows are the view's."""
    previous = spark.catalog.currentDatabase()
    spark.catalog.setCurrentDatabase("lazyq")
    spark.sql(f"SELECT * FROM {T} WHERE o_orderkey < 3000").createOrReplaceTempView("orders")
    try:
        sql = FILTER_SQL.replace(T, "orders")
        want = sorted(spark.sql(sql).collect())
        with pspark.sql(spark, sql, catalog=catalog) as df:
            assert df.pando.plan.plans == {}
            assert sorted(df.collect()) == want
        assert 0 < len(want) < len(spark.sql(FILTER_SQL).collect())
    finally:
        spark.catalog.dropTempView("orders")
        spark.sql(f"USE {previous}" if previous else f"USE {spark.catalog.currentCatalog()}")


def test_closed_handle_releases_staged_tasks(spark, catalog, laid_out):
    with pspark.sql(spark, FILTER_SQL, catalog=catalog, stage="always") as df:
        n = df.count()
    assert n > 0 and _pando_views(spark) == []
    with pytest.raises(Exception):  # the staged task set was removed: the scan cannot be planned again
        df.count()
    df.pando.close()  # idempotent
    with pytest.raises(ValueError, match="stage must be one of auto, always"):
        pspark.sql(spark, FILTER_SQL, catalog=catalog, stage="sometimes")


def test_a_table_the_trees_prune_no_further_is_read_by_sparks_own_scan(spark, catalog, laid_out, monkeypatch):
    """Files of about b rows cut along the date: Iceberg's min/max already keeps exactly the
    blocks the trees choose for a date range, so 'auto' stages nothing when the chosen files hold
    more than the setting ``staging.maxBytes`` and several row groups each (Spark's own scan may skip some),
    reads the same files, and the DataFrame outlives its handle (it holds no staged task)."""
    from pando_iceberg.spark.pruned import one_row_group_each, prunes_beyond_iceberg

    monkeypatch.setenv("PANDO_STAGE_MAX_BYTES", "0")
    want = sorted(spark.sql(FILTER_SQL).collect())
    with pspark.sql(spark, FILTER_SQL, catalog=catalog) as df:
        (plan,) = df.pando.plan.plans.values()
        assert not prunes_beyond_iceberg(plan) and plan.explain.used_layout and not one_row_group_each(plan)
        assert sorted(df.collect()) == want
        files = jv.scan_metrics(df)
    assert sorted(df.collect()) == want  # Spark's own scan: nothing was staged, nothing released
    collected = run_sql(spark, catalog, FILTER_SQL)
    assert sorted(collected.rows) == want
    assert plan.explain.pando_files == plan.explain.iceberg_files < plan.explain.total_files
    for key in ("resultDataFiles", "totalDataFileSize"):  # the same files, read once each way
        assert files[key] == collected.scan_metrics[key] == (plan.explain.pando_files if key == "resultDataFiles"
                                                     else plan.explain.pando_bytes)


def test_small_chosen_files_are_read_through_their_staged_tasks(spark, catalog, laid_out, monkeypatch):
    """'auto' stages a table the trees prune no further than Iceberg when its tasks are a lookup
    in the JVM's task cache and its chosen files hold at most the setting ``staging.maxBytes`` (what Spark's
    own scan could skip inside them is bounded by that): the same rows, the same chosen files
    (the staged scan counts none of its own), and not one byte over the bound."""
    from pando_iceberg.spark import pruned

    want = sorted(spark.sql(FILTER_SQL).collect())
    with pspark.sql(spark, FILTER_SQL, catalog=catalog) as df:
        (plan,) = df.pando.plan.plans.values()
        table = catalog.load_table(T)
        assert not pruned.prunes_beyond_iceberg(plan) and pruned.in_task_cache(plan)
        assert 0 < plan.explain.pando_bytes <= settings.value("staging.maxBytes") and pruned.stages(plan, table)
        assert sorted(df.collect()) == want
        assert [m.get("resultDataFiles", 0) for _, m in jv.executed_scans(df)] == [0]  # staged: no planning
    monkeypatch.setenv("PANDO_STAGE_MAX_BYTES", str(plan.explain.pando_bytes))
    assert pruned.stages(plan, table)
    monkeypatch.setenv("PANDO_STAGE_MAX_BYTES", str(plan.explain.pando_bytes - 1))
    assert not pruned.stages(plan, table)


def test_files_of_one_row_group_each_are_read_through_their_staged_tasks(spark, catalog, laid_out, monkeypatch):
    """'auto' stages a table the trees prune no further than Iceberg, whatever its chosen files
    weigh, when each holds one row group (``one_row_group_each``: Spark's own scan could skip
    nothing inside them by statistics that the files' metrics did not decide): tpch.orders,
    written with Iceberg's default row-group size, has one row group a file; the laid-out copy,
    written with 16 KiB row groups, several. The same rows; the staged scan plans no file."""
    from pando_iceberg.spark import pruned

    monkeypatch.setenv("PANDO_STAGE_MAX_BYTES", "0")
    sql = FILTER_SQL.replace(T, "tpch.orders")
    want = sorted(spark.sql(sql).collect())
    with pspark.sql(spark, sql, catalog=catalog) as df:
        (plan,) = df.pando.plan.plans.values()
        assert not pruned.prunes_beyond_iceberg(plan) and pruned.in_task_cache(plan) and plan.explain.pando_bytes > 0
        assert all(len(t.file.split_offsets) == 1 for t in plan.tasks) and pruned.one_row_group_each(plan)
        assert pruned.stages(plan, catalog.load_table("tpch.orders"))
        assert sorted(df.collect()) == want
        assert [m.get("resultDataFiles", 0) for _, m in jv.executed_scans(df)] == [0]  # staged: no planning
    with pspark.sql(spark, FILTER_SQL, catalog=catalog) as laid:
        (plan,) = laid.pando.plan.plans.values()
        assert any(len(t.file.split_offsets) > 1 for t in plan.tasks) and not pruned.one_row_group_each(plan)
        assert not pruned.stages(plan, catalog.load_table(T))
    # the rewrite records each file's row groups as Iceberg's writers do: where each begins
    io = catalog.load_table(T).io
    for task in plan.tasks:
        with io.new_input(task.file.file_path).open() as f:
            meta = pq.ParquetFile(f).metadata
        starts = [meta.row_group(i).column(0).dictionary_page_offset if meta.row_group(i).column(0).has_dictionary_page
                  else meta.row_group(i).column(0).data_page_offset for i in range(meta.num_row_groups)]
        assert task.file.split_offsets == starts and starts[0] == 4  # after the magic "PAR1"


def test_a_table_the_query_only_joins_is_read_through_its_staged_tasks(spark, catalog, laid_out):
    """'auto' stages a table on which the query has no predicate of its own (customer, only
    joined): Spark's own scan would push nothing down to Iceberg, so the staged tasks (a lookup
    in the JVM's task cache) read the same files without Spark planning the table again. The
    rows equal Spark's; a partitioned table keeps Spark's scan (its runtime filtering)."""
    from pando_iceberg.spark.pruned import in_task_cache, prunes_beyond_iceberg, stages

    want = sorted(spark.sql(JOIN_SQL).collect())
    with pspark.sql(spark, JOIN_SQL, catalog=catalog) as df:
        plans = df.pando.plan.plans
        (name,) = [n for n in plans if n.endswith("customer")]
        customer = plans[name]
        assert customer.filter.is_true_expr() and not prunes_beyond_iceberg(customer) and in_task_cache(customer)
        assert stages(customer, catalog.load_table(name))
        assert sorted(df.collect()) == want
        scans = jv.executed_scans(df)
    # Spark's own Iceberg scan counts the files it planned; a staged scan counts none
    counted = [n for n, m in scans if m.get("resultDataFiles", 0) > 0]
    assert len(scans) == 2 and not any(n.endswith("customer") for n in counted), scans
    spark.sql("DROP TABLE IF EXISTS lazyq.customer_p")
    spark.sql("CREATE TABLE lazyq.customer_p USING iceberg PARTITIONED BY (c_mktsegment) AS SELECT * FROM tpch.customer")
    sql = JOIN_SQL.replace("tpch.customer", "lazyq.customer_p")
    with pspark.sql(spark, sql, catalog=catalog) as df:
        partitioned = df.pando.plan.plans["lazyq.customer_p"]
        assert partitioned.filter.is_true_expr() and in_task_cache(partitioned)
        assert not stages(partitioned, catalog.load_table("lazyq.customer_p"))
        assert sorted(df.collect()) == want
        assert any(n.endswith("customer_p") and m.get("resultDataFiles", 0) > 0 for n, m in jv.executed_scans(df))
    spark.sql("DROP TABLE lazyq.customer_p")


def test_a_table_read_as_of_an_older_snapshot_or_sampled_is_left_to_spark(spark, catalog, laid_out):
    """A query reading a table AS OF another snapshot, or sampling one, is read by Spark as
    written: a staged scan of the current snapshot would return the rows added since (the
    table here is only joined, which 'auto' stages), and a scan pruned before a TABLESAMPLE
    would change which rows it keeps."""
    spark.sql("DROP TABLE IF EXISTS lazyq.travel")
    spark.sql("CREATE TABLE lazyq.travel USING iceberg AS SELECT * FROM tpch.orders WHERE o_orderkey < 3000")
    first = catalog.load_table("lazyq.travel").current_snapshot().snapshot_id
    spark.sql("INSERT INTO lazyq.travel SELECT * FROM tpch.orders WHERE o_orderkey >= 3000 AND o_orderkey < 9000")
    try:
        for sql in (f"SELECT count(*), sum(o.o_totalprice) FROM lazyq.travel VERSION AS OF {first} o "
                    "JOIN tpch.customer c ON o.o_custkey = c.c_custkey",
                    f"SELECT count(*) FROM {T} TABLESAMPLE (5 ROWS) WHERE o_orderdate >= date '1994-01-01' "
                    "AND o_orderdate < date '1994-04-01'"):
            want = spark.sql(sql).collect()
            with pspark.sql(spark, sql, catalog=catalog) as df:
                assert df.pando.plan.plans == {}
                assert "Spark reads it as written" in df.pando.notes()[0]
                assert df.collect() == want
        assert want[0][0] <= 5
        old = spark.sql(f"SELECT count(*) FROM lazyq.travel VERSION AS OF {first}").first()[0]
        assert old < spark.sql("SELECT count(*) FROM lazyq.travel").first()[0]
    finally:
        spark.sql("DROP TABLE IF EXISTS lazyq.travel")


def test_spark_reads_the_query_as_written_with_only_table_names_replaced():
    """The pruned query is the user's own text: each replaced reference keeps its alias (or gets
    the table's name as one) and what follows it; other tables, CTE names, comments and
    spacing stay as written."""
    from sqlglot import parse_one

    from pando_iceberg.spark.pruned import replace_tables

    sql = ("WITH x AS (SELECT * FROM db.dim WHERE d = 'lineitem')  -- db.fact here is a comment\n"
           "SELECT /* keep */ f.a, fact.b FROM db.fact f JOIN `db` . `fact` ON f.k = fact.k, x, other.t "
           "WHERE f.a IN (SELECT a FROM db.fact)")
    out = replace_tables(sql, parse_one(sql, read="spark"), {"db.fact": "__v", "db.dim": "(SELECT 1 AS d)"})
    assert out == ("WITH x AS (SELECT * FROM (SELECT 1 AS d) AS dim WHERE d = 'lineitem')  -- db.fact here is a "
                   "comment\nSELECT /* keep */ f.a, fact.b FROM __v f JOIN __v AS fact ON f.k = fact.k, x, other.t "
                   "WHERE f.a IN (SELECT a FROM __v AS fact)")
    cte = "WITH fact AS (SELECT * FROM db.fact WHERE a > 1) SELECT * FROM fact JOIN db.dim ON fact.k = dim.k"
    assert replace_tables(cte, parse_one(cte, read="spark"), {"db.fact": "__v", "db.dim": "__w"}) == (
        "WITH fact AS (SELECT * FROM __v AS fact WHERE a > 1) SELECT * FROM fact JOIN __w AS dim ON fact.k = dim.k")


def test_failure_while_planning_releases_what_was_staged(spark, catalog, laid_out):
    with pytest.raises(Exception, match="(?i)no_such_column|cannot be resolved|unresolved"):
        pspark.sql(spark, f"SELECT no_such_column FROM {T} WHERE o_orderkey < 10", catalog=catalog)
    assert _pando_views(spark) == []


def test_join_query_and_run_sql_share_the_path(spark, catalog, laid_out):
    want = sorted(spark.sql(JOIN_SQL).collect())
    with pspark.sql(spark, JOIN_SQL, catalog=catalog) as df:
        assert set(df.pando.explains) == {T, "tpch.customer"}
        assert sorted(df.collect()) == want
    res = run_sql(spark, catalog, JOIN_SQL)
    assert sorted(res.rows) == want and res.explains[T].used_layout
    assert [n.split(":")[0] for n in res.notes] == sorted([T, "tpch.customer"])
    assert _pando_views(spark) == []


def test_the_query_analysed_ahead_reads_staged_sets_in_subqueries_and_leaves_views_alone(spark, catalog, laid_out,
                                                                                         monkeypatch):
    """``ANALYSE_AHEAD``: Spark analyses the query as written while Python plans, and the
    relations of the staged tables then read their task sets: in the query and in its subqueries
    (customer, under IN), never inside a view (the view's relation of the same table keeps reading
    every row). No temporary view is made; the rows are Spark's own, as on the path that analyses
    the query rewritten over views."""
    from pando_iceberg.spark import pruned

    spark.table(T).createOrReplaceTempView("lazyq_every_order")
    sql = (f"SELECT count(*) AS n, sum(o_totalprice) AS s, "
           "(SELECT count(*) FROM lazyq_every_order WHERE o_comment LIKE '%a%') AS everywhere "
           f"FROM {T} WHERE o_orderdate < date '1993-01-01' AND o_custkey IN "
           "(SELECT c_custkey FROM tpch.customer WHERE c_mktsegment = 'BUILDING')")
    want = [tuple(r) for r in spark.sql(sql).collect()]
    assert want[0][2] == spark.sql(f"SELECT count(*) FROM {T} WHERE o_comment LIKE '%a%'").first()[0]
    try:
        for ahead in (True, False):
            monkeypatch.setattr(pruned, "ANALYSE_AHEAD", ahead)
            with pspark.sql(spark, sql, catalog=catalog, stage="always") as df:
                assert set(df.pando.plan.plans) == {T, "tpch.customer"}
                analysed = df._jdf.queryExecution().analyzed().toString()
                assert ("__pando_scan_" not in analysed) == ahead
                assert _pando_views(spark) == []
                assert [tuple(r) for r in df.collect()] == want
                scans = jv.executed_scans(df)
            # the query's orders and the subquery's customer read staged tasks (no file planned)
            staged = sorted(n.split(".")[-1] for n, m in scans if m.get("resultDataFiles", 0) == 0)
            assert staged == ["customer", "orders"], scans
    finally:
        spark.catalog.dropTempView("lazyq_every_order")


def test_swapped_plan_reads_the_staged_set_or_refuses(spark, catalog, laid_out):
    """``iceberg_jvm.swapped_plan``: the query Spark analysed, its relation of the staged table
    reading the set (exactly the chosen files' rows, without analysing the query again), and
    semi-joined with a row filter's keys (an empty key set keeps no row); None for a set planned
    from another metadata file, a staged table the query does not read, or a row filter on a
    column that is not an integer."""
    import numpy as np

    from pando_iceberg.planner import plan_scan

    table = catalog.load_table(T)
    plan = plan_scan(table, "o_orderdate >= date '1994-01-01' AND o_orderdate < date '1994-04-01'")
    jtable = jv.load_table(spark, T, metadata_location=table.metadata_location)
    key = f"{table.metadata.table_uuid}@{plan.snapshot_id}"
    sql = f"SELECT o_orderkey, o_totalprice FROM {T}"
    with jv.staged_cached_view(spark, jtable, table.metadata_location, T, plan.snapshot_id, plan.paths, key,
                               None) as set_id:
        manager = spark._jvm.org.apache.iceberg.spark.ScanTaskSetManager.get()
        assert set_id in {str(i) for i in manager.fetchSetIds(jtable)} and _pando_views(spark) == []
        uuid, location = str(table.metadata.table_uuid), table.metadata_location
        analysed = spark._jsparkSession.sql(sql)
        assert jv.swapped_plan(spark, analysed, [(uuid, location + ".old", set_id)]) is None
        other = str(catalog.load_table("tpch.customer").metadata.table_uuid)
        assert jv.swapped_plan(spark, analysed, [(uuid, location, set_id), (other, location, set_id)]) is None
        swapped = jv.swapped_plan(spark, analysed, [(uuid, location, set_id)])
        assert swapped.queryExecution().analyzed().resolved()
        df = DataFrame(swapped, spark)
        files = {r.f for r in df.selectExpr("input_file_name() AS f").distinct().collect()}
        assert files == plan.paths
        got = sorted(tuple(r) for r in df.collect())
        some = np.array([got[0][0], got[len(got) // 2][0], 10**12], dtype=np.int64)  # two keys read, one not
        kept = jv.swapped_plan(spark, analysed, [(uuid, location, set_id)], [(uuid, "o_orderkey", some)])
        assert sorted(tuple(r) for r in DataFrame(kept, spark).collect()) == [got[0], got[len(got) // 2]]
        empty = jv.swapped_plan(spark, analysed, [(uuid, location, set_id)], [(uuid, "o_orderkey", some[:0])])
        assert DataFrame(empty, spark).count() == 0
        assert jv.swapped_plan(spark, analysed, [], [(uuid, "o_orderpriority", some)]) is None
    full = spark.sql(f"SELECT o_orderkey, o_totalprice, input_file_name() AS f FROM {T}").collect()
    assert got == sorted((r[0], r[1]) for r in full if r.f in plan.paths) and len(got) == plan.explain.pando_rows


def test_a_statement_that_is_not_a_query_is_not_run_ahead(spark, catalog, laid_out):
    """Spark runs a command as it analyses it: only queries are analysed ahead. An INSERT given
    to ``pando_iceberg.spark.sql`` is refused, and no row was added behind the refusal."""
    from pando_iceberg.spark.pruned import analysis_ahead, parse_sql
    from pando_iceberg.workload.model import PandoWorkloadError

    insert = "INSERT INTO lazyq.once SELECT * FROM tpch.orders WHERE o_orderkey < 200"
    assert analysis_ahead(spark, insert, parse_sql(insert)) is None
    ahead = analysis_ahead(spark, FILTER_SQL, parse_sql(FILTER_SQL))
    assert ahead is not None and jv.analysed(ahead).queryExecution().analyzed().resolved()
    failing = analysis_ahead(spark, "SELECT no_such_column FROM lazyq.orders", parse_sql("SELECT 1"))
    assert jv.analysed(failing) is None  # Spark's error is given again by the rewritten query's analysis
    spark.sql("DROP TABLE IF EXISTS lazyq.once")
    spark.sql("CREATE TABLE lazyq.once USING iceberg AS SELECT * FROM tpch.orders WHERE false")
    try:
        with pytest.raises(PandoWorkloadError, match=r"not a query: INSERT INTO lazyq\.once"):
            pspark.sql(spark, insert, catalog=catalog)
        assert spark.sql("SELECT count(*) FROM lazyq.once").first()[0] == 0
    finally:
        spark.sql("DROP TABLE IF EXISTS lazyq.once")


def test_jvm_plans_with_the_pyiceberg_filter(spark, catalog, laid_out):
    """chosen_tasks with the pushed filter finds exactly the chosen files; a filter that would
    lose a chosen file makes it plan again without the filter."""
    from pando_iceberg.planner import plan_scan
    from pando_iceberg.expr.iceberg import to_pyiceberg

    table = catalog.load_table(T)
    jtable = jv.load_table(spark, T)
    plan = plan_scan(table, "o_orderdate >= date '1994-01-01' AND o_orderdate < date '1994-04-01'")
    assert 0 < len(plan.paths) < plan.explain.total_files
    jexpr = java_expression(spark._jvm, to_pyiceberg(plan.filter, table.schema()), table.schema(), jtable.schema())
    tasks, filtered = jv.chosen_tasks(jtable, plan.snapshot_id, plan.paths, jexpr)
    assert filtered and {str(t.file().location()) for t in tasks} == plan.paths
    # the tasks kept inside the JVM (the compiled helper: a Java list) are the ones kept in Python
    for keep, expr, n in ((plan.paths, jexpr, len(plan.paths)), (None, None, plan.explain.total_files)):
        in_jvm, _ = jv.chosen_tasks(jtable, plan.snapshot_id, keep, expr)
        in_py, _ = jv.chosen_tasks(jtable, plan.snapshot_id, keep, expr, in_jvm=False)
        assert not isinstance(in_jvm, list) and isinstance(in_py, list)
        paths = sorted(str(t.file().location()) for t in in_jvm)
        assert paths == sorted(str(t.file().location()) for t in in_py) and len(paths) == n
    # the staged read must not carry the filter's residuals: the projection may lack its columns
    with jv.staged_scan(spark, jtable, T, plan.snapshot_id, plan.paths, row_filter=jexpr) as df:
        assert df.count() == plan.explain.pando_rows
        assert df.select("o_orderkey").count() == plan.explain.pando_rows
    wrong = java_expression(spark._jvm, LessThan("o_orderdate", "1900-01-01"), table.schema(), jtable.schema())
    tasks, filtered = jv.chosen_tasks(jtable, plan.snapshot_id, plan.paths, wrong)
    assert not filtered and {str(t.file().location()) for t in tasks} == plan.paths


def test_jvm_task_cache_finds_the_chosen_files_and_stays_under_its_bound(spark, catalog, laid_out, monkeypatch):
    """``iceberg_jvm.cached_tasks``: the chosen files' tasks of the snapshot, looked up in a cache
    of the snapshot's tasks; a path the snapshot lacks gives None (the caller plans again); the
    cache keeps at most the setting ``taskCache.maxFiles`` tasks, least recently used snapshots going first,
    and a snapshot larger than that is not kept at all."""
    from pando_iceberg.planner import plan_scan

    table = catalog.load_table(T)
    jtable = jv.load_table(spark, T)
    plan = plan_scan(table, "o_orderdate >= date '1994-01-01' AND o_orderdate < date '1994-04-01'")
    n = plan.explain.total_files
    assert 0 < len(plan.paths) < n
    monkeypatch.setenv("PANDO_JVM_TASK_CACHE_FILES", str(2 * n))
    for key in ("t@a", "t@b", "t@c"):  # three snapshots' worth under a bound of two
        tasks = jv.cached_tasks(jtable, plan.snapshot_id, plan.paths, key)
        assert sorted(str(t.file().location()) for t in tasks) == sorted(plan.paths)
        snapshots, kept = jv.cached_task_counts()
        assert kept <= 2 * n and snapshots <= 2
    assert jv.cached_task_counts() == (2, 2 * n)
    assert jv.cached_tasks(jtable, plan.snapshot_id, plan.paths | {"file:/not/a/data/file.parquet"}, "t@c") is None
    monkeypatch.setenv("PANDO_JVM_TASK_CACHE_FILES", str(n - 1))  # a snapshot over the bound: found, not kept
    tasks = jv.cached_tasks(jtable, plan.snapshot_id, plan.paths, "t@d")
    assert len(tasks) == len(plan.paths) and jv.cached_task_counts() == (2, 2 * n)
    with jv.staged_scan(spark, jtable, T, plan.snapshot_id, plan.paths, cache_key="t@e") as df:
        assert df.count() == plan.explain.pando_rows


def test_temp_view_is_sparks_own_view_of_the_dataframe(spark, laid_out):
    """``iceberg_jvm.temp_view`` (made in the session catalog, not by CreateViewCommand) reads what
    the DataFrame reads, replaces a view of the same name, is temporary and is dropped like one."""
    jv.temp_view(spark, spark.table(T).where("o_orderkey < 100"), "pando_tv")
    got = sorted(r.o_orderkey for r in spark.sql("SELECT o_orderkey FROM pando_tv").collect())
    assert got == sorted(r.o_orderkey for r in spark.table(T).where("o_orderkey < 100").collect()) and got
    jv.temp_view(spark, spark.range(3).withColumnRenamed("id", "o_orderkey"), "pando_tv")
    assert sorted(r.o_orderkey for r in spark.sql("SELECT o_orderkey FROM pando_tv").collect()) == [0, 1, 2]
    assert spark.catalog.tableExists("pando_tv")
    assert spark.catalog.dropTempView("pando_tv")  # True: it was a temporary view
    assert not spark.catalog.tableExists("pando_tv")


def test_without_the_view_helpers_the_task_cache_still_serves_and_queries_stay_exact(spark, catalog, laid_out,
                                                                                     monkeypatch):
    """The task cache (``TaskCache.java``) does not depend on the task-set views (``Views.java``,
    Spark's internal view API); on a JVM where the views do not compile (another Spark), the
    task cache still serves the lookups and a staged table takes the DataFrame path: the same
    rows as Spark's own read, every staged task set removed on close."""
    sources = dict(jvm_classes.java_sources())
    sources["Views"] = sources["Views"] + "\nthis does not compile;"
    monkeypatch.setattr(jvm_classes, "java_sources", lambda: sources)
    for cache in ("_LOADERS", "_INSTANCES", "_METHODS"):  # a JVM that has not compiled the helpers yet
        monkeypatch.setattr(jvm_classes, cache, {})
    assert jvm_classes.helper("Staging", "stageCachedView", ("java.lang.Object",) * 10) is None
    assert jvm_classes.helper("TaskCache", "cachedCounts", ()) is not None
    manager = spark._jvm.org.apache.iceberg.spark.ScanTaskSetManager.get()
    jtable = jv.load_table(spark, T)
    before = manager.fetchSetIds(jtable).size()
    want = sorted(spark.sql(JOIN_SQL).collect())
    with pspark.sql(spark, JOIN_SQL, catalog=catalog, stage="always") as df:
        assert sorted(df.collect()) == want
        assert manager.fetchSetIds(jtable).size() == before + 1
    assert manager.fetchSetIds(jtable).size() == before and _pando_views(spark) == []


@pytest.mark.parametrize("in_jvm", [True, False])
def test_staged_scan_as_a_view_reads_what_the_dataframe_reads(spark, catalog, laid_out, monkeypatch, in_jvm):
    """``staged_scan(view=...)``: the view made in the JVM (``task_set_view``: no DataFrame, the task
    set's id yielded) is the relation ``spark.read...load`` gives (the same analyzed plan, the same rows,
    only the chosen files read); when the helper cannot be used, the view of the loaded DataFrame."""
    import re

    from pando_iceberg.planner import plan_scan

    if not in_jvm:
        monkeypatch.setattr(jvm_staging, "task_set_view", lambda *a: False)
    table = catalog.load_table(T)
    plan = plan_scan(table, "o_orderdate >= date '1994-01-01' AND o_orderdate < date '1994-04-01'")
    jtable = jv.load_table(spark, T)
    strip = lambda s: re.sub(r"#\d+|pando_v_(new|old)", "", s)  # noqa: E731
    with jv.staged_scan(spark, jtable, T, plan.snapshot_id, plan.paths, view="pando_v_new") as got:
        assert isinstance(got, str) == in_jvm  # the set's id, or (not in the JVM) the DataFrame
        with jv.staged_scan(spark, jtable, T, plan.snapshot_id, plan.paths) as df:
            jv.temp_view(spark, df, "pando_v_old")
            new, old = spark.table("pando_v_new"), spark.table("pando_v_old")
            assert strip(new._jdf.queryExecution().analyzed().toString()) == \
                strip(old._jdf.queryExecution().analyzed().toString())
            rows = sorted(tuple(r) for r in new.collect())
            assert rows == sorted(tuple(r) for r in old.collect()) and len(rows) == plan.explain.pando_rows
    jv.drop_temp_views(spark, ["pando_v_new", "pando_v_old"])


def test_task_set_view_stages_in_one_call_and_leaves_nothing_staged_when_refused(spark, catalog, laid_out):
    """``iceberg_jvm.task_set_view`` stages the tasks and makes their view in one JVM call; when the
    view cannot be made (here a name no catalog knows), it says False and no task set stays
    staged (the caller's fallback stages its own); ``unstage`` removes a staged set."""
    from pando_iceberg.planner import plan_scan

    table = catalog.load_table(T)
    plan = plan_scan(table, "o_orderdate >= date '1994-01-01' AND o_orderdate < date '1994-04-01'")
    jtable = jv.load_table(spark, T)
    tasks, _ = jv.chosen_tasks(jtable, plan.snapshot_id, plan.paths)
    manager = spark._jvm.org.apache.iceberg.spark.ScanTaskSetManager.get()
    assert not jv.task_set_view(spark, jtable, "no_such_ns.no_such_table", tasks, "pando-refused", "pando_v_refused")
    assert manager.fetchTasks(jtable, "pando-refused") is None
    assert not spark.catalog.tableExists("pando_v_refused")
    assert jv.task_set_view(spark, jtable, T, tasks, "pando-made", "pando_v_made")
    try:
        assert manager.fetchTasks(jtable, "pando-made").size() == len(plan.paths)
        assert spark.table("pando_v_made").count() == plan.explain.pando_rows
    finally:
        jv.unstage(spark, jtable, "pando-made")
        jv.drop_temp_views(spark, ["pando_v_made"])
    assert manager.fetchTasks(jtable, "pando-made") is None


def test_staged_cached_view_checks_looks_up_and_stages_in_one_call(spark, catalog, laid_out):
    """``iceberg_jvm.staged_cached_view``: the held Java table checked against the metadata file
    planned with, the chosen tasks looked up in the task cache, staged and made a view in one
    JVM call; the view reads exactly the chosen files' rows and the set is unstaged on exit. A
    table read from another metadata file, or a path not in the snapshot, gives None with
    nothing staged (``staged_plan`` then reloads the table or plans in the JVM)."""
    from pando_iceberg.planner import plan_scan

    table = catalog.load_table(T)
    plan = plan_scan(table, "o_orderdate >= date '1994-01-01' AND o_orderdate < date '1994-04-01'")
    jtable = jv.load_table(spark, T, metadata_location=table.metadata_location)
    assert jv.held_table(spark, T)._target_id == jtable._target_id
    key = f"{table.metadata.table_uuid}@{plan.snapshot_id}"
    manager = spark._jvm.org.apache.iceberg.spark.ScanTaskSetManager.get()
    staged_before = manager.fetchSetIds(jtable).size()
    assert jv.staged_cached_view(spark, jtable, table.metadata_location + ".old", T, plan.snapshot_id,
                                 plan.paths, key, "pando_v_cached") is None  # another metadata file
    assert jv.staged_cached_view(spark, jtable, table.metadata_location, T, plan.snapshot_id,
                                 plan.paths | {"file:/not/a/data/file.parquet"}, key, "pando_v_cached") is None
    assert manager.fetchSetIds(jtable).size() == staged_before and not spark.catalog.tableExists("pando_v_cached")
    staged = jv.staged_cached_view(spark, jtable, table.metadata_location, T, plan.snapshot_id, plan.paths, key,
                                   "pando_v_cached")
    assert staged is not None
    try:
        with staged as got:
            assert isinstance(got, str) and manager.fetchSetIds(jtable).size() == staged_before + 1
            assert got in {str(i) for i in manager.fetchSetIds(jtable)}
            view = spark.table("pando_v_cached")
            files = {r.f for r in view.selectExpr("input_file_name() AS f").distinct().collect()}
            assert files == plan.paths
            rows = sorted(tuple(r) for r in view.collect())
        full = spark.read.format("iceberg").load(T)
        in_chosen = [tuple(r)[:-1] for r in full.selectExpr("*", "input_file_name() AS f").collect()
                     if r.f in plan.paths]
        assert rows == sorted(in_chosen) and len(rows) == plan.explain.pando_rows
        assert manager.fetchSetIds(jtable).size() == staged_before  # unstaged on exit
    finally:
        jv.drop_temp_views(spark, ["pando_v_cached"])


def test_a_staged_table_with_no_chosen_file_reads_no_row(spark, catalog, laid_out):
    """``stage='always'`` with every file pruned: the staged view is an empty relation under the
    table's schema (Iceberg refuses an empty task set), and the query returns Spark's answer."""
    sql = f"SELECT count(*) AS n, max(o_totalprice) AS m FROM {T} WHERE o_orderdate < date '1900-01-01'"
    with pspark.sql(spark, sql, catalog=catalog, stage="always") as df:
        assert df.pando.explains[T].pando_files == 0
        rows = [tuple(r) for r in df.collect()]
    assert rows == [tuple(r) for r in spark.sql(sql).collect()] == [(0, None)]


def test_java_table_is_reused_only_while_its_metadata_file_is_current(spark, catalog, laid_out):
    """``iceberg_jvm.load_table(metadata_location=...)``: the Java table handed out last is reused
    (no reload, no refresh) while it was read from the metadata file the caller planned with; a
    commit since (here a property, a new metadata file without a new snapshot) gives a table
    refreshed to it, and a pruned query then still reads the table's rows."""
    table = catalog.load_table(T)
    before = table.metadata_location
    first = jv.load_table(spark, T, metadata_location=before)
    assert jv.table_metadata_location(first) == before
    again = jv.load_table(spark, T, metadata_location=before)
    assert again._target_id == first._target_id  # the same handle: nothing reloaded
    with table.transaction() as tx:
        tx.set_properties({"pando.test-touch": "1"})
    touched = catalog.load_table(T)
    assert touched.metadata_location != before
    assert jv.table_metadata_location(first) == before  # the JVM has not seen the commit yet
    fresh = jv.load_table(spark, T, metadata_location=touched.metadata_location)
    assert jv.table_metadata_location(fresh) == touched.metadata_location
    assert str(fresh.properties().get("pando.test-touch")) == "1"
    try:
        with pspark.sql(spark, FILTER_SQL, catalog=catalog) as df:
            assert df.pando.explains[T].pando_files < df.pando.explains[T].total_files
            got = sorted(tuple(r) for r in df.collect())
        assert got == sorted(tuple(r) for r in spark.sql(FILTER_SQL).collect()) and got
    finally:
        with touched.transaction() as tx:
            tx.remove_properties("pando.test-touch")


TYPED = "lazyq.typed"
TYPED_FILTERS = [
    EqualTo("d", datetime.date(2020, 1, 5).isoformat()), LessThan("d", "2020-01-03"),
    GreaterThanOrEqual("ts", "2020-01-01T12:00:00"), LessThan("tz", "2020-01-02T00:00:00+00:00"),
    EqualTo("dec", Decimal("10.50")), GreaterThan("dec", Decimal("12.35")), In("s", {"a", "k"}),
    StartsWith("s", "b"), NotEqualTo("l", 3), LessThanOrEqual("i", 4), GreaterThan("f", 2.5),
    IsNull("s"), NotNull("s"), EqualTo("b", True), Or(EqualTo("l", 1), And(GreaterThan("l", 7), LessThan("i", 9))),
    AlwaysTrue(),
]


@pytest.fixture(scope="module")
def typed(spark):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lazyq")
    spark.sql(f"DROP TABLE IF EXISTS {TYPED}")
    spark.sql(f"CREATE TABLE {TYPED} (l BIGINT, i INT, f DOUBLE, d DATE, ts TIMESTAMP_NTZ, tz TIMESTAMP, "
              "dec DECIMAL(10,2), s STRING, b BOOLEAN) USING iceberg")
    for k in range(10):  # ten files, each with its own value range
        s = "NULL" if k == 4 else f"'{chr(97 + k)}'"
        spark.sql(f"INSERT INTO {TYPED} VALUES ({k}, {k}, {k}.0, date '2020-01-{k + 1:02d}', "
                  f"timestamp_ntz '2020-01-{k + 1:02d} 06:00:00', timestamp '2020-01-{k + 1:02d} 06:00:00 UTC', "
                  f"{k + 8}.50, {s}, {str(k % 2 == 0).lower()})")
    return TYPED


@pytest.mark.parametrize("flt", TYPED_FILTERS, ids=str)
def test_java_filter_keeps_what_pyiceberg_keeps(spark, catalog, typed, flt):
    """Every literal type written as Java expression JSON: the JVM's filtered plan is the
    pyiceberg plan (same files), so chosen files are found without a full plan."""
    table = catalog.load_table(typed)
    jtable = jv.load_table(spark, typed)
    py = {t.file.file_path for t in table.scan(row_filter=flt).plan_files()}
    jexpr = java_expression(spark._jvm, flt, table.schema(), jtable.schema())
    tasks, filtered = jv.chosen_tasks(jtable, table.current_snapshot().snapshot_id, py, jexpr)
    assert filtered and {str(t.file().location()) for t in tasks} == py
    assert len(py) < 10 or flt == AlwaysTrue() or isinstance(flt, (NotNull, NotEqualTo))
