"""Fixtures of the ``pando serve`` tests: the server in-process (uvicorn in a thread on a free
loopback port) over a real pyiceberg SQL catalog, and pyiceberg ``RestCatalog`` clients of it.

The laid-out table is the one the scan API's tests build without Spark
(``tests/planner/test_scan_api.py``'s ``table`` fixture: a k=2 layout learned on the data, one
data file per block, its sidecar and pointer, and one file appended after it), loaded from that
file so both suites test the same layout path."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from pyiceberg.catalog.rest import RestCatalog


def _scan_api_tests():
    path = Path(__file__).resolve().parents[1] / "planner" / "test_scan_api.py"
    spec = importlib.util.spec_from_file_location("serve_fixture_scan_api", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCAN_API = _scan_api_tests()
table = SCAN_API.table  # the laid-out table (module scope): SqlCatalog "scanapi", table db.t


@pytest.fixture(scope="module")
def server(table):
    """``pando serve`` over the laid-out table's catalog; small pages so paging is exercised."""
    from pando_iceberg.serve import ServeOptions, ServerThread

    with ServerThread(table.catalog, ServeOptions(tasks_per_page=4, max_request_bytes=64 * 1024)) as running:
        yield running


@pytest.fixture(scope="session")
def scan_api():
    """The scan API tests' module: its schema (``ARROW``) and filters (``PYICEBERG_FILTERS``)."""
    return SCAN_API


def rest_client(uri: str, **properties: str) -> RestCatalog:
    return RestCatalog("pando", uri=uri, **{"scan-planning-mode": "server", **properties})


@pytest.fixture(scope="session")
def make_client():
    """``make_client(uri, **properties)``: a pyiceberg RestCatalog planning on the server."""
    return rest_client


@pytest.fixture(scope="module")
def client(server) -> RestCatalog:
    return rest_client(server.uri)
