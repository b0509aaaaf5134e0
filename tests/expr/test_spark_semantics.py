"""Folding, casts, arithmetic, literal typing and coercions follow Spark's semantics under the
session's settings (pure Python; the expected values were read from Spark 3.5 in sessions with
those settings, and tests/spark/test_exact_semantics.py asks Spark for them again).

With ANSI mode on, or in a session time zone other than UTC, what Spark would compute otherwise
(raise, or read in the zone) and Pando does not model is refused (PandoExprError): the predicate
prunes nothing."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

from pando_iceberg.expr import TableFilter, semantics
from pando_iceberg.expr.errors import PandoExprError
from pando_iceberg.expr.evaluate import evaluate_predicate
from pando_iceberg.expr.values import fold

LA = semantics.Semantics(time_zone="America/Los_Angeles")
ANSI = semantics.Semantics(ansi=True)


def folded(text: str, sem: semantics.Semantics = semantics.DEFAULT):
    with semantics.using(sem):
        v = fold(sqlglot.parse_one(text, read="spark"))
    assert v is not None
    return v.value


def micros(text: str) -> int:
    t = dt.datetime.fromisoformat(text)
    t = t if t.tzinfo else t.replace(tzinfo=dt.UTC)
    return int((t - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) / dt.timedelta(microseconds=1))


@pytest.mark.parametrize("text, spark", [
    # integers: INT arithmetic wraps at 32 bits, TINYINT/SMALLINT at theirs (ANSI off)
    ("65536*65536+8", 8), ("2147483647 + 1", -2147483648), ("CAST(127 AS TINYINT) + CAST(1 AS TINYINT)", -128),
    ("CAST(127 AS TINYINT) + 1", 128), ("CAST(32767 AS SMALLINT) * CAST(2 AS SMALLINT)", -2),
    ("-2147483648", -2147483648), ("-(-2147483648)", -2147483648), ("CAST(5 AS BIGINT) + 2147483647", 2147483652),
    # narrowing casts: integers wrap, decimals are cut toward zero then wrap, doubles saturate (NaN is 0)
    ("CAST(261 AS TINYINT)", 5), ("CAST(70000 AS SMALLINT)", 4464), ("CAST(3000000000 AS INT)", -1294967296),
    ("CAST(300.7 AS TINYINT)", 44), ("CAST(-300.7 AS TINYINT)", -44), ("CAST(3000000000.5 AS INT)", -1294967296),
    ("CAST(99999999999999999999.0 AS BIGINT)", 7766279631452241919),
    ("CAST(1e20 AS INT)", 2147483647), ("CAST(-1e20 AS INT)", -2147483648), ("CAST(1e20 AS BIGINT)", 2**63 - 1),
    ("CAST(CAST('NaN' AS DOUBLE) AS INT)", 0), ("CAST(CAST('Infinity' AS DOUBLE) AS TINYINT)", -1),
    ("CAST(3e9 AS SMALLINT)", -1), ("CAST(1e10 AS TINYINT)", -1),
    # FLOAT literals are float32
    ("1.81F", 1.809999942779541), ("CAST(1.81F AS DOUBLE)", 1.809999942779541), ("1.1F + 1.1F", 2.200000047683716),
    ("1.1F * 3", 3.3000001907348633), ("CAST(16777217 AS FLOAT)", 16777216.0),
    # string → number: Java's parseDouble with a type suffix, Spark's special words; integers are cut
    ("CAST('0.2f' AS DOUBLE)", 0.2), ("CAST('0.2D' AS DOUBLE)", 0.2), ("CAST(' 0.2 ' AS DOUBLE)", 0.2),
    ("CAST('1e3' AS DOUBLE)", 1000.0), ("CAST('inf' AS DOUBLE)", math.inf), ("CAST('-Infinity' AS DOUBLE)", -math.inf),
    ("CAST('1.' AS DOUBLE)", 1.0), ("CAST('.5' AS DOUBLE)", 0.5),
    ("CAST('1.5' AS INT)", 1), ("CAST(' 12 ' AS INT)", 12), ("CAST('+5' AS INT)", 5), ("CAST('-1.9' AS INT)", -1),
    ("CAST('.5' AS INT)", 0), ("CAST('5.' AS INT)", 5), ("CAST('3000000000' AS INT)", None),
    ("CAST('300' AS TINYINT)", None),
    # string → timestamp / date
    ("CAST('2026-12' AS TIMESTAMP)", micros("2026-12-01")), ("CAST('2026' AS TIMESTAMP)", micros("2026-01-01")),
    ("CAST('2026-1-5 3:4:5' AS TIMESTAMP)", micros("2026-01-05 03:04:05")),
    ("CAST('2026-01-17 02' AS TIMESTAMP)", micros("2026-01-17 02:00")),
    ("CAST('2026-01-17 2:3:4.1234567' AS TIMESTAMP)", micros("2026-01-17 02:03:04.123456")),
    ("CAST('2026-01-17 02:00:00+05:00' AS TIMESTAMP)", micros("2026-01-16 21:00")),
    ("CAST('2026-01-17T02:00:00+0500' AS TIMESTAMP)", micros("2026-01-16 21:00")),
    ("CAST('2026-01-17T02:00:00 +05:00' AS TIMESTAMP)", micros("2026-01-16 21:00")),
    ("CAST('2026-01-17T02:00:00GMT+05:00' AS TIMESTAMP)", micros("2026-01-16 21:00")),
    ("CAST('2026-01-17 02:00:00 America/New_York' AS TIMESTAMP)", micros("2026-01-17 07:00")),
    ("CAST('2026-01-17 24:00:00' AS TIMESTAMP)", None), ("CAST('2026-01-17 02:60:00' AS TIMESTAMP)", None),
    # TIMESTAMP_NTZ drops an offset
    ("CAST('2026-01-17 02:00:00+05:00' AS TIMESTAMP_NTZ)", micros("2026-01-17 02:00")),
    ("CAST('2026-01-17 02:00:00 America/New_York' AS TIMESTAMP_NTZ)", micros("2026-01-17 02:00")),
    ("CAST(' 2026-01-17 ' AS DATE)", 20470), ("CAST('2026-1-7' AS DATE)", 20460),
    ("CAST('2026-01-17 garbage' AS DATE)", 20470), ("CAST('2026-01-17T10' AS DATE)", 20470),
    ("CAST('2026-02-30' AS DATE)", None), ("CAST('2026-01' AS DATE)", 20454), ("CAST('abc' AS DATE)", None),
    # literal typing
    ("1L", 1), ("1S", 1), ("1Y", 1),
])
def test_folds_as_spark(text, spark):
    assert folded(text) == spark


@pytest.mark.parametrize("text, bits", [("2147483647", 32), ("2147483648", 64), ("-2147483648", 32), ("1L", 64),
                                        ("1S", 16), ("1Y", 8), ("1.5F", 32), ("1.5D", 64), ("1e3", 64),
                                        ("CAST(1 AS TINYINT) + 1", 32), ("1.5F + 1", 32), ("1.5F + 1.5", 64)])
def test_literal_types(text, bits):
    v = fold(sqlglot.parse_one(text, read="spark"))
    assert v is not None and v.bits == bits


def test_9223372036854775808_is_a_decimal():
    v = fold(sqlglot.parse_one("9223372036854775808", read="spark"))
    assert v is not None and v.kind == "decimal"


@pytest.mark.parametrize("text, spark", [
    # the session zone: DST gaps move forward, ambiguous times take the earlier offset (java.time)
    ("CAST('2026-03-08 02:30:00' AS TIMESTAMP)", 1772965800000000),
    ("CAST('2026-11-01 01:30:00' AS TIMESTAMP)", 1793521800000000),
    ("CAST(DATE '2026-01-17' AS TIMESTAMP)", 1768636800000000),
    ("CAST(TIMESTAMP '2026-01-17 03:00:00+00:00' AS DATE)", 20469),
    ("CAST(TIMESTAMP_NTZ '2026-01-17 00:00:00' AS TIMESTAMP)", 1768636800000000),
    ("CAST(TIMESTAMP '2026-01-17 03:00:00+00:00' AS TIMESTAMP_NTZ)", micros("2026-01-16 19:00")),
    ("CAST(TIMESTAMP '2026-01-17 03:00:00+00:00' AS STRING)", "2026-01-16 19:00:00"),
])
def test_folds_in_the_session_time_zone(text, spark):
    assert folded(text, LA) == spark


@pytest.mark.parametrize("text", ["2147483647 + 1", "CAST(261 AS TINYINT)", "CAST('x' AS DATE)", "1/0",
                                  "CAST(CAST('NaN' AS DOUBLE) AS INT)", "CAST('5.7' AS INT)", "-(-2147483648)",
                                  "CAST('2026-02-30' AS DATE)", "CAST(100000000000 AS DECIMAL(10, 2))"])
def test_what_ansi_mode_raises_is_not_folded(text):
    folded(text)  # folds with ANSI off
    with pytest.raises(PandoExprError):
        folded(text, ANSI)


@pytest.mark.parametrize("text, spark", [("CAST('2026-12' AS TIMESTAMP)", micros("2026-12-01")),
                                         ("CAST(' 5 ' AS INT)", 5), ("2147483647 - 1", 2147483646)])
def test_ansi_mode_folds_what_does_not_fail(text, spark):
    assert folded(text, ANSI) == spark


@pytest.mark.parametrize("text", ["CAST('0x10' AS DOUBLE)", "CAST('1_000' AS DOUBLE)", "CAST('1e3' AS INT)",
                                  "CAST('yesterday' AS DATE)", "CAST('now' AS TIMESTAMP)",
                                  "CAST('2026-01-17T02:00:00z' AS TIMESTAMP)", "CAST(1.5e0 AS DECIMAL(3, 1))",
                                  "CAST(1.5e0 AS STRING)", "TRY_CAST(261 AS TINYINT)"])
def test_shapes_not_modelled_are_not_folded(text):
    """Strings Spark reads in ways not modelled here ('yesterday' is a date in Spark), a double's
    digits, TRY_CAST: never a guess."""
    with pytest.raises(PandoExprError):
        folded(text)


SCHEMA = pa.schema([("i", pa.int32()), ("b", pa.int64()), ("s", pa.int16()), ("f", pa.float32()),
                    ("d", pa.float64()), ("dec", pa.decimal128(10, 2)), ("ntz", pa.timestamp("us")),
                    ("ltz", pa.timestamp("us", tz="UTC")), ("day", pa.date32())])


def bound(sql: str, sem: semantics.Semantics = semantics.DEFAULT) -> str:
    with semantics.using(sem):
        return TableFilter.from_sql(sql, SCHEMA, "t").to_sql()


@pytest.mark.parametrize("sql, canonical", [
    # a string compared with an integer column is cast to the column's type (Spark: cut, NULL out of range)
    ("i = '5.7'", "i = 5"), ("i < '3000000000'", "i < NULL"), ("b < '3000000000'", "b < 3000000000"),
    # FLOAT literals: an integer column is compared as FLOAT, a FLOAT column with an integer too
    ("i < 1.5F", "CAST(i AS FLOAT) < 1.5"), ("f = 16777217", "f = 16777216"),
    ("d > 1.81F", "d > 1.809999942779541"), ("f IN (1, 2.5)", "f IN (1, 2.5)"),
    # a decimal column with a string: both as DOUBLE
    ("dec = '1.5'", "CAST(dec AS DOUBLE) = 1.5"),
    # BETWEEN compares each bound on its own
    ("i BETWEEN 0 AND 2.5e0", "i >= 0 AND CAST(i AS DOUBLE) <= 2.5"),
    # TIMESTAMP_NTZ drops an offset; a TIMESTAMP reads a string without one in the session zone (UTC)
    ("ntz >= '2026-01-17 02:00:00+05:00'", "ntz >= CAST('2026-01-17 02:00:00.000000' AS TIMESTAMP_NTZ)"),
    ("ltz >= '2026-01-17 02:00:00'", "ltz >= CAST('2026-01-17 02:00:00.000000+00:00' AS TIMESTAMP)"),
    # to_date(timestamp) is its day, not the timestamp compared with midnight
    ("to_date(ntz) = DATE '2026-01-17'", "CAST(ntz AS DATE) = CAST('2026-01-17' AS DATE)"),
    ("year(ntz) = 2026", "YEAR(ntz) = 2026"), ("to_date(day) = DATE '2026-01-17'", "day = CAST('2026-01-17' AS DATE)"),
    # a BIGINT literal keeps its type in arithmetic (INT + BIGINT does not wrap at 32 bits)
    ("i + 5L > 0", "i + CAST(5 AS BIGINT) > 0"),
])
def test_coercions_as_spark(sql, canonical):
    assert bound(sql) == canonical


def test_the_session_zone_reads_literals_and_refuses_zone_dependent_columns():
    assert bound("ltz >= '2026-01-17 00:00:00'", LA) == "ltz >= CAST('2026-01-17 08:00:00.000000+00:00' AS TIMESTAMP)"
    assert bound("ltz >= DATE '2026-01-17'", LA) == "ltz >= CAST('2026-01-17 08:00:00.000000+00:00' AS TIMESTAMP)"
    assert bound("ntz < TIMESTAMP_NTZ '2026-01-17 00:00:00'", LA) == bound("ntz < TIMESTAMP_NTZ '2026-01-17 00:00:00'")
    for sql in ["ntz >= TIMESTAMP '2026-01-17 00:00:00+00:00'", "CAST(ltz AS DATE) = DATE '2026-01-17'",
                "year(ltz) = 2026", "CAST(ntz AS TIMESTAMP) > TIMESTAMP '2026-01-17 00:00:00+00:00'",
                "ltz + INTERVAL 1 DAY > TIMESTAMP '2026-01-17 00:00:00+00:00'"]:
        bound(sql)  # modelled in UTC
        with pytest.raises(PandoExprError):
            bound(sql, LA)


@pytest.mark.parametrize("sql", ["i + 1 > 0", "CAST(b AS INT) > 0", "i / 2 > 1", "-i > 0", "abs(i) > 0",
                                 "CAST(d AS SMALLINT) > 0", "i = '5.7'", "dec + 1 > 0",
                                 "day < CAST('2026-02-30' AS DATE)"])
def test_ansi_mode_refuses_what_may_raise(sql):
    bound(sql)
    with pytest.raises(PandoExprError):
        bound(sql, ANSI)


def test_ansi_mode_coercions():
    # ANSI: a string against an integer column compares as BIGINT, a FLOAT column with an integer as DOUBLE
    assert bound("i = '5'", ANSI) == "i = 5"
    assert bound("f = 16777217", ANSI) == "f = 16777217"
    assert bound("i < 1.5F", ANSI) == "CAST(i AS DOUBLE) < 1.5"


def test_unmodelled_settings_refuse_every_predicate():
    class Conf:
        def __init__(self, values):
            self.values = values

        def get(self, key, default=None):
            return self.values.get(key, default)

    class Session:
        def __init__(self, values):
            self.conf = Conf(values)

    sem = semantics.from_spark(Session({"spark.sql.session.timeZone": "Europe/Paris",
                                        "spark.sql.ansi.enabled": "TRUE"}))
    assert sem == semantics.Semantics(ansi=True, time_zone="Europe/Paris")
    assert semantics.from_spark(Session({})) == semantics.DEFAULT
    odd = semantics.from_spark(Session({"spark.sql.timestampType": "TIMESTAMP_NTZ"}))
    assert odd.unmodelled
    with pytest.raises(PandoExprError, match="timestampType"):
        bound("i > 0", odd)


def _rows(table: pa.Table, sql: str, sem: semantics.Semantics = semantics.DEFAULT) -> list[bool]:
    with semantics.using(sem):
        f = TableFilter.from_sql(sql, table.schema, "t")
        return evaluate_predicate(f.expr, table).tolist()


def test_columns_wrap_at_their_width():
    t = pa.table({"i": pa.array([5, 2147483647, -2147483648, 1], pa.int32()),
                  "s": pa.array([300, 32767, -32768, 1], pa.int16()),
                  "b": pa.array([5, 2147483647, -2147483648, 2**62], pa.int64())})
    assert _rows(t, "i + 2147483647 < 0") == [True, True, True, True]
    assert _rows(t, "b + 2147483647 < 0") == [False, False, True, False]
    assert _rows(t, "s + s < 0") == [False, True, False, False]  # SMALLINT + SMALLINT wraps at 16 bits
    assert _rows(t, "s + 1 < 0") == [False, False, True, False]  # SMALLINT + INT is INT
    assert _rows(t, "-i < 0") == [True, True, True, True]  # -(-2147483648) wraps to itself
    assert _rows(t, "abs(i) < 0") == [False, False, True, False]
    assert _rows(t, "CAST(i AS SMALLINT) = -1") == [False, True, False, False]
    assert _rows(t, "CAST(i AS TINYINT) = 5") == [True, False, False, False]
    assert _rows(t, "i * 2 = -2") == [False, True, False, False]
    assert _rows(t, "b * 4 = 0") == [False, False, False, True]  # BIGINT wraps at 64 bits


def test_float_columns_and_casts():
    t = pa.table({"f": pa.array([16777216.0, 1.1, math.nan, 0.5], pa.float32()),
                  "d": pa.array([1e20, -1e20, math.nan, 300.7], pa.float64())})
    assert _rows(t, "f = 16777217") == [True, False, False, False]
    assert _rows(t, "f + 1 = 16777216") == [True, False, False, False]  # FLOAT arithmetic rounds to float32
    assert _rows(t, "f * 3 = 3.3000001907348633") == [False, True, False, False]
    assert _rows(t, "CAST(f AS DOUBLE) + 1 = 16777217") == [True, False, False, False]  # a DOUBLE sum
    assert _rows(t, "CAST(d AS FLOAT) = 1e20") == [False, False, False, False]  # rounded to float32
    assert _rows(t, "CAST(d AS INT) = 2147483647") == [True, False, False, False]
    assert _rows(t, "CAST(d AS INT) = 0") == [False, False, True, False]  # NaN → 0
    assert _rows(t, "CAST(d AS TINYINT) = 44") == [False, False, False, True]
    assert _rows(t, "CAST(d AS TINYINT) = -1") == [True, False, False, False]


def test_wide_decimals_convert_to_the_nearest_double():
    """Spark's decimal → double is the exact value correctly rounded, also when the unscaled
    value is beyond 2^53 (dividing it by the power of ten as doubles rounds twice)."""
    wide = Decimal("49219388026475574.21")
    t = pa.table({"dec": pa.array([wide, Decimal("0.30")], pa.decimal128(19, 2))})
    assert _rows(t, f"dec = {float(wide)!r}") == [True, False]
    assert float(4921938802647557421) / 100 != float(wide)  # the two ways differ here


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-2**31, 2**31 - 1), min_size=1, max_size=20), st.integers(-2**31, 2**31 - 1),
       st.sampled_from(["+", "-", "*"]))
def test_int_arithmetic_is_java_int_arithmetic(values, k, op):
    """INT op INT over a column equals Java's int arithmetic (numpy int32 wraps the same way)."""
    t = pa.table({"i": pa.array(values, pa.int32())})
    lit = str(k) if k >= 0 else f"({k})"
    with np.errstate(over="ignore"):
        ref = {"+": np.add, "-": np.subtract, "*": np.multiply}[op](np.array(values, np.int32), np.int32(k))
    assert _rows(t, f"i {op} {lit} < 0") == (ref < 0).tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=20),
       st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_float_arithmetic_is_java_float_arithmetic(values, k):
    t = pa.table({"f": pa.array(values, pa.float32())})
    with np.errstate(over="ignore", invalid="ignore"):
        ref = np.array(values, np.float32) * np.float32(k)
    lit = np.float32(k)
    got = _rows(t, f"f * CAST('{float(lit)!r}' AS FLOAT) > 1")
    with np.errstate(invalid="ignore"):
        assert got == [bool(x > 1) or bool(np.isnan(x)) for x in ref]


