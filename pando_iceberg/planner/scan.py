"""``plan_scan``: pyiceberg's plan_files → every Pando tree → the intersection (§5)."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from sqlglot import exp

from .limit import Ordering

log = logging.getLogger("pando_iceberg.planner")


@dataclass
class TreeReport:
    tree: int
    leaves_reached: int
    blocks: int


@dataclass
class ExplainRecord:
    """What planning did, stage by stage; ``fallback_reason`` is set whenever Pando did not prune."""

    table: str
    snapshot_id: int | None
    filter: Any  # the TableFilter planned with; ``filter_sql`` prints it when asked (not on every plan)
    total_files: int = 0
    total_bytes: int = 0
    total_rows: int = 0
    iceberg_files: int = 0
    iceberg_bytes: int = 0
    iceberg_rows: int = 0
    pando_files: int = 0
    pando_bytes: int = 0
    pando_rows: int = 0
    layout_id: str | None = None
    layout_files_live: int = 0
    files_outside_layout: int = 0
    blocks_total: int = 0
    blocks_chosen: int = 0
    trees: list[TreeReport] = field(default_factory=list)
    fallback_reason: str | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # e.g. cuts ignored because their column changed
    join_files_pruned: int = 0  # files removed by join pruning (FK bounds vs dimension keys, planner/joins.py)
    joins: list[dict] = field(default_factory=list)  # how each join filter was decided (JoinPruning.as_dict)
    limit_files_pruned: int = 0  # planned files a LIMIT removed (fully matching files hold its rows, planner/limit.py)
    topk_boundary: str | None = None  # ORDER BY ... LIMIT: the value k matching rows reach (planner/limit.py)
    fully_matching_files: int = 0  # LIMIT/top-k: planned files every row of which satisfies the filter
    fully_matching_by_trees: int = 0  # of those, the files only the layout's trees prove (planner/limit.py)
    limit: int | None = None  # the rows a LIMIT over the scan needs (LIMIT + OFFSET); None: no LIMIT
    order_by: str | None = None  # its ORDER BY as top-k pruning read it ('fare DESC NULLS LAST')

    @property
    def used_layout(self) -> bool:
        return self.fallback_reason is None

    @property
    def filter_sql(self) -> str:
        return self.filter.to_sql()

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["filter_sql"] = d.pop("filter").to_sql()
        d["trees"] = [t.__dict__ for t in self.trees]
        d["used_layout"] = self.used_layout
        return d


@dataclass
class ScanPlan:
    tasks: list[Any]  # pyiceberg FileScanTask
    explain: ExplainRecord
    filter: Any  # the TableFilter applied to rows on read
    snapshot_id: int | None

    @property
    def paths(self) -> set[str]:
        return {t.file.file_path for t in self.tasks}


class LayoutCache:
    """Decoded layouts by (table uuid, layout id): a layout never changes once written."""

    def __init__(self, max_entries: int = 32):
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], tuple[Any, Any]] = {}
        self.max_entries = max_entries

    def get(self, key: tuple[str, str]):
        with self._lock:
            return self._entries.get(key)

    def put(self, key: tuple[str, str], value: tuple[Any, Any]) -> None:
        with self._lock:
            if len(self._entries) >= self.max_entries:
                self._entries.pop(next(iter(self._entries)))
            self._entries[key] = value


DEFAULT_CACHE = LayoutCache()


def _table_name(table) -> str:
    ident = getattr(table, "name", None)
    name = ident() if callable(ident) else ident
    return ".".join(name) if isinstance(name, tuple) else str(name)


def table_filter(table, filter: Any = None, schemas: dict[str, pa.Schema] | None = None):
    """A :class:`pando_iceberg.expr.TableFilter` from SQL text, a pyiceberg expression, a
    TableFilter, or None (no filter)."""
    from ..expr import TableFilter

    if isinstance(filter, TableFilter):  # before the schema's Arrow form is built (~0.5 ms)
        return filter
    schema = table.schema().as_arrow()
    name = _table_name(table)
    if filter is None:
        return TableFilter.true(schema, name)
    if isinstance(filter, str):
        if schemas is None:
            schemas = _subquery_schemas(table, filter)
        return TableFilter.from_sql(filter, schema, table=name, schemas=schemas)
    from .pyiceberg_sql import pyiceberg_to_sql

    return TableFilter.from_sql(pyiceberg_to_sql(filter, table.schema()), schema, table=name, schemas=schemas)


def _subquery_schemas(table, sql: str) -> dict[str, pa.Schema] | None:
    """Schemas of the dimension tables a filter's ``IN (SELECT ...)`` parts name, from the catalog."""
    from sqlglot import exp, parse_one

    try:
        tree = parse_one(f"SELECT 1 WHERE {sql}", read="spark")
    except Exception:
        return None  # from_sql reports the parse error with its own message
    names = {".".join(p for p in (t.db, t.name) if p) for t in tree.find_all(exp.Table) if t.name}
    catalog = getattr(table, "catalog", None)
    if not names or catalog is None:
        return None
    out = {}
    for n in names:
        try:
            out[n] = catalog.load_table(n).schema().as_arrow()
        except Exception:
            pass  # an unknown dimension table is reported by from_sql, naming it
    return out


