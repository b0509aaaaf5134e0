"""Under ANSI mode a query read through Pando's staged tasks answers where plain Spark answers.

Spark's own Iceberg scan gives Iceberg its pushed filter, with which Iceberg's Parquet reader
skips row groups by their statistics and dictionaries before Spark's Filter sees a row. An ANSI
expression of the query (``CAST('cmt' AS DATE)``) then never meets the rows of a skipped row
group. Pando's staged tasks carry the same skipping (``iceberg_jvm.with_residuals``): the
table's pruning filter and Spark's own filter of the relation as residuals; without them, the
queries below raise through Pando and answer in a plain session.
"""

from __future__ import annotations

import pytest

import pando_iceberg.spark as pspark
from pando_iceberg.spark import iceberg_jvm as jv

pytestmark = pytest.mark.spark

NS = "ansistaged"
T = f"{NS}.trips"
D = f"{NS}.days"

# File A's vendors all start with '2026', file B's bounds ('2025-12-31'..'cmt') do not exclude
# the prefix but its dictionary does; file B's flags (0, 2) and rates (0.5, 9.0) span 1 and 2.5
# in its bounds, not in its dictionary. Every string of file A casts to a date and every note to
# an int; file B's do not.
FILE_A = [(i, f"2026-01-{1 + i % 28:02d}", 1, str(i), 2.5 if i % 2 else 1.0) for i in range(200)]
FILE_B = [(1000 + i, "cmt" if i % 2 else "2025-12-31", 0 if i % 2 else 2, "n/a", 0.5 if i % 2 else 9.0)
          for i in range(200)]
SCHEMA = "k INT, vendor STRING, flag INT, note STRING, rate FLOAT"


@pytest.fixture(scope="module")
def trips(spark):
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    for t in (T, D):
        spark.sql(f"DROP TABLE IF EXISTS {t}")
    spark.sql(f"CREATE TABLE {T} ({SCHEMA}) USING iceberg TBLPROPERTIES ('format-version'='2')")
    for rows in (FILE_A, FILE_B):  # one file each
        spark.createDataFrame(rows, SCHEMA).coalesce(1).writeTo(T).append()
    spark.sql(f"CREATE TABLE {D} USING iceberg AS SELECT id AS k FROM range(0, 50)")
    assert spark.sql(f"SELECT count(*) FROM {T}.files").collect()[0][0] == 2
    yield T
    for t in (T, D):
        spark.sql(f"DROP TABLE IF EXISTS {t}")


QUERIES = {
    # the table's pruning filter models the prefix: its residual skips file B's row group
    "pruning_filter": f"SELECT count(*), sum(k) FROM {T} WHERE CAST(vendor AS DATE) >= DATE '2020-01-01' "
                      "AND vendor LIKE '2026%'",
    # under a FULL JOIN the pruning filter of the trips is TRUE; Spark makes the join a LEFT
    # JOIN and filters the trips by flag = 1 itself: its own filter skips file B's row group
    "spark_filter": f"SELECT count(*), sum(t.k) FROM {T} t FULL JOIN {D} d ON t.k = d.k "
                    "WHERE CAST(t.note AS INT) >= 0 AND t.flag = 1",
    # the pruning filter of the trips leaves out the NOT (a term reads both tables); Spark splits
    # it and filters the trips by rate = 2.5 itself: on a FLOAT column, a filter whose row-group
    # skipping agrees with Spark's semantics (no NaN nor zero involved)
    "spark_float_filter": f"SELECT count(*), sum(t.k) FROM {T} t JOIN {D} d ON t.flag = d.k "
                          "WHERE CAST(t.note AS INT) >= 0 AND NOT (t.k = d.k + 1000 OR t.rate <> CAST('2.5' AS FLOAT))",
    # the trips read twice: one set staged for both relations (its pruning filter an OR of theirs),
    # each relation filtered by Spark on its own: t's rate = 2.5 skips file B's row group, which
    # u's key range needs
    "self_join": f"SELECT count(*), sum(t.k) FROM {T} t JOIN {T} u ON t.k + 1000 = u.k "
                 "WHERE CAST(t.note AS INT) >= 0 AND t.rate = CAST('2.5' AS FLOAT) AND u.k BETWEEN 1000 AND 1100",
}
EXPECTED = {
    "pruning_filter": sum(1 for _ in FILE_A),
    "spark_filter": sum(1 for r in FILE_A if r[2] == 1),
    "spark_float_filter": sum(1 for r in FILE_A if r[4] == 2.5),
    "self_join": sum(1 for r in FILE_A if r[4] == 2.5 and r[0] <= 100),
}


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_an_ansi_query_answers_through_the_staged_tasks_as_in_a_plain_session(spark, catalog, trips, name):
    q = QUERIES[name]
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        plain = [tuple(r) for r in spark.sql(q).collect()]
        assert plain[0][0] == EXPECTED[name]
        with pspark.sql(spark, q, catalog=catalog) as df:
            assert df.pando.explains[T].pando_files == 2  # both files read: the row groups decide
            assert [tuple(r) for r in df.collect()] == plain
    finally:
        spark.conf.set("spark.sql.ansi.enabled", before)


