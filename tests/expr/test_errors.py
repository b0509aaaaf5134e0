"""TableFilter.from_sql error messages: each names the table, the column or literal at
fault, and what would be accepted."""

import re

import pyarrow as pa
import pytest

from pando_iceberg.expr import PandoExprError, TableFilter

LINEITEM = pa.schema([("l_quantity", pa.decimal128(15, 2)), ("l_shipdate", pa.date32()), ("l_flag", pa.string()),
                      ("l_orderkey", pa.int64()), ("l_tax", pa.float64()), ("l_ok", pa.bool_()),
                      ("l_ts", pa.timestamp("us", tz="UTC")), ("l_tags", pa.list_(pa.string()))])
ORDERS = pa.schema([("o_orderkey", pa.int64()), ("o_prio", pa.int64())])
HELP = r"expected one boolean SQL expression in Spark syntax, e\.g\."


def err(sql: str) -> str:
    with pytest.raises(PandoExprError) as info:
        TableFilter.from_sql(sql, LINEITEM, "lineitem", schemas={"tpch.orders": ORDERS})
    return str(info.value)


@pytest.mark.parametrize("sql,pattern", [
    # unknown columns, unusable column types
    ("l_nope < 5", r"^table 'lineitem': unknown column 'l_nope'; columns are: l_quantity, l_shipdate, "),
    ("l_tags is null", r"column 'l_tags' has type list<.*accepted: integers, floats, decimals, strings"),
    # literals of the wrong type: the literal, the column, its type, what is accepted
    ("l_shipdate < 'soon'", r"literal 'soon' cannot be compared with column 'l_shipdate' of type date32.*"
                            r"accepted: date 'yyyy-mm-dd' literals or 'yyyy-mm-dd' strings"),
    ("l_shipdate < 5", r"literal 5 \(int\) cannot be compared with column 'l_shipdate'"),
    ("l_orderkey = 'abc'", r"literal 'abc' cannot be compared with column 'l_orderkey' of type int64.*"
                           r"accepted: integer or decimal numbers"),
    ("l_quantity in (1, 'x')", r"literal 'x' cannot be compared with column 'l_quantity' of type decimal128\(15, 2\)"),
    ("l_flag < 5", r"literal 5 \(int\) cannot be compared with column 'l_flag' of type string.*accepted: string"),
    ("l_ok = 3", r"literal 3 \(int\) cannot be compared with column 'l_ok' of type bool.*accepted: true / false"),
    ("l_tax < 'abc'", r"literal 'abc' cannot be compared with column 'l_tax' of type double.*'NaN'"),
    ("l_ts < 'yesterday'", r"literal 'yesterday' cannot be compared with column 'l_ts'.*accepted: timestamp"),
    ("l_shipdate between '1994-01-01' and 'later'", r"literal 'later' cannot be compared with column 'l_shipdate'"),
    # typed literals Spark itself rejects
    ("l_shipdate = date '1994-13-01'", r"^table 'lineitem': invalid date literal '1994-13-01' in "
                                       r"CAST\('1994-13-01' AS DATE\); accepted: 'yyyy-mm-dd'"),
    ("l_ts < timestamp 'noon'", r"invalid timestamp literal 'noon'.*accepted: 'yyyy-mm-dd\[ hh:mm"),
    # other shapes
    ("l_flag like 5", r"LIKE needs a string expression and a string literal pattern: l_flag LIKE 5"),
    ("l_orderkey in (1, l_quantity)", r"IN list must hold literals: l_orderkey IN \(1, l_quantity\)"),
    ("l_shipdate < l_flag", r"cannot compare a date value with a string value in l_shipdate < l_flag"),
    ("myudf(l_orderkey) > 1", r"unknown function \(UDF\?\) MYUDF\(l_orderkey\)"),
    ("rand() < 0.5", r"non-deterministic expression RAND\(\)"),
    ("l_orderkey", r"l_orderkey is a int expression, not a predicate"),
    ("l_orderkey <=> 1", r"null-safe equality .* is not supported"),
    ("5 < 6", r"constant predicate 5 < 6 references no column"),
])
def test_bad_predicates_name_what_is_wrong(sql, pattern):
    msg = err(sql)
    assert "table 'lineitem'" in msg
    assert re.search(pattern, msg), msg


