"""Join-induced key sets computed by Spark (one job per dimension table, chains resolved on
the driver from the collected key columns) equal the pure-Python ones on the same data."""

from __future__ import annotations

import numpy as np
import pytest

from pando_iceberg.spark.rewrite import SparkKeyProvider, namespace_schemas
from pando_iceberg.spark.rewrite_common import _RecordingKeyProvider
from pando_iceberg.workload import arrow_key_provider, parse_workload
from pando_iceberg.workload.tpch_queries import TPCH_PRIMARY_KEYS, tpch_workload

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("table", ["tpch.lineitem", "tpch.orders"])
def test_prefetched_key_sets_equal_arrow_ones(spark, catalog, tpch, table, spark_jobs):
    schemas = namespace_schemas(spark, table)
    wl = parse_workload([sql for _, sql in tpch_workload(2, seed=3)], schemas,
                        primary_keys={f"tpch.{t}": pk for t, pk in TPCH_PRIMARY_KEYS.items()})
    provider = SparkKeyProvider(spark, schemas)
    recorder = _RecordingKeyProvider(provider)
    wl.join_induced_cuts(table, recorder)
    assert any(flt.joins for _, _, flt in recorder.requests), "the workload should have multi-hop chains"
    # Count the jobs of a group of their own: the ungrouped list is capped by
    # spark.ui.retainedJobs, so after a long session its length can shrink across a call.
    _, jobs = spark_jobs(f"key-sets-prefetch-{table}", lambda: provider.prefetch(recorder.requests))
    dims = {d for d, _, _ in recorder.requests}
    assert 0 < jobs <= 2 * len(dims) + 4  # a job per dimension table (and Spark's own bookkeeping), not per predicate

    arrow = arrow_key_provider({name: catalog.load_table(name).scan().to_arrow() for name in schemas})
    for dim, pk, flt in recorder.requests:
        got = provider(dim, pk, flt)  # answered from the prefetched cache
        want = np.unique(arrow(dim, pk, flt))
        assert np.array_equal(np.sort(got), want), flt.to_sql()
    assert len(provider._cache) >= len({(d, p, f.to_sql()) for d, p, f in recorder.requests})


def test_a_second_prefetch_reads_only_what_is_missing(spark, tpch, spark_jobs):
    """Key sets the provider holds are not read again: the same requests a second time run no
    Spark job; with ``track_snapshots`` the provider knows each table's snapshot before it read it."""
    table = "tpch.lineitem"
    schemas = namespace_schemas(spark, table)
    wl = parse_workload([sql for _, sql in tpch_workload(1, seed=5)], schemas,
                        primary_keys={f"tpch.{t}": pk for t, pk in TPCH_PRIMARY_KEYS.items()})
    provider = SparkKeyProvider(spark, schemas, track_snapshots=True)
    recorder = _RecordingKeyProvider(provider)
    wl.join_induced_cuts(table, recorder)
    provider.prefetch(recorder.requests)
    first = {r: provider(*r) for r in recorder.requests}
    assert provider.read_snapshots and set(provider.read_snapshots) == {d for d, _, _ in recorder.requests} | \
        set(provider.read_snapshots)
    _, jobs = spark_jobs("key-sets-prefetch-again", lambda: provider.prefetch(recorder.requests))
    assert jobs == 0
    assert all(provider(*r) is keys for r, keys in first.items())


@pytest.mark.parametrize("column", ["o_orderkey", "o_custkey", "o_orderpriority", "o_comment"])
def test_a_key_column_read_whole_decides_uniqueness_as_spark_counts(spark, tpch, column, spark_jobs):
    """``keys_read`` (a dimension's key column another step read whole) gives ``is_unique`` Spark's
    answer (non-NULL values against distinct ones) without a job; NULLs are not duplicates."""
    import pyarrow as pa

    from pando_iceberg.spark.rewrite_common import collect_arrow

    schemas = namespace_schemas(spark, "tpch.orders")
    want = SparkKeyProvider(spark, schemas).is_unique("tpch.orders", column)
    provider = SparkKeyProvider(spark, schemas)
    keys = collect_arrow(spark.table("tpch.orders").select(column)).column(0)
    provider.keys_read("tpch.orders", column, keys)
    got, jobs = spark_jobs(f"unique-{column}", lambda: provider.is_unique("tpch.orders", column))
    assert got == want and jobs == 0
    assert want == (column == "o_orderkey")
    if column == "o_orderkey":  # NULLs added: still unique, as count(col) = count(DISTINCT col) says
        nulls = SparkKeyProvider(spark, schemas)
        nulls.keys_read("tpch.orders", column, pa.concat_arrays([keys.combine_chunks(), pa.nulls(3, keys.type)]))
        assert nulls.is_unique("tpch.orders", column)
        dup = SparkKeyProvider(spark, schemas)
        dup.keys_read("tpch.orders", column, pa.concat_arrays([keys.combine_chunks(), keys.combine_chunks()[:1]]))
        assert not dup.is_unique("tpch.orders", column)


def test_many_predicates_of_one_dimension_packed_into_words(spark, catalog, tpch, spark_jobs):
    """More predicates on one dimension than a packed mask column holds (70: several columns): every key set
    equals the pure-Python one, a predicate that is NULL on some rows leaves them out (as WHERE
    does), and the dimension is still read in one job."""
    table = "tpch.lineitem"
    schemas = namespace_schemas(spark, table)
    prices = [1_000 + 3_000 * i for i in range(70)]
    sqls = [f"SELECT count(*) FROM tpch.lineitem JOIN tpch.orders ON l_orderkey = o_orderkey "
            f"WHERE o_totalprice < {p}" for p in prices]
    sqls.append("SELECT count(*) FROM tpch.lineitem JOIN tpch.orders ON l_orderkey = o_orderkey "
                "WHERE NULLIF(o_orderstatus, 'F') = 'O' OR NULLIF(o_orderstatus, 'O') = 'P'")
    wl = parse_workload(sqls, schemas, primary_keys={f"tpch.{t}": pk for t, pk in TPCH_PRIMARY_KEYS.items()})
    provider = SparkKeyProvider(spark, schemas)
    recorder = _RecordingKeyProvider(provider)
    wl.join_induced_cuts(table, recorder)
    orders = {f.to_sql() for d, _, f in recorder.requests if d == "tpch.orders"}
    assert len(orders) > 64, "the workload should need several packed columns of orders"
    _, jobs = spark_jobs("key-sets-packed", lambda: provider.prefetch(recorder.requests))
    assert 0 < jobs <= 2 + 4
    arrow = arrow_key_provider({name: catalog.load_table(name).scan().to_arrow() for name in schemas})
    sizes = set()
    for dim, pk, flt in recorder.requests:
        got = provider(dim, pk, flt)
        want = np.unique(arrow(dim, pk, flt))
        assert np.array_equal(np.sort(got), want), flt.to_sql()
        sizes.add(len(want))
    assert len(sizes) > 64  # the predicates' key sets differ: each bit is its own predicate's
