"""Star schemas without declared keys (issue 14): join-induced cuts from uniqueness on the data,
join pruning by FK bounds for every fact file, and the cases where neither may cut (a dimension
column that stops being unique, rows appended to a dimension, outer joins).

Differential: every pruned result equals the unpruned result of the same snapshot, through
pyiceberg (``plan_scan`` + ``read_arrow``) and Spark (``run_sql``). Counts and integer sums are
compared exactly; the float revenue sum with a relative tolerance of 1e-9 (the plans sum the
same doubles in a different order).
"""

from __future__ import annotations

import math
import re

import pyarrow as pa
import pytest
from sqlglot import exp, parse_one

from pando_iceberg.bench.datasets import generate_star, load_star, star_brand
from pando_iceberg.bench.workloads import star_split
from pando_iceberg.planner import plan_scan, read_arrow
from pando_iceberg.planner.scan import layout_of
from pando_iceberg.spark.pruned import run_sql
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table

pytestmark = pytest.mark.spark

REL_TOL = 1e-9  # float sums only; integers exactly
SF = 0.01  # 30,000 fact rows
TEMPLATES = [1, 2, 3, 8]  # brand, month, region (multi-hop), brand in region


def qualify(sql: str, ns: str) -> str:
    tree = parse_one(sql, read="spark")
    for t in tree.find_all(exp.Table):
        t.set("db", exp.to_identifier(ns))
    return tree.sql(dialect="spark")


def assert_same_rows(got, want):
    assert len(got) == len(want)
    for a, b in zip(sorted(map(tuple, got), key=repr), sorted(map(tuple, want), key=repr)):
        for x, y in zip(a, b):
            if isinstance(x, float) or isinstance(y, float):
                assert (x is None) == (y is None) and (x is None or math.isclose(x, y, rel_tol=REL_TOL)), (a, b)
            else:
                assert x == y, (a, b)


def assert_spark_exact(spark, catalog, sql):
    pruned = run_sql(spark, catalog, sql)
    full = run_sql(spark, catalog, sql, use_layout=False)
    assert_same_rows(pruned.rows, full.rows)
    return pruned


def assert_pyiceberg_exact(catalog, name, flt):
    table = catalog.load_table(name)
    pruned, full = plan_scan(table, flt), plan_scan(table, flt, use_layout=False)
    key = [("sale_id", "ascending")]
    got, want = read_arrow(table, pruned).sort_by(key), read_arrow(table, full).sort_by(key)
    assert got.num_rows == want.num_rows and got.equals(want), flt
    return pruned


def _laid_out(spark, catalog, lakehouse_cfg, ns, declare=False):
    # dimension keys in load order (as loaders assign them): a brand or a region is no key range,
    # so the layout cuts on them through join-induced (literal) cuts
    load_star(spark, catalog, SF, seed=5, namespace=ns, batch_rows=3000, keys="load-order")
    if declare:
        for t, k in [("dates", "date_key"), ("stores", "store_key"), ("regions", "region_key"),
                     ("customers", "customer_key"), ("products", "product_key")]:
            spark.sql(f"ALTER TABLE {ns}.{t} SET IDENTIFIER FIELDS {k}")
    train, test = star_split(4, seed=2, templates=TEMPLATES)
    result = rewrite_table(spark, f"{ns}.sales", [qualify(s, ns) for _, s in train],
                           # the guard off: the fact arrives in date order, which the guard may keep
                           # instead of the join-induced cuts these tests are about
                           RewriteOptions(k=2, sample_rate=1.0, min_block_rows=2000, seed=1,
                                          max_template_regression="off"),
                           io_properties=lakehouse_cfg.pyiceberg_properties())
    return {"ns": ns, "train": train, "test": test, "result": result}


@pytest.fixture(scope="module")
def undeclared(spark, catalog, lakehouse_cfg):
    return _laid_out(spark, catalog, lakehouse_cfg, "star14u")


def _literal_cuts(catalog, name):
    _, layout, _ = layout_of(catalog.load_table(name), cache=None)
    return [c for c in layout.cuts if hasattr(c, "origin")]


