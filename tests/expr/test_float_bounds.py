"""Float and double bounds in Iceberg's pruning (expr/iceberg.py): random file statistics, as each
writer records them, and random predicates; a file holding a row that satisfies the predicate
under Spark's semantics (NaN above every number, NaN = NaN, -0.0 = 0.0) is never pruned, by
pyiceberg's metrics evaluator nor by its compiled copy (planner/metrics.py).

Writers modelled: Iceberg's Java writer (NaN counts; bounds without NaN, the zeros in Java's
order or widened to both zeros as Parquet's statistics are), pyiceberg's writer (the footer of a
real Parquet file, no NaN counts), Pando's rewrite (the footer and NaN counts), an old writer
(NaN in the bounds, no counts), and maps left out at random.

The reference is written here, independently of pando_iceberg.expr: a literal compares as Spark
types it (an integer against a FLOAT column as a FLOAT, a decimal or a double as a double, the
column widened), and where Spark's rounding of a literal to the comparison's type is not pinned
down here, a row counts as matching if it matches with either neighbour.

Profiles (``PANDO_FLOAT_PROFILE``): ``fast`` (default, CI) and ``long`` (10,000 examples each):

    PANDO_FLOAT_PROFILE=long .venv/bin/python -m pytest -q tests/expr/test_float_bounds.py
"""

from __future__ import annotations

import itertools
import math
import os
import struct
from collections import Counter
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest
from expr_gen import data_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.conversions import to_bytes
from pyiceberg.expressions.visitors import _InclusiveMetricsEvaluator
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import DoubleType, FloatType, NestedField

from pando_iceberg.expr import TableFilter
from pando_iceberg.expr.iceberg import to_pyiceberg
from pando_iceberg.planner.metrics import compiled

PROFILES = {"fast": 300, "long": 10_000}
PROFILE = os.environ.get("PANDO_FLOAT_PROFILE", "fast")
if PROFILE not in PROFILES:
    raise ValueError(f"PANDO_FLOAT_PROFILE={PROFILE!r}: accepted values are {', '.join(PROFILES)}")
EXAMPLES = PROFILES[PROFILE]
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

ARROW = pa.schema([pa.field("x", pa.float64(), metadata={b"PARQUET:field_id": b"1"}),
                   pa.field("f", pa.float32(), metadata={b"PARQUET:field_id": b"2"})])
ICEBERG = Schema(NestedField(1, "x", DoubleType(), required=False), NestedField(2, "f", FloatType(), required=False))
TYPES = {"x": DoubleType(), "f": FloatType()}
IDS = {"x": 1, "f": 2}
STATS: Counter = Counter()

NAN, INF = math.nan, math.inf
F32_MAX = float(np.finfo(np.float32).max)


def f32(v: float) -> float:
    with np.errstate(over="ignore"):
        return float(np.float32(v))


# ---------------------------------------------------------------- values and literals

SPECIAL = [NAN, INF, -INF, 0.0, -0.0, 1e300, -1e300, F32_MAX, 5e-324]
DOUBLES = st.one_of(st.sampled_from(SPECIAL), st.integers(-6, 6).map(float),
                    st.integers(-12, 12).map(lambda n: n / 4), st.sampled_from([0.1, 1.81, 2.5, 16777217.0, 1e39]),
                    st.floats(-10, 10, allow_nan=False, width=64))
VALUE = st.one_of(st.none(), DOUBLES)

# (SQL text, kind, exact value): kind "int", "decimal" or "double"; exact value a Fraction, or
# a float for NaN and the infinities.
LITERALS = st.one_of(
    st.integers(-6, 6).map(lambda v: (f"({v})", "int", Fraction(v))),
    st.sampled_from([16777217, 2**53 + 1]).map(lambda v: (str(v), "int", Fraction(v))),
    st.sampled_from(["2.5", "0.1", "1.81", "-1.25", "0.0", "-0.0", "3.00", "1.999", "0.000000001",
                     "123456789.123456789"]).map(lambda t: (t, "decimal", Fraction(Decimal(t)))),
    st.sampled_from(["2.5e0", "1e300", "-1e0", "1.81e0", "0e0", "1e39", "3.4028235e38"]).map(
        lambda t: (t, "double", Fraction(float(t)))),
    st.sampled_from([("CAST('NaN' AS DOUBLE)", "double", NAN), ("CAST('Infinity' AS DOUBLE)", "double", INF),
                     ("CAST('-Infinity' AS DOUBLE)", "double", -INF),
                     ("CAST('-0.0' AS DOUBLE)", "double", Fraction(0))]),
)


