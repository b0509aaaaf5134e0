"""Reliability of Pando rewrites (ARCHITECTURE.md invariant 3): concurrent writers, crashes,
and ``pando cleanup``.

The Pando rewrite under test runs in a separate OS process (its own Spark session on the same
embedded lakehouse) and is parked at a stage with the rewrite's test hook
(``PANDO_TEST_PAUSE_<STAGE>=<path>``: it creates ``<path>.ready`` and waits for ``<path>.go``).

* Concurrent writers: while the rewrite is parked between writing its files and committing,
  this process commits an append, a merge-on-read DELETE, Iceberg's ``rewrite_data_files`` or
  a second Pando rewrite ("window" trials: the other writer commits inside the window), or
  the rewrite is released 0 s / 1 s after the other writer starts ("race" trials: the order is
  up to the machines; both orders occur). Every outcome
  must be a valid commit or a clean abort with a ``CommitConflict``; the table's row count and
  order-independent checksum must equal a serial reference computed from the generator (not
  from Iceberg) for the operations that committed; an aborted rewrite leaves nothing on disk
  and the table exactly as the other writer left it.
* Crashes: the rewrite process tree is SIGKILLed at each stage; the table is unchanged and
  readable, and ``pando cleanup`` lists (dry run) and with ``--apply`` removes exactly the
  leftovers, never a file the table references.

PANDO_RELIABILITY_TRIALS (default 3) sets the trials per concurrent scenario.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pando_iceberg.soak import kill_tree
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table

pytestmark = pytest.mark.spark

TRIALS = int(os.environ.get("PANDO_RELIABILITY_TRIALS", "3"))
ROWS = 12_000
APPENDED = (ROWS, ROWS + 500)
DELETED = "id % 10 = 3"
GEN = ("SELECT CAST(id AS BIGINT) AS id, CAST(id % 100 AS INT) AS k, concat('s', CAST(id % 37 AS STRING)) AS s, "
       "date_add(date '2024-01-01', CAST(id % 365 AS INT)) AS d, CAST(id * 1.5 AS DOUBLE) AS x FROM range({lo}, {hi})")
CHECKSUM = "SELECT count(*) AS n, sum(CAST(xxhash64(*) AS DECIMAL(38, 0))) AS h FROM {src}"
WORKLOAD = ["SELECT * FROM {t} WHERE k < 20", "SELECT * FROM {t} WHERE d >= date '2024-09-01'",
            "SELECT * FROM {t} WHERE s = 's3'", "SELECT * FROM {t} WHERE k >= 50 AND k < 70"]
# The guard off: these tests re-lay out a laid-out table to crash its rewrite at each stage, and a
# second layout of the same workload need not read less than the first (the guard could refuse it).
OPTIONS = dict(k=2, sample_rate=1.0, min_block_rows=1500, min_sample_rows=1000, seed=5, max_template_regression="off")
READY_TIMEOUT = 240
REPO = Path(__file__).resolve().parents[2]

WORKER = r'''
import json, os, sys
from pando_iceberg.config import load_config
from pando_iceberg.spark.session import start_spark
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table

cfg = load_config(home=sys.argv[1], env={}, overrides={"spark": {"master": "local[2]", "driver_memory": "1g"}})
spark = start_spark(cfg, app_name="pando-reliability-worker")
print("READY", flush=True)
for line in sys.stdin:
    req = json.loads(line)
    os.environ.update(req.get("env", {}))
    try:
        r = rewrite_table(spark, req["table"], req["workload"], RewriteOptions(**req["options"]),
                          io_properties=cfg.pyiceberg_properties())
        out = {"ok": True, "snapshot_id": r.snapshot_id, "base_snapshot_id": r.base_snapshot_id, "layout_id": r.layout_id}
    except Exception as e:
        out = {"ok": False, "type": type(e).__name__, "message": str(e)}
    for k in req.get("env", {}):
        os.environ.pop(k, None)
    print("RESULT " + json.dumps(out), flush=True)
'''


# ---- a rewrite in another process -----------------------------------------------------------

class Worker:
    """A Python process with its own Spark session that runs ``rewrite_table`` on request."""

    def __init__(self, home: Path, script: Path, log: Path, env: dict[str, str] | None = None):
        self.log = open(log, "ab")
        self.proc = subprocess.Popen([sys.executable, str(script), str(home)], cwd=str(REPO), text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
                                     start_new_session=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.started = False

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put("EOF")

    def _expect(self, prefix: str, timeout: float) -> str:
        deadline = time.time() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.time()))
            except queue.Empty:
                raise AssertionError(f"worker: no {prefix!r} within {timeout} s (log {self.log.name})") from None
            if line == "EOF":
                raise AssertionError(f"worker exited (code {self.proc.poll()}); see {self.log.name}")
            if line.startswith(prefix):
                return line[len(prefix):]

    def wait_started(self):
        if not self.started:
            self._expect("READY", READY_TIMEOUT)
            self.started = True

    def submit(self, table: str, env: dict[str, str] | None = None):
        self.wait_started()
        req = {"table": table, "workload": [w.format(t=table) for w in WORKLOAD], "options": OPTIONS, "env": env or {}}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()

    def result(self, timeout: float = 300) -> dict:
        return json.loads(self._expect("RESULT ", timeout))

    def wait_ready_file(self, path: Path, timeout: float = READY_TIMEOUT):
        deadline = time.time() + timeout
        while not Path(f"{path}.ready").exists():
            if self.proc.poll() is not None:
                raise AssertionError(f"worker exited (code {self.proc.returncode}) before {path}.ready; see {self.log.name}")
            assert time.time() < deadline, f"{path}.ready did not appear within {timeout} s; see {self.log.name}"
            time.sleep(0.05)

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill_tree()
        self.log.close()

    def kill_tree(self):
        """SIGKILL the whole process tree at once (a machine crash, as seen by the table)."""
        pids = kill_tree(self.proc.pid)
        self.proc.wait(timeout=60)
        deadline = time.time() + 30  # the killed processes are reaped by their parents / init
        while any(Path(f"/proc/{p}").exists() and "(Z)" not in _state_of(p) for p in pids[1:]):
            assert time.time() < deadline, "processes of the killed rewrite still alive"
            time.sleep(0.1)


def _state_of(pid: int) -> str:
    try:
        s = Path(f"/proc/{pid}/stat").read_text()
        return "(Z)" if s.rsplit(")", 1)[1].split()[0] == "Z" else "alive"
    except OSError:
        return "(Z)"


@pytest.fixture(scope="module")
def worker_script(tmp_path_factory):
    d = tmp_path_factory.mktemp("reliability")
    script = d / "rewrite_worker.py"
    script.write_text(WORKER)
    return script


@pytest.fixture(scope="module")
def worker(lakehouse_cfg, worker_script, spark):
    w = Worker(lakehouse_cfg.home, worker_script, worker_script.with_name("worker.log"))
    yield w
    w.close()


# ---- tables, checksums, references ------------------------------------------------------------

def _make_table(spark, name: str) -> None:
    ns = name.rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} USING iceberg TBLPROPERTIES ('format-version'='2', "
              "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
              "'write.merge.mode'='merge-on-read') AS SELECT /*+ REPARTITION(4) */ * FROM (" + GEN.format(lo=0, hi=ROWS) + ")")


def _state(spark, name: str) -> tuple[int, int]:
    spark.sql(f"REFRESH TABLE {name}")
    r = spark.sql(CHECKSUM.format(src=name)).collect()[0]
    return int(r.n), int(r.h)


def _reference(spark, appended: bool, deleted: bool) -> tuple[int, int]:
    """The serial result, computed from the generator without Iceberg: the base rows, plus the
    appended ones if the append committed, minus the deleted ones if the DELETE committed."""
    src = GEN.format(lo=0, hi=APPENDED[1] if appended else ROWS)
    src = f"({src}) WHERE NOT ({DELETED})" if deleted else f"({src})"
    r = spark.sql(CHECKSUM.format(src=src)).collect()[0]
    return int(r.n), int(r.h)


def _local(location: str) -> Path:
    return Path(re.sub(r"^file:(//)?", "", location))


def _pando_files(catalog, name: str) -> tuple[set[Path], set[Path]]:
    """Files under data/pando-*/ and sidecars under <location>.pando/ on disk."""
    loc = _local(catalog.load_table(name).location().rstrip("/"))
    data = {p for p in (loc / "data").glob("pando-*/**/*") if p.is_file()}
    side = {p for p in Path(f"{loc}.pando").glob("*.puffin")}
    return data, side


def _snapshots(catalog, name: str) -> list:
    t = catalog.load_table(name)
    return sorted(t.metadata.snapshots, key=lambda s: (s.sequence_number, s.timestamp_ms))


def _pyiceberg_rows(catalog, name: str) -> int:
    return catalog.load_table(name).scan().to_arrow().num_rows


# ---- 1. concurrent writers ----------------------------------------------------------------------

def _other_writer(kind: str, spark, cfg, name: str) -> dict:
    """Commit the other writer's operation from this process; {"ok", "error", "snapshot_id"}."""
    try:
        if kind == "append":
            spark.sql(f"INSERT INTO {name} " + GEN.format(lo=APPENDED[0], hi=APPENDED[1]))
        elif kind == "delete":
            spark.sql(f"DELETE FROM {name} WHERE {DELETED}")
        elif kind == "iceberg_rewrite":
            spark.sql(f"CALL {cfg.catalog.name}.system.rewrite_data_files(table => '{name}', "
                      "options => map('rewrite-all', 'true', 'min-input-files', '1'))")
        elif kind == "pando":
            r = rewrite_table(spark, name, [w.format(t=name) for w in WORKLOAD], RewriteOptions(**OPTIONS),
                              io_properties=cfg.pyiceberg_properties())
            return {"ok": True, "snapshot_id": r.snapshot_id, "layout_id": r.layout_id, "base": r.base_snapshot_id}
        else:
            raise ValueError(kind)
    except Exception as e:  # noqa: BLE001 - the outcome is checked by the caller
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    spark.sql(f"REFRESH TABLE {name}")
    from pando_iceberg.spark.iceberg_jvm import load_table

    return {"ok": True, "snapshot_id": int(load_table(spark, name).currentSnapshot().snapshotId())}


