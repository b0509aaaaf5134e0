"""Where a rewrite's time and memory go: the Spark stages a phase ran, by what they did, and the
peak resident memory of the driver's processes per phase (what the bench reports for Pando's
rewrites and Iceberg's alike).

- ``last_job_id`` before a phase and ``stage_seconds`` after it: the wall seconds of the Spark
  stages the phase's jobs ran, read from Spark's status store, summed by kind: ``read`` (reads
  its input, shuffles nothing: a count, the range sampling of a sort), ``read+shuffle`` (reads
  its input and writes a shuffle: Pando's routing runs there), ``shuffle+write`` (reads a
  shuffle: the sort within tasks and the writing of files).
- ``peak_rss_mib``: the peak resident set, in MiB, of the driver's Python process, of its JVM
  (in ``local`` mode the executors too) and of the largest Python worker of that JVM, since the
  previous call (Linux's VmHWM, reset through ``/proc/<pid>/clear_refs``); {} elsewhere.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

STAGE_KINDS = ("read", "read+shuffle", "shuffle+write")
_HWM = re.compile(r"VmHWM:\s+(\d+)\s+kB")


def last_job_id(spark: Any) -> int | None:
    """The id of the newest Spark job the status store knows (-1: none yet; None: no store to read)."""
    try:
        jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
        return int(jobs.apply(0).jobId()) if jobs.size() else -1
    except Exception:  # a measurement never fails the work it measures
        return None


def stage_seconds(spark: Any, after_job: int | None) -> dict[str, float]:
    """Wall seconds (submission to completion) of the completed stages of the jobs newer than
    ``after_job``, summed by kind (``STAGE_KINDS``; module docstring). A stage a job skipped, its
    output reused, counts nothing; {} when the status store cannot be read."""
    if after_job is None:
        return {}
    try:
        return _stage_seconds(spark, after_job)
    except Exception:  # a measurement never fails the work it measures
        return {}


def _stage_seconds(spark: Any, after_job: int) -> dict[str, float]:
    sc = spark.sparkContext._jsc.sc()
    sc.listenerBus().waitUntilEmpty(10_000)  # the status store is fed by Spark's listener bus
    store = sc.statusStore()
    jobs = store.jobsList(None)  # newest first
    seen: set[int] = set()
    out: dict[str, float] = {}
    for i in range(jobs.size()):
        job = jobs.apply(i)
        if int(job.jobId()) <= after_job:
            break
        ids = job.stageIds()
        for j in range(ids.size()):
            stage_id = int(ids.apply(j))
            if stage_id in seen:
                continue
            seen.add(stage_id)
            stage = store.lastStageAttempt(stage_id)
            if str(stage.status()) != "COMPLETE" or stage.submissionTime().isEmpty() \
                    or stage.completionTime().isEmpty():
                continue
            wall = (stage.completionTime().get().getTime() - stage.submissionTime().get().getTime()) / 1000
            kind = ("shuffle+write" if stage.shuffleReadBytes() > 0
                    else "read+shuffle" if stage.shuffleWriteBytes() > 0 else "read")
            out[kind] = out.get(kind, 0.0) + wall
    return {k: out[k] for k in STAGE_KINDS if k in out}


def peak_rss_mib(spark: Any) -> dict[str, float]:
    """The peak resident set (MiB) since the previous call of the driver's Python process
    (``driver``), its JVM (``jvm``) and the JVM's largest Python worker (``python-worker``),
    each peak then reset; a process whose /proc cannot be read is left out."""
    out: dict[str, float] = {}
    driver = os.getpid()
    jvm = _jvm_pid(spark)
    for name, pids in (("driver", [driver]), ("jvm", [jvm] if jvm else []),
                       ("python-worker", _descendants(jvm) if jvm else [])):
        peaks = [p for p in (_peak_and_reset(pid) for pid in pids) if p is not None]
        if peaks:
            out[name] = round(max(peaks) / 1024, 1)
    return out


def _jvm_pid(spark: Any) -> int | None:
    try:
        return int(spark._jvm.java.lang.ProcessHandle.current().pid())
    except Exception:  # no py4j gateway (Spark Connect): no JVM of ours to read
        return None


def _peak_and_reset(pid: int) -> int | None:
    """VmHWM of ``pid`` in kB, then reset to its current resident set; None when unreadable."""
    try:
        match = _HWM.search(Path(f"/proc/{pid}/status").read_text())
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return None
    return int(match.group(1)) if match else None


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (its Python workers, forked by the pyspark daemon)."""
    children: dict[int, list[int]] = {}
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:  # no /proc (not Linux)
        return []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2:].split()[1])  # the field after the state
        children.setdefault(parent, []).append(int(entry.name))
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out