def test_undeclared_star_gets_join_induced_cuts_and_prunes(spark, catalog, undeclared):
    ns = undeclared["ns"]
    assert not catalog.load_table(f"{ns}.products").schema().identifier_field_ids  # plain, nothing declared
    cuts = _literal_cuts(catalog, f"{ns}.sales")
    assert cuts, "a layout on an undeclared star must have join-induced (literal) cuts"
    assert {c.origin.dim_table for c in cuts} & {f"{ns}.products", f"{ns}.stores", f"{ns}.dates"}
    read = total = 0
    for template, sql in undeclared["train"] + undeclared["test"]:
        pruned = assert_spark_exact(spark, catalog, qualify(sql, ns))
        ex = pruned.explains[f"{ns}.sales"]
        assert ex.joins, f"template {template}: every join should be decided ({ex.notes})"
        read, total = read + ex.pando_files, total + ex.iceberg_files
    assert read < 0.7 * total, (read, total)


def test_undeclared_pyiceberg_filters_and_multi_hop_chain(catalog, undeclared):
    ns = undeclared["ns"]
    cut_regions = {re.search(r"r_name = '([^']+)'", c.origin.predicate).group(1)
                   for c in _literal_cuts(catalog, f"{ns}.sales") if "r_name" in c.origin.predicate}
    assert cut_regions, "the layout should cut on trained regions (sales → stores → regions)"
    region = sorted(cut_regions)[0]
    chain = (f"store_key IN (SELECT store_key FROM {ns}.stores WHERE region_key IN "
             f"(SELECT region_key FROM {ns}.regions WHERE r_name = '{region}'))")
    plan = assert_pyiceberg_exact(catalog, f"{ns}.sales", chain)
    assert plan.explain.pando_files < plan.explain.total_files, plan.explain
    assert plan.explain.joins and plan.explain.joins[0]["keys"] == 40  # the 40 stores of one region
    for brand in (star_brand(2, 3), star_brand(7, 7)):  # trained or not: exact
        assert_pyiceberg_exact(catalog, f"{ns}.sales",
                               f"product_key IN (SELECT product_key FROM {ns}.products WHERE p_brand = '{brand}')")


def test_outer_join_nullable_side_is_not_pruned(spark, catalog, undeclared):
    ns = undeclared["ns"]
    brand = star_brand(1, 1)
    preserved = (f"SELECT count(*) AS n, sum(f.quantity) AS q, count(p.product_key) AS matched FROM {ns}.sales f "
                 f"LEFT JOIN {ns}.products p ON f.product_key = p.product_key AND p.p_brand = '{brand}'")
    nullable = (f"SELECT count(*) AS n, count(f.sale_id) AS sales, sum(f.amount) AS revenue FROM {ns}.products p "
                f"LEFT JOIN {ns}.sales f ON f.product_key = p.product_key WHERE p.p_brand = '{brand}'")
    for sql in (preserved, nullable):
        pruned = assert_spark_exact(spark, catalog, sql)
        ex = pruned.explains[f"{ns}.sales"]
        assert ex.join_files_pruned == 0 and not ex.joins
        assert ex.pando_files == ex.iceberg_files == ex.total_files  # the fact has no usable filter
    assert run_sql(spark, catalog, preserved).rows[0]["n"] == 30_000


