"""Warm end-to-end Spark time of a finished ``pando bench`` run's held-out queries, per layout
(the question asked: do the selective held-out queries at SF 10 run faster in total than on the
z-order layout, warm, medians of 3?).

    PYTHONPATH=. .venv/bin/python benchmarks/warm_times.py --home H --report OUT/bench_tpch_sf10.json \\
        --layouts zorder,zorder-ranges,pando-k3 [--runs 3] [--selective 0.1] [--only-selective] [--templates 19,6]

Reuses the run's tables (every layout's namespace in ``--home``) and its queries (the report's
JSON). Per query, the layouts are timed back to back, each by the bench's own path
(``harness.execute_query``: Spark's own Iceberg scan for baselines, ``pando_iceberg.spark.sql``
for Pando, planning included): one untimed run, then the median of ``--runs``; results are
compared with the first layout's (same tolerance as the bench). A query is *selective* when
its matching rows are at most ``--selective`` of every laid-out table it filters (a lower bound
of at most 10 % of the table by default). Prints the sums per layout (all and selective queries),
the 1-minute load average before and after, and writes ``<report stem>_warm.json``.

Variants split a gain between the layout and the planner: ``zorder:planner`` reads z-order's
tables through Pando's planner (join pruning and row filters apply to tables without a layout),
``pando-k3:no-row-filters`` reads Pando's with row filters off, ``pando-k3:every-row-filter`` with a
row filter also where it repeats a join Spark makes first and broadcasts (what
``spark.join_order`` leaves out), ``pando-k3:one-row-group`` takes every chosen file for one row
group (``pruned.one_row_group_each``): the staging rule on a layout whose files record no split
offsets (written by an older rewrite), whose files of about b rows hold one row group each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--home", required=True)
    p.add_argument("--report", required=True, help="the bench run's JSON report")
    p.add_argument("--layouts", required=True,
                   help="comma-separated, as in the run (e.g. zorder,pando-k3); a suffix picks a variant: "
                        "'zorder:planner' reads the baseline through Pando's planner (join pruning and row "
                        "filters, no layout), 'pando-k3:no-row-filters' turns row filters off, "
                        "'pando-k3:one-row-group' takes every chosen file for one row group")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--selective", type=float, default=0.1)
    p.add_argument("--only-selective", action="store_true", help="time the selective queries only")
    p.add_argument("--templates", default="", help="comma-separated template numbers to time (default: all)")
    a = p.parse_args()

    from pando_iceberg.bench.harness import execute_query, same_rows
    from pando_iceberg.bench.workloads import qualify
    from pando_iceberg.catalog import load_catalog
    from pando_iceberg.config import load_config
    from pando_iceberg.spark import pruned
    from pando_iceberg.spark.join_order import RepeatedJoins
    from pando_iceberg.spark.session import start_spark

    report = json.loads(Path(a.report).read_text())
    templates = {int(t) for t in a.templates.split(",") if t.strip()}
    layouts = [x for x in a.layouts.split(",") if x]
    base = {x: x.split(":")[0] for x in layouts}  # the run's layout each variant reads
    variants = {x: x.split(":")[1] if ":" in x else "" for x in layouts}
    accepted = ("", "planner", "no-row-filters", "every-row-filter", "one-row-group")
    unknown = [x for x, v in variants.items() if v not in accepted]
    if unknown:
        raise SystemExit(f"unknown variants: {unknown}; accepted: {', '.join(':' + v for v in accepted if v)}")
    missing = [base[x] for x in layouts if base[x] not in report["layouts"]]
    if missing:
        raise SystemExit(f"layouts not in the report: {missing}; it has {sorted(report['layouts'])}")
    cfg = load_config(home=a.home)
    spark = start_spark(cfg, app_name="warm-times")
    catalog = load_catalog(cfg)
    rows_of = {L: {t: v["rows"] for t, v in report["layouts"][base[L]]["tables"].items()} for L in layouts}
    repeats = RepeatedJoins.why
    row_groups = pruned.one_row_group_each
    load0 = os.getloadavg()[0]
    t_start = time.time()
    out = []
    for i, q in enumerate(report["queries"], 1):
        filtered = {t: v for t, v in q["tables"].items() if v.get("filtered")}
        if not filtered:
            continue
        total = rows_of[layouts[0]]
        selective = all(v["matching_rows"] <= a.selective * total[t] for t, v in filtered.items())
        if a.only_selective and not selective:
            continue
        if templates and q["template"] not in templates:
            continue
        entry = {"template": q["template"], "selective": selective, "layouts": {}}
        reference = None
        for layout in layouts:
            sql = qualify(q["sql"], report["layouts"][base[layout]]["namespace"])
            pando = layout.startswith("pando") or variants[layout] == "planner"
            if variants[layout] == "no-row-filters":
                spark.conf.set("spark.sql.pando.rowFilter.maxKeys", "0")
            else:
                spark.conf.unset("spark.sql.pando.rowFilter.maxKeys")
            RepeatedJoins.why = (lambda self, table, join: None) if variants[layout] == "every-row-filter" else repeats
            pruned.one_row_group_each = (lambda plan: True) if variants[layout] == "one-row-group" else row_groups
            first = execute_query(spark, catalog, sql, pando)
            timed = [execute_query(spark, catalog, sql, pando) for _ in range(a.runs)]
            reference = first.rows if reference is None else reference
            entry["layouts"][layout] = {"median_s": statistics.median(e.seconds for e in timed),
                                        "seconds": [e.seconds for e in timed],
                                        "plan_s": statistics.median(e.plan_seconds for e in timed),
                                        "same_result": same_rows(reference, first.rows)}
        out.append(entry)
        print(f"[{i}/{len(report['queries'])}] Q{q['template']}{' (selective)' if selective else ''}: "
              + ", ".join(f"{L} {v['median_s']:.2f}s" for L, v in entry["layouts"].items()), flush=True)
    summary = {}
    for label, keep in (("all", lambda e: True), ("selective", lambda e: e["selective"])):
        chosen = [e for e in out if keep(e)]
        summary[label] = {"queries": len(chosen),
                          **{L: round(sum(e["layouts"][L]["median_s"] for e in chosen), 2) for L in layouts}}
    result = {"home": a.home, "report": a.report, "runs": a.runs, "selective": a.selective,
              "load_average": [load0, os.getloadavg()[0]], "wall_s": time.time() - t_start,
              "mismatches": sum(not v["same_result"] for e in out for v in e["layouts"].values()),
              "summary": summary, "queries": out}
    suffix = "_warm" + ("_q" + "_".join(str(t) for t in sorted(templates)) if templates else "")
    path = Path(a.report).with_name(Path(a.report).stem + suffix + ".json")
    path.write_text(json.dumps(result, indent=1))
    print(json.dumps({k: result[k] for k in ("summary", "mismatches", "load_average", "wall_s")}, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
