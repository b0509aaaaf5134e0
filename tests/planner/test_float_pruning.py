"""``pando_iceberg.scan`` on tables written by pyiceberg (no NaN counts): never more files than
pyiceberg's own ``plan_files`` for the same filter, and the same rows.

- a pyiceberg expression (pyiceberg's semantics: NaN compares false) is planned by pyiceberg as
  it is: the files are at most pyiceberg's and the rows are pyiceberg's;
- SQL text (Spark's semantics) against the pyiceberg expression that means the same where the
  two semantics agree (comparisons a NaN fails, on every type): at most pyiceberg's files, and
  the rows of the exact filter over every row;
- the range example: 400,000 rows in 8 files, ``x`` a double sorted across files:
  ``x >= 40 AND x < 43`` plans 1 file.

Random tables hold NaN, ±0.0, ±inf and NULLs in a double and a FLOAT column beside long,
string, date and decimal columns. Profiles (``PANDO_FLOAT_PROFILE``): ``fast`` (default, CI)
and ``long`` (10,000 filters):

    PANDO_FLOAT_PROFILE=long .venv/bin/python -m pytest -q tests/planner/test_float_pruning.py
"""

from __future__ import annotations

import datetime as dt
import math
import os
import random
from collections import Counter
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from pyiceberg import expressions as E
from pyiceberg.schema import Schema
from pyiceberg.types import DateType, DecimalType, DoubleType, FloatType, LongType, NestedField, StringType

import pando_iceberg
from pando_iceberg.expr import TableFilter

PROFILES = {"fast": (3, 60), "long": (20, 500)}  # (tables, filters per table)
PROFILE = os.environ.get("PANDO_FLOAT_PROFILE", "fast")
if PROFILE not in PROFILES:
    raise ValueError(f"PANDO_FLOAT_PROFILE={PROFILE!r}: accepted values are {', '.join(PROFILES)}")
TABLES, FILTERS = PROFILES[PROFILE]
NS = "floatplan"
STATS: Counter = Counter()

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "x", DoubleType(), required=False),
    NestedField(3, "f", FloatType(), required=False),
    NestedField(4, "i", LongType(), required=False),
    NestedField(5, "s", StringType(), required=False),
    NestedField(6, "d", DateType(), required=False),
    NestedField(7, "m", DecimalType(9, 2), required=False),
)
ARROW = pa.schema([("id", pa.int64()), ("x", pa.float64()), ("f", pa.float32()), ("i", pa.int64()),
                   ("s", pa.string()), ("d", pa.date32()), ("m", pa.decimal128(9, 2))])
SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0]
DAY0 = dt.date(1995, 1, 1)


def _fresh(catalog, name: str):
    catalog.create_namespace_if_not_exists(NS)
    if catalog.table_exists(f"{NS}.{name}"):
        catalog.purge_table(f"{NS}.{name}")
    return catalog.create_table(f"{NS}.{name}", schema=SCHEMA)


def random_rows(rng: np.random.Generator, n: int, start: int, center: float) -> pa.Table:
    """Rows around ``center`` (files differ in range, so bounds prune), with NaN, zeros of both
    signs, infinities and NULLs sprinkled in."""
    x = np.round(rng.normal(center, 3.0, n), 1)
    special = rng.random(n)
    x = np.where(special < 0.04, rng.choice(SPECIAL, n), x)
    f = np.where(rng.random(n) < 0.04, rng.choice(SPECIAL, n), np.round(rng.normal(center, 3.0, n), 2))
    null_x, null_f = rng.random(n) < 0.05, rng.random(n) < 0.05
    i = (rng.normal(center, 3.0, n)).astype(np.int64)
    s = np.array([chr(ord("a") + int(v) % 26) * (1 + int(v) % 3) for v in rng.integers(0, 100, n)], dtype=object)
    d = [DAY0 + dt.timedelta(days=int(center * 3 + v)) for v in rng.integers(-5, 5, n)]
    m = [Decimal(int(v)).scaleb(-2) for v in rng.integers(int(center * 100) - 500, int(center * 100) + 500, n)]
    return pa.table({
        "id": pa.array(np.arange(start, start + n), pa.int64()),
        "x": pa.array(x, pa.float64(), mask=null_x),
        "f": pa.array(f.astype(np.float32), pa.float32(), mask=null_f),
        "i": pa.array(i, pa.int64(), mask=rng.random(n) < 0.05),
        "s": pa.array(s, pa.string()),
        "d": pa.array(d, pa.date32()),
        "m": pa.array(m, pa.decimal128(9, 2)),
    }, schema=ARROW)


