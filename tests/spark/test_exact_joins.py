"""Joins through Pando answer exactly what plain Spark answers: outer joins whose null-supplying
side has predicates in a later ON, a RIGHT JOIN's ON or an OR; parenthesised joins; temporary
views; Iceberg snapshot, branch and time-travel reads; and a seeded set of random join shapes.

The fact table is laid out on the columns the queries predicate (quantity, date_key, sale_id),
so a wrong pruning filter does skip files and changes the answer.
"""

from __future__ import annotations

import random

import pytest

import pando_iceberg.spark
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table

pytestmark = pytest.mark.spark

NS = "xjoin"

ISSUE_QUERIES = [
    # a later inner JOIN's ON names the nullable side of an earlier LEFT JOIN
    "SELECT count(*), count(f.sale_id) FROM {ns}.store s LEFT JOIN {ns}.sales f "
    "ON f.sale_id = s.store_key * 1000 + 1 "
    "JOIN {ns}.date_dim d ON d.date_key = s.store_key AND (f.sale_id IS NULL OR f.quantity >= 5)",
    # a RIGHT JOIN's ON names a table an earlier LEFT JOIN made nullable
    "SELECT count(*), count(f.sale_id), count(s.store_key), count(d.date_key) FROM {ns}.store s LEFT JOIN {ns}.sales f "
    "ON f.sale_id = s.store_key * 1000 + 1 "
    "RIGHT JOIN {ns}.date_dim d ON d.date_key = s.store_key AND (f.sale_id IS NULL OR f.quantity >= 5)",
    # the same inside an OR
    "SELECT count(*), count(f.sale_id) FROM {ns}.store s LEFT JOIN {ns}.sales f "
    "ON f.sale_id = s.store_key * 1000 + 1 "
    "JOIN {ns}.date_dim d ON (d.date_key = s.store_key AND f.quantity >= 5) "
    "OR (d.date_key = s.store_key + 1 AND f.sale_id IS NULL)",
]

PARENTHESISED = [
    "SELECT count(*), count(f.sale_id), sum(f.quantity) FROM {ns}.date_dim d LEFT JOIN "
    "({ns}.store s JOIN {ns}.sales f ON s.store_key = f.store_key AND f.quantity >= 8) "
    "ON d.date_key = f.date_key WHERE d.d_month = 2",
    "SELECT count(*), sum(f.quantity) FROM ({ns}.store s JOIN {ns}.sales f ON s.store_key = f.store_key) "
    "WHERE f.quantity <= 2 AND s.s_sqft < 2000",
    "SELECT count(*), count(s.store_key) FROM {ns}.date_dim d JOIN "
    "({ns}.sales f LEFT JOIN {ns}.store s ON s.store_key = f.store_key AND s.s_sqft > 4000) "
    "ON d.date_key = f.date_key WHERE f.quantity = 9 AND (s.s_sqft IS NULL OR d.d_month = 3)",
]

SALES_WORKLOAD = [
    "SELECT * FROM {ns}.sales WHERE quantity >= 5",
    "SELECT * FROM {ns}.sales WHERE quantity <= 2",
    "SELECT * FROM {ns}.sales WHERE date_key BETWEEN 30 AND 90",
    "SELECT * FROM {ns}.sales WHERE sale_id < 20000",
]


def make_star(spark, catalog, cfg, ns: str = NS):
    """store (100 rows), date_dim (365), sales (60,000, laid out by quantity, date_key, sale_id)."""
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    for t in ("store", "date_dim", "sales"):
        spark.sql(f"DROP TABLE IF EXISTS {ns}.{t}")
    spark.sql(f"CREATE TABLE {ns}.store USING iceberg AS SELECT CAST(id AS INT) AS store_key, "
              "CAST(pmod(id * 7919, 5000) AS INT) AS s_sqft, CAST(id % 5 AS INT) AS s_region FROM range(1, 101)")
    spark.sql(f"CREATE TABLE {ns}.date_dim USING iceberg AS SELECT CAST(id AS INT) AS date_key, "
              "CAST((id - 1) DIV 31 + 1 AS INT) AS d_month FROM range(1, 366)")
    spark.sql(f"CREATE TABLE {ns}.sales USING iceberg TBLPROPERTIES ('format-version'='2') AS SELECT "
              "id + 1 AS sale_id, CAST(pmod(hash(id, 1), 100) + 1 AS INT) AS store_key, "
              "CAST(pmod(hash(id, 2), 365) + 1 AS INT) AS date_key, CAST(pmod(hash(id, 3), 10) + 1 AS INT) AS quantity "
              "FROM range(0, 60000)")
    rewrite_table(spark, f"{ns}.sales", [w.format(ns=ns) for w in SALES_WORKLOAD],
                  RewriteOptions(k=2, sample_rate=1.0, min_block_rows=2000, seed=1),
                  io_properties=cfg.pyiceberg_properties())


