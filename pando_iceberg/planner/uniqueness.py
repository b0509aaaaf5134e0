"""Uniqueness of a dimension column: FK→PK joins to tables without declared identifier fields
(most lakehouse tables: plain CTAS). A column is the table's key when it is declared (Iceberg
identifier fields win) or, none being declared, when the data of the current snapshot holds no
NULL and no value twice — refuted from manifest statistics when they suffice, else checked on the
data; cached per (table uuid, snapshot id, column) in ``planner.caches.UNIQUENESS``.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow.compute as pc

from ..settings import value as setting
from .caches import UNIQUENESS
from .keysets import current_snapshot_id, dimension_columns, dimension_rows


def declared_key(table) -> list[str]:
    """The table's Iceberg identifier fields (its declared primary key), lower-case."""
    schema = table.schema()
    return [schema.find_column_name(i).lower() for i in schema.identifier_field_ids]


def stats_refute_uniqueness(table, column: str) -> bool:
    """True when Iceberg's manifest statistics alone prove ``column`` is not unique (no data
    read): a data file counts NULLs in it, or (integer-like columns) holds more rows than its
    [lower, upper] range has values. A fact's foreign key is refuted this way at once. Rows
    removed by delete files can only make this refute a unique column (never the reverse), so
    the planner may miss a key, never take a non-key for one."""
    from pyiceberg.conversions import from_bytes

    field = table.schema().find_field(column, case_sensitive=False)
    integer = str(field.field_type) in ("int", "long", "date")
    for task in table.scan(selected_fields=(field.name,)).plan_files():
        f = task.file
        if (f.null_value_counts or {}).get(field.field_id, 0) > 0:
            return True
        lo, hi = (f.lower_bounds or {}).get(field.field_id), (f.upper_bounds or {}).get(field.field_id)
        if integer and lo is not None and hi is not None:
            # pyiceberg types from_bytes' result by a TypeVar that only the return mentions, which
            # mypy resolves to str (its definition carries a type: ignore); int, long, date decode to int.
            span = from_bytes(field.field_type, hi) - from_bytes(field.field_type, lo)  # type: ignore[operator]
            if span + 1 < f.record_count:
                return True
    return False


def is_unique(table, column: str, reader: Callable[[], bool] | None = None) -> bool:
    """``column`` holds no NULL and no value twice in the table's current snapshot: refuted from
    manifest statistics when they suffice, else checked by ``reader`` (e.g. Spark) or by reading
    that one column through pyiceberg (:func:`dimension_columns`, which key sets of the same
    snapshot then reuse); cached per (table uuid, snapshot id, column)."""
    key = (str(table.metadata.table_uuid), current_snapshot_id(table), column.lower())
    hit = UNIQUENESS.get(key)
    if hit is None:
        if stats_refute_uniqueness(table, column):
            hit = False
        elif reader is not None:
            hit = bool(reader())
        else:
            name = table.schema().find_field(column, case_sensitive=False).name
            col = dimension_columns(table, [name]).column(name)
            hit = col.null_count == 0 and pc.count_distinct(col).as_py() == len(col)
        UNIQUENESS.put(key, hit)
    return hit


def key_basis(table, column: str) -> str | None:
    """Why ``column`` is the table's key now: "declared" (identifier fields win), "unique"
    (none declared; the data is unique), or None (not a key)."""
    declared = declared_key(table)
    if declared:
        return "declared" if declared == [column.lower()] else None
    return "unique" if is_unique(table, column) else None


def uniqueness_oracle(catalog, row_limit: int | None = None, fallback: Callable[[str, str], bool] | None = None):
    """``(table, column) -> bool`` for ``parse_workload(unique=...)``: through pyiceberg when the
    table has at most ``row_limit`` rows, else through ``fallback`` (Spark), else False."""
    limit = setting("joinKeys.maxDimensionRows") if row_limit is None else row_limit

    def unique(name: str, column: str) -> bool:
        table = catalog.load_table(name)
        if dimension_rows(table) <= limit:
            return is_unique(table, column)
        return fallback is not None and is_unique(table, column, lambda: fallback(name, column))

    return unique


__all__ = ["declared_key", "is_unique", "key_basis", "stats_refute_uniqueness", "uniqueness_oracle"]
