"""sides(): soundness against the data (property) and precision on known cases."""

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expr_gen import SCHEMA, atoms, examples, predicates, tables
from pando_iceberg.expr import MAX_CONJUNCTIONS, ExprCut, Sides, TableFilter


def _check_sound(table, f_sql, c_sql):
    filt = TableFilter.from_sql(f_sql, SCHEMA)
    cut = ExprCut(c_sql, SCHEMA)
    sat = filt.evaluate(table)
    on_true = cut.evaluate(table)
    s = filt.sides(cut)
    if (sat & on_true).any():
        assert s.may_true, (f_sql, c_sql, table.to_pylist())
    if (sat & ~on_true).any():
        assert s.may_not_true, (f_sql, c_sql, table.to_pylist())
    if filt.is_unsatisfiable():
        assert not sat.any(), (f_sql, table.to_pylist())


@settings(max_examples=examples(600))
@given(tables(min_rows=1), predicates(), predicates())
def test_sides_sound_random_filters_and_cuts(table, f, c):
    _check_sound(table, f[0], c[0])


@settings(max_examples=examples(400))
@given(tables(min_rows=1), st.data())
def test_sides_sound_same_column_atoms(table, data):
    # Filters and cuts drawn on the same column so that the domain reasoning really fires.
    col_atoms = atoms()
    f1, f2, c = data.draw(col_atoms), data.draw(col_atoms), data.draw(col_atoms)
    op = data.draw(st.sampled_from(["AND", "OR"]))
    _check_sound(table, f"({f1[0]}) {op} ({f2[0]})", c[0])
    _check_sound(table, f1[0], f"NOT ({c[0]})")


def S(f, c, schema=SCHEMA):
    return tuple(TableFilter.from_sql(f, schema).sides(ExprCut(c, schema)))


@pytest.mark.parametrize("f,c,want", [
    ("i < 10", "i < 50", (True, False)),
    ("i > 70", "i < 50", (False, True)),
    ("i < 60", "i < 50", (True, True)),
    ("i = 50", "i < 50", (False, True)),
    ("i between 3 and 4", "i > 3 and i < 4", (False, True)),  # ints are discrete
    ("m between 3 and 4", "m > 3 and m < 4", (True, True)),
    ("f > 70", "f < 50", (False, True)),
    ("f = CAST('NaN' AS DOUBLE)", "f > 1e300", (True, False)),  # NaN is above every double
    ("f = CAST('NaN' AS DOUBLE)", "f = CAST('Infinity' AS DOUBLE)", (False, True)),
    ("s like 'abc%'", "s like 'ab%'", (True, False)),
    ("s like 'abc%'", "s >= 'abd'", (False, True)),
    ("s like 'abc%'", "s = 'abc'", (True, True)),
    ("s like '%abc'", "s is null", (False, True)),  # LIKE is NULL-rejecting
    ("s like 'a_c'", "s < 'b'", (True, False)),  # general LIKE still gives its prefix range
    ("s like 'a_c'", "s = 'abc'", (True, True)),
    ("s in ('a', 'b')", "s = 'c'", (False, True)),
    ("s in ('a', 'b')", "s in ('a', 'b', 'c')", (True, False)),
    ("i is null", "i < 5", (False, True)),
    ("i is not null", "i is null", (False, True)),
    ("i is null", "i is null", (True, False)),
    ("i <> 5", "i = 5", (False, True)),
    ("not (i < 5)", "i < 5", (False, True)),
    ("i = 1 or i = 2", "i in (1, 2)", (True, False)),
    ("i = 1 or i = 7", "i < 5", (True, True)),
    ("i in (1, 2)", "i = 1 or i = 2", (True, False)),
    ("i < j", "i < j", (True, False)),  # column vs column: structural
    ("i < j", "j <= i", (False, True)),
    ("i < j", "i = j", (False, True)),
    ("i < j", "j is null", (False, True)),  # the comparison is NULL-rejecting
    ("i + 1 > 5", "i + 1 > 5", (True, False)),  # expressions keyed by canonical SQL
    ("i + 1 > 5", "i + 1 < 3", (False, True)),
    ("d >= date '1994-01-01' and d < date '1994-01-01' + interval '1' year", "d < date '1995-01-01'", (True, False)),
    ("d >= '1995-01-01'", "d < date '1995-01-01'", (False, True)),
    ("year(d) = 1994", "year(d) >= 1995", (False, True)),
    ("m = 0.05", "m between 0.05 and 0.07", (True, False)),
    ("m < 0.05", "m between 0.05 and 0.07", (False, True)),
    ("b", "b", (True, False)),
    ("not b", "b", (False, True)),
    ("i < 5 and i > 10", "s = 'a'", (False, False)),  # the filter itself is unsatisfiable
    ("s = 'a'", "i < 5", (True, True)),  # unrelated columns: unknown
])
def test_sides_precision(f, c, want):
    assert S(f, c) == want


def test_decimal_column_with_more_scale_literal():
    s = pa.schema([("p", pa.decimal128(15, 2))])
    assert S("p < 0.055", "p <= 0.05", s) == (True, False)
    assert S("p > 0.055", "p <= 0.05", s) == (False, True)


def test_timestamp_zones_in_reasoning():
    s = pa.schema([("ts", pa.timestamp("us", tz="UTC"))])
    assert S("ts < timestamp '2020-01-01 00:00:00+02:00'", "ts < timestamp '2019-12-31 22:00:00Z'", s) == (True, False)
    assert S("ts >= timestamp '2020-01-01 00:00:00+02:00'", "ts < timestamp '2019-12-31 22:00:00'", s) == (False, True)


def test_true_filter_and_unknown_columns():
    assert tuple(TableFilter.true().sides(ExprCut("i < 5", SCHEMA))) == (True, True)
    other = pa.schema([("z", pa.int64())])
    assert tuple(TableFilter.from_sql("z < 5", other).sides(ExprCut("i < 5", SCHEMA))) == (True, True)


def test_dnf_cap_answers_unknown():
    big = " AND ".join(f"(i = {k} OR j = {k})" for k in range(8))  # 2^8 conjunctions
    assert 2**8 > MAX_CONJUNCTIONS
    assert S(big, "i < -100") == (True, True)


def test_sides_is_a_namedtuple():
    s = TableFilter.from_sql("i < 10", SCHEMA).sides(ExprCut("i < 50", SCHEMA))
    assert isinstance(s, Sides) and s.may_true and not s.may_not_true
