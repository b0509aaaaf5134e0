"""The rewrite's sample depends only on the snapshot's rows and the seed (rewrite_common.seeded_sample).

Spark's own ``sample`` seeds each task with its partition index, and Iceberg's planning may hand the
same files to other tasks from one read to the next: the same snapshot and seed gave another sample,
and so another layout, each time (four reads of one taxi snapshot, four row sets)."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from pando_iceberg.spark.rewrite_common import ROW_ID, seeded_sample


def test_seeded_sample_does_not_depend_on_how_the_read_is_split(spark):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS sampling")
    spark.sql("DROP TABLE IF EXISTS sampling.t")
    spark.range(0, 60_000, 1, 6).selectExpr("id", "id % 97 AS v").writeTo("sampling.t").using("iceberg").create()
    whole = spark.read.format("iceberg").load("sampling.t").select("*", *ROW_ID)
    split = spark.read.format("iceberg").option("split-size", "4096").load("sampling.t").select("*", *ROW_ID)
    assert split.rdd.getNumPartitions() > whole.rdd.getNumPartitions()

    a, b = (seeded_sample(d, 0.1, 7, ROW_ID) for d in (whole, split))
    assert a.equals(b)
    assert 5_400 < a.num_rows < 6_600  # 6,000 expected; 8 standard deviations either side
    assert a.column_names == ["id", "v", *ROW_ID]
    order = pc.sort_indices(a, sort_keys=[(c, "ascending") for c in ROW_ID]).to_numpy()
    assert (order == range(a.num_rows)).all()  # one order: by file, then position
    # what it replaces: Spark's sample of the same rows, split otherwise, drew other rows
    spark_a, spark_b = (sorted(r.id for r in d.sample(False, 0.1, 7).select("id").collect()) for d in (whole, split))
    assert spark_a != spark_b
    assert not seeded_sample(whole, 0.1, 8, ROW_ID).equals(a)  # another seed, another sample


def test_seeded_sample_by_value_keeps_equal_rows_together_and_takes_a_fraction_per_row(spark):
    from pyspark.sql import functions as F

    spark.sql("CREATE NAMESPACE IF NOT EXISTS sampling")
    spark.sql("DROP TABLE IF EXISTS sampling.v")
    spark.range(0, 9_700, 1, 3).selectExpr("id % 97 AS v").writeTo("sampling.v").using("iceberg").create()
    df = spark.table("sampling.v")
    kept = seeded_sample(df, 0.5, 3, ["v"])["v"].to_numpy()
    values, counts = (x.tolist() for x in np.unique(kept, return_counts=True))
    assert counts == [100] * len(values) and 20 < len(values) < 77  # each value all 100 times or not at all
    assert (kept[:-1] <= kept[1:]).all()
    # a fraction per row (a column): the values below 50 always, the others never
    half = seeded_sample(df, F.when(F.col("v") < 50, 1.0).otherwise(0.0), 3, ["v"])["v"].to_numpy()
    assert sorted(set(half.tolist())) == list(range(50)) and len(half) == 5_000
