"""Spark and pyiceberg share one catalog: each side sees the other's tables, rows and properties."""

import pyarrow as pa


def test_spark_table_is_appended_by_pyiceberg_and_seen_by_spark(spark, catalog):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS interop")
    spark.sql("DROP TABLE IF EXISTS interop.from_spark")
    spark.sql("CREATE TABLE interop.from_spark (id BIGINT NOT NULL, name STRING) USING iceberg")
    spark.sql("INSERT INTO interop.from_spark VALUES (1, 'a'), (2, 'b')")

    tbl = catalog.load_table("interop.from_spark")
    assert sorted(tbl.scan().to_arrow()["id"].to_pylist()) == [1, 2]
    tbl.append(pa.table({"id": pa.array([3, 4], pa.int64()), "name": ["c", None]},
                        schema=tbl.schema().as_arrow()))

    spark.sql("REFRESH TABLE interop.from_spark")
    rows = spark.sql("SELECT id, name FROM interop.from_spark ORDER BY id").collect()
    assert [(r.id, r.name) for r in rows] == [(1, "a"), (2, "b"), (3, "c"), (4, None)]
    ops = [r.operation for r in spark.sql("SELECT operation FROM interop.from_spark.snapshots ORDER BY committed_at").collect()]
    assert ops == ["append", "append"]


def test_pyiceberg_table_is_appended_by_spark_and_seen_by_pyiceberg(spark, catalog):
    catalog.create_namespace_if_not_exists("interop")
    if catalog.table_exists("interop.from_py"):
        catalog.drop_table("interop.from_py")
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.float64())])
    tbl = catalog.create_table("interop.from_py", schema=schema)
    tbl.append(pa.table({"k": [10, 20], "v": [0.5, float("nan")]}, schema=schema))

    assert spark.sql("SELECT count(*) FROM interop.from_py").collect()[0][0] == 2
    spark.sql("INSERT INTO interop.from_py VALUES (30, 1.5)")

    tbl = catalog.load_table("interop.from_py")
    got = tbl.scan().to_arrow().sort_by("k")
    assert got["k"].to_pylist() == [10, 20, 30]
    assert got["v"].to_pylist()[0] == 0.5 and got["v"].to_pylist()[2] == 1.5


def test_table_properties_cross_both_ways(spark, catalog):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS interop")
    spark.sql("CREATE TABLE IF NOT EXISTS interop.props (id BIGINT) USING iceberg")
    with catalog.load_table("interop.props").transaction() as tx:
        tx.set_properties({"pando.probe": "from-pyiceberg"})
    spark.sql("REFRESH TABLE interop.props")
    props = {r.key: r.value for r in spark.sql("SHOW TBLPROPERTIES interop.props").collect()}
    assert props["pando.probe"] == "from-pyiceberg"

    spark.sql("ALTER TABLE interop.props SET TBLPROPERTIES ('pando.probe2' = 'from-spark')")
    assert catalog.load_table("interop.props").properties["pando.probe2"] == "from-spark"