def test_without_ansi_the_staged_tasks_carry_no_residual(spark, catalog, trips):
    """Off ANSI a skipped row group changes no answer: no second optimization is spent on it
    (the CASTs give NULL on file B's rows, which the prefix and flag filter out anyway)."""
    q = QUERIES["pruning_filter"]
    assert spark.conf.get("spark.sql.ansi.enabled") == "false"
    calls = []
    real = jv.with_residuals
    jv.with_residuals = lambda *a, **k: calls.append(a) or real(*a, **k)
    try:
        with pspark.sql(spark, q, catalog=catalog) as df:
            assert [tuple(r) for r in df.collect()] == [tuple(r) for r in spark.sql(q).collect()]
    finally:
        jv.with_residuals = real
    assert calls == []


def test_a_table_under_an_outer_join_is_read_by_spark_unless_its_trees_prune(spark, catalog, trips):
    """Pando's pruning filter of the trips is TRUE under the FULL JOIN; Spark finds the join a LEFT
    one (the WHERE rejects the trips' NULL rows) and pushes flag = 5 to its own scan, which skips
    both files by their bounds. Staged, the trips would be read whole."""
    q = f"SELECT count(*) FROM {T} t FULL JOIN {D} d ON t.k = d.k WHERE t.flag = 5"

    def rows_read(df) -> int:
        df.collect()
        return sum(m.get("numOutputRows", 0) for name, m in jv.executed_scans(df) if name.endswith("trips"))

    plain = rows_read(spark.sql(q))
    with pspark.sql(spark, q, catalog=catalog) as df:
        assert df.pando.explains[T].pando_files == 2  # the pruning filter decides nothing
        assert rows_read(df) <= plain == 0


@pytest.mark.parametrize("ahead", [True, False])
def test_each_relation_of_a_table_read_twice_reads_a_copy_of_its_set_removed_on_close(
        spark, catalog, trips, monkeypatch, ahead):
    """The self-join answers as in a plain session, whether the staged sets are swapped into the
    query analysed ahead or read through views: each relation reads a copy of the set with its
    own residual, and the copies go with the sets on close."""
    from pando_iceberg.spark import pruned

    monkeypatch.setattr(pruned, "ANALYSE_AHEAD", ahead)
    q = QUERIES["self_join"]
    manager = spark._jvm.org.apache.iceberg.spark.ScanTaskSetManager.get()
    jtable = jv.load_table(spark, T)
    before = manager.fetchSetIds(jtable).size()
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        plain = [tuple(r) for r in spark.sql(q).collect()]
        with pspark.sql(spark, q, catalog=catalog) as df:
            assert [tuple(r) for r in df.collect()] == plain
            assert manager.fetchSetIds(jtable).size() == before + 3  # the set and a copy per relation
    finally:
        spark.conf.set("spark.sql.ansi.enabled", "false")
    assert manager.fetchSetIds(jtable).size() == before


def test_a_set_read_by_copies_spark_makes_of_a_relation_is_not_copied(spark, catalog, trips):
    """A CTE read twice: Spark's optimizer inlines its second reference as a copy of the relation
    under attributes of its own, which the analysed plan does not hold; the set stays one, with
    the residual every reference allows (none here), and the answer is plain Spark's."""
    q = (f"WITH c AS (SELECT * FROM {T}) SELECT count(*), sum(t.k) FROM c t JOIN c u ON t.k + 1000 = u.k "
         "WHERE t.rate = CAST('2.5' AS FLOAT) AND u.k BETWEEN 1000 AND 1100")
    manager = spark._jvm.org.apache.iceberg.spark.ScanTaskSetManager.get()
    jtable = jv.load_table(spark, T)
    before = manager.fetchSetIds(jtable).size()
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        plain = [tuple(r) for r in spark.sql(q).collect()]
        assert plain[0][0] == EXPECTED["self_join"]
        with pspark.sql(spark, q, catalog=catalog) as df:
            assert [tuple(r) for r in df.collect()] == plain
            assert manager.fetchSetIds(jtable).size() == before + 1
    finally:
        spark.conf.set("spark.sql.ansi.enabled", "false")


