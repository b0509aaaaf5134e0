"""The star-schema dataset of ``pando bench --dataset star`` (issue 14): seeded, vectorized,
the fact in arrival (date) order, correlated dimension attributes, unique NOT NULL keys with
nothing declared, and ≥ 8 star-join templates split into train and held-out draws."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from pando_iceberg.bench.datasets import generate_star
from pando_iceberg.bench.workloads import STAR_TEMPLATES, star_split
from pando_iceberg.workload import arrow_key_provider, parse_workload


def test_star_generator_is_seeded_and_correlated():
    a, b = generate_star(20_000, seed=3), generate_star(20_000, seed=3)
    assert set(a) == {"sales", "dates", "stores", "regions", "customers", "products"}
    assert all(a[t].equals(b[t]) for t in a) and not a["sales"].equals(generate_star(20_000, seed=4)["sales"])
    sales = a["sales"]
    assert sales.num_rows == 20_000
    assert np.all(np.diff(sales["date_key"].to_numpy()) >= 0)  # arrival = date order
    provider = arrow_key_provider({f"s.{t}": v for t, v in a.items()})
    for t, key in [("dates", "date_key"), ("stores", "store_key"), ("regions", "region_key"),
                   ("customers", "customer_key"), ("products", "product_key")]:
        assert provider.is_unique(f"s.{t}", key) and not a[t].schema.field(key).nullable
    assert not provider.is_unique("s.sales", "store_key")
    # a sale's customer lives in the store's region
    store_region = a["stores"]["region_key"].to_numpy()[sales["store_key"].to_numpy() - 1]
    customer_region = a["customers"]["c_region_key"].to_numpy()[sales["customer_key"].to_numpy() - 1]
    assert np.array_equal(store_region, customer_region)
    # every brand belongs to one category
    pairs = a["products"].group_by("p_brand").aggregate([("p_category", "count_distinct")])
    assert pc.max(pairs["p_category_count_distinct"]).as_py() == 1


def test_star_workload_has_eight_plus_templates_train_and_held_out_draws():
    assert len(STAR_TEMPLATES) >= 8
    train, test = star_split(6, seed=0, namespace="s")
    assert len(train) == len(test) == 3 * len(STAR_TEMPLATES)
    assert {t for t, _ in train} == {t for t, _ in test} == set(STAR_TEMPLATES)
    assert set(s for _, s in test) - set(s for _, s in train)  # fresh draws in the held-out half
    assert star_split(6, seed=0, namespace="s") == (train, test)
    tables = generate_star(2_000, seed=1)
    schemas = {f"s.{t}": v.schema for t, v in tables.items()}
    provider = arrow_key_provider({f"s.{t}": v for t, v in tables.items()})
    wl = parse_workload([s for _, s in train + test], schemas, unique=provider.is_unique)
    assert not wl.unsupported
    for q in wl.queries:  # every query filters the fact through join filters only
        f = q.filters["s.sales"]
        assert f.is_true_expr() and f.joins, q.sql


def test_star_load_order_variant_keys_say_nothing():
    """``keys="load-order"``: 200 brands; product, customer and store keys a permutation of the load
    order (uncorrelated with every attribute), the fact's foreign keys mapped with them."""
    a = generate_star(30_000, seed=3, keys="load-order")
    assert all(a[t].equals(generate_star(30_000, seed=3, keys="load-order")[t]) for t in a)
    products, customers, stores, sales = a["products"], a["customers"], a["stores"], a["sales"]
    assert pc.count_distinct(products["p_brand"]).as_py() == 200 and products.num_rows == 1600
    for t, key in [(products, "product_key"), (customers, "customer_key"), (stores, "store_key")]:
        assert t[key].to_pylist() == list(range(1, t.num_rows + 1))  # rows in key (load) order
    category = np.unique(products["p_category"].to_numpy(zero_copy_only=False), return_inverse=True)[1]
    assert abs(np.corrcoef(products["product_key"].to_numpy(), category)[0, 1]) < 0.1
    assert abs(np.corrcoef(customers["customer_key"].to_numpy(), customers["c_region_key"].to_numpy())[0, 1]) < 0.1
    original = generate_star(30_000, seed=3)["products"]
    original_category = np.unique(original["p_category"].to_numpy(zero_copy_only=False), return_inverse=True)[1]
    assert np.corrcoef(original["product_key"].to_numpy(), original_category)[0, 1] > 0.4  # the default: grouped
    # the correlations survive the re-keying: a sale's customer lives in the store's region
    store_region = stores["region_key"].to_numpy()[sales["store_key"].to_numpy() - 1]
    customer_region = customers["c_region_key"].to_numpy()[sales["customer_key"].to_numpy() - 1]
    assert np.array_equal(store_region, customer_region)
    train, test = star_split(6, seed=0, templates=[1], keys="load-order")
    brands = {s.split("'")[1] for _, s in train + test}
    assert brands <= set(products["p_brand"].to_pylist()) and any(len(b) == len("Brand#125") for b in brands)
