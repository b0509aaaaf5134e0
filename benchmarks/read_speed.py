"""Scan speed of the same rows in differently written Iceberg tables: whether query time follows
the bytes a layout saves, or how the files were written.

    PYTHONPATH=. .venv/bin/python benchmarks/read_speed.py --home H --tables ns1.lineitem,ns2.lineitem [--runs 5]

Every table is read by plain ``spark.sql`` (Spark's own Iceberg scan, no Pando planning), so
what differs is only how the files were written (writer, encodings, row groups, file count).
Each query runs once untimed on every table, then ``--runs`` times per table, interleaved
(A, B, A, B, ...) so that a slowly varying load hits every table alike; the median is reported
with the files and bytes of the table, the 1-minute load average before and after, and the
results compared across tables (integers exactly, floats within a relative 1e-9).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time

QUERIES = {
    # Q1's shape without its filter: four numeric columns and two strings, grouped.
    "agg4": "SELECT l_returnflag, l_linestatus, count(*), sum(l_quantity), sum(l_extendedprice * (1 - l_discount)), "
            "max(l_shipdate) FROM {t} GROUP BY l_returnflag, l_linestatus ORDER BY 1, 2",
    # One key column: what a join's probe side reads.
    "keys": "SELECT count(*), sum(l_orderkey), sum(l_partkey) FROM {t}",
    # Every column, strings included.
    "all": "SELECT count(*), sum(length(l_comment)), sum(length(l_shipinstruct)), sum(l_suppkey), "
           "sum(l_tax), max(l_receiptdate), max(l_commitdate), max(l_shipmode), sum(l_linenumber) FROM {t}",
}


def _same(a: list, b: list) -> bool:
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b):
        for x, y in zip(ra, rb):
            if isinstance(x, float) or isinstance(y, float):
                if not math.isclose(float(x), float(y), rel_tol=1e-9):
                    return False
            elif x != y:
                return False
    return True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--home", required=True)
    p.add_argument("--tables", required=True, help="comma-separated table names (namespace.table)")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--queries", default=",".join(QUERIES))
    a = p.parse_args()

    from pando_iceberg.config import load_config
    from pando_iceberg.spark.session import start_spark

    cfg = load_config(home=a.home)
    spark = start_spark(cfg, app_name="read-speed")
    tables = [t for t in a.tables.split(",") if t]
    info = {}
    for t in tables:
        r = spark.sql(f"SELECT count(*), sum(file_size_in_bytes), sum(record_count) FROM {t}.files").collect()[0]
        info[t] = {"files": int(r[0]), "bytes": int(r[1]), "rows": int(r[2])}
    load0 = os.getloadavg()[0]
    out = {"tables": info, "queries": {}}
    for name in [q for q in a.queries.split(",") if q]:
        sql = QUERIES[name]
        results = {t: spark.sql(sql.format(t=t)).collect() for t in tables}  # warm-up, and the results
        first = results[tables[0]]
        same = {t: _same([tuple(r) for r in first], [tuple(r) for r in results[t]]) for t in tables}
        times: dict[str, list[float]] = {t: [] for t in tables}
        for _ in range(a.runs):
            for t in tables:
                t0 = time.perf_counter()
                spark.sql(sql.format(t=t)).collect()
                times[t].append(time.perf_counter() - t0)
        out["queries"][name] = {t: {"median_s": statistics.median(v), "runs_s": v, "same_result": same[t]}
                                for t, v in times.items()}
        print(name, {t: round(statistics.median(v), 3) for t, v in times.items()}, "same:", same, flush=True)
    out["load_average"] = [load0, os.getloadavg()[0]]
    print(json.dumps(out, indent=1))
    spark.stop()


if __name__ == "__main__":
    main()