def _first_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines()]
    return next((ln[:300] for ln in lines if "Exception:" in ln and not ln.startswith("Py4J")), lines[0][:300])


# Trial i runs TRIAL_MODES[i % 3]: "window" = the other writer commits while the rewrite is
# parked before its commit (deterministic interleaving); "race" = the other writer starts and
# the rewrite is released after the delay (0 s: the rewrite usually commits first; 1 s: the
# two commits land close together, either may win).
TRIAL_MODES = [("window", 0.0), ("race", 0.0), ("race", 1.0)]
SCENARIOS = ["append", "delete", "iceberg_rewrite", "pando"]
# What must happen when the other writer commits inside the rewrite's window (rewrite paused
# between writing its files and committing): True = the Pando rewrite commits too.
WINDOW_EXPECTS_PANDO_COMMIT = {"append": True, "delete": False, "iceberg_rewrite": False, "pando": False}


@pytest.mark.parametrize("trial", range(TRIALS))
@pytest.mark.parametrize("kind", SCENARIOS)
def test_concurrent_writer(spark, catalog, lakehouse_cfg, worker, tmp_path, kind, trial):
    mode, delay = TRIAL_MODES[trial % len(TRIAL_MODES)]
    name = f"rel_{kind}_{trial}.t"
    _make_table(spark, name)
    base = _snapshots(catalog, name)[-1].snapshot_id
    assert _state(spark, name) == _reference(spark, appended=False, deleted=False)

    pause = tmp_path / "pause"
    worker.submit(name, env={"PANDO_TEST_PAUSE_BEFORE_COMMIT": str(pause)})
    worker.wait_ready_file(pause)
    mine_data, mine_sidecars = _pando_files(catalog, name)  # the parked rewrite's, nothing else yet
    assert mine_data and len(mine_sidecars) == 1

    if mode == "window":
        other = _other_writer(kind, spark, lakehouse_cfg, name)
        assert other["ok"], other
        left_by_other = catalog.load_table(name)
        Path(f"{pause}.go").touch()
        res = worker.result()
    else:  # race: the other writer starts, the rewrite is released `delay` seconds later
        release = threading.Timer(delay, Path(f"{pause}.go").touch)  # the timer only touches a file
        release.start()
        other = _other_writer(kind, spark, lakehouse_cfg, name)
        release.join()
        res = worker.result()
        left_by_other = None
    if res["ok"]:
        assert res["base_snapshot_id"] == base

    print(f"\nOUTCOME {kind} trial={trial} mode={mode}{f'({delay:g}s)' if mode == 'race' else ''} pando={'commit' if res['ok'] else 'abort: ' + res['message']} "
          f"other={'commit' if other['ok'] else 'failed: ' + _first_error(other['error'])}")
    # ---- outcome: a valid commit or a clean abort with a clear CommitConflict ----
    if not res["ok"]:
        assert res["type"] == "CommitConflict", res
        assert "changed concurrently" in res["message"] and "not committed" in res["message"], res
        assert ("Missing required files" in res["message"] or "found new" in res["message"]
                or "delete" in res["message"].lower()), res
    if mode == "window":
        assert res["ok"] is WINDOW_EXPECTS_PANDO_COMMIT[kind], (res, other)
    assert res["ok"] or other["ok"], (res, other)
    snaps = _snapshots(catalog, name)
    mine = next(iter(mine_sidecars)).stem  # the parked rewrite's layout id
    assert res.get("layout_id", mine) == mine
    pando_snaps = [s for s in snaps if s.summary.get("pando.layout-id") == mine]
    assert len(pando_snaps) == (1 if res["ok"] else 0)
    if res["ok"]:
        assert pando_snaps[0].summary.operation.value == "replace" and pando_snaps[0].snapshot_id == res["snapshot_id"]
    # exactly one new snapshot per committed operation, nothing else
    order = [s.snapshot_id for s in snaps]
    assert order[0] == base or base in order
    others = [sid for sid in order[order.index(base) + 1:] if sid != res.get("snapshot_id")]
    assert len(others) == (1 if other["ok"] else 0), (order, res, other)
    assert len(order) == order.index(base) + 1 + int(res["ok"]) + int(bool(other["ok"]))
    if kind in ("iceberg_rewrite", "pando", "delete") and res["ok"] and other["ok"]:
        # Both rewrote / deleted from the same files only if they ran one after the other: the
        # parked rewrite (based on the original snapshot) must have committed first, on the base.
        assert order.index(res["snapshot_id"]) == order.index(base) + 1, (order, res, other)
    if not res["ok"]:  # the table is exactly as the other writer left it
        assert catalog.load_table(name).current_snapshot().snapshot_id == others[0]

    # ---- content: no row lost or duplicated, deleted rows stay deleted ----
    state = _state(spark, name)
    want = _reference(spark, appended=kind == "append" and other["ok"], deleted=kind == "delete" and other["ok"])
    assert state == want, (kind, mode, res, other)
    if kind == "delete" and other["ok"]:
        assert spark.sql(f"SELECT count(*) FROM {name} WHERE {DELETED}").collect()[0][0] == 0
    assert _pyiceberg_rows(catalog, name) == state[0]

    # ---- on disk ----
    data_now, sidecars_now = _pando_files(catalog, name)
    table = catalog.load_table(name)
    if res["ok"]:
        assert mine_data <= data_now and mine_sidecars <= sidecars_now
        if table.current_snapshot().snapshot_id == res["snapshot_id"] or kind == "append":
            assert table.properties["pando.layout-id"] == res["layout_id"]
    else:
        assert not (mine_data & data_now) and not (mine_sidecars & sidecars_now), "the aborted rewrite left files"
        assert not any(p.parent.exists() for p in mine_data), "the aborted rewrite left its data directory"
        assert table.properties.get("pando.layout-id") != mine
        if left_by_other is not None:  # exactly as the other writer left it
            assert table.current_snapshot().snapshot_id == left_by_other.current_snapshot().snapshot_id
            assert dict(table.properties) == dict(left_by_other.properties)
            assert len(table.metadata.snapshots) == len(left_by_other.metadata.snapshots)
    if kind == "append" and res["ok"] and mode == "window":
        # the appended rows live in a file outside the layout, which the planner always reads
        from pando_iceberg.planner import plan_scan

        appended = next(s for s in snaps if s.snapshot_id == other["snapshot_id"])
        ex = plan_scan(table, "k < 20").explain
        assert ex.fallback_reason is None, ex
        assert ex.files_outside_layout == int(appended.summary["added-data-files"]) >= 1, ex


