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
from pando_iceberg.workload.attribute_ranges import arrow_weights, boundaries, fact_weights, split_points

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
        "code": pa.array([f"C{v:05d}" for v in rng.permutation(99_999)[:rows]]),  # a value per row
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
    attrs = ["brand", "price", "day", "band", "code"]
    spark_side = spark_weights(spark, collect_arrow)
    arrow_side = arrow_weights(lambda _, cols: stored.select(list(cols)))
    everything = dict(zip(attrs, fact_weights_of(stored, fact_keys, attrs)))
    for groups in (4, 16, 64):
        got = spark_side(f"{NS}.dim", "pk", attrs, fact_keys, groups)
        want = arrow_side(f"{NS}.dim", "pk", attrs, fact_keys, groups)
        assert set(got) == set(attrs)
        for a in attrs:
            g, w = got[a], want[a]
            assert (g.follows, g.count, g.total) == (w.follows, w.count, w.total), (a, groups)
            assert g.values.type == w.values.type and g.values.to_pylist() == w.values.to_pylist(), (a, groups)
            assert g.below.tolist() == w.below.tolist(), (a, groups)
            # the groups: those of every value and its weight, as the driver chose them before
            values, weights = everything[a]
            assert [g.values[i].as_py() for i in split_points(g.below, g.count, g.total, groups)] == \
                [values[i].as_py() for i in boundaries(values, weights, groups)], (a, groups)
            assert len(g.values) <= (g.count - 1 if g.count <= groups else 2 * (groups - 1) + 2), (a, groups)
    assert [got[a].follows for a in attrs] == [False, False, False, True, True]
    assert got["brand"].count == 40 and 0 < got["brand"].total < 3000  # NULLs and strays left out
    assert got["code"].count > 200  # a value per row: the driver got a few per quantile (the bound above)
    assert not np.isnan(np.asarray(got["price"].values.to_pylist(), dtype=float)).any()
    # A second foreign key into the same dimension (its own weights; the keys' order read once)
    other = pa.array(rng.integers(1, 60, 500).tolist(), pa.int64())
    again = spark_side(f"{NS}.dim", "pk", ["brand"], other, 4)
    expected = arrow_side(f"{NS}.dim", "pk", ["brand"], other, 4)
    assert again["brand"].values.to_pylist() == expected["brand"].values.to_pylist()
    assert again["brand"].below.tolist() == expected["brand"].below.tolist() and 0 < again["brand"].total <= 500


def fact_weights_of(dim: pa.Table, fact_keys: pa.Array, attrs: list[str]):
    return [fact_weights(fact_keys, dim.column("pk").combine_chunks(), dim.column(a).combine_chunks()) for a in attrs]


