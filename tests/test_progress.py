"""Progress lines: a bar with counts and ETA on a terminal, nothing at all elsewhere."""

from __future__ import annotations

import io
import re

import pytest

from pando_iceberg.progress import Progress, format_duration, progress_step


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _last_line(text: str) -> str:
    return re.split(r"[\r\n]", text.rstrip("\n"))[-1].rstrip()


def test_bar_counts_elapsed_and_eta_on_a_terminal():
    out, clock = FakeTTY(), Clock()
    p = Progress(out, min_interval=0, clock=clock)
    assert p.enabled
    with p.step("routing", total=40) as s:
        for _ in range(10):
            clock.t += 0.5
            s.advance()
        # 10 of 40 in 5 s → 15 s to go
        assert _last_line(out.getvalue()) == "routing [#####...............] 10/40 00:05 ETA 00:15"
        s.advance(30)
    text = out.getvalue()
    assert "\r" in text and text.endswith("\n")
    assert _last_line(text) == "routing [####################] 40/40 00:05 ETA 00:00"


def test_eta_unknown_before_the_first_advance_and_a_failed_step_says_so():
    out, clock = FakeTTY(), Clock()
    p = Progress(out, min_interval=0, clock=clock)
    with pytest.raises(RuntimeError):
        with p.step("bottom-up", total=3) as s:
            assert "0/3" in out.getvalue() and "ETA --:--" in out.getvalue()
            s.advance()
            raise RuntimeError("boom")
    assert _last_line(out.getvalue()).endswith("failed")


def test_spinner_without_total():
    out, clock = FakeTTY(), Clock()
    p = Progress(out, min_interval=0, clock=clock)
    with p.step("sampling") as s:
        for _ in range(7):
            clock.t += 1
            s.advance()
    line = _last_line(out.getvalue())
    assert re.fullmatch(r"sampling [|/\\-] 7 00:07", line), line


def test_redraws_are_throttled_but_the_last_count_is_shown():
    out, clock = FakeTTY(), Clock()
    p = Progress(out, min_interval=10, clock=clock)
    with p.step("writing", total=1000) as s:
        for _ in range(1000):
            s.advance()
    assert out.getvalue().count("\r") <= 3
    assert "1000/1000" in _last_line(out.getvalue())


def test_shorter_line_blanks_the_longer_one_it_overwrites():
    out, clock = FakeTTY(), Clock()
    p = Progress(out, min_interval=0, clock=clock)
    with p.step("x", total=None) as s:
        s.advance(123456)
        s.done = 1
        s.advance(0)
    shrunk = out.getvalue().split("\r")[-2]  # the redraw after the count got shorter
    assert re.fullmatch(r"x . 1 00:00 {5}", shrunk), shrunk  # padded over "x ? 123456 00:00"


def test_call_prints_a_message_on_a_terminal():
    out = FakeTTY()
    Progress(out)("sampling tpch.lineitem")
    assert out.getvalue() == "… sampling tpch.lineitem\n"


def test_not_a_terminal_prints_nothing_at_all():
    out = io.StringIO()
    p = Progress(out)
    assert not p.enabled
    p("hello")
    with p.step("routing", total=5) as s:
        s.advance(5)
    with p.step("sampling") as s:
        s.advance()
    assert s.done == 1
    assert out.getvalue() == ""


def test_enabled_false_overrides_a_terminal():
    out = FakeTTY()
    p = Progress(out, enabled=False)
    p("x")
    with p.step("y", 2) as s:
        s.advance()
    assert out.getvalue() == ""


def test_progress_step_for_plain_callables():
    said: list[str] = []
    with progress_step(said.append, "commit", 3) as s:
        s.advance()
    assert said == ["commit"] and s.done == 1
    with progress_step(None, "quiet") as s:
        s.advance()
    out = FakeTTY()
    with progress_step(Progress(out, min_interval=0), "rich", 2) as s:
        s.advance(2)
    assert "2/2" in out.getvalue()


def test_format_duration():
    assert format_duration(0) == "00:00"
    assert format_duration(75) == "01:15"
    assert format_duration(3725) == "1:02:05"


def test_cli_progress_is_a_progress_quiet_with_json(monkeypatch):
    import argparse
    import sys

    from pando_iceberg import cli

    monkeypatch.setattr(sys, "stderr", FakeTTY())
    p = cli._progress(argparse.Namespace(json=True))
    assert isinstance(p, Progress) and not p.enabled
    p = cli._progress(argparse.Namespace(json=False))
    assert p.enabled
    p("loading lineitem")
    assert sys.stderr.getvalue() == "… loading lineitem\n"


def test_layout_phases_report_counted_steps_and_the_same_layout_with_or_without_progress():
    import numpy as np
    import pyarrow as pa

    from pando_iceberg.layout import build_layout
    from pando_iceberg.workload import parse_workload

    rng = np.random.default_rng(7)
    sample = pa.table({"a": rng.integers(0, 1000, 20_000), "b": rng.random(20_000)})
    sqls = [f"SELECT * FROM t WHERE a < {x} AND b > {y:.2f}" for x, y in zip(range(50, 1000, 90), rng.random(11))]
    wl = parse_workload(";".join(sqls), {"t": sample.schema})
    queries = [(q.filters["t"], q.weight) for q in wl.queries]
    out, clock = FakeTTY(), Clock()
    shown = build_layout(sample, wl.candidate_cuts("t"), queries, 2, 500, progress=Progress(out, min_interval=0, clock=clock))
    quiet = build_layout(sample, wl.candidate_cuts("t"), queries, 2, 500)
    assert shown.to_bytes() == quiet.to_bytes()
    lines = {ln.split(" [")[0]: ln for ln in re.split(r"[\r\n]", out.getvalue()) if " [" in ln}
    for name in ("top-down: splits of 2 tree(s)", "bottom-up: merge candidates", "bottom-up: merges"):
        assert name in lines, out.getvalue()
    final = {name: re.search(r"\] (\d+)/(\d+) ", ln).groups() for name, ln in lines.items()}
    done, total = final["top-down: splits of 2 tree(s)"]
    assert done == total and int(done) > 0  # finish(): the upper bound becomes the real count
    done, total = final["bottom-up: merges"]
    assert done == total and int(done) > 0


def test_spark_job_progress_without_a_terminal_is_a_plain_step():
    said: list[str] = []
    from pando_iceberg.progress import spark_job_progress

    with spark_job_progress(object(), said.append, "routing + writing") as s:
        s.update(3, 10)
    assert said == ["routing + writing"] and s.done == 3
    out = io.StringIO()
    with spark_job_progress(object(), Progress(out), "quiet") as s:  # not a terminal: no Spark polling at all
        s.advance()
    assert out.getvalue() == ""