# ---- 2. crashes, 3. cleanup -----------------------------------------------------------------

CRASH_STAGES = ["SAMPLING", "OPTIMIZING", "WRITING", "BEFORE_COMMIT"]
CRASH_TABLE = "rel_crash.t"


def _referenced_on_disk(catalog, name: str) -> list[Path]:
    """Every file the table's metadata references: data and delete files and manifests of all
    snapshots, manifest lists, metadata files, and the sidecars of the current and older layouts."""
    t = catalog.load_table(name)
    io = t.io
    out = {t.metadata_location} | {e.metadata_file for e in t.metadata.metadata_log}
    for s in t.metadata.snapshots:
        out.add(s.manifest_list)
        for m in s.manifests(io):
            out.add(m.manifest_path)
            out |= {e.data_file.file_path for e in m.fetch_manifest_entry(io, discard_deleted=False)}
    loc = t.location().rstrip("/")
    layouts = {s.summary.get("pando.layout-id") for s in t.metadata.snapshots} - {None}
    out |= {f"{loc}.pando/{lid}.puffin" for lid in layouts}
    return sorted(_local(p) for p in out)


@pytest.fixture(scope="module")
def crashed(spark, catalog, lakehouse_cfg, worker_script):
    """A table with two Pando layouts, a merge-on-read DELETE and an append; then one rewrite
    process per stage, parked there and SIGKILLed with its whole process tree."""
    name = CRASH_TABLE
    _make_table(spark, name)
    opts = RewriteOptions(**OPTIONS)
    wl = [w.format(t=name) for w in WORKLOAD]
    rewrite_table(spark, name, wl, opts, io_properties=lakehouse_cfg.pyiceberg_properties())
    spark.sql(f"DELETE FROM {name} WHERE {DELETED}")
    rewrite_table(spark, name, wl, opts, io_properties=lakehouse_cfg.pyiceberg_properties())
    spark.sql(f"INSERT INTO {name} " + GEN.format(lo=APPENDED[0], hi=APPENDED[1]))
    spark.sql(f"DELETE FROM {name} WHERE id = {APPENDED[0]} OR id = 7")  # delete files on live layout files
    before = {"snapshot": catalog.load_table(name).current_snapshot().snapshot_id, "state": _state(spark, name),
              "properties": dict(catalog.load_table(name).properties), "referenced": _referenced_on_disk(catalog, name),
              "files": _pando_files(catalog, name)}
    assert all(p.exists() for p in before["referenced"])
    runs = {}
    pause_dir = worker_script.parent / "crash"
    pause_dir.mkdir(exist_ok=True)
    for stage in CRASH_STAGES:
        pause = pause_dir / stage
        w = Worker(lakehouse_cfg.home, worker_script, worker_script.with_name(f"crash-{stage}.log"),
                   env={f"PANDO_TEST_PAUSE_{stage}": str(pause)})
        try:
            w.submit(name)
            w.wait_ready_file(pause)
            time.sleep(0.5 if stage == "WRITING" else 0.1)  # let the other executor task write a file too
            w.kill_tree()
        finally:
            w.close()
        data, side = _pando_files(catalog, name)
        runs[stage] = {"data": data - before["files"][0], "sidecars": side - before["files"][1],
                       "snapshot": catalog.load_table(name).current_snapshot().snapshot_id,
                       "state": _state(spark, name), "rows_pyiceberg": _pyiceberg_rows(catalog, name),
                       "properties": dict(catalog.load_table(name).properties)}
    return {"name": name, "before": before, "runs": runs}


