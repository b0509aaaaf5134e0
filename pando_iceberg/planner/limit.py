"""LIMIT and top-k pruning (the Snowflake seed, §4 and §5).

A ``LIMIT k`` scan with no order needs any k matching rows, so when the planned files that
*fully* match the filter hold at least k rows, reading the fewest of them is enough. An
``ORDER BY c LIMIT k`` scan needs the k first rows in c's order: the fully matching files prove
that k rows reach some value of c (the boundary), and a file whose bound on c cannot reach it
holds none of the k first rows.

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
from dataclasses import dataclass
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


def _without_nan_bounds(r: ColumnRange | None) -> ColumnRange | None:
    """A NaN bound (an old writer's) bounds nothing in Spark's order: no bound."""
    if r is None or not any(isinstance(b, float) and b != b for b in (r.lower, r.upper)):
        return r
    nan_free = [None if isinstance(b, float) and b != b else b for b in (r.lower, r.upper)]
    return ColumnRange(r.kind, nan_free[0], nan_free[1], r.null, True, r.only_null)


@dataclass(frozen=True)
class Ordering:
    """``ORDER BY column [ASC|DESC] [NULLS FIRST|LAST]`` in Spark's order of values: NULLs where
    ``nulls_first`` says, NaN above every number, -0.0 equal to 0.0."""
    column: str  # lower case
    descending: bool
    nulls_first: bool


def top_k_tasks(tasks: Sequence[Any], matching: np.ndarray, schema: Any, order: Ordering,
                k: int) -> tuple[list[Any], Any] | None:
    """Top-k pruning: the tasks that may hold one of the ``k`` first matching rows in ``order``,
    in plan order, and the boundary value; None when nothing is proven (fewer than ``k`` rows
    certainly reach a value, or the column's bounds are not used).

    Every non-NULL row of a fully matching task (``matching``) is at least its lower bound
    (NaN too, being above every number) and, when the task holds no NaN, at most its upper
    bound. Taking such tasks best bound first until they hold ``k`` rows gives a boundary B
    that ``k`` matching rows reach, so no row beyond B is among the ``k`` first: a task is
    dropped when its bound on the other side is beyond B (ties kept: a row equal to B may be
    one of them), unless it may hold a row that sorts before every value (a NULL with
    NULLS FIRST, a NaN in descending order)."""
    field = next((f for f in schema.fields if f.name.lower() == order.column), None)
    kind = column_kind(field.field_type) if field is not None else None
    if kind is None or k < 0 or field is None:
        return None
    fid, floating = field.field_id, kind == "float"
    ranges = [_without_nan_bounds(column_ranges(t.file, [(order.column, field)]).get(order.column)) for t in tasks]
    reach: list[tuple[Any, int]] = []  # (a value reached, how many matching rows reach it)
    for i in np.flatnonzero(matching):
        r, f = ranges[int(i)], tasks[int(i)].file
        if r is None:
            continue
        nulls = (f.null_value_counts or {}).get(fid)
        nans = (f.nan_value_counts or {}).get(fid) if floating and not order.descending else 0
        value = r.lower if order.descending else r.upper
        if value is None or nulls is None or nans is None:
            continue
        rows = int(f.record_count) - int(nulls) - int(nans)
        if rows > 0:
            reach.append((value, rows))
    if k == 0:
        return [], None
    if sum(rows for _, rows in reach) < k:
        return None
    reach.sort(key=lambda vr: vr[0], reverse=order.descending)
    reached = np.cumsum([rows for _, rows in reach])
    boundary = reach[int(np.searchsorted(reached, k, side="left"))][0]

    def may_hold(r) -> bool:
        if r is None:
            return True
        if (order.nulls_first and r.null) or (order.descending and floating and r.nan):
            return True
        if r.only_null:
            return False
        if order.descending:
            return r.upper is None or r.upper >= boundary
        return r.lower is None or r.lower <= boundary

    return [t for t, r in zip(tasks, ranges) if may_hold(r)], boundary


__all__ = ["STRING_TRUNCATION", "Ordering", "column_kind", "column_ranges", "fully_matching", "limit_tasks",
           "top_k_tasks"]
