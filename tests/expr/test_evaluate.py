"""evaluate() against a row-by-row reference implementing Spark SQL semantics."""

import datetime as dt
import math
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expr_gen import SCHEMA, examples, predicates, rows, tables
from pando_iceberg.expr import ExprCut, TableFilter
from pando_iceberg.expr import evaluate as ev


@settings(max_examples=examples(500))
@given(tables(), predicates())
def test_evaluate_matches_reference(table, pred):
    sql, ref = pred
    got = TableFilter.from_sql(sql, SCHEMA).evaluate(table)
    want = np.array([ref(r) is True for r in rows(table)], dtype=bool)
    assert got.dtype == bool and got.shape == (table.num_rows,)
    assert (got == want).all(), (sql, table.to_pylist(), got, want)


@settings(max_examples=examples(500))
@given(tables(), predicates(), st.sampled_from([0.0, 0.5, 1.0]))
def test_and_or_evaluated_on_the_rows_left_open_match_reference(table, pred, decided):
    """AND / OR evaluate their second operand only on the rows the first leaves open: forced on
    every table (any size) and at every share decided, the rows kept are the reference's."""
    sql, ref = pred
    before = ev.SHORT_CIRCUIT_MIN_ROWS, ev.SHORT_CIRCUIT_DECIDED
    ev.SHORT_CIRCUIT_MIN_ROWS, ev.SHORT_CIRCUIT_DECIDED = 0, decided
    try:
        got = TableFilter.from_sql(sql, SCHEMA).evaluate(table)
    finally:
        ev.SHORT_CIRCUIT_MIN_ROWS, ev.SHORT_CIRCUIT_DECIDED = before
    want = np.array([ref(r) is True for r in rows(table)], dtype=bool)
    assert (got == want).all(), (sql, table.to_pylist(), got, want)


def test_and_restricts_its_second_operand_to_the_open_rows(monkeypatch):
    """On a large table the second operand of an AND sees only the rows the first kept."""
    n = 4096
    table = pa.table({"i": pa.array(np.arange(n)), "s": pa.array([f"v{x % 7}" for x in range(n)])})
    seen = []
    column = ev.Context.rows

    def rows_spy(self, idx):
        seen.append(len(idx))
        return column(self, idx)

    monkeypatch.setattr(ev.Context, "rows", rows_spy)
    got = TableFilter.from_sql("i < 100 AND s = 'v3'", table.schema).evaluate(table)
    assert seen == [100]
    assert got.nonzero()[0].tolist() == [x for x in range(100) if x % 7 == 3]


