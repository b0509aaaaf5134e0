"""The rewrite's sample depends only on the rows' values and the seed (rewrite_common.seeded_sample).

Spark's own ``sample`` seeds each task with its partition index, and Iceberg's planning may hand the
same files to other tasks from one read to the next: the same snapshot and seed gave another sample,
and so another layout (four reads of one taxi snapshot, three different row sets)."""

from __future__ import annotations

import numpy as np

from pando_iceberg.spark.rewrite_common import seeded_sample


def _table(spark, name: str, rows: int, files: int, select: str) -> None:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS sampling")
    spark.sql(f"DROP TABLE IF EXISTS sampling.{name}")
    spark.range(0, rows, 1, files).selectExpr(*select.split(";")).writeTo(f"sampling.{name}").using("iceberg").create()


def test_seeded_sample_is_the_same_however_the_rows_are_read_or_stored(spark):
    _table(spark, "t", 60_000, 6, "id;id % 97 AS v;map('k', id) AS m;named_struct('a', id, 'm', map(1, id % 97)) AS s")
    whole = spark.read.format("iceberg").load("sampling.t")
    split = spark.read.format("iceberg").option("split-size", "4096").load("sampling.t")
    assert split.rdd.getNumPartitions() > whole.rdd.getNumPartitions()
    a, b = (seeded_sample(d, 0.1, 7) for d in (whole, split))
    assert a.equals(b)
    assert 5_400 < a.num_rows < 6_600  # 6,000 expected; 8 standard deviations either side
    assert a.column_names == ["id", "v", "m", "s"]  # maps hashed as JSON, carried as they are
    # what it replaces: Spark's sample of the same rows, split otherwise, drew other rows
    spark_a, spark_b = (sorted(r.id for r in d.sample(False, 0.1, 7).select("id").collect()) for d in (whole, split))
    assert spark_a != spark_b
    # the same rows in other files (a compaction, a copy): the same sample
    spark.sql("DROP TABLE IF EXISTS sampling.t2")
    whole.repartition(3).writeTo("sampling.t2").using("iceberg").create()
    assert seeded_sample(spark.table("sampling.t2"), 0.1, 7).equals(a)
    assert not seeded_sample(whole, 0.1, 8).equals(a)  # another seed, another sample


def test_seeded_sample_keeps_equal_rows_together_and_takes_a_fraction_per_row(spark):
    from pyspark.sql import functions as F

    _table(spark, "v", 9_700, 3, "id % 97 AS v;id AS id")
    df = spark.table("sampling.v")
    kept = seeded_sample(df.select("v"), 0.5, 3)["v"].to_numpy()
    values, counts = (x.tolist() for x in np.unique(kept, return_counts=True))
    assert counts == [100] * len(values) and 20 < len(values) < 77  # each value all 100 times or not at all
    # a fraction per row (a column) and a column carried along unhashed: every id below 5,000, no other
    low = seeded_sample(df, F.when(F.col("id") < 5_000, 1.0).otherwise(0.0), 3, skip=["v"])
    assert sorted(low["id"].to_pylist()) == list(range(5_000)) and low.column_names == ["v", "id"]
    assert low.equals(seeded_sample(df.repartition(5), F.when(F.col("id") < 5_000, 1.0).otherwise(0.0), 3, skip=["v"]))
