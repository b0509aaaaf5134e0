"""Pando rewrite time on a 3-process Spark standalone cluster vs local[2], same TPC-H table.

    .venv/bin/python benchmarks/cluster_tpch.py --sf 1 [--work DIR] [--json out.json]

1. local[2] (driver 4g): load TPC-H lineitem, orders, part at --sf into a fresh lakehouse
   (namespace clu), then rewrite clu.lineitem with Pando (k=2, workload: TPC-H Q6/Q12/Q14).
2. A master and two workers (1 core, --worker-memory each) on 127.0.0.1, every one its own JVM;
   the driver (1g) rolls the table back to the base snapshot of step 1 and runs the same rewrite
   with the same seed: the same input files, the same layout.
Both runs go through tests/cluster/cluster_job.py (the job the cluster test checks); the
rewrite time is the wall time of ``rewrite_table`` (sample + learn + route/write + commit).
Prints one JSON document and a markdown table row per run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "cluster"))
from _services import SparkStandalone  # noqa: E402

JOB = REPO / "tests" / "cluster" / "cluster_job.py"


def run_job(home: Path, master: str, out: Path, *extra: str) -> dict:
    p = subprocess.run([sys.executable, str(JOB), "--home", str(home), "--master", master, "--out", str(out), *extra],
                       cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{master} run failed:\n{p.stderr[-4000:]}")
    return json.loads(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--work", help="working directory (default: a temporary one, removed after)")
    ap.add_argument("--worker-memory", default="2g")
    ap.add_argument("--min-block-rows", type=int, default=100_000)
    ap.add_argument("--sample-rate", type=float, default=0.01)
    ap.add_argument("--json", help="also write the result here")
    args = ap.parse_args()

    tmp = tempfile.TemporaryDirectory(prefix="pando-cluster-bench-") if not args.work else None
    work = Path(args.work or tmp.name)
    common = ["--min-block-rows", str(args.min_block_rows), "--sample-rate", str(args.sample_rate), "--no-queries"]
    try:
        t0 = time.time()
        local = run_job(work / "lake", "local[2]", work / "local.json", "--load-sf", str(args.sf),
                        "--driver-memory", "4g", *common)
        cluster = SparkStandalone(workers=2, cores=1, memory=args.worker_memory)
        try:
            cluster.start()
            remote = run_job(work / "lake", cluster.url, work / "cluster.json", "--rollback-to",
                             str(local["rewrite"]["base_snapshot_id"]), "--driver-memory", "1g",
                             "--executor-memory", args.worker_memory, *common)
        finally:
            cluster.stop()
        same = {k: local[k] == remote[k] for k in ("layout", "files", "commit")}
        result = {"sf": args.sf, "rows": int(local["commit"]["total-records"]), "table_bytes": local["table_bytes"],
                  "blocks": local["layout"]["blocks"], "identical": same, "wall_seconds": time.time() - t0,
                  "runs": {r["master"].split(":")[0]: {"rewrite_seconds": round(r["seconds_rewrite"], 1),
                                                       "stages": {k: round(v, 1) for k, v in r["rewrite"]["seconds"].items()},
                                                       "executors": r["executors"]} for r in (local, remote)}}
        print(json.dumps(result, indent=1))
        print("| master | rewrite s | sampling+learning s | route+write s | commit s |")
        for r, label in ((local, "local[2] (1 JVM, 2 cores)"), (remote, "standalone: master + 2 workers × 1 core")):
            s = r["rewrite"]["seconds"]
            print(f"| {label} | {r['seconds_rewrite']:.1f} | {s.get('sampling', 0) + s.get('optimizing', 0):.1f} | "
                  f"{s.get('writing', 0):.1f} | {s.get('commit', 0):.1f} |")
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    main()