def test_widths_kept_on_rows_left_open_by_and_or():
    """AND / OR evaluate their second operand on the rows the first left open: the columns taken
    for those rows keep their width."""
    n = 4096
    t = pa.table({"k": pa.array([j % 4 for j in range(n)], pa.int32()),
                  "i": pa.array([2147483647] * n, pa.int32()),
                  "f": pa.array([16777216.0] * n, pa.float32())})
    assert sum(_rows(t, "k <> 0 OR i + 1 < 0")) == n
    assert sum(_rows(t, "k = 0 AND f + 1 = 16777216")) == n // 4


def test_cut_atoms_are_classified_alike_in_every_session():
    """A cut's atoms are classified once per schema for every query: a query planned in another
    session must not leave them unclassified for the next ones."""
    from pando_iceberg.expr.cuts import ExprCut
    from pando_iceberg.expr.sides import clear_caches

    clear_caches()
    schema = pa.schema([("ltz", pa.timestamp("us", tz="UTC")), ("k", pa.int32())])
    cut = ExprCut("year(ltz) = 2026", schema, "t")
    with semantics.using(LA):
        assert TableFilter.from_sql("k > 3", schema, "t").sides(cut) == (True, True)
    assert TableFilter.from_sql("year(ltz) = 2025", schema, "t").sides(cut) == (False, True)


