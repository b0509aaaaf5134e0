"""Dimension key sets: ``SELECT DISTINCT pk FROM dim WHERE p`` for a join filter
``fk IN (SELECT pk FROM dim WHERE p)`` (``expr.JoinFilter``), nested filters applied along its
chain. They decide the layout's literal cuts at planning (paper §5 and §7: the key sets of
join-induced cuts), prune a fact's files by their foreign-key bounds (``planner.joins``) and
filter its rows in Spark (``planner.row_filters``).

Key sets are read from the dimension through pyiceberg + Arrow (no Spark job) when the dimension
has at most ``joinKeys.maxDimensionRows`` rows (``pando_iceberg.settings``); above it a
caller-supplied reader (Spark) is used, or the join is left undecided (no file removed, a note).
They are cached process-wide per (dimension table uuid, snapshot id, filter SQL) — the snapshots
of a chain's sub-dimensions included — in ``planner.caches.KEY_SETS``; a new dimension snapshot
is a new key, so a cached key set is never stale. The dimension columns they were computed from
are kept too (``planner.caches.DIMENSION_COLUMNS``, per uuid and snapshot, bounded in bytes): a
held-out query's new literals on the same dimension are a vectorized filter of those columns,
not another read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..expr import keys as keyset
from ..expr.evaluate import evaluation_ready
from ..settings import value as setting
from .caches import DIMENSION_COLUMNS, KEY_SETS

KeyReader = Callable[[Any], Any]  # JoinFilter → key set (e.g. a Spark job), for large dimensions


class TooManyKeys(ValueError):
    """A bounded key read stopped past its limit (a :data:`KeyReader` given a limit, as the row
    filters' reader is)."""


def current_snapshot_id(table) -> int | None:
    """The id of the table's current snapshot (None for a table without one)."""
    snap = table.current_snapshot()
    return snap.snapshot_id if snap is not None else None


def dimension_rows(table) -> int:
    """Rows of the table's current snapshot (its summary; 0 when it has none)."""
    snap = table.current_snapshot()
    if snap is None or snap.summary is None:
        return 0
    return int(snap.summary.get("total-records", 0) or 0)


def chain_within(catalog, join, row_limit: int) -> bool:
    """Has every table of the join's chain (dimension and sub-dimensions) at most ``row_limit`` rows?"""
    tables: dict[str, Any] = {}
    chain_snapshots(catalog, join, tables)
    return all(dimension_rows(t) <= row_limit for t in tables.values())


@dataclass
class KeySetResult:
    keys: Any  # a normalized key set (expr.keys), or None when undecided
    source: str  # "cache", "pyiceberg", "spark", "supplied", or why it is undecided
    seconds: float = 0.0


def chain_snapshots(catalog, join, tables: dict[str, Any]) -> tuple:
    """(uuid, snapshot) of the join's dimension and of every sub-dimension along its chain."""
    if join.dim_table not in tables:
        tables[join.dim_table] = catalog.load_table(join.dim_table)
    dim = tables[join.dim_table]
    out = ((join.dim_table, str(dim.metadata.table_uuid), current_snapshot_id(dim)),)
    for inner in join.dim_filter.joins:
        out += chain_snapshots(catalog, inner, tables)
    return out


def key_set_key(catalog, join, tables: dict[str, Any]) -> tuple:
    """The cache key of a join's key set: its chain's snapshots, the pk and the filter's SQL."""
    return (chain_snapshots(catalog, join, tables), join.dim_pk, join.dim_filter.to_sql())


def dimension_keys(catalog, join, *, row_limit: int | None = None, fallback: KeyReader | None = None) -> KeySetResult:
    """``SELECT DISTINCT pk FROM dim WHERE p`` (nested join filters applied) for a join filter:
    from the cache, else through pyiceberg when every dimension of the chain has at most
    ``row_limit`` rows, else through ``fallback``; undecided (keys None) when none applies."""
    t0 = time.perf_counter()
    if join.dim_keys is not None:
        return KeySetResult(join.dim_keys, "supplied")
    limit = setting("joinKeys.maxDimensionRows") if row_limit is None else row_limit
    tables: dict[str, Any] = {}
    cache_key = key_set_key(catalog, join, tables)
    hit = KEY_SETS.get(cache_key)
    if hit is not None:
        return KeySetResult(hit, "cache", time.perf_counter() - t0)
    big = [name for name, t in tables.items() if dimension_rows(t) > limit]
    if big:
        if fallback is None:
            return KeySetResult(None, f"undecided: {', '.join(sorted(big))} has more than {limit:,} rows "
                                      "(the limit for reading its keys here)", time.perf_counter() - t0)
        keys, source = keyset.normalize_keys(fallback(join)), "spark"
    else:
        keys, source = _read_keys(tables, join), "pyiceberg"
    KEY_SETS.put(cache_key, keys)
    return KeySetResult(keys, source, time.perf_counter() - t0)


def dimension_columns(dim, columns: Sequence[str]) -> pa.Table:
    """The dimension's current snapshot projected on ``columns`` (and on every column read for it
    before), through pyiceberg, kept in :data:`DIMENSION_COLUMNS` per (uuid, snapshot) in the
    form the evaluator reads (``expr.evaluate.evaluation_ready``)."""
    names = {f.name.lower(): f.name for f in dim.schema().fields}
    wanted = {names[c.lower()] for c in columns}
    key = (str(dim.metadata.table_uuid), current_snapshot_id(dim))
    hit = DIMENSION_COLUMNS.get(key)
    if hit is not None and wanted <= set(hit.schema.names):
        return hit
    if hit is not None:
        wanted |= set(hit.schema.names)
    arrow = evaluation_ready(dim.scan(selected_fields=tuple(n for n in names.values() if n in wanted)).to_arrow())
    DIMENSION_COLUMNS.put(key, arrow)
    return arrow


def kept_rows(tables: dict[str, Any], join, every: int = 1) -> tuple[pa.Table, np.ndarray]:
    """The dimension's columns the join needs (cached per snapshot, :func:`dimension_columns`),
    every ``every``-th row of them, and the mask of the rows the join keeps: its filter and its
    nested semi-joins, vectorized."""
    from sqlglot import exp

    dim = tables[join.dim_table]
    flt = join.dim_filter
    needed = {join.dim_pk, *(inner.column for inner in flt.joins)}
    needed |= {c.name for c in flt.expr.find_all(exp.Column)}
    arrow = dimension_columns(dim, sorted(needed))
    if every > 1:
        arrow = arrow.take(pa.array(np.arange(0, arrow.num_rows, every)))
    mask = np.ones(arrow.num_rows, dtype=bool) if flt.is_true_expr() else np.asarray(flt.evaluate(arrow), dtype=bool)
    names = {n.lower(): n for n in arrow.schema.names}
    for inner in flt.joins:
        keys = inner.dim_keys if inner.dim_keys is not None else _read_keys(tables, inner)
        mask &= keyset.member_mask(arrow.column(names[inner.column]), keys)
    return arrow, mask


def _read_keys(tables: dict[str, Any], join) -> Any:
    """The key set through pyiceberg + Arrow (:func:`kept_rows`)."""
    arrow, mask = kept_rows(tables, join)
    names = {n.lower(): n for n in arrow.schema.names}
    pks = arrow.column(names[join.dim_pk.lower()]).filter(pa.array(mask)).drop_null()
    return keyset.normalize_keys(pks)


def with_key_sets(catalog, tf, wanted: Callable[[Any], bool] = lambda j: True, *, row_limit: int | None = None,
                  fallback: KeyReader | None = None):
    """(``tf`` with key sets on its wanted join filters that lack one, [(join, KeySetResult)])."""
    from ..expr import JoinFilter

    results = []
    joins = []
    for j in tf.joins:
        if j.dim_keys is None and wanted(j):
            r = dimension_keys(catalog, j, row_limit=row_limit, fallback=fallback)
            results.append((j, r))
            if r.keys is not None:
                j = JoinFilter(j.column, j.dim_table, j.dim_pk, j.dim_filter, dim_keys=r.keys, key_source=r.source)
        joins.append(j)
    return tf.with_joins(joins), results


__all__ = [
    "KeyReader",
    "KeySetResult",
    "TooManyKeys",
    "chain_snapshots",
    "chain_within",
    "current_snapshot_id",
    "dimension_columns",
    "dimension_keys",
    "dimension_rows",
    "kept_rows",
    "key_set_key",
    "with_key_sets",
]
