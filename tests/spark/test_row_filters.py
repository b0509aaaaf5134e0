"""Row filters (``planner.row_filters.row_filters``, ``spark.pruned.semi_join_sql``): a join filter's key
set drops the fact's rows whose foreign key is not in it before Spark's joins and aggregates.

Differential: every result equals the unpruned one (``use_layout=False`` applies no row filter),
counts and integer sums exactly, the float sum within a relative 1e-9 (summation order). The
plans must show the semi-join, and the limits (keys, dimension share) must leave a join alone
with a note saying why.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pando_iceberg.bench.datasets import load_star, star_brand
from pando_iceberg.expr import JoinFilter, TableFilter
from pando_iceberg.expr.keys import keys_array
from pando_iceberg.planner import caches, keysets, row_filters
from pando_iceberg.planner.keysets import TooManyKeys
from pando_iceberg.planner.row_filters import estimated_key_share
from pando_iceberg.spark import pruned
from pando_iceberg.spark.pruned import pruned_sql, run_sql
from pando_iceberg.spark.rewrite import SparkKeyProvider, arrow_schema_of

pytestmark = pytest.mark.spark

REL_TOL = 1e-9
NS = "rowfilt"


@pytest.fixture(scope="module")
def star(spark, catalog):
    load_star(spark, catalog, 0.01, seed=11, namespace=NS, batch_rows=3000)  # 30,000 sales, 1,600 products
    return NS


@pytest.fixture(autouse=True)
def no_broadcast(spark):
    """Spark broadcasts no join (``autoBroadcastJoinThreshold`` -1): the tiny products table would
    otherwise be broadcast in the fact's first join, where a row filter is left out as repeating it
    (``spark.join_order``; its own test below runs with Spark's default threshold)."""
    key = "spark.sql.autoBroadcastJoinThreshold"
    before = spark.conf.get(key)
    spark.conf.set(key, "-1")
    yield
    spark.conf.set(key, before)


def brand_query(ns: str, brand: str, correlated: bool = False) -> str:
    """A brand's sales; ``correlated``: only those below a fifth of their product's mean quantity
    (TPC-H Q17's shape, where the row filter pays most: the AVG per product key)."""
    extra = (f" AND f.quantity < (SELECT 0.2 * avg(s2.quantity) * 5 FROM {ns}.sales s2 "
             f"WHERE s2.product_key = p.product_key)") if correlated else ""
    return (f"SELECT count(*) AS n, sum(f.quantity) AS q, sum(f.amount) AS r FROM {ns}.sales f "
            f"JOIN {ns}.products p ON f.product_key = p.product_key WHERE p.p_brand = '{brand}'{extra}")


def assert_same(got, want):
    assert len(got) == len(want) == 1
    (a,), (b,) = got, want
    assert a["n"] == b["n"] and a["q"] == b["q"], (a, b)
    assert math.isclose(a["r"], b["r"], rel_tol=REL_TOL), (a, b)


def executed(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def analysed(df) -> str:
    return df._jdf.queryExecution().analyzed().toString()


@pytest.mark.parametrize("ahead", [True, False])
@pytest.mark.parametrize("correlated", [False, True])
def test_row_filter_semi_joins_the_fact_and_stays_exact(spark, catalog, star, correlated, ahead, monkeypatch):
    """The row filter, a broadcast semi-join of the fact with its key set: in the plan of the query
    analysed ahead (``pruned.ANALYSE_AHEAD``: a local relation of the keys, no view), or in the
    query rewritten over views; the same rows either way."""
    monkeypatch.setattr(pruned, "ANALYSE_AHEAD", ahead)
    brand = star_brand(2, 3)
    sql = brand_query(star, brand, correlated)
    products = spark.sql(f"SELECT product_key FROM {star}.products WHERE p_brand = '{brand}'").collect()
    caches.KEY_SETS.clear()
    with pruned_sql(spark, catalog, sql) as df:
        rows = df.collect()
        plan = executed(df)
        before_optimizing = analysed(df)
        assert ("__pando_keys_" not in before_optimizing and "LeftSemi" in before_optimizing) == ahead
        filters = df.pando.plan.row_filters[f"{star}.sales"]
        notes = df.pando.notes()
    assert [f.join.column for f in filters] == ["product_key"]
    assert sorted(keys_array(filters[0].keys).tolist()) == sorted(r[0] for r in products)
    assert any(f"product_key semi-joined with {len(products):,} keys of {star}.products" in n for n in notes), notes
    assert "LeftSemi" in plan and "BroadcastHashJoin" in plan, plan
    full = run_sql(spark, catalog, sql, use_layout=False)
    assert full.rows[0]["n"] > 0
    assert_same(rows, full.rows)


def test_a_row_filter_that_would_repeat_a_first_broadcast_join_is_left_out(spark, catalog, star, no_broadcast):
    """With Spark's default threshold the products table (1,600 rows) is broadcast, and Spark joins the
    fact with it first: the row filter would repeat that hash join, so none is made and no key set
    is read. The correlated query keeps it (the subquery's read of the fact meets no product
    join); so does a fact joined first with another table, or a product table past the threshold."""
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "10485760")
    brand = star_brand(2, 3)
    sql = brand_query(star, brand)
    full = run_sql(spark, catalog, sql, use_layout=False).rows
    caches.KEY_SETS.clear()
    with pruned_sql(spark, catalog, sql) as df:
        assert not df.pando.plan.row_filters
        notes = df.pando.notes()
        assert any("Spark joins it first with rowfilt.products alone, broadcast (1,600 rows" in n for n in notes), notes
        plan = executed(df)
        assert "LeftSemi" not in plan and "BroadcastHashJoin" in plan, plan  # Spark's own join is broadcast
        assert_same(df.collect(), full)
    with pruned_sql(spark, catalog, brand_query(star, brand, correlated=True)) as df:
        assert [f.join.column for f in df.pando.plan.row_filters[f"{star}.sales"]] == ["product_key"]
    # the fact meets the stores first (FROM order, then the first input a condition connects)
    sql = (f"SELECT count(*) AS n, sum(f.quantity) AS q, sum(f.amount) AS r FROM {star}.sales f "
           f"JOIN {star}.stores s ON f.store_key = s.store_key "
           f"JOIN {star}.products p ON f.product_key = p.product_key WHERE p.p_brand = '{brand}'")
    with pruned_sql(spark, catalog, sql) as df:
        assert [f.join.column for f in df.pando.plan.row_filters[f"{star}.sales"]] == ["product_key"]
        assert_same(df.collect(), run_sql(spark, catalog, sql, use_layout=False).rows)
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", str(1600 * 4 - 1))  # below 1,600 keys of 4 bytes
    with pruned_sql(spark, catalog, brand_query(star, brand)) as df:
        assert [f.join.column for f in df.pando.plan.row_filters[f"{star}.sales"]] == ["product_key"]


def test_too_many_keys_or_too_large_a_dimension_leave_the_rows_alone(spark, catalog, star, monkeypatch):
    brand = star_brand(1, 1)
    sql = brand_query(star, brand)
    n = spark.sql(f"SELECT count(*) FROM {star}.products WHERE p_brand = '{brand}'").first()[0]
    full = run_sql(spark, catalog, sql, use_layout=False).rows

    monkeypatch.setenv("PANDO_ROW_FILTER_MAX_KEYS", str(n - 1))
    caches.KEY_SETS.clear()
    with pruned_sql(spark, catalog, sql) as df:
        assert f"{star}.sales" not in df.pando.plan.row_filters
        assert any(f"{n:,} keys (more than {n - 1:,}: at most {n - 1:,}" in x for x in df.pando.notes()), df.pando.notes()
        assert_same(df.collect(), full)

    monkeypatch.setenv("PANDO_ROW_FILTER_MAX_KEYS", str(n))
    monkeypatch.setattr(row_filters, "ROW_FILTER_KEY_SHARE", (n - 1) / 1600)  # the brand keeps more of the products
    caches.KEY_SETS.clear()
    with pruned_sql(spark, catalog, sql) as df:
        assert f"{star}.sales" not in df.pando.plan.row_filters
        assert any(f"{n:,} keys (more than {n - 1:,}" in x and "1,600 rows" in x for x in df.pando.notes()), \
            df.pando.notes()
        assert_same(df.collect(), full)
    monkeypatch.setattr(row_filters, "ROW_FILTER_KEY_SHARE", 0.1)

    monkeypatch.setenv("PANDO_ROW_FILTER_MAX_KEYS", str(n))
    monkeypatch.setattr(row_filters, "ROW_FILTER_DIMENSION_SHARE", 0.01)  # products (1,600) > 1 % of 30,000
    monkeypatch.setenv("PANDO_JOIN_PRUNING_MAX_DIMENSION_ROWS", "0")  # keys already read for join pruning would be used
    caches.KEY_SETS.clear()
    with pruned_sql(spark, catalog, sql) as df:
        assert f"{star}.sales" not in df.pando.plan.row_filters
        assert any("above 1% of this table's rows" in x for x in df.pando.notes()), df.pando.notes()
        assert_same(df.collect(), full)

    monkeypatch.setattr(row_filters, "ROW_FILTER_DIMENSION_SHARE", 0.1)
    monkeypatch.setenv("PANDO_ROW_FILTER_MIN_ROWS", "30001")  # the default is 1,000,000 (conftest: 0)
    with pruned_sql(spark, catalog, sql) as df:
        assert f"{star}.sales" not in df.pando.plan.row_filters
        assert any("no row filters: 30,000 rows (fewer than 30,001" in x for x in df.pando.notes()), df.pando.notes()
        assert_same(df.collect(), full)
    monkeypatch.setenv("PANDO_ROW_FILTER_MIN_ROWS", "30000")
    with pruned_sql(spark, catalog, sql) as df:
        assert [f.join.column for f in df.pando.plan.row_filters[f"{star}.sales"]] == ["product_key"]

    monkeypatch.setenv("PANDO_ROW_FILTER_MAX_KEYS", "0")  # off
    with pruned_sql(spark, catalog, sql) as df:
        assert not df.pando.plan.row_filters and not df.pando.plan.row_filter_notes


def test_a_join_that_filters_nothing_gets_no_row_filter(spark, catalog, star):
    sql = (f"SELECT count(*) AS n, sum(f.quantity) AS q, sum(f.amount) AS r FROM {star}.sales f "
           f"JOIN {star}.products p ON f.product_key = p.product_key")
    with pruned_sql(spark, catalog, sql) as df:
        assert not df.pando.plan.row_filters.get(f"{star}.sales")
        assert_same(df.collect(), run_sql(spark, catalog, sql, use_layout=False).rows)


def test_bounded_key_reader_never_returns_a_truncated_set(spark):
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    spark.sql(f"DROP TABLE IF EXISTS {NS}.dim_nulls")
    spark.sql(f"CREATE TABLE {NS}.dim_nulls (k BIGINT, a STRING) USING iceberg")
    spark.sql(f"INSERT INTO {NS}.dim_nulls VALUES (NULL, 'x'), (NULL, 'x'), (1, 'x'), (2, 'x'), (3, 'y')")
    schema = arrow_schema_of(spark.table(f"{NS}.dim_nulls"))
    join = JoinFilter("fk", f"{NS}.dim_nulls", "k", TableFilter("a = 'x'", schema, table=f"{NS}.dim_nulls"))
    provider = SparkKeyProvider(spark, {})
    assert np.array_equal(provider.at_most(2)(join), [1, 2])  # the NULL keys do not count against the limit
    with pytest.raises(TooManyKeys, match="more than 1 keys"):
        provider.at_most(1)(join)


def test_keys_of_a_large_dimension_read_by_spark_and_bounded(spark, catalog, star, monkeypatch):
    """Above joinKeys.maxDimensionRows the keys come from a Spark job that stops one row past the limit."""
    brand = star_brand(3, 0)
    sql = brand_query(star, brand, correlated=True)
    n = spark.sql(f"SELECT count(*) FROM {star}.products WHERE p_brand = '{brand}'").first()[0]
    full = run_sql(spark, catalog, sql, use_layout=False).rows
    monkeypatch.setenv("PANDO_JOIN_KEYS_MAX_DIMENSION_ROWS", "0")
    monkeypatch.setenv("PANDO_JOIN_PRUNING_MAX_DIMENSION_ROWS", "0")
    caches.KEY_SETS.clear()
    with pruned_sql(spark, catalog, sql) as df:
        (f,) = df.pando.plan.row_filters[f"{star}.sales"]
        assert f.source == "spark" and len(keys_array(f.keys)) == n
        assert_same(df.collect(), full)
    monkeypatch.setattr(row_filters, "ROW_FILTER_KEY_SHARE", (n - 1) / 1600)
    caches.KEY_SETS.clear()
    caches.TOO_MANY_KEYS.clear()
    with pruned_sql(spark, catalog, sql) as df:
        assert f"{star}.sales" not in df.pando.plan.row_filters
        assert any(f"more than {n - 1:,} keys" in x for x in df.pando.notes()), df.pando.notes()
        assert_same(df.collect(), full)
    assert len(caches.KEY_SETS) == 0  # the stopped read left no key set in the cache
    with pruned_sql(spark, catalog, sql) as df:  # the same literals again: not read a second time
        assert any(f"more than {n - 1:,} keys (an earlier read" in x for x in df.pando.notes()), df.pando.notes()
    monkeypatch.setattr(row_filters, "ROW_FILTER_KEY_SHARE", 0.1)  # a larger limit reads again
    with pruned_sql(spark, catalog, sql) as df:
        assert [f.join.column for f in df.pando.plan.row_filters[f"{star}.sales"]] == ["product_key"]


def test_an_empty_key_set_keeps_no_row(spark, catalog, star):
    sql = brand_query(star, "no such brand")
    with pruned_sql(spark, catalog, sql) as df:
        (f,) = df.pando.plan.row_filters[f"{star}.sales"]
        assert len(keys_array(f.keys)) == 0
        rows = df.collect()
    assert rows[0]["n"] == 0 and [tuple(r) for r in rows] == [tuple(r) for r in spark.sql(sql).collect()]


def test_integer_keys_are_a_local_relation_built_in_the_jvm(spark):
    """``iceberg_jvm.long_column``: every int64 (the extremes included) comes back exactly, the
    column is a non-null bigint, and the semi-join with it broadcasts a LocalTableScan."""
    from pyspark.sql import functions as F

    from pando_iceberg.spark import iceberg_jvm as jv

    values = np.array([5, -(2**63), 2**63 - 1, 0, 5], dtype=np.int64)
    keys = jv.long_column(spark, values, "k")
    assert keys is not None, "the Janino helper did not compile"
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in keys.schema.fields] == [("k", "bigint", False)]
    assert [r.k for r in keys.collect()] == values.tolist()
    facts = spark.range(0, 10_000).withColumnRenamed("id", "fk")
    step = np.arange(0, 10_000, 7, dtype=np.int64)
    keys = jv.long_column(spark, step, "k")
    kept = facts.join(F.broadcast(keys), facts.fk == keys.k, "left_semi")
    assert sorted(r.fk for r in kept.collect()) == step.tolist()
    assert "LocalTableScan" in executed(kept) and "LeftSemi" in executed(kept)
    assert jv.long_column(spark, np.array([], dtype=np.int64), "k").count() == 0


