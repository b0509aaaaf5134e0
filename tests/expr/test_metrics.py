"""``planner.metrics.compiled``: pyiceberg's inclusive metrics evaluator compiled into closures
gives pyiceberg's answer on every file — random expressions over every predicate kind, on
random file statistics (missing counts and bounds, nulls only, NaN bounds, empty files and
unknown record counts) and on statistics Parquet writes for random rows (``expr_gen``)."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pyarrow as pa
from expr_gen import ICEBERG, data_file, tables
from expr_gen import SCHEMA as ARROW
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.conversions import to_bytes
from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNaN,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    NotEqualTo,
    NotIn,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    StartsWith,
)
from pyiceberg.expressions.visitors import _InclusiveMetricsEvaluator
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record
from pyiceberg.types import DoubleType

from pando_iceberg.planner import metrics

SCHEMA = ICEBERG
DAY = dt.date(2000, 1, 1)
VALUES = {
    "i": st.integers(-4, 4),
    "f": st.one_of(st.floats(-2, 2, allow_nan=False), st.just(math.nan)),
    "s": st.sampled_from(["", "a", "ab", "abc", "b", "ba", "c"]),
    "d": st.integers(-3, 3).map(lambda n: DAY + dt.timedelta(days=n)),
    "m": st.integers(-300, 300).map(lambda n: Decimal(n).scaleb(-2)),
    "b": st.booleans(),
    "j": st.integers(-4, 4),
}
COMPARISONS = [EqualTo, NotEqualTo, LessThan, LessThanOrEqual, GreaterThan, GreaterThanOrEqual]


KINDS = [(c, k) for c in VALUES for k in [*COMPARISONS, In, NotIn, IsNull, NotNull]] + [
    ("f", IsNaN), ("f", NotNaN), ("s", StartsWith), ("s", NotStartsWith)]
NUMBERS = {c: v.filter(lambda x: not (isinstance(x, float) and math.isnan(x))) for c, v in VALUES.items()}


@st.composite
def atoms(draw):
    """A predicate of any kind on any column, each (column, kind) alike likely."""
    column, kind = draw(st.sampled_from(KINDS))
    if kind in (In, NotIn):
        return kind(column, draw(st.sets(NUMBERS[column], min_size=1, max_size=4)))
    if kind in (IsNaN, NotNaN, IsNull, NotNull):
        return kind(column)
    if kind in (StartsWith, NotStartsWith):
        return kind(column, draw(st.sampled_from(["a", "ab", "b"])))
    return kind(column, draw(NUMBERS[column]))


def expressions():
    leaves = st.one_of(atoms(), st.sampled_from([AlwaysTrue(), AlwaysFalse()]))
    return st.recursive(leaves, lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda p: And(*p)), st.tuples(inner, inner).map(lambda p: Or(*p)),
        inner.map(Not)), max_leaves=10)


@st.composite
def files(draw):
    """A data file with random statistics: each column's counts and bounds present or not."""
    value_counts, null_counts, nan_counts, lower, upper = {}, {}, {}, {}, {}
    for field in SCHEMA.fields:
        fid = field.field_id
        if draw(st.booleans()):  # counts: the edge cases (none, all) as likely as the rest
            n = value_counts[fid] = draw(st.integers(0, 3))
            if draw(st.booleans()):
                null_counts[fid] = draw(st.sampled_from([0, n, min(1, n)]))
            if field.name == "f" and draw(st.booleans()):
                nan_counts[fid] = draw(st.sampled_from([0, n, min(1, n)]))
        for bounds in (lower, upper):
            if draw(st.booleans()):
                bounds[fid] = to_bytes(field.field_type, draw(VALUES[field.name]))
    return DataFile.from_args(
        content=DataFileContent.DATA, file_path="mem.parquet", file_format=FileFormat.PARQUET, partition=Record(),
        record_count=draw(st.sampled_from([-1, 0, 1, 3, 10])), file_size_in_bytes=1, value_counts=value_counts,
        null_value_counts=null_counts, nan_value_counts=nan_counts, lower_bounds=lower, upper_bounds=upper,
        sort_order_id=None, spec_id=0, equality_ids=None, key_metadata=None)


@settings(max_examples=600, deadline=None)
@given(expressions(), st.lists(files(), min_size=1, max_size=6), st.booleans())
def test_compiled_answers_as_pyiceberg_on_random_statistics(expr, data_files, include_empty):
    evaluator = _InclusiveMetricsEvaluator(SCHEMA, expr, include_empty_files=include_empty)
    check = metrics.compiled(evaluator)
    for f in data_files:
        assert check(f) == evaluator.eval(f), (expr, f)


