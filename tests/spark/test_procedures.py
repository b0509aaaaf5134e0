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
    # step 2 applied the layout step 1 stored, without learning it again
    assert results[1][1].notes[0].startswith("applied pending layout "), results[1][1].notes
    assert "sampling: 0.0s" in results[1][1].notes
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


def test_explain_scan_of_a_query_names_its_row_filters(ctx, spark):
    parts = spark.sql("SELECT count(*) FROM tpch.part WHERE p_brand = 'Brand#23'").first()[0]
    query = ("CALL pando.system.explain_scan(query => \"SELECT sum(l_quantity) FROM ops.li JOIN tpch.part "
             "ON l_partkey = p_partkey WHERE p_brand = 'Brand#23'\")")
    key = "spark.sql.autoBroadcastJoinThreshold"
    before = spark.conf.get(key)
    spark.conf.set(key, "-1")  # part is not broadcast: the row filter is made
    try:
        r = call(ctx, query)
    finally:
        spark.conf.set(key, before)
    filters = [row[5] for row in r.rows if row[0] == "ops.li" and row[1] == "row filter"]
    assert filters == [f"row filter: l_partkey semi-joined with {parts:,} keys of tpch.part (pyiceberg)"], r.rows
    # broadcast (Spark's default threshold): the query's own first join does that filtering, and
    # explain says why no row filter was made
    r = call(ctx, query)
    filters = [row[5] for row in r.rows if row[0] == "ops.li" and row[1] == "row filter"]
    assert len(filters) == 1 and "Spark joins it first with tpch.part alone, broadcast" in filters[0], r.rows


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
    ("CALL pando.system.nope()",
     "unknown procedure pando.system.nope; valid procedures: advise(table STRING, workload STRING (optional)"),
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



# ---- optimize_layout: a pending layout, applied later -------------------------------------------

ORDERS_WL = ("SELECT * FROM ops.pend WHERE o_orderdate < date '1993-06-01'; "
             "SELECT * FROM ops.pend WHERE o_totalprice > 300000; "
             "SELECT count(*) FROM ops.pend WHERE o_orderpriority = '1-URGENT' AND o_orderdate >= date '1997-01-01'")
ORDERS_OPTS = "map('k', '2', 'min-block-rows', '2000', 'sample-rate', '0.5')"


@pytest.fixture(scope="module")
def pend(ctx, spark):
    spark.sql("DROP TABLE IF EXISTS ops.pend")
    spark.sql("CREATE TABLE ops.pend USING iceberg AS SELECT * FROM tpch.orders WHERE o_orderkey % 2 = 0")
    spark.sql("INSERT INTO ops.pend SELECT * FROM tpch.orders WHERE o_orderkey % 2 = 1")
    return "ops.pend"


def _snapshots(catalog, name):
    return [s.snapshot_id for s in catalog.load_table(name).metadata.snapshots]


def test_optimize_layout_stores_a_pending_layout_that_scans_ignore_and_rewrite_applies(ctx, pend, catalog, spark):
    from pando_iceberg.maintenance.pending import P_PENDING_ID, load_pending
    from pando_iceberg.procedures.builtin import current_sidecar
    from pando_iceberg.storage.paths import list_sidecars

    before = _snapshots(catalog, pend)
    r = call(ctx, f'CALL pando.system.optimize_layout(table => \'{pend}\', workload => "{ORDERS_WL}", options => {ORDERS_OPTS})')
    assert r.names == ["query", "weight", "files_read_now", "files_total_now", "files_read_with_layout",
                       "files_total_with_layout", "rows_fraction_now", "rows_fraction_with_layout", "filter"]
    assert len(r.rows) == 3
    metrics = [dict(zip(r.names, row)) for row in r.rows]
    assert all(m["files_read_now"] == m["files_total_now"] == 2 for m in metrics)  # no layout yet
    assert all(0 < m["files_read_with_layout"] <= m["files_total_with_layout"] > 1 for m in metrics)
    assert any(m["files_read_with_layout"] < m["files_total_with_layout"] for m in metrics)
    tbl = catalog.load_table(pend)
    assert _snapshots(catalog, pend) == before  # no data rewritten
    assert "pando.layout-id" not in tbl.properties and P_PENDING_ID in tbl.properties
    pending = load_pending(tbl)
    assert pending.properties["pando.pending"] == "true" and not pending.block_files
    assert pending.layout_id in r.notes[-1]
    # the planner never prunes with a layout that no data file follows
    ex = call(ctx, f"CALL pando.system.explain_scan(table => '{pend}', filter => \"o_orderdate < date '1993-06-01'\")")
    assert "no Pando layout" in ex.rows[-1][5] and ex.rows[-1][2] == 2
    with pytest.raises(ProcedureError, match=f"optimize_layout stored pending layout {pending.layout_id}: apply it"):
        call(ctx, f"CALL pando.system.describe_layout('{pend}')")

    planned = pending.load_layout()
    rw = call(ctx, f"CALL pando.system.rewrite_data_files(table => '{pend}', strategy => 'pando', options => {ORDERS_OPTS})")
    row = dict(zip(rw.names, rw.rows[0]))
    assert rw.notes[0].startswith(f"applied pending layout {pending.layout_id} learned by optimize_layout")
    assert "sampling: 0.0s" in rw.notes  # nothing learned again
    applied = current_sidecar(catalog.load_table(pend))
    layout = applied.load_layout()
    assert [c.key for c in layout.cuts] == [c.key for c in planned.cuts]
    assert [t.node_cut and [getattr(c, "key", None) for c in t.node_cut] for t in layout.trees] == \
        [[getattr(c, "key", None) for c in t.node_cut] for t in planned.trees]
    assert row["block_count"] == planned.num_blocks
    tbl = catalog.load_table(pend)
    assert P_PENDING_ID not in tbl.properties  # applied: no longer pending
    assert {s.name for s in list_sidecars(tbl.io, tbl.location())} == {applied.file_name}
    assert spark.table(pend).count() == spark.table("tpch.orders").count()
    ex = call(ctx, f"CALL pando.system.explain_scan(table => '{pend}', filter => \"o_orderdate < date '1993-06-01'\")")
    assert ex.rows[-1][2] < ex.rows[0][2]  # now the layout prunes