def _neighbours(r: Fraction, single: bool) -> list[float]:
    """The one or two values of float32 (``single``) or double nearest the number ``r``, from
    below and above (the infinities when it is beyond the largest finite value)."""
    dtype = np.float32 if single else np.float64
    top = Fraction(float(np.finfo(dtype).max))
    if r > top:
        return [float(np.finfo(dtype).max), INF]
    if r < -top:
        return [-INF, -float(np.finfo(dtype).max)]
    c = dtype(float(r))
    out = []
    for cand in (np.nextafter(c, dtype(-INF)), c, np.nextafter(c, dtype(INF))):
        if math.isfinite(float(cand)):
            out.append(float(cand))
    below = max(v for v in out if Fraction(v) <= r)
    above = min(v for v in out if Fraction(v) >= r)
    return sorted({below, above})


def literal_values(column: str, lit) -> list[float]:
    """What Spark may compare ``column``'s values with: the literal in the comparison's type."""
    _, kind, r = lit
    if isinstance(r, float):
        return [r]
    single = column == "f" and kind == "int"  # Spark: INT/BIGINT vs FLOAT compares as FLOAT
    return _neighbours(r, single)


def spark_key(v: float):
    return (1, 0.0) if math.isnan(v) else (0, v)  # NaN above every number; -0.0 == 0.0


def cmp(op: str, a: float | None, b: float) -> bool | None:
    if a is None:
        return None
    x, y = spark_key(a), spark_key(b)
    return {"=": x == y, "<>": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]


# ---------------------------------------------------------------- predicates: (sql, reference)
# A reference maps a row (dict column → value) to the set of truth values the predicate may have
# there ({True}, {False}, {None}, or more when the literal's rounding is not pinned down).

def _kleene_not(v):
    return None if v is None else not v


def _kleene_and(a, b):
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _kleene_or(a, b):
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


@st.composite
def atoms(draw):
    col = draw(st.sampled_from(["x", "f"]))
    shape = draw(st.sampled_from(["cmp", "cmp", "cmp", "between", "in", "null"]))
    if shape == "cmp":
        op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
        lit = draw(LITERALS)
        flip = draw(st.booleans())
        sql = f"{lit[0]} {({'<': '>', '>': '<', '<=': '>=', '>=': '<='}.get(op, op))} {col}" if flip \
            else f"{col} {op} {lit[0]}"
        return sql, lambda row: {cmp(op, row[col], d) for d in literal_values(col, lit)}
    if shape == "between":
        lo, hi = draw(LITERALS), draw(LITERALS)

        def between(row):
            return {_kleene_and(cmp(">=", row[col], a), cmp("<=", row[col], b))
                    for a in literal_values(col, lo) for b in literal_values(col, hi)}
        return f"{col} BETWEEN {lo[0]} AND {hi[0]}", between
    if shape == "in":
        lits = draw(st.lists(LITERALS, min_size=1, max_size=4))
        with_null = draw(st.booleans()) and draw(st.booleans())

        def member(row):
            out = set()
            for choice in itertools.product(*[literal_values(col, lit) for lit in lits]):
                v: bool | None = False
                for d in choice:
                    v = _kleene_or(v, cmp("=", row[col], d))
                out.add(_kleene_or(v, None) if with_null else v)
            return out
        items = ", ".join([lit[0] for lit in lits] + (["NULL"] if with_null else []))
        return f"{col} IN ({items})", member
    negate = draw(st.booleans())
    return (f"{col} IS {'NOT ' if negate else ''}NULL",
            lambda row: {(row[col] is not None) if negate else (row[col] is None)})


def _combine(op, a, b):
    return {op(u, v) for u in a for v in b}


@st.composite
def predicates(draw, depth=2):
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        sql, ref = draw(atoms())
    else:
        kind = draw(st.sampled_from(["and", "or", "not"]))
        if kind == "not":
            inner_sql, inner = draw(predicates(depth - 1))
            sql, ref = f"NOT ({inner_sql})", (lambda row, inner=inner: {_kleene_not(v) for v in inner(row)})
        else:
            (ls, lf), (rs, rf) = draw(predicates(depth - 1)), draw(predicates(depth - 1))
            op = _kleene_and if kind == "and" else _kleene_or
            sql = f"({ls}) {kind.upper()} ({rs})"

            def ref(row, lf=lf, rf=rf, op=op):
                return _combine(op, lf(row), rf(row))
    return sql, ref


def may_match(rows: list[dict], ref) -> bool:
    return any(True in ref(row) for row in rows)


# ---------------------------------------------------------------- statistics as writers record them

def _java_order(v: float):
    return (v, math.copysign(1.0, v))  # Java's Double.compare: -0.0 below 0.0


