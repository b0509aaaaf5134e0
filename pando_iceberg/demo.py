"""``pando demo``: the main job on the embedded lakehouse — Pando against what a user would use
instead, on the queries of tomorrow, on two datasets:

- a **star schema** (a sales fact and five dimensions, no declared keys; queries filter
  dimension attributes through FK→PK joins), where a learned layout matters most: a sort or a
  z-order on the fact's keys cannot serve a brand, a region and a month at once;
- **TPC-H** (``lineitem`` and ``orders``), the 22 templates with parameters drawn by TPC-H's rules.

For each: the data is loaded as it arrives (once; later runs reuse it); the workload's draws are
split per template into a training half and a held-out half (the paper's protocol, §8.2); the laid-out
tables are copied once per layout and laid out with the real procedures — Iceberg's own
``rewrite_data_files`` with a sort (the date each table is filtered by most) and with z-order (the
columns the training half filters most), each aimed at Pando's file count (Iceberg sizes files by
an estimate: bytes are the comparison, files a second one), and ``rewrite_data_files(strategy =>
'pando')`` learned on the training half (k trees, one ``replace`` commit per table). Every held-out
query runs on every layout (Pando's through its pruned scans) and its result is compared with the
tables as loaded. It prints bytes, files and Spark seconds per layout with the lower bound (the
files the matching rows fill), then one line per dataset: Pando against the best Iceberg layout.

The per-template guard is off here: the demo compares what each layout reads, and the star's fact
arrives in date order, which the guard would keep for its date templates (a rewrite outside the
demo keeps the guard on: docs/LAYOUT.md).

Each dataset is ``pando bench`` (``bench/harness.py``) at demo size, one execution per query; the
reports (JSON, Markdown, per-layout and per-template PNGs) are written under ``<home>/demo``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import PandoConfig
from .output import emit

DEMO_KS = (1, 2, 3, 4)
#: The demo's datasets, the one where a learned layout matters most first.
DEMO_DATASETS = ("star", "tpch")


def demo_layouts(k: int) -> tuple[str, ...]:
    """The layouts the demo compares: the table as loaded, Iceberg's sort and z-order, Pando k."""
    if k not in DEMO_KS:
        raise ValueError(f"--k must be one of {', '.join(map(str, DEMO_KS))}, got {k}")
    return ("arrival", "sort", "zorder", f"pando-k{k}")


def run_demo(cfg: PandoConfig, sf: float = 0.1, as_json: bool = False, per_template: int = 4, k: int = 3,
             seed: int = 42, progress: Callable[[str], None] = lambda m: None,
             datasets: tuple[str, ...] = DEMO_DATASETS) -> int:
    """Exit code: 0, or 1 when any held-out query's result differs from the tables as loaded."""
    from .bench.datasets import dataset_namespace
    from .bench.harness import BenchOptions, bench_stem, run_bench
    from .catalog import load_catalog
    from .spark.session import spark_session

    t_all = time.time()
    out = Path(cfg.home) / "demo"
    catalog = load_catalog(cfg)
    summary_rows: list[tuple[Any, ...]] = []
    mismatches = 0
    with spark_session(cfg, app_name="pando-demo") as spark:
        for dataset in datasets:
            t0 = time.time()
            opts = BenchOptions(dataset=dataset, sf=sf, layouts=demo_layouts(k), per_template=per_template,
                                seed=seed, out=str(out), runs=0, namespace=f"demo_{dataset_namespace(dataset, sf)}",
                                pando_options={"max-template-regression": "off"})
            opts.validate()
            rep = run_bench(spark, catalog, cfg, opts, progress=progress)
            mismatches += rep["mismatches"]
            summary = rep["summary"]
            rows = []
            for name in opts.layouts:
                s = summary["layouts"][name]
                rows.append((_label(name), " + ".join(str(n) for n in s["files_total"].values()),
                             round(s["mean_bytes"] / 1e6, 2), round(s["mean_files"], 1), round(s["mean_lb"], 1),
                             round(s["total_s"], 1), round(s["plan_s"] or 0.0, 1), round(s["rewrite_s"], 1),
                             s["mismatches"]))
            stem = bench_stem(opts)
            emit(["layout", "files_in_table", "mb_read_per_query", "files_read_per_query", "lower_bound_files",
                  "spark_s", "of_which_planning_s", "layout_s", "wrong_results"], rows, as_json,
                 title=(f"pando demo: {_DATASET_TITLES[dataset]} SF {sf:g} in {cfg.home}, "
                        f"{summary['filtered_queries']} held-out queries filtering the laid-out tables "
                        f"(learned from {rep['train_queries']} others)"),
                 extra={"pictures": sorted(str(p) for p in out.glob(f"{stem}_*.png")),
                        "report": str(out / f"{stem}.md"), "seconds": round(time.time() - t0, 1)})
            summary_rows.append(_summary_row(dataset, sf, summary, opts.layouts))
            if not as_json:
                print()
    emit(["dataset", "pando", "mb_per_query", "files_per_query", "best_iceberg_layout", "its_mb_per_query",
          "its_files_per_query", "fewer_bytes", "fewer_files", "wrong_results"], summary_rows, as_json,
         title="pando demo: per held-out query, Pando against the best Iceberg layout of the same run",
         extra={"result_mismatches": mismatches, "total_seconds": round(time.time() - t_all, 1)})
    return 0 if mismatches == 0 else 1


_DATASET_TITLES = {"star": "star schema (sales and 5 dimensions)", "tpch": "TPC-H (lineitem, orders)"}


def _summary_row(dataset: str, sf: float, summary: dict, layouts: tuple[str, ...]) -> tuple[Any, ...]:
    """Pando's bytes and files per held-out query beside the Iceberg layout that read fewest bytes."""
    lay = summary["layouts"]
    pando = layouts[-1]
    best = min((x for x in layouts if x in ("sort", "zorder")), key=lambda x: lay[x]["mean_bytes"])
    p, b = lay[pando], lay[best]
    return (f"{dataset} SF {sf:g}", _label(pando), round(p["mean_bytes"] / 1e6, 2), round(p["mean_files"], 1),
            _label(best), round(b["mean_bytes"] / 1e6, 2), round(b["mean_files"], 1),
            f"{b['mean_bytes'] / max(1.0, p['mean_bytes']):.2f}x",
            f"{b['mean_files'] / max(0.1, p['mean_files']):.2f}x", p["mismatches"] + b["mismatches"])


def _label(layout: str) -> str:
    return {"arrival": "as loaded", "sort": "Iceberg sort", "zorder": "Iceberg z-order"}.get(
        layout, layout.replace("pando-k", "Pando k="))
