"""``pando demo``: the main job on the embedded lakehouse.

Loads TPC-H into the embedded lakehouse (once; later runs reuse it) and answers TPC-H Q6 both
through Spark and through pyiceberg + pyarrow, checking that the answers agree. As the layout
procedures land, this grows into learn → rewrite → held-out queries both ways (issue 5).
"""

from __future__ import annotations

import time
from typing import Callable

from .config import PandoConfig
from .output import emit


def run_demo(cfg: PandoConfig, sf: float = 0.1, as_json: bool = False,
             progress: Callable[[str], None] = lambda m: None) -> int:
    from .catalog import load_catalog
    from .spark.session import spark_session
    from .tpch import Q6_SQL, expected_row_count, load_tpch, q6_pyiceberg

    steps: list[tuple[str, str, float]] = []
    t_all = time.time()
    with spark_session(cfg, app_name="pando-demo") as spark:
        progress(f"loading TPC-H SF {sf} into {cfg.catalog.name}.tpch (skipped for tables already there)")
        t0 = time.time()
        loaded = load_tpch(spark, sf, progress=progress)
        steps.append(("load TPC-H", ", ".join(f"{t.table}={t.rows}" for t in loaded), time.time() - t0))
        wrong = [t.table for t in loaded if expected_row_count(t.table, sf) not in (None, t.rows)]
        progress("TPC-H Q6 through Spark")
        t0 = time.time()
        spark_rev = spark.sql(Q6_SQL).collect()[0][0]
        steps.append(("Q6 via Spark", str(spark_rev), time.time() - t0))
    progress("TPC-H Q6 through pyiceberg + pyarrow")
    t0 = time.time()
    py_rev = q6_pyiceberg(load_catalog(cfg))
    steps.append(("Q6 via pyiceberg", str(py_rev), time.time() - t0))
    ok = spark_rev == py_rev and not wrong
    emit(["step", "result", "seconds"], [(s, r, round(t, 2)) for s, r, t in steps], as_json,
         title=f"pando demo on {cfg.home} (TPC-H SF {sf})",
         extra={"answers_equal": spark_rev == py_rev, "row_counts_ok": not wrong,
                "total_seconds": round(time.time() - t_all, 1)})
    return 0 if ok else 1