def test_integer_keys_become_a_view_of_a_local_relation_in_one_call(spark):
    """``iceberg_jvm.long_view`` (no Dataset analysed): the view reads every int64 exactly (the
    extremes and a duplicate included) as a non-null bigint, a semi-join with it keeps exactly
    the facts whose key is in it (the same rows as through ``long_column``), and
    ``drop_temp_views`` removes the views (and a name that is no view) in one call."""
    from pando_iceberg.spark import iceberg_jvm as jv

    values = np.array([5, -(2**63), 2**63 - 1, 0, 5], dtype=np.int64)
    assert jv.long_view(spark, values, "k", "rf_lv1"), "the Janino helper did not compile"
    view = spark.table("rf_lv1")
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in view.schema.fields] == [("k", "bigint", False)]
    assert [r.k for r in view.collect()] == values.tolist()
    step = np.arange(0, 10_000, 7, dtype=np.int64)
    assert jv.long_view(spark, step, "k", "rf_lv2")
    jv.long_column(spark, step, "k").createOrReplaceTempView("rf_lc2")
    spark.range(0, 10_000).withColumnRenamed("id", "fk").createOrReplaceTempView("rf_facts")
    kept = [sorted(r.fk for r in spark.sql(f"SELECT /*+ BROADCAST({v}) */ f.fk FROM rf_facts f "
                                           f"LEFT SEMI JOIN {v} ON f.fk = {v}.k").collect())
            for v in ("rf_lv2", "rf_lc2")]
    assert kept[0] == kept[1] == step.tolist()
    jv.drop_temp_views(spark, ["rf_lv1", "rf_lv2", "rf_no_such_view"])
    assert not spark.catalog.tableExists("rf_lv1") and not spark.catalog.tableExists("rf_lv2")
    assert spark.catalog.tableExists("rf_lc2")
    jv.drop_temp_views(spark, ["rf_lc2", "rf_facts"])
    assert not spark.catalog.tableExists("rf_lc2")


