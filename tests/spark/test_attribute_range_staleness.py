"""Attribute-range cuts after their dimension changes (differential): a fact of a few thousand rows
and a dimension of a few hundred whose keys, in load order, say nothing about the brand; laid
out with attribute-range cuts (``p_brand < c``); then the dimension changes — a product moves to
a brand of another group, products of brands never seen (below, between and above every value)
and of a known brand arrive with fact rows. Every query of a few star-join templates (a point
and an IN list on the brand, across the changed values) returns through
``pando_iceberg.spark.sql`` exactly what ``spark.sql`` returns, before and after the change,
after incremental layouts (with the stale and with the refreshed key sets) and after
``refresh_literal_cuts``; ``layout_health`` lists exactly
the cuts whose key sets are stale, what changed, and the CALL that refreshes them."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from _attribute_range import assert_exact, expected_stale, keys_now, literal_cuts

from pando_iceberg.maintenance.literal_cuts import refresh_literal_cuts
from pando_iceberg.procedures import ProcedureContext, call
from pando_iceberg.spark.incremental import incremental_rewrite
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table
from pando_iceberg.table import PandoTable

pytestmark = pytest.mark.spark

NS = "attrstale"
FACT = f"{NS}.sales"
BRANDS = [f"B{i:02d}" for i in range(30)]
TRAINED = ["B03", "B11", "B17", "B24"]

TEMPLATES = [
    "SELECT count(*) AS n, sum(f.quantity) AS q FROM {ns}.sales f JOIN {ns}.products p "
    "ON f.product_key = p.product_key WHERE p.p_brand = '{a}'",
    "SELECT p.p_brand, count(*) AS n, sum(f.quantity) AS q FROM {ns}.sales f JOIN {ns}.products p "
    "ON f.product_key = p.product_key WHERE p.p_brand IN ('{a}', '{b}') GROUP BY p.p_brand",
    "SELECT f.sale_id, f.quantity, f.amount FROM {ns}.sales f JOIN {ns}.products p "
    "ON f.product_key = p.product_key WHERE p.p_brand = '{a}' AND f.quantity > 2",
    "SELECT count(*) AS n FROM {ns}.sales f WHERE f.product_key IN "
    "(SELECT product_key FROM {ns}.products WHERE p_brand IN ('{a}', '{b}', '{c}'))",
]


def _queries(ns: str, brands: list[str]) -> list[str]:
    out = []
    for i, a in enumerate(brands):
        b, c = brands[(i + 1) % len(brands)], brands[(i + 2) % len(brands)]
        out += [t.format(ns=ns, a=a, b=b, c=c) for t in TEMPLATES]
    return out


def _brand_cuts(catalog):
    return [c for c in literal_cuts(catalog, FACT) if re.fullmatch(r"p_brand < '[^']+'", c.origin.predicate)]


def _keys_now(spark, cut) -> set[int]:
    return keys_now(spark, f"{NS}.products", "product_key", cut)


def _expected_stale(spark, catalog) -> set[str]:
    return expected_stale(spark, catalog, FACT, f"{NS}.products", "product_key")


@pytest.fixture(scope="module")
def star(spark, catalog, lakehouse_cfg):
    rng = np.random.default_rng(43)
    keys = rng.permutation(np.arange(1, 301))  # load order: the key says nothing about the brand
    products = pd.DataFrame({"product_key": keys.astype(np.int64),
                             "p_brand": np.array(BRANDS)[rng.integers(0, len(BRANDS), 300)],
                             "p_price": np.round(rng.uniform(1, 100, 300), 2)})
    sales = pd.DataFrame({"sale_id": np.arange(4000, dtype=np.int64),
                          "product_key": rng.integers(1, 301, 4000).astype(np.int64),
                          "quantity": rng.integers(1, 6, 4000).astype(np.int64),
                          "amount": np.round(rng.uniform(1, 500, 4000), 2)})
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    for t in ("sales", "products"):
        spark.sql(f"DROP TABLE IF EXISTS {NS}.{t}")
    spark.createDataFrame(products).writeTo(f"{NS}.products").create()
    spark.createDataFrame(sales.iloc[:2000]).writeTo(f"{NS}.sales").create()
    spark.createDataFrame(sales.iloc[2000:]).writeTo(f"{NS}.sales").append()
    train = [TEMPLATES[0].format(ns=NS, a=b) for b in TRAINED]
    rewrite_table(spark, f"{NS}.sales", train, RewriteOptions(k=2, sample_rate=1.0, min_block_rows=500, seed=1),
                  io_properties=lakehouse_cfg.pyiceberg_properties())
    return ProcedureContext(lakehouse_cfg, catalog, lambda: spark)


def _health(ctx):
    return call(ctx, f"CALL pando.system.layout_health(table => '{NS}.sales')").rows


def test_changed_dimension_keeps_results_exact_and_health_lists_stale_cuts(spark, catalog, lakehouse_cfg, star):
    cuts = _brand_cuts(catalog)
    assert len(cuts) >= 3, [c.origin.predicate for c in cuts]
    held_out = [b for b in BRANDS if b not in TRAINED]
    assert assert_exact(spark, catalog, FACT, _queries(NS, held_out[:8] + TRAINED[:2])) > 0  # the cuts prune
    health = PandoTable(catalog, f"{NS}.sales").health()
    assert health.status == "ok" and health.stale_cuts == () and health.recommendation == "ok"
    assert not any(r[0] == "stale_cut" for r in _health(star))

    # A product with fact rows (laid out) moves to a brand of another group.
    bounds = sorted(re.fullmatch(r"p_brand < '([^']+)'", c.origin.predicate).group(1) for c in cuts)
    moved, old = spark.sql(f"SELECT p.product_key, p.p_brand FROM {NS}.products p JOIN {NS}.sales f "
                           f"ON f.product_key = p.product_key WHERE p.p_brand < '{bounds[0]}' "
                           "GROUP BY p.product_key, p.p_brand ORDER BY count(*) DESC, p.product_key LIMIT 1").first()
    new = max(BRANDS)  # at or above every boundary: the move crosses each cut below it
    spark.sql(f"UPDATE {NS}.products SET p_brand = '{new}' WHERE product_key = {moved}")
    # Brands never seen (below, between and above every value) and a known brand's new product,
    # with fact rows appended (outside the layout).
    spark.sql(f"INSERT INTO {NS}.products VALUES (301, 'A00', 1.0), (302, '{bounds[0]}x', 2.0), "
              f"(303, 'Z99', 3.0), (304, '{TRAINED[0]}', 4.0)")
    spark.sql(f"INSERT INTO {NS}.sales VALUES (5000, 301, 2, 10.0), (5001, 302, 3, 20.0), (5002, 303, 4, 30.0), "
              f"(5003, 304, 5, 40.0), (5004, {moved}, 1, 50.0)")
    changed = [old, new, "A00", f"{bounds[0]}x", "Z99", TRAINED[0]]
    queries = _queries(NS, changed) + _queries(NS, held_out[:4])
    assert_exact(spark, catalog, FACT, queries)
    assert spark.sql(TEMPLATES[0].format(ns=NS, a="A00")).first()["n"] == 1

    # layout_health lists exactly the stale cuts: what changed, and the CALL that refreshes them.
    expected = _expected_stale(spark, catalog)
    assert {c.origin.predicate for c in cuts} <= expected  # the moved product crosses every brand cut
    health = PandoTable(catalog, f"{NS}.sales").health()
    stale = {s.cut.split(" WHERE ", 1)[1][:-1]: s for s in health.stale_cuts}
    assert set(stale) == expected, (set(stale), expected)
    assert health.status == "ok" and "refresh_literal_cuts" in health.recommendation
    for s in stale.values():
        assert s.dim_table == f"{NS}.products" and s.attribute == "p_brand"
        assert s.from_snapshot != s.to_snapshot and (s.keys_missing or s.keys_extra)
        assert s.change is not None and s.change.new_values == 3 and s.change.keys_changed == 1
        assert s.change.keys_new == 4 and s.change.keys_gone == 0 and "A00" in s.change.examples
    rows = _health(star)
    texts = [v for m, v in rows if m == "stale_cut"]
    assert len(texts) == len(expected) and all("3 new value(s) of p_brand" in t for t in texts), texts
    assert ("refresh", f"CALL pando.system.refresh_literal_cuts(table => '{NS}.sales')") in rows

    # An incremental layout routes the appended rows with the stale key sets: still exact, the
    # same cuts stale. Then a product of another new brand arrives with a fact row.
    io = lakehouse_cfg.pyiceberg_properties()
    incremental_rewrite(spark, f"{NS}.sales", min_block_rows=1, io_properties=io)
    assert_exact(spark, catalog, FACT, queries)
    assert {s.cut for s in PandoTable(catalog, f"{NS}.sales").health().stale_cuts} == {s.cut for s in stale.values()}
    spark.sql(f"INSERT INTO {NS}.products VALUES (305, 'A01', 5.0)")
    spark.sql(f"INSERT INTO {NS}.sales VALUES (5005, 305, 2, 60.0)")
    queries += _queries(NS, ["A01", "A00"])

    # The refresh takes the newest key (no laid-out fact row) and keeps the others where their
    # laid-out rows are: exact; health lists only the cuts with keys kept stale.
    refresh_literal_cuts(spark, f"{NS}.sales", io)
    assert assert_exact(spark, catalog, FACT, queries) > 0  # key sets decide the cuts now, and still prune
    health = PandoTable(catalog, f"{NS}.sales").health()
    kept = {s.cut.split(" WHERE ", 1)[1][:-1] for s in health.stale_cuts}
    assert kept == _expected_stale(spark, catalog) and kept
    assert all(s.from_snapshot == s.to_snapshot and "kept stale by a refresh" in s.describe()
               for s in health.stale_cuts)
    assert not any(305 in set(c.keys.to_array()) ^ _keys_now(spark, c) for c in literal_cuts(catalog, FACT))
    assert "re-layout" in health.recommendation

    # An incremental layout routes the newest rows with the refreshed key sets: still exact.
    incremental_rewrite(spark, f"{NS}.sales", min_block_rows=1, io_properties=io)
    assert_exact(spark, catalog, FACT, queries)
