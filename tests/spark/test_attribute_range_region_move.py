"""Attribute-range cuts on an integer attribute of a two-attribute template, after the dimension
changes (differential): customers whose keys, in load order, say nothing about their region;
the fact laid out for ``c_region_key = ? AND c_segment = ?`` (cuts ``c_region_key < c`` and
``c_segment < c`` among them); then customers move between region groups, and customers of
regions never seen (below and above every value) arrive with fact rows. Every query of a few
templates (held-out regions and segments, an IN list, a range) returns through
``pando_iceberg.spark.sql`` exactly what ``spark.sql`` returns, before and after the change and
after ``refresh_literal_cuts``; ``layout_health`` lists exactly the literal cuts whose key sets
are stale, the region cuts among them with what changed."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from _attribute_range import assert_exact, expected_stale, literal_cuts

from pando_iceberg.maintenance.literal_cuts import refresh_literal_cuts
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table
from pando_iceberg.table import PandoTable

pytestmark = pytest.mark.spark

NS = "attrmove"
FACT = f"{NS}.sales"
SEGMENTS = ["AUTO", "BUILD", "FURN", "HOUSE", "MACH"]
JOIN = "FROM {ns}.sales f JOIN {ns}.customers c ON f.customer_key = c.customer_key "
TEMPLATES = [
    "SELECT count(*) AS n, sum(f.amount) AS a " + JOIN + "WHERE c.c_region_key = {r} AND c.c_segment = '{s}'",
    "SELECT c.c_region_key, count(*) AS n " + JOIN + "WHERE c.c_region_key IN ({r}, {r2}) GROUP BY c.c_region_key",
    "SELECT f.sale_id, f.amount " + JOIN + "WHERE c.c_region_key >= {r} AND c.c_segment = '{s}' AND f.amount > 400",
]


def _queries(pairs: list[tuple[int, str]]) -> list[str]:
    return [t.format(ns=NS, r=r, r2=r + 1, s=s) for r, s in pairs for t in TEMPLATES]


@pytest.fixture(scope="module")
def laid_out(spark, catalog, lakehouse_cfg):
    rng = np.random.default_rng(7)
    n_cust, n_fact = 400, 6000
    keys = rng.permutation(np.arange(1, n_cust + 1))  # load order: the key says nothing about the region
    customers = pd.DataFrame({"customer_key": keys.astype(np.int64),
                              "c_region_key": rng.integers(1, 6, n_cust).astype(np.int32),
                              "c_segment": np.array(SEGMENTS)[rng.integers(0, len(SEGMENTS), n_cust)]})
    sales = pd.DataFrame({"sale_id": np.arange(n_fact, dtype=np.int64),
                          "customer_key": rng.integers(1, n_cust + 1, n_fact).astype(np.int64),
                          "amount": rng.integers(1, 501, n_fact).astype(np.int64)})  # exact sums
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    for t in ("sales", "customers"):
        spark.sql(f"DROP TABLE IF EXISTS {NS}.{t}")
    spark.createDataFrame(customers).writeTo(f"{NS}.customers").create()
    spark.createDataFrame(sales.iloc[:3000]).writeTo(f"{NS}.sales").create()
    spark.createDataFrame(sales.iloc[3000:]).writeTo(f"{NS}.sales").append()
    train = [TEMPLATES[0].format(ns=NS, r=r, s=s) for r, s in ((2, "AUTO"), (2, "FURN"), (4, "HOUSE"), (1, "MACH"))]
    rewrite_table(spark, f"{NS}.sales", train, RewriteOptions(k=2, sample_rate=1.0, min_block_rows=500, seed=1,
                                                             max_template_regression="off"),
                  io_properties=lakehouse_cfg.pyiceberg_properties())


def test_customers_moving_between_region_groups_keep_results_exact(spark, catalog, lakehouse_cfg, laid_out):
    cuts = [c for c in literal_cuts(catalog, FACT) if re.fullmatch(r"c_region_key < \d+", c.origin.predicate)]
    assert cuts, [c.origin.predicate for c in literal_cuts(catalog, FACT)]
    held_out = [(3, "BUILD"), (5, "AUTO"), (3, "MACH"), (5, "HOUSE")]
    assert assert_exact(spark, catalog, FACT, _queries(held_out + [(2, "AUTO")])) > 0  # the cuts prune
    assert PandoTable(catalog, f"{NS}.sales").health().stale_cuts == ()

    # Customers with laid-out fact rows move: one from the lowest region to the highest (across
    # every region cut), one from the highest to the lowest; customers of regions 0 and 9 (below
    # and above every value) arrive with fact rows, outside the layout.
    moved = [spark.sql(f"SELECT c.customer_key FROM {NS}.customers c JOIN {NS}.sales f "
                       f"ON f.customer_key = c.customer_key WHERE c.c_region_key = {r} "
                       "GROUP BY c.customer_key ORDER BY count(*) DESC, c.customer_key LIMIT 1").first()[0]
             for r in (1, 5)]
    spark.sql(f"UPDATE {NS}.customers SET c_region_key = 5 WHERE customer_key = {moved[0]}")
    spark.sql(f"UPDATE {NS}.customers SET c_region_key = 1 WHERE customer_key = {moved[1]}")
    spark.sql(f"INSERT INTO {NS}.customers VALUES (401, 0, 'AUTO'), (402, 9, 'FURN')")
    spark.sql(f"INSERT INTO {NS}.sales VALUES (9000, 401, 450), (9001, 402, 20), (9002, {moved[0]}, 30)")
    segment = {r[0]: r[1] for r in spark.sql(f"SELECT customer_key, c_segment FROM {NS}.customers "
                                             f"WHERE customer_key IN ({moved[0]}, {moved[1]})").collect()}
    changed = [(0, "AUTO"), (9, "FURN"), (1, segment[moved[1]]), (5, segment[moved[0]]), (4, "HOUSE")]
    queries = _queries(changed + held_out)
    assert_exact(spark, catalog, FACT, queries)
    assert spark.sql(TEMPLATES[0].format(ns=NS, r=0, s="AUTO")).first()["n"] == 1

    # layout_health lists exactly the stale cuts; every region cut the moves cross is among them.
    expected = expected_stale(spark, catalog, FACT, f"{NS}.customers", "customer_key")
    assert {c.origin.predicate for c in cuts} <= expected
    health = PandoTable(catalog, f"{NS}.sales").health()
    stale = {s.cut.split(" WHERE ", 1)[1][:-1]: s for s in health.stale_cuts}
    assert set(stale) == expected, (set(stale), expected)
    assert "refresh_literal_cuts" in health.recommendation
    for c in cuts:
        s = stale[c.origin.predicate]
        assert s.attribute == "c_region_key" and s.change is not None
        assert s.change.new_values == 2 and s.change.keys_changed == 2 and s.change.keys_new == 2

    # After the refresh the key sets decide the cuts again: exact, and still pruning.
    refresh_literal_cuts(spark, f"{NS}.sales", lakehouse_cfg.pyiceberg_properties())
    assert assert_exact(spark, catalog, FACT, queries) > 0
    assert {s.cut.split(" WHERE ", 1)[1][:-1] for s in PandoTable(catalog, f"{NS}.sales").health().stale_cuts} \
        == expected_stale(spark, catalog, FACT, f"{NS}.customers", "customer_key")