def _float_literal(rng: random.Random, nan: bool = True) -> float:
    pool = [0.0, -0.0, math.inf, -math.inf, 1e300] + ([math.nan] if nan else [])
    return rng.choice(pool) if rng.random() < 0.25 else round(rng.uniform(-2, 22), rng.choice([0, 1, 2]))


def _literal(rng: random.Random, col: str):
    if col in ("x", "f"):
        return _float_literal(rng, nan=False)  # pyiceberg holds no NaN literal (IsNaN is the predicate)
    if col == "i":
        return rng.randint(-2, 22)
    if col == "s":
        return rng.choice(["a", "b", "bb", "c", "m", "zzz", ""])
    if col == "d":
        return (DAY0 + dt.timedelta(days=rng.randint(-10, 70))).isoformat()
    return Decimal(rng.randint(-200, 2200)).scaleb(-2)


def pyiceberg_expression(rng: random.Random, depth: int = 2):
    """A random pyiceberg expression: every predicate kind, And/Or/Not."""
    if depth > 0 and rng.random() < 0.45:
        kind = rng.choice(["and", "or", "not"])
        if kind == "not":
            return E.Not(pyiceberg_expression(rng, depth - 1))
        left, right = pyiceberg_expression(rng, depth - 1), pyiceberg_expression(rng, depth - 1)
        return E.And(left, right) if kind == "and" else E.Or(left, right)
    col = rng.choice(["x", "x", "f", "f", "i", "s", "d", "m"])
    kind = rng.choice(["lt", "le", "gt", "ge", "eq", "ne", "in", "notin", "null", "notnull"]
                      + (["nan", "notnan"] if col in ("x", "f") else []) + (["starts"] if col == "s" else []))
    if kind == "null":
        return E.IsNull(col)
    if kind == "notnull":
        return E.NotNull(col)
    if kind == "nan":
        return E.IsNaN(col)
    if kind == "notnan":
        return E.NotNaN(col)
    if kind == "starts":
        return E.StartsWith(col, rng.choice(["a", "b", "bb"]))
    if kind in ("in", "notin"):
        values = {_literal(rng, col) for _ in range(rng.randint(1, 4))}
        return (E.In if kind == "in" else E.NotIn)(col, values)
    cls = {"lt": E.LessThan, "le": E.LessThanOrEqual, "gt": E.GreaterThan, "ge": E.GreaterThanOrEqual,
           "eq": E.EqualTo, "ne": E.NotEqualTo}[kind]
    return cls(col, _literal(rng, col))


def _sql_literal(col: str, v) -> str:
    if col in ("x", "f"):  # a double literal (exactly the value, as pyiceberg's literal is)
        return f"CAST('{'-' if v < 0 else ''}Infinity' AS DOUBLE)" if math.isinf(v) else f"{float(v)!r}D"
    if col == "s":
        return "'" + v + "'"
    if col == "d":
        return f"DATE '{v}'"
    return str(v)


def agreeing_filter(rng: random.Random, depth: int = 1) -> tuple[str, object]:
    """SQL and the pyiceberg expression that selects the same rows under both semantics:
    comparisons a NaN fails (``<``, ``<=``, ``=`` with a number; ``>`` and ``>=`` on columns
    without NaN), combined with AND and OR (no NOT: Spark's NOT keeps NaN where pyiceberg's does
    too, but NULLs differ)."""
    if depth > 0 and rng.random() < 0.5:
        (ls, le), (rs, re_) = agreeing_filter(rng, depth - 1), agreeing_filter(rng, depth - 1)
        if rng.random() < 0.5:
            return f"({ls}) AND ({rs})", E.And(le, re_)
        return f"({ls}) OR ({rs})", E.Or(le, re_)
    col = rng.choice(["x", "x", "f", "i", "s", "d", "m"])
    ops = ["<", "<=", "="] if col in ("x", "f") else ["<", "<=", "=", ">", ">="]
    op = rng.choice(ops)
    v = _float_literal(rng, nan=False) if col in ("x", "f") else _literal(rng, col)
    if col == "f":  # a finite value of the FLOAT column, written exactly as a double literal (pyiceberg reads
        # a double beyond FLOAT's range as "above max": `f < inf` keeps every row, NULLs and NaNs too)
        v = float(np.float32(v)) if math.isfinite(v) and abs(v) < 1e38 else 2.5
    if col in ("x", "f") and isinstance(v, float) and v == 0:
        v = 0.0
    expr = {"<": E.LessThan, "<=": E.LessThanOrEqual, "=": E.EqualTo, ">": E.GreaterThan,
            ">=": E.GreaterThanOrEqual}[op](col, v)
    return f"{col} {op} {_sql_literal(col, v)}", expr


