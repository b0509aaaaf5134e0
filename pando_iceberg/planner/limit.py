"""LIMIT pruning (the Snowflake seed, §4): a ``LIMIT k`` scan with no order needs any k matching
rows, so when the planned files that *fully* match the filter hold at least k rows, reading
the fewest of them is enough.

A file fully matches when every live row of it satisfies the filter. It is decided from the
file's metrics (``column_ranges``: lower/upper bounds, NULL and NaN counts) by the filter's own
reasoning in the other direction (``TableFilter.all_rows_satisfy``: its NOT-TRUE side is
unsatisfiable within the ranges), so Spark's semantics (three-valued logic, NaN above every
number and equal to itself) are the ones pruning uses. Whatever is not known counts against it:
a file with delete files or an unknown row count never fully matches, a missing bound leaves
that side open, a missing NULL (NaN) count means the column may hold NULL (NaN).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..expr.domain import ColumnRange

# Iceberg's default string metrics mode is truncate(16): a bound of 16 characters or more may be
# a truncated value. A truncated lower bound (a prefix) is still below every value; an upper one
# is only if its writer incremented it (the spec's writers do), which is not assumed here.
STRING_TRUNCATION = 16


def column_kind(iceberg_type: Any) -> str | None:
    """The filter reasoning's kind (``expr.sides.AtomTable.kind``) of a column of ``iceberg_type``
    whose bounds are used; None for types whose bounds are not."""
    from pyiceberg.types import (
        BooleanType,
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        StringType,
        TimestampType,
        TimestamptzType,
    )

    if isinstance(iceberg_type, (IntegerType, LongType)):
        return "int"
    if isinstance(iceberg_type, (FloatType, DoubleType)):
        return "float"
    if isinstance(iceberg_type, DecimalType):
        return f"decimal:{iceberg_type.scale}"
    kinds: dict[type, str] = {StringType: "string", DateType: "date", TimestamptzType: "timestamp",
                              TimestampType: "timestamp_ntz", BooleanType: "bool"}
    return kinds.get(type(iceberg_type))


def column_ranges(data_file: Any, fields: Sequence[tuple[str, Any]]) -> dict[str, ColumnRange]:
    """What ``data_file``'s metrics prove about each of ``fields`` ((lower-case name, Iceberg
    field) pairs whose type has a kind)."""
    lowers, uppers = data_file.lower_bounds or {}, data_file.upper_bounds or {}
    nulls, nans = data_file.null_value_counts or {}, data_file.nan_value_counts or {}
    out = {}
    for name, field in fields:
        kind = column_kind(field.field_type)
        if kind is None:
            continue
        fid = field.field_id
        lower, upper = _decoded(field.field_type, lowers.get(fid)), _decoded(field.field_type, uppers.get(fid))
        if kind == "string" and isinstance(upper, str) and len(upper) >= STRING_TRUNCATION:
            upper = None
        null_count = nulls.get(fid)
        out[name] = ColumnRange(kind, lower, upper, null=null_count != 0, nan=nans.get(fid) != 0,
                                only_null=null_count is not None and null_count == data_file.record_count)
    return out


def _decoded(field_type: Any, raw: bytes | None) -> Any:
    from pyiceberg.conversions import from_bytes

    if raw is None:
        return None
    try:
        return from_bytes(field_type, raw)
    except Exception:  # e.g. the bytes of the type before a promotion: no bound
        return None


def fully_matching(tf: Any, tasks: Sequence[Any], schema: Any) -> np.ndarray:
    """Per task: does every live row of its data file satisfy the filter ``tf`` (a
    ``TableFilter``)? ``schema`` is the table's Iceberg schema the filter was bound to."""
    out = np.zeros(len(tasks), dtype=bool)
    if tf.joins:
        return out
    wanted = tf.constrained_columns()
    fields = [(f.name.lower(), f) for f in schema.fields if f.name.lower() in wanted]
    for i, task in enumerate(tasks):
        data_file = task.file
        if task.delete_files or data_file.record_count is None or data_file.record_count < 0:
            continue
        out[i] = tf.all_rows_satisfy(column_ranges(data_file, fields))
    return out


def limit_tasks(tasks: Sequence[Any], matching: np.ndarray, k: int) -> list[Any] | None:
    """The fewest fully matching tasks (``matching``) holding at least ``k`` rows, largest first
    (ties in plan order), kept in plan order; None when all of them hold fewer (or ``k`` < 0)."""
    if k < 0:
        return None
    if k == 0:
        return []
    index = np.flatnonzero(matching)
    rows = np.fromiter((int(tasks[int(i)].file.record_count) for i in index), dtype=np.int64, count=len(index))
    if rows.sum() < k:
        return None
    largest_first = np.lexsort((index, -rows))
    need = int(np.searchsorted(np.cumsum(rows[largest_first]), k, side="left")) + 1
    return [tasks[int(i)] for i in np.sort(index[largest_first[:need]])]


__all__ = ["STRING_TRUNCATION", "column_kind", "column_ranges", "fully_matching", "limit_tasks"]
