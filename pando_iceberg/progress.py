"""A tiny progress reporter for the long steps of a re-layout (sampling, top-down, bottom-up,
routing/writing, commit).

    progress = Progress()                      # enabled only when stderr is a terminal
    progress("sampling lineitem")              # "… sampling lineitem"
    with progress.step("routing", total=40) as s:
        for batch in batches:
            ...
            s.advance()                        # routing [#####.....] 12/40 00:05 ETA 00:12

A ``Progress`` is also a plain ``Callable[[str], None]``, the type the procedures take as
``progress``; ``progress_step(progress, name, total)`` gives a step for any such callable.
When the stream is not a terminal nothing at all is written: logs and ``--json`` stay clean.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Literal, TextIO

__all__ = ["Progress", "Step", "format_duration", "progress_step", "spark_job_progress"]

BAR_WIDTH = 20
SPINNER = "|/-\\"


def format_duration(seconds: float) -> str:
    """``mm:ss``, or ``h:mm:ss`` from an hour on."""
    s = max(0, round(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # closed or not a file
        return False


class Step:
    """One long step: a single line rewritten in place (``\\r``) as ``advance`` is called."""

    def __init__(self, progress: Progress, name: str, total: int | None):
        self.progress = progress
        self.name = name
        self.total = None if total is None else max(0, int(total))
        self.done = 0
        self._start = progress.clock()
        self._last_draw = float("-inf")
        self._width = 0  # length of the last line drawn, to blank what a shorter line leaves
        self._spin = 0
        self._lock = threading.Lock()  # routing/writing may advance from worker threads

    # --- context manager --------------------------------------------------------------------

    def __enter__(self) -> Step:
        self._start = self.progress.clock()
        self._draw(force=True)
        return self

    def __exit__(self, et, ev, tb) -> Literal[False]:
        self._draw(force=True, suffix=" failed" if et is not None else "", end=True)
        return False

    # --- counting ---------------------------------------------------------------------------

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            finished = self.total is not None and self.done >= self.total
            self._draw(force=finished)

    def update(self, done: int, total: int | None = None) -> None:
        """Set the count (and the total, when it becomes known), e.g. from Spark's task counts."""
        with self._lock:
            if total is not None:
                self.total = max(0, int(total))
            self.done = int(done)
            self._draw()

    def finish(self) -> None:
        """The step is complete: a bar whose total was an upper bound jumps to full."""
        with self._lock:
            if self.total is not None:
                self.done = max(self.done, self.total)
                self.total = self.done

    def line(self, suffix: str = "") -> str:
        """The text shown now, e.g. ``routing [#####...............] 5/20 00:05 ETA 00:15``."""
        elapsed = self.progress.clock() - self._start
        if self.total is None:
            spin = SPINNER[self._spin % len(SPINNER)]
            return f"{self.name} {spin} {self.done} {format_duration(elapsed)}{suffix}"
        total = self.total
        frac = 1.0 if total == 0 else min(1.0, self.done / total)
        filled = round(frac * BAR_WIDTH)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        if self.done >= total:
            eta = "ETA 00:00"
        elif self.done > 0:
            eta = "ETA " + format_duration(elapsed / self.done * (total - self.done))
        else:
            eta = "ETA --:--"
        return f"{self.name} [{bar}] {self.done}/{total} {format_duration(elapsed)} {eta}{suffix}"

    def _draw(self, force: bool = False, suffix: str = "", end: bool = False) -> None:
        p = self.progress
        if not p.enabled:
            return
        now = p.clock()
        if not force and now - self._last_draw < p.min_interval:
            return
        self._last_draw = now
        self._spin += 1
        text = self.line(suffix)
        pad = " " * max(0, self._width - len(text))
        self._width = len(text)
        p.stream.write("\r" + text + pad + ("\n" if end else ""))
        p.stream.flush()