def test_correlated_subqueries_prune_the_fact_and_stay_exact(spark, catalog, undeclared):
    """``[NOT] EXISTS (SELECT .. FROM sales f WHERE f.store_key = s.store_key ..)`` reads only the
    sales of the stores the outer query keeps (workload/extraction.py, step 4): fewer fact files,
    the same rows as the unpruned scan, for EXISTS and NOT EXISTS alike; and a correlated
    scalar subquery over the fact (TPC-H Q17's shape)."""
    ns = undeclared["ns"]
    region = sorted({re.search(r"r_name = '([^']+)'", c.origin.predicate).group(1)
                     for c in _literal_cuts(catalog, f"{ns}.sales") if "r_name" in c.origin.predicate})[0]
    outer = (f"FROM {ns}.stores s JOIN {ns}.regions r ON s.region_key = r.region_key WHERE r.r_name = '{region}' AND ")
    # one sale in q: about 1.9 (q = 40) or 0.6 (q = 120) per store, so some stores have none
    inner = f"(SELECT 1 FROM {ns}.sales f WHERE f.store_key = s.store_key AND f.sale_id % {{q}} = 0)"
    counts = {}
    for neg in ("", "NOT "):
        for q in (40, 120):
            sql = f"SELECT count(*) AS n, sum(s.store_key) AS k {outer}{neg}EXISTS {inner.format(q=q)}"
            pruned = assert_spark_exact(spark, catalog, sql)
            ex = pruned.explains[f"{ns}.sales"]
            assert ex.joins and ex.pando_files < ex.total_files, (sql, ex.notes)
            counts[neg, q] = pruned.rows[0]["n"]
    # TPC-H Q17's shape: the fact read twice, joined to a dimension and correlated to it by a
    # scalar subquery; both occurrences share the join, so the fact is pruned by it
    brand = star_brand(2, 3)
    q17 = (f"SELECT count(*) AS n, sum(f.quantity) AS q FROM {ns}.sales f JOIN {ns}.products p "
           f"ON f.product_key = p.product_key WHERE p.p_brand = '{brand}' AND f.quantity > "
           f"(SELECT avg(f2.quantity) FROM {ns}.sales f2 WHERE f2.product_key = p.product_key)")
    pruned = assert_spark_exact(spark, catalog, q17)
    ex = pruned.explains[f"{ns}.sales"]
    assert ex.joins and ex.pando_files < ex.total_files and pruned.rows[0]["n"] > 0, ex.notes
    # TPC-H Q21's shape: correlated to the fact's own outer occurrence, joined to the stores
    q21 = (f"SELECT count(*) AS n, sum(f1.quantity) AS q FROM {ns}.sales f1 JOIN {ns}.stores s "
           f"ON f1.store_key = s.store_key JOIN {ns}.regions r ON s.region_key = r.region_key "
           f"WHERE r.r_name = '{region}' AND NOT EXISTS (SELECT 1 FROM {ns}.sales f2 "
           f"WHERE f2.store_key = f1.store_key AND f2.date_key = f1.date_key AND f2.sale_id <> f1.sale_id)")
    pruned = assert_spark_exact(spark, catalog, q21)
    ex = pruned.explains[f"{ns}.sales"]
    assert ex.joins and ex.pando_files < ex.total_files and pruned.rows[0]["n"] > 0, ex.notes
    stores = run_sql(spark, catalog, f"SELECT count(*) AS n {outer}TRUE").rows[0]["n"]
    assert all(counts["", q] + counts["NOT ", q] == stores for q in (40, 120))  # the two split the region's stores
    assert all(counts[neg, q] > 0 for neg in ("", "NOT ") for q in (40, 120))  # both sides non-empty


def test_declared_keys_star(spark, catalog, lakehouse_cfg):
    d = _laid_out(spark, catalog, lakehouse_cfg, "star14d", declare=True)
    ns = d["ns"]
    assert _literal_cuts(catalog, f"{ns}.sales")
    for _, sql in d["test"]:
        assert_spark_exact(spark, catalog, qualify(sql, ns))
    assert_pyiceberg_exact(catalog, f"{ns}.sales",
                           f"date_key IN (SELECT date_key FROM {ns}.dates WHERE d_year = 2023 AND d_month = 6)")


def test_held_out_values_pruned_by_fk_bounds_without_a_layout(spark, catalog):
    """No layout, no workload: a fact in arrival (date) order prunes a month it was never
    told about by ``date_key`` bounds, and a fact clustered by product prunes any brand."""
    ns = "star14h"
    load_star(spark, catalog, SF, seed=7, namespace=ns, batch_rows=3000)  # 10 files in date order
    month = f"date_key IN (SELECT date_key FROM {ns}.dates WHERE d_year = 2023 AND d_month = 2)"
    plan = assert_pyiceberg_exact(catalog, f"{ns}.sales", month)
    ex = plan.explain
    assert ex.fallback_reason == "the table has no Pando layout"
    assert ex.total_files == 10 and ex.join_files_pruned >= 7 and ex.pando_files == 10 - ex.join_files_pruned

    sales = generate_star(30_000, seed=7)["sales"].sort_by("product_key")
    name = f"{ns}.sales_by_product"
    try:
        catalog.drop_table(name)
    except Exception:
        pass
    table = catalog.create_table(name, schema=sales.schema)
    for batch in sales.to_batches(max_chunksize=3000):
        table.append(pa.Table.from_batches([batch]))
    spark.sql(f"REFRESH TABLE {name}")
    brand = star_brand(5, 6)
    plan = assert_pyiceberg_exact(catalog, name,
                                  f"product_key IN (SELECT product_key FROM {ns}.products WHERE p_brand = '{brand}')")
    assert plan.explain.join_files_pruned >= 8
    sql = (f"SELECT count(*) AS n, sum(f.quantity) AS q, sum(f.amount) AS r FROM {name} f "
           f"JOIN {ns}.products p ON f.product_key = p.product_key WHERE p.p_brand = '{brand}'")
    pruned = assert_spark_exact(spark, catalog, sql)
    assert pruned.explains[name].join_files_pruned >= 8 and pruned.rows[0]["n"] > 0


