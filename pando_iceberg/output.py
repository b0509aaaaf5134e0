"""Human tables by default, JSON for machines (``--json``): the same rows either way."""

from __future__ import annotations

import datetime
import decimal
import json
import sys
from collections.abc import Sequence
from typing import Any


def jsonable(v: Any) -> Any:
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    return v


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], max_width: int = 60) -> str:
    def cell(v: Any) -> str:
        s = "NULL" if v is None else str(v)
        return s if len(s) <= max_width else s[: max_width - 1] + "…"

    body = [[cell(v) for v in r] for r in rows]
    widths = [max([len(c)] + [len(r[i]) for r in body]) for i, c in enumerate(columns)]
    sep = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [sep, "| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths)) + " |", sep]
    out += ["| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |" for r in body]
    out.append(sep)
    return "\n".join(out)


def emit(columns: Sequence[str], rows: Sequence[Sequence[Any]], as_json: bool, title: str | None = None,
         extra: dict[str, Any] | None = None, file=None) -> None:
    file = file or sys.stdout
    if as_json:
        doc: dict[str, Any] = {"columns": list(columns), "rows": [dict(zip(columns, map(jsonable, r))) for r in rows]}
        if title:
            doc["title"] = title
        if extra:
            doc.update(jsonable(extra))
        print(json.dumps(doc, indent=2), file=file)
        return
    if title:
        print(title, file=file)
    print(format_table(columns, rows), file=file)
    if extra:
        for k, v in extra.items():
            print(f"{k}: {v}", file=file)
