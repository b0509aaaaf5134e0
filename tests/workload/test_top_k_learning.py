"""A top-k query teaches the layout its boundary (workload/top_k_learning.py): for learning it is
the range query ``p AND c >= b`` (DESC; ``c <= b`` ASC), ``b`` the estimated value of its k-th
best matching row on the sample, NULLs ordered as the query says; the filter alone when the
k-th best row lies beyond the matching sample rows, among the NULLs sorted last, or at NaN."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from pando_iceberg.expr import TableFilter
from pando_iceberg.workload import parse_workload
from pando_iceberg.workload.top_k_learning import boundary_rank, top_k_learning_queries

SCHEMA = pa.schema([("g", pa.int32()), ("x", pa.float64()), ("d", pa.date32())])


def _sample() -> pa.Table:
    """200 rows: g = i % 2; x = i for i < 190, NULL for 190..194, NaN for 195..199."""
    import datetime as dt

    xs = [float(i) if i < 190 else (None if i < 195 else math.nan) for i in range(200)]
    return pa.table({"g": pa.array([i % 2 for i in range(200)], pa.int32()), "x": pa.array(xs, pa.float64()),
                     "d": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=i) for i in range(200)], pa.date32())},
                    schema=SCHEMA)


def _learned(sql: str, fraction: float = 0.1, block_rows: float = 1.0) -> str:
    wl = parse_workload([sql, "SELECT * FROM t WHERE g = 1"], {"t": SCHEMA})
    queries = [(q.filters["t"], q.weight) for q in wl.queries]
    out = top_k_learning_queries(wl, "t", queries, _sample(), fraction, block_rows)
    assert out[1][0] is queries[1][0]  # a query that is not top-k keeps its filter
    return out[0][0].to_sql()


def test_the_rank_is_k_times_the_sample_fraction_at_least_the_best_and_a_block():
    assert boundary_rank(50, 0.1) == 5
    assert boundary_rank(51, 0.1) == 6
    assert boundary_rank(5, 0.01) == 1  # at least the sample's best
    assert boundary_rank(5, 0.01, block_rows=30.0) == 30  # no finer than a block of the layout


@pytest.mark.parametrize("sql, learned", [
    # DESC: NaN is above every number (5 of them), NULLs last; rank 10 → the 5th number from the top
    ("SELECT * FROM t ORDER BY x DESC LIMIT 100", "x >= 185"),
    # ASC NULLS FIRST (Spark's default): 5 NULLs first, then 0, 1, ...: rank 10 → 4, NULLs kept
    ("SELECT * FROM t ORDER BY x LIMIT 100", "x <= 4 OR x IS NULL"),
    # ... a boundary among the NULLs: the best rows are NULL
    ("SELECT * FROM t ORDER BY x LIMIT 30", "x IS NULL"),
    # ASC NULLS LAST: rank 10 → 9
    ("SELECT * FROM t ORDER BY x NULLS LAST LIMIT 100", "x <= 9"),
    # with the filter: only the matching rows count (g = 1: 3 NaN first, then the odd numbers from 189)
    ("SELECT * FROM t WHERE g = 1 ORDER BY x DESC LIMIT 100", "g = 1 AND x >= 177"),
    # a date column: its boundary is a date literal
    ("SELECT * FROM t WHERE g = 0 ORDER BY d DESC, x LIMIT 20", "g = 0 AND d >= CAST('2020-07-15' AS DATE)"),
])
def test_a_top_k_query_learns_as_the_range_of_its_best_rows(sql, learned):
    assert _learned(sql) == learned


def test_a_block_is_the_finest_boundary_learned():
    # rank 10 but a block holds 20 sample rows: the 20th number from the top (NaN first) is 175
    assert _learned("SELECT * FROM t ORDER BY x DESC LIMIT 100", block_rows=20) == "x >= 175"


@pytest.mark.parametrize("sql", [
    # k beyond the matching sample rows (100 rows match g = 1, rank 110): the query reads them all
    "SELECT * FROM t WHERE g = 1 ORDER BY x DESC LIMIT 1100",
    # the rank reaches the NULLs sorted last (195 non-NULL rows): every non-NULL row comes first
    "SELECT * FROM t ORDER BY x DESC LIMIT 1970",
    # the boundary is NaN (DESC: NaN first): no range of numbers
    "SELECT * FROM t ORDER BY x DESC LIMIT 30",
    # a LIMIT without ORDER BY: any rows serve, nothing to learn
    "SELECT * FROM t WHERE g = 1 LIMIT 10",
    # the filter constrains the order column: its cuts are the edge the best rows start at
    "SELECT * FROM t WHERE g = 1 AND x >= 20 ORDER BY x LIMIT 100",
])
def test_the_filter_alone_when_no_boundary_is_estimated(sql):
    wl = parse_workload([sql], {"t": SCHEMA})
    f = wl.queries[0].filters["t"]
    assert top_k_learning_queries(wl, "t", [(f, 1.0)], _sample(), 0.1) == [(f, 1.0)]


def test_a_synthetic_draw_of_a_top_k_template_gets_its_own_boundary():
    # the template's draws (another g) take its training draws' order and k, on their own rows:
    # g = 0 holds the even numbers from 188, after 2 NaN; rank 10 → the 8th number, 174
    wl = parse_workload(["SELECT * FROM t WHERE g = 1 ORDER BY x DESC LIMIT 100"], {"t": SCHEMA})
    draw = TableFilter("g = 0", SCHEMA, table="t")
    out = top_k_learning_queries(wl, "t", [(wl.queries[0].filters["t"], 1.0), (draw, 0.5)], _sample(), 0.1)
    assert [(f.to_sql(), w) for f, w in out] == [("g = 1 AND x >= 177", 1.0), ("g = 0 AND x >= 174", 0.5)]
    # a template some of whose queries are not top-k keeps its synthetic draws as they are
    wl = parse_workload(["SELECT * FROM t WHERE g = 1 ORDER BY x DESC LIMIT 100", "SELECT * FROM t WHERE g = 0"],
                        {"t": SCHEMA})
    assert top_k_learning_queries(wl, "t", [(draw, 0.5)], _sample(), 0.1) == [(draw, 0.5)]