def test_keys_follow_decided_by_the_partitions_and_by_the_distinct_values(spark):
    """Whether the keys follow an attribute is the Arrow answer both where the partitions'
    counts decide it (few values in load order: far more changes than values; values in key
    order: about one change per value) and where the dimension's distinct values must be counted."""
    rows = 4000
    rng = np.random.default_rng(5)
    keys = rng.permutation(np.arange(1, rows + 1))
    dim = pa.table({
        "pk": pa.array(keys, pa.int64()),
        "few": pa.array(rng.integers(0, 3, rows)),  # load order: "no" from the partitions' counts
        "ordered": pa.array(((keys - 1) // 400).astype(np.int64)),  # 10 runs of 400 keys: "yes"
        "pairs": pa.array(((keys - 1) // 2).astype(np.int64)),  # a change per two keys: counted
        "noisy": pa.array(np.where(rng.random(rows) < 0.3, -1, (keys - 1) // 50)),  # between them
    })
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    spark.sql(f"DROP TABLE IF EXISTS {NS}.follow")
    spark.createDataFrame(dim.to_pandas()).writeTo(f"{NS}.follow").create()
    stored = collect_arrow(spark.table(f"{NS}.follow"))
    attrs = ["few", "ordered", "pairs", "noisy"]
    fact_keys = pa.array(rng.integers(1, rows + 1, 500).tolist(), pa.int64())
    got = spark_weights(spark, collect_arrow)(f"{NS}.follow", "pk", attrs, fact_keys, 4)
    want = arrow_weights(lambda _, cols: stored.select(list(cols)))(f"{NS}.follow", "pk", attrs, fact_keys, 4)
    assert [got[a].follows for a in attrs] == [want[a].follows for a in attrs]
    assert [got[a].follows for a in attrs][:3] == [False, True, True]


def _same(a, b) -> bool:
    return ((a.follows, a.count, a.total) == (b.follows, b.count, b.total) and a.values.type == b.values.type
            and a.values.to_pylist() == b.values.to_pylist() and a.below.tolist() == b.below.tolist())


def test_a_small_dimension_aggregated_on_the_driver_equals_the_spark_jobs(spark, spark_jobs):
    """A dimension of at most ``driver_rows`` rows is read once (one Spark job for every
    attribute and foreign key) and aggregated on the driver: the Spark jobs' weights exactly;
    a key with duplicates, a -0.0 attribute or a dimension above the bound: the Spark jobs."""
    dim = _dimension()
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    spark.sql(f"DROP TABLE IF EXISTS {NS}.small")
    spark.createDataFrame(dim.to_pandas()).writeTo(f"{NS}.small").create()
    rng = np.random.default_rng(8)
    fks = rng.integers(1, 340, 3000).astype(object)
    fks[::40] = None
    fact_keys = pa.array(fks.tolist(), pa.int64())
    attrs = ["brand", "price", "day", "band", "code"]
    jobs_side = spark_weights(spark, collect_arrow)  # no row counts: always the Spark jobs
    driver_side = spark_weights(spark, collect_arrow, rows=lambda _: dim.num_rows, driver_rows=dim.num_rows)
    for groups in (4, 64):
        want = jobs_side(f"{NS}.small", "pk", attrs, fact_keys, groups)
        got, jobs = spark_jobs(f"driver-weights-{groups}", lambda g=groups: driver_side(f"{NS}.small", "pk", attrs,
                                                                                               fact_keys, g))
        assert jobs == (1 if groups == 4 else 0), jobs  # read once, then from the driver's copy
        assert set(got) == set(attrs) and all(_same(got[a], want[a]) for a in attrs), groups
    other = pa.array(rng.integers(1, 60, 500).tolist(), pa.int32())  # another key type: cast as Spark joins
    assert _same(driver_side(f"{NS}.small", "pk", ["brand"], other, 8)["brand"],
                 jobs_side(f"{NS}.small", "pk", ["brand"], other, 8)["brand"])
    # above the bound: the Spark jobs (several)
    _, jobs = spark_jobs("driver-weights-big", lambda: spark_weights(
        spark, collect_arrow, rows=lambda _: dim.num_rows, driver_rows=dim.num_rows - 1)(
        f"{NS}.small", "pk", ["brand"], fact_keys, 4))
    assert jobs > 1
    # a duplicated key or a -0.0 value: the driver's copy is read, then the Spark jobs decide
    odd = dim.set_column(2, "price", pa.array([-0.0 if i % 7 == 0 else v for i, v in
                                               enumerate(dim.column("price").to_pylist())], pa.float64()))
    odd = pa.concat_tables([odd, odd.slice(0, 3)])  # keys 3 rows twice
    for table, a in ((odd.slice(0, dim.num_rows), "price"), (odd, "brand")):
        name = f"{NS}.odd_{a}"
        spark.sql(f"DROP TABLE IF EXISTS {name}")
        spark.createDataFrame(table.to_pandas()).writeTo(name).create()
        got, jobs = spark_jobs(f"driver-weights-{a}", lambda n=name, a=a: spark_weights(
            spark, collect_arrow, rows=lambda _: odd.num_rows, driver_rows=odd.num_rows)(n, "pk", [a], fact_keys, 4))
        assert jobs > 1, a
        assert _same(got[a], jobs_side(name, "pk", [a], fact_keys, 4)[a]), a
