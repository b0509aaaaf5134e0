"""FK→PK without declared identifier fields (issue 14): the parser asks a uniqueness oracle;
declared keys win; with no oracle both directions of an inner equi-join are kept (each a sound
semi-join) and ``Workload.join_induced_cuts`` keeps the cuts whose dimension column is unique
on the data; the key basis is recorded in the literal cut's origin."""

import pyarrow as pa
import pytest
from sqlglot import parse_one

from pando_iceberg.expr import LiteralCut
from pando_iceberg.workload import PandoWorkloadError, arrow_key_provider, parse_query, parse_workload

SCHEMAS = {
    "s.sales": pa.schema([("store_key", pa.int32()), ("product_key", pa.int32()), ("qty", pa.int32())]),
    "s.stores": pa.schema([("store_key", pa.int32()), ("region_key", pa.int32()), ("city", pa.string())]),
    "s.regions": pa.schema([("region_key", pa.int32()), ("r_name", pa.string())]),
}
TABLES = {
    "s.sales": pa.table({"store_key": pa.array([1, 2, 3, 3], pa.int32()), "product_key": pa.array([1, 1, 2, 2], pa.int32()),
                         "qty": pa.array([1, 2, 3, 4], pa.int32())}),
    "s.stores": pa.table({"store_key": pa.array([1, 2, 3], pa.int32()), "region_key": pa.array([1, 1, 2], pa.int32()),
                          "city": ["a", "b", "c"]}),
    "s.regions": pa.table({"region_key": pa.array([1, 2], pa.int32()), "r_name": ["NORTH", "SOUTH"]}),
}
SQL = ("SELECT sum(f.qty) FROM s.sales f JOIN s.stores s ON f.store_key = s.store_key "
       "JOIN s.regions r ON s.region_key = r.region_key WHERE r.r_name = 'NORTH' AND s.city <> 'z'")


def test_oracle_decides_the_direction_of_undeclared_joins():
    provider = arrow_key_provider(TABLES)
    asked = []

    def unique(table, column):
        asked.append((table, column))
        return provider.is_unique(table, column)

    wl = parse_workload(SQL, SCHEMAS, unique=unique)
    sales = wl.queries[0].filters["s.sales"]
    assert [(j.column, j.dim_table, j.dim_pk) for j in sales.joins] == [("store_key", "s.stores", "store_key")]
    chain = sales.joins[0].dim_filter.joins  # multi-hop: stores → regions
    assert [(j.column, j.dim_table, j.dim_pk) for j in chain] == [("region_key", "s.regions", "region_key")]
    # the fact's column is not unique: no join filter from a dimension into the fact
    assert not wl.queries[0].filters["s.stores"].joins or all(
        j.dim_table != "s.sales" for j in wl.queries[0].filters["s.stores"].joins)
    assert ("s.sales", "store_key") in asked and len(asked) == len(set(asked))  # memoized per (table, column)


def test_declared_identifier_fields_win_over_the_oracle():
    wl = parse_workload(SQL, SCHEMAS, primary_keys={"s.stores": ["city"]}, unique=lambda t, c: True)
    # declared identifier fields win over the oracle: store_key is not stores' declared key
    assert wl.queries[0].filters["s.sales"].joins == []


def test_join_induced_cuts_record_the_key_basis():
    provider = arrow_key_provider(TABLES)
    wl = parse_workload(SQL, SCHEMAS)  # no oracle: undecided joins kept; the provider checks uniqueness
    cuts = [c for c in wl.join_induced_cuts("s.sales", provider) if isinstance(c, LiteralCut)]
    assert cuts and {c.origin.key_basis for c in cuts} == {"unique"}
    assert {c.origin.dim_table for c in cuts} == {"s.stores"}
    north = next(c for c in cuts if "NORTH" in c.origin.predicate)
    assert sorted(north.keys) == [1, 2]
    declared = parse_workload(SQL, SCHEMAS, primary_keys={"s.stores": ["store_key"]})
    cuts = declared.join_induced_cuts("s.sales", provider)
    assert {c.origin.key_basis for c in cuts if isinstance(c, LiteralCut)} == {"declared"}
    assert all(c.origin.to_json().get("key_basis") == "declared" for c in cuts if isinstance(c, LiteralCut))


def test_not_unique_dimension_column_gives_no_cut():
    tables = dict(TABLES)
    tables["s.stores"] = pa.table({"store_key": pa.array([1, 1, 3], pa.int32()), "region_key": pa.array([1, 2, 2], pa.int32()),
                                   "city": ["a", "b", "c"]})
    wl = parse_workload(SQL, SCHEMAS)
    assert [c for c in wl.join_induced_cuts("s.sales", arrow_key_provider(tables)) if isinstance(c, LiteralCut)] == []


def test_parse_query_reads_the_planners_tree_as_parse_workload_reads_the_text():
    unique = arrow_key_provider(TABLES).is_unique
    want = parse_workload(SQL, SCHEMAS, unique=unique).queries[0]
    tree = parse_one(SQL, read="spark")
    got = parse_query(tree, SCHEMAS, unique=unique, sql=SQL)
    assert got.sql == SQL
    assert sorted(got.filters) == sorted(want.filters)
    for name in want.filters:
        assert got.filters[name].to_sql() == want.filters[name].to_sql()
        assert [(j.column, j.dim_table, j.dim_pk) for j in got.filters[name].joins] == \
            [(j.column, j.dim_table, j.dim_pk) for j in want.filters[name].joins]
    assert tree.sql(dialect="spark") == parse_one(SQL, read="spark").sql(dialect="spark")  # the tree is not changed
    with pytest.raises(PandoWorkloadError, match="not a query"):
        parse_query(parse_one("INSERT INTO s.sales VALUES (1, 1, 1)", read="spark"), SCHEMAS)
