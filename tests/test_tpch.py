"""`load-tpch`: TPC-H row counts, spec types, identifier fields, and Q6 agreeing across engines."""

from decimal import Decimal

import pytest

from pando_iceberg.tpch import PRIMARY_KEYS, Q6_SQL, TPCH_TABLES, expected_row_count, q6_pyiceberg


def test_every_table_has_the_tpch_row_count(tpch, spark):
    assert set(tpch) == set(TPCH_TABLES)
    for table in TPCH_TABLES:
        want = expected_row_count(table, 0.01)
        assert want is not None
        got = spark.sql(f"SELECT count(*) FROM tpch.{table}").collect()[0][0]
        assert got == want, table
    assert expected_row_count("lineitem", 0.01) == 60_175


def test_identifier_fields_are_the_primary_keys(tpch, catalog):
    for table, pk in PRIMARY_KEYS.items():
        schema = catalog.load_table(f"tpch.{table}").schema()
        names = {schema.find_column_name(fid) for fid in schema.identifier_field_ids}
        assert names == set(pk), table


def test_spec_column_types(tpch, spark):
    types = {f.name: f.dataType.simpleString() for f in spark.table("tpch.lineitem").schema.fields}
    assert types["l_shipdate"] == "date" and types["l_receiptdate"] == "date"
    assert types["l_extendedprice"] == "decimal(15,2)" and types["l_discount"] == "decimal(15,2)"
    assert types["l_orderkey"] == "bigint" and types["l_shipmode"] == "string"
    assert {f.name: f.nullable for f in spark.table("tpch.orders").schema.fields}["o_orderdate"] is False


def test_q6_same_answer_through_spark_and_pyiceberg(tpch, spark, catalog):
    via_spark = spark.sql(Q6_SQL).collect()[0][0]
    via_pyiceberg = q6_pyiceberg(catalog)
    assert isinstance(via_spark, Decimal) and via_spark > 0
    assert via_spark == via_pyiceberg


def test_reload_keeps_existing_tables(tpch, spark):
    from pando_iceberg.tpch import load_tpch

    before = spark.sql("SELECT snapshot_id FROM tpch.nation.snapshots").collect()
    again = load_tpch(spark, 0.01, namespace="tpch", tables=("nation",))
    after = spark.sql("SELECT snapshot_id FROM tpch.nation.snapshots").collect()
    assert again[0].rows == 25 and before == after


def test_bad_namespace_is_rejected(spark):
    from pando_iceberg.tpch import TpchError, load_tpch

    with pytest.raises(TpchError, match="invalid identifier 'x; DROP'"):
        load_tpch(spark, 0.01, namespace="x; DROP")
