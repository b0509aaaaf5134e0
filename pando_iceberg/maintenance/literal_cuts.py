"""``refresh_literal_cuts``: bring a layout's literal (join-induced) cuts up to date after their
dimension tables changed (paper §7).

What a stored key set means. A literal cut ``fk IN keys`` routed every laid-out fact row by its
``fk`` membership in ``keys``; the planner compares a query's dimension key set (read from the
CURRENT dimension) with these stored ``keys`` — not with the predicate — so pruning is exact
whatever happened to the dimension, refreshed or not (planner/scan.py, expr/filters.py). A
refresh only matters for rows laid out LATER (incremental layout routes with the stored set):
with a stale set, new rows whose key now satisfies the predicate land on the NOT-TRUE side and
queries have to read both sides.

When changing a key's membership is sound. Flipping key k (adding it to or removing it from
the set) changes the side of every fact row with ``fk = k``. It is sound iff no LAID-OUT fact
row (a live file in the layout's block → files map) has ``fk = k``: those rows sit in blocks
chosen by the old membership and are never moved. Rows outside the layout are always read,
so they do not matter. Under referential integrity a freshly inserted dimension key has no
fact rows yet, so inserts are refreshed in full (§7); keys of deleted or updated dimension
rows usually do have laid-out fact rows and keep their old membership ("kept stale": still
exact, just less selective for those keys until a full re-layout). The test is a Spark
semi-join of the laid-out files' ``fk`` column with the candidate keys.

Which keys are candidates. When every dimension snapshot since the cut's origin snapshot is an
``append`` (or a ``replace``, which moves rows without changing them) and the predicate names
no other table, only the appended rows are read (Iceberg's incremental append scan) and the
candidates are their keys that satisfy the predicate. Otherwise (deletes, updates/overwrites,
an unknown origin snapshot, multi-hop predicates) the key set is recomputed from the whole
dimension and the candidates are the symmetric difference with the stored set. Either way the
cut's origin snapshot becomes the dimension's current one, so the next refresh starts there.

The result is a new sidecar (new layout id, same block → files map) and a pointer update; no
new table snapshot. Any interleaving with an incremental layout is sound: each sidecar is
consistent in itself, and files a sidecar does not list are always read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from ..spark import iceberg_jvm as jv
from ..spark.session import refresh_table
from ..spark.incremental import current_layout, write_successor_sidecar
from ..spark.rewrite import PandoRewriteError, SparkKeyProvider, arrow_schema_of, collect_arrow

REFRESH_COLUMNS = [("cut", "string"), ("dim_table", "string"), ("mode", "string"), ("from_snapshot", "bigint"),
                   ("to_snapshot", "bigint"), ("keys_before", "bigint"), ("keys_added", "bigint"),
                   ("keys_removed", "bigint"), ("keys_kept_stale", "bigint")]


@dataclass
class CutRefresh:
    cut: str  # "fk IN (SELECT pk FROM dim WHERE p)"
    dim_table: str
    mode: str  # unchanged | incremental | full
    from_snapshot: int | None
    to_snapshot: int | None
    keys_before: int
    keys_added: int = 0
    keys_removed: int = 0
    keys_kept_stale: int = 0

    def row(self) -> tuple:
        return (self.cut, self.dim_table, self.mode, self.from_snapshot, self.to_snapshot, self.keys_before,
                self.keys_added, self.keys_removed, self.keys_kept_stale)


@dataclass
class RefreshResult:
    layout_id: str  # the layout the table points to afterwards
    previous_layout_id: str
    cuts: list[CutRefresh] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        return self.layout_id != self.previous_layout_id


def refresh_literal_cuts(spark, table_name: str, io_properties: dict[str, str] | None = None,
                         progress: Callable[[str], None] = lambda m: None) -> RefreshResult:
    """Refresh the key sets of the table's literal cuts (module docstring)."""
    from ..expr import CutOrigin, LiteralCut

    t0 = time.time()
    cur = current_layout(spark, table_name, io_properties)
    layout = cur.layout
    result = RefreshResult(cur.pointer.layout_id, cur.pointer.layout_id)
    literal = [c for c in layout.cuts if isinstance(c, LiteralCut)]
    if not literal:
        result.seconds = time.time() - t0
        return result
    laid_out = _laid_out_paths(cur)
    provider = SparkKeyProvider(spark, {})
    schemas: dict[str, dict] = {}  # namespace → table schemas, read once
    todo = []  # (cut, info, dim filter, dimension snapshot now)
    for cut in literal:
        o = cut.origin
        dim = jv.load_table(spark, o.dim_table)
        snap = dim.currentSnapshot()
        now = int(snap.snapshotId()) if snap is not None else None
        text = f"{cut.column} IN (SELECT {o.dim_pk} FROM {o.dim_table} WHERE {o.predicate})"
        info = CutRefresh(text, o.dim_table, "unchanged", o.snapshot_id, now, len(cut.keys))
        result.cuts.append(info)
        if now is not None and o.snapshot_id == now:
            continue
        dim_filter = _dim_filter(spark, o, schemas)
        info.mode = "incremental" if _appends_only(dim, o.snapshot_id, now) and not dim_filter.joins else "full"
        todo.append((cut, info, dim_filter, now))
    # Whole key sets: one Spark job per dimension table for all the cuts that need one.
    provider.prefetch([(c.origin.dim_table, c.origin.dim_pk, f) for c, i, f, _ in todo if i.mode == "full"])
    flips: dict[str, np.ndarray] = {}
    for cut, info, dim_filter, now in todo:
        o, stored = cut.origin, _keys(cut.keys)
        if info.mode == "incremental":
            progress(f"{info.cut}: reading rows appended to {o.dim_table} since snapshot {o.snapshot_id}")
            rows = (spark.read.format("iceberg").option("start-snapshot-id", str(o.snapshot_id))
                    .option("end-snapshot-id", str(now)).load(o.dim_table))
            if not dim_filter.is_true_expr():
                rows = rows.where(dim_filter.expr.sql(dialect="spark"))
            wanted = _keys(collect_arrow(rows.select(o.dim_pk).distinct()).column(0))
            flips[cut.key] = np.setdiff1d(wanted, stored)
        else:
            flips[cut.key] = np.setxor1d(_keys(provider(o.dim_table, o.dim_pk, dim_filter)), stored)
    # Which candidate keys laid-out fact rows have: one semi-join per fact column.
    blocked_in: dict[str, np.ndarray] = {}
    for column in {cut.column for cut, *_ in todo}:
        candidates = [flips[cut.key] for cut, *_ in todo if cut.column == column and len(flips[cut.key])]
        union = np.unique(np.concatenate(candidates)) if candidates else np.zeros(0, np.int64)
        progress(f"checking {len(union)} candidate key(s) against the laid-out rows' {column}")
        blocked_in[column] = _keys_in_laid_out_rows(spark, cur, table_name, laid_out, column, union)
    replaced: dict[str, Any] = {}
    for cut, info, _, now in todo:
        o, stored, changed = cut.origin, _keys(cut.keys), flips[cut.key]
        blocked = changed[np.isin(changed, blocked_in[cut.column])]
        allowed = np.setdiff1d(changed, blocked)
        info.keys_added = int(np.isin(allowed, stored, invert=True).sum())
        info.keys_removed = len(allowed) - info.keys_added
        info.keys_kept_stale = len(blocked)
        new_keys = np.setxor1d(stored, allowed)
        replaced[cut.key] = LiteralCut(cut.column, new_keys, CutOrigin(o.dim_table, o.dim_pk, o.predicate, now))
    if not replaced:
        result.seconds = time.time() - t0
        return result
    _replace_cuts(layout, replaced)
    sidecar, path = write_successor_sidecar(
        cur, layout, cur.sidecar.block_files, base_snapshot_id=cur.sidecar.base_snapshot_id,
        base_sequence_number=cur.sidecar.base_sequence_number, extra={"pando.mode": "refresh-literal-cuts"})
    try:
        _point_to(spark, table_name, cur, sidecar)
    except BaseException:
        try:
            cur.io.delete(path)
        except Exception:
            pass
        raise
    refresh_table(spark, table_name)
    result.layout_id = sidecar.layout_id
    result.seconds = time.time() - t0
    return result


