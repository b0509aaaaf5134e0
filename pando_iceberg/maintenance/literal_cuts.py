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

Per-partition layouts (sidecar format version 2): the same rule per partition layout.
Candidates are computed once per distinct cut origin (``_origins``); the laid-out-rows test is
one semi-join per fact column over every partition's laid-out files, its hits tagged with their
file's partition, and a key is blocked only in the partitions whose rows have it. The changed
partition layouts get new partition sidecars (same block → files maps), the others are copied,
into one new version-2 sidecar; then the pointer moves as above.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ..expr import semantics
from ..spark import iceberg_jvm as jv
from ..spark.incremental import current_layout, write_successor_sidecar
from ..spark.rewrite import PandoRewriteError, SparkKeyProvider, arrow_schema_of, collect_arrow
from ..spark.session import refresh_table, session_conf

REFRESH_COLUMNS = [("cut", "string"), ("dim_table", "string"), ("mode", "string"), ("from_snapshot", "bigint"),
                   ("to_snapshot", "bigint"), ("keys_before", "bigint"), ("keys_added", "bigint"),
                   ("keys_removed", "bigint"), ("keys_kept_stale", "bigint"), ("partition", "string")]


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
    partition: str | None = None  # the partition whose layout holds the cut (None: a whole-table layout)

    def row(self) -> tuple:
        return (self.cut, self.dim_table, self.mode, self.from_snapshot, self.to_snapshot, self.keys_before,
                self.keys_added, self.keys_removed, self.keys_kept_stale, self.partition)


@dataclass
class RefreshResult:
    layout_id: str  # the layout the table points to afterwards
    previous_layout_id: str
    cuts: list[CutRefresh] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        return self.layout_id != self.previous_layout_id


@dataclass
class _Origin:
    """What changed in one cut origin's dimension: ``keys`` are the appended rows' keys that
    satisfy the predicate (incremental) or the whole recomputed key set (full)."""

    mode: str  # unchanged | incremental | full
    now: int | None  # the dimension's current snapshot
    keys: np.ndarray | None = None

    def changed_keys(self, cut) -> np.ndarray:
        """The cut's candidate keys: whose membership the dimension now says differs."""
        stored = _keys(cut.keys)
        assert self.keys is not None  # _origins reads them for every origin that is not "unchanged"
        return np.setdiff1d(self.keys, stored) if self.mode == "incremental" else np.setxor1d(self.keys, stored)


def refresh_literal_cuts(spark, table_name: str, io_properties: dict[str, str] | None = None,
                         progress: Callable[[str], None] = lambda m: None) -> RefreshResult:
    """Refresh the key sets of the table's literal cuts (module docstring). A table with
    per-partition layouts (sidecar format version 2) is refreshed per partition layout
    (``_refresh_partitions``)."""
    from ..storage.partitions import PARTITIONED_FORMAT_VERSION
    from ..storage.pointer import layout_pointer

    t0 = time.time()
    ptr = layout_pointer({str(k): str(v) for k, v in dict(jv.load_table(spark, table_name).properties()).items()})
    if ptr is not None and ptr.format_version == PARTITIONED_FORMAT_VERSION:
        result = _refresh_partitions(spark, table_name, io_properties, progress)
        result.seconds = time.time() - t0
        return result
    cur = current_layout(spark, table_name, io_properties)
    layout = cur.layout
    result = RefreshResult(cur.pointer.layout_id, cur.pointer.layout_id)
    infos, replaced = _refresh_groups(spark, cur.table, table_name, {"": (layout.cuts, _laid_out_paths(cur))}, progress)
    result.cuts = infos
    if replaced.get(""):
        _replace_cuts(layout, replaced[""])
        sidecar, path = write_successor_sidecar(
            cur, layout, cur.sidecar.block_files, base_snapshot_id=cur.sidecar.base_snapshot_id,
            base_sequence_number=cur.sidecar.base_sequence_number, extra={"pando.mode": "refresh-literal-cuts"})
        _point_or_delete(spark, table_name, cur.pointer.layout_id, sidecar, cur.io, path)
        result.layout_id = sidecar.layout_id
    result.seconds = time.time() - t0
    return result


