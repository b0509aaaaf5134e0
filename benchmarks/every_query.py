"""Plain ``spark.sql(q)`` in an enabled session (the optimizer rule, ``spark/prune_rule.py``)
against the same query in a plain session on the same layout: files read, rows, warm time.

    PYTHONPATH=. .venv/bin/python benchmarks/every_query.py --home H [--sf 0.1] [--per-template 4] \\
        [--runs 3] [--templates 1,3,5,6,10,12,14,19] [--out benchmarks/results/every_query_sf0.1.json]

Loads TPC-H at ``--sf`` into namespace ``evq`` of ``--home`` (kept between runs), lays lineitem
out (k=2) on the training half of the templates' draws, and times the held-out half. Per query:
the files each laid-out table reads through ``pando_iceberg.spark.sql`` (its explain records) and
through the rule (its notes) must be the same, and the rows the same as the plain session's.
Then, interleaved per query, one untimed run in each session and the median of ``--runs``
``collect()`` of each (planning included: the rule plans inside Spark's optimizer). Prints the
medians of the per-query medians and the 1-minute load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

NS = "evq"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--home", required=True)
    p.add_argument("--sf", type=float, default=0.1)
    p.add_argument("--per-template", type=int, default=4)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--templates", default="1,3,5,6,10,12,14,19")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--out", default="")
    a = p.parse_args()

    import pando_iceberg
    import pando_iceberg.spark
    from pando_iceberg import LayoutOptions, PandoTable
    from pando_iceberg.bench.harness import same_rows
    from pando_iceberg.bench.workloads import qualify, tpch_split
    from pando_iceberg.catalog import load_catalog
    from pando_iceberg.config import load_config
    from pando_iceberg.spark import prune_rule
    from pando_iceberg.spark.session import start_spark, stop_spark
    from pando_iceberg.tpch import load_tpch

    cfg = load_config(home=Path(a.home), env={}, overrides={"spark": {"master": a.master, "driver_memory": "4g"}})
    spark = start_spark(cfg, app_name="every-query-bench")
    catalog = load_catalog(cfg)
    templates = [int(t) for t in a.templates.split(",") if t.strip()]
    train, test = tpch_split(a.per_template, seed=7, templates=templates)
    try:
        load_tpch(spark, a.sf, namespace=NS)
        if "pando.layout-id" not in catalog.load_table(f"{NS}.lineitem").properties:
            PandoTable(catalog, f"{NS}.lineitem", spark=spark).optimize.rewrite(
                [qualify(q, NS) for _, q in train], options=LayoutOptions(k=2))
        plain = spark.newSession()  # no rule
        pando_iceberg.enable(spark)
        load_before = os.getloadavg()[0]
        rows_out = []
        for template, q in test:
            sql = qualify(q, NS)
            with pando_iceberg.spark.sql(spark, sql, catalog=catalog) as df:
                kept = {t: (e.pando_files, e.total_files) for t, e in df.pando.explains.items()
                        if e.pando_files < e.iceberg_files}
            prune_rule.clear_notes(spark)
            got = spark.sql(sql).collect()
            said = prune_rule.notes(spark)
            want = plain.sql(sql).collect()
            same_files = all(any(s.startswith(f"{t}: read {n} of {m} files") for s in said)
                             for t, (n, m) in kept.items())
            times: dict[str, list[float]] = {"enabled": [], "plain": []}
            for _ in range(a.runs):
                for name, session in (("enabled", spark), ("plain", plain)):
                    t0 = time.perf_counter()
                    session.sql(sql).collect()
                    times[name].append(time.perf_counter() - t0)
            row = {"template": template, "same_rows": same_rows(got, want), "same_files": same_files,
                   "kept": kept, "rule_notes": said,
                   "enabled_s": statistics.median(times["enabled"]), "plain_s": statistics.median(times["plain"])}
            rows_out.append(row)
            print(f"Q{template}: enabled {row['enabled_s']:.3f}s plain {row['plain_s']:.3f}s "
                  f"rows {'=' if row['same_rows'] else 'DIFFER'} files {'=' if same_files else 'DIFFER'} {kept}",
                  flush=True)
        load_after = os.getloadavg()[0]
        summary = {
            "sf": a.sf, "queries": len(rows_out), "runs": a.runs, "templates": templates,
            "median_enabled_s": statistics.median(r["enabled_s"] for r in rows_out),
            "median_plain_s": statistics.median(r["plain_s"] for r in rows_out),
            "all_same_rows": all(r["same_rows"] for r in rows_out),
            "all_same_files": all(r["same_files"] for r in rows_out),
            "load_before": load_before, "load_after": load_after,
        }
        print(json.dumps(summary, indent=1))
        if a.out:
            Path(a.out).write_text(json.dumps({"summary": summary, "queries": rows_out}, indent=1, default=str))
    finally:
        stop_spark(spark)


if __name__ == "__main__":
    main()