def test_a_compiled_helper_costs_one_py4j_round_trip(spark, monkeypatch):
    """The Janino helpers are called as methods of an instance of their compiled class: a key
    view and dropping views are one py4j command each (through ``Method.invoke`` they were two
    plus one per argument)."""
    from pando_iceberg.spark import iceberg_jvm as jv

    values = np.arange(5, dtype=np.int64)
    assert jv.long_view(spark, values, "k", "rf_rt0")  # compiled now
    client = spark.sparkContext._gateway._gateway_client
    sent = []
    send = client.send_command
    monkeypatch.setattr(client, "send_command", lambda *a, **k: (sent.append(a[0]), send(*a, **k))[1])
    assert jv.long_view(spark, values, "k", "rf_rt1")
    assert len(sent) == 1
    jv.drop_temp_views(spark, ["rf_rt0", "rf_rt1"])
    assert len(sent) == 2
    monkeypatch.undo()
    assert not spark.catalog.tableExists("rf_rt0") and not spark.catalog.tableExists("rf_rt1")


def test_pruned_sql_leaves_no_view_behind(spark, catalog, star):
    """The staged scans' and key sets' views live only while Spark analyses the query."""
    def temp_views() -> set[str]:  # the session catalog's own list (listTables cannot describe them)
        found = spark._jsparkSession.sessionState().catalog().listLocalTempViews("*")
        return {str(found.apply(i).table()) for i in range(found.size())}

    before = temp_views()
    sql = brand_query(star, star_brand(2, 3))
    with pruned_sql(spark, catalog, sql) as df:
        assert df.pando.plan.row_filters, "the query should have a row filter"
        rows = df.collect()
        assert temp_views() == before
    assert_same(rows, spark.sql(sql).collect())


