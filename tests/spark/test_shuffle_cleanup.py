"""A rewrite leaves no shuffle files behind on the driver's disk.

Spark deletes a job's shuffle files only when the driver's garbage collector collects the job's
shuffle dependencies (ContextCleaner), which in a session with a large heap may not happen for
a long time: at TPC-H SF 10, six rewrites' shuffle files (≈ 5 GB each) accumulated until the
disk was full. After ``rewrite_table`` returns, the shuffle files it wrote must go; a collected
query's shuffle files go when ``drop_shuffles`` is called, whatever still refers to its plan."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table
from pando_iceberg.spark.session import drop_shuffles, release_shuffle_files
from pando_iceberg.workload.tpch_queries import tpch_workload

pytestmark = pytest.mark.spark


def _shuffle_files(spark, since: float) -> list[Path]:
    dirs = spark._jvm.org.apache.spark.SparkEnv.get().blockManager().diskBlockManager().localDirs()
    out = []
    for d in dirs:
        for p in Path(d.getAbsolutePath()).rglob("shuffle_*.data"):
            try:
                if p.stat().st_mtime >= since:
                    out.append(p)
            except FileNotFoundError:  # removed while listed
                pass
    return out


def _drained(spark, quiet: float = 3.0, limit: float = 90.0) -> None:
    """Wait until no shuffle file has gone for ``quiet`` seconds (at most ``limit``)."""
    last, still, end = len(_shuffle_files(spark, 0)), time.time(), time.time() + limit
    while time.time() - still < quiet and time.time() < end:
        time.sleep(0.5)
        now = len(_shuffle_files(spark, 0))
        if now != last:
            last, still = now, time.time()


def test_rewrite_removes_its_shuffle_files(spark, tpch, lakehouse_cfg):
    spark.sql("DROP TABLE IF EXISTS tpch.li_shuffle")
    spark.sql("CREATE TABLE tpch.li_shuffle USING iceberg AS SELECT * FROM tpch.lineitem")
    # What came before this test is not its business, but in a long session the cleaner has a
    # backlog (every earlier test's RDDs, broadcasts and shuffles, cleaned one by one once a GC
    # finds them): collect it now and wait until the shuffle files on disk stop going.
    release_shuffle_files(spark)
    _drained(spark)
    t0 = time.time() - 1
    workload = [sql.replace(" lineitem", " li_shuffle") for t, sql in tpch_workload(2, seed=3) if t in (6, 14)]
    result = rewrite_table(spark, "tpch.li_shuffle", workload,
                           RewriteOptions(k=1, sample_rate=0.5, min_block_rows=5000, seed=1),
                           io_properties=lakehouse_cfg.pyiceberg_properties())
    assert result.added_data_files_count > 1
    deadline = time.time() + 60
    left = _shuffle_files(spark, t0)
    while left and time.time() < deadline:  # the cleaner deletes asynchronously
        time.sleep(0.5)
        left = _shuffle_files(spark, t0)
    assert not left, f"{len(left)} shuffle file(s) of the rewrite still on disk: {[p.name for p in left[:5]]}"
    spark.sql("DROP TABLE tpch.li_shuffle")


@pytest.mark.parametrize("adaptive", ["true", "false"])
def test_drop_shuffles_deletes_a_collected_querys_shuffles_while_its_plan_is_referenced(spark, tpch, adaptive):
    release_shuffle_files(spark)
    _drained(spark)
    before = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", adaptive)
    try:
        _drop_shuffles_of_a_query(spark, tpch)
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", before)


def _drop_shuffles_of_a_query(spark, tpch):
    t0 = time.time() - 1
    df = spark.sql("SELECT l_returnflag, l_linestatus, count(*) AS n FROM tpch.lineitem "
                   "GROUP BY l_returnflag, l_linestatus ORDER BY n")
    rows = df.collect()
    assert sum(r.n for r in rows) == tpch["lineitem"].rows
    written = _shuffle_files(spark, t0)
    assert written, "the aggregation and the sort shuffle: their files are on disk until dropped"
    # df and its executed plan are still referenced here: no garbage collection can free them
    assert drop_shuffles(spark, df) >= 2
    assert not [p for p in written if p.exists()], "drop_shuffles returns after the files are removed"
    assert drop_shuffles(spark, df) >= 2  # dropping again is harmless
    # a DataFrame no action ran on wrote no shuffle: nothing to drop, none created by asking
    assert drop_shuffles(spark, spark.sql("SELECT l_returnflag, count(*) FROM tpch.lineitem GROUP BY 1")) == 0
