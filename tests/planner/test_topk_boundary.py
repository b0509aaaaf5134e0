"""Top-k pruning's boundary (planner/limit.py, ``top_k_tasks``) against a full scan: random
tables of real Parquet files written by pyiceberg into a SqlCatalog (values clustered per file,
with NULLs, NaN, infinities, -0.0, ties, and copy-on-write deletes that rewrite files), random
filters, every ORDER BY column type with bounds (long, int, double, float, decimal, date,
timestamp, string, boolean), both directions and both NULL placements, random k. The k first
ORDER BY values, in Spark's order, over the files the plan keeps must equal those over every
matching row; and explain_scan's LIMIT row says what the plan did."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan

import pando_iceberg
from pando_iceberg.planner import plan_scan
from pando_iceberg.planner.limit import Ordering
from pando_iceberg.procedures.builtin import explain_result

ARROW = pa.schema([("id", pa.int64()), ("g", pa.int64()), ("n", pa.int32()), ("x", pa.float64()),
                   ("f", pa.float32()), ("m", pa.decimal128(9, 2)), ("d", pa.date32()),
                   ("ts", pa.timestamp("us", tz="UTC")), ("s", pa.string()), ("b", pa.bool_())])
ORDER_COLUMNS = ("g", "n", "x", "f", "m", "d", "ts", "s", "b", "id")
DAY0 = dt.date(2024, 1, 1)
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
SPECIAL = np.array([0.0, -0.0, float("nan"), float("inf"), float("-inf")])


@pytest.fixture
def catalog(tmp_path):
    cat = SqlCatalog("topk", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse")
    cat.create_namespace("db")
    return cat


def _masked(rng, n: int, share: float) -> np.ndarray:
    return rng.random(n) < share


def _file(rng, start: int, n: int) -> pa.Table:
    """One file's rows: a narrow random window of each column (ties: few distinct values), NULLs
    in a share of the files, NaN and infinities in a share of the float files."""
    base, width = int(rng.integers(0, 80)), int(rng.integers(1, 25))
    g = rng.integers(base, base + width, n)
    x = (rng.integers(0, max(2, width // 3), n) + base).astype(float) / 4
    special = _masked(rng, n, float(rng.choice([0, 0, 0.1, 0.3])))
    x[special] = rng.choice(SPECIAL, int(special.sum()))
    null = float(rng.choice([0, 0, 0, 0.2]))
    days = [DAY0 + dt.timedelta(days=int(v)) for v in g]
    times = [T0 + dt.timedelta(minutes=int(v) * 7) for v in g]
    strings = np.array(["a", "ab", "b", "m", "q" * 16, "q" * 17, "z"], dtype=object)
    return pa.table({
        "id": np.arange(start, start + n),
        "g": pa.array(g, mask=_masked(rng, n, null)),
        "n": pa.array(g.astype(np.int32) - 40, pa.int32(), mask=_masked(rng, n, null)),
        "x": pa.array(x, mask=_masked(rng, n, null)),
        "f": pa.array(x.astype(np.float32), pa.float32(), mask=_masked(rng, n, null)),
        "m": pa.array([Decimal(int(v)) / 4 for v in g], pa.decimal128(9, 2), mask=_masked(rng, n, null)),
        "d": pa.array(days, pa.date32(), mask=_masked(rng, n, null)),
        "ts": pa.array(times, pa.timestamp("us", tz="UTC"), mask=_masked(rng, n, null)),
        "s": pa.array(list(strings[np.minimum(g // 12, len(strings) - 1)]), pa.string(), mask=_masked(rng, n, null)),
        "b": pa.array(g % 3 == 0, mask=_masked(rng, n, null))}, schema=ARROW)


def _random_table(catalog, name: str, rng):
    """2..10 appended files (one per append), then, in half the tables, a copy-on-write delete
    (pyiceberg rewrites the files it touches, with new metrics)."""
    table = catalog.create_table(f"db.{name}", schema=ARROW, properties={"format-version": "2"})
    start = 0
    for _ in range(int(rng.integers(2, 11))):
        n = int(rng.integers(1, 40))
        table.append(_file(rng, start, n))
        start += n
    if rng.random() < 0.5:
        gone = rng.choice(start, max(1, start // int(rng.integers(2, 6))), replace=False)
        table.delete(delete_filter=f"id in ({', '.join(str(int(i)) for i in gone)})")
    return table


def _random_filter(rng) -> str:
    c = int(rng.integers(0, 90))
    atoms = [f"g >= {c}", f"g < {c}", f"g BETWEEN {c} AND {c + 15}", "g IS NOT NULL", "x IS NOT NULL",
             f"x > {c / 4}", f"x <= {c / 4}", "x = double('NaN')", f"n >= {c - 40}", f"d >= DATE '{DAY0}' + {c}",
             f"m < {c / 4}", "s >= 'b'", "b", "NOT b", "TRUE", "TRUE", "TRUE"]
    picked = [atoms[int(i)] for i in rng.integers(0, len(atoms), int(rng.integers(1, 3)))]
    return f" {rng.choice(['AND', 'OR'])} ".join(f"({p})" for p in picked)


def _spark_order(values: list, order: Ordering) -> list:
    """``values`` in Spark's order for ``order`` (NULLs where it says, NaN above every number,
    -0.0 equal to 0.0), each as a comparable token."""
    def nan(v) -> bool:
        return isinstance(v, float) and v != v

    def token(v):
        if v is None:
            return "NULL"
        if nan(v):
            return "NaN"
        return v + 0.0 if isinstance(v, float) else v  # -0.0 → 0.0

    nulls = [v for v in values if v is None]
    nans = [v for v in values if nan(v)]
    rest = sorted((v for v in values if v is not None and not nan(v)), key=token, reverse=order.descending)
    ordered = nans + rest if order.descending else rest + nans
    ordered = nulls + ordered if order.nulls_first else ordered + nulls
    return [token(v) for v in ordered]


def test_top_k_pruning_keeps_the_k_first_values_of_a_full_scan(catalog):
    rng = np.random.default_rng(4711)
    pruned = bounded = deleted = 0
    pruned_by_kind: dict[str, int] = {}
    for case in range(160):
        table = _random_table(catalog, f"k{case}", rng)
        sql = _random_filter(rng)
        order = Ordering(str(rng.choice(ORDER_COLUMNS)), bool(rng.integers(0, 2)), bool(rng.integers(0, 2)))
        full = pando_iceberg.scan(table, sql).to_arrow()
        k = int(rng.choice([int(rng.integers(0, 4)), int(rng.integers(0, full.num_rows + 5))]))
        plan = plan_scan(table, sql, limit=k, order=order)
        kept = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table(plan.tasks)
        kept = kept.filter(plan.filter.evaluate(kept)) if kept.num_rows else kept
        want = _spark_order(full.column(order.column).to_pylist(), order)[:k]
        got = _spark_order(kept.column(order.column).to_pylist(), order)[:k]
        assert got == want, (case, sql, order, k, plan.explain.topk_boundary)
        ex = plan.explain
        assert ex.limit == k and ex.order_by == order.sql()
        assert ex.pando_files == len(plan.tasks) and ex.limit_files_pruned >= 0
        deleted += table.current_snapshot().summary.get("operation") != "append"
        bounded += ex.topk_boundary is not None
        if ex.limit_files_pruned:
            pruned += 1
            pruned_by_kind[order.column] = pruned_by_kind.get(order.column, 0) + 1
    assert pruned >= 30 and bounded >= 60 and deleted >= 40, (pruned, bounded, deleted)
    # the bound's own values prune on every type they are exact for (strings and ids aside)
    assert {"g", "n", "x", "f", "m", "d", "ts"} <= set(pruned_by_kind), pruned_by_kind


def test_upper_bounds_are_rows_of_the_file(catalog):
    """Files whose values all span 0..99 but with different maxima: their lower bounds prove
    nothing, their upper bounds are rows; ``ORDER BY v DESC LIMIT 2`` reads the two files
    holding the two largest values (and a file tying the boundary), and explain_scan says so."""
    schema = pa.schema([("id", pa.int64()), ("v", pa.int64())])
    table = catalog.create_table("db.wide", schema=schema)
    for i, top in enumerate((500, 90, 700, 90, 300)):
        table.append(pa.table({"id": np.arange(i * 10, i * 10 + 10), "v": [0, *range(1, 9), top]}, schema=schema))
    plan = plan_scan(table, "TRUE", limit=2, order=Ordering("v", True, False))
    assert sorted(int(t.file.record_count) for t in plan.tasks) == [10, 10]
    assert plan.explain.topk_boundary == "500" and plan.explain.limit_files_pruned == 3
    ties = plan_scan(table, "v >= 0", limit=4, order=Ordering("v", True, False))  # 700, 500, 300, then 90 twice
    assert len(ties.tasks) == 5 and ties.explain.topk_boundary == "90"
    nulls_first = plan_scan(table, "TRUE", limit=2, order=Ordering("v", True, True))  # no NULL: the same
    assert len(nulls_first.tasks) == 2
    rows = {r[1]: r[5] for r in explain_result({"db.wide": plan.explain}).rows if r[0] == "db.wide"}
    assert rows["top-k"] == ("LIMIT 2 ORDER BY v DESC NULLS LAST: 5 fully matching files (0 proven by the trees "
                             "alone); top-k boundary 500; 3 files removed")
    unordered = plan_scan(table, "v < 1000", limit=15)
    assert {r[1]: r[5] for r in explain_result({"t": unordered.explain}).rows}["limit"] == \
        "LIMIT 15: 5 fully matching files (0 proven by the trees alone); 3 files removed"
    assert "limit" not in {r[1] for r in explain_result({"t": plan_scan(table, "TRUE").explain}).rows}
