"""Every procedure through the Python API and `pando`, every runbook end to end, argument errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pando_iceberg.procedures import ProcedureContext, ProcedureError, call
from pando_iceberg.runner import RunbookError, run_script

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]

WORKLOAD = """
SELECT sum(l_extendedprice) FROM ops.li WHERE l_shipdate >= date '1994-01-01' AND l_shipdate < date '1995-01-01';
SELECT count(*) FROM ops.li WHERE l_shipdate >= date '1996-03-01' AND l_shipdate < date '1996-06-01';
SELECT count(*) FROM ops.li WHERE l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24;
SELECT count(*) FROM ops.li WHERE l_shipmode IN ('MAIL', 'SHIP') AND l_receiptdate >= date '1994-01-01';
SELECT count(*) FROM ops.li WHERE l_quantity > 45;
SELECT count(*) FROM ops.li WHERE l_shipdate < date '1993-01-01';
"""


@pytest.fixture(scope="module")
def ctx(spark, catalog, lakehouse_cfg, tpch, tmp_path_factory):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS ops")
    spark.sql("DROP TABLE IF EXISTS ops.li")
    spark.sql("CREATE TABLE ops.li USING iceberg AS SELECT * FROM tpch.lineitem WHERE l_orderkey % 2 = 0")
    spark.sql("INSERT INTO ops.li SELECT * FROM tpch.lineitem WHERE l_orderkey % 2 = 1")
    wl = tmp_path_factory.mktemp("wl") / "workload.sql"
    wl.write_text(WORKLOAD)
    c = ProcedureContext(lakehouse_cfg, catalog, lambda: spark)
    c.workload_path = str(wl)
    return c


def _metrics(result):
    return dict(result.rows)


def test_first_layout_runbook_end_to_end(ctx, spark):
    text = (ROOT / "procedures" / "first_layout.sql").read_text()
    results = run_script(ctx, text, {"table": "ops.li", "workload": ctx.workload_path, "k": "2",
                                     "min_block_rows": "4000", "catalog": ctx.cfg.catalog.name})
    names = [r.names for _, r in results]
    assert names[0][:3] == ["query", "weight", "files_read_now"] and len(results[0][1].rows) == 6
    rewrite = dict(zip(results[1][1].names, results[1][1].rows[0]))
    assert rewrite["rewritten_data_files_count"] == 2 and rewrite["block_count"] > 1
    assert rewrite["added_data_files_count"] >= rewrite["block_count"]
    assert spark.sql("SELECT operation FROM ops.li.snapshots ORDER BY committed_at DESC LIMIT 1").collect()[0][0] == "replace"
    describe = results[2][1]
    assert any(r[0] == "tree" and str(r[4]).startswith("cut: ") for r in describe.rows)
    assert sum(r[5] for r in describe.rows if r[0] == "block") == spark.table("ops.li").count()
    health = _metrics(results[3][1])
    assert health["status"] == "ok" and health["files_outside_layout"] == "0"
    assert float(health["workload_rows_fraction_now"]) < 1.0


def test_explain_scan_reports_stages_and_prunes(ctx):
    r = call(ctx, "CALL pando.system.explain_scan(table => 'ops.li', filter => \"l_shipdate < date '1993-01-01'\")")
    stages = {row[1]: row for row in r.rows}
    assert stages["pando (∩ trees)"][2] < stages["all live files"][2]
    assert any(s.startswith("pando tree ") for s in stages)


def test_health_degrades_after_appends_and_nightly_runbook_relays_out(ctx, spark):
    before = call(ctx, "CALL pando.system.layout_health('ops.li')")
    spark.sql("INSERT INTO ops.li SELECT * FROM tpch.lineitem WHERE l_orderkey % 5 = 0")
    after = _metrics(call(ctx, "CALL pando.system.layout_health(table => 'ops.li', max_rows_outside => 0.05)"))
    assert after["status"] == "degraded" and int(after["rows_outside_layout"]) > 0
    assert "outside the layout" in after["recommendation"]
    old_layout = _metrics(before)["layout_id"]
    text = (ROOT / "procedures" / "nightly_maintenance.sql").read_text()
    results = run_script(ctx, text, {"table": "ops.li", "max_rows_outside": "0.05", "k": "2", "min_block_rows": "4000",
                                     "retain_last": "3", "catalog": ctx.cfg.catalog.name})
    first = _metrics(results[0][1])
    assert first["action"].startswith("re-laid out")
    final = _metrics(results[-1][1])
    assert final["status"] == "ok" and final["layout_id"] != old_layout and final["files_outside_layout"] == "0"
    assert "deleted_data_files_count" in results[1][1].names  # Iceberg's expire_snapshots ran through Spark
    assert spark.sql("SELECT count(*) FROM ops.li").collect()[0][0] == spark.sql(
        "SELECT count(*) FROM tpch.lineitem").collect()[0][0] + spark.sql(
        "SELECT count(*) FROM tpch.lineitem WHERE l_orderkey % 5 = 0").collect()[0][0]


def test_health_check_runbook_does_nothing_when_healthy(ctx):
    text = (ROOT / "procedures" / "health_check.sql").read_text()
    results = run_script(ctx, text, {"table": "ops.li", "max_rows_outside": "0.2", "max_efficiency_loss": "0.5"})
    assert _metrics(results[0][1])["action"] == "none (healthy)"


def test_binpack_passes_through_to_iceberg(ctx, spark):
    spark.sql("CREATE TABLE IF NOT EXISTS ops.small USING iceberg AS SELECT * FROM tpch.nation")
    spark.sql("INSERT INTO ops.small SELECT * FROM tpch.nation")
    r = call(ctx, "CALL pando.system.rewrite_data_files(table => 'ops.small', strategy => 'binpack', "
                  "options => map('min-input-files', '2'))")
    cols = r.names
    assert "rewritten_data_files_count" in cols and dict(zip(cols, r.rows[0]))["rewritten_data_files_count"] == 2


def test_remove_layout_then_planner_falls_back(ctx, spark, catalog):
    spark.sql("CREATE TABLE IF NOT EXISTS ops.rm USING iceberg AS SELECT * FROM tpch.orders")
    call(ctx, f"CALL pando.system.rewrite_data_files(table => 'ops.rm', strategy => 'pando', workload => "
              "\"SELECT * FROM ops.rm WHERE o_orderdate < date '1993-06-01'; SELECT * FROM ops.rm WHERE o_totalprice > 300000\", "
              "options => map('k', '1', 'min-block-rows', '3000', 'sample-rate', '0.5'))")
    r = call(ctx, "CALL pando.system.remove_layout(table => 'ops.rm')")
    assert r.rows[0][1] is True
    assert not any(k.startswith("pando.") for k in catalog.load_table("ops.rm").properties)
    ex = call(ctx, "CALL pando.system.explain_scan(table => 'ops.rm', filter => \"o_orderdate < date '1993-06-01'\")")
    assert "no Pando layout" in ex.rows[-1][5]
    health = _metrics(call(ctx, "CALL pando.system.layout_health('ops.rm')"))
    assert health["status"] == "no layout"


@pytest.mark.parametrize("stmt, message", [
    ("CALL pando.system.nope()", "unknown procedure pando.system.nope; valid procedures: describe_layout(table STRING)"),
    ("CALL pando.system.explain_scan(tabel => 'x')", "unknown argument 'tabel'; valid arguments: table STRING"),
    ("CALL pando.system.layout_health(table => 42)", "argument 'table' must be STRING, got int 42"),
    ("CALL pando.system.describe_layout()", "missing required argument 'table' (STRING)"),
    ("CALL pando.system.describe_layout(table => 'ops.none')", "table 'ops.none' does not exist; tables in catalog"),
    ("CALL pando.system.describe_layout(table => l_shipdate)", "is not a literal; accepted: 'string', number"),
    ("CALL pando.system.rewrite_data_files(table => 'ops.li', strategy => 'zorder')", "accepted: pando, binpack, sort"),
    ("CALL pando.system.rewrite_data_files(table => 'ops.li', strategy => 'pando', options => map('kk', '1'))",
     "unknown option 'kk'; accepted"),
    ("CALL pando.system.describe_layout('a', 'b')", "takes at most 1 arguments"),
])
def test_argument_errors_list_what_is_valid(ctx, stmt, message):
    with pytest.raises(Exception) as e:
        call(ctx, stmt)
    assert message in str(e.value)


def test_runbook_variables_must_be_defined(ctx):
    with pytest.raises(RunbookError, match=r"variable\(s\) table not defined"):
        run_script(ctx, "CALL pando.system.describe_layout('${table}')", {})


def _cli(*args, home):
    return subprocess.run([sys.executable, "-m", "pando_iceberg.cli", f"--home={home}", *args],
                          capture_output=True, text=True, timeout=900)


def test_cli_json_carries_the_same_numbers_as_the_table(ctx, lakehouse_cfg):
    stmt = "CALL pando.system.explain_scan(table => 'ops.li', filter => \"l_shipdate < date '1993-01-01'\")"
    human = _cli("sql", stmt, home=lakehouse_cfg.home)
    machine = _cli("sql", "--json", stmt, home=lakehouse_cfg.home)
    assert human.returncode == 0 and machine.returncode == 0, human.stderr + machine.stderr
    doc = json.loads(machine.stdout)
    for row in doc["rows"]:
        if row["files"] is not None:
            assert f"| {row['files']} " in human.stdout.replace("|  ", "| ").replace(" " * 2, " ")
    assert {r["stage"] for r in doc["rows"]} >= {"all live files", "pando (∩ trees)"}


@pytest.mark.parametrize("stmt, code, message", [
    ("CALL pando.system.nope()", 2, "unknown procedure"),
    ("CALL pando.system.explain_scan(table => 7)", 2, "must be STRING"),
    ("CALL pando.system.describe_layout(table => 'ops.none')", 2, "does not exist"),
])
def test_cli_argument_errors_exit_2_without_traceback(lakehouse_cfg, ctx, stmt, code, message):
    proc = _cli("sql", stmt, home=lakehouse_cfg.home)
    assert proc.returncode == code and message in proc.stderr and "Traceback" not in proc.stderr
