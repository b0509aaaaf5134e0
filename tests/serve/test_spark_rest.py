"""Spark (Iceberg 1.10's REST catalog client) through ``pando serve``: it creates, appends to,
deletes from (merge-on-read: position delete files) and reads a table through the server, and a
pyiceberg client planning on the server reads the same rows, the delete files travelling with
their tasks. Iceberg 1.10 plans on the client; server-side planning from Spark needs 1.11."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def rest_spark(spark, catalog):
    """The test session's Spark with catalog ``rest_pando``: pando serve over the embedded catalog."""
    from pando_iceberg.serve import ServerThread

    with ServerThread(catalog) as server:
        prefix = "spark.sql.catalog.rest_pando"
        spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
        spark.conf.set(f"{prefix}.type", "rest")
        spark.conf.set(f"{prefix}.uri", server.uri)
        yield spark, server
        spark.sql("DROP TABLE IF EXISTS rest_pando.serve_spark.events")
        spark.sql("DROP TABLE IF EXISTS rest_pando.serve_spark.kinds")
        spark.sql("DROP NAMESPACE IF EXISTS rest_pando.serve_spark")


def test_spark_writes_and_reads_through_the_server(rest_spark, catalog, make_client):
    spark, server = rest_spark
    spark.sql("CREATE NAMESPACE IF NOT EXISTS rest_pando.serve_spark")
    spark.sql("DROP TABLE IF EXISTS rest_pando.serve_spark.events")
    spark.sql("CREATE TABLE rest_pando.serve_spark.events (id BIGINT, kind STRING) USING iceberg "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    spark.sql("INSERT INTO rest_pando.serve_spark.events SELECT id, CASE WHEN id % 3 = 0 THEN 'a' ELSE 'b' END "
              "FROM range(0, 3000)")
    spark.sql("INSERT INTO rest_pando.serve_spark.events SELECT id, 'c' FROM range(3000, 4000)")
    spark.sql("DELETE FROM rest_pando.serve_spark.events WHERE id % 10 = 1")
    assert spark.sql("SELECT count(*) FROM rest_pando.serve_spark.events").first()[0] == 3600

    direct = catalog.load_table("serve_spark.events")  # the embedded catalog holds what Spark committed
    assert any(t.delete_files for t in direct.scan().plan_files())
    rest_table = make_client(server.uri).load_table("serve_spark.events")
    tasks = list(rest_table.scan().plan_files())
    assert any(t.delete_files for t in tasks), "the position delete files did not travel with their tasks"
    want = sorted(r.id for r in spark.sql("SELECT id FROM rest_pando.serve_spark.events WHERE kind = 'a'").collect())
    got = rest_table.scan(row_filter="kind = 'a'").to_arrow()
    assert sorted(got.column("id").to_pylist()) == want
    assert rest_table.scan().to_arrow().num_rows == 3600

    # Iceberg's own rewrite through the server: one commit replacing the files, the same rows
    spark.sql("CALL rest_pando.system.rewrite_data_files(table => 'serve_spark.events', "
              "options => map('rewrite-all', 'true'))")
    assert spark.sql("SELECT count(*) FROM rest_pando.serve_spark.events").first()[0] == 3600
    rest_table = make_client(server.uri).load_table("serve_spark.events")
    assert sorted(rest_table.scan(row_filter="kind = 'a'").to_arrow().column("id").to_pylist()) == want


def test_spark_create_table_as_select_through_the_server(rest_spark, catalog):
    """CREATE TABLE AS SELECT: a staged create, then the commit that creates the table."""
    spark, _ = rest_spark
    spark.sql("CREATE NAMESPACE IF NOT EXISTS rest_pando.serve_spark")
    spark.sql("CREATE TABLE rest_pando.serve_spark.kinds USING iceberg AS "
              "SELECT id % 4 AS kind, count(*) AS n FROM range(0, 1000) GROUP BY 1")
    assert spark.sql("SELECT sum(n) FROM rest_pando.serve_spark.kinds").first()[0] == 1000
    assert catalog.load_table("serve_spark.kinds").scan().to_arrow().num_rows == 4
