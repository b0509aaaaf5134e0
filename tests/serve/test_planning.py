"""Server-side scan planning through ``pando serve``: a pyiceberg ``RestCatalog`` client with
``scan-planning-mode=server`` reads the files ``pando_iceberg.scan`` keeps, fewer than Iceberg's
own plan on a laid-out table, and exactly the rows a plain pyiceberg scan returns."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pytest
import requests
from pyiceberg.catalog.rest.scan_planning import PlanTableScanRequest
from pyiceberg.expressions import AlwaysTrue, EqualTo, GreaterThanOrEqual, LessThan
from pyiceberg.table import ALWAYS_TRUE

import pando_iceberg


@pytest.fixture(scope="module")
def filters(scan_api):
    return [AlwaysTrue(), *scan_api.PYICEBERG_FILTERS, EqualTo("region", "latam"), LessThan("qty", 10)]


# The client side runs in its own interpreter with pyiceberg only: it never imports pando_iceberg.
CLIENT = r"""
import json, sys
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.rest.scan_planning import PlanTableScanRequest

uri, filters = sys.argv[1], json.loads(sys.argv[2])
table = RestCatalog("pando", uri=uri, **{"scan-planning-mode": "server"}).load_table("db.t")
out = []
for f in filters:
    scan = table.scan(row_filter=PlanTableScanRequest.model_validate({"filter": f}).filter)
    files = sorted(t.file.file_path for t in scan.plan_files())
    arrow = scan.to_arrow()
    out.append({"files": files, "rows": arrow.sort_by("id").to_pylist(), "pandas": len(scan.to_pandas()),
                "polars": scan.to_polars().height,
                "duckdb": scan.to_duckdb("t").execute("SELECT count(*) FROM t").fetchone()[0],
                "count": scan.count()})
