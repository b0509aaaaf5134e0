"""Bad requests get the REST ErrorModel (``{"error": {"message", "type", "code"}}``) with the
specification's status, and the server keeps serving after each one."""

from __future__ import annotations

import json

import pytest
import requests

T = "/v1/namespaces/db/tables/t"

# (kind, method, path, body (dict → JSON, str/bytes as they are), status, error type, text in the message)
BAD = [
    ("unknown table", "GET", "/v1/namespaces/db/tables/nope", None, 404, "NoSuchTableException", "nope"),
    ("unknown namespace", "GET", "/v1/namespaces/nope", None, 404, "NoSuchNamespaceException", "nope"),
    ("tables of an unknown namespace", "GET", "/v1/namespaces/nope/tables", None, 404, "NoSuchNamespaceException",
     "nope"),
    ("plan on an unknown table", "POST", "/v1/namespaces/db/tables/nope/plan", {}, 404, "NoSuchTableException",
     "nope"),
    ("plan body not JSON", "POST", f"{T}/plan", "{not json", 400, "BadRequestException", "PlanTableScanRequest"),
    ("filter of an unknown type", "POST", f"{T}/plan", {"filter": {"type": "frobnicate", "term": "qty"}}, 400,
     "BadRequestException", "filter"),
    ("filter on an unknown column", "POST", f"{T}/plan", {"filter": {"type": "lt", "term": "nope", "value": 3}}, 400,
     "BadRequestException", "nope"),
    ("filter literal of the wrong type", "POST", f"{T}/plan",
     {"filter": {"type": "eq", "term": "qty", "value": "many"}}, 400, "BadRequestException", "qty"),
    ("select an unknown column", "POST", f"{T}/plan", {"select": ["id", "nope"]}, 400, "BadRequestException", "nope"),
    ("unknown snapshot", "POST", f"{T}/plan", {"snapshot-id": 42}, 400, "BadRequestException", "no snapshot 42"),
    ("negative min-rows-requested", "POST", f"{T}/plan", {"min-rows-requested": -1}, 400, "BadRequestException",
     "min-rows-requested"),
    ("start-snapshot-id without end", "POST", f"{T}/plan", {"start-snapshot-id": 1}, 400, "BadRequestException",
     "end-snapshot-id"),
    ("case-sensitive not a boolean", "POST", f"{T}/plan", {"case-sensitive": "maybe"}, 400, "BadRequestException",
     "case-sensitive"),
    ("incremental scan", "POST", f"{T}/plan", {"start-snapshot-id": 1, "end-snapshot-id": 2}, 501,
     "NotImplementedException", "incremental"),
    ("unknown plan id", "GET", f"{T}/plan/nope", None, 404, "NoSuchPlanIdException", "nope"),
    ("cancel an unknown plan", "DELETE", f"{T}/plan/nope", None, 404, "NoSuchPlanIdException", "nope"),
    ("unknown plan task", "POST", f"{T}/tasks", {"plan-task": "nope"}, 404, "NoSuchPlanTaskException", "nope"),
    ("tasks without plan-task", "POST", f"{T}/tasks", {}, 400, "BadRequestException", "plan-task"),
    ("commit requirement failed", "POST", T,
     {"requirements": [{"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}],
      "updates": []}, 409, "CommitFailedException", "UUID"),
    ("commit of an unknown update", "POST", T, {"requirements": [], "updates": [{"action": "explode"}]}, 400,
     "BadRequestException", "CommitTableRequest"),
    ("namespace that exists", "POST", "/v1/namespaces", {"namespace": ["db"]}, 409, "AlreadyExistsException", "db"),
    ("namespace without a name", "POST", "/v1/namespaces", {"properties": {}}, 400, "BadRequestException",
     "namespace"),
    ("table that exists", "POST", "/v1/namespaces/db/tables",
     {"name": "t", "schema": {"type": "struct", "schema-id": 0, "fields": []}}, 409, "AlreadyExistsException", "t"),
    ("drop a namespace with tables", "DELETE", "/v1/namespaces/db", None, 409, "NamespaceNotEmptyException", "db"),
    ("rename an unknown table", "POST", "/v1/tables/rename",
     {"source": {"namespace": ["db"], "name": "nope"}, "destination": {"namespace": ["db"], "name": "x"}}, 404,
     "NoSuchTableException", "nope"),
    ("unknown route", "GET", "/v1/nothing/here", None, 404, "NoSuchEndpointException", "/v1/nothing/here"),
    ("method not allowed", "PUT", "/v1/config", None, 405, "MethodNotAllowedException", "PUT"),
    ("request too large", "POST", f"{T}/plan", {"select": ["x" * 100] * 1000}, 413, "RequestTooLargeException",
     "larger than"),
]


def _send(uri: str, method: str, path: str, body, headers: dict | None = None) -> requests.Response:
    data = body.encode() if isinstance(body, str) else json.dumps(body).encode() if body is not None else None
    return requests.request(method, uri + path, data=data, headers=headers or {}, timeout=60)


@pytest.mark.parametrize(("kind", "method", "path", "body", "status", "type_", "text"), BAD, ids=[b[0] for b in BAD])
def test_bad_request_gets_the_error_model(server, kind, method, path, body, status, type_, text):
    response = _send(server.uri, method, path, body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["code"], error["type"]) == (status, type_), error
    assert text.lower() in error["message"].lower(), error
    # the server keeps serving
    assert requests.get(f"{server.uri}/v1/config", timeout=60).status_code == 200
    assert requests.post(f"{server.uri}{T}/plan", json={}, timeout=60).json()["status"] == "completed"


def test_chunked_body_over_the_limit(server):
    """A body without Content-Length is counted as it arrives."""
    chunks = (b'{"select": [' + b'"xxxxxxxx",' * 1000 for _ in range(16))
    response = requests.post(f"{server.uri}{T}/plan", data=chunks, timeout=60)
    assert response.status_code == 413 and response.json()["error"]["type"] == "RequestTooLargeException"
    assert requests.get(f"{server.uri}/v1/config", timeout=60).status_code == 200


def test_bearer_token_on_every_route(table, make_client):
    from pyiceberg.exceptions import UnauthorizedError

    from pando_iceberg.serve import ServeOptions, ServerThread

    with ServerThread(table.catalog, ServeOptions(token="s3cret")) as server:
        for method, path in (("GET", "/v1/config"), ("GET", "/v1/namespaces"), ("POST", f"{T}/plan"),
                             ("HEAD", T), ("GET", "/v1/nothing")):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
                response = _send(server.uri, method, path, {} if method == "POST" else None, headers)
                assert response.status_code == 401, (method, path, headers)
                if method != "HEAD":
                    assert response.json()["error"]["type"] == "NotAuthorizedException"
        with pytest.raises(UnauthorizedError):
            make_client(server.uri)
        client = make_client(server.uri, token="s3cret")
        assert client.load_table("db.t").scan().to_arrow().num_rows == table.scan().to_arrow().num_rows
