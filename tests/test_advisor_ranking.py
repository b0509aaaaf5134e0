"""The advisor's arithmetic without Spark: which table first (MB saved per second of rewrite),
and the rewrite optimizer seconds predicted from the advice's own learning."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pando_iceberg.maintenance.advisor import (
    TABLE_RANK_COLUMNS,
    Advice,
    PandoCandidates,
    candidate,
    rank_candidates,
    rank_tables,
    saved_mb,
    saved_per_rewrite_second,
    table_rank_rows,
)


def advice(name: str, now_mb: float, best_fraction: float, rows: int, queries: float) -> Advice:
    """A table of ``now_mb`` MB read whole now, whose Pando candidate reads ``best_fraction`` of it."""
    now = candidate("as is", "none", "", 1.0, now_mb, rows, now_mb)
    pando = candidate("pando k=2", "pando", "2", best_fraction, now_mb, rows, now_mb, seconds=10.0)
    return Advice(name, rows, now_mb, 1000, 32, tuple(rank_candidates(now, [pando])), 1.0, queries)


def test_tables_rank_by_mb_saved_per_rewrite_second():
    big = advice("db.big", 1000.0, 0.5, 10_000_000, 10)  # saves 500 MB × 10 queries, rewrite 10 + 53 s
    small = advice("db.small", 100.0, 0.1, 1_000_000, 100)  # saves 90 MB × 100 queries, rewrite 10 + 5.3 s
    leave = advice("db.leave", 100.0, 0.99, 1_000_000, 1000)  # reads < 5 % less: as is is advised
    assert leave.advised.strategy == "none" and saved_mb(leave) == 0 and saved_per_rewrite_second(leave) == 0
    assert saved_mb(big) == pytest.approx(5000.0) and saved_mb(small) == pytest.approx(9000.0)
    assert big.advised.rewrite_seconds == pytest.approx(10 + 5.3 * 10)
    assert saved_per_rewrite_second(small) == pytest.approx(9000.0 / (10 + 5.3))
    assert [a.table for a in rank_tables([leave, big, small])] == ["db.small", "db.big", "db.leave"]
    rows = table_rank_rows([leave, big, small])
    assert all(len(r) == len(TABLE_RANK_COLUMNS) for r in rows)
    assert [(r[0], r[1], r[2]) for r in rows] == [(1, "db.small", "pando k=2"), (2, "db.big", "pando k=2"),
                                                 (3, "db.leave", "as is")]
    assert rows[0][6] == pytest.approx(9000.0) and rows[0][8] == pytest.approx(9000.0 / 15.3, abs=1e-3)
    assert "leave it" in rows[2][-1] and rows[2][6] == 0


def test_rewrite_optimizer_seconds_scale_with_the_rewrites_sample_and_trees():
    learned = PandoCandidates(pa.table({"a": np.arange(1000)}), [], [], 10_000_000, [1, 2, 3], [0.5, 0.4, 0.3], 2,
                              None, np.ones(0), {"sampling": 2.0, "draws+cuts": 10.0, "trees": 6.0}, 2000.0)
    # 2 s per tree on the advisor's 1,000 rows; the rewrite's sample is twice that: 4 s per tree
    assert learned.rewrite_optimizer_seconds(3, validate=False) == pytest.approx(12.0 + 3 * 4.0)
    assert learned.rewrite_optimizer_seconds(3, validate=True) == pytest.approx(12.0 + 6 * 4.0)  # 1 + 2 + 3 trees
    assert learned.rewrite_optimizer_seconds(1, validate=False) == pytest.approx(12.0 + 4.0)


def test_a_pando_rewrite_is_predicted_from_the_advice_parts():
    import dataclasses

    from pando_iceberg.maintenance.advisor import SECONDS_PER_MILLION_ROWS

    a = dataclasses.replace(advice("db.t", 100.0, 0.5, 2_000_000, 10),
                            parts={"sampling": 1.0, "draws+cuts": 4.0, "trees": 9.0}, learned_k=3, sample_scale=2.0)
    rest = SECONDS_PER_MILLION_ROWS["pando"] * 2
    assert a.pando_rewrite_seconds(3, validate=True) == pytest.approx(5.0 + 6.0 * 6 + rest)  # 6 s a tree, 1+2+3
    assert a.pando_rewrite_seconds(2, validate=False) == pytest.approx(5.0 + 6.0 * 2 + rest)