def test_semi_join_sql_quotes_the_column_and_an_empty_set_keeps_no_row(spark):
    """The subquery a row-filtered table becomes: a column named like a keyword works, every key
    view is broadcast, and an empty key set (no view) keeps no row."""
    from pando_iceberg.spark import iceberg_jvm as jv
    from pando_iceberg.spark.pruned import KEY_COLUMN, semi_join_sql

    spark.range(0, 100).selectExpr("id AS `order`", "id % 7 AS b").createOrReplaceTempView("rf_t")
    jv.long_column(spark, np.array([3, 5, 99, 1000], dtype=np.int64), KEY_COLUMN).createOrReplaceTempView("rf_k1")
    jv.long_column(spark, np.array([5, 99], dtype=np.int64), KEY_COLUMN).createOrReplaceTempView("rf_k2")
    sub = semi_join_sql("rf_t", [("order", "rf_k1"), ("order", "rf_k2")])
    assert "BROADCAST(rf_k1, rf_k2)" in sub and "`order`" in sub
    df = spark.sql(f"SELECT * FROM {sub} AS x")
    assert sorted(r["order"] for r in df.collect()) == [5, 99]
    assert "BroadcastHashJoin" in executed(df) and "SortMergeJoin" not in executed(df)
    empty = semi_join_sql("rf_t", [("order", "rf_k1"), ("b", None)])
    assert spark.sql(f"SELECT count(*) FROM {empty} AS x").first()[0] == 0