def plan_scan(table, filter: Any = None, *, snapshot_id: int | None = None, cache: LayoutCache | None = DEFAULT_CACHE,
              use_layout: bool = True, schemas: dict[str, pa.Schema] | None = None, iceberg_filter: Any = None,
              case_sensitive: bool = True, limit: int | None = None, order: Ordering | None = None) -> ScanPlan:
    """Plan the files a filter must read: Iceberg's partition + min/max pruning, then Pando.

    ``iceberg_filter``: the pyiceberg expression Iceberg's pruning plans with, as it is (a
    caller's own expression, read with pyiceberg's semantics; ``filter`` is then SQL that holds
    on every row it keeps); None: one implied by ``filter`` (``expr.iceberg.to_pyiceberg``).
    ``limit``: the scan wants any ``limit`` matching rows (no order): LIMIT pruning
    (``_prune_by_limit``) may keep only files every row of which matches; with ``order`` it wants
    the ``limit`` first matching rows in that order (top-k pruning)."""
    from ..expr.iceberg import to_pyiceberg
    from .manifests import plan_files

    t0 = time.perf_counter()
    tf = table_filter(table, filter, schemas)
    snap = table.snapshot_by_id(snapshot_id) if snapshot_id is not None else table.current_snapshot()
    sid = snap.snapshot_id if snap is not None else None
    ex = ExplainRecord(_table_name(table), sid, tf)
    if snap is None:  # an empty table: nothing to read
        ex.fallback_reason = "the table has no snapshot"
        ex.seconds = time.perf_counter() - t0
        return ScanPlan([], ex, tf, None)

    if snap.summary is not None:
        ex.total_files = int(snap.summary.get("total-data-files", 0) or 0)
        ex.total_bytes = int(snap.summary.get("total-files-size", 0) or 0)
        ex.total_rows = int(snap.summary.get("total-records", 0) or 0)
    row_filter = to_pyiceberg(tf, table.schema()) if iceberg_filter is None else iceberg_filter
    # pyiceberg's plan, decoded manifests cached
    tasks = plan_files(table, row_filter, snapshot_id=sid, case_sensitive=case_sensitive)
    ex.iceberg_files, ex.iceberg_bytes, ex.iceberg_rows = _sizes(tasks)

    chosen = tasks
    placed: dict[str, tuple[Any, int]] | None = {} if limit is not None else None
    if not use_layout:
        ex.fallback_reason = "layout use disabled by the caller"
    else:
        try:
            chosen = _prune_with_layout(table, tf, tasks, ex, cache, placed)
        except Exception as e:  # invariant 2: a broken layout never fails the scan
            ex.fallback_reason = f"layout unusable ({type(e).__name__}: {e}); planned without it"
            log.warning("pando: %s: %s", ex.table, ex.fallback_reason)
            chosen = tasks
            placed = {}
        chosen = _prune_by_joins(table, tf, chosen, ex)
    if limit is not None:
        from pyiceberg.expressions import AlwaysTrue

        ex.limit, ex.order_by = limit, None if order is None else order.sql()
        exact = iceberg_filter is None or isinstance(iceberg_filter, AlwaysTrue)
        chosen = _prune_by_limit(table, tf, chosen, ex, limit, exact, order, placed)
    ex.pando_files, ex.pando_bytes, ex.pando_rows = _sizes(chosen)
    ex.seconds = time.perf_counter() - t0
    return ScanPlan(chosen, ex, tf, sid)