def test_a_changed_request_or_relearn_learns_anew_and_drops_the_pending_layout(ctx, pend, catalog):
    from pando_iceberg.maintenance.pending import P_PENDING_ID

    call(ctx, f'CALL pando.system.optimize_layout(table => \'{pend}\', workload => "{ORDERS_WL}", '
              "options => map('k', '1', 'min-block-rows', '2000', 'sample-rate', '0.5'))")
    first = catalog.load_table(pend).properties[P_PENDING_ID]
    d = call(ctx, f"CALL pando.system.describe_layout('{pend}')")
    assert any(r[0] == "pending" and first in r[4] for r in d.rows)
    rw = call(ctx, f"CALL pando.system.rewrite_data_files(table => '{pend}', strategy => 'pando', options => {ORDERS_OPTS})")
    assert any(f"pending layout {first} not applied: learning options differ from optimize_layout's (k)" in n
               for n in rw.notes), rw.notes
    assert P_PENDING_ID not in catalog.load_table(pend).properties
    call(ctx, f'CALL pando.system.optimize_layout(table => \'{pend}\', workload => "{ORDERS_WL}", options => {ORDERS_OPTS})')
    second = catalog.load_table(pend).properties[P_PENDING_ID]
    rw = call(ctx, f"CALL pando.system.rewrite_data_files(table => '{pend}', strategy => 'pando', relearn => true, "
                   f"options => {ORDERS_OPTS})")
    assert f"pending layout {second} from optimize_layout superseded and removed" in rw.notes
    assert not any(n.startswith("applied pending") for n in rw.notes)


def test_workload_from_an_iceberg_query_log_with_since(ctx, pend, spark):
    spark.sql("DROP TABLE IF EXISTS ops.qlog")
    spark.sql("CREATE TABLE ops.qlog (text STRING, timestamp TIMESTAMP, weight DOUBLE) USING iceberg")
    spark.sql(f"""INSERT INTO ops.qlog VALUES
        ("SELECT * FROM ops.pend WHERE o_orderdate < date '1993-06-01'", current_timestamp() - INTERVAL 2 HOURS, 3.0),
        ("SELECT * FROM ops.pend WHERE o_totalprice > 300000", current_timestamp() - INTERVAL 3 DAYS, 1.0),
        ("SELECT * FROM ops.pend WHERE o_orderdate < date '1993-06-01'", current_timestamp() - INTERVAL 1 HOUR, NULL),
        ("SELECT * FROM ops.pend WHERE o_orderstatus = 'F'", current_timestamp() - INTERVAL 5 HOURS, 0.5)""")
    r = call(ctx, f"CALL pando.system.optimize_layout(table => '{pend}', workload_log => 'ops.qlog', since => '1 day', "
                  f"options => {ORDERS_OPTS})")
    weights = {row[8]: row[1] for row in r.rows}
    assert len(weights) == 2 and sorted(weights.values()) == [0.5, 4.0]
    assert all("o_totalprice" not in f for f in weights)  # three days old: outside the window
    with pytest.raises(ProcedureError, match="query log 'ops.qlog' has no queries since 30 min"):
        call(ctx, f"CALL pando.system.optimize_layout(table => '{pend}', workload_log => 'ops.qlog', since => '30 min')")
    with pytest.raises(ProcedureError, match="'since'/'until' select queries of a query log"):
        call(ctx, f"CALL pando.system.optimize_layout(table => '{pend}', workload => 'SELECT 1', since => '1 day')")
    with pytest.raises(ProcedureError, match="table 'ops.nolog' does not exist"):
        call(ctx, f"CALL pando.system.optimize_layout(table => '{pend}', workload_log => 'ops.nolog')")
    text = (ROOT / "procedures" / "relayout_from_query_log.sql").read_text()
    results = run_script(ctx, text, {"table": pend, "query_log": "ops.qlog", "since": "1 day", "k": "2",
                                     "min_block_rows": "2000"})
    assert sorted(r[1] for r in results[0][1].rows) == [0.5, 4.0]
    assert results[1][1].notes[0].startswith("applied pending layout ")
    health = _metrics(results[2][1])
    assert health["status"] == "ok" and health["files_outside_layout"] == "0"
    recorded = json.loads(_current_sidecar_of(ctx, pend).properties["pando.workload"])
    assert sorted(w for _, w in recorded) == [0.5, 4.0]  # the log's weights are what the layout records
    call(ctx, f"CALL pando.system.remove_layout('{pend}')")


