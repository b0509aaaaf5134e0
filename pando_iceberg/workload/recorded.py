"""The workload a layout recorded, brought to the table's current schema before a re-layout
learns from it again (found by the soak test: after a rename every recorded statement failed
with "Unknown column" and the nightly re-layout failed).

* a column of the table renamed since follows its field id to its current name;
* a statement that still does not resolve (a column dropped) is left out, and noted;
* when none is left, :class:`PandoWorkloadError` names one of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlglot
from sqlglot import exp

from .extraction import parse_workload
from .model import PandoWorkloadError

__all__ = ["current_recorded_workload", "renamed_columns"]


def current_recorded_workload(recorded: list, table: Any, load_schema: Callable[[str], Any]) -> tuple[list, list[str]]:
    """(statements to learn from, notes). ``recorded``: SQL texts or (text, weight) pairs;
    ``table``: the pyiceberg table; ``load_schema``: table name → its current Arrow schema."""
    renames = renamed_columns(table)
    schemas: dict[str, Any] = {}  # table name → current Arrow schema, loaded once
    kept, dropped, renamed = [], [], 0
    for item in recorded:
        text, weight = item if isinstance(item, tuple) else (item, None)
        new = _follow_renames(text, renames, schemas, load_schema) if renames else text
        renamed += new != text
        reason = _unresolvable(new, schemas, load_schema)
        if reason:
            dropped.append(reason)
        else:
            kept.append(new if weight is None else (new, weight))
    notes = []
    if renamed:
        notes.append(f"{renamed} recorded workload statement(s) follow renamed column(s) "
                     + ", ".join(f"{a} → {b}" for a, b in sorted(renames.items())))
    if dropped:
        notes.append(f"{len(dropped)} of the {len(recorded)} recorded workload statement(s) no longer resolve against "
                     f"the current schemas and were left out (e.g. {dropped[0]})")
    if recorded and not kept:
        raise PandoWorkloadError(f"the workload recorded with the layout of {'.'.join(table.name())} no longer "
                                 f"resolves against the current schemas (e.g. {dropped[0]}); give 'workload' (SQL "
                                 "text, a .sql file, a directory or a query log) or 'workload_log'")
    return kept, notes


def renamed_columns(table: Any) -> dict[str, str]:
    """Old name (lower case) → current name of the table's top-level columns renamed in its
    schema history (same field id, another name; an old name a current column has is kept)."""
    current = {f.field_id: f.name for f in table.schema().fields}
    names = {n.lower() for n in current.values()}
    out: dict[str, str] = {}
    for schema in table.metadata.schemas:
        for f in schema.fields:
            now = current.get(f.field_id)
            if now is not None and now != f.name and f.name.lower() not in names:
                out[f.name.lower()] = now
    return out


def _tables(tree: exp.Expr) -> set[str]:
    return {".".join(p for p in (t.catalog, t.db, t.name) if p) for t in tree.find_all(exp.Table)}


def _load(names: set[str], schemas: dict[str, Any], load_schema: Callable[[str], Any]) -> None:
    for n in names - schemas.keys():
        schemas[n] = load_schema(n)


def _follow_renames(statement: str, renames: dict[str, str], schemas: dict[str, Any],
                    load_schema: Callable[[str], Any]) -> str:
    """``statement`` with each column named by an old name that no table of it has now
    replaced by the current name."""
    try:
        tree = sqlglot.parse_one(statement, read="spark")
        tables = _tables(tree)
        _load(tables, schemas, load_schema)
    except Exception:
        return statement
    taken = {c.lower() for n in tables for c in schemas[n].names}
    changed = False
    for col in tree.find_all(exp.Column):
        new = renames.get(col.name.lower())
        if new is not None and col.name.lower() not in taken:
            col.set("this", exp.to_identifier(new))
            changed = True
    return tree.sql(dialect="spark") if changed else statement


def _unresolvable(statement: str, schemas: dict[str, Any], load_schema: Callable[[str], Any]) -> str | None:
    """Why ``statement`` does not resolve against its tables' current schemas, or None (also
    when that cannot be judged here: a table that cannot be loaded is left to the rewrite)."""
    try:
        tables = _tables(sqlglot.parse_one(statement, read="spark"))
        _load(tables, schemas, load_schema)
    except Exception:
        return None
    try:
        parse_workload([statement], {n: schemas[n] for n in tables})
    except PandoWorkloadError as e:
        return str(e).splitlines()[0]
    return None
