"""The per-template guard's estimate against what the written layout really reads: the guard
predicts, per template, the fraction of the table's rows in the files its validation draws open
with the layout (``workload.in_block.files_read`` on the sample); after the rewrite the planner
plans the same draws on the files written (``spark.rewrite_common.reads_now``)."""

import pytest

from pando_iceberg.spark import iceberg_jvm as jv
from pando_iceberg.spark.rewrite import RewriteOptions, learn_layout, rewrite_table
from pando_iceberg.spark.rewrite_common import reads_now, static_table
from pando_iceberg.workload.in_block import template_reads

pytestmark = pytest.mark.spark

def test_reads_are_planned_with_the_layouts_literal_cuts(spark, catalog):
    """A star fact laid out with literal cuts (the dimensions' keys): the draws' reads on the
    files written are planned with the layout's trees (the draws carry the dimensions' key sets),
    not as every file — the same planning that measures what a template reads now, when the
    table already has such a layout."""
    from pando_iceberg.bench.datasets import load_star
    from pando_iceberg.bench.workloads import qualify, star_split

    ns = "est_star"
    load_star(spark, catalog, 0.01, seed=5, namespace=ns, batch_rows=3000)
    train, _ = star_split(4, seed=2, templates=[1, 3])
    workload = [qualify(s, ns) for _, s in train]
    options = RewriteOptions(k=1, sample_rate=1.0, min_block_rows=2000, seed=1, max_template_regression="100")
    learned = learn_layout(spark, f"{ns}.sales", workload, options)
    result = rewrite_table(spark, f"{ns}.sales", workload, options, learned=learned)
    static = static_table(jv.load_table(spark, f"{ns}.sales"), None)
    measured = template_reads(reads_now(static, result.snapshot_id, learned.validation)[0], learned.validation)
    predicted = {t.template: t.with_layout for t in learned.guard.templates}
    assert set(predicted) == set(measured)
    for t, m in measured.items():
        assert m < 0.9 and abs(predicted[t] - m) <= 0.15, (t, predicted[t], m)
