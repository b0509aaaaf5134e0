"""to_pyiceberg: the returned expression is implied by the filter (sound for Iceberg's file
pruning), checked row by row with pyiceberg's Arrow translation and file by file with its
inclusive metrics evaluator on Parquet statistics; plus the mapping of each construct."""

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from expr_gen import ICEBERG, SCHEMA, data_file, examples, predicates, tables
from hypothesis import given, settings
from hypothesis import strategies as st
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
    NotEqualTo,
    NotIn,
    NotNull,
    Or,
    StartsWith,
)
from pyiceberg.expressions.visitors import _InclusiveMetricsEvaluator, bind
from pyiceberg.io.pyarrow import (
    expression_to_pyarrow,
)
from pyiceberg.schema import Schema
from pyiceberg.types import (
    DecimalType,
    LongType,
    NestedField,
    TimestampType,
    TimestamptzType,
)

from pando_iceberg.expr import JoinFilter, PandoExprError, TableFilter
from pando_iceberg.expr.iceberg import factor_common, to_pyiceberg


def _row_mask(expr, table: pa.Table) -> np.ndarray:
    """Rows on which the (bound) pyiceberg expression is TRUE, evaluated by pyarrow."""
    arrow_expr = expression_to_pyarrow(bind(ICEBERG, expr, case_sensitive=True))
    numbered = table.append_column("__row", pa.array(np.arange(table.num_rows)))
    kept = numbered.filter(arrow_expr).column("__row").to_numpy()
    mask = np.zeros(table.num_rows, dtype=bool)
    mask[kept] = True
    return mask


def _filter(sql):
    try:
        return TableFilter.from_sql(sql, SCHEMA)
    except PandoExprError:
        return None


@settings(max_examples=examples(150))
@given(tables(min_rows=1), predicates())
def test_implied_row_by_row(table, pred):
    filt = _filter(pred[0])
    if filt is None:
        return
    sat = filt.evaluate(table)
    implied = _row_mask(to_pyiceberg(filt, ICEBERG), table)
    assert not (sat & ~implied).any(), (pred[0], to_pyiceberg(filt, ICEBERG), table.filter(pa.array(sat & ~implied)))


@settings(max_examples=examples(100))
@given(tables(min_rows=1), predicates(), st.integers(1, 4))
def test_metrics_evaluator_never_prunes_a_matching_file(table, pred, rows_per_file):
    filt = _filter(pred[0])
    if filt is None:
        return
    evaluator = _InclusiveMetricsEvaluator(ICEBERG, to_pyiceberg(filt, ICEBERG))
    for start in range(0, table.num_rows, rows_per_file):
        chunk = table.slice(start, rows_per_file)
        if filt.evaluate(chunk).any():
            assert evaluator.eval(data_file(chunk)), (pred[0], to_pyiceberg(filt, ICEBERG), chunk.to_pylist())


def M(sql, schema=SCHEMA, iceberg=ICEBERG):
    return to_pyiceberg(TableFilter.from_sql(sql, schema), iceberg)


