"""Attribute-range cuts on a star schema whose keys say nothing (dimension keys in load order):
``fact.fk IN (SELECT pk FROM dim WHERE A < c)`` decides brands the training never named, from
the query's own predicate; after the dimension changes (a product moving between groups, new
brands) key sets decide, and every pruned result equals the unpruned one.

Differential: pyiceberg (``plan_scan`` + ``read_arrow``) and Spark (``run_sql``) against the
unpruned scan of the same snapshot."""

from __future__ import annotations

import re

import pytest
from test_star_joins import assert_pyiceberg_exact, assert_spark_exact, qualify

from pando_iceberg.bench.datasets import load_star
from pando_iceberg.bench.workloads import star_split
from pando_iceberg.maintenance.literal_cuts import refresh_literal_cuts
from pando_iceberg.planner.scan import layout_of
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table

pytestmark = pytest.mark.spark

SF = 0.01  # 30,000 fact rows, 1,600 products of 200 brands, keys in load order
TEMPLATES = [1, 4]  # a brand; a customer segment in a region


def _laid_out(spark, catalog, lakehouse_cfg, ns):
    load_star(spark, catalog, SF, seed=5, namespace=ns, batch_rows=3000, keys="load-order")
    train, test = star_split(8, seed=2, templates=TEMPLATES, keys="load-order")
    rewrite_table(spark, f"{ns}.sales", [qualify(s, ns) for _, s in train],
                  RewriteOptions(k=2, sample_rate=1.0, min_block_rows=2000, seed=1),
                  io_properties=lakehouse_cfg.pyiceberg_properties())
    return {"ns": ns, "train": train, "test": test}


def _literal_cuts(catalog, name):
    _, layout, _ = layout_of(catalog.load_table(name), cache=None)
    return [c for c in layout.cuts if hasattr(c, "origin")]


def _brand_sql(ns, brand):
    return (f"SELECT count(*) AS n, sum(f.quantity) AS q, sum(f.amount) AS r FROM {ns}.sales f "
            f"JOIN {ns}.products p ON f.product_key = p.product_key WHERE p.p_brand = '{brand}'")


def _brand_filter(ns, brand):
    return f"product_key IN (SELECT product_key FROM {ns}.products WHERE p_brand = '{brand}')"


@pytest.fixture(scope="module")
def star(spark, catalog, lakehouse_cfg):
    return _laid_out(spark, catalog, lakehouse_cfg, "star43a")


def test_held_out_brands_are_decided_by_range_cuts(spark, catalog, star, monkeypatch):
    from pando_iceberg.planner import caches

    monkeypatch.setenv("PANDO_JOIN_PRUNING_MAX_DIMENSION_ROWS", "0")  # only the trees decide (no FK-bound pruning)
    monkeypatch.setenv("PANDO_ROW_FILTER_MAX_KEYS", "0")
    ns = star["ns"]
    cuts = _literal_cuts(catalog, f"{ns}.sales")
    ranges = [c for c in cuts if re.fullmatch(r"p_brand < '[^']+'", c.origin.predicate)]
    assert len(ranges) >= 3, [c.origin.predicate for c in cuts]
    assert any(re.fullmatch(r"c_segment < '[^']+'", c.origin.predicate) for c in cuts)
    # held-out brands: named by no training query and by no literal cut (the optimizer's own
    # template draws name brands too); the test split's first, then other brands with fact rows
    trained = set(re.findall(r"p_brand = '([^']+)'", " ".join(s for _, s in star["train"])))
    named = trained | {b for c in cuts for b in re.findall(r"'([^']+)'", c.origin.predicate)}
    held_out = sorted(set(re.findall(r"p_brand = '([^']+)'", " ".join(s for _, s in star["test"]))) - named)
    if len(held_out) < 3:
        sold = [r[0] for r in spark.sql(f"SELECT DISTINCT p.p_brand FROM {ns}.sales f JOIN {ns}.products p "
                                        "ON f.product_key = p.product_key ORDER BY 1").collect()]
        held_out += [b for b in sold if b not in named and b not in held_out][:3 - len(held_out)]
    assert len(held_out) >= 2, (sorted(named), held_out)
    caches.KEY_SETS.clear()
    read = total = 0
    for brand in held_out:
        pruned = assert_spark_exact(spark, catalog, _brand_sql(ns, brand))
        assert pruned.rows[0]["n"] > 0
        ex = pruned.explains[f"{ns}.sales"]
        assert any("decided by comparing predicates" in n for n in ex.notes), ex.notes
        read, total = read + ex.pando_files, total + ex.total_files
        assert ex.pando_files < ex.total_files, (brand, ex.notes)
    assert len(caches.KEY_SETS) == 0, "no key set may be read while predicates decide"
    assert read <= 0.5 * total, (read, total)
    for brand in held_out:
        assert_pyiceberg_exact(catalog, f"{ns}.sales", _brand_filter(ns, brand))
    for _, sql in star["test"]:  # every held-out query of both templates
        assert_spark_exact(spark, catalog, qualify(sql, ns))