@pytest.mark.parametrize("stage", CRASH_STAGES)
def test_crash_leaves_the_table_unchanged(crashed, stage):
    before, run = crashed["before"], crashed["runs"][stage]
    assert run["snapshot"] == before["snapshot"]
    assert run["state"] == before["state"]  # Spark reads it, same rows
    assert run["rows_pyiceberg"] == before["state"][0]  # pyiceberg reads it
    assert run["properties"] == before["properties"]  # the layout pointer did not move
    if stage in ("SAMPLING", "OPTIMIZING"):
        assert not run["data"] and not run["sidecars"]  # nothing written yet
    elif stage == "WRITING":
        assert run["data"] and not run["sidecars"]
    else:
        assert run["data"] and len(run["sidecars"]) == 1


def _leftovers(crashed) -> set[Path]:
    out: set[Path] = set()
    for run in crashed["runs"].values():
        out |= run["data"] | run["sidecars"]
    return out


def _cli(capsys, *argv) -> tuple[int, dict]:
    from pando_iceberg.cli import main

    capsys.readouterr()
    code = main(list(argv) + ["--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_cleanup_dry_run_lists_leftovers_and_deletes_nothing(crashed, catalog, lakehouse_cfg, capsys, spark):
    from pando_iceberg.cleanup import cleanup_table

    name, left = crashed["name"], _leftovers(crashed)
    assert left, "the crashes left no files: the cleanup test would prove nothing"
    # default age guard: everything is minutes old, a rewrite might still be running
    report = cleanup_table(catalog, name)
    assert {_local(x.location) for x in report.leftovers} == left
    assert not report.removable and all(x.action == "kept: recent" for x in report.leftovers)

    code, doc = _cli(capsys, "cleanup", name, "--home", str(lakehouse_cfg.home), "--older-than-minutes", "0")
    assert code == 0 and doc["mode"] == "dry run"
    listed = {_local(r["location"]) for r in doc["rows"]}
    assert listed == left
    assert all(r["action"] == "would delete" for r in doc["rows"])
    assert doc["removable_files"] == len(left) and doc["removable_bytes"] == sum(p.stat().st_size for p in left)
    assert doc["referenced_pando_files"] >= 1
    assert all(p.exists() for p in left)  # a dry run deletes nothing
    by_kind = {r["kind"] for r in doc["rows"]}
    assert by_kind == {"data", "sidecar"}
    # human output too
    from pando_iceberg.cli import main

    capsys.readouterr()
    assert main(["cleanup", name, "--home", str(lakehouse_cfg.home), "--older-than-minutes", "0"]) == 0
    text = capsys.readouterr().out
    assert "dry run" in text and "would delete" in text


def test_cleanup_apply_removes_leftovers_and_nothing_referenced(crashed, catalog, lakehouse_cfg, capsys, spark):
    name, left, before = crashed["name"], _leftovers(crashed), crashed["before"]
    code, doc = _cli(capsys, "cleanup", name, "--home", str(lakehouse_cfg.home), "--apply", "--older-than-minutes", "0")
    assert code == 0 and doc["mode"] == "apply"
    assert {_local(r["location"]) for r in doc["rows"]} == left and all(r["action"] == "deleted" for r in doc["rows"])
    assert not any(p.exists() for p in left)
    assert not any(p.parent.exists() for p in left if p.suffix == ".parquet"), "empty pando-* directories left"
    # every file the table references is still there, the table reads the same, the layout is used
    assert all(p.exists() for p in before["referenced"])
    assert all(p.exists() for p in _referenced_on_disk(catalog, name))
    t = catalog.load_table(name)
    assert t.current_snapshot().snapshot_id == before["snapshot"]
    assert _state(spark, name) == before["state"] and _pyiceberg_rows(catalog, name) == before["state"][0]
    from pando_iceberg.planner import plan_scan

    ex = plan_scan(t, "k < 20").explain
    assert ex.fallback_reason is None and ex.pando_files <= ex.iceberg_files  # the current layout still loads
    # idempotent: nothing left to list
    code, doc = _cli(capsys, "cleanup", name, "--home", str(lakehouse_cfg.home), "--older-than-minutes", "0")
    assert code == 0 and doc["rows"] == [] and doc["removable_files"] == 0


def test_cleanup_unknown_table_and_bad_age(lakehouse_cfg, capsys):
    from pando_iceberg.cli import main

    assert main(["cleanup", "rel_crash.nope", "--home", str(lakehouse_cfg.home)]) == 2
    assert main(["cleanup", CRASH_TABLE, "--home", str(lakehouse_cfg.home), "--older-than-minutes", "-1"]) == 2
    err = capsys.readouterr().err
    assert "older-than-minutes" in err


# ---- failures inside the rewrite process ------------------------------------------------------

def test_failed_write_job_leaves_no_files(spark, catalog, lakehouse_cfg, tmp_path, monkeypatch):
    """A Spark write job that fails after some tasks wrote files (here: a task's test hook times
    out) leaves no data file and no sidecar: the rewrite removes its whole pando-<id> directory,
    including files of tasks it never heard back from."""
    name = "rel_fail.t"
    _make_table(spark, name)
    before = (_snapshots(catalog, name)[-1].snapshot_id, _state(spark, name))
    monkeypatch.setenv("PANDO_TEST_PAUSE_WRITING", str(tmp_path / "never"))
    monkeypatch.setenv("PANDO_TEST_PAUSE_TIMEOUT", "1")
    with pytest.raises(Exception) as info:
        rewrite_table(spark, name, [w.format(t=name) for w in WORKLOAD], RewriteOptions(**OPTIONS),
                      io_properties=lakehouse_cfg.pyiceberg_properties())
    assert "did not appear" in str(info.value)
    assert Path(f"{tmp_path / 'never'}.ready").exists()  # a file was complete when the task failed
    data, sidecars = _pando_files(catalog, name)
    assert not data and not sidecars
    from pando_iceberg.cleanup import cleanup_table

    assert cleanup_table(catalog, name, older_than_minutes=0).leftovers == []
    assert (_snapshots(catalog, name)[-1].snapshot_id, _state(spark, name)) == before


def test_conflict_message_is_short_and_clear():
    from pando_iceberg.spark.iceberg_jvm import conflict_message

    missing = conflict_message("ValidationException", "Missing required files to delete: file:/w/a.parquet,file:/w/b.parquet")
    assert missing.startswith("the table changed concurrently and the rewrite was not committed: 2 data file(s)")
    assert "(ValidationException: Missing required files to delete, e.g. file:/w/a.parquet)" in missing
    deletes = conflict_message("ValidationException", "Cannot commit, found new position delete for replaced data "
                               "file: GenericDataFile{content=data, file_path=file:/w/a.parquet, file_format=PARQUET, "
                               "record_count=3000}")
    assert "added row-level deletes" in deletes and "e.g. file:/w/a.parquet" in deletes and "record_count" not in deletes