@pytest.mark.parametrize("sql,want", [
    ("i < 5", LessThan("i", 5)),
    ("5 < i", GreaterThan("i", 5)),
    ("i <> 5", NotEqualTo("i", 5)),
    ("not (i < 5)", GreaterThanOrEqual("i", 5)),
    ("not (i = 5)", NotEqualTo("i", 5)),
    ("not (i <> 5)", EqualTo("i", 5)),
    ("i between 1 and 3", And(GreaterThanOrEqual("i", 1), LessThanOrEqual("i", 3))),
    ("not (i between 1 and 3)", Or(LessThan("i", 1), GreaterThan("i", 3))),
    ("i in (3, 1, 2)", In("i", [1, 2, 3])),
    ("i in (3)", EqualTo("i", 3)),
    ("i not in (1, 2)", NotIn("i", [1, 2])),
    ("i in (1, null)", EqualTo("i", 1)),
    ("i not in (1, null)", AlwaysFalse()),
    ("i is null", IsNull("i")),
    ("i is not null", NotNull("i")),
    ("f is null", IsNull("f")),
    ("s like 'ab%'", StartsWith("s", "ab")),
    ("s like 'ab%c'", StartsWith("s", "ab")),  # every match starts with the literal prefix
    ("s like 'abc'", EqualTo("s", "abc")),
    ("s not like 'abc'", NotEqualTo("s", "abc")),
    ("s not like 'ab%'", NotNull("s")),
    ("s like '%ab'", NotNull("s")),
    ("s >= 'b'", GreaterThanOrEqual("s", "b")),
    ("d < date '1995-01-01'", LessThan("d", dt.date(1995, 1, 1))),
    ("d >= '1994-01-01' and d < date '1994-01-01' + interval '1' year",
     And(GreaterThanOrEqual("d", dt.date(1994, 1, 1)), LessThan("d", dt.date(1995, 1, 1)))),
    ("b", EqualTo("b", True)),
    ("not b", EqualTo("b", False)),
    ("b = false", EqualTo("b", False)),
    ("b <> false", EqualTo("b", True)),
    ("i < 5 or s = 'a'", Or(LessThan("i", 5), EqualTo("s", "a"))),
    ("not (i < 5 or s = 'a')", And(GreaterThanOrEqual("i", 5), NotEqualTo("s", "a"))),
    ("not (i < 5 and s = 'a')", Or(GreaterThanOrEqual("i", 5), NotEqualTo("s", "a"))),
    ("i < 5 and i + 1 > 2", LessThan("i", 5)),  # arithmetic is not mapped: dropped from the AND
    ("i < 5 or i + 1 > 2", AlwaysTrue()),
    ("not (i + 1 > 2)", AlwaysTrue()),  # NOT of something unmappable
    ("i < j", AlwaysTrue()),  # column vs column
    ("f > 1.5", Or(GreaterThan("f", 1.5), IsNaN("f"))),  # Spark: NaN > 1.5; Iceberg's metrics: not
    ("f < 1.5", LessThan("f", 1.5)),
    ("f = 0", And(GreaterThanOrEqual("f", -0.0), LessThanOrEqual("f", 0.0))),  # both zeros, Java's order too
    ("f <> 1.5", NotNull("f")),
    ("i < 2.5", LessThanOrEqual("i", 2)),  # an integer column and a decimal literal
    ("i >= 2.5", GreaterThanOrEqual("i", 3)),
    ("i = 2.5", AlwaysFalse()),
    ("i <> 2.5", NotNull("i")),
    ("i < 1e0", AlwaysTrue()),  # compares as double
    ("j < 3000000000", AlwaysTrue()),  # out of the int column's range
    ("j in (1, 3000000000)", EqualTo("j", 1)),
    ("i < null", AlwaysFalse()),
    ("true", AlwaysTrue()),
    ("false", AlwaysFalse()),
])
def test_mapping(sql, want):
    got = M(sql)
    assert got == want, (sql, got)
    bind(ICEBERG, got, case_sensitive=True)  # pyiceberg accepts it as plan_files would


@pytest.mark.parametrize("sql,want", [
    ("m < 24", LessThan("m", Decimal("24.00"))),
    ("m = 24.5", EqualTo("m", Decimal("24.50"))),
    ("m < 24.555", LessThanOrEqual("m", Decimal("24.55"))),
    ("m <= 24.555", LessThanOrEqual("m", Decimal("24.55"))),
    ("m > 24.555", GreaterThanOrEqual("m", Decimal("24.56"))),
    ("m >= 24.555", GreaterThanOrEqual("m", Decimal("24.56"))),
    ("m < -24.555", LessThanOrEqual("m", Decimal("-24.56"))),
    ("m > -24.555", GreaterThanOrEqual("m", Decimal("-24.55"))),
    ("m = 24.555", AlwaysFalse()),
    ("m <> 24.555", NotNull("m")),
    ("not (m < 24.555)", GreaterThanOrEqual("m", Decimal("24.56"))),
    ("m between 0.05 and 0.07", And(GreaterThanOrEqual("m", Decimal("0.05")), LessThanOrEqual("m", Decimal("0.07")))),
    ("m in (1, 2.5, 2.555)", In("m", [Decimal("1.00"), Decimal("2.50")])),
    ("m not in (1, 2.555)", NotEqualTo("m", Decimal("1.00"))),
    ("m < 100000000", AlwaysTrue()),  # beyond decimal(9,2)
    ("m < 0.05e0", AlwaysTrue()),  # a double literal: compared as double
])
def test_decimal_literals_take_the_column_scale(sql, want):
    got = M(sql)
    assert got == want, (sql, got)
    bind(ICEBERG, got, case_sensitive=True)