@pytest.fixture(scope="module")
def star(spark, catalog, lakehouse_cfg):
    make_star(spark, catalog, lakehouse_cfg)
    return NS


def pruned_and_plain(spark, catalog, sql):
    """(rows through Pando, rows of plain Spark, Pando's notes), rows sorted."""
    want = sorted(map(tuple, spark.sql(sql).collect()), key=repr)
    with pando_iceberg.spark.sql(spark, sql, catalog=catalog) as df:
        got = sorted(map(tuple, df.collect()), key=repr)
        notes = df.pando.notes()
    return got, want, notes


def assert_exact(spark, catalog, sql):
    got, want, notes = pruned_and_plain(spark, catalog, sql)
    assert got == want, (sql, notes)
    return notes


def test_the_layout_prunes_the_fact_by_quantity(spark, catalog, star):
    """The premise of the tests below: a quantity predicate skips fact files."""
    with pando_iceberg.spark.sql(spark, f"SELECT count(*) FROM {star}.sales WHERE quantity >= 5",
                                catalog=catalog) as df:
        df.collect()
        ex = df.pando.explains[f"{star}.sales"]
    assert ex.pando_files < ex.total_files, ex


@pytest.mark.parametrize("sql", ISSUE_QUERIES)
def test_outer_join_null_supplying_side_is_not_pruned(spark, catalog, star, sql):
    assert_exact(spark, catalog, sql.format(ns=star))


@pytest.mark.parametrize("sql", PARENTHESISED)
def test_parenthesised_joins(spark, catalog, star, sql):
    notes = assert_exact(spark, catalog, sql.format(ns=star))
    assert any(n.startswith(f"{star}.sales: ") for n in notes), notes  # planned by Pando, not left out


def test_temporary_view_joined_with_an_iceberg_table(spark, catalog, star):
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW xj_big_stores AS SELECT * FROM {star}.store WHERE s_sqft > 2500")
    try:
        for sql in [
            f"SELECT count(*), sum(f.quantity) FROM xj_big_stores v JOIN {star}.sales f ON f.store_key = v.store_key "
            "WHERE f.quantity >= 5",
            f"SELECT count(*) FROM {star}.sales f JOIN xj_big_stores v ON f.store_key = v.store_key "
            "WHERE v.s_region = 2 AND f.quantity <= 2",
            f"SELECT count(*) FROM xj_big_stores v LEFT JOIN {star}.sales f ON f.store_key = v.store_key "
            "AND f.quantity = 3",
        ]:
            assert_exact(spark, catalog, sql)
    finally:
        spark.catalog.dropTempView("xj_big_stores")


def test_snapshot_branch_and_time_travel_reads_are_never_served_the_current_files(spark, catalog, star):
    """A read of another snapshot is answered from that snapshot: after rows are deleted, the
    old snapshot, a branch made before, and VERSION/TIMESTAMP AS OF still see them."""
    table = catalog.load_table(f"{star}.sales")
    old = table.current_snapshot()
    spark.sql(f"ALTER TABLE {star}.sales CREATE OR REPLACE BRANCH xj_before")
    spark.sql(f"DELETE FROM {star}.sales WHERE quantity >= 9")
    try:
        for name in (f"{star}.sales.snapshot_id_{old.snapshot_id}", f"{star}.sales.branch_xj_before",
                     f"{star}.sales.branch_main", f"{star}.sales VERSION AS OF {old.snapshot_id}",
                     f"{star}.sales VERSION AS OF 'xj_before'"):
            for sql in [f"SELECT count(*), sum(quantity) FROM {name} f WHERE f.quantity >= 9",
                        f"SELECT count(*) FROM {name} f JOIN {star}.store s ON s.store_key = f.store_key "
                        f"WHERE f.quantity >= 5 AND s.s_sqft < 3000",
                        f"SELECT count(*) FROM {star}.sales g JOIN {name} f ON f.sale_id = g.sale_id "
                        "WHERE f.quantity >= 9"]:
                assert_exact(spark, catalog, sql)
        got, want, notes = pruned_and_plain(
            spark, catalog, f"SELECT count(*) FROM {star}.sales.snapshot_id_{old.snapshot_id} WHERE quantity >= 9")
        assert got == want and want[0][0] > 0, (got, want)
        assert any("Spark" in n for n in notes), notes  # not pruned with the current snapshot's files
    finally:
        spark.sql(f"ALTER TABLE {star}.sales DROP BRANCH IF EXISTS xj_before")