def test_a_key_set_estimated_far_above_the_limit_is_not_read(spark, catalog, star, monkeypatch):
    """``planner.row_filters.estimated_key_share``: every ``ESTIMATE_EVERY``-th row of the dimension's columns
    gives the share of keys a join keeps (within sampling error of the true share); a row filter
    whose estimate is past ``ESTIMATE_MARGIN`` × its limit reads no key set and says why, and one
    estimated near the limit is still read and decided on its exact count. Results stay exact."""
    brand = star_brand(1, 1)
    sql = brand_query(star, brand)
    n = spark.sql(f"SELECT count(*) FROM {star}.products WHERE p_brand = '{brand}'").first()[0]
    full = run_sql(spark, catalog, sql, use_layout=False).rows
    monkeypatch.setattr(row_filters, "ESTIMATE_MIN_ROWS", 1_000)  # products: 1,600 rows
    monkeypatch.setattr(row_filters, "ESTIMATE_EVERY", 2)
    monkeypatch.setenv("PANDO_JOIN_PRUNING_MAX_DIMENSION_ROWS", "0")  # no key set read for join pruning first
    with pruned_sql(spark, catalog, sql) as df:  # the estimate is within the limit: read, filtered
        assert [f.join.column for f in df.pando.plan.row_filters[f"{star}.sales"]] == ["product_key"]
        join = df.pando.plan.row_filters[f"{star}.sales"][0].join
    share = estimated_key_share(catalog, join)
    assert share is not None and abs(share - n / 1600) < 4 * math.sqrt(0.25 / 800), (share, n)

    monkeypatch.setattr(row_filters, "ROW_FILTER_KEY_SHARE", n / 1600 / 4)  # a quarter of what the brand keeps
    caches.KEY_SETS.clear()
    read = []
    monkeypatch.setattr(keysets, "_read_keys", lambda *a: read.append(a) or pytest.fail("a key set was read"))
    with pruned_sql(spark, catalog, sql) as df:
        assert f"{star}.sales" not in df.pando.plan.row_filters
        assert any("estimated on one row in 2 " in x for x in df.pando.notes()), df.pando.notes()
        assert_same(df.collect(), full)
    assert not read

    monkeypatch.undo()
    monkeypatch.setattr(row_filters, "ESTIMATE_MIN_ROWS", 1_000)
    monkeypatch.setenv("PANDO_JOIN_PRUNING_MAX_DIMENSION_ROWS", "0")
    # just under: estimated near, read, refused
    monkeypatch.setattr(row_filters, "ROW_FILTER_KEY_SHARE", (n - 1) / 1600)
    caches.KEY_SETS.clear()
    with pruned_sql(spark, catalog, sql) as df:
        assert f"{star}.sales" not in df.pando.plan.row_filters
        assert any(f"{n:,} keys (more than {n - 1:,}" in x for x in df.pando.notes()), df.pando.notes()
        assert_same(df.collect(), full)