def _prune_by_joins(table, tf, tasks, ex: ExplainRecord):
    """Join pruning (planner/joins.py): files whose FK bounds hold no dimension key are skipped.
    Sound on its own; a failure only means no file is removed (invariant 2)."""
    from .joins import prune_files

    try:
        kept, decisions, notes = prune_files(table, tf, tasks)
    except Exception as e:
        ex.notes.append(f"join pruning skipped ({type(e).__name__}: {e})")
        return tasks
    ex.joins = [d.as_dict() for d in decisions]
    ex.join_files_pruned = len(tasks) - len(kept)
    ex.notes.extend(notes)
    return kept


def _prune_by_limit(table, tf, tasks, ex: ExplainRecord, limit: int, exact: bool, order: Ordering | None,
                    placed: dict[str, tuple[Any, int]] | None = None):
    """LIMIT pruning (planner/limit.py): the fewest fully matching files holding ``limit`` rows,
    when there are enough, or with ``order`` the files that may hold the ``limit`` first rows
    (top-k pruning); ``tasks`` otherwise. Only when ``tf`` is the filter the rows are read
    with (``exact``: not the SQL standing for a caller's pyiceberg expression, which may keep
    rows pyiceberg's reader drops). ``placed``: path → (tree regions, block) of the files of
    the layout the trees judged (``_prune_with_layout``), for the trees' proof of fully
    matching files."""
    from .limit import fully_matching_by, limit_tasks, top_k_tasks

    if not exact:
        ex.notes.append("LIMIT not applied: the filter is a pyiceberg expression, read with pyiceberg's semantics")
        return tasks
    blocks = [placed.get(t.file.file_path) for t in tasks] if placed else None
    matching, by_trees = fully_matching_by(tf, tasks, table.schema(), blocks)
    ex.fully_matching_files, ex.fully_matching_by_trees = int(matching.sum()), int(by_trees.sum())
    if order is None:
        kept = limit_tasks(tasks, matching, limit)
    else:
        found = top_k_tasks(tasks, matching, table.schema(), order, limit)
        kept = None if found is None else found[0]
        if found is not None and found[1] is not None:
            ex.topk_boundary = str(found[1])
    if kept is None:
        return tasks
    ex.limit_files_pruned = len(tasks) - len(kept)
    return kept


def _sizes(tasks) -> tuple[int, int, int]:
    return (len(tasks), sum(int(t.file.file_size_in_bytes) for t in tasks),
            sum(int(t.file.record_count) for t in tasks))


def layout_of(table, cache: LayoutCache | None = DEFAULT_CACHE):
    """(pointer, layout, path → block) of the table's current layout; (None, None, None) when
    the table has none. Raises SidecarError (or the decoder's error) when it is unusable.
    For a partitioned layout (format version 2) ``layout`` is the ``PartitionedLayoutSidecar``
    (its ``cuts`` are every partition's) and path → block is None."""
    from ..storage.partitions import PARTITIONED_FORMAT_VERSION, read_layout_sidecar
    from ..storage.pointer import layout_pointer

    pointer = layout_pointer(table.properties)
    if pointer is None:
        return None, None, None
    key = (str(table.metadata.table_uuid), pointer.layout_id)
    hit = cache.get(key) if cache is not None else None
    if hit is None:
        sidecar = read_layout_sidecar(table.io, pointer, table.location(), table.metadata.table_uuid)
        if pointer.format_version == PARTITIONED_FORMAT_VERSION:
            hit = (sidecar, None)  # partitions decoded lazily, as plans meet their files
        else:
            layout = sidecar.load_layout()
            hit = (layout, {ref.path: b for b, refs in sidecar.block_files.items() for ref in refs})
        if cache is not None:
            cache.put(key, hit)
    return (pointer,) + hit


def needs_keys(table, tf, layout, memo: dict | None = None) -> list:
    """The filter's join filters that meet a literal cut of ``layout`` which predicates cannot
    decide, and have no key set yet (``planner.literal_cuts.joins_needing_keys``): these get key sets
    before the trees are walked."""
    from .literal_cuts import joins_needing_keys

    if layout is None or not getattr(tf, "joins", None):
        return []
    return joins_needing_keys(getattr(table, "catalog", None), tf, layout.cuts, memo)


def keys_for_layout(table, tf, cache: LayoutCache | None = DEFAULT_CACHE) -> list:
    """``needs_keys`` against the table's current layout (none when it has none or cannot be
    read: the plan then says why)."""
    try:
        _, layout, _ = layout_of(table, cache)
    except Exception:
        return []
    return needs_keys(table, tf, layout)


