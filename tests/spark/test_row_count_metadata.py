"""``rewrite_common.row_count``: a snapshot without delete files is counted from its summary (no
Spark job), one with delete files by Spark; both equal Spark's count of the snapshot's rows."""

from __future__ import annotations

import pytest

from pando_iceberg.spark import iceberg_jvm as jv
from pando_iceberg.spark import rewrite_common as rc

pytestmark = pytest.mark.spark

NS = "rowcount"


def test_row_count_from_the_summary_unless_rows_are_deleted(spark, spark_jobs):
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    name = f"{NS}.t"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} (id BIGINT, v STRING) USING iceberg TBLPROPERTIES ("
              "'format-version' = '2', 'write.delete.mode' = 'merge-on-read')")
    spark.sql(f"INSERT INTO {name} SELECT id, CAST(id % 7 AS STRING) FROM range(0, 1000)")
    first = int(jv.load_table(spark, name).currentSnapshot().snapshotId())
    spark.sql(f"INSERT INTO {name} SELECT id, 'x' FROM range(1000, 1250)")

    got, jobs = spark_jobs("rowcount-summary", lambda: rc.row_count(spark, name, None))
    assert (got, jobs) == (1250, 0)
    got, jobs = spark_jobs("rowcount-old", lambda: rc.row_count(spark, name, first))
    assert (got, jobs) == (1000, 0)

    spark.sql(f"DELETE FROM {name} WHERE id % 10 = 0")  # position delete files: the summary's records overcount
    summary = rc.snapshot_summary(spark, name, None)
    assert int(summary["total-delete-files"]) > 0 and int(summary["total-records"]) == 1250
    got, jobs = spark_jobs("rowcount-deletes", lambda: rc.row_count(spark, name, None))
    assert got == spark.table(name).count() == 1125 and jobs > 0
    assert rc.snapshot_summary(spark, f"{NS}.no_such_table", None) == {}
