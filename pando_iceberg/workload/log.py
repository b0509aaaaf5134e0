"""Workload capture from a query log: what a runbook feeds Pando ("the last day's queries").

A query log has three columns (see docs/PROCEDURES.md):

==============  ==========================================================================
``text``        the SQL statement (required, non-empty)
``timestamp``   when it ran: ISO-8601 (``2026-11-21T08:00:00Z``, ``2026-11-21 08:00:00``,
                ``2026-11-21``; no offset = UTC) or epoch seconds; required with ``since``
``weight``      optional, default 1: how many times it counts (> 0); it multiplies the query's
                term in the cost model, as if the statement appeared ``weight`` times
==============  ==========================================================================

It is read from a JSON-lines file (``.jsonl``, ``.ndjson``, ``.json``: one object per line), a
CSV file with a header row (``.csv``), or an Iceberg table with those columns (``timestamp``
as ``timestamp``/``timestamptz``, ``weight`` as a number). ``since``/``until`` select a time
window: an ISO-8601 instant or a duration back from now (``1 day``, ``24 hours``, ``90 min``,
``2w``, ``interval 1 day``). Equal texts are summed (vectorized, in Arrow) before parsing.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .model import PandoWorkloadError
from .sources import QUERY_LOG_SUFFIXES

__all__ = ["LOG_COLUMNS", "LOG_FILE_SUFFIXES", "is_log_file", "parse_instant", "read_query_log"]

LOG_COLUMNS = ("text", "timestamp", "weight")
LOG_FILE_SUFFIXES = QUERY_LOG_SUFFIXES
_UTC = pa.timestamp("us", tz="UTC")
_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hr": 3600, "hour": 3600,
          "d": 86400, "day": 86400, "w": 604800, "week": 604800}
_DURATION_RE = re.compile(r"^\s*(?:interval\s+)?(\d+(?:\.\d+)?)\s*([a-z]+?)s?\s*(?:ago)?\s*$", re.IGNORECASE)
_ACCEPTED_WINDOW = ("an ISO-8601 instant (e.g. '2026-11-21T00:00:00Z', '2026-11-21') or a duration back from now "
                    "(e.g. '1 day', '24 hours', '30 min', '2w')")


def is_log_file(source: str) -> bool:
    return str(source).lower().endswith(LOG_FILE_SUFFIXES)


def parse_instant(value: str | dt.datetime, now: dt.datetime | None = None, what: str = "since") -> dt.datetime:
    """An aware UTC datetime from an ISO-8601 instant or a duration back from ``now``."""
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    text = str(value).strip()
    m = _DURATION_RE.match(text)
    if m and m.group(2).lower() in _UNITS:
        now = now or dt.datetime.now(dt.UTC)
        return now - dt.timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2).lower()])
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise PandoWorkloadError(f"{what} {text!r} is not a time: accepted {_ACCEPTED_WINDOW}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def read_query_log(source: str, *, since: str | dt.datetime | None = None, until: str | dt.datetime | None = None,
                   load_table: Callable[[str], Any] | None = None,
                   now: dt.datetime | None = None) -> list[tuple[str, float]]:
    """``(text, weight)`` pairs of the log's queries in the window, equal texts summed, in
    order of first appearance — what ``parse_workload`` takes as sources.

    ``source``: a ``.jsonl``/``.ndjson``/``.json``/``.csv`` file, or an Iceberg table name
    (loaded with ``load_table``, e.g. a pyiceberg catalog's ``load_table``)."""
    lo = parse_instant(since, now, "since") if since is not None else None
    hi = parse_instant(until, now, "until") if until is not None else None
    if is_log_file(source) or os.path.isfile(source) or "/" in str(source):  # a path, never a table name
        table = _read_file(source)
    elif load_table is not None:
        table = _read_table(source, load_table, lo, hi)
    else:
        raise PandoWorkloadError(f"query log {source!r}: not a file; accepted: a {', '.join(LOG_FILE_SUFFIXES)} file "
                                 "or an Iceberg table with columns text, timestamp, weight")
    return _select(table, source, lo, hi)


def _read_file(path: str) -> pa.Table:
    import pyarrow.csv as pcsv
    import pyarrow.json as pjson

    if not os.path.isfile(path):
        raise PandoWorkloadError(f"query log {path!r} does not exist (a {', '.join(LOG_FILE_SUFFIXES)} file or an "
                                 "Iceberg table name is accepted)")
    try:
        if path.lower().endswith(".csv"):
            return pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(
                column_types={"text": pa.string(), "timestamp": pa.string(), "weight": pa.float64()}))
        schema = pa.schema([("text", pa.string()), ("weight", pa.float64())])
        return pjson.read_json(path, parse_options=pjson.ParseOptions(explicit_schema=schema,
                                                                       unexpected_field_behavior="infer"))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        kind = "CSV with a header row text,timestamp,weight" if path.lower().endswith(".csv") else \
            'JSON lines ({"text": ..., "timestamp": ..., "weight": ...} per line)'
        raise PandoWorkloadError(f"query log {path!r} cannot be read as {kind}: {e}") from None