def _keys(keys: Any) -> np.ndarray:
    """Sorted unique key values (integers as int64, else objects) of a key set or Arrow column."""
    from ..expr import keys as keyset

    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        keys = keys.drop_null().to_numpy(zero_copy_only=False)
    arr = np.asarray(keyset.keys_array(keyset.normalize_keys(keys)))
    return np.unique(arr.astype(np.int64) if arr.dtype.kind in "iu" else arr)


def _dim_filter(spark, origin, cache: dict[str, dict]):
    """The origin predicate as a TableFilter over the dimension (with the schemas of the
    tables its nested ``IN (SELECT ...)`` parts name; ``cache`` keeps them per namespace)."""
    from ..expr import TableFilter
    from ..spark.rewrite import namespace_schemas

    ns = origin.dim_table.rsplit(".", 1)[0] if "." in origin.dim_table else ""
    if ns not in cache:
        cache[ns] = namespace_schemas(spark, origin.dim_table)
    schemas = cache[ns]
    schema = schemas.get(origin.dim_table) or arrow_schema_of(spark.table(origin.dim_table))
    return TableFilter.from_sql(origin.predicate, schema, origin.dim_table, schemas=schemas)


def _appends_only(dim, since: int | None, now: int | None) -> bool:
    """Is every snapshot after ``since`` up to ``now`` (on the current branch) an append or a
    replace? False when ``since`` is unknown or no longer an ancestor."""
    if since is None or now is None:
        return False
    sid = now
    while sid is not None and sid != since:
        s = dim.snapshot(sid)
        if s is None or str(s.operation()) not in ("append", "replace"):
            return False
        parent = s.parentId()
        sid = int(parent) if parent is not None else None
    return sid == since


