"""A Pando rewrite on a real Spark standalone cluster: a master and two workers (1 core, 1 GiB
each), every one its own JVM on 127.0.0.1, and the driver in yet another process.

The same job (tests/cluster/cluster_job.py) runs first on local[*], then on the cluster, from
the same base snapshot of the same table (the cluster run rolls the table back first), with the
same seed. Everything must be identical: the layout, the blocks, each data file's rows and
content hash, the commit's summary, and the query results. The cluster driver runs with 512 MiB
and spark.driver.maxResultSize=4m while the table is larger than that even as compressed Parquet: the rewrite
succeeds there, and collecting the table itself is refused by that cap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _services import SparkStandalone

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # a two-executor cluster: the long profile

REPO = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("cluster_job.py")
SF = 0.05
MAX_RESULT = "4m"
MAX_RESULT_BYTES = 4 * 1024 * 1024


def run_job(home: Path, master: str, out: Path, *extra: str, timeout: float = 600) -> dict:
    p = subprocess.run([sys.executable, str(JOB), "--home", str(home), "--master", master, "--out", str(out),
                        "--min-block-rows", "25000", *extra], cwd=str(REPO), capture_output=True, text=True,
                       timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 0, f"{master}: {p.stderr[-4000:]}"
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("standalone")
    local = run_job(d / "lake", "local[*]", d / "local.json", "--load-sf", str(SF))
    cluster = SparkStandalone(workers=2, cores=1, memory="1g")
    try:
        cluster.start()
        remote = run_job(d / "lake", cluster.url, d / "cluster.json", "--rollback-to",
                         str(local["rewrite"]["base_snapshot_id"]), "--driver-memory", "512m",
                         "--max-result-size", MAX_RESULT)
        workers = cluster.registered_workers()
    except BaseException:
        print(cluster.log_tail())
        raise
    finally:
        cluster.stop()
    assert not cluster.root.exists()  # torn down
    return {"local": local, "cluster": remote, "workers": workers}


def test_the_job_ran_on_two_executors_of_the_cluster(runs):
    assert runs["workers"] == 2
    assert runs["cluster"]["master"].startswith("spark://127.0.0.1:")
    assert runs["cluster"]["executors"] == 2 and runs["local"]["executors"] == 0


def test_both_rewrites_start_from_the_same_snapshot(runs):
    a, b = runs["local"]["rewrite"], runs["cluster"]["rewrite"]
    assert a["base_snapshot_id"] == b["base_snapshot_id"]
    assert runs["cluster"]["commit"]["parent"] == b["base_snapshot_id"] == runs["local"]["commit"]["parent"]
    assert a["snapshot_id"] != b["snapshot_id"] and a["layout_id"] != b["layout_id"]


def test_layout_files_and_commit_are_identical_to_local(runs):
    a, b = runs["local"], runs["cluster"]
    assert a["layout"] == b["layout"] and a["layout"]["blocks"] > 4
    assert a["files"] == b["files"]  # (block, rows, content hash) of every data file
    assert a["commit"] == b["commit"] and a["commit"]["operation"] == "replace"
    assert a["rewrite"]["block_count"] == b["rewrite"]["block_count"]
    assert int(a["commit"]["total-records"]) == sum(n for _, n, _ in a["files"])


def test_pruned_queries_are_identical_and_equal_unpruned(runs):
    a, b = runs["local"]["queries"], runs["cluster"]["queries"]
    assert a == b and len(a) == 5
    for name, q in b.items():
        assert q["pruned"] == q["plain"], name
    assert any(q["files"] < q["total_files"] for q in b.values() if "total_files" in q)  # and they prune


def test_no_table_data_reaches_the_driver(runs):
    r = runs["cluster"]
    # The table is bigger than what the driver may receive, even as compressed Parquet (rows
    # collected are several times larger), and the rewrite and queries still went through.
    assert r["table_bytes"] > MAX_RESULT_BYTES
    assert r["collect_table"] == "refused: maxResultSize"