def test_metadata_tables_and_unknown_names(spark, catalog, star):
    assert_exact(spark, catalog, f"SELECT count(*) FROM {star}.sales.files")
    assert_exact(spark, catalog, f"SELECT count(*) FROM {star}.sales.snapshots s JOIN {star}.store t ON true")
    missing = f"SELECT * FROM {star}.no_such_table"
    with pytest.raises(Exception) as spark_error:
        spark.sql(missing).collect()
    with pytest.raises(Exception) as pando_error:  # Spark's own error, not one of Pando's
        pando_iceberg.spark.sql(spark, missing, catalog=catalog).collect()
    assert str(spark_error.value).splitlines()[0] in str(pando_error.value)


JOINS = ["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"]
PREDICATES = {  # strict ones, and ones that hold on NULL (they must not prune a nullable side)
    "s": ["s.s_sqft < 2500", "s.s_region = 1", "s.s_sqft IS NULL", "(s.s_sqft IS NULL OR s.s_sqft < 2500)"],
    "f": ["f.quantity >= 5", "f.quantity <= 2", "f.date_key BETWEEN 30 AND 90", "f.sale_id < 20000",
          "f.sale_id IS NULL", "(f.sale_id IS NULL OR f.quantity >= 5)", "coalesce(f.quantity, 0) < 3"],
    "d": ["d.d_month = 2", "d.date_key > 300", "(d.date_key IS NULL OR d.d_month = 2)"],
}
ON = {  # dense (every store has sales) and sparse (most rows find no partner) equi-joins
    ("s", "f"): ["s.store_key = f.store_key", "f.sale_id = s.store_key * 1000 + 1"],
    ("f", "d"): ["f.date_key = d.date_key", "f.sale_id = d.date_key * 150 + 7"],
    ("s", "d"): ["d.date_key = s.store_key"],
}


def _random_query(rng: random.Random, ns: str) -> str:
    order = rng.sample(["s", "f", "d"], 3)
    names = {"s": f"{ns}.store s", "f": f"{ns}.sales f", "d": f"{ns}.date_dim d"}

    def on(a: str, b: str, visible: tuple[str, ...]) -> str:
        """The equi-join of a and b, and predicates over any table the ON can see."""
        key = (a, b) if (a, b) in ON else (b, a)
        parts = [rng.choice(ON[key])] + [rng.choice(PREDICATES[t]) for t in visible if rng.random() < 0.4]
        if rng.random() < 0.3:  # an OR over two tables
            x, y = rng.sample(visible, 2)
            parts.append(f"({rng.choice(PREDICATES[x])} OR {rng.choice(PREDICATES[y])})")
        return " AND ".join(parts)

    j1, j2 = rng.choice(JOINS), rng.choice(JOINS)
    a, b, c = order
    if rng.random() < 0.3:  # a parenthesised right input
        from_ = (f"{names[a]} {j2} ({names[b]} {j1} {names[c]} ON {on(b, c, (b, c))}) "
                 f"ON {on(a, rng.choice([b, c]), order)}")
    else:
        from_ = (f"{names[a]} {j1} {names[b]} ON {on(a, b, (a, b))} "
                 f"{j2} {names[c]} ON {on(rng.choice([a, b]), c, order)}")
    where = [rng.choice(PREDICATES[t]) for t in order if rng.random() < 0.4]
    return ("SELECT count(*), count(f.sale_id), count(s.store_key), count(d.date_key) FROM " + from_
            + (" WHERE " + " AND ".join(where) if where else ""))


def test_random_join_shapes_are_exact(spark, catalog, star):
    rng = random.Random(51)
    wrong, failed = [], []
    for _ in range(30):
        sql = _random_query(rng, star)
        try:
            got, want, notes = pruned_and_plain(spark, catalog, sql)
        except Exception as e:  # plain Spark answers every one of them
            failed.append((sql, f"{type(e).__name__}: {str(e)[:200]}"))
            continue
        if got != want:
            wrong.append((sql, got, want, notes))
    assert not wrong and not failed, (len(wrong), len(failed), wrong, failed)
