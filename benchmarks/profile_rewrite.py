"""Where a Pando rewrite spends its time: a driver-side ``cProfile`` of one ``rewrite_table`` of a
copy of a table, with the rewrite's own phases (sampling, optimizing, writing, metadata, commit),
its progress lines timed, and the driver's peak RSS.

    .venv/bin/python benchmarks/profile_rewrite.py --home H --table tpch_sf1.lineitem \\
        --workload W.sql --k 3 --block-rows 100000 --master 'local[2]' --out /tmp/pando-profile

``--home``: a lakehouse holding the table and the tables its workload joins (for example the one
``pando bench --dataset tpch`` loaded); ``--workload``: the training queries (a .sql file, e.g. the
bench's ``workloads/*.sql``), their table names rewritten from the copy's namespace to ``prof``.
The table is copied file for file into ``prof.<name>`` (the other tables once), so the profile
starts from the table as loaded. Writes ``rewrite.pstats`` and ``profile.txt`` into --out.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import re
import resource
import time
from pathlib import Path

from pando_iceberg.config import load_config
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table
from pando_iceberg.spark.session import spark_session
from pando_iceberg.tpch import copy_table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--home", required=True)
    p.add_argument("--table", required=True, help="namespace.table to copy and lay out")
    p.add_argument("--workload", required=True, help=".sql file of training queries")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--block-rows", type=int, default=100_000)
    p.add_argument("--top", type=int, default=45, help="functions listed, by cumulative time")
    p.add_argument("--out", default="/tmp/pando-profile")
    p.add_argument("--master", default=None, help="Spark master (default: the configuration's), e.g. local[2]")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ns, name = args.table.split(".")
    text = Path(args.workload).read_text()
    # the workload's tables (FROM / JOIN ns.t), whatever namespace it names them in, are read from prof.*
    named = re.findall(r"\b(?:FROM|JOIN)\s+(\w+)\.(\w+)", text, flags=re.IGNORECASE)
    tables = sorted({t for _, t in named})
    spaces = "|".join(sorted({re.escape(n) for n, _ in named})) or "(?!)"
    workload = re.sub(r"\b(?:" + spaces + r")\.(\w+)\b", r"prof.\1", text)
    cfg = load_config(home=args.home, overrides={"spark": {"master": args.master}} if args.master else None)
    with spark_session(cfg) as spark:
        spark.sql("CREATE NAMESPACE IF NOT EXISTS prof")
        for t in dict.fromkeys([name, *tables]):
            if (t == name or not spark.catalog.tableExists(f"prof.{t}")) and spark.catalog.tableExists(f"{ns}.{t}"):
                copy_table(spark, f"{ns}.{t}", f"prof.{t}")
        lines: list[str] = []
        t0 = time.time()

        def progress(message: str) -> None:
            lines.append(f"{time.time() - t0:8.1f} s  {message}")
            print(lines[-1], flush=True)

        prof = cProfile.Profile()
        prof.enable()
        result = rewrite_table(spark, f"prof.{name}", workload,
                               RewriteOptions(k=args.k, min_block_rows=args.block_rows),
                               io_properties=cfg.pyiceberg_properties(), progress=progress)
        prof.disable()
    prof.dump_stats(str(out / "rewrite.pstats"))
    listing = io.StringIO()
    pstats.Stats(prof, stream=listing).sort_stats("cumulative").print_stats(args.top)
    summary = {"total_s": round(time.time() - t0, 1), "phases_s": {k: round(v, 1) for k, v in result.seconds.items()},
               "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}
    (out / "profile.txt").write_text(json.dumps(summary) + "\n\n" + "\n".join(lines) + "\n\n" + listing.getvalue())
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
