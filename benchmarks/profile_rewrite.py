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

``--optimizer-only``: profile ``learn_layout`` alone (sampling and optimizing, nothing written,
no copy: the workload is read against the table's own namespace), and pickle what the optimizer
learned from into ``--out``/``optimizer-inputs.pkl`` (the sample, the template draws, the candidate
cuts with their key sets, the guard's reads of the table now): ``optimizer_timing.py --replay``
runs the optimizer again on it without Spark, so that two versions of the code are timed on the
same sample in the same run.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pickle
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
    p.add_argument("--options", default="", help="more rewrite options, KEY=VALUE comma-separated (e.g. "
                   "sample-rate=0.01,seed=0, as the bench gives them)")
    p.add_argument("--optimizer-only", action="store_true",
                   help="profile learn_layout only and pickle its inputs for optimizer_timing.py --replay")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ns, name = args.table.split(".")
    text = Path(args.workload).read_text()
    # the workload's tables (FROM / JOIN ns.t), whatever namespace it names them in, are read from prof.*
    named = re.findall(r"\b(?:FROM|JOIN)\s+(\w+)\.(\w+)", text, flags=re.IGNORECASE)
    tables = sorted({t for _, t in named})
    spaces = "|".join(sorted({re.escape(n) for n, _ in named})) or "(?!)"
    workload = re.sub(r"\b(?:" + spaces + r")\.(\w+)\b", (ns if args.optimizer_only else "prof") + r".\1", text)
    options = RewriteOptions.from_map({"k": str(args.k), "min-block-rows": str(args.block_rows),
                                       **dict(kv.split("=", 1) for kv in args.options.split(",") if kv)})
    cfg = load_config(home=args.home, overrides={"spark": {"master": args.master}} if args.master else None)
    if args.optimizer_only:
        optimizer_only(cfg, args.table, workload, options, out, args.top)
        return
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
        result = rewrite_table(spark, f"prof.{name}", workload, options,
                               io_properties=cfg.pyiceberg_properties(), progress=progress)
        prof.disable()
    prof.dump_stats(str(out / "rewrite.pstats"))
    listing = io.StringIO()
    pstats.Stats(prof, stream=listing).sort_stats("cumulative").print_stats(args.top)
    summary = {"total_s": round(time.time() - t0, 1), "phases_s": {k: round(v, 1) for k, v in result.seconds.items()},
               "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}
    (out / "profile.txt").write_text(json.dumps(summary) + "\n\n" + "\n".join(lines) + "\n\n" + listing.getvalue())
    print(json.dumps(summary))


# What learn_layout asks Spark (and the table's metadata) for, by name in spark/rewrite.py: recorded
# here, answered from the recording by optimizer_timing.py --replay.
RECORDED = ("table_workload", "template_bound", "row_count", "seeded_sample", "learning_workload",
            "reads_now", "file_bounds")


def optimizer_only(cfg, table: str, workload: str, options, out: Path, top: int) -> None:
    """``learn_layout`` under cProfile, its Spark answers recorded (``RECORDED``) and pickled."""
    from types import SimpleNamespace

    from pando_iceberg.spark import rewrite

    answers: dict[str, list[bytes]] = {name: [] for name in RECORDED}

    def recording(name: str):
        real = getattr(rewrite, name)

        def call(*a, **kw):
            got = real(*a, **kw)
            kept = got
            if name == "table_workload":  # the parsed workload: only what learn_layout reads of it
                wl, target, queries, schemas = got
                kept = (SimpleNamespace(unsupported=list(wl.unsupported), queries=[
                    SimpleNamespace(sql=q.sql, weight=q.weight, filters=dict.fromkeys(q.filters))
                    for q in wl.queries]), target, queries, schemas)
            answers[name].append(pickle.dumps(kept))  # as it was answered (before the optimizer's caches)
            return got
        return call

    for name in RECORDED:
        setattr(rewrite, name, recording(name))
    t0 = time.time()

    def progress(message: str) -> None:
        print(f"{time.time() - t0:8.1f} s  {message}", flush=True)

    with spark_session(cfg) as spark:
        prof = cProfile.Profile()
        prof.enable()
        learned = rewrite.learn_layout(spark, table, workload, options, progress=progress,
                                       io_properties=cfg.pyiceberg_properties())
        prof.disable()
    prof.dump_stats(str(out / "learn.pstats"))
    with open(out / "optimizer-inputs.pkl", "wb") as fh:
        pickle.dump({"table": table, "workload": workload, "options": options.to_map(), "answers": answers}, fh)
    listing = io.StringIO()
    pstats.Stats(prof, stream=listing).sort_stats("cumulative").print_stats(top)
    summary = {"sampling_s": round(learned.seconds_sampling, 1), "optimizing_s": round(learned.seconds_optimizing, 1),
               "parts_s": {k: round(v, 1) for k, v in learned.seconds_parts.items()}, "k": learned.layout.k,
               "blocks": learned.layout.num_blocks}
    (out / "learn.txt").write_text(json.dumps(summary) + "\n\n" + listing.getvalue())
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