def test_dimension_appended_then_no_longer_unique(spark, catalog, lakehouse_cfg):
    d = _laid_out(spark, catalog, lakehouse_cfg, "star14n")
    ns = d["ns"]
    brand = star_brand(0, 0)
    flt = f"product_key IN (SELECT product_key FROM {ns}.products WHERE p_brand = '{brand}')"
    sql = (f"SELECT count(*) AS n, sum(f.quantity) AS q, sum(f.amount) AS r FROM {ns}.sales f "
           f"JOIN {ns}.products p ON f.product_key = p.product_key WHERE p.p_brand = '{brand}'")
    before = assert_spark_exact(spark, catalog, sql).rows[0]["n"]

    # rows appended to the dimension (a new product of the brand) and fact rows using it
    spark.sql(f"INSERT INTO {ns}.products VALUES (90001, '{brand}', 'BOOKS', 12.5)")
    spark.sql(f"INSERT INTO {ns}.sales VALUES (900000, 20230115, 1, 1, 90001, 3, 37.5), "
              f"(900001, 20240115, 2, 2, 90001, 1, 12.5)")
    plan = assert_pyiceberg_exact(catalog, f"{ns}.sales", flt)
    assert plan.explain.files_outside_layout >= 1
    assert assert_spark_exact(spark, catalog, sql).rows[0]["n"] == before + 2

    # a dimension column the layout cut through stops being unique: its literal cuts are ignored,
    # with a note; a row of that dimension is duplicated as it is
    def cut_filter_of(cut) -> str:
        return f"{cut.column} IN (SELECT {cut.origin.dim_pk} FROM {cut.origin.dim_table} WHERE {cut.origin.predicate})"

    # a cut whose own filter prunes (the learning draws may add cuts that decide no file alone)
    cut = next(c for c in _literal_cuts(catalog, f"{ns}.sales")
               if (e := plan_scan(catalog.load_table(f"{ns}.sales"), cut_filter_of(c)).explain).pando_files
               < e.total_files)
    dim, pk = cut.origin.dim_table, cut.origin.dim_pk
    cut_filter = cut_filter_of(cut)
    before = plan_scan(catalog.load_table(f"{ns}.sales"), cut_filter).explain
    assert before.pando_files < before.total_files and not any("no longer unique" in n for n in before.notes)
    spark.sql(f"INSERT INTO {dim} SELECT * FROM {dim} WHERE {pk} = (SELECT min({pk}) FROM {dim})")
    # the note comes with the queries that join that dimension (the others decide its cuts by
    # the key's nullness alone and do not load it)
    for flt, joins_it in ((cut_filter, True), (flt, dim.split(".")[-1] == "products")):
        plan = assert_pyiceberg_exact(catalog, f"{ns}.sales", flt)
        assert any("no longer unique" in n for n in plan.explain.notes) == joins_it, plan.explain.notes
        assert plan.explain.used_layout
    agg = f"SELECT count(*) AS n, sum(quantity) AS q, sum(amount) AS r FROM {ns}.sales WHERE {cut_filter}"
    pruned = assert_spark_exact(spark, catalog, agg)
    # Spark's parse attaches no join through a column that is no longer unique: nothing to decide
    # the literal cuts with, so every file Iceberg keeps is read
    ex = pruned.explains[f"{ns}.sales"]
    assert ex.pando_files == ex.iceberg_files and not any("literal cuts on" in n for n in ex.notes), ex.notes
    assert_spark_exact(spark, catalog, sql)


