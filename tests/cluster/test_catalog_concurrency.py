"""Two processes commit to the same table at the same time through the shared JDBC catalog.

Runs on whatever catalog the lakehouse fixture has: SQLite in the normal run, PostgreSQL when
tests/cluster/test_postgres.py re-runs it with PANDO_TEST_CATALOG_URI. The conflicts are forced,
not hoped for: every writer loads the table, then all wait at a barrier, then all commit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pando_iceberg.spark.pruned import pruned_table
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 4
ROWS_PER_APPEND = 50

# One writer process: loads the table, waits at the barrier, then makes ROUNDS appends. A commit
# the catalog refuses (its base is stale) is retried: by pyiceberg itself (refresh, rebuild the
# snapshot on the new base; counted from its log) or, when its retries run out, here.
APPENDER = textwrap.dedent('''
    import json, logging, os, sys, time
    import pyarrow as pa
    from pyiceberg.exceptions import CommitFailedException
    from pando_iceberg.catalog import load_catalog
    from pando_iceberg.config import load_config

    home, name, writer, rounds, per, barrier = sys.argv[1:7]
    writer, rounds, per = int(writer), int(rounds), int(per)
    cat = load_catalog(load_config(home=home, env={}))
    table = cat.load_table(name)
    open(f"{barrier}.{writer}.ready", "w").close()
    while not os.path.exists(f"{barrier}.go"):
        time.sleep(0.01)
    conflicts = 0

    class Retries(logging.Handler):  # pyiceberg refreshes, rebuilds and retries a refused commit itself
        def emit(self, record):
            global conflicts
            if "concurrent update" in record.getMessage():
                conflicts += 1

    logging.getLogger("pyiceberg.table").addHandler(Retries())
    for r in range(rounds):
        lo = 1_000_000 * (writer + 1) + r * per
        batch = pa.table({"id": pa.array(range(lo, lo + per), pa.int64()), "k": pa.array([writer] * per, pa.int32())})
        while True:
            try:
                table.append(batch)
                break
            except CommitFailedException:
                conflicts += 1
                table = cat.load_table(name)
    print(json.dumps({"writer": writer, "conflicts": conflicts}))
''')


def _spawn(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", *args], cwd=str(REPO), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})


def _wait_files(paths: list[str], procs: list[subprocess.Popen], timeout: float = 180) -> None:
    deadline = time.time() + timeout
    while not all(os.path.exists(p) for p in paths):
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(f"writer exited early ({p.returncode}): {p.stderr.read()[-2000:]}")
        assert time.time() < deadline, f"{paths} did not appear within {timeout} s"
        time.sleep(0.05)


def test_two_processes_appending_at_once_both_land(spark, catalog, lakehouse_cfg, tmp_path):
    name = "conc.appends"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS conc")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} (id BIGINT, k INT) USING iceberg")
    barrier = str(tmp_path / "barrier")
    procs = [_spawn([APPENDER, str(lakehouse_cfg.home), name, str(w), str(ROUNDS), str(ROWS_PER_APPEND), barrier])
             for w in (0, 1)]
    try:
        _wait_files([f"{barrier}.{w}.ready" for w in (0, 1)], procs)
        Path(f"{barrier}.go").touch()
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err[-3000:]
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    # Both loaded the same (empty) table before committing: the second commit of round one
    # must have been refused by the catalog and retried on the new base.
    assert sum(o["conflicts"] for o in outs) >= 1, outs
    table = catalog.load_table(name)
    snaps = table.metadata.snapshots
    assert len(snaps) == 2 * ROUNDS and all(s.summary.operation.value == "append" for s in snaps)
    assert [s.parent_snapshot_id for s in snaps[1:]] == [s.snapshot_id for s in snaps[:-1]]  # one linear history
    got = table.scan().to_arrow()
    assert got.num_rows == 2 * ROUNDS * ROWS_PER_APPEND
    assert len(set(got["id"].to_pylist())) == got.num_rows  # every append exactly once
    spark.sql(f"REFRESH TABLE {name}")
    assert spark.sql(f"SELECT count(*) FROM {name}").collect()[0][0] == got.num_rows


# The other writer: waits until the rewrite is parked before its commit (<pause>.ready), commits
# through pyiceberg, then lets the rewrite go on (<pause>.go).
OTHER = textwrap.dedent('''
    import os, sys, time
    import pyarrow as pa
    from pando_iceberg.catalog import load_catalog
    from pando_iceberg.config import load_config
    from pyiceberg.expressions import GreaterThanOrEqual

    home, name, kind, pause = sys.argv[1:5]
    deadline = time.time() + 300
    while not os.path.exists(pause + ".ready"):
        assert time.time() < deadline, "the rewrite did not reach BEFORE_COMMIT"
        time.sleep(0.05)
    try:
        table = load_catalog(load_config(home=home, env={})).load_table(name)
        if kind == "append":
            table.append(pa.table({"id": pa.array(range(90_000, 90_300), pa.int64()),
                                   "k": pa.array([7] * 300, pa.int32())}, schema=table.schema().as_arrow()))
        else:
            table.delete(GreaterThanOrEqual("id", 6000))  # drops whole files and rewrites others
        print("committed", table.metadata.current_snapshot_id)
    finally:
        open(pause + ".go", "w").close()
''')

GEN = "SELECT CAST(id AS BIGINT) AS id, CAST(id % 100 AS INT) AS k FROM range({lo}, {hi})"
WORKLOAD = ["SELECT * FROM {t} WHERE k < 20", "SELECT * FROM {t} WHERE id >= 5000 AND id < 7000",
            "SELECT * FROM {t} WHERE k >= 50 AND k < 60"]


@pytest.mark.parametrize("other", ["append", "delete"])
def test_pando_rewrite_and_a_pyiceberg_commit_from_another_process(spark, catalog, lakehouse_cfg, tmp_path,
                                                                    monkeypatch, other):
    """Spark (this process) parks a Pando rewrite just before its commit; another process commits
    through pyiceberg; then the rewrite commits. An append does not touch the rewritten files, so
    both land; a delete does, so Iceberg refuses the rewrite and the table is the other writer's."""
    name = f"conc.rw_{other}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS conc")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} USING iceberg TBLPROPERTIES ('format-version'='2') AS "
              f"SELECT /*+ REPARTITION(4) */ * FROM ({GEN.format(lo=0, hi=8000)})")
    pause = str(tmp_path / "pause")
    monkeypatch.setenv("PANDO_TEST_PAUSE_BEFORE_COMMIT", pause)
    monkeypatch.setenv("PANDO_TEST_PAUSE_TIMEOUT", "300")
    other_writer = subprocess.Popen([sys.executable, "-c", OTHER, str(lakehouse_cfg.home), name, other, pause],
                                    cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env={**os.environ, "PYTHONPATH": str(REPO)})
    outcome: dict = {}
    try:
        outcome["result"] = rewrite_table(spark, name, [w.format(t=name) for w in WORKLOAD],
                                          RewriteOptions(k=2, sample_rate=1.0, min_block_rows=1000,
                                                         min_sample_rows=1000, seed=3),
                                          io_properties=lakehouse_cfg.pyiceberg_properties())
    except Exception as e:  # noqa: BLE001 - checked below
        outcome["error"] = f"{type(e).__name__}: {e}"
    finally:
        if not os.path.exists(pause + ".ready"):  # the rewrite failed before its commit window
            other_writer.kill()
        out, err = other_writer.communicate(timeout=300)
    assert other_writer.returncode == 0 and out.startswith("committed"), f"{outcome} {err[-3000:]}"
    spark.sql(f"REFRESH TABLE {name}")
    ops = [r.operation for r in spark.sql(f"SELECT operation FROM {name}.snapshots ORDER BY committed_at").collect()]
    rows = spark.sql(f"SELECT count(*), sum(id) FROM {name}").collect()[0]
    if other == "append":
        assert "error" not in outcome, outcome
        assert ops[-2:] == ["append", "replace"], ops
        assert (rows[0], rows[1]) == (8300, sum(range(8000)) + sum(range(90_000, 90_300)))
        # The appended file is not in the layout and is always read; the laid-out ones are pruned.
        flt = "k >= 50 AND k < 60"
        with pruned_table(spark, catalog, name, flt) as (df, plan):
            got = sorted(r.id for r in df.select("id").collect())
        assert got == sorted(r.id for r in spark.sql(f"SELECT id FROM {name} WHERE {flt}").collect())
        assert plan.explain.fallback_reason is None and plan.explain.pando_files < plan.explain.total_files
    else:
        assert "error" in outcome and "result" not in outcome
        assert "replace" not in ops, ops
        assert (rows[0], rows[1]) == (6000, sum(range(6000)))
