"""A workload with no query on the table is refused with a message naming what it reads; a
pruned Spark query reports the data files and bytes its executed plan scanned."""

from __future__ import annotations

import pytest

from pando_iceberg.spark import iceberg_jvm as jv
from pando_iceberg.spark.pruned import run_sql
from pando_iceberg.spark.rewrite import PandoRewriteError, RewriteOptions, rewrite_table

pytestmark = pytest.mark.spark


def test_workload_without_a_query_on_the_table_names_what_it_reads(spark, tpch):
    with pytest.raises(PandoRewriteError, match=r"no query that reads tpch\.orders.*tpch\.part"):
        rewrite_table(spark, "tpch.orders", ["SELECT * FROM tpch.part WHERE p_size = 1"], RewriteOptions())


def test_scan_metrics_report_files_and_bytes_of_an_iceberg_scan(spark, catalog, tpch):
    """Iceberg's own scan (the baselines' read path) reports files and bytes; a pruned scan
    (scan-task set) reports rows only, its files come from the planner's explain record."""
    files = catalog.load_table("tpch.orders").inspect.files()
    df = spark.table("tpch.orders").where("o_totalprice > 0").select("o_orderkey")
    rows = df.collect()
    m = jv.scan_metrics(df)
    assert m["numOutputRows"] == len(rows) == 15000
    assert m["resultDataFiles"] == files.num_rows
    assert m["totalDataFileSize"] == sum(files.column("file_size_in_bytes").to_pylist())
    q = run_sql(spark, catalog, "SELECT o_orderkey FROM tpch.orders WHERE o_totalprice > 0")
    assert q.scan_metrics["numOutputRows"] == 15000
    assert q.explains["tpch.orders"].pando_files == files.num_rows