def _bounds(values: list[float], zeros: str):
    numbers = [v for v in values if not math.isnan(v)]
    if not numbers:
        return None, None
    lo, hi = min(numbers, key=_java_order), max(numbers, key=_java_order)
    if zeros == "widened":  # Parquet's rule: a zero min is written -0.0, a zero max +0.0
        lo = -0.0 if lo == 0 else lo
        hi = 0.0 if hi == 0 else hi
    return lo, hi


def _data_file(value_counts, null_counts, nan_counts, lower, upper, rows) -> DataFile:
    return DataFile.from_args(content=DataFileContent.DATA, file_path="mem.parquet", file_format=FileFormat.PARQUET,
                              partition=Record(), record_count=rows, file_size_in_bytes=1, sort_order_id=None,
                              spec_id=0, equality_ids=None, key_metadata=None, value_counts=value_counts,
                              null_value_counts=null_counts, nan_value_counts=nan_counts, lower_bounds=lower,
                              upper_bounds=upper)


def modelled_file(rows: list[dict], writer: str, drop: set[str]) -> DataFile:
    value_counts, null_counts, nan_counts, lower, upper = {}, {}, {}, {}, {}
    for col, fid in IDS.items():
        raw = [r[col] for r in rows]
        values = [v for v in raw if v is not None]
        value_counts[fid] = len(raw)
        null_counts[fid] = len(raw) - len(values)
        nans = sum(math.isnan(v) for v in values)
        if writer == "legacy":  # NaN sorts above every number in the bounds; no NaN counts
            ordered = sorted(values, key=lambda v: (math.isnan(v), _java_order(v) if not math.isnan(v) else (0, 0)))
            lo, hi = (ordered[0], ordered[-1]) if ordered else (None, None)
        else:
            nan_counts[fid] = nans
            lo, hi = _bounds(values, "java" if writer == "java" else "widened")
        if lo is not None:
            lower[fid], upper[fid] = to_bytes(TYPES[col], lo), to_bytes(TYPES[col], hi)
    maps = {"value_counts": value_counts, "null_counts": null_counts, "nan_counts": nan_counts,
            "lower": lower, "upper": upper}
    for name in drop:
        maps[name] = {}
    return _data_file(maps["value_counts"], maps["null_counts"], maps["nan_counts"], maps["lower"], maps["upper"],
                      len(rows))


def pyiceberg_file(rows: list[dict]) -> DataFile:
    """The statistics pyiceberg's writer takes from a real Parquet footer (no NaN counts)."""
    table = pa.table({c: pa.array([r[c] for r in rows], ARROW.field(c).type) for c in IDS}, schema=ARROW)
    return data_file(table, ICEBERG)


@st.composite
def files(draw):
    n = draw(st.integers(1, 5))
    rows = []
    for _ in range(n):
        x = draw(VALUE)
        f = draw(VALUE)
        rows.append({"x": x, "f": None if f is None else f32(f)})
    writer = draw(st.sampled_from(["java", "java", "parquet", "legacy", "pyiceberg"]))
    drop = set(draw(st.lists(st.sampled_from(["value_counts", "null_counts", "nan_counts", "lower", "upper"]),
                             max_size=2))) if draw(st.integers(0, 3)) == 0 else set()
    return rows, writer, drop


def _file_of(rows, writer, drop) -> DataFile:
    return pyiceberg_file(rows) if writer == "pyiceberg" else modelled_file(rows, writer, drop)


# ---------------------------------------------------------------- the properties

@SETTINGS
@given(files(), predicates())
def test_a_file_with_a_matching_row_is_never_pruned(file_case, pred):
    rows, writer, drop = file_case
    sql, ref = pred
    flt = TableFilter.from_sql(sql, ARROW.remove_metadata())
    expr = to_pyiceberg(flt, ICEBERG)
    data_file = _file_of(rows, writer, drop)
    evaluator = _InclusiveMetricsEvaluator(ICEBERG, expr)
    kept, kept_compiled = evaluator.eval(data_file), compiled(evaluator)(data_file)
    assert kept == kept_compiled, (sql, expr, rows, writer, drop)
    matching = may_match(rows, ref)
    STATS["cases"] += 1
    STATS["matching"] += matching
    STATS["pruned"] += not kept
    if matching:
        assert kept, (sql, expr, rows, writer, drop)