def test_timestamps_and_names():
    arrow = pa.schema([("TS", pa.timestamp("us", tz="UTC")), ("Ntz", pa.timestamp("us")), ("x", pa.int64())])
    iceberg = Schema(NestedField(1, "TS", TimestamptzType(), required=False),
                     NestedField(2, "Ntz", TimestampType(), required=False))
    got = M("ts >= timestamp '2020-01-01 00:00:00+02:00'", arrow, iceberg)
    micros = int(dt.datetime(2019, 12, 31, 22, tzinfo=dt.UTC).timestamp()) * 1_000_000
    assert got == GreaterThanOrEqual("TS", micros)  # the Iceberg field's own spelling, UTC micros
    bound = bind(iceberg, got, case_sensitive=True)
    assert bound.literal.value == micros
    got = M("ntz < timestamp_ntz '2020-01-01 10:00:00'", arrow, iceberg)
    assert got == LessThan("Ntz", int(dt.datetime(2020, 1, 1, 10, tzinfo=dt.UTC).timestamp()) * 1_000_000)
    bind(iceberg, got, case_sensitive=True)
    assert M("x < 5", arrow, iceberg) == AlwaysTrue()  # not in the Iceberg schema


def test_joins_and_true_filter_are_always_true():
    dim = TableFilter.from_sql("i < 3", SCHEMA, "dim")
    f = TableFilter("s = 'a'", SCHEMA, [JoinFilter("j", "dim", "i", dim)])
    assert to_pyiceberg(f, ICEBERG) == EqualTo("s", "a")
    assert to_pyiceberg(TableFilter(None, SCHEMA, [JoinFilter("j", "dim", "i", dim)]), ICEBERG) == AlwaysTrue()
    assert to_pyiceberg(TableFilter.true(SCHEMA), ICEBERG) == AlwaysTrue()


GRID_SCHEMA = pa.schema([("i", pa.int64()), ("m", pa.decimal128(9, 2))])
GRID_ICEBERG = Schema(NestedField(1, "i", LongType(), required=False),
                      NestedField(2, "m", DecimalType(9, 2), required=False))


@settings(max_examples=examples(200))
@given(st.sampled_from(["=", "<>", "<", "<=", ">", ">=", "between", "in"]),
       st.lists(st.integers(0, 3).flatmap(lambda k: st.integers(-5 * 10**k, 5 * 10**k).map(
           lambda n: Decimal(n).scaleb(-k))), min_size=2, max_size=2),
       st.sampled_from(["i", "m"]), st.booleans(),
       st.lists(st.one_of(st.none(), st.integers(-450, 450)), min_size=1, max_size=8))
