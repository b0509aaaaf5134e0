"""The optimizer's key sets: the draws' and the candidate cuts' (attribute-range cuts included)
are read in the same Spark jobs, one per dimension; the candidate cuts read no dimension again."""

from __future__ import annotations

import pytest

from pando_iceberg.expr import LiteralCut
from pando_iceberg.spark import rewrite_common as rc
from pando_iceberg.workload.tpch_queries import tpch_workload

pytestmark = pytest.mark.spark


def test_the_cuts_key_sets_are_read_with_the_draws(spark, tpch, monkeypatch):
    jobs: list[int] = []
    real = rc.SparkKeyProvider.prefetch

    def counted(self, requests):
        sc = spark.sparkContext
        group = f"learning-prefetch-{len(jobs)}"
        sc.setJobGroup(group, "a key-set prefetch")
        try:
            real(self, requests)
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
            sc.setLocalProperty("spark.job.description", None)
        jobs.append(len(sc.statusTracker().getJobIdsForGroup(group)))

    monkeypatch.setattr(rc.SparkKeyProvider, "prefetch", counted)
    workload = [sql for _, sql in tpch_workload(2, seed=3)]
    wl, target, queries, schemas = rc.table_workload(spark, "tpch.lineitem", workload)
    sample = rc.collect_arrow(spark.table("tpch.lineitem").limit(3000))
    options = rc.RewriteOptions(template_draws=4, min_block_rows=1000)
    expected, cuts = rc.learning_workload(spark, wl, target, schemas, queries, sample, options, 0.05)
    assert len(jobs) >= 2 and jobs[0] > 0, jobs
    assert jobs[1:] == [0] * (len(jobs) - 1), jobs  # table_cuts: every key set already read
    assert any(isinstance(c, LiteralCut) for c in cuts)
    assert any(j.dim_keys is not None for f, _ in expected.queries for j in f.joins)
