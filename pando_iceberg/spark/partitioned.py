"""Pando layouts of a partitioned Iceberg table: one layout PER PARTITION (paper §7, the two-level
scheme: the Iceberg partition, e.g. a day, first; Pando's trees inside it).

    rewrite_data_files(table => 't', strategy => 'pando', where => "o_orderdate >= date '1995-01-01'")

    `where` (on partition source columns only) ─▶ the partitions holding a matching row
        (whole partitions are laid out; the others keep their files and their layouts)
    workload ─▶ queries + candidate cuts, ONCE for the table (rewrite.workload_cuts)
    their rows ─Spark, with `_file`─▶ a sample per partition (sampleBy, ≥ min-sample-rows each
        or the whole partition) ─▶ one layout per partition (build_layout, b scaled per partition)
    ─▶ mapInArrow(route: each row with ITS partition's layout, block ids offset per partition)
    ─▶ one Parquet file per block (a block never spans partitions) ─▶ driver: finalize each
        layout from its written (block, k-tuple) pairs, ONE format-version-2 sidecar holding one
        layout per partition (storage/partitions.py: the kept ones copied as they were), ONE
        ``replace`` commit validated from the starting snapshot, the same as the whole-table
        rewrite (a failure deletes what was written and leaves the table as it was).

The new data files carry their partition's tuple taken from a file already in it (no parsing of
partition values). Files of another partition spec than the current one are never laid out.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp

from . import iceberg_jvm as jv
from .blocks import BLOCK_COL, KTUPLE_COL, WRITTEN_FILE_DDL, LayoutPayload, WriteSpec, _append, ktuple_radices, \
    pack_ktuples, unpack_ktuples, write_blocks
from .rewrite import (DEFAULT_TARGET_FILE_SIZE, PandoRewriteError, RewriteOptions, RewriteResult, _arrow_batch_rows,
                      _batch_rows, _commit_state_unknown, _committed_snapshot, _delete_quietly, _read,
                      _wait_for_running_tasks, collect_arrow, workload_cuts)
from .session import refresh_table

FILE_COL = "_file"


@dataclass
class PartitionedRewriteResult(RewriteResult):
    partitions_laid_out: list[str] = field(default_factory=list)
    partitions_kept: int = 0  # layouts of partitions outside `where`, carried over unchanged
    notes: list[str] = field(default_factory=list)


def partition_source_columns(table) -> list[str]:
    """Names of the source columns of the current partition spec's fields (Java table)."""
    schema = table.schema()
    return [str(schema.findColumnName(f.sourceId())) for f in jv._iter(table.spec().fields())]


def check_where(where: str | None, accepted: Sequence[str]) -> None:
    """``where`` must be one SQL predicate naming partition source columns only."""
    if where is None:
        return
    hint = f"accepted: a predicate on the partition source column(s) {', '.join(accepted)}"
    try:
        tree = sqlglot.parse_one(where, read="spark")
    except sqlglot.errors.ParseError as e:
        raise PandoRewriteError(f"argument 'where' = {where!r} is not a valid SQL predicate ({str(e).splitlines()[0]}); "
                                f"{hint}") from None
    if tree is None or isinstance(tree, (exp.Select, exp.Query)) or tree.find(exp.Select) is not None:
        raise PandoRewriteError(f"argument 'where' = {where!r} must be a predicate without subqueries; {hint}")
    lowered = {c.lower() for c in accepted}
    bad = sorted({c.name for c in tree.find_all(exp.Column) if c.name.lower() not in lowered})
    if bad:
        raise PandoRewriteError(f"argument 'where' = {where!r} names column(s) {', '.join(bad)} that are not partition "
                                f"source columns (per-partition layouts are selected by partition); {hint}")