@given(tables(), predicates())
def test_cut_evaluate_on_record_batches_and_chunks(table, pred):
    sql, _ = pred
    cut = ExprCut(sql, SCHEMA)
    whole = cut.evaluate(table)
    if table.num_rows:
        batch = table.to_batches()[0] if table.num_rows else None
        assert (cut.evaluate(batch) == whole).all()
        chunked = pa.concat_tables([table.slice(0, table.num_rows // 2), table.slice(table.num_rows // 2)])
        assert (cut.evaluate(chunked) == whole).all()
        # sliced arrays (non-zero offsets) must read the right values, decimals included
        assert (cut.evaluate(table.slice(1)) == whole[1:]).all()


def _t(**cols):
    return pa.table(cols)


def test_nan_ordering_and_signed_zero():
    t = _t(x=pa.array([math.nan, math.inf, -0.0, 0.0, 7.0, None]))
    s = pa.schema([("x", pa.float64())])
    ev = lambda q: ExprCut(q, s).evaluate(t).tolist()
    assert ev("x > 5") == [True, True, False, False, True, False]
    assert ev("x < 5") == [False, False, True, True, False, False]
    assert ev("x = CAST('NaN' AS DOUBLE)") == [True, False, False, False, False, False]
    assert ev("x = 0") == [False, False, True, True, False, False]
    assert ev("x <> 0") == [True, True, False, False, True, False]
    assert ev("NOT (x > 5)") == [False, False, True, True, False, False]


def test_decimal_exact_comparisons():
    s = pa.schema([("m", pa.decimal128(15, 2))])
    t = pa.table({"m": pa.array([Decimal("0.05"), Decimal("0.06"), Decimal("0.07"), Decimal("0.08"), None],
                                pa.decimal128(15, 2))})
    ev = lambda q: ExprCut(q, s).evaluate(t).tolist()
    assert ev("m between 0.06 - 0.01 and 0.06 + 0.01") == [True, True, True, False, False]
    assert ev("m < 0.055") == [True, False, False, False, False]  # literal has more scale than the column
    assert ev("m = 0.050") == [True, False, False, False, False]
    assert ev("m > 0.0799999") == [False, False, False, True, False]


def test_wide_decimal_columns():
    s = pa.schema([("m", pa.decimal128(38, 10))])
    big = Decimal("12345678901234567890.0123456789")
    t = pa.table({"m": pa.array([big, -big, Decimal(0), None], pa.decimal128(38, 10))}, schema=s)
    assert ExprCut("m > 12345678901234567890.01234567", s).evaluate(t).tolist() == [True, False, False, False]
    assert ExprCut("m < 0", s).evaluate(t).tolist() == [False, True, False, False]


def test_dates_intervals_and_string_literals():
    s = pa.schema([("d", pa.date32())])
    t = pa.table({"d": pa.array([dt.date(1993, 12, 31), dt.date(1994, 1, 1), dt.date(1994, 12, 31),
                                 dt.date(1995, 1, 1), None])}, schema=s)
    ev = lambda q: ExprCut(q, s).evaluate(t).tolist()
    assert ev("d >= date '1994-01-01' and d < date '1994-01-01' + interval '1' year") == [False, True, True, False,
                                                                                      False]
    assert ev("d < '1994-01-01'") == [True, False, False, False, False]
    assert ev("d <= date '1995-01-31' - interval '1' month") == [True, True, True, False, False]
    assert ev("year(d) = 1994") == [False, True, True, False, False]
    assert ev("extract(year from d) = 1995") == [False, False, False, True, False]
    assert ev("d + interval '1' day = date '1995-01-01'") == [False, False, True, False, False]


def test_month_arithmetic_clamps_to_month_end():
    s = pa.schema([("d", pa.date32())])
    t = pa.table({"d": [dt.date(1995, 2, 28), dt.date(1995, 3, 1)]}, schema=s)
    # Spark: date '1995-01-31' + interval 1 month = 1995-02-28
    assert ExprCut("d = date '1995-01-31' + interval '1' month", s).evaluate(t).tolist() == [True, False]


def test_timestamps_with_zones_are_instants():
    s = pa.schema([("ts", pa.timestamp("us", tz="America/New_York"))])
    # 2020-01-01 00:00:00+02:00 == 2019-12-31 22:00:00 UTC
    instant = int(dt.datetime(2019, 12, 31, 22, tzinfo=dt.timezone.utc).timestamp() * 1_000_000)
    t = pa.table({"ts": pa.array([instant - 1, instant, instant + 1, None], pa.timestamp("us", tz="UTC"))
                  .cast(pa.timestamp("us", tz="America/New_York"))}, schema=s)
    ev = lambda q: ExprCut(q, s).evaluate(t).tolist()
    assert ev("ts < timestamp '2020-01-01 00:00:00+02:00'") == [True, False, False, False]
    assert ev("ts = timestamp '2019-12-31T22:00:00Z'") == [False, True, False, False]
    s_ms = pa.schema([("ts", pa.timestamp("ms", tz="UTC"))])
    t_ms = pa.table({"ts": pa.array([instant // 1000], pa.timestamp("ms", tz="UTC"))}, schema=s_ms)
    assert ExprCut("ts >= timestamp '2019-12-31 22:00:00'", s_ms).evaluate(t_ms).tolist() == [True]


def test_strings_code_point_order_like_and_substring():
    s = pa.schema([("s", pa.string())])
    t = pa.table({"s": ["", "a", "ab", "é", "😀", "\uffff", None]}, schema=s)
    ev = lambda q: ExprCut(q, s).evaluate(t).tolist()
    assert ev("s > '\uffff'") == [False, False, False, False, True, False, False]
    assert ev("s like 'a%'") == [False, True, True, False, False, False, False]
    assert ev("s not like 'a%'") == [True, False, False, True, True, True, False]
    assert ev("s = ''") == [True, False, False, False, False, False, False]
    assert ev("substring(s, 1, 1) = 'a'") == [False, True, True, False, False, False, False]
    assert ev("substring(s, -1, 1) = 'b'") == [False, False, True, False, False, False, False]
    assert ev("length(s) = 1") == [False, True, False, True, True, True, False]
    sv = pa.schema([("s", pa.string_view())])
    assert ExprCut("s >= 'ab'", sv).evaluate(pa.table({"s": pa.array(["a", "ab", "b"], pa.string_view())})).tolist() \
        == [False, True, True]


def test_three_valued_logic_and_case():
    s = pa.schema([("a", pa.int64()), ("b", pa.int64())])
    t = pa.table({"a": [1, None, 1, None], "b": [None, None, 5, 0]}, schema=s)
    ev = lambda q: ExprCut(q, s).evaluate(t).tolist()
    assert ev("a = 1 or b = 1") == [True, False, True, False]
    assert ev("not (a = 1 and b = 1)") == [False, False, True, True]  # NULL AND FALSE = FALSE
    assert ev("a < b") == [False, False, True, False]
    assert ev("case when a is null then 0 else a end + coalesce_free(b) > 0".replace(" + coalesce_free(b)", "")) \
        == [True, False, True, False]


def test_col_vs_col_compares_like_spark():
    s = pa.schema([("l_shipdate", pa.date32()), ("l_commitdate", pa.date32())])
    t = pa.table({"l_shipdate": [dt.date(1994, 1, 1), dt.date(1994, 1, 5), None],
                  "l_commitdate": [dt.date(1994, 1, 2), dt.date(1994, 1, 5), dt.date(1994, 1, 1)]}, schema=s)
    assert ExprCut("l_shipdate < l_commitdate", s).evaluate(t).tolist() == [True, False, False]


@settings(max_examples=examples(300))
@given(predicates())
def test_binding_is_idempotent_so_with_joins_shares_the_bound_part(pred):
    """``TableFilter.with_joins`` keeps the bound single-table part instead of binding it again:
    binding a bound predicate gives the same tree."""
    from pando_iceberg.expr.bind import bind

    sql, _ = pred
    try:
        tf = TableFilter.from_sql(sql, SCHEMA)
    except Exception:  # a predicate the binder refuses: nothing to share
        return
    assert bind(tf.expr, SCHEMA) == tf.expr
    again = tf.with_joins([])
    assert again.expr is tf.expr and again.schema is tf.schema and again.joins == []


def test_with_joins_checks_join_columns_and_does_not_bind(monkeypatch):
    import pando_iceberg.expr.filters as filters_mod
    from pando_iceberg.expr import JoinFilter, PandoExprError

    tf = TableFilter.from_sql(f"{SCHEMA.names[0]} IS NOT NULL", SCHEMA, table="t")
    dim = TableFilter.true(pa.schema([("pk", pa.int64())]), "d")
    monkeypatch.setattr(filters_mod, "bind", lambda *a, **k: pytest.fail("bound again"))
    keyed = tf.with_joins([JoinFilter(SCHEMA.names[0].lower(), "d", "pk", dim)])
    assert keyed.expr is tf.expr and [j.dim_table for j in keyed.joins] == ["d"] and tf.joins == []
    with pytest.raises(PandoExprError, match="unknown join column"):
        tf.with_joins([JoinFilter("no_such_column", "d", "pk", dim)])
