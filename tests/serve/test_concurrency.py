"""Concurrent clients of one ``pando serve``: each in its own thread with its own pyiceberg
``RestCatalog``, planning the same laid-out table with different filters, get the files the
in-process planner keeps, with no error."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pando_iceberg

CLIENTS, PLANS_PER_CLIENT = 4, 30


def test_concurrent_clients_zero_errors(table, server, scan_api, make_client):
    filters = list(scan_api.PYICEBERG_FILTERS)
    want = [sorted(t.file.file_path for t in pando_iceberg.scan(table, row_filter=f).plan_files()) for f in filters]

    def client_run(c: int) -> list[str]:
        rest_table = make_client(server.uri).load_table("db.t")
        problems = []
        for i in range(PLANS_PER_CLIENT):
            k = (c + i) % len(filters)
            try:
                got = sorted(t.file.file_path for t in rest_table.scan(row_filter=filters[k]).plan_files())
            except Exception as e:
                problems.append(f"client {c} plan {i}: {type(e).__name__}: {e}")
                continue
            if got != want[k]:
                problems.append(f"client {c} plan {i} ({filters[k]}): {len(got)} files, expected {len(want[k])}")
        return problems

    with ThreadPoolExecutor(CLIENTS) as pool:
        problems = [p for ps in pool.map(client_run, range(CLIENTS)) for p in ps]
    assert problems == []
    assert 0 < len(server.app.state.plans) <= 256  # the plan store stays bounded
