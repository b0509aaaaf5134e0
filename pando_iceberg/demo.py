"""``pando demo``: the main job on the embedded lakehouse — Pando against what a user would use
instead, on the queries of tomorrow.

1. TPC-H (SF 0.1 by default) is loaded as it arrives (once; later runs reuse it).
2. A workload of the 22 TPC-H templates with parameters drawn by the TPC-H rules is split per
   template into a training half and a held-out half (the paper's protocol, §8.2).
3. ``lineitem`` and ``orders`` are copied once per layout and laid out with the real procedures:
   Iceberg's own ``rewrite_data_files`` with a sort (the date each table is filtered by most)
   and with z-order (the columns the training half filters most), each aimed at Pando's file
   count (Iceberg sizes files by an estimate: bytes are the comparison, files a second one);
   and ``rewrite_data_files(strategy => 'pando')`` learned on the training half (k trees, one
   ``replace`` commit per table).
4. Every held-out query runs on every layout (Pando's through its pruned scans) and its result
   is compared with the table as loaded. Bytes, files and Spark seconds per layout are printed,
   with the lower bound (the files the matching rows fill), and a picture of both.

It is ``pando bench --dataset tpch`` (``bench/harness.py``) at demo size, with one execution per
query; its report (JSON, Markdown, PNGs) is written under ``<home>/demo``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from .config import PandoConfig
from .output import emit

DEMO_KS = (1, 2, 3, 4)


def demo_layouts(k: int) -> tuple[str, ...]:
    """The layouts the demo compares: the table as loaded, Iceberg's sort and z-order, Pando k."""
    if k not in DEMO_KS:
        raise ValueError(f"--k must be one of {', '.join(map(str, DEMO_KS))}, got {k}")
    return ("arrival", "sort", "zorder", f"pando-k{k}")


def run_demo(cfg: PandoConfig, sf: float = 0.1, as_json: bool = False, per_template: int = 4, k: int = 3,
             seed: int = 42, progress: Callable[[str], None] = lambda m: None) -> int:
    """Exit code: 0, or 1 when any held-out query's result differs from the table as loaded."""
    from .bench.datasets import dataset_namespace
    from .bench.harness import BenchOptions, run_bench
    from .catalog import load_catalog
    from .spark.session import spark_session

    t_all = time.time()
    out = Path(cfg.home) / "demo"
    opts = BenchOptions(dataset="tpch", sf=sf, layouts=demo_layouts(k), per_template=per_template, seed=seed,
                        out=str(out), runs=0, namespace=f"demo_{dataset_namespace('tpch', sf)}")
    opts.validate()
    catalog = load_catalog(cfg)
    with spark_session(cfg, app_name="pando-demo") as spark:
        rep = run_bench(spark, catalog, cfg, opts, progress=progress)
    summary = rep["summary"]
    rows = []
    for name in opts.layouts:
        s = summary["layouts"][name]
        rows.append((_label(name), " + ".join(str(n) for n in s["files_total"].values()),
                     round(s["mean_bytes"] / 1e6, 2), round(s["mean_files"], 1), round(s["mean_lb"], 1),
                     round(s["total_s"], 1), round(s["plan_s"] or 0.0, 1), round(s["rewrite_s"], 1),
                     s["mismatches"]))
    stem = f"bench_tpch_sf{sf:g}"
    pictures = sorted(str(p) for p in out.glob(f"{stem}_*.png"))
    best = min((x for x in opts.layouts if not x.startswith("pando")),
               key=lambda x: summary["layouts"][x]["mean_bytes"])
    pando = opts.layouts[-1]
    ratio = summary["layouts"][best]["mean_bytes"] / max(1.0, summary["layouts"][pando]["mean_bytes"])
    emit(["layout", "files_in_table", "mb_read_per_query", "files_read_per_query", "lower_bound_files",
          "spark_s", "of_which_planning_s", "layout_s", "wrong_results"], rows, as_json,
         title=(f"pando demo: TPC-H SF {sf:g} in {cfg.home}, {summary['filtered_queries']} held-out queries "
                f"filtering lineitem or orders (learned from {rep['train_queries']} others)"),
         extra={"pando_vs_best_baseline": f"{_label(pando)} reads {ratio:.2f}x fewer bytes per query than "
                                          f"{_label(best)}",
                "result_mismatches": rep["mismatches"], "pictures": pictures,
                "report": str(out / f"{stem}.md"), "total_seconds": round(time.time() - t_all, 1)})
    return 0 if rep["mismatches"] == 0 else 1


def _label(layout: str) -> str:
    return {"arrival": "as loaded", "sort": "Iceberg sort", "zorder": "Iceberg z-order"}.get(
        layout, layout.replace("pando-k", "Pando k="))