def with_dim_keys(tf, key_of, only: list | None = None):
    """``tf`` with ``key_of(join)`` as the key set of every join filter that has none (of those
    in ``only``, when given)."""
    from ..expr import JoinFilter

    wanted = None if only is None else {id(j) for j in only}
    joins = [j if j.dim_keys is not None or (wanted is not None and id(j) not in wanted)
             else JoinFilter(j.column, j.dim_table, j.dim_pk, j.dim_filter, dim_keys=key_of(j))
             for j in tf.joins]
    return tf.with_joins(joins)


def _pyiceberg_keys(table, join) -> Any:
    """SELECT DISTINCT pk FROM dim WHERE p (nested join filters applied) through pyiceberg, from
    the process-wide key-set cache (planner/keysets.py; whatever the dimension's size: the
    pyiceberg planner has no Spark to hand it to)."""
    from .keysets import dimension_keys

    catalog = getattr(table, "catalog", None)
    if catalog is None:
        raise ValueError(f"the table has no catalog to read dimension table {join.dim_table} from")
    return dimension_keys(catalog, join, row_limit=2**62).keys


def _in_keys(column, keys) -> np.ndarray:
    """Vectorized ``column IN keys`` (NULL → False); keys a roaring bitmap or an array."""
    import pyarrow.compute as pc

    values = np.asarray(keys.to_array() if hasattr(keys, "to_array") else keys)
    value_set = pa.array(values).cast(column.type)
    return np.asarray(pc.fill_null(pc.is_in(column, value_set=value_set), False), dtype=bool)


def _wanted_blocks(table, pointer, layout, tf, ex: ExplainRecord,
                   key_memo: dict | None = None) -> tuple[np.ndarray, Any, Any]:
    """Block mask of ``layout`` a filter must read (``Layout.blocks_for``; cuts whose column
    changed since the layout are ignored, with a note), the per-tree explanation, and the
    ignored cuts (a ``cut → bool`` test; None: none)."""
    changed = changed_cut_columns(table, pointer, layout)
    if changed:
        note = (f"cuts on {', '.join(sorted(changed))} ignored: the column was renamed, dropped or replaced "
                "since the layout (its name no longer denotes the same field id)")
        if note not in ex.notes:
            ex.notes.append(note)
    from .literal_cuts import non_unique_literal_joins

    joined = {(j.dim_table, j.dim_pk) for j in getattr(tf, "joins", None) or ()}
    # a dimension column no longer unique
    not_keys = non_unique_literal_joins(table, layout, key_memo, joined)
    for note in not_keys.values():
        if note not in ex.notes:
            ex.notes.append(note)
    ignored = {c.key for c in layout.cuts if hasattr(c, "origin") and (c.origin.dim_table, c.origin.dim_pk) in not_keys}
    untyped = untyped_cut_keys(layout)
    if untyped:
        ignored |= untyped
        note = (f"{len(untyped)} cut(s) over computed terms ignored: the layout was written before cuts were "
                "evaluated with Spark's typed semantics (a re-layout restores them)")
        if note not in ex.notes:
            ex.notes.append(note)
    literal = {(c.column, c.origin.dim_table, c.origin.dim_pk) for c in layout.cuts if hasattr(c, "origin")}
    for j in getattr(tf, "joins", None) or ():
        if (j.column, j.dim_table, j.dim_pk) in literal:  # explain: how the trees decided this join's cuts
            how = ("by comparing predicates (§5: the dimension holds the rows the cuts' keys were read from; no "
                   "data read)" if j.dim_keys is None else "by key sets (read from the dimension's current snapshot)")
            note = f"literal cuts on {j.column} through {j.dim_table}.{j.dim_pk} decided {how}"
            if note not in ex.notes:
                ex.notes.append(note)
    ranged = {col.lower() for c in layout.cuts if not hasattr(c, "origin") for col in c.columns}
    for name, (lo, hi) in (tf.key_ranges() if hasattr(tf, "key_ranges") else {}).items():
        if name.lower() in ranged:
            note = f"range cuts on {name} decided by its join's key set ({lo}..{hi})"
            if note not in ex.notes:
                ex.notes.append(note)
    ignoring = _IgnoringCuts(tf, changed, ignored) if changed or ignored else None
    blocks, why = layout.blocks_for(ignoring if ignoring is not None else tf)
    wanted = np.zeros(layout.num_blocks, dtype=bool)
    wanted[np.asarray(blocks, dtype=np.int64)] = True
    return wanted, why, None if ignoring is None else ignoring.ignores


