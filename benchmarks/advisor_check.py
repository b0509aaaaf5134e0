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
other literals. ``--held-out``: the same advice also predicts on the run's held-out queries
themselves (same literals, each weighted 1 as the run's mean is), for the table as is and each of
Pando's candidates, and both predictions per template (``held_out`` in the JSON): what separates
an error of the draws from an error of the estimate (the advice's seconds then include these).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path
from typing import Any


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--home", required=True, help="the run's --home")
    p.add_argument("--out", required=True, help="the run's --out (holds checkpoint/)")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--json", help="also write the rows here")
    p.add_argument("--namespace", help="the run's source namespace when not <dataset>_sf<SF> "
                   "(star with --star-keys load-order: star_load_order_sf1)")
    p.add_argument("--held-out", action="store_true",
                   help="also predict on the run's held-out queries (same literals), per template")
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
    source_ns = a.namespace or opts.namespace or dataset_namespace(opts.dataset, opts.sf)
    k = max([pando_k(x) for x in layouts if x.startswith("pando-k")] or [3])
    options = LayoutOptions.from_map({"k": str(k), "min-block-rows": str(opts.b), "sample-rate": str(opts.sample_rate),
                                      "seed": str(opts.seed), **opts.pando_options})
    cfg = load_config(home=a.home, overrides={"spark": {"master": a.master}})
    catalog = load_catalog(cfg)
    rows = []
    held_rows: list[dict] = []
    with spark_session(cfg) as spark:
        if opts.dataset == "tpcds":  # its draws are made on the loaded data
            from pando_iceberg.bench.tpcds import bench_split

            train, _, _ = bench_split(spark, catalog, opts, source_ns)
        else:
            train, _ = split_for(opts)
        workload = [qualify(sql, source_ns) for _, sql in train]
        for t in LAID_OUT[opts.dataset]:
            orders = {x: (cp.layout(x) or {}).get("tables", {}).get(t, {}).get("sort_order")
                      for x in layouts if x in ("sort", "zorder", "zorder-ranges")}
            name = f"{source_ns}.{t}"
            held: dict = {}
            patches: Any = contextlib.nullcontext()
            if a.held_out:
                tests = [(q["index"], q["template"], qualify(q["sql"], source_ns)) for q in measured.values()
                         if t in q["tables"]]
                patches = HeldOutPatches(spark, name, tests, held)
            started = time.time()
            with patches:
                advice = PandoTable(catalog, name, spark=spark).optimize.advise(
                    workload, options=options, sort_orders=[o for o in orders.values() if o and "range ids" not in o])
            seconds = time.time() - started
            if a.held_out:
                held_rows.append(held_out_row(t, held, measured, layouts, advice))
            by_spec = {c.spec: c for c, _ in advice.ranked}
            kept = next((c for c, _ in advice.ranked if c.strategy == "pando"), None)
            for x in layouts:
                if x == "arrival":  # read by Spark and Iceberg alone
                    predicted = next(c for c, _ in advice.ranked if c.strategy == "as is")
                elif x == "arrival-pando":  # the same files through Pando's planner
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
                    pk = pando_k(x)
                    want_s = advice.pando_rewrite_seconds(pk, validate=options.to_rewrite_options().k_selection
                                                          == "validate")
                else:
                    want_s = predicted.rewrite_seconds if predicted is not None and not x.startswith("arrival") \
                        else None
                held_mb = held_out_mb(x, held, predicted, advice) if a.held_out and predicted is not None else None
                info = (cp.layout(x) or {}).get("tables", {}).get(t, {})
                rows.append({"table": t, "layout": x, "candidate": predicted.name if predicted else None,
                             "layout_bytes_per_row": info["bytes"] / info["rows"] if info.get("rows") else None,
                             "written_blocks": None if advice.written is None else {
                                 "blocks": list(advice.written.blocks), "rows": list(advice.written.rows),
                                 "bytes": list(advice.written.bytes), "bytes_per_row": advice.written.bytes_per_row,
                                 "table_bytes_per_row": advice.written.table_bytes_per_row,
                                 "seconds": advice.written.seconds},
                             "predicted_mb": want, "measured_mb": got, "queries": len(reads),
                             "held_out_literals_mb": held_mb,
                             "held_out_error": (held_mb - got) / got if held_mb is not None and got else None,
                             "error": (want - got) / got if want is not None and got else None,
                             "advised": predicted is not None and predicted is advice.advised,
                             "predicted_rewrite_seconds": want_s, "measured_rewrite_seconds": done,
                             "rewrite_error": (want_s - done) / done if want_s is not None and done else None,
                             "advice_seconds": round(seconds, 1), "advice_parts": advice.parts})
    print("| table | layout | advisor's candidate | predicted MB / query | measured MB / query | error | advised "
          "| predicted rewrite s | measured rewrite s | error | on the held-out literals: MB | error |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")

    def pct(x):
        return "—" if x is None else f"{x:+.0%}"

    def num(x, f="{:.2f}"):
        return "—" if x is None else f.format(x)

    for r in rows:
        meas = "—" if r["measured_mb"] is None else f"{r['measured_mb']:.2f} ({r['queries']} queries)"
        print(f"| {r['table']} | {r['layout']} | {r['candidate'] or '—'} | {num(r['predicted_mb'])} | {meas} | "
              f"{pct(r['error'])} | {'yes' if r['advised'] else ''} | {num(r['predicted_rewrite_seconds'], '{:.1f}')} "
              f"| {num(r['measured_rewrite_seconds'], '{:.1f}')} | {pct(r['rewrite_error'])} "
              f"| {num(r['held_out_literals_mb'])} | {pct(r['held_out_error'])} |")
    for t in dict.fromkeys(r["table"] for r in rows):
        got = [r for r in rows if r["table"] == t and r["measured_mb"] is not None]
        best = min(got, key=lambda r: r["measured_mb"], default=None)
        advised = next((r for r in got if r["advised"]), None)
        if best is not None:
            print(f"{t}: the advised candidate reads {num(advised and advised['measured_mb'])} MB measured, the best "
                  f"measured layout ({best['layout']}) {best['measured_mb']:.2f}"
                  + ("" if advised else " (the advised candidate is not among the measured layouts)"))
    for t in dict.fromkeys(r["table"] for r in rows):
        w = next((r["written_blocks"] for r in rows if r["table"] == t and r["written_blocks"]), None)
        files = ", ".join(f"{r['layout']} {r['layout_bytes_per_row']:.2f}" for r in rows
                          if r["table"] == t and r["layout_bytes_per_row"] and r["layout"].startswith("pando"))
        if w is not None:
            print(f"{t}: bytes per row, the table as is {w['table_bytes_per_row']:.2f}, the written blocks "
                  f"{w['bytes_per_row']:.2f} (blocks {w['blocks']}, {sum(w['rows']):,} rows, {w['seconds']:.1f} s); "
                  f"the run's layouts' files: {files or '—'}")
    seconds = {r["table"]: r["advice_seconds"] for r in rows}
    print("advice seconds: " + ", ".join(f"{t} {s}" for t, s in seconds.items()))
    for h in held_rows:
        print_held_out(h)
    if a.json:
        Path(a.json).write_text(json.dumps({"rows": rows, "held_out": held_rows} if a.held_out else rows, indent=2,
                                           default=float))


def pando_k(layout: str) -> int:
    """The trees of a bench layout named 'pando-k3' (or 'pando-k3-unguarded')."""
    return int(layout[len("pando-k"):].split("-")[0])


class HeldOutPatches:
    """While ``advise`` learns Pando's candidates, each call of the k-selection
    (``workload.in_block.select_layout``) and of the planning of the table as is
    (``maintenance.advisor.reads_as_is``) is also made on the run's held-out queries, one per
    query, and on the advice's own validation draws, one per template; the results go to
    ``held``. The advice itself is the advice as it is (the originals run first, on its draws)."""

    def __init__(self, spark, name: str, tests: list[tuple[int, int, str]], held: dict):
        from pando_iceberg.spark.rewrite_common import keyed_draws, table_workload
        from pando_iceberg.workload.templates import TemplateWorkload, template_key

        filters = []
        wl = schemas = None
        for _, _, sql in tests:  # one at a time: a workload merges queries alike
            wl, _, queries, schemas = table_workload(spark, name, [sql])
            filters.append((queries[0][0], 1.0))
        keyed = keyed_draws(spark, wl, TemplateWorkload([], [], filters), schemas).validation if filters else []
        held["tests"] = [{"index": i, "template": tpl, "key": template_key(f)}
                         for (i, tpl, _), (f, _) in zip(tests, keyed, strict=True)]
        self.keyed, self.held = keyed, held

    def __enter__(self):
        from pando_iceberg.maintenance import advisor
        from pando_iceberg.workload import in_block
        from pando_iceberg.workload.templates import group_templates, template_key

        self.saved = (advisor.reads_as_is, in_block.select_layout, advisor.prediction_weights)
        reads_now, select_layout, prediction_weights = self.saved
        keyed, held = self.keyed, self.held

        def own_templates(validation):
            return [(template_key(t.draws[0][0]), t.draws) for t in group_templates(validation)]

        def reads_now_too(static, snapshot_id, queries):
            got = reads_now(static, snapshot_id, queries)
            out = (got.rows, got.bytes)
            index = {id(f): i for i, (f, _) in enumerate(queries)}
            held["now_own"] = {key: {"weight": sum(w for _, w in draws),
                                     "rows": float(sum(out[0][index[id(f)]] * w for f, w in draws)
                                                   / max(1e-12, sum(w for _, w in draws))),
                                     "bytes": float(sum(out[1][index[id(f)]] * w for f, w in draws)
                                                    / max(1e-12, sum(w for _, w in draws))),
                                     "draws": len(draws)}
                               for key, draws in own_templates(queries)}
            mine = reads_now(static, snapshot_id, keyed)
            held["now_held"] = {"rows": [float(x) for x in mine.rows], "bytes": [float(x) for x in mine.bytes],
                                "iceberg_bytes": [float(x) for x in mine.iceberg_bytes]}
            return got

        def select_layout_too(layouts, sample, validation, b_sample, **kw):
            out = select_layout(layouts, sample, validation, b_sample, **kw)
            ev = kw.get("evaluations")
            held["pando_own"] = {key: {"weight": sum(w for _, w in draws),
                                       "costs": select_layout(layouts, sample, draws, b_sample, evaluations=ev).costs}
                                 for key, draws in own_templates(validation)}
            held["pando_held"] = [select_layout(layouts, sample, [q], b_sample, evaluations=ev).costs for q in keyed]
            held["pando_kept"] = out.index
            held["reads"] = kw.get("measured")
            return out

        def prediction_weights_too(validation, queries, sample, *args, **kw):
            out = prediction_weights(validation, queries, sample, *args, **kw)
            reads = held.get("reads") or []
            kept = held.get("pando_kept", 0)
            index = {id(f): i for i, (f, _) in enumerate(validation)}
            held["predicted"] = {}
            for key, draws in own_templates(validation):
                ix = [index[id(f)] for f, _ in draws]
                w = out[ix]
                held["predicted"][key] = {
                    "weight": float(w.sum()),
                    "pando": float(reads[kept][ix] @ w / w.sum()) if len(reads) > kept and w.sum() > 0 else None,
                    "kept_draws": int((w > 0).sum()), "draws": len(ix)}
            return out

        advisor.reads_as_is, in_block.select_layout = reads_now_too, select_layout_too
        advisor.prediction_weights = prediction_weights_too
        return self

    def __exit__(self, *exc):
        from pando_iceberg.maintenance import advisor
        from pando_iceberg.workload import in_block

        advisor.reads_as_is, in_block.select_layout, advisor.prediction_weights = self.saved
        return False


def held_out_mb(layout: str, held: dict, predicted, advice) -> float | None:
    """MB per query the advice predicts for ``layout`` on the run's held-out queries themselves:
    the table as is by its bytes (Iceberg alone for 'arrival', Pando's planner for
    'arrival-pando'), Pando's kept candidate by its rows at its bytes per row."""
    if "now_held" not in held or not held["now_held"]["rows"]:
        return None
    n = len(held["now_held"]["rows"])
    if layout == "arrival":
        return sum(held["now_held"]["iceberg_bytes"]) / n * advice.table_mb
    if layout == "arrival-pando":
        return sum(held["now_held"]["bytes"]) / n * advice.table_mb
    if layout.startswith("pando") and "pando_held" in held and predicted.rows_fraction > 0:
        per_row = predicted.mb_per_query / predicted.rows_fraction  # the table's MB at the candidate's bytes per row
        kept = held.get("pando_kept", 0)
        return sum(c[kept] for c in held["pando_held"]) / len(held["pando_held"]) * per_row
    return None


def held_out_row(table: str, held: dict, measured: dict, layouts, advice) -> dict:
    """Per template and in all: predicted share of the table read per query on the advice's own
    draws and on the run's held-out queries, and measured (bytes and rows), for the table as is
    (the run's 'arrival') and the Pando candidate kept (the run's 'pando-k*')."""
    kept = held.get("pando_kept", 0)
    by_index = {q["index"]: q for q in measured.values()}
    total = {lay: None for lay in layouts}
    out: dict = {"table": table, "table_mb": advice.table_mb, "kept": kept + 1, "templates": []}
    for lay in layouts:
        ms = [by_index[t["index"]]["layouts"][lay]["tables"][table] for t in held["tests"]
              if lay in by_index[t["index"]]["layouts"] and table in by_index[t["index"]]["layouts"][lay]["tables"]]
        if ms:
            total[lay] = {"mb": sum(m["bytes"] / max(1, m["scans"]) for m in ms) / len(ms) / 1e6,
                          "rows": sum(m["rows"] / max(1, m["scans"]) for m in ms) / len(ms) / advice.table_rows}
    out["measured"] = total
    templates = dict.fromkeys((t["template"], t["key"]) for t in held["tests"])
    for tpl, key in templates:
        idx = [i for i, t in enumerate(held["tests"]) if t["template"] == tpl and t["key"] == key]
        row: dict = {"template": tpl, "key": key, "queries": len(idx)}
        own_now = held.get("now_own", {}).get(key)
        own_pando = held.get("pando_own", {}).get(key)
        row["as is"] = {"own": own_now and own_now["rows"],
                        "held": sum(held["now_held"]["rows"][i] for i in idx) / len(idx)}
        pred = held.get("predicted", {}).get(key)
        row["pando"] = {"own": own_pando and own_pando["costs"][kept],
                        "predicted": pred and pred["pando"],
                        "kept_draws": pred and f"{pred['kept_draws']}/{pred['draws']}",
                        "held": sum(held["pando_held"][i][kept] for i in idx) / len(idx)}
        for lay in layouts:
            ms = [by_index[held["tests"][i]["index"]]["layouts"][lay]["tables"][table] for i in idx]
            row[lay] = {"mb": sum(m["bytes"] / max(1, m["scans"]) for m in ms) / len(ms) / 1e6,
                        "rows": sum(m["rows"] / max(1, m["scans"]) for m in ms) / len(ms) / advice.table_rows}
        out["templates"].append(row)
    n = len(held["tests"])
    out["as is"] = {"own": sum(v["rows"] * v["weight"] for v in held["now_own"].values())
                    / sum(v["weight"] for v in held["now_own"].values()),
                    "held": sum(held["now_held"]["rows"]) / n}
    out["pando"] = {"own": sum(v["costs"][kept] * v["weight"] for v in held["pando_own"].values())
                    / sum(v["weight"] for v in held["pando_own"].values()),
                    "held": sum(held["pando_held"][i][kept] for i in range(n)) / n}
    return out


def print_held_out(h: dict) -> None:
    """The table of ``held_out_row``: shares of the table's rows read per query (× the table's MB:
    the advisor's MB), predicted on its own draws and on the held-out queries, and measured."""
    mb = h["table_mb"]
    lays = [x for x in h["measured"] if x == "arrival" or x.startswith("pando")]
    print(f"\n{h['table']}: share of rows read per query (MB = share × {mb:.1f} MB, the table as is); "
          f"Pando candidate kept: k={h['kept']}")
    print("| template | queries | as is, Pando's planner: own draws | held-out | arrival measured rows (MB) "
          "| Pando: own draws | Pando: prediction draws (kept) | Pando: held-out | Pando measured rows (MB) |")
    print("|---|---|---|---|---|---|---|---|---|")
    pl = next((x for x in lays if x.startswith("pando")), None)

    def cell(m):
        return "—" if not m else f"{m['rows']:.3f} ({m['mb']:.1f})"

    def f(x):
        return "—" if x is None else f"{x:.3f}"

    for r in h["templates"]:
        print(f"| {r['template']} | {r['queries']} | {f(r['as is']['own'])} | {f(r['as is']['held'])} | "
              f"{cell(r.get('arrival'))} | {f(r['pando']['own'])} | {f(r['pando'].get('predicted'))} "
              f"({r['pando'].get('kept_draws') or '—'}) | {f(r['pando']['held'])} | {cell(r.get(pl))} |")
    m = h["measured"]
    print(f"| all | | {f(h['as is']['own'])} ({h['as is']['own'] * mb:.1f}) | {f(h['as is']['held'])} "
          f"({h['as is']['held'] * mb:.1f}) | {cell(m.get('arrival'))} | {f(h['pando']['own'])} "
          f"({h['pando']['own'] * mb:.1f}) | | {f(h['pando']['held'])} ({h['pando']['held'] * mb:.1f}) "
          f"| {cell(m.get(pl))} |")


if __name__ == "__main__":
    main()
