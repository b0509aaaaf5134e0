"""A layout learned from top-k draws cuts at their boundary (workload/top_k_learning.py): trips
written in arrival order (fares independent of it), laid out by Pando for day-range queries and
``ORDER BY fare DESC, id LIMIT k`` draws. The learning reads each draw as ``fare >= b`` (b the
estimated value of a block's best fares), so one block holds the largest fares, and a held-out
draw with another k reads that block's file: top-k pruning's boundary from it drops every other
file. The same table laid out for the same draws without their ORDER BY (what the learning saw
of a top-k query before: no filter) has no cut on fare, and the held-out draws read more files.
Every result equals the plain Spark query's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import pando_iceberg.spark as pspark
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table

pytestmark = pytest.mark.spark

NS = "topklearn"
ROWS = 12_000
DAYS = [(3, 9), (20, 31), (47, 52), (66, 80), (95, 101)]
TOP_K = [5, 10, 20]


def _trips() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    ids = np.arange(ROWS, dtype=np.int64)
    return pd.DataFrame({"id": ids, "day": (ids // 100).astype(np.int32),
                         "fare": np.round(rng.gamma(2.0, 8.0, ROWS), 2)})


def _workload(table: str, ordered: bool) -> list[str]:
    days = [f"SELECT count(*) AS n, sum(fare) AS f FROM {table} WHERE day BETWEEN {a} AND {b}" for a, b in DAYS]
    order = "ORDER BY fare DESC, id " if ordered else ""
    return days + [f"SELECT id, day, fare FROM {table} {order}LIMIT {k}" for k in TOP_K]


@pytest.fixture(scope="module")
def tables(spark, lakehouse_cfg):
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    trips = spark.createDataFrame(_trips()).repartition(1).sortWithinPartitions("id")
    out = {}
    for name, ordered in (("learned", True), ("unordered", False)):
        table = f"{NS}.{name}"
        spark.sql(f"DROP TABLE IF EXISTS {table}")
        trips.writeTo(table).create()
        rewrite_table(spark, table, _workload(table, ordered),
                      RewriteOptions(k=2, sample_rate=1.0, min_block_rows=2000, seed=1, max_template_regression="off"),
                      io_properties=lakehouse_cfg.pyiceberg_properties())
        out[name] = table
    yield out
    for table in out.values():
        spark.sql(f"DROP TABLE IF EXISTS {table}")


def _files_read(spark, catalog, table: str, k: int) -> int:
    q = f"SELECT id, day, fare FROM {table} ORDER BY fare DESC, id LIMIT {k}"
    plain = [tuple(r) for r in spark.sql(q).collect()]
    with pspark.sql(spark, q, catalog=catalog) as df:
        got = [tuple(r) for r in df.collect()]
        ex = df.pando.explains[table]
    assert got == plain and len(got) == k  # ordered totally (id breaks ties): the same rows
    return ex.pando_files


def test_held_out_top_k_draws_read_the_block_of_the_largest_fares(spark, catalog, tables):
    files = {name: spark.sql(f"SELECT count(*) FROM {t}.files").first()[0] for name, t in tables.items()}
    assert min(files.values()) >= 4  # blocks of about 2,000 rows
    for k in (7, 40):  # held out: k values no training draw had
        learned = _files_read(spark, catalog, tables["learned"], k)
        unordered = _files_read(spark, catalog, tables["unordered"], k)
        assert learned == 1, (k, learned, unordered, files)
        assert learned < unordered, (k, learned, unordered, files)
