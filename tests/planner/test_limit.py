"""LIMIT pruning on the pyiceberg path (planner/limit.py): which files fully match a filter, from
their metrics, under Spark's semantics; and ``pando_iceberg.scan(..., limit=k)`` planning only the
fewest fully matching files that hold k rows, with exactly min(k, matching) matching rows read.
Pure Python: real Parquet files written by pyiceberg into a SqlCatalog on tmp_path."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from decimal import Decimal
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.conversions import to_bytes
from pyiceberg.expressions import AlwaysTrue, GreaterThan
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    NestedField,
    StringType,
    TimestamptzType,
)

import pando_iceberg
from pando_iceberg.expr import TableFilter, to_pyiceberg
from pando_iceberg.planner.limit import fully_matching, limit_tasks

SCHEMA = Schema(NestedField(1, "i", LongType(), required=False), NestedField(2, "x", DoubleType(), required=False),
                NestedField(3, "s", StringType(), required=False), NestedField(4, "d", DateType(), required=False),
                NestedField(5, "m", DecimalType(10, 2), required=False),
                NestedField(6, "ts", TimestamptzType(), required=False),
                NestedField(7, "b", BooleanType(), required=False))
TYPES = {f.field_id: f.field_type for f in SCHEMA.fields}
IDS = {f.name: f.field_id for f in SCHEMA.fields}


def _task(rows=100, deletes=(), nulls=None, nans=None, **bounds):
    """A planned task over a data file with hand-made metrics: ``bounds`` name → (lower, upper)
    (None: absent); ``nulls``/``nans`` name → count (absent by default for NaN, 0 for NULL)."""
    lower, upper = {}, {}
    for name, (lo, hi) in bounds.items():
        fid = IDS[name]
        if lo is not None:
            lower[fid] = to_bytes(TYPES[fid], lo)
        if hi is not None:
            upper[fid] = to_bytes(TYPES[fid], hi)
    null_counts = {fid: 0 for fid in IDS.values()} if nulls is None else {IDS[n]: c for n, c in nulls.items()}
    nan_counts = {} if nans is None else {IDS[n]: c for n, c in nans.items()}
    data_file = SimpleNamespace(record_count=rows, lower_bounds=lower, upper_bounds=upper,
                                null_value_counts=null_counts, nan_value_counts=nan_counts)
    return SimpleNamespace(file=data_file, delete_files=set(deletes))


def _full(sql: str, task) -> bool:
    tf = TableFilter.from_sql(sql, SCHEMA.as_arrow(), "t")
    return bool(fully_matching(tf, [task], SCHEMA)[0])


def test_ints_bounds_decide_both_ways():
    t = _task(i=(10, 20))
    assert _full("i >= 10", t) and _full("i BETWEEN 5 AND 20", t) and _full("i > 3 AND i < 21", t)
    assert _full("i IN (1, 2) OR i >= 10", t) and _full("NOT (i < 10)", t) and _full("i <> 9", t)
    assert not _full("i > 10", t) and not _full("i < 20", t) and not _full("i = 15", t)
    assert _full("i = 7", _task(i=(7, 7))) and _full("i IN (7, 8)", _task(i=(7, 8)))
    assert not _full("i IN (7, 9)", _task(i=(7, 9)))  # 8 may be there
    assert _full("TRUE", t) and not _full("FALSE", t)


def test_nulls_fail_every_predicate_but_is_null():
    t = _task(nulls={"i": 3}, i=(10, 20))
    assert not _full("i >= 10", t) and not _full("NOT (i < 10)", t) and not _full("i IS NOT NULL", t)
    assert _full("i >= 10 OR i IS NULL", t)
    assert not _full("i >= 10", _task(nulls={}, i=(10, 20)))  # NULL count missing: may hold NULL
    assert _full("i IS NOT NULL", _task(i=(10, 20)))
    assert _full("i IS NULL", _task(nulls={"i": 100}))  # only NULLs: no bounds
    assert not _full("i IS NULL", _task(nulls={"i": 99}))


def test_nan_is_above_every_number_and_equal_to_itself():
    no_nan = _task(nans={"x": 0}, x=(1.5, 2.5))
    may_nan = _task(x=(1.5, 2.5))  # NaN count missing (pyiceberg writes none)
    some_nan = _task(nans={"x": 4}, x=(1.5, 2.5))
    for t in (no_nan, may_nan, some_nan):  # NaN > 1 is true in Spark
        assert _full("x > 1", t) and _full("x >= 1.5", t)
    assert _full("x < 3", no_nan) and not _full("x < 3", may_nan) and not _full("x < 3", some_nan)
    assert _full("x BETWEEN 1.5 AND 2.5", no_nan) and not _full("x BETWEEN 1.5 AND 2.5", some_nan)
    assert _full("x < 3 OR x = double('NaN')", some_nan)
    all_nan = _task(nans={"x": 100})  # only NaN: no bounds
    assert not _full("x = double('NaN')", all_nan)  # no bounds: any value is possible
    assert not _full("x > 1", _task(nans={"x": 0}, x=(float("nan"), 2.5)))  # a NaN bound is no bound
    zeros = _task(nans={"x": 0}, x=(-0.0, 0.0))
    assert _full("x >= -0.0", zeros) and _full("x = 0", zeros) and _full("x <= 0.0", zeros)


def test_strings_near_the_truncation_length():
    short = _task(s=("abc", "abd"))
    assert _full("s >= 'abc'", short) and _full("s <= 'abd'", short) and _full("s LIKE 'ab%'", short)
    assert not _full("s = 'abc'", short) and _full("s = 'abc'", _task(s=("abc", "abc")))
    lo, hi = "a" * 16, "a" * 15 + "b"  # a file of longer values: truncated lower, incremented upper
    long = _task(s=(lo, hi))
    assert _full("s >= 'aaaaaaaaaaaaaaaa'", long) and _full("s LIKE 'aaaa%'", long) is False  # upper not trusted
    assert not _full("s < 'aaaaaaaaaaaaaaab'", long) and not _full(f"s = '{lo}'", long)
    assert not _full(f"s = '{lo}'", _task(s=(lo, lo)))  # a 16-character upper bound may be truncated
    assert _full("s = 'a'", _task(s=("a", "a")))


def test_dates_and_decimals():
    t = _task(d=(dt.date(2024, 1, 1), dt.date(2024, 1, 31)), m=(Decimal("1.50"), Decimal("2.00")))
    assert _full("d >= date '2024-01-01' AND d < date '2024-02-01'", t)
    assert not _full("d > date '2024-01-01'", t)
    assert _full("m > 1.49 AND m <= 2", t) and not _full("m > 1.5", t)


def test_timestamps_booleans_and_what_is_not_decided():
    day = 1_704_067_200_000_000  # 2024-01-01 00:00:00 UTC in microseconds
    t = _task(ts=(day, day + 3_600_000_000), b=(True, True), i=(0, 5))
    assert _full("ts >= timestamp '2024-01-01 00:00:00' AND ts <= timestamp '2024-01-01 01:00:00'", t)
    assert not _full("ts < timestamp '2024-01-01 01:00:00'", t)
    assert _full("b", t) and _full("b = true", t) and not _full("NOT b", t)
    assert not _full("b", _task(ts=(day, day), b=(False, True)))
    # computed terms and column-to-column comparisons: no claim, whatever the bounds
    assert not _full("i + 1 > 0", t) and not _full("i < 6 + 0 * i", t) and not _full("abs(i) >= 0", t)
    assert not _full("i <= m", _task(i=(0, 1), m=(Decimal("5.00"), Decimal("6.00"))))


def test_missing_metrics_and_delete_files_never_fully_match():
    assert not _full("i >= 10", _task(i=(None, 20))) and not _full("i <= 20", _task(i=(10, None)))
    assert not _full("i >= 10", _task(i=(10, 20), deletes=("d.parquet",)))
    assert not _full("TRUE", _task(deletes=("d.parquet",)))
    assert not _full("TRUE", _task(rows=-1))
    assert not _full("i = 3", _task(i=(20, 10)))  # bounds no value can lie in prove nothing
    assert _full("i >= 10", _task(i=(10, 20))) and not _full("i >= 10 AND s IS NULL", _task(i=(10, 20)))


def test_fewest_files_largest_first():
    tasks = [_task(rows=r) for r in (5, 30, 30, 10, 50)]
    every = np.ones(len(tasks), dtype=bool)
    assert [t.file.record_count for t in limit_tasks(tasks, every, 60)] == [30, 50]  # 50, then the first 30
    assert [t.file.record_count for t in limit_tasks(tasks, every, 50)] == [50]
    assert limit_tasks(tasks, every, 0) == [] and limit_tasks(tasks, every, -1) is None
    assert [t.file.record_count for t in limit_tasks(tasks, every, 31)] == [50]
    assert sorted(t.file.record_count for t in limit_tasks(tasks, every, 81)) == [30, 30, 50]
    assert limit_tasks(tasks, every, 126) is None
    some = np.array([True, False, False, True, False])
    assert limit_tasks(tasks, some, 16) is None and len(limit_tasks(tasks, some, 15)) == 2


# ---- real tables ----------------------------------------------------------------------------

ARROW = pa.schema([("id", pa.int64()), ("a", pa.int64()), ("x", pa.float64()), ("s", pa.string())])


@pytest.fixture
def catalog(tmp_path):
    cat = SqlCatalog("limit", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse")
    cat.create_namespace("db")
    return cat


def _random_table(catalog, name: str, rng) -> tuple:
    """A table of 2..8 appended files (one each), values clustered per file so that some files
    fully match and others do not, with NULLs, NaN and ties."""
    table = catalog.create_table(f"db.{name}", schema=ARROW)
    start = 0
    for _ in range(int(rng.integers(2, 9))):
        n = int(rng.integers(1, 40))
        base = int(rng.integers(0, 60))
        a = rng.integers(base, base + int(rng.integers(1, 15)), n)
        floats = rng.choice([0.0, -0.0, 1.5, 2.5, 7.0, float("nan"), float("inf")], int(rng.integers(1, 4)))
        x = rng.choice(floats, n) + base / 10  # a few values per file: some with NaN and no infinity
        strings = rng.choice(np.array(["ab", "abc", "b", "a" * 17, "a" * 16, "zz"], dtype=object),
                             int(rng.integers(1, 4)))
        s = rng.choice(strings, n)
        table.append(pa.table({"id": np.arange(start, start + n),
                               "a": pa.array(a, mask=rng.random(n) < rng.choice([0, 0, 0.2])),
                               "x": pa.array(x, mask=rng.random(n) < rng.choice([0, 0, 0.2])),
                               "s": pa.array(list(s), pa.string(), mask=rng.random(n) < rng.choice([0, 0, 0.2]))},
                              schema=ARROW))
        start += n
    return table


def _random_filter(rng) -> str:
    c = int(rng.integers(0, 60))
    atoms = [f"a >= {c}", f"a < {c}", f"a BETWEEN {c} AND {c + 10}", "a IS NOT NULL", "a IS NULL",
             f"x > {c / 5}", f"x <= {c / 5}", f"x < {c / 5}", "x = double('NaN')", "x <> 0", "s >= 'ab'", "s LIKE 'a%'",
             "s = 'b'", "s IS NULL", "TRUE", f"NOT (a < {c})", f"a IN ({c}, {c + 1}, {c + 2})"]
    picked = [atoms[int(i)] for i in rng.integers(0, len(atoms), int(rng.integers(1, 3)))]
    return f" {rng.choice(['AND', 'OR'])} ".join(f"({p})" for p in picked)


def _multiset(rows: pa.Table) -> Counter:
    return Counter(tuple(repr(v) for v in r.values()) for r in rows.to_pylist())  # NaN as 'nan'


def test_limit_scans_return_min_k_matching_rows(catalog):
    rng = np.random.default_rng(47)
    pruned_cases = claimed_files = 0
    for case in range(150):
        table = _random_table(catalog, f"t{case}", rng)
        sql = _random_filter(rng)
        full = pando_iceberg.scan(table, sql)
        matching = _multiset(full.to_arrow())
        total = sum(matching.values())
        k = int(rng.integers(0, total + 10))
        scan = pando_iceberg.scan(table, sql, limit=k)
        got = scan.to_arrow()
        assert got.num_rows == min(k, total), (case, sql, k)
        assert scan.to_arrow_batch_reader().read_all().num_rows == min(k, total)
        assert not _multiset(got) - matching, (case, sql, k)  # every row returned is a matching row (as a multiset)
        ex, unpruned = scan.explain(), full.explain()
        assert ex.pando_files == unpruned.pando_files - ex.limit_files_pruned <= unpruned.pando_files
        assert scan.count() == total
        pruned_cases += ex.limit_files_pruned > 0
        plan = full.plan()  # every file decided fully matching holds only matching rows
        claimed = [t for t, m in zip(plan.tasks, fully_matching(plan.filter, plan.tasks, table.schema())) if m]
        rows = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table(claimed)
        assert plan.filter.evaluate(rows).all(), (case, sql)
        claimed_files += len(claimed)
    assert pruned_cases >= 20  # the property is not vacuous: the LIMIT removed files in many cases
    assert claimed_files >= 100


def test_limit_plans_the_fewest_fully_matching_files(catalog):
    table = catalog.create_table("db.t", schema=ARROW)
    for lo, n in ((0, 10), (100, 30), (200, 20), (300, 40)):
        table.append(pa.table({"id": np.arange(n), "a": np.arange(lo, lo + n), "x": np.full(n, 1.0),
                               "s": ["k"] * n}, schema=ARROW))
    scan = pando_iceberg.scan(table, "a >= 100", limit=50)
    assert sorted(int(t.file.record_count) for t in scan.plan_files()) == [30, 40]
    assert scan.explain().limit_files_pruned == 1 and scan.to_arrow().num_rows == 50
    assert scan.explain().as_dict()["limit_files_pruned"] == 1 and scan.explain().pando_rows == 70
    every = pando_iceberg.scan(table, limit=35)  # no filter: record counts alone
    assert [int(t.file.record_count) for t in every.plan_files()] == [40] and every.to_arrow().num_rows == 35
    assert every.explain().limit_files_pruned == 3
    partly = pando_iceberg.scan(table, "a >= 110", limit=45)  # fully matching files hold 20 + 40 rows
    assert sorted(int(t.file.record_count) for t in partly.plan_files()) == [20, 40]
    assert partly.to_arrow().num_rows == 45
    short = pando_iceberg.scan(table, "a >= 110", limit=61)  # they hold too few: planned as without LIMIT
    assert short.explain().limit_files_pruned == 0 and len(short.plan_files()) == 3
    assert short.to_arrow().num_rows == 61
    # a pyiceberg expression is read with pyiceberg's semantics: not pruned by LIMIT
    expr = pando_iceberg.scan(table, GreaterThan("a", 99), limit=5)
    assert expr.explain().limit_files_pruned == 0 and expr.to_arrow().num_rows == 5
    none = pando_iceberg.scan(table, "a >= 100", limit=0)
    assert none.plan_files() == [] and none.to_arrow().num_rows == 0


def test_without_limit_nothing_changes(catalog):
    """No LIMIT, or one the fully matching files cannot reach: the files Iceberg's pruning plans."""
    rng = np.random.default_rng(3)
    for case in range(15):
        table = _random_table(catalog, f"n{case}", rng)
        sql = _random_filter(rng)
        iceberg = [t.file.file_path for t in table.scan(row_filter=to_pyiceberg(
            TableFilter.from_sql(sql, ARROW, "t"), table.schema())).plan_files()]
        total = int(table.current_snapshot().summary["total-records"])
        for limit in (None, total + 1):
            scan = pando_iceberg.scan(table, sql, limit=limit)
            assert scan.explain().limit_files_pruned == 0
            assert [t.file.file_path for t in scan.plan_files()] == iceberg


