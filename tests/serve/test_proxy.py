"""``pando serve --upstream``: a proxy in front of another REST catalog (here a second
``pando serve``): everything is forwarded unchanged except scan planning, which the proxy answers
with Pando's planner from the table metadata the upstream returns."""

from __future__ import annotations

import pytest
import requests
from pyiceberg.exceptions import NoSuchTableError

import pando_iceberg


def _rows(arrow) -> list[tuple]:
    """Rows in id order, NaN spelled out (NaN != NaN)."""
    return [tuple("NaN" if isinstance(v, float) and v != v else v for v in row.values())
            for row in arrow.sort_by("id").to_pylist()]


@pytest.fixture(scope="module")
def proxy(server):
    from pando_iceberg.serve import ServerThread
    from pando_iceberg.serve.proxy import create_proxy_app

    with ServerThread(app=create_proxy_app(server.uri)) as running:
        yield running


def test_proxy_plans_with_pando_and_forwards_the_rest(table, server, proxy, scan_api, make_client):
    client = make_client(proxy.uri)
    assert client.supports_server_side_planning()
    assert ("db",) in client.list_namespaces() and ("db", "t") in client.list_tables("db")
    rest_table = client.load_table("db.t")
    upstream_plans = len(server.app.state.plans)
    fewer = 0
    for flt in scan_api.PYICEBERG_FILTERS:
        got = sorted(t.file.file_path for t in rest_table.scan(row_filter=flt).plan_files())
        assert got == sorted(t.file.file_path for t in pando_iceberg.scan(table, row_filter=flt).plan_files())
        fewer += len(got) < len(list(table.scan(row_filter=flt).plan_files()))
        want = table.scan(row_filter=flt).to_arrow()
        assert _rows(rest_table.scan(row_filter=flt).to_arrow()) == _rows(want), str(flt)
    assert fewer >= 3
    assert len(server.app.state.plans) == upstream_plans, "the upstream planned: the proxy forwarded planning"
    assert len(proxy.app.state.plans) > 0


def test_proxy_forwards_writes_and_errors(table, proxy, scan_api, make_client):
    client = make_client(proxy.uri)
    created = client.create_table("db.via_proxy", scan_api.ARROW)
    try:
        created.append(table.scan(limit=100).to_arrow().cast(scan_api.ARROW))  # a commit through the proxy
        assert table.catalog.load_table("db.via_proxy").scan().to_arrow().num_rows == 100  # it reached upstream
        assert client.load_table("db.via_proxy").scan().to_arrow().num_rows == 100
    finally:
        client.drop_table("db.via_proxy")
    with pytest.raises(NoSuchTableError):
        client.load_table("db.nope")
    missing = requests.post(f"{proxy.uri}/v1/namespaces/db/tables/nope/plan", json={}, timeout=60)
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "NoSuchTableException"
    bad = requests.post(f"{proxy.uri}/v1/namespaces/db/tables/t/plan",
                        json={"filter": {"type": "lt", "term": "nope", "value": 1}}, timeout=60)
    assert bad.status_code == 400 and "nope" in bad.json()["error"]["message"]