def test_dimension_changes_keep_range_cuts_exact(spark, catalog, lakehouse_cfg):
    """A product with laid-out fact rows moves across a boundary (``p_brand < c`` TRUE → NOT TRUE),
    and new products of brands never seen (below and above every value) get fact rows: the
    trees compare key sets now, every result is exact, and ``refresh_literal_cuts`` reports the
    moved key as kept stale."""
    d = _laid_out(spark, catalog, lakehouse_cfg, "star43c")
    ns = d["ns"]
    cut = next(c for c in _literal_cuts(catalog, f"{ns}.sales") if re.fullmatch(r"p_brand < '[^']+'",
                                                                                 c.origin.predicate))
    bound = re.fullmatch(r"p_brand < '([^']+)'", cut.origin.predicate).group(1)
    # the product of the most fact rows below the boundary, and a brand at or above it
    moved, old = spark.sql(f"SELECT p.product_key, p.p_brand FROM {ns}.sales f JOIN {ns}.products p "
                           f"ON f.product_key = p.product_key WHERE p.p_brand < '{bound}' "
                           "GROUP BY p.product_key, p.p_brand ORDER BY count(*) DESC LIMIT 1").first()
    new = spark.sql(f"SELECT min(p_brand) FROM {ns}.products WHERE p_brand >= '{bound}'").first()[0]
    assert moved in set(cut.keys)
    before = {b: spark.sql(_brand_sql(ns, b)).first()["n"] for b in (old, new)}
    spark.sql(f"UPDATE {ns}.products SET p_brand = '{new}' WHERE product_key = {moved}")
    moved_rows = spark.sql(f"SELECT count(*) FROM {ns}.sales WHERE product_key = {moved}").first()[0]
    assert moved_rows > 0
    for brand in (old, new, bound):
        pruned = assert_spark_exact(spark, catalog, _brand_sql(ns, brand))
        assert any("decided by key sets" in n for n in pruned.explains[f"{ns}.sales"].notes), brand
        assert_pyiceberg_exact(catalog, f"{ns}.sales", _brand_filter(ns, brand))
    assert spark.sql(_brand_sql(ns, new)).first()["n"] == before[new] + moved_rows
    assert spark.sql(_brand_sql(ns, old)).first()["n"] == before[old] - moved_rows

    # brands never seen, below and above every value, with fact rows (appended: outside the layout)
    spark.sql(f"INSERT INTO {ns}.products VALUES (90001, 'Brand#0', 'BOOKS', 12.5), (90002, 'Brand#~', 'TOYS', 3.0)")
    spark.sql(f"INSERT INTO {ns}.sales VALUES (900000, 20230115, 1, 1, 90001, 3, 37.5), "
              f"(900001, 20240115, 2, 2, 90002, 1, 3.0)")
    for brand in ("Brand#0", "Brand#~", new):
        assert_spark_exact(spark, catalog, _brand_sql(ns, brand))
        assert_pyiceberg_exact(catalog, f"{ns}.sales", _brand_filter(ns, brand))
    assert spark.sql(_brand_sql(ns, "Brand#0")).first()["n"] == 1

    # the refresh keeps the moved key where its laid-out rows are (stale, exact) and says so
    io = lakehouse_cfg.pyiceberg_properties()
    infos = {c.cut: c for c in refresh_literal_cuts(spark, f"{ns}.sales", io).cuts}
    stale = [c for c in infos.values() if c.keys_kept_stale]
    assert stale and all("p_brand" in c.cut for c in stale), [c.row() for c in infos.values()]
    for brand in (old, new, "Brand#0", "Brand#~"):
        assert_spark_exact(spark, catalog, _brand_sql(ns, brand))
        assert_pyiceberg_exact(catalog, f"{ns}.sales", _brand_filter(ns, brand))
