"""Join pruning at query time: dimension key sets, cheaply and cached, tested against every fact
file's foreign-key bounds (the Snowflake seed's join pruning; paper §5 and §7 for the key sets of
join-induced cuts).

A join filter ``fk IN (SELECT pk FROM dim WHERE p)`` (``expr.JoinFilter``) of an inner join is
sound on its own: a fact row whose ``fk`` is not among the keys of the dimension rows satisfying
``p`` joins no dimension row and cannot be in the result. So a fact data file whose Iceberg
manifest bounds ``[min(fk), max(fk)]`` contain no such key holds no matching row — inside or
outside a Pando layout, and for tables with no layout at all. The plan is the intersection of
Iceberg's pruning, the trees and this test.

Key sets are read from the dimension through pyiceberg + Arrow (no Spark job) when the dimension
has at most ``joinKeys.maxDimensionRows`` rows (``pando_iceberg.settings``); above it a
caller-supplied reader (Spark) is used, or the join is left undecided (no file removed, a note).
They are cached process-wide per (dimension table uuid, snapshot id, filter SQL) — the snapshots
of a chain's sub-dimensions included — in a bounded LRU; a new dimension snapshot is a new key,
so a cached key set is never stale. The dimension columns they were computed from are kept too
(:data:`DIMENSION_COLUMNS`, per uuid and snapshot, bounded in bytes): a held-out query's new
literals on the same dimension are a vectorized filter of those columns, not another read.

Uniqueness of a dimension column (FK→PK without declared identifier fields) is checked
the same way, cached per (table uuid, snapshot id, column).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..expr import keys as keyset
from ..expr import same_table
from ..expr.evaluate import evaluation_ready
from ..settings import value as setting

# The settings (pando_iceberg.settings) read here, per planning:
# - joinKeys.maxDimensionRows: the largest dimension whose key sets are read through pyiceberg;
# - joinPruning.maxDimensionRows: join pruning alone (no literal cut needs the keys) reads a key
#   set only when every table of the join's chain has at most this many rows: a key set costs a
#   read of the dimension, and pays only where the fact's files are narrow in the foreign key (no
#   Spark job per query for join pruning);
# - rowFilter.maxKeys, rowFilter.minRows: see row_filters.


class BoundedCache:
    """A thread-safe LRU of at most ``max_entries`` values (key sets, uniqueness answers) and,
    when ``max_bytes`` is given, at most that many bytes by ``size(value)``; a value larger than
    ``max_bytes`` on its own is not kept."""

    def __init__(self, max_entries: int = 256, *, max_bytes: int | None = None,
                 size: Callable[[Any], int] | None = None):
        if max_bytes is not None and size is None:
            raise ValueError("BoundedCache(max_bytes=...) needs size=, the bytes of a value")
        self._lock = threading.Lock()
        self._entries: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._size = size
        self.bytes = 0

    def get(self, key):
        with self._lock:
            if key not in self._entries:
                return None
            self._entries.move_to_end(key)
            return self._entries[key][0]

    def put(self, key, value) -> None:
        nbytes = int(self._size(value)) if self._size is not None else 0
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            if self.max_bytes is not None and nbytes > self.max_bytes:
                return
            self._entries[key] = (value, nbytes)
            self.bytes += nbytes
            while len(self._entries) > self.max_entries or (self.max_bytes is not None and self.bytes > self.max_bytes):
                _, (_, dropped) = self._entries.popitem(last=False)
                self.bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)


KEY_SETS = BoundedCache(256)  # (uuid, snapshot, pk, filter SQL, sub-dimension snapshots) → KeySet
# The columns of dimensions that key sets were read from, per (uuid, snapshot), in Arrow: a
# held-out query's new literals then cost one vectorized filter, not a read. Bounded
# in bytes: the process setting dimensionCache.maxBytes (0 keeps none).
DIMENSION_COLUMNS = BoundedCache(64, max_bytes=setting("dimensionCache.maxBytes"), size=lambda t: t.nbytes)
UNIQUENESS = BoundedCache(1024)  # (uuid, snapshot, column) → bool


class TooManyKeys(ValueError):
    """A bounded key read stopped past its limit (``row_filters``' reader)."""


# Key sets a row filter's bounded read stopped past a limit: (chain snapshots, pk, filter SQL) →
# that limit; a query with the same literals on the same snapshots does not read them again.
TOO_MANY_KEYS = BoundedCache(1024)

KeyReader = Callable[[Any], Any]  # JoinFilter → key set (e.g. a Spark job), for large dimensions


# ---------------------------------------------------------------- dimension state


def _snapshot_id(table) -> int | None:
    snap = table.current_snapshot()
    return snap.snapshot_id if snap is not None else None


def dimension_rows(table) -> int:
    """Rows of the table's current snapshot (its summary; 0 when it has none)."""
    snap = table.current_snapshot()
    if snap is None or snap.summary is None:
        return 0
    return int(snap.summary.get("total-records", 0) or 0)


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
    key = (str(table.metadata.table_uuid), _snapshot_id(table), column.lower())
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


# ---------------------------------------------------------------- literal cuts by predicates


def holds_rows_of(table, snapshot_id: int) -> bool:
    """Does the table's current snapshot hold exactly the rows of ``snapshot_id``, under the same
    schema? True when it is that snapshot, or descends from it through ``replace`` snapshots
    only (files rewritten, data unchanged), and the current schema is that snapshot's."""
    from pyiceberg.table.snapshots import Operation

    then = table.snapshot_by_id(snapshot_id)
    if then is None or then.schema_id != table.metadata.current_schema_id:
        return False
    snap = table.current_snapshot()
    while snap is not None and snap.snapshot_id != snapshot_id:
        if snap.summary is None or snap.summary.operation != Operation.REPLACE or snap.parent_snapshot_id is None:
            return False
        snap = table.snapshot_by_id(snap.parent_snapshot_id)
    return snap is not None


def predicates_decide(catalog, origin, memo: dict | None = None) -> bool:
    """May a literal cut of ``origin`` be decided by comparing the query's dimension predicate
    with the cut's own (paper §5: implication / disjointness through the unique key, no data
    read)? Only while its keys are exactly the predicate's key set over the rows every table of
    its chain holds now (``CutOrigin.exact_at``, ``holds_rows_of``); otherwise key sets are
    compared. ``memo`` (one dict per plan) keeps the answers per (table, snapshot)."""
    if origin.exact_at is None or catalog is None:
        return False
    memo = {} if memo is None else memo
    for name, sid in origin.exact_at:
        if (name, sid) not in memo:
            try:
                memo[(name, sid)] = holds_rows_of(catalog.load_table(name), sid)
            except Exception:  # a dropped or unreadable table: compare key sets (they say why)
                memo[(name, sid)] = False
        if not memo[(name, sid)]:
            return False
    return True


def joins_needing_keys(catalog, tf, cuts, memo: dict | None = None) -> list:
    """The join filters of ``tf`` without a key set that meet one of ``cuts`` (a layout's) that
    predicates cannot decide (``predicates_decide``): comparing key sets is exact whatever
    happened to the dimension since the layout; comparing predicates only while its rows are
    the ones the cut's keys were read from. And those whose foreign key a range cut of
    ``cuts`` splits, when the chain is within the join-pruning limit (``chain_within``)."""
    if not getattr(tf, "joins", None):
        return []
    memo = {} if memo is None else memo
    # Only the cuts on this filter's own joins: each check loads the tables of the cut's chain.
    open_joins = {(j.column, j.dim_table, j.dim_pk) for j in tf.joins if j.dim_keys is None}
    undecided = {key for c in cuts if hasattr(c, "origin")
                 and (key := (c.column, c.origin.dim_table, c.origin.dim_pk)) in open_joins
                 and not predicates_decide(catalog, c.origin, memo)}
    ranged = {col.lower() for c in cuts if not hasattr(c, "origin") for col in c.columns}

    def needed(j) -> bool:
        if (j.column, j.dim_table, j.dim_pk) in undecided:
            return True
        # A range cut on the foreign key is decided by the key set's range (TableFilter.key_ranges):
        # read where join pruning reads it anyway (small dimensions, cached whole).
        if j.column not in ranged or catalog is None:
            return False
        try:
            return chain_within(catalog, j, setting("joinPruning.maxDimensionRows"))
        except Exception:  # an unreadable dimension: the range cuts read both sides
            return False

    return [j for j in tf.joins if j.dim_keys is None and needed(j)]


def chain_within(catalog, join, row_limit: int) -> bool:
    """Has every table of the join's chain (dimension and sub-dimensions) at most ``row_limit`` rows?"""
    tables: dict[str, Any] = {}
    _chain_snapshots(catalog, join, tables)
    return all(dimension_rows(t) <= row_limit for t in tables.values())


# ---------------------------------------------------------------- key sets


@dataclass
class KeySetResult:
    keys: Any  # a normalized key set (expr.keys), or None when undecided
    source: str  # "cache", "pyiceberg", "spark", "supplied", or why it is undecided
    seconds: float = 0.0


def _chain_snapshots(catalog, join, tables: dict[str, Any]) -> tuple:
    """(uuid, snapshot) of the join's dimension and of every sub-dimension along its chain."""
    if join.dim_table not in tables:
        tables[join.dim_table] = catalog.load_table(join.dim_table)
    dim = tables[join.dim_table]
    out = ((join.dim_table, str(dim.metadata.table_uuid), _snapshot_id(dim)),)
    for inner in join.dim_filter.joins:
        out += _chain_snapshots(catalog, inner, tables)
    return out


def _key_set_key(catalog, join, tables: dict[str, Any]) -> tuple:
    """The cache key of a join's key set: its chain's snapshots, the pk and the filter's SQL."""
    return (_chain_snapshots(catalog, join, tables), join.dim_pk, join.dim_filter.to_sql())


def dimension_keys(catalog, join, *, row_limit: int | None = None, fallback: KeyReader | None = None) -> KeySetResult:
    """``SELECT DISTINCT pk FROM dim WHERE p`` (nested join filters applied) for a join filter:
    from the cache, else through pyiceberg when every dimension of the chain has at most
    ``row_limit`` rows, else through ``fallback``; undecided (keys None) when none applies."""
    t0 = time.perf_counter()
    if join.dim_keys is not None:
        return KeySetResult(join.dim_keys, "supplied")
    limit = setting("joinKeys.maxDimensionRows") if row_limit is None else row_limit
    tables: dict[str, Any] = {}
    cache_key = _key_set_key(catalog, join, tables)
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
    key = (str(dim.metadata.table_uuid), _snapshot_id(dim))
    hit = DIMENSION_COLUMNS.get(key)
    if hit is not None and wanted <= set(hit.schema.names):
        return hit
    if hit is not None:
        wanted |= set(hit.schema.names)
    arrow = evaluation_ready(dim.scan(selected_fields=tuple(n for n in names.values() if n in wanted)).to_arrow())
    DIMENSION_COLUMNS.put(key, arrow)
    return arrow


def _kept_rows(tables: dict[str, Any], join, every: int = 1) -> tuple[pa.Table, np.ndarray]:
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
    """The key set through pyiceberg + Arrow (:func:`_kept_rows`)."""
    arrow, mask = _kept_rows(tables, join)
    names = {n.lower(): n for n in arrow.schema.names}
    pks = arrow.column(names[join.dim_pk.lower()]).filter(pa.array(mask)).drop_null()
    return keyset.normalize_keys(pks)


# A row filter's key set is first estimated on every ESTIMATE_EVERY-th row of a dimension of at
# least ESTIMATE_MIN_ROWS rows (4,096 rows or more: a share's standard error under 0.8 %); one
# estimated above ESTIMATE_MARGIN × the share a row filter may keep is not read (TPC-H SF 1: Q8's
# 20 % and Q22's 28 % of customer took 4-6 ms of planning each to be refused).
ESTIMATE_EVERY = 16
ESTIMATE_MIN_ROWS = 65_536
ESTIMATE_MARGIN = 1.5


def estimated_key_share(catalog, join) -> float | None:
    """The share of the dimension's rows (= of its keys: the joined column is unique) the join
    keeps, estimated on every :data:`ESTIMATE_EVERY`-th row; None when the dimension has fewer
    than :data:`ESTIMATE_MIN_ROWS` rows or its chain more than the setting ``joinKeys.maxDimensionRows``."""
    tables: dict[str, Any] = {}
    _chain_snapshots(catalog, join, tables)
    rows = dimension_rows(tables[join.dim_table])
    limit = setting("joinKeys.maxDimensionRows")
    if rows < ESTIMATE_MIN_ROWS or any(dimension_rows(t) > limit for t in tables.values()):
        return None
    _, mask = _kept_rows(tables, join, ESTIMATE_EVERY)
    return float(mask.mean()) if len(mask) else None


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


# ---------------------------------------------------------------- FK bounds


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


def non_unique_literal_joins(table, layout, memo: dict | None = None,
                             joined: set[tuple[str, str]] | None = None) -> dict[tuple[str, str], str]:
    """(dimension, pk) of the layout's literal cuts whose pk is no longer the dimension's key
    (not declared, and not unique in the dimension's current snapshot) → a note for explain.
    Their cuts are ignored by the planner (a stale uniqueness never gives a wrong result).
    ``joined``: only these (dimension, pk), the ones the query's filter joins — a literal cut
    whose join the query lacks is decided by the key's nullness alone, which holds whatever the
    dimension holds, so its dimension is not loaded. ``memo`` (one dict per plan) keeps the
    answers across the partition layouts of one plan."""
    catalog = getattr(table, "catalog", None)
    out: dict[tuple[str, str], str] = {}
    if catalog is None:
        return out
    memo = {} if memo is None else memo
    dims = {(c.origin.dim_table, c.origin.dim_pk) for c in layout.cuts if hasattr(c, "origin")}
    if joined is not None:
        dims = {(d, pk) for d, pk in dims if any(same_table(d, jd) and pk.lower() == jpk for jd, jpk in joined)}
    for dim_name, pk in sorted(dims):
        if (dim_name, pk) not in memo:
            dim = catalog.load_table(dim_name)
            memo[(dim_name, pk)] = None if key_basis(dim, pk) is not None else (
                f"literal cuts through {dim_name}.{pk} ignored: it is no longer unique "
                f"(snapshot {_snapshot_id(dim)}) nor a declared identifier field")
        if memo[(dim_name, pk)] is not None:
            out[(dim_name, pk)] = memo[(dim_name, pk)]
    return out


# ---------------------------------------------------------------- row filters


# Sideways information passing (beyond the paper, which prunes blocks only): a join filter's key
# set, once read, also filters the table's rows before Spark's joins and aggregates see them —
# the same reasoning that lets a file holding none of the keys be skipped lets each row holding
# none be dropped. It pays where Spark would otherwise carry the whole table through a shuffle:
# TPC-H Q17's correlated AVG per part key, Q7's sort-merge join with orders.
# A key set filters rows only when it has at most rowFilter.maxKeys keys (0: no row filters), and
# only a table of at least rowFilter.minRows rows is filtered: Spark joins a smaller one about as fast as it
# semi-joins it, and the keys' broadcast and views cost planning time (TPC-H SF 1: customer and
# supplier filtered by a nation's keys, partsupp by a nation's suppliers, 20-50 ms per query for no
# gain in the run).
# A key set is read for a row filter alone only when every table of the join's chain has at most
# this share of the filtered table's rows: reading it then costs at most about that share of
# the scan it may save (TPC-H: part and customer qualify for lineitem, orders does not).
ROW_FILTER_DIMENSION_SHARE = 0.1
# ... and it filters only when it keeps at most this share of the dimension's rows, so about that
# share of the table's: at TPC-H SF 10 (Pando k=3, BENCHMARKS.md 2026-11-26 (later)) Q17's 0.1 % of
# part, Q7's 8 % of supplier and Q9's 5.4 % of part made those queries 9.6×, 2.7× and 1.5× faster;
# Q3's 20 % of customer, semi-joined to orders, made it about 1 s slower in a first try (the
# semi-join repeats the join Spark does anyway, for a fifth of the rows).
ROW_FILTER_KEY_SHARE = 0.1


@dataclass(frozen=True)
class RowFilter:
    """Rows of the table whose ``join.column`` is not among ``keys`` are dropped before Spark's
    joins: exact, because the join filter is (an inner FK→PK join keeps none of them)."""

    join: Any  # the JoinFilter
    keys: Any  # its key set (expr.keys)
    source: str  # how the keys were read

    def note(self) -> str:
        return (f"row filter: {self.join.column} semi-joined with {keyset.keys_len(self.keys):,} keys of "
                f"{self.join.dim_table} ({self.source})")


def constrains(join) -> bool:
    """Does the join keep fewer than all of its dimension's keys (a predicate other than TRUE
    somewhere along its chain)? ``fk IN (SELECT pk FROM dim WHERE TRUE)`` filters nothing."""
    return not join.dim_filter.is_true_expr() or any(constrains(j) for j in join.dim_filter.joins)


def row_filters(catalog, tf, table_rows: int, *, max_keys: int | None = None,
                reader: Callable[[int], KeyReader] | None = None,
                repeats: Callable[[Any], str | None] | None = None) -> tuple[list[RowFilter], list[str]]:
    """The join filters of ``tf`` to apply to the table's rows, with their key sets, and notes
    for those left out. A join that filters nothing is left out. A key set may have at most
    ``max_keys`` (default the setting ``rowFilter.maxKeys``) keys and :data:`ROW_FILTER_KEY_SHARE` of
    its dimension's rows; a table under the setting ``rowFilter.minRows`` rows gets none. One already
    on the filter is used; otherwise one is read (cached, :func:`dimension_keys`; above
    the setting ``joinKeys.maxDimensionRows`` rows by ``reader(limit)``, which raises past ``limit`` keys) when
    every table of the chain has at most :data:`ROW_FILTER_DIMENSION_SHARE` of ``table_rows``,
    unless its estimate (:func:`estimated_key_share`) is above :data:`ESTIMATE_MARGIN` × the limit.
    ``repeats(join)``: why the query's own plan already does that join's filtering (its note), or
    None; such a join gets no row filter and no key set is read for it."""
    max_keys = setting("rowFilter.maxKeys") if max_keys is None else max_keys
    out: list[RowFilter] = []
    notes: list[str] = []
    if max_keys <= 0 or catalog is None:
        return out, notes
    min_rows = setting("rowFilter.minRows")
    if table_rows < min_rows:
        if any(constrains(j) for j in tf.joins):
            notes.append(f"no row filters: {table_rows:,} rows (fewer than {min_rows:,}: "
                         "Spark's own join is as fast)")
        return out, notes
    for j in tf.joins:
        if not constrains(j):
            continue
        why = repeats(j) if repeats is not None else None
        if why is not None:
            notes.append(f"no row filter for {j.to_sql()}: {why}")
            continue
        dim_rows = dimension_rows(catalog.load_table(j.dim_table))
        limit = min(max_keys, int(dim_rows * ROW_FILTER_KEY_SHARE))
        if j.dim_keys is not None:
            keys, source = j.dim_keys, j.key_source or "supplied"
        elif chain_within(catalog, j, int(table_rows * ROW_FILTER_DIMENSION_SHARE)):
            seen = _key_set_key(catalog, j, {})
            known = TOO_MANY_KEYS.get(seen)
            if known is not None and limit <= known:
                notes.append(f"no row filter for {j.to_sql()}: more than {known:,} keys "
                             "(an earlier read, same snapshots)")
                continue
            try:
                share = None if KEY_SETS.get(seen) is not None else estimated_key_share(catalog, j)
                if share is not None and share * dim_rows > ESTIMATE_MARGIN * limit:
                    notes.append(f"no row filter for {j.to_sql()}: about {share:.0%} of {j.dim_table}'s "
                                 f"{dim_rows:,} keys, estimated on one row in {ESTIMATE_EVERY} (more than "
                                 f"{limit:,}: at most {max_keys:,} and {ROW_FILTER_KEY_SHARE:.0%})")
                    continue
                r = dimension_keys(catalog, j, fallback=None if reader is None else reader(limit))
            except TooManyKeys as e:  # the reader stopped past the limit
                TOO_MANY_KEYS.put(seen, limit)
                notes.append(f"no row filter for {j.to_sql()}: {e}")
                continue
            except Exception as e:  # an unreadable dimension: Spark's own join decides
                notes.append(f"no row filter for {j.to_sql()}: {type(e).__name__}: {e}")
                continue
            keys, source = r.keys, r.source
        else:
            notes.append(f"no row filter for {j.to_sql()}: its chain has a table above "
                         f"{ROW_FILTER_DIMENSION_SHARE:.0%} of this table's rows")
            continue
        if keys is None:
            notes.append(f"no row filter for {j.to_sql()}: {source}")
        elif keyset.keys_len(keys) > limit:
            notes.append(f"no row filter for {j.to_sql()}: {keyset.keys_len(keys):,} keys (more than {limit:,}: "
                         f"at most {max_keys:,} and {ROW_FILTER_KEY_SHARE:.0%} of {j.dim_table}'s {dim_rows:,} rows)")
        else:
            out.append(RowFilter(j, keys, source))
    return out, notes


__all__ = [
    "DIMENSION_COLUMNS",
    "ESTIMATE_EVERY",
    "ESTIMATE_MARGIN",
    "ESTIMATE_MIN_ROWS",
    "KEY_SETS",
    "ROW_FILTER_DIMENSION_SHARE",
    "ROW_FILTER_KEY_SHARE",
    "TOO_MANY_KEYS",
    "UNIQUENESS",
    "BoundedCache",
    "JoinPruning",
    "KeySetResult",
    "RowFilter",
    "TooManyKeys",
    "bounds_may_contain",
    "chain_within",
    "constrains",
    "declared_key",
    "dimension_columns",
    "dimension_keys",
    "dimension_rows",
    "estimated_key_share",
    "file_bounds",
    "holds_rows_of",
    "iceberg_key_values",
    "is_unique",
    "joins_needing_keys",
    "key_basis",
    "non_unique_literal_joins",
    "predicates_decide",
    "prune_files",
    "row_filters",
    "stats_refute_uniqueness",
    "uniqueness_oracle",
    "with_key_sets",
]