@pytest.fixture
def pando_conf(spark):
    """Set ``spark.sql.pando.*`` settings on the test session; unset again afterwards."""
    keys: list[str] = []

    def set_(name: str, value: str) -> None:
        keys.append(f"spark.sql.pando.{name}")
        spark.conf.set(keys[-1], value)

    yield set_
    for key in keys:
        spark.conf.unset(key)


def test_the_sessions_settings_decide_row_filters_over_the_environment(spark, catalog, star, pando_conf, monkeypatch):
    """``spark.sql.pando.rowFilter.minRows`` of the session wins over ``$PANDO_ROW_FILTER_MIN_ROWS``
    (conftest: 0) and over the default; set with ``SET`` in SQL too, read at each planning."""
    brand = star_brand(1, 1)
    sql = brand_query(star, brand)
    full = run_sql(spark, catalog, sql, use_layout=False).rows
    with pruned_sql(spark, catalog, sql) as df:  # the environment's 0: the 30,000-row fact is filtered
        assert [f.join.column for f in df.pando.plan.row_filters[f"{star}.sales"]] == ["product_key"]
    pando_conf("rowFilter.minRows", "30001")
    with pruned_sql(spark, catalog, sql) as df:
        assert f"{star}.sales" not in df.pando.plan.row_filters
        assert any("no row filters: 30,000 rows (fewer than 30,001" in x for x in df.pando.notes()), df.pando.notes()
        assert_same(df.collect(), full)
    spark.sql("SET spark.sql.pando.rowFilter.minRows = 30000")
    with pruned_sql(spark, catalog, sql) as df:
        assert [f.join.column for f in df.pando.plan.row_filters[f"{star}.sales"]] == ["product_key"]
        assert_same(df.collect(), full)
    monkeypatch.setenv("PANDO_ROW_FILTER_MAX_KEYS", "0")  # the environment: off, unless the session says
    with pruned_sql(spark, catalog, sql) as df:
        assert not df.pando.plan.row_filters
    pando_conf("rowFilter.maxKeys", "1000000")
    with pruned_sql(spark, catalog, sql) as df:
        assert [f.join.column for f in df.pando.plan.row_filters[f"{star}.sales"]] == ["product_key"]


