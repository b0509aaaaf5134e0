"""Attribute-range cuts (workload/attribute_ranges.py): join-induced cuts over groups of a
dimension attribute's values, on a star schema whose keys say nothing (pure Python, Arrow).

Every value of the attribute — named in training or not — is decided by each cut from the
query's own predicate, and the decision agrees with the cut's key set on the fact's rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pando_iceberg.bench.datasets import generate_star
from pando_iceberg.bench.workloads import star_split
from pando_iceberg.expr import JoinFilter, TableFilter
from pando_iceberg.workload import arrow_key_provider, parse_workload
from pando_iceberg.workload.attribute_ranges import (
    arrow_weights,
    attribute_range_filters,
    attributes,
    boundaries,
    candidates,
    fact_weights,
    group_count,
    keys_follow,
    split_points,
)

NS = "s"


def _star(rows=30_000):
    tables = generate_star(rows, seed=7, keys="load-order")
    return {f"{NS}.{t}": v for t, v in tables.items()}


def _columns(tables):
    return lambda dim, cols: tables[dim].select(list(cols))


def _workload(tables, templates):
    train, _ = star_split(4, seed=3, templates=templates, namespace=NS, keys="load-order")
    provider = arrow_key_provider(tables)
    wl = parse_workload([s for _, s in train], {k: v.schema for k, v in tables.items()}, unique=provider.is_unique)
    return wl, provider, [q.filters[f"{NS}.sales"] for q in wl.queries]


def test_boundaries_split_the_weight_at_dyadic_quantiles():
    values = pa.array([f"v{i:03d}" for i in range(100)])
    weights = np.ones(100)
    cuts = boundaries(values, weights, 4)
    assert cuts == [25, 50, 75]  # A < v025, A < v050, A < v075: four groups of 25
    skewed = np.r_[np.full(10, 100.0), np.ones(90)]  # the first ten values hold 92 % of the rows
    assert boundaries(values, skewed, 4)[:3] == [3, 5, 8]
    assert boundaries(pa.array(["a", "b", "c"]), np.ones(3), 8) == [1, 2]  # fewer values: each alone
    assert boundaries(pa.array(["a"]), np.ones(1), 8) == []
    assert group_count(30) == 16 and group_count(3) == 4 and group_count(10_000) == 16 and group_count(0) == 2


def test_the_values_near_quantiles_give_the_same_boundaries_as_every_value():
    """Only the values next to a quantile reach the driver (``candidates``, as Spark keeps them):
    the boundaries chosen from them are those chosen from every value, for skewed and even
    weights, powers of two and other group counts, and few values."""
    rng = np.random.default_rng(5)
    for trial in range(300):
        m = int(rng.integers(0, 400))
        values = pa.array(np.sort(rng.choice(10_000, m, replace=False)), pa.int64())
        kind = trial % 3
        weights = (np.ones(m, np.int64) if kind == 0 else rng.integers(1, 5, m) if kind == 1
                   else rng.zipf(1.6, m).clip(1, 10_000))
        for groups in (2, 3, 4, 7, 16, 64):
            c = candidates(False, values, weights, groups)
            got = [c.values[i].as_py() for i in split_points(c.below, c.count, c.total, groups)]
            assert got == [values[i].as_py() for i in boundaries(values, weights, groups)], (trial, m, groups)
            assert len(c.values) <= (max(m - 1, 0) if m <= groups else 2 * (groups - 1) + 2), (trial, m, groups)


def test_fact_weights_join_the_fact_keys_to_the_attribute():
    fact = pa.array([1, 1, 2, 3, 9, None], pa.int64())  # 9: no such dimension row; NULL: no key
    dim_keys = pa.array([3, 1, 2, 4], pa.int32())
    values = pa.array(["b", "a", None, "c"])  # key 2's attribute is NULL: on no TRUE side
    distinct, weights = fact_weights(fact, dim_keys, values)
    assert distinct.to_pylist() == ["a", "b"] and weights.tolist() == [2, 1]
    nan = fact_weights(pa.array([1, 2]), pa.array([1, 2]), pa.array([float("nan"), 1.5]))
    assert nan[0].to_pylist() == [1.5] and nan[1].tolist() == [1]


def test_every_brand_trained_or_not_is_decided_by_every_range_cut():
    tables = _star()
    wl, provider, filters = _workload(tables, [1, 4])
    assert {(j.dim_table, a) for _, j, a in attributes(filters)} == {
        (f"{NS}.products", "p_brand"), (f"{NS}.customers", "c_region_key"), (f"{NS}.customers", "c_segment")}
    fact = tables[f"{NS}.sales"]
    groups = attribute_range_filters(filters, fact, arrow_weights(_columns(tables)), 16)
    cuts = [c for c in wl.join_induced_cuts(f"{NS}.sales", provider, filters=groups)]
    brand_cuts = [c for c in cuts if "p_brand <" in c.origin.predicate]
    assert len(brand_cuts) == 15 and len(cuts) == 15 + 4 + 4  # 5 regions, 5 segments: every value alone
    products = tables[f"{NS}.products"]
    trained = {j.dim_filter.to_sql() for f in filters for j in f.joins}
    brands = pc.unique(products["p_brand"]).to_pylist()
    assert len(brands) == 200 and sum(f"p_brand = '{b}'" in trained for b in brands) <= 4
    fk = fact["product_key"]
    membership = {c.key: c.evaluate(fact) for c in brand_cuts}
    for brand in brands:
        dim = TableFilter(f"p_brand = '{brand}'", products.schema, table=f"{NS}.products")
        join = JoinFilter("product_key", f"{NS}.products", "product_key", dim)
        query = TableFilter(None, fact.schema, [join], f"{NS}.sales")
        keyed = query.with_joins([JoinFilter("product_key", f"{NS}.products", "product_key", dim,
                                             provider(f"{NS}.products", "product_key", dim))])
        rows = pc.is_in(fk, value_set=pa.array(provider(f"{NS}.products", "product_key", dim))).to_numpy(
            zero_copy_only=False)
        for cut in brand_cuts:
            by_predicate, by_keys = query.sides(cut), keyed.sides(cut)
            assert by_predicate.may_true != by_predicate.may_not_true, (brand, cut.key)  # decided
            assert by_predicate == by_keys, (brand, cut.key)
            on_true = membership[cut.key][rows]
            assert on_true.all() if by_predicate.may_true else not on_true.any(), (brand, cut.key)


def test_groups_hold_similar_shares_of_the_fact():
    tables = _star()
    _, _, filters = _workload(tables, [1])
    fact = tables[f"{NS}.sales"]
    groups = attribute_range_filters(filters, fact, arrow_weights(_columns(tables)), 8)
    brand_keys = arrow_key_provider(tables)
    masks = [pc.is_in(fact["product_key"], value_set=pa.array(brand_keys(
        f"{NS}.products", "product_key", g.joins[0].dim_filter))).to_numpy(zero_copy_only=False) for g in groups]
    shares = sorted(m.mean() for m in masks)  # A < c for seven boundaries: about 1/8, 2/8, ..., 7/8
    assert len(shares) == 7
    assert np.allclose(shares, np.arange(1, 8) / 8, atol=0.02), shares


def test_no_range_cuts_where_the_keys_follow_the_attribute():
    """Products keyed by category and brand (the default star): the foreign key's range cuts decide
    every brand already; only the attributes the keys do not follow get attribute-range cuts."""
    assert keys_follow(pa.array([3, 1, 2, 4]), pa.array(["b", "a", "a", "b"]))
    assert not keys_follow(pa.array([1, 2, 3, 4, 5, 6]), pa.array(["a", "b", "a", "b", "a", "b"]))
    tables = {f"{NS}.{t}": v for t, v in generate_star(30_000, seed=7).items()}
    train, _ = star_split(4, seed=3, templates=[1, 4], namespace=NS)
    provider = arrow_key_provider(tables)
    wl = parse_workload([s for _, s in train], {k: v.schema for k, v in tables.items()}, unique=provider.is_unique)
    filters = [q.filters[f"{NS}.sales"] for q in wl.queries]
    groups = attribute_range_filters(filters, tables[f"{NS}.sales"], arrow_weights(_columns(tables)), 16)
    assert {g.joins[0].dim_filter.to_sql().split(" <")[0] for g in groups} == {"c_segment"}