def _current_sidecar_of(ctx, name):
    from pando_iceberg.procedures.builtin import current_sidecar

    return current_sidecar(ctx.table(name))


def test_spark_job_progress_counts_the_tasks_of_a_job(spark):
    import io
    import re

    from pando_iceberg.progress import Progress, spark_job_progress

    class TTY(io.StringIO):
        def isatty(self):
            return True

    out = TTY()
    with spark_job_progress(spark, Progress(out, min_interval=0), "count") as step:
        spark.range(0, 200_000, numPartitions=6).repartition(3).selectExpr("sum(id)").collect()
    last = re.split(r"[\r\n]", out.getvalue().rstrip("\n"))[-1]
    m = re.match(r"count \[#+\] (\d+)/(\d+) ", last)
    assert m and m.group(1) == m.group(2) and int(m.group(2)) >= 9, out.getvalue()  # 6 + 3 tasks at least
    assert re.search(r"count \[[#.]+\] [1-9]\d*/\d+ \S+ ETA \d", out.getvalue())  # counted while running
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None
    assert step.done == int(m.group(1))


# ---- the `pando` command in-process (same Spark session), every procedure -----------------------

@pytest.fixture
def pando(spark, lakehouse_cfg, monkeypatch, capsys):
    """`pando ...` through cli.main with the test session as its Spark (nothing else differs)."""
    import pando_iceberg.spark.session as session
    from pando_iceberg.cli import main

    monkeypatch.setattr(session, "start_spark", lambda cfg, **kw: spark)
    monkeypatch.setattr(session, "stop_spark", lambda s: None)

    def run(*args):
        code = main([f"--home={lakehouse_cfg.home}", *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def _table_rows(text):
    """Rows of the first human table in `text` (cells as printed)."""
    lines = [ln for ln in text.splitlines() if ln.startswith("| ")]
    return [[c.strip() for c in ln[2:-2].split(" | ")] for ln in lines[1:]]


def _cell(v):
    s = "NULL" if v is None else str(v)
    return s if len(s) <= 60 else s[:59] + "…"


def _same_numbers(pando, stmt):
    code, human, err = pando("sql", stmt)
    assert code == 0, err
    code, machine, err = pando("sql", "--json", stmt)
    assert code == 0, err
    doc = json.loads(machine)
    assert _table_rows(human) == [[_cell(r[c]) for c in doc["columns"]] for r in doc["rows"]]
    return doc


def test_every_procedure_through_pando_sql(pando, ctx, catalog, spark):
    spark.sql("CREATE TABLE IF NOT EXISTS ops.small USING iceberg AS SELECT * FROM tpch.nation")
    doc = _same_numbers(pando, "CALL pando.system.optimize_layout(table => 'ops.li', workload => "
                               f"'{ctx.workload_path}', options => map('k', '2', 'min-block-rows', '4000'))")
    notes = [v for k, v in doc.items() if k.startswith("note")]  # learning, one per template, the pending layout
    assert len(doc["rows"]) == 6 and "stored as pending layout" in notes[-1]
    code, out, err = pando("tables", "--json")
    listed = {r["table"]: r for r in json.loads(out)["rows"]}
    assert listed["ops.li"]["pending_layout"] == catalog.load_table("ops.li").properties["pando.pending-layout-id"]
    code, out, err = pando("sql", "--json", "CALL pando.system.rewrite_data_files(table => 'ops.li', strategy => 'pando', "
                                            "options => map('k', '2', 'min-block-rows', '4000'))")
    assert code == 0, err
    rw = json.loads(out)
    assert rw["rows"][0]["layout_id"] == catalog.load_table("ops.li").properties["pando.layout-id"]
    assert rw["note1"].startswith("applied pending layout")
    doc = _same_numbers(pando, "CALL pando.system.describe_layout(table => 'ops.li')")
    assert doc["rows"][0]["section"] == "layout" and rw["rows"][0]["layout_id"] in doc["rows"][0]["description"]
    doc = _same_numbers(pando, "CALL pando.system.explain_scan(table => 'ops.li', filter => \"l_shipdate < date '1993-01-01'\")")
    stages = {r["stage"]: r for r in doc["rows"]}
    assert stages["pando (∩ trees)"]["files"] < stages["all live files"]["files"]
    doc = _same_numbers(pando, "CALL pando.system.explain_scan(query => \"SELECT count(*) FROM ops.li l JOIN tpch.orders o "
                               "ON l.l_orderkey = o.o_orderkey WHERE l.l_shipdate < date '1993-01-01'\")")
    assert {r["table"] for r in doc["rows"]} >= {"ops.li"}
    doc = _same_numbers(pando, "CALL pando.system.layout_health(table => 'ops.li')")
    assert {r["metric"]: r["value"] for r in doc["rows"]}["status"] == "ok"
    code, out, err = pando("sql", "--json", "CALL pando.system.rewrite_data_files(table => 'ops.small', strategy => 'binpack', "
                                            "options => map('min-input-files', '1', 'rewrite-all', 'true'))")
    assert code == 0, err and "rewritten_data_files_count" in json.loads(out)["columns"]
    spark_query = _same_numbers(pando, "SELECT count(*) AS n FROM ops.li WHERE l_shipdate < date '1993-01-01'")
    assert spark_query["rows"][0]["n"] > 0 and "skipped" in spark_query["note1"]
    code, out, err = pando("sql", "--json", "CALL pando.system.remove_layout(table => 'ops.small')")
    assert code == 0 and json.loads(out)["rows"] == [{"layout_id": None, "sidecar_deleted": False}]


def test_runbook_through_pando_run(pando, ctx):
    code, out, err = pando("run", "--json", str(ROOT / "procedures" / "health_check.sql"), "--var", "table=ops.li",
                           "--var", "max_rows_outside=0.9", "--var", "max_efficiency_loss=5")
    assert code == 0, err
    docs = json.loads(out)
    assert [d["columns"][0] for d in docs] == ["metric", "table"]
    assert {r["metric"]: r["value"] for r in docs[0]["rows"]}["action"] == "none (healthy)"
    code, out, err = pando("run", str(ROOT / "procedures" / "health_check.sql"))
    assert code == 2 and "variable(s) max_efficiency_loss, max_rows_outside, table not defined" in err


@pytest.mark.parametrize("stmt, message", [
    ("CALL pando.system.nope()",
     "unknown procedure pando.system.nope; valid procedures: advise(table STRING, workload STRING (optional)"),
    ("CALL pando.system.explain_scan(tabel => 'x')", "explain_scan: unknown argument 'tabel'; valid arguments: table STRING"),
    ("CALL pando.system.layout_health(table => 42)", "layout_health: argument 'table' must be STRING, got int 42"),
    ("CALL pando.system.layout_health(table => 'ops.li', relayout => 'yes')", "argument 'relayout' must be BOOLEAN"),
    ("CALL pando.system.describe_layout()", "describe_layout: missing required argument 'table' (STRING); signature"),
    ("CALL pando.system.describe_layout(table => 'ops.none')", "table 'ops.none' does not exist; tables in catalog 'lake': "),
    ("CALL pando.system.describe_layout(table => 'ops.li'", "cannot parse"),
    ("CALL pando.system.describe_layout", "no argument list; expected CALL pando.system.<procedure>(name => value"),
    ("CALL pando.system.describe_layout('ops.li') LIMIT 1", "expected CALL pando.system.<procedure>"),
    ("CALL pando.system.describe_layout(table => l_shipdate)", "is not a literal; accepted: 'string', number"),
    ("CALL pando.system.rewrite_data_files(table => 'ops.li', strategy => 'pando', options => map('k', 'two'))",
     "option 'k' must be an integer, got 'two'"),
    ("CALL pando.system.optimize_layout(table => 'ops.li', workload_log => '/nonexistent/q.jsonl')", "does not exist"),
    ("CALL pando.system.optimize_layout(table => 'ops.li', workload_log => 'ops.li', since => 'yesterday')",
     "since 'yesterday' is not a time: accepted an ISO-8601 instant"),
])
def test_pando_sql_argument_errors_exit_2_with_the_documented_message(pando, stmt, message):
    code, out, err = pando("sql", stmt)
    assert code == 2, (code, out, err)
    assert err.startswith("pando: error: ") and message in err and "Traceback" not in err
    assert out == ""