def test_decimal_results_above_38_digits_are_not_modelled():
    """Spark gives a decimal + - * the precision its operands' types allow; above 38 digits it
    rounds the result to a smaller scale (or gives NULL): that is refused, below it is exact."""
    schema = pa.schema([("a", pa.decimal128(38, 10)), ("b", pa.decimal128(15, 2)), ("i", pa.int32())])
    with pytest.raises(PandoExprError, match="above 38"):
        TableFilter.from_sql("a * b > 1", schema, "t")
    with pytest.raises(PandoExprError, match="above 38"):
        TableFilter.from_sql("a + i > 1", schema, "t")
    t = pa.table({"a": pa.array([Decimal("1.5")], pa.decimal128(38, 10)),
                  "b": pa.array([Decimal("2.25")], pa.decimal128(15, 2)), "i": pa.array([3], pa.int32())})
    assert _rows(t, "b * b = 5.0625") == [True]
    assert _rows(t, "b + i = 5.25") == [True]
    with pytest.raises(PandoExprError, match="above 38"):
        folded("12345678901234567890.123456789 * 12345678901234567890.123456789")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-10**37, 10**37), min_size=1, max_size=30), st.integers(0, 30), st.data())
def test_a_wide_decimal_compares_with_a_double_as_its_exact_value_correctly_rounded(unscaled, scale, data):
    """decimal(38, s) → double is the exact value correctly rounded, per distinct value (repeats
    and a broadcast literal converted once): compared with a double literal taken from the
    column's own values, each row is decided as Python's exact Fraction → float decides it."""
    from fractions import Fraction

    unscaled = unscaled + unscaled[: len(unscaled) // 2]  # repeated values
    t = pa.table({"d": pa.array([Decimal(u).scaleb(-scale) for u in unscaled], pa.decimal128(38, scale))})
    doubles = [float(Fraction(u, 10**scale)) for u in unscaled]
    pivot = data.draw(st.sampled_from(doubles))
    got = _rows(t, f"CAST(d AS DOUBLE) <= {pivot!r}D")
    assert got == [x <= pivot for x in doubles]