assert not any(m.startswith("pando_iceberg") for m in sys.modules), "the client imported pando_iceberg"
print(json.dumps(out, default=str))
"""


def _rows(arrow: pa.Table) -> list[dict]:
    """Rows in id order as the client prints them (dates as text, NaN as the string 'nan')."""
    rows = arrow.sort_by("id").to_pylist() if arrow.num_rows else []
    return json.loads(json.dumps(rows, default=str).replace("NaN", '"nan"'))


def test_rest_client_reads_pandos_files_and_pyicebergs_rows(table, server, filters):
    payload = json.dumps([json.loads(PlanTableScanRequest(filter=f).model_dump_json(by_alias=True))["filter"]
                          for f in filters])
    proc = subprocess.run([sys.executable, "-c", CLIENT, server.uri, payload], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    answers = json.loads(proc.stdout.replace("NaN", '"nan"'))
    fewer = 0
    for flt, got in zip(filters, answers):
        want = table.scan(row_filter=flt).to_arrow()  # plain pyiceberg on the underlying catalog
        assert got["rows"] == _rows(want), str(flt)
        assert got["pandas"] == got["polars"] == got["duckdb"] == got["count"] == want.num_rows, str(flt)
        pando_files = sorted(t.file.file_path for t in pando_iceberg.scan(table, row_filter=flt).plan_files())
        iceberg_files = sorted(t.file.file_path for t in table.scan(row_filter=flt).plan_files())
        assert got["files"] == pando_files, str(flt)
        assert set(got["files"]) <= set(iceberg_files), str(flt)
        fewer += len(got["files"]) < len(iceberg_files)
    assert fewer >= 3, "the layout's trees pruned no file beyond Iceberg's min/max through the server"


def test_plan_files_match_in_process(table, client, filters):
    rest_table = client.load_table("db.t")
    for flt in filters:
        remote = rest_table.scan(row_filter=flt).plan_files()
        local = pando_iceberg.scan(table, row_filter=flt).plan_files()
        assert sorted(t.file.file_path for t in remote) == sorted(t.file.file_path for t in local), str(flt)
        by_path = {t.file.file_path: t for t in local}
        for task in remote:  # the data file's metadata travels as it is
            f, mine = task.file, by_path[task.file.file_path].file
            assert (f.record_count, f.file_size_in_bytes, f.spec_id) == (mine.record_count, mine.file_size_in_bytes,
                                                                         mine.spec_id)
            assert f.null_value_counts == mine.null_value_counts


def test_residuals_are_sent(client):
    tasks = list(client.load_table("db.t").scan(row_filter=GreaterThanOrEqual("qty", 40)).plan_files())
    assert tasks and all(t.residual == GreaterThanOrEqual("qty", 40) for t in tasks)  # unpartitioned: the filter
    assert all(t.residual == ALWAYS_TRUE for t in client.load_table("db.t").scan().plan_files())


def test_large_plans_answer_in_pages(table, server):
    """More tasks than a page (4 here): plan-task tokens, each page fetched with fetchScanTasks."""
    url = f"{server.uri}/v1/namespaces/db/tables/t"
    answer = requests.post(f"{url}/plan", json={}).json()
    assert answer["status"] == "completed" and answer["file-scan-tasks"] == [] and len(answer["plan-tasks"]) >= 2
    paths = []
    for token in answer["plan-tasks"]:
        page = requests.post(f"{url}/tasks", json={"plan-task": token})
        assert page.status_code == 200, page.text
        tasks = page.json()["file-scan-tasks"]
        assert 0 < len(tasks) <= 4
        paths += [t["data-file"]["file-path"] for t in tasks]
    assert sorted(paths) == sorted(t.file.file_path for t in table.scan().plan_files())
    # fetchPlanningResult gives the same answer; cancelPlanning forgets the plan and its pages
    again = requests.get(f"{url}/plan/{answer['plan-id']}")
    assert again.status_code == 200 and again.json()["plan-tasks"] == answer["plan-tasks"]
    assert requests.delete(f"{url}/plan/{answer['plan-id']}").status_code == 204
    assert requests.get(f"{url}/plan/{answer['plan-id']}").status_code == 404
    gone = requests.post(f"{url}/tasks", json={"plan-task": answer["plan-tasks"][0]})
    assert gone.status_code == 404 and gone.json()["error"]["type"] == "NoSuchPlanTaskException"


def test_min_rows_requested_prunes_like_a_limit(table, server):
    """min-rows-requested is the scan's LIMIT: with no filter the fewest files holding that many
    rows are enough (LIMIT pruning), and they hold at least that many rows."""
    url = f"{server.uri}/v1/namespaces/db/tables/t/plan"
    limited = requests.post(url, json={"min-rows-requested": 10}).json()
    tasks = limited["file-scan-tasks"] or [t for tok in limited["plan-tasks"] for t in requests.post(
        url.replace("/plan", "/tasks"), json={"plan-task": tok}).json()["file-scan-tasks"]]
    assert 1 <= len(tasks) < len(list(table.scan().plan_files()))
    assert sum(t["data-file"]["record-count"] for t in tasks) >= 10


def test_projection_and_snapshot(table, client):
    rest_table = client.load_table("db.t")
    got = rest_table.scan(row_filter=LessThan("qty", 10), selected_fields=("id", "qty")).to_arrow()
    want = table.scan(row_filter=LessThan("qty", 10), selected_fields=("id", "qty")).to_arrow()
    assert got.column_names == ["id", "qty"] and got.sort_by("id").equals(want.sort_by("id"))
    first = table.history()[0].snapshot_id
    old = rest_table.scan(snapshot_id=first)
    assert sorted(t.file.file_path for t in old.plan_files()) == sorted(
        t.file.file_path for t in table.scan(snapshot_id=first).plan_files())
    assert old.to_arrow().num_rows == table.scan(snapshot_id=first).to_arrow().num_rows


def test_a_table_without_layout_gets_icebergs_plan(table, client, scan_api):
    """A table the server has no layout for: Iceberg's own plan (same files as plain pyiceberg)."""
    rest_table = client.create_table("db.plain", scan_api.ARROW)
    try:
        rows = table.scan(row_filter=LessThan("id", 3000)).to_arrow()
        rest_table.append(rows.slice(0, 1500))
        rest_table.append(rows.slice(1500))
        rest_table = client.load_table("db.plain")
        direct = table.catalog.load_table("db.plain")
        for flt in (LessThan("id", 100), GreaterThanOrEqual("qty", 40), AlwaysTrue()):
            remote = sorted(t.file.file_path for t in rest_table.scan(row_filter=flt).plan_files())
            assert remote == sorted(t.file.file_path for t in direct.scan(row_filter=flt).plan_files())
            want = direct.scan(row_filter=flt).to_arrow().num_rows
            assert rest_table.scan(row_filter=flt).to_arrow().num_rows == want
    finally:
        client.drop_table("db.plain")


def test_client_planning_still_works(server, table, make_client):
    """A client that plans itself (scan-planning-mode=client) reads Iceberg's plan through the catalog."""
    c = make_client(server.uri, **{"scan-planning-mode": "client"})
    assert not c.supports_server_side_planning()
    rest_table = c.load_table("db.t")
    assert len(list(rest_table.scan().plan_files())) == len(list(table.scan().plan_files()))


def test_a_planning_failure_answers_icebergs_plan(table, client, monkeypatch, caplog):
    """Pando's planner raising (here: a planning setting with a bad value) never fails the scan and
    never loses a row: the answer is Iceberg's own plan."""
    flt = EqualTo("region", "latam")
    iceberg_files = sorted(t.file.file_path for t in table.scan(row_filter=flt).plan_files())
    assert len(list(pando_iceberg.scan(table, row_filter=flt).plan_files())) < len(iceberg_files)
    monkeypatch.setenv("PANDO_JOIN_PRUNING_MAX_DIMENSION_ROWS", "lots")
    rest_scan = client.load_table("db.t").scan(row_filter=flt)
    assert sorted(t.file.file_path for t in rest_scan.plan_files()) == iceberg_files
    assert rest_scan.to_arrow().num_rows == table.scan(row_filter=flt).to_arrow().num_rows > 0
    assert "answering Iceberg's plan" in caplog.text and "PANDO_JOIN_PRUNING_MAX_DIMENSION_ROWS" in caplog.text