def test_literal_cuts_decided_by_predicates_until_the_dimension_changes(spark, catalog, lakehouse_cfg, monkeypatch):
    """§5: while a dimension holds the rows a literal cut's keys were read from (its snapshot, or
    `replace` snapshots after it), the trees compare the query's dimension predicate with the
    cut's own and read no key set; after an update they compare key sets. Here a product moves
    from an uncut brand into a cut brand: deciding by predicates then would miss its fact rows."""
    from pando_iceberg.planner import caches

    # No key set for join pruning, nor for the draws' foreign-key ranges (spark.rewrite_common.keyed_draws):
    # the layout cuts by literal cuts only, and only the trees decide.
    monkeypatch.setenv("PANDO_JOIN_PRUNING_MAX_DIMENSION_ROWS", "0")
    monkeypatch.setenv("PANDO_ROW_FILTER_MAX_KEYS", "0")  # nor for row filters: the trees' reads are counted
    d = _laid_out(spark, catalog, lakehouse_cfg, "star14p")
    ns = d["ns"]
    cuts = _literal_cuts(catalog, f"{ns}.sales")
    assert cuts and all(c.origin.exact_at for c in cuts)
    assert any(dict(c.origin.exact_at).keys() == {f"{ns}.stores", f"{ns}.regions"} for c in cuts)  # the chain

    def run_all(expect: str):
        caches.KEY_SETS.clear()
        read = total = decided = 0
        for _, sql in d["test"]:
            pruned = assert_spark_exact(spark, catalog, qualify(sql, ns))
            ex = pruned.explains[f"{ns}.sales"]
            how = [n for n in ex.notes if n.startswith("literal cuts on")]
            assert all(f"decided {expect}" in n for n in how), how
            decided += bool(how)
            read, total = read + ex.pando_files, total + ex.iceberg_files
        assert decided >= len(d["test"]) // 2, decided  # most held-out queries meet a literal cut
        return read, total

    read, total = run_all("by comparing predicates")
    assert len(caches.KEY_SETS) == 0, "no key set may be read while predicates decide"
    assert read < 0.8 * total, (read, total)

    # a single-table cut `col = value` (e.g. d_year = 2024) and a dimension row with fact rows outside it
    cut = next(c for c in cuts if c.origin.tables() == [c.origin.dim_table] and re.fullmatch(r"\w+ = \S+", c.origin.predicate))
    dim, pk, pred = cut.origin.dim_table, cut.origin.dim_pk, cut.origin.predicate
    sql = (f"SELECT count(*) AS n, sum(f.quantity) AS q, sum(f.amount) AS r FROM {ns}.sales f "
           f"JOIN {dim} d ON f.{cut.column} = d.{pk} WHERE d.{pred}")
    flt = f"{cut.column} IN (SELECT {pk} FROM {dim} WHERE {pred})"

    # Iceberg's own compaction of the dimension is a `replace`: same rows, predicates still decide
    spark.sql(f"CALL {lakehouse_cfg.catalog.name}.system.rewrite_data_files(table => '{dim}', "
              "options => map('rewrite-all', 'true'))")
    assert "by comparing predicates" in " ".join(assert_spark_exact(spark, catalog, sql).explains[f"{ns}.sales"].notes)

    # that row moves into the cut (an UPDATE: the dimension's rows change)
    moved = spark.sql(f"SELECT f.{cut.column} FROM {ns}.sales f JOIN {dim} d ON f.{cut.column} = d.{pk} "
                      f"WHERE NOT (d.{pred}) GROUP BY f.{cut.column} ORDER BY count(*) DESC LIMIT 1").first()[0]
    before = spark.sql(sql).first()["n"]
    spark.sql(f"UPDATE {dim} SET {pred} WHERE {pk} = {moved}")
    pruned = assert_spark_exact(spark, catalog, sql)
    assert pruned.rows[0]["n"] > before  # the moved row's fact rows now match
    assert any("decided by key sets" in n for n in pruned.explains[f"{ns}.sales"].notes)
    assert any("decided by key sets" in n for n in assert_pyiceberg_exact(catalog, f"{ns}.sales", flt).explain.notes)