@SETTINGS
@given(files(), predicates())
def test_the_project_evaluator_agrees_with_the_reference(file_case, pred):
    """The rows TableFilter.evaluate selects (the exact filter applied after a read) are the
    reference's wherever the reference is pinned down: the mapping is sound against both."""
    rows, _, _ = file_case
    sql, ref = pred
    table = pa.table({c: pa.array([r[c] for r in rows], ARROW.field(c).type) for c in IDS})
    got = TableFilter.from_sql(sql, ARROW.remove_metadata()).evaluate(table)
    for row, selected in zip(rows, got):
        truths = ref(row)
        if len(truths) == 1:
            assert bool(selected) == (True in truths), (sql, row)


def _java_file(values: list[float | None], nan_count: int | None = None) -> DataFile:
    rows = [{"x": v, "f": None} for v in values]
    drop = {"nan_counts"} if nan_count is None else set()
    return modelled_file(rows, "java", drop)


@pytest.mark.parametrize("sql,values,nan_count,kept", [
    ("x > 5", [1.0, 4.0], 0, False),  # no NaN: judged by the bounds
    ("x > 5", [1.0, 4.0, NAN], 1, True),  # NaN > 5 in Spark
    ("x > 5", [1.0, 4.0], None, True),  # NaN count unknown (pyiceberg's writer)
    ("x < 5", [NAN, NAN], 2, False),  # NaN only: nothing is below 5
    ("x >= 5", [NAN, NAN], 2, True),
    ("NOT (x < 5)", [NAN], 1, True),
    ("x <> 1", [1.0, NAN], 1, True),
    ("x = CAST('NaN' AS DOUBLE)", [1.0, 2.0], 0, False),
    ("x = CAST('NaN' AS DOUBLE)", [1.0, NAN], 1, True),
    ("x IN (1, CAST('NaN' AS DOUBLE))", [NAN], 1, True),
    ("x < CAST('NaN' AS DOUBLE)", [NAN], 1, False),
    ("x <= CAST('NaN' AS DOUBLE)", [NAN], 1, True),
    ("x BETWEEN 1 AND CAST('Infinity' AS DOUBLE)", [NAN], 1, False),  # NaN is above infinity
    ("x BETWEEN 1 AND CAST('NaN' AS DOUBLE)", [NAN], 1, True),
    ("x = 0", [-0.0], 0, True),  # -0.0 = 0.0, whatever the zero in the bounds
    ("x = -0.0", [0.0], 0, True),
    ("x < 0", [-0.0, 0.0], 0, False),
    ("x <= -0.0", [0.0], 0, True),
    ("x >= 0", [-0.0], 0, True),
    ("x > 0", [-0.0, 0.0], 0, False),
    ("x = CAST('Infinity' AS DOUBLE)", [1.0, 2.0], 0, False),
    ("x = CAST('Infinity' AS DOUBLE)", [1.0, INF], 0, True),
    ("x >= 40 AND x < 43", [43.0, 50.0], 0, False),
    ("x >= 40 AND x < 43", [30.0, 39.5], 0, False),
    ("x >= 40 AND x < 43", [30.0, 39.5], None, False),  # x < 43 prunes without NaN counts
])
def test_bounds_decide_where_nan_cannot_match(sql, values, nan_count, kept):
    expr = to_pyiceberg(TableFilter.from_sql(sql, ARROW.remove_metadata()), ICEBERG)
    assert _InclusiveMetricsEvaluator(ICEBERG, expr).eval(_java_file(values, nan_count)) is kept, expr


def _f_file(values):
    return modelled_file([{"x": None, "f": f32(v)} for v in values], "java", set())


@pytest.mark.parametrize("sql,values,kept", [
    ("f < 1.81", [f32(1.81)], True),  # 1.81 as FLOAT is below the double 1.81
    ("f > 1.81", [f32(1.81)], False),
    ("f = 1.81", [f32(1.81)], True),  # kept: the float32 neighbours of 1.81 bound it
    ("f = 16777217", [16777216.0], True),  # Spark: CAST(16777217 AS FLOAT) = 16777216
    ("f > 1e39", [F32_MAX], False),
    ("f > 1e39", [INF], True),
    ("f < 1e39", [INF], False),
])
def test_float_columns_compare_with_the_literals_neighbours(sql, values, kept):
    expr = to_pyiceberg(TableFilter.from_sql(sql, ARROW.remove_metadata()), ICEBERG)
    assert _InclusiveMetricsEvaluator(ICEBERG, expr).eval(_f_file(values)) is kept, expr


def test_float32_bounds_round_trip():
    assert struct.unpack("<f", to_bytes(FloatType(), f32(1.81)))[0] == f32(1.81)


def test_zzz_report_counts():
    """Prints what the properties covered (run last in the module)."""
    print(f"\nfloat bounds ({PROFILE}): {STATS['cases']} cases, {STATS['matching']} files with a matching row, "
          f"{STATS['pruned']} files pruned")
    assert STATS["cases"] > 0