def _spark_order(values: list, order) -> list:
    """``values`` in Spark's order for ``order`` (NULLs where it says, NaN above every number,
    -0.0 equal to 0.0), each as a comparable token."""
    def token(v):
        if v is None:
            return "NULL"
        if isinstance(v, float) and v != v:
            return "NaN"
        return v + 0.0 if isinstance(v, float) else v  # -0.0 → 0.0
    nulls = [v for v in values if v is None]
    nans = [v for v in values if isinstance(v, float) and v != v]
    rest = sorted((v for v in values if v is not None and not (isinstance(v, float) and v != v)),
                  key=token, reverse=order.descending)
    ordered = nans + rest if order.descending else rest + nans
    ordered = nulls + ordered if order.nulls_first else ordered + nulls
    return [token(v) for v in ordered]


def test_top_k_keeps_every_file_that_may_hold_one_of_the_k_first_rows(catalog):
    """Random tables and filters, every direction and NULL placement: the k first values in
    Spark's order over the files top-k pruning keeps equal those over every matching row."""
    from pando_iceberg.planner import plan_scan
    from pando_iceberg.planner.limit import Ordering

    rng = np.random.default_rng(11)
    pruned = bounded = 0
    for case in range(120):
        table = _random_table(catalog, f"k{case}", rng)
        sql = _random_filter(rng)
        order = Ordering(str(rng.choice(["a", "x", "s", "id"])), bool(rng.integers(0, 2)), bool(rng.integers(0, 2)))
        full = pando_iceberg.scan(table, sql).to_arrow()
        k = int(rng.integers(0, full.num_rows + 5))
        plan = plan_scan(table, sql, limit=k, order=order)
        kept = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table(plan.tasks)
        kept = kept.filter(plan.filter.evaluate(kept)) if kept.num_rows else kept
        want = _spark_order(full.column(order.column).to_pylist(), order)[:k]
        got = _spark_order(kept.column(order.column).to_pylist(), order)[:k]
        assert got == want, (case, sql, order, k)
        pruned += plan.explain.limit_files_pruned > 0
        bounded += plan.explain.topk_boundary is not None
    assert pruned >= 10 and bounded >= 20  # not vacuous


