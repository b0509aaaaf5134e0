"""The sample a layout is learned from holds about ``sample-rows-per-block`` rows per block of the
layout, at most ``sample-rate``'s share and at least ``min-sample-rows``: the optimizer's input
follows the number of blocks, not the table's size."""

from __future__ import annotations

import pytest

from pando_iceberg.spark.rewrite import PandoRewriteError, RewriteOptions
from pando_iceberg.spark.rewrite_common import sample_fraction, sample_rate


def test_sample_rows_follow_the_blocks_not_the_table():
    """TPC-H lineitem at SF 1 and SF 10 with b scaled to the table (the bench's 100,000 × SF):
    60 blocks either way, so the same 30,000 sample rows, where sample-rate 0.01 took 60,000 and
    600,000."""
    opts = [RewriteOptions(min_block_rows=100_000 * sf) for sf in (1, 10)]
    rows = [6_001_215, 60_012_150]
    assert [round(sample_fraction(o, n) * n) for o, n in zip(opts, rows, strict=True)] == [30_500, 30_500]
    old = [RewriteOptions(min_block_rows=o.min_block_rows, sample_rows_per_block=0) for o in opts]
    assert [round(sample_fraction(o, n) * n) for o, n in zip(old, rows, strict=True)] == [60_012, 600_122]


def test_sample_rate_caps_and_min_sample_rows_floors_the_rule():
    few_blocks = RewriteOptions(min_block_rows=1_000_000, sample_rows_per_block=500)  # 2 blocks of 2M rows
    assert sample_rate(few_blocks, 2_000_000) == pytest.approx(1000 / 2_000_000)
    assert sample_fraction(few_blocks, 2_000_000) == pytest.approx(10_000 / 2_000_000)  # min-sample-rows
    many = RewriteOptions(min_block_rows=1_000, sample_rows_per_block=500)  # 500 per 1,000 rows > 1 %
    assert sample_rate(many, 10_000_000) == pytest.approx(0.01)
    small = RewriteOptions(min_block_rows=1_000)
    assert sample_fraction(small, 5_000) == 1.0  # below min-sample-rows: all of it


def test_zero_rows_per_block_is_sample_rate_alone_and_negative_is_refused():
    assert sample_rate(RewriteOptions(sample_rows_per_block=0), 6_001_215) == 0.01
    assert RewriteOptions.from_map({"sample-rows-per-block": "250"}).sample_rows_per_block == 250
    with pytest.raises(PandoRewriteError, match="option 'sample-rows-per-block' must be >= 0"):
        RewriteOptions.from_map({"sample-rows-per-block": "-1"})