def _refresh_partitions(spark, table_name: str, io_properties: dict[str, str] | None,
                        progress: Callable[[str], None]) -> RefreshResult:
    """Per-partition layouts: candidates once per distinct cut origin, the laid-out-rows test
    per partition (one semi-join per fact column over every partition's laid-out files, hits
    tagged with their file's partition), the cuts replaced in each partition layout that has
    a change (the others' sidecar bytes are copied), ONE new version-2 sidecar with the same
    block → files maps, and a pointer update (no table snapshot)."""
    from pyiceberg.io import load_file_io

    from ..storage.partitions import PartitionedLayoutSidecar, PartitionEntry, read_layout_sidecar
    from ..storage.pointer import layout_pointer
    from ..storage.sidecar import LayoutSidecar, new_layout_id

    table = jv.load_table(spark, table_name)
    ptr = layout_pointer({str(k): str(v) for k, v in dict(table.properties()).items()})
    if ptr is None:  # refresh_literal_cuts saw one a moment ago
        raise PandoRewriteError(f"the layout of {table_name} was removed concurrently: not refreshing")
    location = str(table.location()).rstrip("/")
    io = load_file_io(dict(io_properties or {}), location)
    current = read_layout_sidecar(io, ptr, location, str(table.uuid()))
    result = RefreshResult(ptr.layout_id, ptr.layout_id)
    snap = table.currentSnapshot()
    live = set(jv.live_data_files(table, int(snap.snapshotId()))) if snap is not None else set()
    groups = {name: (e.layout.cuts, live & e.paths) for name, e in sorted(current.partitions.items())}
    result.cuts, replaced = _refresh_groups(spark, table, table_name, groups, progress)
    if not replaced:
        return result
    entries = dict(current.partitions)
    for name, swap in replaced.items():
        e = entries[name]
        layout = e.layout
        _replace_cuts(layout, swap)
        props = {**e.sidecar.properties, "pando.mode": "refresh-literal-cuts", "pando.previous-layout-id": e.layout_id}
        sc = LayoutSidecar.from_layout(layout, layout_id=new_layout_id(), table_uuid=str(table.uuid()),
                                       block_files=e.sidecar.block_files, base_snapshot_id=e.sidecar.base_snapshot_id,
                                       base_sequence_number=e.sidecar.base_sequence_number, properties=props)
        entries[name] = PartitionEntry.of(name, e.spec_id, sc, layout)
    sidecar = PartitionedLayoutSidecar(new_layout_id(), str(table.uuid()), entries, current.base_snapshot_id,
                                       {**current.properties, "pando.mode": "refresh-literal-cuts",
                                        "pando.previous-layout-id": ptr.layout_id})
    path, _ = sidecar.write(io, location)
    _point_or_delete(spark, table_name, ptr.layout_id, sidecar, io, path)
    result.layout_id = sidecar.layout_id
    progress(f"{len(replaced)} of {len(current.partitions)} partition layout(s) refreshed")
    return result


def _refresh_groups(spark, table, table_name: str, groups: dict[str, tuple[list, set[str]]],
                    progress: Callable[[str], None]) -> tuple[list[CutRefresh], dict[str, dict[str, Any]]]:
    """The refresh of several layouts of one table (``groups``: name → (the layout's cuts, its
    live laid-out files); one group "" for a whole-table layout, one per partition otherwise).
    Returns a CutRefresh per literal cut and, per group with a change, cut key → new cut."""
    from ..expr import LiteralCut

    literal = {g: [c for c in cuts if isinstance(c, LiteralCut)] for g, (cuts, _) in groups.items()}
    origins = _origins(spark, [c for cs in literal.values() for c in cs], progress)
    infos: list[CutRefresh] = []
    todo = []  # (group, cut, info, origin state, candidate keys)
    for g, cuts in literal.items():
        for cut in cuts:
            o, state = cut.origin, origins[_origin_key(cut.origin)]
            text = f"{cut.column} IN (SELECT {o.dim_pk} FROM {o.dim_table} WHERE {o.predicate})"
            info = CutRefresh(text, o.dim_table, state.mode, o.snapshot_id, state.now, len(cut.keys),
                              partition=g or None)
            infos.append(info)
            if state.mode != "unchanged":
                todo.append((g, cut, info, state, state.changed_keys(cut)))
    # Which candidate keys laid-out fact rows have, per group: one semi-join per fact column.
    blocked_in: dict[str, dict[str, np.ndarray]] = {}
    paths = {g: laid_out for g, (_, laid_out) in groups.items() if literal[g]}
    for column in sorted({cut.column for _, cut, *_ in todo}):
        candidates = [flips for _, cut, *_, flips in todo if cut.column == column and len(flips)]
        union = np.unique(np.concatenate(candidates)) if candidates else np.zeros(0, np.int64)
        progress(f"checking {len(union)} candidate key(s) against the laid-out rows' {column}")
        blocked_in[column] = _keys_in_laid_out_rows(spark, table, table_name, paths, column, union)
    replaced: dict[str, dict[str, Any]] = {}
    for g, cut, info, state, changed in todo:
        o, stored = cut.origin, _keys(cut.keys)
        blocked = changed[np.isin(changed, blocked_in[cut.column][g])]
        allowed = np.setdiff1d(changed, blocked)
        info.keys_added = int(np.isin(allowed, stored, invert=True).sum())
        info.keys_removed = len(allowed) - info.keys_added
        info.keys_kept_stale = len(blocked)
        new_keys = np.setxor1d(stored, allowed)
        # Exactly the predicate's keys at the new snapshot only when no key was kept stale, the
        # predicate reads no other table, and the dimension did not move while it was read.
        exact = ((o.dim_table, state.now),) if (not len(blocked) and state.now is not None
                                                and o.tables() == [o.dim_table]
                                                and _current_snapshot(spark, o.dim_table) == state.now) else None
        replaced.setdefault(g, {})[cut.key] = LiteralCut(cut.column, new_keys,
                                                         dataclasses.replace(o, snapshot_id=state.now, exact_at=exact))
    return infos, replaced


