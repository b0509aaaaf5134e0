"""What planning through ``pando serve`` costs over planning in-process (warm, the same queries),
and the throughput of 8 concurrent clients × 200 plans with no error and no wrong answer.

Slow (excluded by ``-m 'not slow'``); prints its numbers::

    python -m pytest tests/serve/test_latency.py -m slow -s
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from pyiceberg.catalog.rest.scan_planning import PlanTableScanRequest

import pando_iceberg

pytestmark = pytest.mark.slow

REPEATS, CLIENTS, PLANS_PER_CLIENT = 30, 8, 200


def _median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


@pytest.fixture(scope="module")
def default_client(table, make_client):
    """A server with the default options (every plan answered inline: one round trip)."""
    from pando_iceberg.serve import ServerThread

    with ServerThread(table.catalog) as server:
        yield make_client(server.uri)


def test_server_planning_overhead_and_throughput(table, default_client, scan_api):
    client = default_client
    filters = list(scan_api.PYICEBERG_FILTERS)
    rows = []
    for flt in filters:
        request = PlanTableScanRequest(filter=flt)
        local = lambda f=flt: pando_iceberg.scan(table, row_filter=f).plan_files()  # noqa: E731
        remote = lambda r=request: client.plan_scan(("db", "t"), r)  # noqa: E731
        local(), remote()  # warm: manifests, layout, metadata cached on both sides
        rows.append((str(flt), len(remote()), _median_ms(local, REPEATS), _median_ms(remote, REPEATS)))
    print(f"\n{'filter':60} files  in-process ms  server ms  overhead ms")
    for name, files, lo, re in rows:
        print(f"{name[:60]:60} {files:5d} {lo:13.2f} {re:10.2f} {re - lo:11.2f}")
    overhead = statistics.median(re - lo for _, _, lo, re in rows)
    print(f"median overhead per plan: {overhead:.2f} ms")

    want = [sorted(t.file.file_path for t in pando_iceberg.scan(table, row_filter=f).plan_files()) for f in filters]

    def run(c: int) -> tuple[int, int]:
        from pyiceberg.catalog.rest import RestCatalog

        rest = RestCatalog("pando", uri=client.uri, **{"scan-planning-mode": "server"})
        errors = wrong = 0
        for i in range(PLANS_PER_CLIENT):
            k = (c + i) % len(filters)
            try:
                got = sorted(t.file.file_path for t in rest.plan_scan(("db", "t"), PlanTableScanRequest(
                    filter=filters[k])))
            except Exception:
                errors += 1
                continue
            wrong += got != want[k]
        return errors, wrong

    t0 = time.perf_counter()
    with ThreadPoolExecutor(CLIENTS) as pool:
        results = list(pool.map(run, range(CLIENTS)))
    seconds = time.perf_counter() - t0
    errors, wrong = sum(e for e, _ in results), sum(w for _, w in results)
    print(f"{CLIENTS} clients x {PLANS_PER_CLIENT} plans: {CLIENTS * PLANS_PER_CLIENT / seconds:.0f} plans/s "
          f"({seconds:.1f} s), {errors} errors, {wrong} wrong answers")
    assert errors == 0 and wrong == 0
    assert overhead <= 20, f"server planning adds {overhead:.1f} ms per plan (median), more than 20 ms"
