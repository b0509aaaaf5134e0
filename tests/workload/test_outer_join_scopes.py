"""Which predicates constrain which table under outer joins (``workload.join_scopes``).

Each predicate of a query names its own literal (``a.x = 1``, ``b.x = 2`` ...): a table's filter
holds the literals of the predicates that may prune it. The expected sets follow SQL's
null-supplying rules: a WHERE or inner ON conjunct constrains the tables no outer join below it
makes nullable; an outer join's ON constrains only its null-supplying input's own non-nullable
tables; a FULL join's ON nothing.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
import sqlglot

from pando_iceberg.workload import parse_query, parse_workload

COLS = [("k", pa.int64()), ("x", pa.int64()), ("y", pa.int64())]
SCHEMAS = {f"db.{t}": pa.schema(COLS) for t in "abcd"}


def parsed(sql: str, **kw):
    return parse_query(sqlglot.parse_one(sql, read="spark"), SCHEMAS, **kw)


def constrained(sql: str) -> dict[str, set[int]]:
    """Table → the literals of the predicates in its own filter (join filters left aside)."""
    q = parsed(sql)
    out = {}
    for t in "abcd":
        f = q.filters.get(f"db.{t}")
        if f is not None and not f.is_true_expr():
            out[t] = {int(n) for n in re.findall(r"\b(\d+)\b", f.expr.sql())}
    return out


def q(from_: str, where: str = "") -> str:
    tables = {t: f"db.{t} {t}" for t in "abcd"}
    return f"SELECT count(*) FROM {from_.format(**tables)}" + (f" WHERE {where}" if where else "")


# (join, expected with the predicates in WHERE, expected with them in the ON)
JOIN_TYPES = [
    ("JOIN", {"a": {1}, "b": {2}}, {"a": {1}, "b": {2}}),
    ("INNER JOIN", {"a": {1}, "b": {2}}, {"a": {1}, "b": {2}}),
    ("LEFT JOIN", {"a": {1}}, {"b": {2}}),
    ("LEFT OUTER JOIN", {"a": {1}}, {"b": {2}}),
    ("RIGHT JOIN", {"b": {2}}, {"a": {1}}),
    ("FULL JOIN", {}, {}),
    ("FULL OUTER JOIN", {}, {}),
]


@pytest.mark.parametrize("join,where_expected,on_expected", JOIN_TYPES)
def test_two_tables_where_and_on(join, where_expected, on_expected):
    assert constrained(q("{a} " + join + " {b} ON a.k = b.k", "a.x = 1 AND b.x = 2")) == where_expected
    assert constrained(q("{a} " + join + " {b} ON a.k = b.k AND a.x = 1 AND b.x = 2")) == on_expected


@pytest.mark.parametrize("from_", ["{a} CROSS JOIN {b}", "{a}, {b}"])
def test_cross_and_comma_joins(from_):
    sql = q(from_, "a.k = b.k AND a.x = 1 AND b.x = 2")
    assert constrained(sql) == {"a": {1}, "b": {2}}
    assert {(e.table, e.dim_table) for e in parsed(sql).join_edges} == {("db.a", "db.b"), ("db.b", "db.a")}


@pytest.mark.parametrize("kind", ["LEFT SEMI", "LEFT ANTI", "SEMI", "ANTI"])
def test_semi_and_anti_joins_keep_the_left_input_and_are_reported(kind):
    sql = q("{a} " + kind + " JOIN {b} ON a.k = b.k AND b.x = 2", "a.x = 1")
    assert constrained(sql) == {"a": {1}}
    w = parse_workload(sql, SCHEMAS)
    assert any("join is not modeled" in u.reason for u in w.unsupported)


CHAINS = [
    # the shape: a later inner join's ON names the nullable side, alone or in an OR
    ("{a} LEFT JOIN {b} ON b.k = a.k * 1000 + 1 JOIN {c} ON c.k = a.k AND (b.k IS NULL OR b.x >= 2)", "",
     {}),
    ("{a} LEFT JOIN {b} ON a.k = b.k JOIN {c} ON c.k = a.k AND b.x = 2 AND c.x = 3 AND a.x = 1", "",
     {"a": {1}, "c": {3}}),
    ("{a} LEFT JOIN {b} ON a.k = b.k JOIN {c} ON (c.k = a.k AND b.x = 2 AND a.x = 1) "
     "OR (c.k = a.k + 1 AND b.k IS NULL AND a.x = 5)", "",
     {"a": {1, 5}}),
    # a RIGHT JOIN's ON names a table an earlier LEFT JOIN made nullable
    ("{a} LEFT JOIN {b} ON a.k = b.k RIGHT JOIN {c} ON c.k = a.k AND (b.k IS NULL OR b.x = 2) AND a.x = 1 "
     "AND c.x = 3", "",
     {"a": {1}}),
    ("{a} LEFT JOIN {b} ON a.k = b.k RIGHT JOIN {c} ON c.k = a.k", "a.x = 1 AND b.x = 2 AND c.x = 3",
     {"c": {3}}),
    # tables joined after a RIGHT JOIN are not made nullable by it
    ("{a} RIGHT JOIN {b} ON a.k = b.k JOIN {c} ON c.k = b.k", "a.x = 1 AND b.x = 2 AND c.x = 3",
     {"b": {2}, "c": {3}}),
    ("{a} JOIN {b} ON a.k = b.k LEFT JOIN {c} ON b.k = c.k AND c.x = 3 JOIN {d} ON d.k = c.k AND d.x = 4",
     "a.x = 1 AND c.x = 5 AND b.x = 2",
     {"a": {1}, "b": {2}, "c": {3}, "d": {4}}),
    ("{a} LEFT JOIN {b} ON a.k = b.k LEFT JOIN {c} ON b.k = c.k AND b.x = 2 AND c.x = 3", "a.x = 1",
     {"a": {1}, "c": {3}}),
    ("{a} FULL JOIN {b} ON a.k = b.k JOIN {c} ON c.k = a.k AND c.x = 3", "a.x = 1 AND b.x = 2",
     {"c": {3}}),
    # parenthesised joins: the group is the right input it is
    ("{a} LEFT JOIN ({b} JOIN {c} ON b.k = c.k AND b.x = 2) ON a.k = b.k AND c.x = 3", "a.x = 1",
     {"a": {1}, "b": {2}, "c": {3}}),
    ("{a} LEFT JOIN ({b} LEFT JOIN {c} ON b.k = c.k AND c.x = 4) ON a.k = b.k AND c.x = 3 AND b.x = 2", "",
     {"b": {2}, "c": {4}}),
    ("{a} JOIN ({b} RIGHT JOIN {c} ON b.k = c.k AND b.x = 2) ON a.k = c.k", "c.x = 3 AND b.x = 4 AND a.x = 1",
     {"a": {1}, "b": {2}, "c": {3}}),
    ("({a} LEFT JOIN {b} ON a.k = b.k) JOIN {c} ON c.k = a.k", "b.x = 2 AND a.x = 1 AND c.x = 3",
     {"a": {1}, "c": {3}}),
    ("{d} RIGHT JOIN ({a} LEFT JOIN ({b} JOIN {c} ON b.k = c.k AND c.x = 3) ON a.k = b.k AND b.x = 2) "
     "ON d.k = a.k AND a.x = 1", "d.x = 4",
     {"b": {2}, "c": {3}}),
    ("({a} JOIN {b} ON a.k = b.k)", "a.x = 1 AND b.x = 2",
     {"a": {1}, "b": {2}}),
    # comma joins are read left-deep: never fewer nullable tables than Spark's grouping
    ("{a}, {b} LEFT JOIN {c} ON b.k = c.k AND c.x = 3", "a.x = 1 AND c.x = 4 AND b.x = 2",
     {"a": {1}, "b": {2}, "c": {3}}),
    ("{a}, {b} RIGHT JOIN {c} ON b.k = c.k", "a.x = 1 AND b.x = 2 AND c.x = 3",
     {"c": {3}}),
]


@pytest.mark.parametrize("from_,where,expected", CHAINS)
def test_chains_and_nestings(from_, where, expected):
    assert constrained(q(from_, where)) == expected


def test_no_edges_with_a_nullable_table():
    sql = q("{a} LEFT JOIN {b} ON a.k = b.k JOIN {c} ON c.k = b.k AND c.y = a.y")
    assert {(e.table, e.dim_table) for e in parsed(sql).join_edges} == {("db.c", "db.a"), ("db.a", "db.c")}
    sql = q("{a} JOIN ({b} JOIN {c} ON b.k = c.k) ON a.k = b.k")
    assert {(e.table, e.dim_table) for e in parsed(sql).join_edges} == {
        ("db.a", "db.b"), ("db.b", "db.a"), ("db.b", "db.c"), ("db.c", "db.b")}


def test_join_filters_only_between_tables_under_no_outer_join():
    pks = {"db.b": ["k"], "db.c": ["k"]}
    inner = parsed(q("{a} JOIN {b} ON a.k = b.k", "b.x = 2"), primary_keys=pks)
    assert [j.dim_table for j in inner.filters["db.a"].joins] == ["db.b"]
    for from_ in ["{a} LEFT JOIN {b} ON a.k = b.k", "{a} JOIN {b} ON a.k = b.k LEFT JOIN {c} ON a.k = c.k",
                  "{c} LEFT JOIN ({a} JOIN {b} ON a.k = b.k) ON c.k = a.k"]:
        got = parsed(q(from_, "b.x = 2"), primary_keys=pks)
        assert got.filters["db.a"].joins == [], from_


def test_correlated_subquery_on_a_nullable_table_is_no_edge():
    sql = q("{a} LEFT JOIN {b} ON a.k = b.k", "EXISTS (SELECT 1 FROM db.c c WHERE c.k = b.k AND c.x = 3)")
    assert not [e for e in parsed(sql).join_edges if e.dim_table == "db.b"]
    sql = q("{a} JOIN {b} ON a.k = b.k", "EXISTS (SELECT 1 FROM db.c c WHERE c.k = b.k AND c.x = 3)")
    assert [e for e in parsed(sql).join_edges if e.table == "db.c" and e.dim_table == "db.b"]


def test_in_subquery_on_a_nullable_table_is_no_join_filter():
    pks = {"db.c": ["k"]}
    sql = q("{a} LEFT JOIN {b} ON a.k = b.k", "b.y IN (SELECT k FROM db.c WHERE x = 3)")
    assert parsed(sql, primary_keys=pks).filters["db.b"].joins == []
    sql = q("{a} JOIN {b} ON a.k = b.k", "b.y IN (SELECT k FROM db.c WHERE x = 3)")
    assert "db.c" in [j.dim_table for j in parsed(sql, primary_keys=pks).filters["db.b"].joins]


def test_using_and_natural_joins_read_as_their_equi_joins():
    for from_ in ["{a} JOIN {b} USING (k)", "{a} NATURAL JOIN {b}"]:
        sql = q(from_, "a.x = 1")
        assert ("db.a", "k", "db.b", "k") in {(e.table, e.column, e.dim_table, e.dim_column)
                                              for e in parsed(sql).join_edges}, from_
    # after a RIGHT JOIN the USING column is the right table's: the left one's is no edge
    sql = q("{a} RIGHT JOIN {b} USING (k) JOIN {c} USING (k)", "c.x = 3")
    assert not [e for e in parsed(sql).join_edges if "db.a" in (e.table, e.dim_table)]
    assert constrained(sql) == {"c": {3}}