def _laid_out_paths(cur) -> set[str]:
    snap = cur.table.currentSnapshot()
    live = jv.live_data_files(cur.table, int(snap.snapshotId())) if snap is not None else {}
    return set(live) & cur.layout_paths


def _keys_in_laid_out_rows(spark, cur, table_name: str, paths: set[str], column: str, keys: np.ndarray) -> np.ndarray:
    """Which of ``keys`` occur as ``column`` in live rows of the laid-out files (a semi-join)."""
    from pyspark.sql import functions as F

    if len(keys) == 0 or not paths:
        return keys[:0]
    table = cur.table
    candidates = spark.createDataFrame(pa.table({"k": pa.array(keys.tolist())}).to_pandas())
    with jv.staged_scan(spark, table, table_name, int(table.currentSnapshot().snapshotId()), paths) as df:
        hits = (df.select(F.col(column).alias("fk")).join(F.broadcast(candidates), F.col("fk") == F.col("k"), "left_semi")
                .distinct())
        found = collect_arrow(hits).column(0)
    return _keys(found) if len(found) else keys[:0]


def _replace_cuts(layout, replaced: dict[str, Any]) -> None:
    """Swap cuts (by key) in the layout's cut table and in its trees, truncated or not."""
    for tree in list(layout.trees) + list(layout.truncated):
        tree.node_cut = [None if c is None else replaced.get(c.key, c) for c in tree.node_cut]
    layout.cuts = [replaced.get(c.key, c) for c in layout.cuts]
    layout.cut_index = {c.key: i for i, c in enumerate(layout.cuts)}


def _point_to(spark, table_name: str, cur, sidecar) -> None:
    """Move the table's layout pointer to ``sidecar`` (same layout snapshot), refusing when
    another writer moved it since we read it."""
    from ..storage.pointer import P_LAYOUT_ID, P_SIDECAR

    table = jv.load_table(spark, table_name)
    now = str(table.properties().get(P_LAYOUT_ID))
    if now != cur.pointer.layout_id:
        raise PandoRewriteError(f"the layout of {table_name} changed concurrently (now {now}, was "
                                f"{cur.pointer.layout_id}): not refreshing; run refresh_literal_cuts again")
    table.updateProperties().set(P_LAYOUT_ID, sidecar.layout_id).set(P_SIDECAR, sidecar.file_name).commit()
