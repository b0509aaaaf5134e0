"""``pando demo``: the main job on the embedded lakehouse.

1. TPC-H (SF 0.1 by default) is loaded into namespace ``tpch`` as it arrives (once; later runs
   reuse it), and copied into namespace ``demo``.
2. A workload of the 22 TPC-H templates with parameters drawn by the TPC-H rules is split per
   template into a training half and a held-out half (the paper's protocol, §8.2).
3. ``demo.lineitem`` and ``demo.orders`` are laid out by ``rewrite_data_files(strategy =>
   'pando')`` learned on the training half (k trees, one replace commit each).
4. Every held-out query runs twice — on ``tpch`` with Spark's own Iceberg scan, and on ``demo``
   with each base table pruned by Pando — and the results are compared. Files, bytes and time
   per query and in total are printed.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Callable

from .config import PandoConfig
from .output import emit

LAID_OUT = ("lineitem", "orders")


def split_workload(queries: list[tuple[int, str]], seed: int) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """Half of each template's queries for training, the other half held out."""
    rng = random.Random(seed)
    train, test = [], []
    by_template: dict[int, list[str]] = {}
    for t, sql in queries:
        by_template.setdefault(t, []).append(sql)
    for t, sqls in sorted(by_template.items()):
        rng.shuffle(sqls)
        half = max(1, len(sqls) // 2)
        train += [(t, s) for s in sqls[:half]]
        test += [(t, s) for s in sqls[half:]]
    return train, test


def qualify(sql: str, namespace: str) -> str:
    from sqlglot import exp, parse_one

    tree = parse_one(sql, read="spark")
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    for t in tree.find_all(exp.Table):
        if t.name and not t.db and t.name not in ctes:
            t.set("db", exp.to_identifier(namespace))
    return tree.sql(dialect="spark")


def _rows(rows) -> list[tuple]:
    return sorted((tuple(r) for r in rows), key=repr)


def run_demo(cfg: PandoConfig, sf: float = 0.1, as_json: bool = False, per_template: int = 2, k: int = 3,
             seed: int = 42, progress: Callable[[str], None] = lambda m: None) -> int:
    from .catalog import load_catalog
    from .spark.pruned import plan_query, run_sql
    from .spark.rewrite import RewriteOptions, rewrite_table
    from .spark.session import spark_session
    from .tpch import TPCH_TABLES, copy_table, load_tpch
    from .workload.tpch_queries import tpch_workload

    t_all = time.time()
    catalog = load_catalog(cfg)
    steps: list[tuple[str, str, float]] = []
    with spark_session(cfg, app_name="pando-demo") as spark:
        t0 = time.time()
        progress(f"loading TPC-H SF {sf} into tpch (tables already there are kept)")
        loaded = load_tpch(spark, sf, progress=progress)
        steps.append(("load TPC-H", f"{sum(t.rows for t in loaded):,} rows in 8 tables", time.time() - t0))

        t0 = time.time()
        progress("copying the tables into namespace demo")
        spark.sql("CREATE NAMESPACE IF NOT EXISTS demo")
        for table in TPCH_TABLES:
            copy_table(spark, f"tpch.{table}", f"demo.{table}")
        steps.append(("copy to demo", "8 tables", time.time() - t0))

        train, test = split_workload(tpch_workload(per_template, seed=seed), seed)
        workload_file = Path(cfg.home) / "workloads" / "tpch_train.sql"
        workload_file.parent.mkdir(parents=True, exist_ok=True)
        workload_file.write_text(";\n".join(sql for _, sql in train) + ";\n")
        b = max(1000, int(100_000 * sf))
        for table in LAID_OUT:
            t0 = time.time()
            progress(f"learning and applying a k={k} Pando layout to demo.{table}")
            r = rewrite_table(spark, f"demo.{table}", [qualify(s, "demo") for _, s in train],
                              RewriteOptions(k=k, sample_rate=0.05, min_block_rows=b, seed=seed),
                              io_properties=cfg.pyiceberg_properties(), progress=progress)
            steps.append((f"pando layout demo.{table}",
                          f"{r.rewritten_data_files_count} → {r.added_data_files_count} files, {r.block_count} blocks",
                          time.time() - t0))

        rows = []
        mismatches = 0
        tot = {"base_s": 0.0, "pando_s": 0.0, "base_files": 0, "pando_files": 0, "base_bytes": 0, "pando_bytes": 0}
        for i, (template, sql) in enumerate(test, start=1):
            progress(f"held-out query {i}/{len(test)} (Q{template}) both ways")
            base_sql = qualify(sql, "tpch")
            t0 = time.time()
            base_rows = _rows(spark.sql(base_sql).collect())
            base_s = time.time() - t0
            base_plan = plan_query(spark, catalog, base_sql, use_layout=False).explains
            pruned = run_sql(spark, catalog, qualify(sql, "demo"))
            equal = base_rows == _rows(pruned.rows)
            mismatches += not equal
            bf = sum(e.iceberg_files for e in base_plan.values())
            bb = sum(e.iceberg_bytes for e in base_plan.values())
            pf = sum(e.pando_files for e in pruned.explains.values())
            pb = sum(e.pando_bytes for e in pruned.explains.values())
            for key, v in (("base_s", base_s), ("pando_s", pruned.seconds), ("base_files", bf), ("pando_files", pf),
                           ("base_bytes", bb), ("pando_bytes", pb)):
                tot[key] += v
            rows.append((f"Q{template}", bf, pf, _mb(bb), _mb(pb), round(base_s, 2), round(pruned.seconds, 2),
                         "yes" if equal else "NO"))
    rows.append(("total", tot["base_files"], tot["pando_files"], _mb(tot["base_bytes"]), _mb(tot["pando_bytes"]),
                 round(tot["base_s"], 1), round(tot["pando_s"], 1), "yes" if mismatches == 0 else f"{mismatches} NO"))
    emit(["step", "result", "seconds"], [(s, r, round(t, 1)) for s, r, t in steps], as_json,
         title=f"pando demo: TPC-H SF {sf} in {cfg.home}")
    emit(["query", "files_iceberg", "files_pando", "mb_iceberg", "mb_pando", "s_iceberg", "s_pando", "same_result"],
         rows, as_json, title=f"held-out queries ({len(test)}): Spark's Iceberg scan on tpch.* (as loaded) "
                               "vs Pando-pruned scans on demo.* (lineitem, orders laid out)",
         extra={"result_mismatches": mismatches, "total_seconds": round(time.time() - t_all, 1),
                "note": "s_pando includes Pando's planning (join key sets are computed with Spark)"})
    return 0 if mismatches == 0 else 1


def _mb(n: int) -> float:
    return round(n / 1e6, 2)
