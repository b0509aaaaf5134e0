"""Every query of an enabled session reads the files Pando keeps, whatever wrote it: the DataFrame
API, ``spark.sql`` outside any ``pruning()`` block, temporary views made by the DataFrame API. The
optimizer rule (``spark/prune_rule.py``, ``PruneRule.java``) plans each query's blocks with the
planner of ``pando_iceberg.spark.sql``: the same files read, and the rows of a plain session.

lineitem is laid out on a TPC-H-like workload (its dates and quantities, and orders' dates and
customers' segments through the joins), so a wrong swap skips files and changes the answer.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from pyspark.sql import functions as F

import pando_iceberg
import pando_iceberg.spark
from pando_iceberg.spark import iceberg_jvm as jv
from pando_iceberg.spark import prune_rule

pytestmark = pytest.mark.spark

NS = "everyq"

# TPC-H-like templates: (SQL text, the same query with the DataFrame API)
TEMPLATES = {
    "q6": "SELECT sum(l_extendedprice * l_discount) AS revenue FROM {ns}.lineitem "
          "WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' "
          "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
    "q3": "SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate "
          "FROM {ns}.customer, {ns}.orders, {ns}.lineitem WHERE c_mktsegment = 'BUILDING' "
          "AND c_custkey = o_custkey AND l_orderkey = o_orderkey AND o_orderdate < DATE '1995-03-15' "
          "AND l_shipdate > DATE '1995-03-15' GROUP BY l_orderkey, o_orderdate",
    "q12": "SELECT l_shipmode, count(*) AS n FROM {ns}.orders, {ns}.lineitem WHERE o_orderkey = l_orderkey "
           "AND l_shipmode IN ('MAIL', 'SHIP') AND l_receiptdate >= DATE '1994-01-01' "
           "AND l_receiptdate < DATE '1995-01-01' GROUP BY l_shipmode",
    "q14": "SELECT sum(l_extendedprice * (1 - l_discount)) AS revenue FROM {ns}.lineitem, {ns}.part "
           "WHERE l_partkey = p_partkey AND l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-10-01'",
    "q10": "SELECT c_custkey, sum(l_extendedprice * (1 - l_discount)) AS revenue, n_name "
           "FROM {ns}.customer, {ns}.orders, {ns}.lineitem, {ns}.nation WHERE c_custkey = o_custkey "
           "AND l_orderkey = o_orderkey AND o_orderdate >= DATE '1993-10-01' AND o_orderdate < DATE '1994-01-01' "
           "AND l_returnflag = 'R' AND c_nationkey = n_nationkey GROUP BY c_custkey, n_name",
    "q1": "SELECT l_returnflag, l_linestatus, sum(l_quantity) AS qty, count(*) AS n FROM {ns}.lineitem "
          "WHERE l_shipdate <= DATE '1992-06-01' GROUP BY l_returnflag, l_linestatus",
    # EXISTS: Spark's left semi join, lineitem pruned by orders' dates through the join
    "q4": "SELECT o_orderpriority, count(*) AS n FROM {ns}.orders WHERE o_orderdate >= DATE '1996-01-01' "
          "AND o_orderdate < DATE '1996-04-01' AND EXISTS (SELECT * FROM {ns}.lineitem WHERE l_orderkey = o_orderkey "
          "AND l_commitdate < l_receiptdate) GROUP BY o_orderpriority",
}


def dataframe_api(spark, name: str):
    """The template ``name`` written with the DataFrame API."""
    t = lambda n: spark.table(f"{NS}.{n}")  # noqa: E731
    d = lambda s: F.lit(s).cast("date")  # noqa: E731
    li = t("lineitem")
    if name == "q6":
        return li.where((F.col("l_shipdate") >= d("1994-01-01")) & (F.col("l_shipdate") < d("1995-01-01"))
                        & F.col("l_discount").between(F.lit(Decimal("0.05")), F.lit(Decimal("0.07")))
                        & (F.col("l_quantity") < 24)) \
            .agg(F.sum(F.col("l_extendedprice") * F.col("l_discount")).alias("revenue"))
    if name == "q3":
        c = t("customer").where(F.col("c_mktsegment") == "BUILDING")
        o = t("orders").where(F.col("o_orderdate") < d("1995-03-15"))
        return c.join(o, c.c_custkey == o.o_custkey).join(li.where(F.col("l_shipdate") > d("1995-03-15")),
                                                         F.col("l_orderkey") == F.col("o_orderkey")) \
            .groupBy("l_orderkey", "o_orderdate") \
            .agg(F.sum(F.col("l_extendedprice") * (1 - F.col("l_discount"))).alias("revenue"))
    if name == "q12":
        return t("orders").join(li, F.col("o_orderkey") == F.col("l_orderkey")) \
            .where(F.col("l_shipmode").isin("MAIL", "SHIP") & (F.col("l_receiptdate") >= d("1994-01-01"))
                   & (F.col("l_receiptdate") < d("1995-01-01"))) \
            .groupBy("l_shipmode").agg(F.count("*").alias("n"))
    if name == "q14":
        return li.where((F.col("l_shipdate") >= d("1995-09-01")) & (F.col("l_shipdate") < d("1995-10-01"))) \
            .join(t("part"), F.col("l_partkey") == F.col("p_partkey")) \
            .agg(F.sum(F.col("l_extendedprice") * (1 - F.col("l_discount"))).alias("revenue"))
    if name == "q10":
        o = t("orders").where((F.col("o_orderdate") >= d("1993-10-01")) & (F.col("o_orderdate") < d("1994-01-01")))
        return t("customer").join(o, F.col("c_custkey") == F.col("o_custkey")) \
            .join(li.where(F.col("l_returnflag") == "R"), F.col("l_orderkey") == F.col("o_orderkey")) \
            .join(t("nation"), F.col("c_nationkey") == F.col("n_nationkey")) \
            .groupBy("c_custkey", "n_name") \
            .agg(F.sum(F.col("l_extendedprice") * (1 - F.col("l_discount"))).alias("revenue"))
    if name == "q4":
        o = t("orders").where((F.col("o_orderdate") >= d("1996-01-01")) & (F.col("o_orderdate") < d("1996-04-01")))
        return o.join(li.where(F.col("l_commitdate") < F.col("l_receiptdate")),
                      F.col("l_orderkey") == F.col("o_orderkey"), "left_semi") \
            .groupBy("o_orderpriority").agg(F.count("*").alias("n"))
    assert name == "q1"
    return li.where(F.col("l_shipdate") <= d("1992-06-01")).groupBy("l_returnflag", "l_linestatus") \
        .agg(F.sum("l_quantity").alias("qty"), F.count("*").alias("n"))


WORKLOAD = [
    TEMPLATES["q6"],
    TEMPLATES["q3"],
    TEMPLATES["q12"],
    TEMPLATES["q10"],
    TEMPLATES["q1"],
    "SELECT count(*) FROM {ns}.lineitem WHERE l_shipdate >= DATE '1997-01-01' AND l_quantity > 40",
    "SELECT count(*) FROM {ns}.orders, {ns}.lineitem WHERE o_orderkey = l_orderkey "
    "AND o_orderdate >= DATE '1996-01-01' AND o_orderdate < DATE '1996-04-01'",
]


@pytest.fixture(scope="module")
def laid_out(spark, catalog, tpch):
    from pando_iceberg import LayoutOptions, PandoTable

    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    for t in ("lineitem", "orders", "customer", "part", "nation"):
        spark.sql(f"DROP TABLE IF EXISTS {NS}.{t}")
        spark.sql(f"CREATE TABLE {NS}.{t} USING iceberg AS SELECT * FROM tpch.{t}")
    PandoTable(catalog, f"{NS}.lineitem", spark=spark).optimize.rewrite(
        [w.format(ns=NS) for w in WORKLOAD], options=LayoutOptions(k=2, min_block_rows=2000, sample_rate=1.0))
    pando_iceberg.enable(spark)
    yield NS
    pando_iceberg.disable(spark)


def rows(df) -> list:
    return sorted(tuple(r) for r in df.collect())


def explain_text(df) -> str:
    """What ``df.explain(True)`` prints (the plans and their scans)."""
    return str(df._jdf.queryExecution().toString())


def files_read(df) -> dict[str, int]:
    """Data files each executed Iceberg scan of lineitem read (summed over its scans)."""
    out: dict[str, int] = {}
    for name, m in jv.executed_scans(df):
        out[name] = out.get(name, 0) + m.get("resultDataFiles", 0)
    return out


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_dataframe_api_and_plain_sql_read_what_pando_keeps(spark, catalog, laid_out, name):
    sql = TEMPLATES[name].format(ns=NS)
    plain_session = spark.newSession()  # no rule: Spark's own plans
    plain = plain_session.sql(sql)
    expected = rows(plain)
    with pando_iceberg.spark.sql(spark, sql, catalog=catalog) as pruned:
        assert rows(pruned) == expected
        kept = {t: e.pando_files for t, e in pruned.pando.explains.items() if e.pando_files < e.iceberg_files}
    before = prune_rule.replaced_scans(spark)
    for df in (dataframe_api(spark, name).select(*plain.columns), spark.sql(sql)):
        prune_rule.clear_notes(spark)
        assert rows(df) == expected
        said = prune_rule.notes(spark)
        for table, n in kept.items():  # the tables Pando prunes beyond Iceberg read the same files
            total = pruned.pando.explains[table].total_files
            assert any(s.startswith(f"{table}: read {n} of {total} files") for s in said), (table, n, said)
    assert prune_rule.replaced_scans(spark) - before == 2 * len(kept)
    assert rows(dataframe_api(plain_session, name).select(*plain.columns)) == expected


def test_the_swapped_scan_reads_fewer_files_and_explains_itself(spark, catalog, laid_out):
    sql = TEMPLATES["q10"].format(ns=NS)
    plain = spark.newSession().sql(sql)
    expected = rows(plain)
    df = dataframe_api(spark, "q10").select(*plain.columns)
    assert rows(df) == expected
    assert files_read(df).get(f"{catalog.name}.{NS}.lineitem", 0) <= files_read(plain)[f"{catalog.name}.{NS}.lineitem"]
    explained = explain_text(df)
    assert "pando-layout-" in explained, explained


def test_temporary_views_and_subqueries_of_the_dataframe_api(spark, catalog, laid_out):
    q6 = dataframe_api(spark, "q6")
    q6.createOrReplaceTempView("q6_view")
    try:
        expected = rows(spark.newSession().sql(TEMPLATES["q6"].format(ns=NS)))
        assert rows(spark.sql("SELECT * FROM q6_view")) == expected
        li = spark.table(f"{NS}.lineitem")
        sub = li.where(F.col("l_orderkey").isin([r[0] for r in spark.table(f"{NS}.orders").where(
            F.col("o_orderdate") >= F.lit("1998-01-01").cast("date")).select("o_orderkey").collect()]))
        assert sub.count() == spark.newSession().table(f"{NS}.lineitem").where(
            F.col("l_orderkey").isin([r[0] for r in sub.select("l_orderkey").distinct().collect()])).count()
    finally:
        spark.catalog.dropTempView("q6_view")


def test_nothing_stays_staged_and_a_disabled_session_is_spark_s_own(spark, catalog, laid_out):
    manager = spark._jvm.org.apache.iceberg.spark.ScanTaskSetManager.get()
    jtable = jv.load_table(spark, f"{NS}.lineitem")
    before = manager.fetchSetIds(jtable).size()
    df = dataframe_api(spark, "q3")
    df.explain()
    df.collect()
    assert manager.fetchSetIds(jtable).size() == before  # the staged scans hold their tasks; the sets are gone
    assert rows(df) == rows(df)  # and the DataFrame runs again
    pando_iceberg.disable(spark)
    try:
        n = prune_rule.replaced_scans(spark)
        assert n == 0  # the rule is gone with its record
        assert "pando-layout-" not in explain_text(dataframe_api(spark, "q3"))
    finally:
        pando_iceberg.enable(spark)


def test_the_rule_s_request_and_spark_s_literals():
    """The rule's request lines, and Catalyst's typed literals read as the numbers they are (a
    FLOAT's and a string that is no number are left as they are)."""
    blocks = prune_rule.parse_request("B\tSELECT 1 FROM `lake`.`db`.`f` AS __p0, `lake`.`db`.`d` AS __p1 WHERE x\n"
                                      "L\t__p0\tlake\tdb.f\t12\nX\t__p1\tlake\tdb.d\t\n")
    assert [(leaf.alias, leaf.table, leaf.snapshot, leaf.pinned) for leaf in blocks[0][1]] == [
        ("__p0", "db.f", 12, False), ("__p1", "db.d", None, True)]
    with pytest.raises(ValueError, match="unexpected line"):
        prune_rule.parse_request("Q\tnope")
    tree = prune_rule.block_tree("SELECT 1 FROM t AS __p0 WHERE __p0.q < 24.00BD AND __p0.d >= 0.05D "
                                 "AND __p0.k = 5L AND __p0.s = CAST('NaN' AS DOUBLE) AND __p0.f = 1.5F")
    assert tree.sql(dialect="spark") == (
        "SELECT 1 FROM t AS __p0 WHERE __p0.q < CAST(24.00 AS DECIMAL(4, 2)) AND __p0.d >= CAST(0.05 AS DOUBLE) "
        "AND __p0.k = CAST(5 AS BIGINT) AND __p0.s = CAST('NaN' AS DOUBLE) AND __p0.f = CAST(1.5 AS FLOAT)")


def test_a_reused_answer_never_outlives_a_commit_a_property_or_a_setting(spark, catalog, laid_out):
    """The rule answers the same blocks again from the JVM (no call to Python), with the same rows;
    rows appended, a table property set, or a session setting changed make it ask Python again,
    and the rows are the new table's."""
    sql = (f"SELECT count(*) AS n, sum(l_quantity) AS q FROM {NS}.lineitem WHERE l_shipdate >= DATE '1994-01-01' "
           "AND l_shipdate < DATE '1995-01-01' AND l_quantity < 24")
    expected = rows(spark.newSession().sql(sql))
    prune_rule.forget_answers(spark)
    prune_rule.stats(spark, clear=True)
    prune_rule.clear_notes(spark)
    assert rows(spark.sql(sql)) == expected
    first = prune_rule.stats(spark, clear=True)
    read = [n for n in prune_rule.notes(spark) if n.startswith(f"{NS}.lineitem: read ")]
    assert first["asked"] == 1 and first["reused"] == 0, first
    assert read, prune_rule.notes(spark)  # lineitem pruned beyond Iceberg: a staged scan to reuse
    for _ in range(2):
        assert rows(spark.sql(sql)) == expected
    again = prune_rule.stats(spark, clear=True)
    assert again["asked"] == 0 and again["reused"] == 2, again
    assert prune_rule.notes(spark)[-1] == read[0]  # a reused answer says what it reads again

    # rows matching the query appended (a new snapshot): a kept answer would miss their file
    spark.sql(f"INSERT INTO {NS}.lineitem SELECT * FROM {NS}.lineitem WHERE l_shipdate >= DATE '1994-01-01' "
              "AND l_shipdate < DATE '1995-01-01' AND l_quantity < 24 ORDER BY l_orderkey, l_linenumber LIMIT 7")
    prune_rule.stats(spark, clear=True)
    grown = rows(spark.sql(sql))
    assert grown == rows(spark.newSession().sql(sql))
    assert grown[0][0] == expected[0][0] + 7, (grown, expected)
    after_commit = prune_rule.stats(spark, clear=True)
    assert after_commit["asked"] == 1 and after_commit["reused"] == 0, after_commit

    # a property set (a new metadata file, the same snapshot): asked again
    spark.sql(f"ALTER TABLE {NS}.lineitem SET TBLPROPERTIES ('everyq.touched' = 'yes')")
    assert rows(spark.sql(sql)) == grown
    assert prune_rule.stats(spark, clear=True)["asked"] == 1

    # a session setting changed: asked again; set back: the answer planned under it is reused
    spark.conf.set("spark.sql.pando.taskCache.maxFiles", "0")
    try:
        assert rows(spark.sql(sql)) == grown
        assert prune_rule.stats(spark, clear=True)["asked"] == 1
    finally:
        spark.conf.unset("spark.sql.pando.taskCache.maxFiles")
    assert rows(spark.sql(sql)) == grown
    back = prune_rule.stats(spark, clear=True)
    assert back["asked"] == 0 and back["reused"] == 1, back

    # an answer made while Spark's scan reads another snapshot than the one planned is not kept
    request = (f"B\tSELECT 1 FROM `{catalog.name}`.`{NS}`.`lineitem` AS __p0 "
               "WHERE __p0.l_shipdate >= DATE '1994-01-01' AND __p0.l_shipdate < DATE '1995-01-01' "
               "AND __p0.l_quantity < 24\n"
               f"L\t__p0\t{catalog.name}\t{NS}.lineitem\t1\n")
    raced = prune_rule.answer(spark, request).split("\n")
    assert "K" not in raced and any("Spark's scan reads 1" in line for line in raced), raced