def _current_snapshot(spark, table_name: str) -> int | None:
    snap = jv.load_table(spark, table_name).currentSnapshot()
    return int(snap.snapshotId()) if snap is not None else None


def _origin_key(origin) -> tuple:
    return (origin.dim_table, origin.dim_pk, origin.predicate, origin.snapshot_id)


def _origins(spark, cuts: list, progress: Callable[[str], None]) -> dict[tuple, _Origin]:
    """What changed since each distinct cut origin (dimension, pk, predicate, snapshot): whole
    key sets with one Spark job per dimension table for the origins that need one, appended
    rows (Iceberg's incremental append scan) for the others."""
    provider = SparkKeyProvider(spark, {}, semantics.DEFAULT)
    schemas: dict[str, dict] = {}  # namespace → table schemas, read once
    states: dict[tuple, _Origin] = {}
    todo = []  # (origin, its state, dim filter)
    for cut in cuts:
        o, key = cut.origin, _origin_key(cut.origin)
        if key in states:
            continue
        dim = jv.load_table(spark, o.dim_table)
        snap = dim.currentSnapshot()
        now = int(snap.snapshotId()) if snap is not None else None
        states[key] = _Origin("unchanged", now)
        if now is not None and o.snapshot_id == now:
            continue
        dim_filter = _dim_filter(spark, o, schemas)
        states[key].mode = "incremental" if _appends_only(dim, o.snapshot_id, now) and not dim_filter.joins else "full"
        todo.append((o, states[key], dim_filter))
    provider.prefetch([(o.dim_table, o.dim_pk, f) for o, s, f in todo if s.mode == "full"])
    for o, state, dim_filter in todo:
        if state.mode == "incremental":
            progress(f"reading rows appended to {o.dim_table} since snapshot {o.snapshot_id}")
            rows = (spark.read.format("iceberg").option("start-snapshot-id", str(o.snapshot_id))
                    .option("end-snapshot-id", str(state.now)).load(o.dim_table))
            if not dim_filter.is_true_expr():
                rows = rows.where(dim_filter.expr.sql(dialect="spark"))
            with session_conf(spark, semantics.DEFAULT.spark_conf()):  # as the layout's key sets were read
                state.keys = _keys(collect_arrow(rows.select(o.dim_pk).distinct()).column(0))
        else:
            state.keys = _keys(provider(o.dim_table, o.dim_pk, dim_filter))
    return states


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
    sid: int | None = now
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


def _keys_in_laid_out_rows(spark, table, table_name: str, groups: dict[str, set[str]], column: str,
                           keys: np.ndarray) -> dict[str, np.ndarray]:
    """Per group (name → laid-out files), which of ``keys`` occur as ``column`` in live rows of
    its files: ONE semi-join over all the groups' files, hits tagged by their file."""
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    out = {g: keys[:0] for g in groups}
    files = sorted({p for ps in groups.values() for p in ps})
    if len(keys) == 0 or not files:
        return out
    candidates = spark.createDataFrame(pa.table({"k": pa.array(keys.tolist())}).to_pandas())
    with jv.staged_scan(spark, table, table_name, int(table.currentSnapshot().snapshotId()), set(files)) as df:
        hits = (df.select(F.col("_file").alias("file"), F.col(column).alias("fk"))
                .join(F.broadcast(candidates), F.col("fk") == F.col("k"), "left_semi").distinct())
        found = collect_arrow(hits)
    if not found.num_rows:
        return out
    for g, ps in groups.items():
        mine = found.filter(pc.is_in(found.column("file"), value_set=pa.array(sorted(ps), pa.string())))
        if mine.num_rows:
            out[g] = _keys(mine.column("fk"))
    return out


def _replace_cuts(layout, replaced: dict[str, Any]) -> None:
    """Swap cuts (by key) in the layout's cut table and in its trees, truncated or not."""
    for tree in list(layout.trees) + list(layout.truncated):
        tree.node_cut = [None if c is None else replaced.get(c.key, c) for c in tree.node_cut]
    layout.cuts = [replaced.get(c.key, c) for c in layout.cuts]
    layout.cut_index = {c.key: i for i, c in enumerate(layout.cuts)}


def _point_or_delete(spark, table_name: str, expected_layout_id: str, sidecar, io, path: str) -> None:
    """Move the table's layout pointer to ``sidecar`` (same layout snapshot and format version),
    refusing when another writer moved it since we read it; the new sidecar is deleted when the
    pointer does not move."""
    from ..storage.pointer import P_LAYOUT_ID, P_SIDECAR

    try:
        table = jv.load_table(spark, table_name)
        now = str(table.properties().get(P_LAYOUT_ID))
        if now != expected_layout_id:
            raise PandoRewriteError(f"the layout of {table_name} changed concurrently (now {now}, was "
                                    f"{expected_layout_id}): not refreshing; run refresh_literal_cuts again")
        table.updateProperties().set(P_LAYOUT_ID, sidecar.layout_id).set(P_SIDECAR, sidecar.file_name).commit()
    except BaseException:
        try:
            io.delete(path)
        except Exception:
            pass
        raise
    refresh_table(spark, table_name)
