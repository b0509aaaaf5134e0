"""The aggregates attribute-range cuts are chosen from, computed in Spark
(``spark/attribute_weights.py``), equal those computed on the dimension's rows in Arrow
(``attribute_ranges.arrow_weights``, what the driver computed before), and so do the groups:
a dimension with keys in load order, NULL and NaN attributes, foreign keys no dimension row has,
NULL foreign keys, and an attribute the keys follow."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pando_iceberg.spark.attribute_weights import spark_weights
from pando_iceberg.spark.rewrite_common import collect_arrow
from pando_iceberg.workload.attribute_ranges import arrow_weights, boundaries

pytestmark = pytest.mark.spark

NS = "attrw"


def _dimension(rows: int = 300) -> pa.Table:
    rng = np.random.default_rng(11)
    keys = rng.permutation(np.arange(1, rows + 1))  # load order: keys say nothing
    brand = np.array([f"Brand#{i:03d}" for i in rng.integers(0, 40, rows)], dtype=object)
    brand[::17] = None
    price = rng.integers(0, 20, rows) + 0.5
    price[::13] = np.nan
    return pa.table({
        "pk": pa.array(keys, pa.int32()),
        "brand": pa.array(brand.tolist(), pa.string()),
        "price": pa.array(price, pa.float64()),
        "day": pa.array((np.datetime64("2024-01-01") + rng.integers(0, 30, rows)).astype("datetime64[D]")),
        "band": pa.array(((keys - 1) // 25).astype(np.int64)),  # the keys follow it
    })


def test_spark_weights_equal_the_arrow_weights(spark):
    dim = _dimension()
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    spark.sql(f"DROP TABLE IF EXISTS {NS}.dim")
    spark.createDataFrame(dim.to_pandas()).writeTo(f"{NS}.dim").create()
    stored = collect_arrow(spark.table(f"{NS}.dim"))  # as Spark types it: what both sides read
    rng = np.random.default_rng(3)
    fks = rng.integers(1, 340, 3000).astype(object)  # keys above 300: no dimension row
    fks[::50] = None
    fact_keys = pa.array(fks.tolist(), pa.int64())
    attrs = ["brand", "price", "day", "band"]
    got = spark_weights(spark, collect_arrow)(f"{NS}.dim", "pk", attrs, fact_keys)
    want = arrow_weights(lambda _, cols: stored.select(list(cols)))(f"{NS}.dim", "pk", attrs, fact_keys)
    assert set(got) == set(attrs)
    for a in attrs:
        g, w = got[a], want[a]
        assert g.follows == w.follows, a
        assert g.values.type == w.values.type and g.values.to_pylist() == w.values.to_pylist(), a
        assert g.weights.tolist() == w.weights.tolist(), a
        for groups in (4, 16):
            assert boundaries(g.values, g.weights, groups) == boundaries(w.values, w.weights, groups), (a, groups)
    assert [got[a].follows for a in attrs] == [False, False, False, True]
    assert len(got["brand"].values) == 40 and 0 < got["brand"].weights.sum() < 3000  # NULLs and strays left out
    assert not np.isnan(np.asarray(got["price"].values.to_pylist(), dtype=float)).any()