@pytest.mark.parametrize("sql,pattern", [
    ("l_orderkey <", r"cannot parse predicate 'l_orderkey <': Required keyword: 'expression' missing for LT "
                     r"at line 1, column \d+; " + HELP),
    ("l_orderkey < 5 and", r"cannot parse predicate 'l_orderkey < 5 and'.* at line 1, column \d+; " + HELP),
    ("l_flag = 'abc", r"cannot parse predicate \"l_flag = 'abc\": Error tokenizing.*; " + HELP),
    ("", r"empty predicate ''; " + HELP),
    ("   ", r"empty predicate '   '; " + HELP),
    ("l_orderkey < 5; l_orderkey > 7", r"holds 2 statements; " + HELP + r".*not ';'"),
    ("l_orderkey > 1 l_flag", r"unexpected text 'l_flag' after the predicate in 'l_orderkey > 1 l_flag'; " + HELP),
])
def test_malformed_sql(sql, pattern):
    msg = err(sql)
    assert msg.startswith("table 'lineitem': ")
    assert "\x1b[" not in msg  # no terminal colour codes from the parser
    assert re.search(pattern, msg), msg


@pytest.mark.parametrize("sql,pattern", [
    ("l_orderkey in (select x)", r"unsupported IN subquery .*expected <column> IN \(SELECT <primary key column> "
                                 r"FROM <dimension table> \[WHERE <predicate>\]\)"),
    ("l_orderkey in (select o_orderkey from orders, lineitem)", r"one dimension table, one plain column selected"),
    ("l_orderkey in (select o_orderkey from dim)", r"no schema for dimension table 'dim' .*schemas were given for: "
                                                   r"tpch\.orders"),
    ("l_orderkey in (select o_nokey from orders)", r"dimension table 'orders' has no column 'o_nokey' .*"
                                                   r"columns are: o_orderkey, o_prio"),
])
def test_bad_join_subqueries(sql, pattern):
    msg = err(sql)
    assert msg.startswith("table 'lineitem': ")
    assert re.search(pattern, msg), msg


def test_dimension_predicate_errors_name_the_dimension_table():
    msg = err("l_orderkey in (select o_orderkey from orders where o_nope > 1)")
    assert msg.startswith("table 'orders': unknown column 'o_nope'; columns are: o_orderkey, o_prio"), msg


def test_valid_edge_cases_still_parse():
    ok = lambda sql: TableFilter.from_sql(sql, LINEITEM, "lineitem")  # noqa: E731
    assert ok("l_orderkey < 5;").to_sql() == "l_orderkey < 5"  # one statement with a trailing ';'
    assert ok("l_shipdate = date '1994-02'").to_sql() == "l_shipdate = CAST('1994-02-01' AS DATE)"
    # An explicit CAST of a bad string is NULL in Spark (not an error): the filter is never TRUE.
    assert ok("l_shipdate < cast('abc' as date)").is_unsatisfiable()


def test_a_filters_sql_reads_back_whatever_its_columns_are_named():
    """A filter's SQL is its cut's key in the sidecar, parsed again when the layout is read: a column
    named as a keyword (``from``, ``comment``) or as a function called without parentheses
    (``current_date``) is written quoted; names that read back bare stay bare (older keys)."""
    names = ["from", "comment", "current_date", "select", "a b", "it's", "date", "l_shipdate"]
    schema = pa.schema([(n, pa.int64()) for n in names])
    sql = " AND ".join(f"`{n.replace('`', '``')}` > {i}" for i, n in enumerate(names))
    f = TableFilter.from_sql(sql, schema, "t")
    text = f.to_sql()
    assert "`from` > 0" in text and "`comment` > 1" in text and "`current_date` > 2" in text
    assert " date > 6" in text and " l_shipdate > 7" in text
    again = TableFilter.from_sql(text, schema, "t")
    assert again.to_sql() == text
    row = pa.table({n: [i + 1] for i, n in enumerate(names)})
    assert list(again.evaluate(row)) == [True]