def _read_table(name: str, load_table: Callable[[str], Any], lo: dt.datetime | None,
                hi: dt.datetime | None) -> pa.Table:
    from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, GreaterThanOrEqual, LessThan, Reference
    from pyiceberg.expressions.literals import literal

    table = load_table(name)
    fields = {f.name for f in table.schema().fields}
    missing = [c for c in ("text",) + (("timestamp",) if lo or hi else ()) if c not in fields]
    if missing:
        raise PandoWorkloadError(f"query log table {name!r} has no column(s) {', '.join(missing)}; a query log table "
                                 f"has columns text STRING, timestamp TIMESTAMP, weight DOUBLE (optional); it has "
                                 f"{', '.join(sorted(fields))}")
    # Iceberg prunes the log's files by the window; _select is exact. The predicates are built by
    # keyword: pyiceberg's pydantic fields are what mypy sees (the positional (name, value) form
    # works at runtime but is not in its types).
    row_filter: BooleanExpression = AlwaysTrue()
    if lo is not None:
        row_filter = And(row_filter, GreaterThanOrEqual(term=Reference("timestamp"),
                                                        value=literal(_iceberg_literal(table, lo))))
    if hi is not None:
        row_filter = And(row_filter, LessThan(term=Reference("timestamp"), value=literal(_iceberg_literal(table, hi))))
    cols = tuple(c for c in LOG_COLUMNS if c in fields)
    return table.scan(row_filter=row_filter, selected_fields=cols).to_arrow()


def _iceberg_literal(table: Any, instant: dt.datetime) -> str:
    from pyiceberg.types import TimestampType

    ftype = table.schema().find_field("timestamp").field_type
    if isinstance(ftype, TimestampType):  # without zone: the log's wall clock is UTC
        return instant.astimezone(dt.UTC).replace(tzinfo=None).isoformat()
    return instant.astimezone(dt.UTC).isoformat()


def _select(table: pa.Table, source: str, lo: dt.datetime | None, hi: dt.datetime | None) -> list[tuple[str, float]]:
    names = table.column_names
    if "text" not in names:
        raise PandoWorkloadError(f"query log {source!r} has no 'text' column (columns: {', '.join(names) or 'none'}); "
                                 f"accepted columns: {', '.join(LOG_COLUMNS)}")
    text = table.column("text")
    if not pa.types.is_string(text.type) and not pa.types.is_large_string(text.type):
        raise PandoWorkloadError(f"query log {source!r}: column 'text' must be a string, got {text.type}")
    bad = pc.or_kleene(pc.is_null(text), pc.equal(pc.utf8_trim_whitespace(pc.fill_null(text, "")), ""))
    _refuse(bad, source, f"has an empty or missing 'text' "
                         f"(columns: {', '.join(names)}; expected {', '.join(LOG_COLUMNS)})")
    if "weight" in names:
        weight = pc.fill_null(table.column("weight").cast(pa.float64()), 1.0)
        _refuse(pc.invert(pc.greater(weight, 0.0)), source, "has a weight that is not > 0")
    else:
        weight = pa.array(np.ones(table.num_rows))
    keep = None
    if lo is not None or hi is not None:
        if "timestamp" not in names:
            raise PandoWorkloadError(f"query log {source!r} has no 'timestamp' column, needed for since/until")
        ts = _to_utc(table.column("timestamp"), source)
        _refuse(pc.is_null(ts), source, "has no timestamp (needed for since/until)")
        keep = pc.and_(pc.greater_equal(ts, pa.scalar(lo, _UTC)) if lo is not None else pc.is_valid(ts),
                       pc.less(ts, pa.scalar(hi, _UTC)) if hi is not None else pc.is_valid(ts))
    sel = pa.table({"text": text, "weight": weight})
    sel = sel.append_column("order", pa.array(np.arange(sel.num_rows, dtype=np.int64)))
    if keep is not None:
        sel = sel.filter(keep)
    grouped = sel.group_by("text", use_threads=False).aggregate([("weight", "sum"), ("order", "min")])
    grouped = grouped.sort_by("order_min")
    return list(zip(grouped.column("text").to_pylist(), grouped.column("weight_sum").to_pylist()))


def _refuse(mask: Any, source: str, what: str) -> None:
    hits = pc.indices_nonzero(pc.fill_null(mask, True)) if len(mask) else pa.array([], pa.uint64())
    if len(hits):
        rows = [int(i) + 1 for i in hits.to_pylist()[:5]]
        raise PandoWorkloadError(f"query log {source!r}: row(s) {rows} {what} ({len(hits)} row(s) in all)")


_ISO_DATE = r"^\d{4}-\d{2}-\d{2}$"
_HAS_ZONE = r"(Z|z|[+-]\d{2}:?\d{2})$"
_NUMBER = r"^\s*-?\d+(\.\d+)?\s*$"


def _to_utc(col: Any, source: str) -> Any:
    """A timestamp[us, UTC] column from timestamps, epoch seconds or ISO-8601 strings."""
    t = col.type
    try:
        if pa.types.is_timestamp(t):
            return col.cast(pa.timestamp("us", tz=t.tz)).cast(_UTC) if t.tz else col.cast(pa.timestamp("us")).cast(_UTC)
        if pa.types.is_integer(t) or pa.types.is_floating(t):
            return pc.multiply(col.cast(pa.float64()), 1e6).cast(pa.int64()).cast(_UTC)
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            s = pc.utf8_trim_whitespace(col)
            if pc.all(pc.fill_null(pc.match_substring_regex(s, _NUMBER), True)).as_py():
                return _to_utc(s.cast(pa.float64()), source)
            s = pc.if_else(pc.match_substring_regex(s, _ISO_DATE), pc.binary_join_element_wise(s, "T00:00:00", ""), s)
            s = pc.if_else(pc.match_substring_regex(s, _HAS_ZONE), s, pc.binary_join_element_wise(s, "+00:00", ""))
            return s.cast(_UTC)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise PandoWorkloadError(f"query log {source!r}: column 'timestamp' cannot be read as a time ({e}); "
                                 "accepted: ISO-8601 strings or epoch seconds") from None
    raise PandoWorkloadError(f"query log {source!r}: column 'timestamp' has type {t}; accepted: timestamp, "
                             "ISO-8601 strings or epoch seconds")