def test_key_sets_above_the_row_limit_go_to_spark_or_stay_undecided(spark, catalog):
    """A dimension above the row limit: run_sql's key reader hands it to Spark (same keys as
    pyiceberg's); the pyiceberg planner alone leaves that join undecided, reads every file and
    says why. Cached key sets are per dimension snapshot."""
    from pando_iceberg.planner.caches import KEY_SETS
    from pando_iceberg.planner.keysets import dimension_keys
    from pando_iceberg.spark.pruned import with_join_keys
    from pando_iceberg.spark.rewrite import namespace_schemas

    ns = "star14h"
    load_star(spark, catalog, SF, seed=7, namespace=ns, batch_rows=3000)  # kept if the earlier test made it
    table = catalog.load_table(f"{ns}.sales")
    tf = plan_scan(table, f"date_key IN (SELECT date_key FROM {ns}.dates WHERE d_year = 2023 AND d_month = 2)").filter
    KEY_SETS.clear()
    small = dimension_keys(catalog, tf.joins[0])
    assert small.source == "pyiceberg" and len(small.keys) == 28
    assert dimension_keys(catalog, tf.joins[0]).source == "cache"
    KEY_SETS.clear()
    big = dimension_keys(catalog, tf.joins[0], row_limit=100)
    assert big.keys is None and "more than 100 rows" in big.source
    keyed = with_join_keys(spark, table, tf, namespace_schemas(spark, f"{ns}.sales"), row_limit=100)
    assert keyed.joins[0].key_source == "spark" and list(keyed.joins[0].dim_keys) == list(small.keys)
    plan = plan_scan(table, keyed)
    assert plan.explain.joins[0]["source"] == "supplied (spark)" and plan.explain.join_files_pruned >= 7


def test_brands_never_named_are_pruned_by_foreign_key_range_cuts(spark, catalog, lakehouse_cfg):
    """Range cuts on a foreign key (issue 14 item 4): the training brands' key sets imply ranges
    of ``product_key`` (products are keyed by category and brand, as a loader assigns them);
    the layout cuts on those ranges, and a brand no training query named — no literal cut of
    its own — is decided by its key set's range: the trees choose fewer blocks than its
    predicate alone lets them. Exact through pyiceberg and Spark."""
    ns = "star14r"
    load_star(spark, catalog, SF, seed=9, namespace=ns, batch_rows=3000)
    trained = [star_brand(c, 0) for c in range(0, 8, 2)]  # brand 1 of categories 1, 3, 5, 7
    sql = ("SELECT count(*) AS n, sum(f.quantity) AS q, sum(f.amount) AS r FROM {ns}.sales f "
           "JOIN {ns}.products p ON f.product_key = p.product_key WHERE p.p_brand = '{brand}'")
    rewrite_table(spark, f"{ns}.sales", [sql.format(ns=ns, brand=b) for b in trained],
                  RewriteOptions(k=1, sample_rate=1.0, min_block_rows=2000, seed=1, template_draws=0),
                  io_properties=lakehouse_cfg.pyiceberg_properties())
    table = catalog.load_table(f"{ns}.sales")
    _, layout, _ = layout_of(table, cache=None)
    assert any(not hasattr(c, "origin") and c.columns == {"product_key"} for c in layout.cuts), layout.cuts

    held_out = star_brand(3, 5)  # category 4: between two trained categories' ranges
    flt = f"product_key IN (SELECT product_key FROM {ns}.products WHERE p_brand = '{held_out}')"
    plan = assert_pyiceberg_exact(catalog, f"{ns}.sales", flt)
    predicate_only, _ = layout.blocks_for(plan_scan(table, flt, use_layout=False).filter)
    assert plan.explain.blocks_chosen < len(predicate_only) <= layout.num_blocks, (plan.explain, len(predicate_only))
    assert any(n.startswith("range cuts on product_key decided by its join's key set") for n in plan.explain.notes)
    pruned = assert_spark_exact(spark, catalog, sql.format(ns=ns, brand=held_out))
    assert pruned.explains[f"{ns}.sales"].blocks_chosen == plan.explain.blocks_chosen
    assert pruned.rows[0]["n"] > 0
