"""The advisor's predictions against a ``pando bench`` run's measurements: for each table the run
laid out, ``advise`` on the table as loaded (the run's training workload, its block rows, the
sort orders its sort and z-order layouts used) predicts MB per held-out query for the table as
is, Iceberg's sort and z-order and Pando; the run measured the same layouts on its held-out
queries (bytes per scan of the table). Prints one row per table and layout, predicted and
measured, and the advice's seconds.

    PYTHONPATH=. .venv/bin/python benchmarks/advisor_check.py --home H --out OUT [--master 'local[2]'] [--json F]

``OUT`` is the run's ``--out`` (its checkpoint: options, layouts and measured queries; a run that
is still going is compared on the queries measured so far). The predictions are on the
templates' validation draws, the measurements on the run's held-out draws: the same templates,
other literals.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--home", required=True, help="the run's --home")
    p.add_argument("--out", required=True, help="the run's --out (holds checkpoint/)")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--json", help="also write the rows here")
    a = p.parse_args()

    from pando_iceberg import PandoTable
    from pando_iceberg.bench.checkpoint import Checkpoint
    from pando_iceberg.bench.datasets import dataset_namespace
    from pando_iceberg.bench.harness import LAID_OUT, BenchOptions, split_for
    from pando_iceberg.bench.workloads import qualify
    from pando_iceberg.catalog import load_catalog
    from pando_iceberg.config import load_config
    from pando_iceberg.spark.session import spark_session
    from pando_iceberg.table import LayoutOptions

    saved = json.loads(Path(a.out, "checkpoint", "options.json").read_text())
    cp = Checkpoint(BenchOptions(**{**saved, "out": a.out}), resume=True)
    layouts = cp.measured_layouts()
    opts = BenchOptions(**{**saved, "layouts": layouts, "out": a.out})
    measured = cp.queries(layouts)
    train, _ = split_for(opts)
    source_ns = opts.namespace or dataset_namespace(opts.dataset, opts.sf)
    workload = [qualify(sql, source_ns) for _, sql in train]
    k = max([int(x.split("k")[-1]) for x in layouts if x.startswith("pando-k")] or [3])
    options = LayoutOptions.from_map({"k": str(k), "min-block-rows": str(opts.b), "sample-rate": str(opts.sample_rate),
                                      "seed": str(opts.seed), **opts.pando_options})
    cfg = load_config(home=a.home, overrides={"spark": {"master": a.master}})
    catalog = load_catalog(cfg)
    rows = []
    with spark_session(cfg) as spark:
        for t in LAID_OUT[opts.dataset]:
            orders = {x: (cp.layout(x) or {}).get("tables", {}).get(t, {}).get("sort_order")
                      for x in layouts if x in ("sort", "zorder", "zorder-ranges")}
            started = time.time()
            advice = PandoTable(catalog, f"{source_ns}.{t}", spark=spark).optimize.advise(
                workload, options=options, sort_orders=[o for o in orders.values() if o and "range ids" not in o])
            seconds = time.time() - started
            by_spec = {c.spec: c for c, _ in advice.ranked}
            kept = next((c for c, _ in advice.ranked if c.strategy == "pando"), None)
            for x in layouts:
                if x == "arrival":
                    predicted = next(c for c, _ in advice.ranked if c.strategy == "none")
                elif x.startswith("pando"):
                    predicted = kept
                else:
                    predicted = by_spec.get(orders.get(x) or "")
                # per scan of the table: a query that reads it twice (a self-join, a subquery) counts twice
                reads = [m["bytes"] / max(1, m["scans"]) for q in measured.values()
                         if t in q["tables"] and x in q["layouts"] and t in q["layouts"][x]["tables"]
                         for m in [q["layouts"][x]["tables"][t]]]
                got = sum(reads) / len(reads) / 1e6 if reads else None
                want = predicted.mb_per_query if predicted is not None else None
                # the rewrite the run timed: Pando learning 1..k trees under 'validate', Iceberg's sort as predicted
                done = (cp.layout(x) or {}).get("tables", {}).get(t, {}).get("rewrite_seconds")
                if x.startswith("pando-k"):
                    pk = int(x.split("k")[-1])
                    want_s = advice.pando_rewrite_seconds(pk, validate=options.to_rewrite_options().k_selection
                                                          == "validate")
                else:
                    want_s = predicted.rewrite_seconds if predicted is not None and x != "arrival" else None
                rows.append({"table": t, "layout": x, "candidate": predicted.name if predicted else None,
                             "predicted_mb": want, "measured_mb": got, "queries": len(reads),
                             "error": (want - got) / got if want is not None and got else None,
                             "advised": predicted is not None and predicted is advice.advised,
                             "predicted_rewrite_seconds": want_s, "measured_rewrite_seconds": done,
                             "rewrite_error": (want_s - done) / done if want_s is not None and done else None,
                             "advice_seconds": round(seconds, 1), "advice_parts": advice.parts})
    print("| table | layout | advisor's candidate | predicted MB / query | measured MB / query | error | advised "
          "| predicted rewrite s | measured rewrite s | error |")
    print("|---|---|---|---|---|---|---|---|---|---|")

    def pct(x):
        return "—" if x is None else f"{x:+.0%}"

    def num(x, f="{:.2f}"):
        return "—" if x is None else f.format(x)

    for r in rows:
        meas = "—" if r["measured_mb"] is None else f"{r['measured_mb']:.2f} ({r['queries']} queries)"
        print(f"| {r['table']} | {r['layout']} | {r['candidate'] or '—'} | {num(r['predicted_mb'])} | {meas} | "
              f"{pct(r['error'])} | {'yes' if r['advised'] else ''} | {num(r['predicted_rewrite_seconds'], '{:.1f}')} "
              f"| {num(r['measured_rewrite_seconds'], '{:.1f}')} | {pct(r['rewrite_error'])} |")
    for t in dict.fromkeys(r["table"] for r in rows):
        got = [r for r in rows if r["table"] == t and r["measured_mb"] is not None]
        best = min(got, key=lambda r: r["measured_mb"], default=None)
        advised = next((r for r in got if r["advised"]), None)
        if best is not None:
            print(f"{t}: the advised candidate reads {num(advised and advised['measured_mb'])} MB measured, the best "
                  f"measured layout ({best['layout']}) {best['measured_mb']:.2f}"
                  + ("" if advised else " (the advised candidate is not among the measured layouts)"))
    seconds = {r["table"]: r["advice_seconds"] for r in rows}
    print("advice seconds: " + ", ".join(f"{t} {s}" for t, s in seconds.items()))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
