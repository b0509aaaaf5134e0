"""How a workload string is read (issue 19 §3): an existing directory, an existing file, a query
log or SQL text — and a path that names nothing is an error that says so, not SQL text."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

from pando_iceberg.workload import PandoWorkloadError, parse_workload
from pando_iceberg.workload.sources import classify_workload_source

SCHEMAS = {"ns.t": pa.schema([("a", pa.int64()), ("s", pa.string())])}
RULES = r"existing directory → its \.sql files; an existing file → its SQL statements"


@pytest.mark.parametrize("source", ["/path/that/does/not/exist.sql", "queries/nightly.sql", "no_such_file.sql",
                                    "/var/log/queries.jsonl", "logs/q.csv", "./workloads/", "/tmp/nope/dir"])
def test_a_path_that_names_nothing_is_an_error_that_says_so(source):
    with pytest.raises(PandoWorkloadError) as info:
        parse_workload(source, SCHEMAS)
    msg = str(info.value)
    assert msg.startswith(f"workload {source!r}: no such file or directory"), msg
    assert re.search(RULES, msg) and "Div" not in msg


def test_a_missing_pathlike_is_an_error_too(tmp_path):
    with pytest.raises(PandoWorkloadError, match="no such file or directory"):
        parse_workload(tmp_path / "absent", SCHEMAS)


def test_files_directories_and_sql_text_are_told_apart(tmp_path):
    (tmp_path / "a.sql").write_text("SELECT * FROM ns.t WHERE a < 5")
    (tmp_path / "b.sql").write_text("SELECT * FROM ns.t WHERE s = 'x'")
    (tmp_path / "notes.txt").write_text("not a workload")
    (tmp_path / "log.jsonl").write_text('{"text": "SELECT 1"}\n')
    assert classify_workload_source(str(tmp_path)) == "directory"
    assert classify_workload_source(str(tmp_path / "a.sql")) == "sql-file"
    assert classify_workload_source(str(tmp_path / "log.jsonl")) == "query-log"
    assert classify_workload_source("SELECT * FROM ns.t WHERE a/2 > 1") == "sql-text"  # a '/' with spaces: SQL
    assert classify_workload_source("SELECT *\nFROM ns.t") == "sql-text"
    keys = lambda wl: sorted(c.key for c in wl.candidate_cuts("ns.t"))
    assert keys(parse_workload(str(tmp_path), SCHEMAS)) == ["a < 5", "s = 'x'"]  # both .sql files, not notes.txt
    assert keys(parse_workload(str(tmp_path / "a.sql"), SCHEMAS)) == ["a < 5"]
    assert keys(parse_workload(Path(tmp_path / "b.sql"), SCHEMAS)) == ["s = 'x'"]


def test_a_directory_without_sql_files_and_a_query_log_given_to_parse_workload(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(PandoWorkloadError, match=r"workload directory .*empty' has no \.sql files"):
        parse_workload(str(tmp_path / "empty"), SCHEMAS)
    (tmp_path / "log.jsonl").write_text('{"text": "SELECT * FROM ns.t WHERE a < 1"}\n')
    with pytest.raises(PandoWorkloadError, match="is a query log: read it with .*read_query_log"):
        parse_workload(str(tmp_path / "log.jsonl"), SCHEMAS)