def _prune_with_layout(table, tf, tasks, ex: ExplainRecord, cache: LayoutCache | None,
                       placed: dict[str, tuple[Any, int]] | None = None):
    """The files the trees may need (§5); ``placed`` (when given) gets path → (tree regions,
    block) for each kept file of the layout (planner/limit.py's proof of fully matching files)."""
    pointer, layout, block_of_path = layout_of(table, cache)
    if pointer is None:
        ex.fallback_reason = "the table has no Pando layout"
        return tasks
    ex.layout_id = pointer.layout_id
    if block_of_path is None:
        return _prune_partitioned(table, tf, tasks, ex, pointer, layout, placed)
    needed = needs_keys(table, tf, layout)
    if needed:
        tf = with_dim_keys(tf, lambda j: _pyiceberg_keys(table, j), needed)

    wanted, why, ignore = _wanted_blocks(table, pointer, layout, tf, ex)
    ex.blocks_total, ex.blocks_chosen = int(layout.num_blocks), int(wanted.sum())
    regions = _regions(layout, ignore) if placed is not None else None
    ex.trees = [TreeReport(t.tree, len(t.leaves), len(t.blocks)) for t in getattr(why, "trees", [])]

    kept = []
    for task in tasks:
        b = block_of_path.get(task.file.file_path)
        if b is None:
            ex.files_outside_layout += 1  # added after the layout (or rewritten by others): always read
            kept.append(task)
            continue
        ex.layout_files_live += 1
        if wanted[b]:
            kept.append(task)
            if regions is not None and placed is not None:
                placed[task.file.file_path] = (regions, int(b))
    _check_stale(table, tasks, ex, block_of_path)
    return kept


def _regions(layout, ignore):
    """The layout's trees as regions (planner/limit.py), None when they prove nothing (a layout
    not finalized)."""
    from .limit import TreeRegions

    return TreeRegions.of(layout, ignore)


def _prune_partitioned(table, tf, tasks, ex: ExplainRecord, pointer, sidecar,
                       placed: dict[str, tuple[Any, int]] | None = None):
    """Per-partition layouts (format version 2): each file Iceberg's pruning kept is judged by
    the trees of the partition layout whose file map holds it (decoded once per plan and
    cached); files in no partition's map are always read. Explain counts add up over the
    partitions met; ``partitions`` lists (partition, blocks chosen, blocks)."""
    part_of = sidecar.partition_of_path()
    wanted: dict[str, np.ndarray] = {}
    regions: dict[str, Any] = {}  # partition → its layout's trees as regions, when ``placed`` is asked for
    keyed = [tf]  # the filter with dimension key sets, computed once when any partition needs them
    key_memo: dict = {}  # dimension columns' key basis, checked once per plan (joins.non_unique_literal_joins)
    origin_memo: dict = {}  # dimension snapshots' rows, checked once per plan (joins.predicates_decide)

    def mask(name: str) -> np.ndarray:
        if name not in wanted:
            entry = sidecar.partitions[name]
            layout = entry.layout
            needed = needs_keys(table, keyed[0], layout, origin_memo)
            if needed:
                keyed[0] = with_dim_keys(keyed[0], lambda j: _pyiceberg_keys(table, j), needed)
            # A kept partition layout may predate the last rewrite: its cuts' names are checked
            # against the schema of its own base snapshot.
            own = dataclasses.replace(pointer, snapshot_id=entry.sidecar.base_snapshot_id) \
                if entry.sidecar.base_snapshot_id is not None else pointer
            wanted[name], _, ignore = _wanted_blocks(table, own, layout, keyed[0], ex, key_memo)
            if placed is not None:
                regions[name] = _regions(layout, ignore)
            ex.blocks_total += int(layout.num_blocks)
            ex.blocks_chosen += int(wanted[name].sum())
        return wanted[name]

    kept = []
    for task in tasks:
        path = task.file.file_path
        name = part_of.get(path)
        if name is None:
            ex.files_outside_layout += 1  # a partition without a layout, or added since: always read
            kept.append(task)
            continue
        ex.layout_files_live += 1
        b = sidecar.partitions[name].block_of_path()[path]
        if mask(name)[b]:
            kept.append(task)
            if placed is not None and regions.get(name) is not None:
                placed[path] = (regions[name], int(b))
    ex.notes.append(f"per-partition layouts: {len(wanted)} of {len(sidecar.partitions)} partition layout(s) met "
                    f"by this plan")
    _check_stale(table, tasks, ex, part_of)
    return kept