@settings(max_examples=3000, deadline=None)
@given(atoms(), st.lists(files(), min_size=1, max_size=4))
def test_each_predicate_kind_answers_as_pyiceberg(atom, data_files):
    evaluator = _InclusiveMetricsEvaluator(SCHEMA, atom)
    check = metrics.compiled(evaluator)
    for f in data_files:
        assert check(f) == evaluator.eval(f), (atom, f)


@settings(max_examples=200, deadline=None)
@given(expressions(), tables(min_rows=1, max_rows=6))
def test_compiled_answers_as_pyiceberg_on_parquet_statistics(expr, rows):
    evaluator = _InclusiveMetricsEvaluator(SCHEMA, expr)
    f = data_file(rows)
    assert metrics.compiled(evaluator)(f) == evaluator.eval(f), (expr, rows.to_pylist())


def test_a_node_it_does_not_know_keeps_pyiceberg_s_evaluator():
    """STARTS WITH is left to pyiceberg (its truncated bounds); the other kinds are compiled."""
    with_prefix = _InclusiveMetricsEvaluator(SCHEMA, And(StartsWith("s", "a"), LessThan("i", 2)))
    assert metrics.compiled(with_prefix) == with_prefix.eval
    plain = _InclusiveMetricsEvaluator(SCHEMA, Or(In("i", {1, 2}), And(IsNull("s"), NotNaN("f"))))
    assert metrics.compiled(plain) != plain.eval


def _rows(**columns):
    """A table of expr_gen's schema with ``columns`` given, the others null."""

    n = len(next(iter(columns.values())))
    return pa.table({f.name: columns.get(f.name, [None] * n) for f in ARROW}, schema=ARROW)


def test_bounds_are_decoded_once_and_the_cache_stays_bounded(monkeypatch):
    monkeypatch.setattr(metrics, "DECODED_MAX", 4)
    metrics.DECODED.clear()
    evaluator = _InclusiveMetricsEvaluator(SCHEMA, And(GreaterThanOrEqual("i", 0), LessThan("i", 3)))
    check = metrics.compiled(evaluator)
    f = data_file(_rows(i=[1, 2]))
    assert check(f) and check(f)
    assert len(metrics.DECODED) == 2  # the lower and the upper bound, each decoded once
    for n in range(10):
        check(data_file(_rows(i=[n])))
    assert len(metrics.DECODED) <= 4


def _file(lower=None, upper=None, value_count=3, null_count=0, nan_count=None) -> DataFile:
    """One file with statistics of column f (field 2) only."""
    def one(v):
        return {} if v is None else {2: v}

    return DataFile.from_args(
        content=DataFileContent.DATA, file_path="mem.parquet", file_format=FileFormat.PARQUET, partition=Record(),
        record_count=3, file_size_in_bytes=1, value_counts=one(value_count), null_value_counts=one(null_count),
        nan_value_counts=one(nan_count), lower_bounds=one(None if lower is None else to_bytes(DoubleType(), lower)),
        upper_bounds=one(None if upper is None else to_bytes(DoubleType(), upper)), sort_order_id=None, spec_id=0,
        equality_ids=None, key_metadata=None)


def test_nan_bounds_and_nan_only_columns_are_judged_as_pyiceberg_judges_them():
    """A NaN bound is unreliable: pyiceberg keeps the file at the first NaN bound it reads (for
    = before looking at the other bound); a column of NaNs only matches no comparison."""
    cases = [
        (EqualTo("f", 1.0), _file(lower=math.nan, upper=0.5), True),  # NaN lower: kept, upper unread
        (EqualTo("f", 1.0), _file(lower=0.0, upper=math.nan), True),
        (EqualTo("f", 1.0), _file(lower=0.0, upper=0.5), False),
        (LessThan("f", 0.0), _file(lower=math.nan, upper=2.0), True),
        (GreaterThan("f", 1.0), _file(lower=0.0, upper=math.nan), True),
        (GreaterThanOrEqual("f", 1.0), _file(lower=0.0, upper=0.5), False),
        (In("f", {1.0, 2.0}), _file(lower=math.nan, upper=0.5), True),
        (In("f", {1.0, 2.0}), _file(lower=1.5, upper=1.9), False),
        (LessThan("f", 5.0), _file(lower=0.0, upper=1.0, nan_count=3), False),  # NaNs only
        (NotNaN("f"), _file(nan_count=3), False),
        (IsNaN("f"), _file(nan_count=0), False),
        (IsNull("f"), _file(null_count=0), False),
        (NotNull("f"), _file(null_count=3), False),
        (LessThan("f", 5.0), _file(lower=0.0, upper=1.0, null_count=3), False),  # nulls only
    ]
    for expr, f, want in cases:
        evaluator = _InclusiveMetricsEvaluator(SCHEMA, expr)
        assert evaluator.eval(f) == want, expr
        assert metrics.compiled(evaluator)(f) == want, expr
