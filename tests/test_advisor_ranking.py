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


def test_a_tail_thresholds_prediction_draws_stay_in_the_tail():
    """A template whose training literals are a few tail thresholds (tip >= 10 | 20, repeated)
    keeps, for the prediction, the draws within them; draws whose anchor fell in the column's
    body (tip >= 0 | 2) weigh nothing. A threshold with one training value keeps the draws
    selecting as much as it does, or the nearest one: never the workload's own literals only.
    A template whose every training draw has its own literal (spread like the data) keeps its
    draws as they are."""
    from pando_iceberg.expr.filters import TableFilter
    from pando_iceberg.maintenance.advisor import prediction_weights, weighted_by

    rng = np.random.default_rng(1)
    sample = pa.table({"tip": pa.array(np.round(rng.exponential(3.0, 20_000), 2)),
                       "fare": pa.array(np.round(rng.uniform(2, 80, 20_000), 2)),
                       "miles": pa.array(np.round(rng.exponential(2.0, 20_000), 1))})

    def f(sql: str) -> TableFilter:
        return TableFilter.from_sql(sql, sample.schema, "trips")

    tips = ["tip >= 10", "tip >= 20", "tip >= 30"]
    miles = ["miles BETWEEN 6.8 AND 7.3", "miles BETWEEN 9.3 AND 9.8"]
    # the workload asked tip >= 30 twice: one query of weight 2 (a workload merges equal queries)
    trained = [(f(s), 2.0 if s == "tip >= 30" else 1.0) for s in tips + miles] + [(f("fare > 70"), 1.0)]
    validation = [(f(s), 0.25) for s in tips + ["tip >= 0", "tip >= 2", "tip >= 12", "tip >= 15", "tip >= 40"]] \
        + [(f(s), 0.5) for s in miles + ["miles BETWEEN 1.1 AND 1.6", "miles BETWEEN 0.2 AND 0.7"]] \
        + [(f("fare > 70"), 0.5), (f("fare > 5"), 0.5)]
    w = prediction_weights(validation, trained, sample)
    by = {q.to_sql(): x for (q, _), x in zip(validation, w, strict=True)}
    assert [by[f(s).to_sql()] for s in ("tip >= 0", "tip >= 2", "tip >= 40")] == [0.0, 0.0, 0.0]
    assert all(by[f(s).to_sql()] == pytest.approx(8 * 0.25 / 5) for s in ("tip >= 10", "tip >= 20", "tip >= 30",
                                                                          "tip >= 12", "tip >= 15"))
    assert w.sum() == pytest.approx(sum(x for _, x in validation))  # each template keeps its weight
    assert by[f("fare > 5").to_sql()] == pytest.approx(0.5)  # the nearest, though far: kept
    assert all(by[f(s).to_sql()] == 0.5 for s in ("miles BETWEEN 1.1 AND 1.6", "miles BETWEEN 0.2 AND 0.7"))
    share = np.array([np.mean(q.evaluate(sample)) for q, _ in validation])
    tip = np.array([q.to_sql().startswith("tip") for q, _ in validation], dtype=float)
    own = weighted_by(share * tip, np.array([x for _, x in validation]) * tip)
    predicted = weighted_by(share * tip, w * tip)
    held_out = np.mean([np.mean(f(s).evaluate(sample)) for s in ("tip >= 10", "tip >= 20", "tip >= 30")])
    assert abs(predicted - held_out) < 0.02 < abs(own - held_out)


class _Blocks:
    """The two things ``blocks_to_write`` asks of a layout: its blocks' sample rows and the
    blocks each query scans."""

    def __init__(self, block_rows, scanned):
        self.block_rows = np.asarray(block_rows)
        self._scanned = np.asarray(scanned, dtype=bool)

    def scanned(self, queries):
        assert len(queries) == len(self._scanned)
        return self._scanned


def test_blocks_written_are_drawn_by_the_rows_the_draws_read_in_them():
    from pando_iceberg.maintenance.advisor import WrittenBlocks, blocks_to_write

    # block 0 is read by every draw, block 2 by one, blocks 1 and 3 by none
    lay = _Blocks([100, 100, 100, 100], [[1, 0, 0, 0], [1, 0, 1, 0], [1, 0, 0, 0]])
    draws = [("q0", 1.0), ("q1", 1.0), ("q2", 1.0)]
    assert blocks_to_write(lay, draws, np.ones(3), 4) == [0, 0, 0, 2]  # 3 : 1 of the rows read
    assert blocks_to_write(lay, draws, np.array([0.0, 1.0, 0.0]), 2) == [0, 2]  # only q1 weighs
    assert blocks_to_write(lay, draws, np.ones(3), 0) == []
    # no draw reads anything: the blocks by their rows
    assert blocks_to_write(_Blocks([300, 100], [[0, 0]]), [("q", 1.0)], np.ones(1), 4) == [0, 0, 0, 1]
    w = WrittenBlocks((0, 0, 2), (1000, 1000, 500), (8000, 8000, 5000), 12.0, 1.0)
    assert w.bytes_per_row == pytest.approx((8 + 8 + 10) / 3) and w.ratio == pytest.approx(26 / 3 / 12)