def _check_stale(table, tasks, ex: ExplainRecord, layout_paths) -> None:
    """When the plan kept no file of the layout: Iceberg's own pruning may have left none, and
    the layout is stale only if no live file (``layout_paths`` holds its paths) belongs to it."""
    if ex.layout_files_live:
        return
    live = tasks if ex.iceberg_files == ex.total_files else table.scan(snapshot_id=ex.snapshot_id).plan_files()
    if not any(t.file.file_path in layout_paths for t in live):
        ex.fallback_reason = "no live data file belongs to the layout (it is stale: the table was rewritten since)"
    else:
        ex.notes.append("Iceberg's pruning left no file of the layout")


def changed_cut_columns(table, pointer, layout) -> set[str]:
    """Columns of the layout's cuts whose name no longer denotes the field it denoted when the
    layout was written (renamed, dropped, or dropped and re-added: a cut names its column, the
    data files name field ids). The layout's schema is its snapshot's; if that snapshot was
    expired, every schema in the table's metadata that has the name must agree on its field id."""
    meta = table.metadata
    snap = meta.snapshot_by_id(pointer.snapshot_id)
    schemas = {s.schema_id: s for s in meta.schemas}
    base = [schemas[snap.schema_id]] if snap is not None and snap.schema_id in schemas else list(schemas.values())
    current = table.schema()

    def field_id(schema, name):
        try:
            return schema.find_field(name, case_sensitive=False).field_id
        except ValueError:
            return None

    changed = set()
    for column in {c for cut in layout.cuts for c in getattr(cut, "columns", ())}:
        then = {field_id(s, column) for s in base} - ({None} if snap is None else set())
        if len(then) != 1 or field_id(current, column) not in then:
            changed.add(column)
    return changed


# Layout format version from which cuts are evaluated with Spark's typed semantics (layout/serialize.py).
TYPED_CUTS_VERSION = 3
# Nodes under which a column is still read as it is stored: the predicate's own structure.
_PREDICATE_NODES = (exp.Predicate, exp.Connector, exp.Not, exp.Paren, exp.In, exp.Between, exp.Like, exp.Is)


def untyped_cut_keys(layout) -> set[str]:
    """Keys of the cuts of a layout written before cuts were evaluated with Spark's typed semantics
    whose meaning may have changed since: those over a computed term (a column under arithmetic, a
    cast or a function), where integer widths, 32-bit floats and narrowing casts now apply. A
    plain comparison of a column with literals meant then what its SQL means now."""
    if getattr(layout, "format_version", TYPED_CUTS_VERSION) >= TYPED_CUTS_VERSION:
        return set()
    return {c.key for c in layout.cuts if isinstance(getattr(c, "expr", None), exp.Expression)
            and any(not isinstance(col.parent, _PREDICATE_NODES) for col in c.expr.find_all(exp.Column))}


class _IgnoringCuts:
    """A filter for ``Layout.blocks_for`` that claims nothing about cuts on the given columns
    or with the given keys (both sides may hold matching rows): sound whatever those cuts once meant."""

    def __init__(self, tf, columns: set[str], cut_keys: set[str] | frozenset[str] = frozenset()):
        self.tf, self.columns, self.cut_keys = tf, columns, cut_keys

    def ignores(self, cut) -> bool:
        return cut.key in self.cut_keys or bool(self.columns & set(getattr(cut, "columns", ())))

    def sides(self, cut):
        if self.ignores(cut):
            return (True, True)
        return self.tf.sides(cut)


def read_arrow(table, plan: ScanPlan, columns: tuple[str, ...] | None = None) -> pa.Table:
    """Read the plan's files into Arrow with Iceberg semantics (deletes, schema evolution) via
    pyiceberg, then keep the rows that satisfy the filter under Spark SQL semantics."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan

    schema = table.schema()
    arrow = ArrowScan(table.metadata, table.io, schema, AlwaysTrue()).to_table(plan.tasks)
    tf = plan.filter
    if tf is not None and (not tf.is_true_expr() or tf.joins):
        mask = np.asarray(tf.evaluate(arrow), dtype=bool) if not tf.is_true_expr() else np.ones(arrow.num_rows, bool)
        for j in tf.joins:  # the semi-joins: rows whose key has a matching dimension row
            keys = j.dim_keys if j.dim_keys is not None else _pyiceberg_keys(table, j)
            mask &= _in_keys(arrow.column(j.column), keys)
        arrow = arrow.filter(pa.array(mask, pa.bool_()))
    if columns:
        arrow = arrow.select(list(columns))
    return arrow