def test_top_k_boundary_by_hand():
    from pando_iceberg.planner.limit import Ordering, top_k_tasks

    files = [_task(rows=10, i=(0, 9)), _task(rows=10, i=(5, 30)), _task(rows=10, i=(20, 29)),
             _task(rows=10, i=(40, 49), nulls={"i": 2})]
    every = np.ones(4, dtype=bool)
    # DESC: best value first, each file's upper bound being one of its rows and its other
    # non-NULL rows at least its lower bound: 49 (1), 40 (7), 30 (1), 29 (1): B = 29 for k = 10
    assert top_k_tasks(files, every, SCHEMA, Ordering("i", True, False), 10) == (files[1:], 29)
    assert top_k_tasks(files, every, SCHEMA, Ordering("i", True, False), 8) == ([files[3]], 40)
    assert top_k_tasks(files, every, SCHEMA, Ordering("i", True, True), 8) == ([files[3]], 40)
    # ASC: 0 (1), 5 (1), then 9 rows at most 9: B = 9; NULLS FIRST keeps the file with NULLs, which sort first
    assert top_k_tasks(files, every, SCHEMA, Ordering("i", False, True), 10) == ([files[0], files[1], files[3]], 9)
    assert top_k_tasks(files, every, SCHEMA, Ordering("i", False, False), 10) == (files[:2], 9)
    assert top_k_tasks(files, every, SCHEMA, Ordering("i", True, False), 39) is None  # 38 rows reach a value
    # only fully matching files prove the boundary (49, 40 ×7, 29, 20 ×9); ties with it are kept
    assert top_k_tasks(files, np.array([False, False, True, True]), SCHEMA, Ordering("i", True, False), 10) == \
        (files[1:], 20)
    assert top_k_tasks(files, np.array([True, False, False, False]), SCHEMA, Ordering("i", True, False), 10) == \
        (files, 0)
    assert top_k_tasks(files, every, SCHEMA, Ordering("i", True, False), 0) == ([], None)
    # the upper bounds alone: three files whose 10 rows each span 0..100, 0..90, 0..80
    wide = [_task(rows=10, i=(0, 100)), _task(rows=10, i=(0, 80)), _task(rows=10, i=(0, 90))]
    assert top_k_tasks(wide, np.ones(3, dtype=bool), SCHEMA, Ordering("i", True, False), 2) == ([wide[0], wide[2]], 90)
    assert top_k_tasks(wide, np.ones(3, dtype=bool), SCHEMA, Ordering("i", True, False), 3) == (wide, 80)
    assert top_k_tasks(wide, np.ones(3, dtype=bool), SCHEMA, Ordering("i", True, False), 4) == (wide, 0)
    assert top_k_tasks(wide, np.array([True, False, True]), SCHEMA, Ordering("i", True, False), 2) == \
        ([wide[0], wide[2]], 90)
    # a string bound may be truncated or incremented: not a value of the file, only a bound
    named = [_task(rows=10, s=("a", "m")), _task(rows=10, s=("a", "c"))]
    assert top_k_tasks(named, np.ones(2, dtype=bool), SCHEMA, Ordering("s", True, False), 2) == (named, "a")
    # NULLs first: a file with NULLs may hold the first rows whatever the boundary
    nulled = [_task(rows=10, i=(0, 100)), _task(rows=10, i=(0, 5), nulls={"i": 1})]
    assert top_k_tasks(nulled, np.ones(2, dtype=bool), SCHEMA, Ordering("i", True, True), 1) == (nulled, 100)
    assert top_k_tasks(nulled, np.ones(2, dtype=bool), SCHEMA, Ordering("i", True, False), 1) == ([nulled[0]], 100)
    # floats: a file that may hold NaN (count unknown) is kept in descending order, where NaN
    # sorts first, and proves nothing in ascending order (its NaN rows are past its upper bound)
    floats = [_task(rows=10, x=(0.0, 1.0), nans={"x": 0}), _task(rows=10, x=(-5.0, -1.0)),
              _task(rows=10, x=(2.0, 3.0), nans={"x": 0})]
    assert top_k_tasks(floats, np.ones(3, dtype=bool), SCHEMA, Ordering("x", True, False), 10) == \
        ([floats[1], floats[2]], 2.0)
    assert top_k_tasks(floats, np.ones(3, dtype=bool), SCHEMA, Ordering("x", False, False), 10) == \
        ([floats[0], floats[1]], 1.0)
    # a string upper bound of 16 characters may be truncated: no bound
    strings = [_task(rows=5, s=("a", "a" * 16)), _task(rows=5, s=("b", "c"))]
    assert top_k_tasks(strings, np.ones(2, dtype=bool), SCHEMA, Ordering("s", True, False), 5) == (strings, "b")