class Progress:
    """Progress lines on ``stream`` (default: stderr), only when ``enabled`` (default: the
    stream is a terminal). Callable with a message, like the procedures' ``progress``."""

    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None, *,
                 min_interval: float = 0.1, clock: Callable[[], float] = time.monotonic):
        self.stream = sys.stderr if stream is None else stream
        self.enabled = _is_tty(self.stream) if enabled is None else bool(enabled)
        self.min_interval = min_interval  # seconds between redraws of a step line
        self.clock = clock

    def __call__(self, message: str) -> None:
        if self.enabled:
            self.stream.write(f"… {message}\n")
            self.stream.flush()

    def step(self, name: str, total: int | None = None) -> Step:
        return Step(self, name, total)


class _QuietStep:
    """A step for a progress callable that has no ``step``: one message, then nothing."""

    def __init__(self, say: Callable[[str], None], name: str):
        self.say, self.name, self.done = say, name, 0

    def __enter__(self) -> _QuietStep:
        self.say(self.name)
        return self

    def __exit__(self, et, ev, tb) -> Literal[False]:
        return False

    def advance(self, n: int = 1) -> None:
        self.done += n

    def update(self, done: int, total: int | None = None) -> None:
        self.done = int(done)

    def finish(self) -> None:
        pass


def progress_step(progress: Callable[[str], None] | None, name: str, total: int | None = None) -> Any:
    """``progress.step(name, total)`` when ``progress`` is a ``Progress``; for any other
    ``Callable[[str], None]`` a step that says ``name`` once; for None a silent step."""
    if isinstance(progress, Progress):
        return progress.step(name, total)
    return _QuietStep(progress if progress is not None else (lambda _m: None), name)


class _SparkJobs:
    """A step counting the tasks of the Spark jobs run inside it (all their stages), read from
    Spark's status tracker by a polling thread (a few times a second) — nothing in the jobs
    themselves is slowed down. The jobs are tagged with a job group of their own."""

    def __init__(self, spark: Any, step: Any, interval: float = 0.25):
        self.sc = spark.sparkContext
        self.step = step
        self.interval = interval
        self.group = f"pando-progress-{id(self)}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._previous: tuple[Any, Any] = (None, None)

    def __enter__(self) -> Any:
        self.step.__enter__()
        self._previous = (self.sc.getLocalProperty("spark.jobGroup.id"),
                          self.sc.getLocalProperty("spark.job.description"))
        self.sc.setJobGroup(self.group, self.step.name)
        self._thread = threading.Thread(target=self._poll, name="pando-progress", daemon=True)
        self._thread.start()
        return self.step

    def _counts(self) -> tuple[int, int]:
        tracker = self.sc.statusTracker()
        done = total = 0
        for job in tracker.getJobIdsForGroup(self.group):
            info = tracker.getJobInfo(job)
            job_done = job_total = 0
            for stage in (info.stageIds if info else []):
                s = tracker.getStageInfo(stage)
                if s is not None:
                    job_total += s.numTasks
                    job_done += s.numCompletedTasks
            succeeded = info is not None and str(info.status) == "SUCCEEDED"
            done += job_done
            total += job_done if succeeded else job_total  # stages a finished job skipped never ran
        return done, total

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                done, total = self._counts()
            except Exception:  # the JVM is going away: stop reporting, never fail the job
                return
            if total:
                self.step.update(done, total)

    def __exit__(self, et, ev, tb) -> bool:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        try:
            if et is None:
                done, total = self._counts()
                if total:
                    self.step.update(done, total)
                self.step.finish()
            group, description = self._previous
            self.sc.setLocalProperty("spark.jobGroup.id", group)
            self.sc.setLocalProperty("spark.job.description", description)
        except Exception:
            pass
        return self.step.__exit__(et, ev, tb)


def spark_job_progress(spark: Any, progress: Callable[[str], None] | None, name: str) -> Any:
    """``with spark_job_progress(spark, progress, "routing + writing"): df.collect()`` — a bar
    of the Spark tasks done / total with ETA when ``progress`` is an enabled ``Progress``; for
    anything else the same as ``progress_step`` (one message, or nothing)."""
    if isinstance(progress, Progress) and progress.enabled and spark is not None:
        return _SparkJobs(spark, progress.step(name, None))
    return progress_step(progress, name)