def test_grid_rounding_is_sound(op, lits, col, negate, units):
    # Values near the literals, in the column's own units (integers / hundredths).
    table = pa.table({"i": pa.array([None if u is None else u // 100 for u in units], pa.int64()),
                      "m": pa.array([None if u is None else Decimal(u).scaleb(-2) for u in units],
                                    pa.decimal128(9, 2))})
    a, b = (format(v, "f") for v in lits)
    atom = {"between": f"{col} BETWEEN {a} AND {b}", "in": f"{col} IN ({a}, {b})"}.get(op, f"{col} {op} {a}")
    sql = f"NOT ({atom})" if negate else atom
    filt = TableFilter.from_sql(sql, GRID_SCHEMA)
    expr = bind(GRID_ICEBERG, to_pyiceberg(filt, GRID_ICEBERG), case_sensitive=True)
    numbered = table.append_column("__row", pa.array(np.arange(table.num_rows)))
    kept = set(numbered.filter(expression_to_pyarrow(expr)).column("__row").to_pylist())
    sat = filt.evaluate(table)
    assert all(r in kept for r in np.flatnonzero(sat)), (sql, expr, table.to_pylist())


def test_exported_lazily_from_the_package():
    import pando_iceberg.expr as expr_pkg

    assert expr_pkg.to_pyiceberg is to_pyiceberg


# A small pool of predicates, so that random AND / OR trees share atoms across OR branches.
_POOL = [LessThan("i", 0), GreaterThanOrEqual("i", 2), EqualTo("s", "a"), In("s", {"a", "b"}), IsNull("s"),
         NotNull("i"), LessThan("d", dt.date(2000, 1, 1)), EqualTo("b", True), AlwaysTrue(), AlwaysFalse()]


def _trees():
    return st.recursive(st.sampled_from(_POOL), lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda p: And(*p)), st.tuples(inner, inner).map(lambda p: Or(*p))), max_leaves=12)


def _kleene(expr, truth):
    """expr's value (True / False / None for unknown) with each predicate's value from ``truth``."""
    if isinstance(expr, AlwaysTrue):
        return True
    if isinstance(expr, AlwaysFalse):
        return False
    if isinstance(expr, (And, Or)):
        a, b = _kleene(expr.left, truth), _kleene(expr.right, truth)
        if isinstance(expr, And):
            return False if a is False or b is False else (None if a is None or b is None else True)
        return True if a is True or b is True else (None if a is None or b is None else False)
    return truth[_POOL.index(expr)]


@settings(max_examples=examples(300))
@given(_trees(), st.lists(st.sampled_from([True, False, None]), min_size=len(_POOL), max_size=len(_POOL)),
       tables(min_rows=1), st.integers(1, 4))
def test_factoring_an_or_changes_no_answer(expr, truth, table, rows_per_file):
    """``factor_common``: the same value under every three-valued assignment of the predicates,
    and pyiceberg's metrics evaluator keeps exactly the same files with it; never more predicates."""
    got = factor_common(expr)
    assert _kleene(got, truth) == _kleene(expr, truth), (expr, got)
    assert len(_parts_count(got)) <= len(_parts_count(expr))
    before, after = _InclusiveMetricsEvaluator(ICEBERG, expr), _InclusiveMetricsEvaluator(ICEBERG, got)
    for start in range(0, table.num_rows, rows_per_file):
        f = data_file(table.slice(start, rows_per_file))
        assert before.eval(f) == after.eval(f), (expr, got)


def _parts_count(expr):
    """The predicate leaves of an AND / OR tree."""
    return [*_parts_count(expr.left), *_parts_count(expr.right)] if isinstance(expr, (And, Or)) else [expr]


def test_factoring_takes_the_shared_conjuncts_out_once():
    """TPC-H Q19's lineitem part: three branches sharing l_shipmode and l_shipinstruct."""
    mode, instruct = In("s", {"AIR", "AIR REG"}), EqualTo("b", True)
    branches = [And(And(GreaterThanOrEqual("i", lo), LessThanOrEqual("i", lo + 10)), And(mode, instruct))
                for lo in (1, 10, 20)]
    got = factor_common(Or(Or(branches[0], branches[1]), branches[2]))
    assert got == And(And(mode, instruct), Or(And(GreaterThanOrEqual("i", 1), LessThanOrEqual("i", 11)), Or(
        And(GreaterThanOrEqual("i", 10), LessThanOrEqual("i", 20)), And(GreaterThanOrEqual("i", 20),
                                                                         LessThanOrEqual("i", 30)))))
    assert factor_common(Or(mode, And(mode, instruct))) == mode  # absorption
    assert factor_common(Or(mode, instruct)) == Or(mode, instruct)
    assert M("(i < 5 and s = 'a') or (i > 7 and s = 'a')") == And(EqualTo("s", "a"), Or(LessThan("i", 5),
                                                                                          GreaterThan("i", 7)))