@pytest.fixture(scope="module")
def tables(catalog):
    out = []
    for t in range(TABLES):
        rng = np.random.default_rng(100 + t)
        table = _fresh(catalog, f"t{t}")
        start = 0
        for k in range(int(rng.integers(3, 8))):  # files in increasing ranges, some overlapping
            n = int(rng.integers(20, 300))
            table.append(random_rows(rng, n, start, center=3.0 * k + float(rng.uniform(-1, 1))))
            start += n
        out.append(catalog.load_table(f"{NS}.t{t}"))
    return out


def _ids(arrow: pa.Table) -> list[int]:
    return sorted(arrow.column("id").to_pylist())


def test_a_pyiceberg_expression_plans_at_most_pyicebergs_files_and_reads_its_rows(tables):
    for t_index, table in enumerate(tables):
        rng = random.Random(f"expr-{t_index}")
        for _ in range(FILTERS):
            expr = pyiceberg_expression(rng)
            try:
                theirs = table.scan(row_filter=expr).plan_files()
            except (ValueError, TypeError):  # pyiceberg refuses the expression: nothing to compare
                STATS["refused"] += 1
                continue
            scan = pando_iceberg.scan(table, row_filter=expr)
            ours = scan.plan_files()
            assert {t.file.file_path for t in ours} <= {t.file.file_path for t in theirs}, expr
            assert _ids(scan.to_arrow()) == _ids(table.scan(row_filter=expr).to_arrow()), expr
            STATS["expressions"] += 1
            STATS["expression files pyiceberg"] += len(theirs)
            STATS["expression files pando"] += len(ours)


def test_sql_plans_at_most_the_files_of_the_agreeing_pyiceberg_expression(tables):
    for t_index, table in enumerate(tables):
        rng = random.Random(f"sql-{t_index}")
        every = table.scan().to_arrow()
        for _ in range(FILTERS):
            sql, expr = agreeing_filter(rng)
            theirs = table.scan(row_filter=expr).plan_files()
            scan = pando_iceberg.scan(table, row_filter=sql)
            ours = scan.plan_files()
            assert len(ours) <= len(theirs), (sql, expr, len(ours), len(theirs))
            want = every.filter(pa.array(TableFilter.from_sql(sql, every.schema).evaluate(every)))
            assert _ids(scan.to_arrow()) == _ids(want), sql
            assert _ids(table.scan(row_filter=expr).to_arrow()) == _ids(want), (sql, expr)  # they agree
            STATS["sql"] += 1
            STATS["sql files pyiceberg"] += len(theirs)
            STATS["sql files pando"] += len(ours)


@pytest.fixture(scope="module")
def ranged(catalog):
    """400,000 rows in 8 pyiceberg appends, ``x`` a double sorted across the files."""
    table = _fresh(catalog, "ranged")
    rng = np.random.default_rng(7)
    x = np.sort(rng.uniform(0.0, 100.0, 400_000))
    for k in range(8):
        part = slice(k * 50_000, (k + 1) * 50_000)
        n = 50_000
        table.append(pa.table({
            "id": pa.array(np.arange(k * n, (k + 1) * n), pa.int64()), "x": pa.array(x[part], pa.float64()),
            "f": pa.array(x[part].astype(np.float32), pa.float32()), "i": pa.array(np.arange(n), pa.int64()),
            "s": pa.array(["a"] * n, pa.string()), "d": pa.array([DAY0] * n, pa.date32()),
            "m": pa.array([Decimal("1.00")] * n, pa.decimal128(9, 2))}, schema=ARROW))
    return catalog.load_table(f"{NS}.ranged")


@pytest.mark.parametrize("flt,want", [
    ("x >= 40 AND x < 43", 1),
    ("x BETWEEN 40 AND 43", 1),
    ("NOT (x < 40) AND x < 43", 1),
    ("x < 12", 1),
    ("x = 42.5", 1),
    ("f >= 40 AND f < 43", 1),
    ("id < 1000", 1),
    (E.And(E.GreaterThanOrEqual("x", 40.0), E.LessThan("x", 43.0)), 1),
    (E.GreaterThanOrEqual("x", 40.0), 5),
])
def test_the_range_example_plans_the_files_pyiceberg_plans(ranged, flt, want):
    ours = pando_iceberg.scan(ranged, row_filter=flt).plan_files()
    assert len(ours) == want
    if not isinstance(flt, str):
        assert len(ranged.scan(row_filter=flt).plan_files()) == want


def test_zzz_report_counts():
    """Prints what the differential tests covered (run last in the module)."""
    print(f"\nfloat planning ({PROFILE}): {dict(STATS)}")
    assert STATS["expressions"] > 0 and STATS["sql"] > 0
