"""Qualification once per template (``workload.qualify``, ``planner.caches.SHAPES``): a query of a
known shape is the cached qualified shape with its own literals put back, and reads exactly as if
qualified alone."""

import pyarrow as pa
import pytest
from sqlglot import exp, parse_one

from pando_iceberg.planner.caches import SHAPES
from pando_iceberg.workload import PandoWorkloadError, parse_workload, qualify_query
from pando_iceberg.workload.tpch_queries import TPCH_PRIMARY_KEYS, TPCH_SCHEMAS, tpch_workload


@pytest.fixture(autouse=True)
def empty_shapes():
    SHAPES.clear()
    yield
    SHAPES.clear()


def alone(sql: str, schemas=TPCH_SCHEMAS) -> str:
    """The statement qualified with no shape cached."""
    SHAPES.clear()
    return qualify_query(parse_one(sql, read="spark"), schemas)[0].sql("spark")


def test_every_tpch_template_reads_as_if_qualified_alone():
    today, tomorrow = tpch_workload(1, seed=1), tpch_workload(1, seed=2)
    expected = {t: alone(sql) for t, sql in tomorrow}
    SHAPES.clear()
    for _, sql in today:  # learn the 22 shapes from other literals
        qualify_query(parse_one(sql, read="spark"), TPCH_SCHEMAS)
    assert len(SHAPES) == 22
    differ = 0
    for t, sql in tomorrow:
        got = qualify_query(parse_one(sql, read="spark"), TPCH_SCHEMAS)[0]
        assert got.sql("spark") == expected[t], t
        differ += got.sql("spark") != alone(dict(today)[t])
    assert len(SHAPES) == 1  # (alone() empties it)
    assert differ >= 20  # the draws' literals differ, and each query kept its own


def test_workload_parsed_with_shapes_equals_parsed_without(monkeypatch):
    sql = ";\n".join(s for _, s in tpch_workload(3, seed=5))
    warm = parse_workload(sql, TPCH_SCHEMAS, primary_keys=TPCH_PRIMARY_KEYS)
    assert len(SHAPES) == 22
    SHAPES.clear()
    monkeypatch.setattr(SHAPES, "max_entries", 0)  # every statement qualified alone
    cold = parse_workload(sql, TPCH_SCHEMAS, primary_keys=TPCH_PRIMARY_KEYS)
    assert len(SHAPES) == 0
    assert [q.sql for q in warm.queries] == [q.sql for q in cold.queries]
    for a, b in zip(warm.queries, cold.queries):
        assert {t: f.to_sql() for t, f in a.filters.items()} == {t: f.to_sql() for t, f in b.filters.items()}


SCHEMAS = {"db.t": pa.schema([("a", pa.int64()), ("b", pa.string()), ("c", pa.int64())])}


@pytest.mark.parametrize("sql", [
    "SELECT a, b FROM db.t WHERE c > {} ORDER BY {}",
    "SELECT b, sum(a) FROM db.t WHERE c > {} GROUP BY {} ORDER BY 1",
    "SELECT a FROM db.t WHERE c > {} LIMIT {}",
])
def test_positions_and_limits_are_part_of_the_shape(sql):
    first, second = sql.format(5, 1), sql.format(7, 2)
    want = alone(second, SCHEMAS)
    qualify_query(parse_one(first, read="spark"), SCHEMAS)
    assert qualify_query(parse_one(second, read="spark"), SCHEMAS)[0].sql("spark") == want
    assert len(SHAPES) == 2


def test_same_shape_other_literal_types_and_repeats():
    a = "SELECT a FROM db.t WHERE b = 'x' AND c IN (1, 2, 3) AND a + 1 > c"
    b = "SELECT a FROM db.t WHERE b = 'yes' AND c IN (4, 5, 6) AND a + 9 > c"
    want = alone(b, SCHEMAS)
    qualify_query(parse_one(a, read="spark"), SCHEMAS)
    got = qualify_query(parse_one(b, read="spark"), SCHEMAS)[0]
    assert got.sql("spark") == want and len(SHAPES) == 1
    assert sorted(lit.this for lit in got.find_all(exp.Literal)) == sorted(["yes", "4", "5", "6", "9"])


def test_own_placeholders_are_left_alone():
    sql = "SELECT a FROM db.t WHERE c > :low AND b = 'x'"
    got = qualify_query(parse_one(sql, read="spark"), SCHEMAS)[0].sql("spark")
    assert ":low" in got and "'x'" in got


def test_a_statement_that_cannot_be_resolved_is_left_as_it_was_and_not_cached():
    stmt = parse_one("SELECT a FROM db.t WHERE nope = 3 AND b = 'x'", read="spark")
    before = stmt.sql("spark")
    with pytest.raises(PandoWorkloadError, match="cannot be resolved"):
        qualify_query(stmt, SCHEMAS)
    assert stmt.sql("spark") == before and len(SHAPES) == 0


def test_shapes_are_bounded(monkeypatch):
    monkeypatch.setattr(SHAPES, "max_entries", 3)
    for i in range(6):
        qualify_query(parse_one(f"SELECT a FROM db.t WHERE c > 1 LIMIT {i}", read="spark"), SCHEMAS)
    assert len(SHAPES) == 3


def test_shape_only_is_the_cached_shape_itself_with_placeholders():
    sql = "SELECT a FROM db.t WHERE b = 'x' AND c > 3"
    shape, _ = qualify_query(parse_one(sql, read="spark"), SCHEMAS, shape_only=True)
    again, _ = qualify_query(parse_one(sql.replace("'x'", "'y'"), read="spark"), SCHEMAS, shape_only=True)
    assert again is shape and not list(shape.find_all(exp.Literal)) and len(list(shape.find_all(exp.Placeholder))) == 2
    full, _ = qualify_query(parse_one(sql, read="spark"), SCHEMAS)
    assert full is not shape and "'x'" in full.sql("spark") and shape.find(exp.Placeholder) is not None
