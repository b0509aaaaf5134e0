"""A maintenance notebook written only with ``spark.sql``: after ``pando_iceberg.enable(spark)``,
``CALL pando.system.*`` runs Pando's procedures beside Iceberg's own ``CALL <catalog>.system.*``."""

from __future__ import annotations

import pytest

import pando_iceberg
import pando_iceberg.spark
from pando_iceberg.procedures import ProcedureContext, ProcedureError, call
from pando_iceberg.procedures.spark_sql import is_enabled

pytestmark = pytest.mark.spark

WORKLOAD = """
SELECT count(*) FROM nb.li WHERE l_shipdate >= date '1994-01-01' AND l_shipdate < date '1995-01-01';
SELECT count(*) FROM nb.li WHERE l_shipdate >= date '1996-03-01' AND l_shipdate < date '1996-06-01';
SELECT count(*) FROM nb.li WHERE l_quantity > 45;
SELECT count(*) FROM nb.li WHERE l_shipdate < date '1993-01-01';
"""
OPTIONS = "options => map('k', '2', 'min-block-rows', '4000')"


@pytest.fixture(scope="module")
def notebook(spark, tpch, tmp_path_factory):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS nb")
    spark.sql("DROP TABLE IF EXISTS nb.li")
    spark.sql("CREATE TABLE nb.li USING iceberg AS SELECT * FROM tpch.lineitem WHERE l_orderkey % 2 = 0")
    spark.sql("INSERT INTO nb.li SELECT * FROM tpch.lineitem WHERE l_orderkey % 2 = 1")
    wl = tmp_path_factory.mktemp("nb") / "workload.sql"
    wl.write_text(WORKLOAD)
    pando_iceberg.enable(spark)
    yield str(wl)
    pando_iceberg.disable(spark)


def test_a_maintenance_notebook_in_spark_sql(spark, catalog, lakehouse_cfg, notebook):
    rows_before = spark.table("nb.li").count()
    plan = spark.sql(f"CALL pando.system.optimize_layout(table => 'nb.li', workload => '{notebook}', {OPTIONS})")
    assert plan.columns[:3] == ["query", "weight", "files_read_now"] and plan.count() == 4
    assert "stored as pending layout" in plan.pando_notes[-1], plan.pando_notes
    pending = catalog.load_table("nb.li").properties["pando.pending-layout-id"]

    rewrite = spark.sql(f"CALL pando.system.rewrite_data_files(table => 'nb.li', strategy => 'pando', {OPTIONS})")
    assert rewrite.pando_notes[0].startswith(f"applied pending layout {pending} "), rewrite.pando_notes
    rw = rewrite.first()
    assert rw["layout_id"] == catalog.load_table("nb.li").properties["pando.layout-id"]
    assert rw["rewritten_data_files_count"] == 2 and rw["block_count"] > 1
    last = spark.sql("SELECT operation FROM nb.li.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]
    assert last == "replace" and spark.table("nb.li").count() == rows_before

    health = {r["metric"]: r["value"] for r in spark.sql("CALL pando.system.layout_health(table => 'nb.li')").collect()}
    assert health["status"] == "ok" and health["files_outside_layout"] == "0"
    # the same columns, types and rows as the procedure run directly (what `pando sql` prints)
    describe = "CALL pando.system.describe_layout(table => 'nb.li')"
    direct = call(ProcedureContext(lakehouse_cfg, catalog, lambda: spark), describe)
    described = spark.sql(describe)
    assert described.columns == direct.names
    assert [f.dataType.simpleString() for f in described.schema.fields] == [t for _, t in direct.columns]
    assert [tuple(r) for r in described.collect()] == [tuple(r) for r in direct.rows]

    # Iceberg's own procedures in the same session are Spark's
    name = lakehouse_cfg.catalog.name
    expired = spark.sql(f"CALL {name}.system.expire_snapshots(table => 'nb.li', older_than => TIMESTAMP '2999-01-01', "
                        "retain_last => 1)").first()
    assert expired["deleted_data_files_count"] == 2  # the two files the rewrite replaced
    assert spark.sql("SELECT count(*) FROM nb.li.snapshots").first()[0] == 1
    assert spark.table("nb.li").count() == rows_before
    q = "SELECT count(*) FROM nb.li WHERE l_shipdate < date '1993-01-01'"
    with pando_iceberg.spark.sql(spark, q) as df:
        assert df.collect() == spark.sql(q).collect()
        assert all(e.used_layout and e.pando_files < e.total_files for e in df.pando.explains.values())


def test_a_bad_call_names_what_was_wrong(spark, notebook):
    with pytest.raises(ProcedureError, match="layout_health: argument 'table' must be STRING, got int 42"):
        spark.sql("CALL pando.system.layout_health(table => 42)")
    with pytest.raises(ProcedureError, match=r"unknown procedure pando\.system\.nope; valid procedures"):
        spark.sql("CALL pando.system.nope()")
    with pytest.raises(ValueError, match=r"spark\.sql's args and keyword arguments are not accepted"):
        spark.sql("CALL pando.system.layout_health(table => :t)", args={"t": "nb.li"})


def test_enable_is_per_session_and_disable_restores_spark(spark, notebook):
    assert is_enabled(spark)
    other = spark.newSession()
    assert not is_enabled(other)
    with pytest.raises(Exception) as plain:  # Spark knows no catalog 'pando'
        other.sql("CALL pando.system.layout_health(table => 'nb.li')").collect()
    assert not isinstance(plain.value, ProcedureError)
    assert pando_iceberg.enable(spark) is spark and is_enabled(spark)  # twice: no change
    assert spark.sql("SELECT 1 AS x").first()["x"] == 1
    assert spark.sql("SELECT :v AS x", args={"v": 7}).first()["x"] == 7  # Spark's own arguments pass through
    with pytest.raises(TypeError, match="config must be a PandoConfig"):
        pando_iceberg.enable(spark, config="lake")