def route_partitions(payloads: list[LayoutPayload], paths: list[str], path_part: list[int], offsets: list[int]):
    """mapInArrow function: each row routed with the layout of its file's partition; block ids
    are global (partition p's block b is ``offsets[p] + b``); the ``_file`` column is dropped."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        layouts = [p.load() for p in payloads]
        radices = [ktuple_radices(lay) for lay in layouts]
        value_set = pa.array(paths, pa.string())
        part_of_path = np.asarray(path_part, dtype=np.int64)
        for batch in batches:
            if batch.num_rows == 0:
                continue
            idx = pc.index_in(batch.column(FILE_COL), value_set=value_set).to_numpy(zero_copy_only=False)
            part = part_of_path[idx.astype(np.int64)]
            data = batch.drop_columns([FILE_COL])
            blocks = np.empty(batch.num_rows, dtype=np.int32)
            codes = np.empty(batch.num_rows, dtype=np.int64)
            for p in np.unique(part):
                rows = np.flatnonzero(part == p)
                sub = data if len(rows) == batch.num_rows else data.take(pa.array(rows))
                layout = layouts[p]
                kt = layout.route_ktuples(sub)
                _, local, inv = layout._blocks_of(kt)
                blocks[rows] = offsets[p] + local[inv]
                codes[rows] = pack_ktuples(kt, radices[p])
            yield _append(data, blocks, codes)

    return run


def build_partitioned_files(spark, table, written, partition_of: list[Any]) -> list:
    """Java DataFiles for files we wrote (metrics from the footers, as Iceberg's add_files does),
    each with the partition tuple ``partition_of[i]`` (a StructLike of a file in that partition)."""
    jvm = spark._jvm
    metrics_config = jvm.org.apache.iceberg.MetricsConfig.forTable(table)
    spec, parquet = table.spec(), jvm.org.apache.iceberg.FileFormat.PARQUET
    out = []
    for w, partition in zip(written, partition_of):
        metrics = jvm.org.apache.iceberg.parquet.ParquetUtil.fileMetrics(table.io().newInputFile(w.path), metrics_config)
        out.append(jvm.org.apache.iceberg.DataFiles.builder(spec).withPath(w.path).withFormat(parquet)
                   .withFileSizeInBytes(int(w.file_size_in_bytes)).withMetrics(metrics).withPartition(partition).build())
    return out


def rewrite_partitions(spark, table_name: str, workload: Sequence[str] | str, options: RewriteOptions | None = None,
                       where: str | None = None, io_properties: dict[str, str] | None = None,
                       progress: Callable[[str], None] = lambda m: None) -> PartitionedRewriteResult:
    """Learn and apply a layout per selected partition (module docstring); one ``replace`` commit."""
    from pyiceberg.io import load_file_io
    from pyspark.sql import functions as F

    from ..layout import build_layout
    from ..storage.partitions import PARTITIONED_FORMAT_VERSION, PartitionedLayoutSidecar, PartitionEntry
    from ..storage.pointer import P_SNAPSHOT, LayoutPointer, layout_pointer
    from ..storage.sidecar import DataFileRef, LayoutSidecar, new_layout_id

    options = options or RewriteOptions()
    options.validate()
    seconds: dict[str, float] = {}
    t0 = time.time()
    table = jv.load_table(spark, table_name)
    spec = table.spec()
    if not spec.isPartitioned():
        raise PandoRewriteError(f"table {table_name} is not partitioned: argument 'where' selects partitions of a "
                                "partitioned table; omit it to lay out the whole table")
    check_where(where, partition_source_columns(table))
    current = table.currentSnapshot()
    if current is None:
        raise PandoRewriteError(f"table {table_name} has no snapshot (no data): nothing to lay out")
    base_id = int(current.snapshotId())
    live = jv.live_data_files(table, base_id)
    spec_id = int(spec.specId())
    part_of = {p: str(spec.partitionToPath(f.partition())) for p, f in live.items() if int(f.specId()) == spec_id}
    notes: list[str] = []
    if len(part_of) < len(live):
        notes.append(f"{len(live) - len(part_of)} file(s) written under an older partition spec are not laid out "
                     "(rewrite them with Iceberg's rewrite_data_files first)")

    df = _read(spark, table_name, base_id).select("*", F.col(FILE_COL))
    if where is not None:
        try:
            matched = {r[0] for r in df.where(where).select(FILE_COL).distinct().collect()}
        except Exception as e:  # Spark's analysis error (a type mismatch, an unknown function)
            raise PandoRewriteError(f"argument 'where' = {where!r} cannot be evaluated on {table_name}: "
                                    f"{str(e).splitlines()[0][:300]}") from None
        chosen = {part_of[p] for p in matched if p in part_of}
    else:
        chosen = set(part_of.values())
    if not chosen:
        raise PandoRewriteError(f"no partition of {table_name} with live rows matches where {where!r}: nothing to lay out")

    wl, target, queries, cuts = workload_cuts(spark, table_name, workload)
    files = sorted(p for p in part_of if part_of[p] in chosen)
    counts = {r[0]: int(r[1]) for r in df.where(F.col(FILE_COL).isin(files)).groupBy(FILE_COL).count().collect()}
    names = sorted(chosen)
    rows_of = {n: 0 for n in names}
    for p, n in counts.items():
        rows_of[part_of[p]] += n
    fractions = {p: min(1.0, max(options.sample_rate, options.min_sample_rows / max(1, rows_of[part_of[p]])))
                 for p in files}
    progress(f"sampling {len(names)} partition(s) of {table_name} ({sum(rows_of.values()):,} rows)")
    sample = collect_arrow(df.where(F.col(FILE_COL).isin(files)).stat.sampleBy(FILE_COL, fractions, options.seed))
    t1 = time.time()
    seconds["sampling"] = t1 - t0

    # One layout per partition with rows in the sample (an empty partition keeps its files as they are).
    sample_part = np.asarray([names.index(part_of[p]) for p in files], dtype=np.int64)[
        pc.index_in(sample.column(FILE_COL), value_set=pa.array(files, pa.string())).to_numpy(zero_copy_only=False)
        .astype(np.int64)] if sample.num_rows else np.zeros(0, np.int64)
    sample = sample.drop_columns([FILE_COL])
    layouts: dict[str, Any] = {}
    for i, name in enumerate(names):
        rows = np.flatnonzero(sample_part == i)
        if rows_of[name] == 0 or len(rows) == 0:
            notes.append(f"partition {name}: no live rows sampled; left as it was")
            continue
        part_sample = sample.take(pa.array(rows))
        b_sample = max(1.0, options.min_block_rows * len(rows) / rows_of[name])
        progress(f"partition {name}: k={options.k} trees on {len(rows):,} sample rows")
        layouts[name] = build_layout(part_sample, cuts, queries, options.k, b_sample, max_ktuples=options.max_ktuples)
    seconds["optimizing"] = time.time() - t1
    laid = sorted(layouts)
    files = [p for p in files if part_of[p] in layouts]
    old_files = [live[p] for p in files]
    offsets = np.cumsum([0] + [layouts[n].num_blocks for n in laid]).tolist()

    location = str(table.location()).rstrip("/")
    io = load_file_io(dict(io_properties or {}), location)
    layout_id = new_layout_id()
    data_dir = f"{location}/data/pando-{layout_id}"
    wspec = WriteSpec(data_dir=data_dir,
                      iceberg_schema_json=str(spark._jvm.org.apache.iceberg.SchemaParser.toJson(table.schema())),
                      io_properties=dict(io_properties or {}),
                      target_file_size_bytes=options.target_file_size_bytes or int(table.properties().getOrDefault(
                          "write.target-file-size-bytes", str(DEFAULT_TARGET_FILE_SIZE))),
                      compression=str(table.properties().getOrDefault("write.parquet.compression-codec", "zstd")).lower())
    payloads = [LayoutPayload(layouts[n].to_bytes(), {c.key: c.keys_to_bytes() for c in layouts[n].cuts
                                                      if hasattr(c, "keys_to_bytes")}) for n in laid]
    written: list[Any] = []
    sidecar_path = None
    committing = False
    try:
        from pyspark.sql.types import IntegerType, LongType, StructField, StructType

        t1 = time.time()
        source = df.where(F.col(FILE_COL).isin(files))
        data_fields = [f for f in source.schema.fields if f.name != FILE_COL]
        routed = source.mapInArrow(route_partitions(payloads, files, [laid.index(part_of[p]) for p in files], offsets),
                                   StructType(data_fields + [StructField(BLOCK_COL, IntegerType(), False),
                                                             StructField(KTUPLE_COL, LongType(), False)]))
        tasks = max(1, min(offsets[-1], 4 * max(1, int(spark.sparkContext.defaultParallelism))))
        progress(f"routing + writing {offsets[-1]} blocks of {len(laid)} partition(s)")
        with _arrow_batch_rows(spark, _batch_rows(source)):
            written = routed.repartition(tasks, BLOCK_COL).sortWithinPartitions(BLOCK_COL) \
                .mapInArrow(write_blocks(wspec), WRITTEN_FILE_DDL).collect()
        seconds["writing"] = time.time() - t1

        t1 = time.time()
        expected = sum(rows_of[n] for n in laid)
        if int(sum(w.record_count for w in written)) != expected:
            raise PandoRewriteError(f"wrote {int(sum(w.record_count for w in written))} rows but the selected "
                                    f"partitions have {expected} live rows at the base snapshot: not committing")
        part_idx = np.searchsorted(np.asarray(offsets), [int(w.block) for w in written], side="right") - 1
        entries: dict[str, PartitionEntry] = {}
        ptr = layout_pointer({str(k): str(v) for k, v in dict(table.properties()).items()})
        if ptr is not None and ptr.format_version == PARTITIONED_FORMAT_VERSION:
            from ..storage.partitions import read_layout_sidecar

            previous = read_layout_sidecar(io, ptr, location, str(table.uuid()))
            entries = {n: e for n, e in previous.partitions.items() if n not in layouts}
        kept = len(entries)
        weights = sum(w for _, w in queries) or 1.0
        for i, name in enumerate(laid):
            mine = [w for w, p in zip(written, part_idx) if p == i]
            layout, radices = layouts[name], ktuple_radices(layouts[name])
            pairs, block_rows, block_files = [], np.zeros(layout.num_blocks, np.int64), {}
            for w in mine:
                local = int(w.block) - offsets[i]
                codes = np.array([int(c) for c in w.ktuples.split(",") if c], dtype=np.int64)
                pairs += [(local, tuple(kt)) for kt in unpack_ktuples(codes, radices).tolist()]
                block_rows[local] += int(w.record_count)
                block_files.setdefault(local, []).append(DataFileRef(w.path, int(w.record_count), int(w.file_size_in_bytes)))
            layout.finalize(pairs)
            layout.block_rows = block_rows
            fraction = float(layout.cost(queries)) / (max(1.0, float(block_rows.sum())) * weights)
            sc = LayoutSidecar.from_layout(layout, layout_id=new_layout_id(), table_uuid=str(table.uuid()),
                                           block_files=block_files, base_snapshot_id=base_id,
                                           base_sequence_number=int(current.sequenceNumber()),
                                           properties={"pando.expected-rows-fraction": f"{fraction:.6f}",
                                                       "pando.rows": str(int(block_rows.sum()))})
            entries[name] = PartitionEntry.of(name, spec_id, sc, layout)
        workload_sql = [(q.sql, q.weight) for q in wl.queries if target in q.filters]
        sidecar = PartitionedLayoutSidecar(layout_id, str(table.uuid()), entries, base_id,
                                           {"pando.k": str(options.k), "pando.workload-queries": str(len(queries)),
                                            "pando.workload": json.dumps(workload_sql)})
        sidecar_path, _ = sidecar.write(io, location)
        seconds["metadata"] = time.time() - t1

        t1 = time.time()
        representative = {part_of[p]: live[p].partition() for p in files}
        new_files = build_partitioned_files(spark, table, written, [representative[laid[i]] for i in part_idx])
        pointer = LayoutPointer(layout_id, sidecar.file_name, snapshot_id=0, base_snapshot_id=base_id,
                                format_version=PARTITIONED_FORMAT_VERSION)
        props = {**pointer.to_properties(), P_SNAPSHOT: "{snapshot-id}"}
        committing = True
        progress("commit: one replace snapshot")
        snapshot_id = jv.commit_replace(spark, table, base_id, old_files, new_files, props,
                                        summary={"pando.layout-id": layout_id, "pando.partitions": str(len(laid))})
        seconds["commit"] = time.time() - t1
    except BaseException as failure:
        committed = _committed_snapshot(spark, table_name, layout_id) if committing else None
        if committed is not None:
            snapshot_id = committed  # the commit reached the catalog although the call failed
        elif committing and _commit_state_unknown(failure):
            raise
        else:
            if not written:
                _wait_for_running_tasks(spark)
            _delete_quietly(io_properties, [w.path for w in written] + ([sidecar_path] if sidecar_path else []),
                            location, directory=data_dir)
            raise
    refresh_table(spark, table_name)
    notes.append(f"{len(laid)} partition(s) laid out, {kept} partition layout(s) kept as they were")
    return PartitionedRewriteResult(len(old_files), len(written), sum(int(f.fileSizeInBytes()) for f in old_files), 0,
                                    layout_id, offsets[-1], snapshot_id, base_id, seconds, laid, kept, notes)
