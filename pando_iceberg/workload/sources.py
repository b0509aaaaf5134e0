"""Workload sources: what a workload string names (a directory of .sql files, a SQL file, a
query log, or SQL text), how it is read, and its statements split on ``;``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from .model import PandoWorkloadError


def split_statements(text: str) -> list[str]:
    """Split on `;` outside quotes and comments."""
    out, buf, i, n = [], [], 0, len(text)
    quote: str | None = None
    while i < n:
        ch = text[i]
        if quote:
            buf.append(ch)
            if ch == "\\" and quote != "`" and i + 1 < n:
                buf.append(text[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "'\"`":
            quote = ch
            buf.append(ch)
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            buf.append(" ")
            continue
        elif ch == ";":
            out.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
        i += 1
    out.append("".join(buf))
    return [s.strip() for s in out if s.strip()]


QUERY_LOG_SUFFIXES = (".jsonl", ".ndjson", ".json", ".csv")
WORKLOAD_SOURCE_RULES = (
    "how a workload string is read: an existing directory → its .sql files; an existing file → its SQL "
    f"statements ({', '.join(QUERY_LOG_SUFFIXES)}: a query log); one line ending in .sql or a query-log suffix, or "
    "one line without spaces that contains '/', is a path (an error if it does not exist); anything else is SQL text")


def classify_workload_source(source: str) -> str:
    """What a workload string is: ``"directory"``, ``"sql-file"``, ``"query-log"`` or ``"sql-text"``.

    A string that looks like a path but names nothing raises :class:`PandoWorkloadError` (it
    used to be parsed as SQL and fail with a parser message about a ``Div`` node); so does a
    directory without .sql files."""
    text = str(source)
    one_line = "\n" not in text and len(text) < 4096
    if one_line and os.path.isdir(text):
        if not any(f.endswith(".sql") for f in os.listdir(text)):
            raise PandoWorkloadError(f"workload directory {text!r} has no .sql files ({WORKLOAD_SOURCE_RULES})")
        return "directory"
    if one_line and os.path.isfile(text):
        return "query-log" if text.lower().endswith(QUERY_LOG_SUFFIXES) else "sql-file"
    stripped = text.strip()
    if one_line and stripped and (stripped.lower().endswith((".sql",) + QUERY_LOG_SUFFIXES)
                                  or ("/" in stripped and not any(c.isspace() for c in stripped))):
        raise PandoWorkloadError(f"workload {text!r}: no such file or directory ({WORKLOAD_SOURCE_RULES})")
    return "sql-text"


def read_sources(sources: str | os.PathLike | Iterable[str | os.PathLike | tuple[str, float]]
                  ) -> list[tuple[str, float]]:
    """(text, weight) per source; a ``(sql, weight)`` pair weighs each of its statements by weight."""
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    texts = []
    for src in sources:
        weight = 1.0
        if isinstance(src, (tuple, list)):
            src, weight = src
            weight = float(weight)
            if not weight > 0:
                raise PandoWorkloadError(f"query weight must be > 0, got {weight!r} for {str(src)[:80]!r}")
        kind = classify_workload_source(os.fspath(src))
        if isinstance(src, os.PathLike) and kind == "sql-text":
            raise PandoWorkloadError(f"workload {os.fspath(src)!r}: no such file or directory "
                                     f"({WORKLOAD_SOURCE_RULES})")
        if kind == "query-log":
            raise PandoWorkloadError(f"workload {os.fspath(src)!r} is a query log: read it with "
                                     "pando_iceberg.workload.log.read_query_log and pass its (text, weight) pairs")
        paths = ([os.fspath(src)] if kind == "sql-file" else
                 sorted(os.path.join(src, f) for f in os.listdir(src) if f.endswith(".sql"))
                 if kind == "directory" else [])
        for path in paths:
            with open(path, encoding="utf-8") as fh:
                texts.append((fh.read(), weight))
        if kind == "sql-text":
            texts.append((str(src), weight))
    return texts


__all__ = ["QUERY_LOG_SUFFIXES", "WORKLOAD_SOURCE_RULES", "classify_workload_source", "read_sources",
           "split_statements"]
