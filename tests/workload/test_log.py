"""Workload capture from query logs: JSON lines, CSV, an Iceberg table; time windows; weights
that multiply a query's term in the cost model."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

from pando_iceberg.workload import PandoWorkloadError, parse_workload
from pando_iceberg.workload.log import parse_instant, read_query_log

NOW = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.timezone.utc)
SCHEMA = pa.schema([("a", pa.int64()), ("b", pa.float64())])
Q1 = "SELECT * FROM t WHERE a < 10"
Q2 = "SELECT * FROM t WHERE b > 0.5"
Q3 = "SELECT count(*) FROM t WHERE a >= 90"


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


LOG = [
    {"text": Q1, "timestamp": "2026-11-22T11:00:00Z", "weight": 3},
    {"text": Q2, "timestamp": "2026-11-21 13:00:00"},              # no offset: UTC; no weight: 1
    {"text": Q1, "timestamp": "2026-11-22T10:30:00+01:00", "weight": 0.5},
    {"text": Q3, "timestamp": "2026-11-20"},                        # two days old
]


def test_jsonl_sums_weights_of_equal_texts_in_first_appearance_order(tmp_path):
    path = _jsonl(tmp_path / "q.jsonl", LOG)
    assert read_query_log(path) == [(Q1, 3.5), (Q2, 1.0), (Q3, 1.0)]


def test_since_and_until_select_a_window(tmp_path):
    path = _jsonl(tmp_path / "q.jsonl", LOG)
    assert read_query_log(path, since="1 day", now=NOW) == [(Q1, 3.5), (Q2, 1.0)]
    assert read_query_log(path, since="3 hours", now=NOW) == [(Q1, 3.5)]   # 10:30+01:00 is 09:30Z, after 09:00Z
    assert read_query_log(path, since="2 hours", now=NOW) == [(Q1, 3.0)]   # ... but before 10:00Z
    assert read_query_log(path, since="2026-11-21", until="2026-11-22T10:00:00Z") == [(Q2, 1.0), (Q1, 0.5)]


def test_epoch_seconds_and_csv(tmp_path):
    epoch = [{"text": Q1, "timestamp": NOW.timestamp() - 60}, {"text": Q2, "timestamp": NOW.timestamp() - 7200}]
    assert read_query_log(_jsonl(tmp_path / "e.jsonl", epoch), since="1 hour", now=NOW) == [(Q1, 1.0)]
    csv = tmp_path / "q.csv"
    csv.write_text('text,timestamp,weight\n"SELECT * FROM t WHERE a < 10",2026-11-22T11:00:00Z,2\n'
                   '"SELECT * FROM t WHERE b > 0.5, -- with a comma",2026-11-01T00:00:00Z,\n')
    assert read_query_log(str(csv)) == [(Q1, 2.0), ("SELECT * FROM t WHERE b > 0.5, -- with a comma", 1.0)]
    assert read_query_log(str(csv), since="2026-11-15") == [(Q1, 2.0)]


def test_weights_multiply_the_query_in_parse_workload_and_the_cost_model(tmp_path):
    from pando_iceberg.layout import build_layout

    pairs = read_query_log(_jsonl(tmp_path / "q.jsonl", LOG))
    wl = parse_workload(pairs, {"t": SCHEMA})
    weights = {q.sql: q.weight for q in wl.queries}
    assert sorted(weights.values()) == [1.0, 1.0, 3.5]
    # a statement also given as plain SQL text adds 1 to the same (normalized) query
    wl2 = parse_workload(pairs + [Q1.lower()], {"t": SCHEMA})
    assert sorted(q.weight for q in wl2.queries) == [1.0, 1.0, 4.5]
    sample = pa.table({"a": pa.array(range(100), pa.int64()), "b": pa.array([i / 100 for i in range(100)])})
    queries = [(q.filters["t"], q.weight) for q in wl.queries]
    layout = build_layout(sample, wl.candidate_cuts("t"), queries, 1, 10)
    rows_read = [float(c) for c in layout.cost(queries, per_query=True)]  # rows each query reads
    total = float(layout.cost(queries))
    assert total == pytest.approx(sum(r * w for r, (_, w) in zip(rows_read, queries)))
    assert total != pytest.approx(sum(rows_read))  # the weight 3.5 counts


@pytest.mark.parametrize("rows, message", [
    ([{"text": Q1, "weight": 0}], "row(s) [1] has a weight that is not > 0"),
    ([{"text": Q1}, {"text": "  "}], "row(s) [2] has an empty or missing 'text'"),
    ([{"query": Q1}], "row(s) [1] has an empty or missing 'text' (columns: text, weight, query; expected text"),
])
def test_bad_rows_are_named(tmp_path, rows, message):
    with pytest.raises(PandoWorkloadError) as e:
        read_query_log(_jsonl(tmp_path / "bad.jsonl", rows))
    assert message in str(e.value)


def test_window_errors_say_what_is_accepted(tmp_path):
    path = _jsonl(tmp_path / "q.jsonl", [{"text": Q1}])
    with pytest.raises(PandoWorkloadError, match="no 'timestamp' column, needed for since/until"):
        read_query_log(path, since="1 day")
    with pytest.raises(PandoWorkloadError, match=r"since 'yesterday' is not a time: accepted an ISO-8601 instant"):
        parse_instant("yesterday")
    path = _jsonl(tmp_path / "t.jsonl", [{"text": Q1, "timestamp": "last tuesday"}])
    with pytest.raises(PandoWorkloadError, match="column 'timestamp' cannot be read as a time"):
        read_query_log(path, since="1 day")
    with pytest.raises(PandoWorkloadError, match="does not exist"):
        read_query_log(str(tmp_path / "missing.jsonl"))
    with pytest.raises(PandoWorkloadError, match="not a file; accepted"):
        read_query_log("ops.no_such_log")


def test_durations():
    assert parse_instant("1 day", NOW) == NOW - dt.timedelta(days=1)
    assert parse_instant("interval 24 hours", NOW) == NOW - dt.timedelta(days=1)
    assert parse_instant("2w", NOW) == NOW - dt.timedelta(weeks=2)
    assert parse_instant("30 minutes ago", NOW) == NOW - dt.timedelta(minutes=30)
    assert parse_instant("2026-11-21T00:00:00+02:00") == dt.datetime(2026, 11, 20, 22, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("tz", [False, True])
def test_iceberg_log_table_with_a_window(catalog, tz):
    from pyiceberg.schema import Schema
    from pyiceberg.types import DoubleType, NestedField, StringType, TimestampType, TimestamptzType

    catalog.create_namespace_if_not_exists("logs")
    name = f"logs.query_log_{'tz' if tz else 'ntz'}"
    if catalog.table_exists(name):
        catalog.drop_table(name)
    ts_type = TimestamptzType() if tz else TimestampType()
    table = catalog.create_table(name, Schema(NestedField(1, "text", StringType(), required=False),
                                              NestedField(2, "timestamp", ts_type, required=False),
                                              NestedField(3, "weight", DoubleType(), required=False)))
    arrow_ts = pa.timestamp("us", tz="UTC" if tz else None)
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    stamps = [now - dt.timedelta(hours=2), now - dt.timedelta(days=3), now - dt.timedelta(minutes=5)]
    if not tz:
        stamps = [s.replace(tzinfo=None) for s in stamps]
    # two appends, two data files (the window is also pushed down to Iceberg's file pruning)
    table.append(pa.table({"text": [Q3], "timestamp": pa.array([stamps[1]], arrow_ts), "weight": [7.0]},
                          schema=table.schema().as_arrow()))
    table.append(pa.table({"text": [Q1, Q1], "timestamp": pa.array([stamps[0], stamps[2]], arrow_ts),
                           "weight": [2.0, None]}, schema=table.schema().as_arrow()))
    assert sorted(read_query_log(name, load_table=catalog.load_table)) == sorted([(Q3, 7.0), (Q1, 3.0)])
    assert read_query_log(name, since="1 day", load_table=catalog.load_table) == [(Q1, 3.0)]
    assert read_query_log(name, since="1 hour", load_table=catalog.load_table) == [(Q1, 1.0)]
    with pytest.raises(PandoWorkloadError, match="has no column"):
        catalog.create_namespace_if_not_exists("logs")
        bad = "logs.not_a_log"
        if not catalog.table_exists(bad):
            catalog.create_table(bad, Schema(NestedField(1, "q", StringType(), required=False)))
        read_query_log(bad, since="1 day", load_table=catalog.load_table)