R = f"{NS}.rates"


@pytest.fixture(scope="module")
def rates(spark, trips):
    """File A: notes that cast to an int, rates 2.5 and 1.0; file C: one row, note 'n/a', rate NaN.
    Iceberg's metrics of file C (its NaN count is its row count) rule out rate = 2.5; its one-row
    page has no dictionary and its statistics no bounds to skip its row group with."""
    schema = "k INT, flag INT, note STRING, rate DOUBLE"
    spark.sql(f"DROP TABLE IF EXISTS {R}")
    spark.sql(f"CREATE TABLE {R} ({schema}) USING iceberg TBLPROPERTIES ('format-version'='2')")
    for rows in ([(i, 1, str(i), 2.5 if i % 2 else 1.0) for i in range(200)], [(5000, 1, "n/a", float("nan"))]):
        spark.createDataFrame(rows, schema).coalesce(1).writeTo(R).append()
    yield R
    spark.sql(f"DROP TABLE IF EXISTS {R}")


def test_a_file_spark_plans_out_by_its_metrics_is_not_read_through_the_staged_tasks(spark, catalog, rates):
    """Spark pushes rate = 2.5 (the NOT split) to its own scan, whose planning drops file C by its
    metrics: the staged set drops it too, as no residual could skip its row group."""
    q = (f"SELECT count(*), sum(t.k) FROM {R} t JOIN {D} d ON t.flag = d.k "
         "WHERE CAST(t.note AS INT) >= 0 AND NOT (t.k = d.k + 1000 OR t.rate <> 2.5D)")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        plain = [tuple(r) for r in spark.sql(q).collect()]
        assert plain[0][0] == 100
        with pspark.sql(spark, q, catalog=catalog) as df:
            assert df.pando.explains[R].pando_files == 2  # the pruning filter decides nothing
            assert [tuple(r) for r in df.collect()] == plain
    finally:
        spark.conf.set("spark.sql.ansi.enabled", "false")


N = f"{NS}.nan_rates"


@pytest.fixture(scope="module")
def nan_rates(spark, trips):
    """One file: rates 1.0 and NaN, every note an int. Iceberg's bounds of it (1.0..1.0, NaN counted
    apart) rule out rate > 2.0; Spark's semantics (NaN above every number) keep its NaN rows."""
    schema = "k INT, flag INT, note STRING, rate DOUBLE"
    spark.sql(f"DROP TABLE IF EXISTS {N}")
    spark.sql(f"CREATE TABLE {N} ({schema}) USING iceberg TBLPROPERTIES ('format-version'='2')")
    rows = [(i, 1, str(i), float("nan") if i % 4 == 0 else 1.0) for i in range(200)]
    spark.createDataFrame(rows, schema).coalesce(1).writeTo(N).append()
    yield rows
    spark.sql(f"DROP TABLE IF EXISTS {N}")


def test_a_float_greater_than_of_spark_keeps_the_nan_rows_of_the_staged_tasks(spark, catalog, nan_rates):
    """Spark splits the NOT and filters the rates by rate > 2.0 itself: neither the staged set's
    residual nor its planning may take that conjunct (Iceberg's bounds and statistics leave NaN out
    of x > c, Spark keeps NaN), so the NaN rows reach Spark's Filter as they would over the rows
    themselves."""
    q = ("SELECT count(*), sum(t.k) FROM {n} t JOIN {d} d ON t.flag = d.k "
         "WHERE CAST(t.note AS INT) >= 0 AND NOT (t.k = d.k + 1000 OR t.rate <= 2.0D)")
    nan = [r[0] for r in nan_rates if r[3] != r[3]]
    spark.createDataFrame(nan_rates, "k INT, flag INT, note STRING, rate DOUBLE").createOrReplaceTempView("nan_rows")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        # Spark's semantics over the rows themselves, not read through Iceberg
        reference = [tuple(r) for r in spark.sql(q.format(n="nan_rows", d=D)).collect()]
        assert reference == [(len(nan), sum(nan))]
        with pspark.sql(spark, q.format(n=N, d=D), catalog=catalog, stage="always") as df:
            assert [tuple(r) for r in df.collect()] == reference
    finally:
        spark.conf.set("spark.sql.ansi.enabled", "false")
        spark.catalog.dropTempView("nan_rows")
