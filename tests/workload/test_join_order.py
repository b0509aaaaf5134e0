"""``spark.join_order``: the table Spark's ReorderJoin joins each base table with first, read from
the SQL, and the size bound of a dimension's scan. The plans these claims stand for are checked
against Spark's own in ``tests/spark/test_row_filters.py``."""

from __future__ import annotations

import pyarrow as pa
import pytest
from sqlglot import parse_one

from pando_iceberg.spark.join_order import FirstJoin, columns_read, first_joins, scan_size_estimate, spark_default_size
from pando_iceberg.workload import qualify_query

SCHEMAS = {
    "s.fact": pa.schema([("f_id", pa.int64()), ("f_dim", pa.int64()), ("f_other", pa.int64()), ("f_x", pa.int32())]),
    "s.dim": pa.schema([("d_key", pa.int64()), ("d_name", pa.string()), ("d_price", pa.decimal128(15, 2)),
                        ("d_big", pa.decimal128(38, 2))]),
    "s.other": pa.schema([("o_key", pa.int64()), ("o_flag", pa.bool_())]),
}


def firsts(sql: str) -> dict[str, list]:
    tree, flat = qualify_query(parse_one(sql, read="spark"), SCHEMAS)
    return first_joins(tree, flat)


def pair(partner: str, *cols: tuple[str, str]) -> FirstJoin:
    return FirstJoin(partner, frozenset(cols))


def test_two_inputs_are_joined_with_each_other():
    got = firsts("SELECT count(*) FROM s.fact, s.dim WHERE f_dim = d_key AND d_name = 'x'")
    assert got == {"s.fact": [pair("s.dim", ("f_dim", "d_key"))], "s.dim": [pair("s.fact", ("d_key", "f_dim"))]}


def test_the_first_input_meets_the_first_one_a_condition_connects():
    # other comes second in FROM but no condition joins it to fact alone: dim is joined first
    got = firsts("SELECT count(*) FROM s.fact f, s.other o, s.dim d "
                 "WHERE f.f_dim = d.d_key AND d.d_key = o.o_key AND d.d_name = 'x' AND o.o_flag")
    assert got["s.fact"] == [pair("s.dim", ("f_dim", "d_key"))]
    assert got["s.other"] == [None]  # it meets the join of fact and dim
    # written the other way round, fact meets other first
    got = firsts("SELECT count(*) FROM s.fact f JOIN s.other o ON f.f_other = o.o_key "
                 "JOIN s.dim d ON f.f_dim = d.d_key WHERE d.d_name = 'x'")
    assert got["s.fact"] == [pair("s.other", ("f_other", "o_key"))] and got["s.dim"] == [None]
    # a condition over one input alone connects nothing: with none between the first two, the next
    got = firsts("SELECT count(*) FROM s.dim d, s.other o, s.fact f WHERE d.d_name = 'x' AND o.o_flag "
                 "AND f.f_dim = d.d_key AND f.f_other = o.o_key")
    assert got["s.dim"] == [pair("s.fact", ("d_key", "f_dim"))] and got["s.other"] == [None]


def test_an_equality_every_branch_of_an_or_holds_counts():
    got = firsts("SELECT count(*) FROM s.fact, s.dim WHERE (f_dim = d_key AND d_name = 'a' AND f_x < 3) "
                 "OR (f_dim = d_key AND d_name = 'b')")
    assert got["s.fact"] == [pair("s.dim", ("f_dim", "d_key"))]
    got = firsts("SELECT count(*) FROM s.fact, s.dim WHERE (f_dim = d_key AND d_name = 'a') OR (f_x = d_key)")
    assert got["s.fact"] == [pair("s.dim")]  # joined first, but on no equality every branch holds


@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM s.fact f LEFT JOIN s.dim d ON f.f_dim = d.d_key",
    "SELECT count(*) FROM s.fact f JOIN s.dim d ON f.f_dim = d.d_key "
    "WHERE f.f_x < (SELECT avg(f2.f_x) FROM s.fact f2 WHERE f2.f_dim = d.d_key)",
    "SELECT count(*) FROM s.fact f JOIN s.dim d ON f.f_dim = d.d_key WHERE f.f_other IN (SELECT o_key FROM s.other)",
    "SELECT count(*) FROM s.fact f LEFT SEMI JOIN s.dim d ON f.f_dim = d.d_key",
])
def test_what_cannot_be_told_from_the_sql_is_unknown(sql):
    got = firsts(sql)
    assert all(f is None for f in got["s.fact"]), got


def test_each_occurrence_has_its_own_answer():
    # the subquery's read of fact is joined with nothing; the outer one with dim (its scope is plain)
    got = firsts("SELECT count(*) FROM s.fact f JOIN s.dim d ON f.f_dim = d.d_key "
                 "JOIN (SELECT f_dim AS k, avg(f_x) AS a FROM s.fact GROUP BY f_dim) g ON g.k = d.d_key")
    assert sorted(got["s.fact"], key=repr) == sorted([pair("s.dim", ("f_dim", "d_key")), None], key=repr)


def test_columns_read_and_the_size_bound():
    tree, flat = qualify_query(parse_one("SELECT sum(f.f_x) FROM s.fact f, s.dim d WHERE f.f_dim = d.d_key "
                                         "AND d.d_name = 'x'", read="spark"), SCHEMAS)
    cols = columns_read(tree, flat)
    assert cols == {"s.fact": {"f_x", "f_dim"}, "s.dim": {"d_key", "d_name"}}
    assert scan_size_estimate(1000, SCHEMAS["s.dim"], cols["s.dim"]) == 1000 * (8 + 20)
    assert scan_size_estimate(10, SCHEMAS["s.dim"], {"d_price", "d_big"}) == 10 * (8 + 16)
    assert [spark_default_size(t) for t in (pa.bool_(), pa.int16(), pa.int32(), pa.date32(), pa.timestamp("us"),
                                            pa.float64(), pa.list_(pa.int32()), pa.binary())] == \
        [1, 2, 4, 4, 8, 8, 4, 100]
