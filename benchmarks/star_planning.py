"""Planning time Pando adds to star-join queries, beside Iceberg's own planning of
the same query: for each held-out star query, the fact table's filter (join filters included)
is planned by ``plan_scan`` with Pando (layout trees + join pruning, key sets read through
pyiceberg and cached) and without (``use_layout=False``: pyiceberg's ``plan_files`` only).

    PYTHONPATH=. .venv/bin/python benchmarks/star_planning.py --home H --namespace star_sf1_pando_k3

Cold = the first plan of a query (key sets and uniqueness read), warm = the median of the
repeats (process-wide caches hit). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--home", required=True)
    p.add_argument("--namespace", required=True)
    p.add_argument("--per-template", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()

    from pando_iceberg.bench.workloads import star_split
    from pando_iceberg.catalog import load_catalog
    from pando_iceberg.config import load_config
    from pando_iceberg.planner import plan_scan
    from pando_iceberg.planner.uniqueness import uniqueness_oracle
    from pando_iceberg.workload import parse_workload

    catalog = load_catalog(load_config(home=a.home))
    ns = a.namespace
    names = ("sales", "dates", "stores", "regions", "customers", "products")
    schemas = {f"{ns}.{t}": catalog.load_table(f"{ns}.{t}").schema().as_arrow() for t in names}
    _, test = star_split(a.per_template, a.seed, namespace=ns)
    fact = catalog.load_table(f"{ns}.sales")
    rows = []
    for template, sql in test:
        t0 = time.perf_counter()
        tf = parse_workload([sql], schemas, unique=uniqueness_oracle(catalog)).queries[0].filters[f"{ns}.sales"]
        parse_s = time.perf_counter() - t0
        cold = plan_scan(fact, tf)
        warm, iceberg = [], []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            plan_scan(fact, tf, use_layout=False)
            iceberg.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            plan = plan_scan(fact, tf)
            warm.append(time.perf_counter() - t0)
        ex = plan.explain
        rows.append({"template": template, "parse_s": parse_s, "cold_s": cold.explain.seconds,
                     "pando_s": statistics.median(warm), "iceberg_s": statistics.median(iceberg),
                     "files": ex.pando_files, "iceberg_files": ex.iceberg_files, "join_pruned": ex.join_files_pruned,
                     "rows_read": ex.pando_rows, "total_rows": ex.total_rows,
                     "joins": [(j["source"], j["keys"], j["files_pruned"]) for j in cold.explain.joins]})
    added = [r["pando_s"] - r["iceberg_s"] for r in rows]
    added_cold = [r["cold_s"] - r["iceberg_s"] for r in rows]
    print(json.dumps({"queries": len(rows), "median_iceberg_plan_s": statistics.median(r["iceberg_s"] for r in rows),
                      "median_added_warm_s": statistics.median(added), "median_added_cold_s": statistics.median(added_cold),
                      "median_parse_s": statistics.median(r["parse_s"] for r in rows),
                      "mean_fraction_rows_read": statistics.mean(r["rows_read"] / max(1, r["total_rows"]) for r in rows),
                      "per_query": rows}, indent=1))


if __name__ == "__main__":
    main()
