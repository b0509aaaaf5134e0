"""Join pruning at query time (the Snowflake seed's join pruning): dimension key sets
(``planner.keysets``) tested against every fact file's foreign-key bounds.

A join filter ``fk IN (SELECT pk FROM dim WHERE p)`` (``expr.JoinFilter``) of an inner join is
sound on its own: a fact row whose ``fk`` is not among the keys of the dimension rows satisfying
``p`` joins no dimension row and cannot be in the result. So a fact data file whose Iceberg
manifest bounds ``[min(fk), max(fk)]`` contain no such key holds no matching row — inside or
outside a Pando layout, and for tables with no layout at all. The plan is the intersection of
Iceberg's pruning, the trees and this test.

The setting ``joinPruning.maxDimensionRows`` (``pando_iceberg.settings``): join pruning alone (no
literal cut needs the keys) reads a key set only when every table of the join's chain has at most
this many rows: a key set costs a read of the dimension, and pays only where the fact's files are
narrow in the foreign key (no Spark job per query for join pruning).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..expr import keys as keyset
from ..settings import value as setting
from .keysets import KeyReader, KeySetResult, dimension_keys

_PRUNABLE = ("int", "long", "string", "date", "timestamp", "timestamptz", "decimal", "time")


def iceberg_key_values(keys: Any, iceberg_type) -> np.ndarray:
    """A key set (``expr.keys`` form, an Arrow array, or values) as a sorted numpy array in the
    representation pyiceberg's ``conversions.from_bytes`` gives bounds of ``iceberg_type``: ints
    for int/long/date (days)/time and timestamps (microseconds), ``Decimal`` for decimals, str."""
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        arr = keys.drop_null()
        if pa.types.is_date(arr.type):
            arr = arr.cast(pa.date32()).cast(pa.int32())
        elif pa.types.is_timestamp(arr.type):
            arr = arr.cast(pa.timestamp("us", tz=arr.type.tz)).cast(pa.int64())
        elif pa.types.is_time(arr.type):
            arr = arr.cast(pa.time64("us")).cast(pa.int64())
        values = arr.to_numpy(zero_copy_only=False)
    else:
        values = keyset.keys_array(keys) if not isinstance(keys, np.ndarray) else keys
    kind = str(iceberg_type).split("(")[0]
    if kind in ("int", "long", "date", "time", "timestamp", "timestamptz"):
        if values.dtype.kind not in "iu":
            raise TypeError(f"keys of dtype {values.dtype} cannot be compared with {iceberg_type} bounds")
        if values.dtype == np.uint64 and len(values) and values.max() >= 2**63:
            values = values.astype(object)
        else:
            values = values.astype(np.int64)
    elif kind == "string":
        if values.dtype.kind not in "OUS":
            raise TypeError(f"keys of dtype {values.dtype} cannot be compared with string bounds")
        values = values.astype(object)
    elif kind == "decimal":
        values = values.astype(object)
    else:
        raise TypeError(f"join pruning does not compare {iceberg_type} bounds")
    return np.sort(values)


def bounds_may_contain(sorted_keys: np.ndarray, lower: Sequence[Any], upper: Sequence[Any]) -> np.ndarray:
    """Per file: may ``[lower, upper]`` contain one of ``sorted_keys``? A file with a missing
    (None) bound is always kept (no statistics, or only NULLs: nothing is proven). One
    ``np.searchsorted`` over all files: the first key ≥ lower must exist and be ≤ upper."""
    n = len(lower)
    known = np.fromiter((lo is not None and hi is not None for lo, hi in zip(lower, upper)), dtype=bool, count=n)
    out = np.ones(n, dtype=bool)
    if not known.any():
        return out
    if len(sorted_keys) == 0:
        out[known] = False
        return out
    lo = np.asarray([x for x, k in zip(lower, known) if k], dtype=sorted_keys.dtype)
    hi = np.asarray([x for x, k in zip(upper, known) if k], dtype=sorted_keys.dtype)
    first = np.searchsorted(sorted_keys, lo, side="left")
    present = first < len(sorted_keys)
    candidate = sorted_keys[np.minimum(first, len(sorted_keys) - 1)]
    out[known] = present & (candidate <= hi)
    return out


def file_bounds(tasks: Sequence[Any], field) -> tuple[list[Any], list[Any]]:
    """The decoded manifest lower/upper bounds of ``field`` per task's data file (None if absent)."""
    from pyiceberg.conversions import from_bytes

    fid, ftype = field.field_id, field.field_type

    def decode(bounds):
        raw = (bounds or {}).get(fid)
        return None if raw is None else from_bytes(ftype, raw)

    return [decode(t.file.lower_bounds) for t in tasks], [decode(t.file.upper_bounds) for t in tasks]


@dataclass
class JoinPruning:
    """How one join filter was decided at planning (explain)."""

    join: str
    source: str
    keys: int | None
    files_before: int
    files_pruned: int
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def prune_files(table, tf, tasks: list, *, row_limit: int | None = None,
                fallback: KeyReader | None = None) -> tuple[list, list[JoinPruning], list[str]]:
    """Join pruning of ``tasks`` (the Snowflake seed's join pruning): every join filter of
    ``tf`` removes the files whose FK bounds contain none of its dimension keys. A join without
    a key set reads one only when its chain has at most ``row_limit`` rows (default
    the setting ``joinPruning.maxDimensionRows``). Returns the kept tasks, one :class:`JoinPruning` per join,
    and notes (joins that could not be used)."""
    row_limit = setting("joinPruning.maxDimensionRows") if row_limit is None else row_limit
    if not tf.joins or not tasks:
        return tasks, [], []
    catalog = getattr(table, "catalog", None)
    schema = table.schema()
    keep = np.ones(len(tasks), dtype=bool)
    decisions: list[JoinPruning] = []
    notes: list[str] = []
    for j in tf.joins:
        t0 = time.perf_counter()
        if j.dim_keys is not None:
            r = KeySetResult(j.dim_keys, f"supplied ({j.key_source})" if j.key_source else "supplied")
        elif catalog is None:
            notes.append(f"join pruning skipped for {j.to_sql()}: the table has no catalog to read "
                         f"{j.dim_table} from")
            continue
        else:
            r = dimension_keys(catalog, j, row_limit=row_limit, fallback=fallback)
        if r.keys is None:
            notes.append(f"join pruning skipped for {j.to_sql()}: {r.source}")
            continue
        field = schema.find_field(j.column, case_sensitive=False)
        if str(field.field_type).split("(")[0] not in _PRUNABLE:
            notes.append(f"join pruning skipped for {j.to_sql()}: bounds of {field.field_type} are not compared")
            continue
        try:
            values = iceberg_key_values(r.keys, field.field_type)
        except TypeError as e:
            notes.append(f"join pruning skipped for {j.to_sql()}: {e}")
            continue
        before = int(keep.sum())
        lower, upper = file_bounds(tasks, field)
        keep &= bounds_may_contain(values, lower, upper)
        decisions.append(JoinPruning(j.to_sql(), r.source, len(r.keys), before, before - int(keep.sum()),
                                     time.perf_counter() - t0))
    return [t for t, k in zip(tasks, keep) if k], decisions, notes


__all__ = [
    "JoinPruning",
    "bounds_may_contain",
    "file_bounds",
    "iceberg_key_values",
    "prune_files",
]