def test_a_bad_session_setting_names_its_key(spark, catalog, star, pando_conf):
    pando_conf("rowFilter.maxKeys", "lots")
    with pytest.raises(ValueError, match=r"spark\.sql\.pando\.rowFilter\.maxKeys='lots' is not accepted: "
                                         r"an integer >= 0"):
        pruned_sql(spark, catalog, brand_query(star, star_brand(1, 1)))


def test_join_pruning_limit_as_a_session_setting_and_a_scan_option(spark, catalog, star, pando_conf, monkeypatch):
    """``joinPruning.maxDimensionRows`` decides whether the products' key set (1,600 rows) is
    read for join pruning: in Spark from the session, in ``pando_iceberg.scan`` from its options
    (``pando.<name>``), both over the environment."""
    import pando_iceberg

    joined = (f"product_key IN (SELECT product_key FROM {star}.products WHERE p_brand = '{star_brand(1, 1)}')")
    sql = f"SELECT count(*) FROM {star}.sales WHERE {joined}"

    def spark_joins() -> list:
        caches.KEY_SETS.clear()
        with pruned_sql(spark, catalog, sql) as df:
            return df.pando.explains[f"{star}.sales"].joins

    def scan_joins(**options: str) -> list:
        caches.KEY_SETS.clear()
        scan = pando_iceberg.scan(catalog.load_table(f"{star}.sales"), joined, options=options)
        return scan.explain().joins

    assert spark_joins() and scan_joins()  # the default: 100,000 rows
    pando_conf("joinPruning.maxDimensionRows", "1599")
    assert not spark_joins() and scan_joins()  # the session's setting is not the scan's
    assert not scan_joins(**{"pando.joinPruning.maxDimensionRows": "1599"})
    pt = pando_iceberg.PandoTable(catalog, f"{star}.sales")
    assert not pt.scan(joined, options={"pando.joinPruning.maxDimensionRows": "1599"}).explain().joins
    monkeypatch.setenv("PANDO_JOIN_PRUNING_MAX_DIMENSION_ROWS", "0")
    assert not scan_joins()
    assert scan_joins(**{"pando.joinPruning.maxDimensionRows": "1600"})
    pando_conf("joinPruning.maxDimensionRows", "1600")
    assert spark_joins()
    with pytest.raises(ValueError, match=r"scan option .pando\.joinPruning\.rows. is not a Pando setting; accepted: "):
        scan_joins(**{"pando.joinPruning.rows": "1"})
