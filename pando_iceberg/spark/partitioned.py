"""Pando layouts of a partitioned Iceberg table: one layout PER PARTITION (paper §7, the two-level
scheme: the Iceberg partition, e.g. a day, first; Pando's trees inside it).

    rewrite_data_files(table => 't', strategy => 'pando', where => "o_orderdate >= date '1995-01-01'")

    `where` (on partition source columns only) ─▶ the partitions holding a matching row
        (whole partitions are laid out; the others keep their files and their layouts)
    workload ─▶ queries + their templates' draws + candidate cuts, ONCE for the table
                (rewrite_common.table_workload, rewrite_common.learning_workload)
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

import dataclasses
import json
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp

from ..layout.evaluations import Evaluations
from ..layout.ktuple import ktuple_radices, pack_ktuples
from ..storage.partitions import (
    PARTITIONED_FORMAT_VERSION,
    PartitionedLayoutSidecar,
    PartitionEntry,
    read_layout_sidecar,
)
from ..storage.pointer import layout_pointer
from ..storage.sidecar import LayoutSidecar, new_layout_id
from ..workload.in_block import (
    GUARD_MERGES,
    GUARD_WEIGHTS,
    P_MAX_TEMPLATE_REGRESSION,
    LayoutChoice,
    TemplateGuard,
    files_read,
    guard_multipliers,
    merged_layout,
    order_cuts,
    order_trees,
    select_layout,
    zone_columns,
)
from ..workload.templates import template_key
from . import iceberg_jvm as jv
from .blocks import BLOCK_COL, LayoutPayload, append_block_columns
from .pipeline import (
    Rewrite,
    block_file_refs,
    block_partition,
    counted_blocks,
    finalize_layout,
    routed_rows,
    run_rewrite,
    write_tasks,
)
from .rewrite_common import (
    P_OPTIONS,
    P_TEMPLATE_GUARD,
    STALE_NOTE,
    IncrementalResult,
    PandoRewriteError,
    RewriteOptions,
    RewriteResult,
    TemplateGuardError,
    batch_rows,
    candidate_ks,
    file_bounds,
    learning_workload,
    sample_fraction,
    sample_rate,
    seeded_sample,
    stale_cut_columns,
    static_table,
    table_workload,
    template_bound,
)

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
        invalid = f"argument 'where' = {where!r} is not a valid SQL predicate ({str(e).splitlines()[0]})"
        raise PandoRewriteError(f"{invalid}; {hint}") from None
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
            yield append_block_columns(data, blocks, codes)

    return run


def partition_reads_now(static, snapshot_id: int, queries: Sequence[tuple[Any, float]], part_of: dict[str, str],
                        live: dict[str, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per partition of ``part_of`` (data file path → partition), per query, the fractions of the
    partition's rows and bytes in its data files the query opens today: the planner's own plan
    (``planner.scan.plan_scan``, as ``rewrite_common.reads_now`` measures the whole table), over
    the partition's live files (``live``: path → Java DataFile)."""
    from ..planner.scan import plan_scan

    names = sorted(set(part_of.values()))
    index = {n: i for i, n in enumerate(names)}
    totals = np.zeros((2, len(names)))
    for p, n in part_of.items():
        totals[:, index[n]] += (int(live[p].recordCount()), int(live[p].fileSizeInBytes()))
    opened = np.zeros((2, len(names), len(queries)))
    for q, (f, _) in enumerate(queries):
        for task in plan_scan(static, f, snapshot_id=snapshot_id).tasks:
            mine = part_of.get(task.file.file_path)
            if mine is not None:
                opened[:, index[mine], q] += (int(task.file.record_count), int(task.file.file_size_in_bytes))
    share = opened / np.maximum(1.0, totals)[:, :, None]
    return {n: (share[0, i], share[1, i]) for n, i in index.items()}


def guarded_choice(learned: Sequence[tuple[Any, str | None]], sample: pa.Table, validation: Sequence[tuple[Any, float]],
                   now: np.ndarray, now_bytes: np.ndarray, bound: float, file_fraction: float,
                   evaluations: Evaluations | None = None, fraction: float = 1.0) -> LayoutChoice:
    """``select_layout`` under the guard for one partition (its ``sample``, one file per block),
    over the validation draws that reach the partition: those that open one of its files now
    (``now``: ``partition_reads_now``) or would with a candidate. The others read none of it
    either way; averaged in, they would shrink every template's reads of the partition below
    ``in_block.SMALL_TEMPLATE``, where the guard allows a whole file more. ``fraction``: the
    sample's share of the partition (``in_block.files_read``: the files' bounds widened below 1)."""
    validation = list(validation)
    zones = zone_columns(validation, sample)
    reads = [files_read(layout, sample, validation, math.inf, order, zones=zones, evaluations=evaluations,
                        fraction=fraction) for layout, order in learned]
    reach = np.flatnonzero((np.asarray(now) > 0) | np.any(np.asarray(reads) > 0, axis=0))
    return select_layout(learned, sample, [validation[i] for i in reach], math.inf, now=np.asarray(now)[reach],
                         bound=bound, file_fraction=file_fraction, now_bytes=np.asarray(now_bytes)[reach],
                         measured=[r[reach] for r in reads], evaluations=evaluations, fraction=fraction)


def partitions_refusal(table_name: str, bound: float, refused: dict[str, TemplateGuard]) -> str:
    """Why a rewrite lays out no partition: per refused partition, the templates that break the guard."""
    parts = "; ".join(f"partition {n}: " + ", ".join(t.line(f"partition {n}") for t in g.breaking())
                      for n, g in sorted(refused.items()))
    return (f"no partition of {table_name} is laid out: in each, no candidate layout keeps every workload template "
            f"within {bound:g}× of what it reads of the partition now (option 'max-template-regression', table "
            f"property {P_MAX_TEMPLATE_REGRESSION}): {parts}. Nothing was written. Pass force => true to apply the "
            "layouts anyway, raise the bound, or give the workload more weight on those templates")


def rewrite_partitions(spark, table_name: str, workload: Sequence[str] | str, options: RewriteOptions | None = None,
                       where: str | None = None, io_properties: dict[str, str] | None = None,
                       progress: Callable[[str], None] = lambda m: None,
                       force: bool = False) -> PartitionedRewriteResult:
    """Learn and apply a layout per selected partition (module docstring); one ``replace`` commit.
    Under the per-template guard (``max-template-regression``) each partition gets the best of its
    candidate layouts that keeps every template within the bound of what it reads of the
    partition now (``guarded_choice``); a partition where none does keeps its files, with a
    note naming the templates, unless ``force``; when that leaves no partition to lay out, the
    rewrite stops (``TemplateGuardError``) before anything is written."""
    from pyiceberg.io import load_file_io
    from pyspark.sql import functions as F

    from ..layout import build_layout

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

    df = jv.read_snapshot(spark, table_name, base_id, [FILE_COL])
    if where is not None:
        try:
            matched = {r[0] for r in df.where(where).select(FILE_COL).distinct().collect()}
        except Exception as e:  # Spark's analysis error (a type mismatch, an unknown function)
            raise PandoRewriteError(f"argument 'where' = {where!r} cannot be evaluated on {table_name}: "
                                    f"{str(e).splitlines()[0][:300]}") from None
        chosen = {part_of[p] for p in matched if p in part_of}
    else:
        chosen = set(part_of.values())
    if not chosen and not part_of and live:  # found by the soak test: it said "matches where None"
        raise PandoRewriteError(f"table {table_name} has no live data file under its current partition spec (all "
                                f"{len(live)} were written under older specs, which Pando does not lay out): rewrite "
                                f"them into the current spec first, e.g. CALL <catalog>.system.rewrite_data_files("
                                f"table => '{table_name}', options => map('rewrite-all', 'true'))")
    if not chosen:
        raise PandoRewriteError(f"no partition of {table_name} with live rows matches where {where!r}: "
                                "nothing to lay out")

    wl, target, queries, schemas = table_workload(spark, table_name, workload)
    files = sorted(p for p in part_of if part_of[p] in chosen)
    counts = {r[0]: int(r[1]) for r in df.where(F.col(FILE_COL).isin(files)).groupBy(FILE_COL).count().collect()}
    names = sorted(chosen)
    rows_of = {n: 0 for n in names}
    for p, n in counts.items():
        rows_of[part_of[p]] += n
    fractions = {p: sample_fraction(options, rows_of[part_of[p]]) for p in files}
    progress(f"sampling {len(names)} partition(s) of {table_name} ({sum(rows_of.values()):,} rows)")
    per_file = F.create_map(*[F.lit(x) for p in files for x in (p, fractions[p])])[F.col(FILE_COL)]
    sample = seeded_sample(df.where(F.col(FILE_COL).isin(files)), per_file, options.seed, skip=[FILE_COL])
    t1 = time.time()
    seconds["sampling"] = t1 - t0

    # One layout per partition with rows in the sample (an empty partition keeps its files as they are).
    sample_part = np.asarray([names.index(part_of[p]) for p in files], dtype=np.int64)[
        pc.index_in(sample.column(FILE_COL), value_set=pa.array(files, pa.string())).to_numpy(zero_copy_only=False)
        .astype(np.int64)] if sample.num_rows else np.zeros(0, np.int64)
    sample = sample.drop_columns([FILE_COL])
    # Templates' synthetic draws along the whole sample (every partition's), cuts computed once.
    ks = candidate_ks(options)
    bound = template_bound(options, table)
    expected, cuts = learning_workload(spark, wl, target, schemas, queries, sample, options,
                                       sample_rate(options, sum(rows_of.values())),
                                       validate=len(ks) > 1 or bound is not None)
    now_of: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    static = None
    if bound is not None:
        progress(f"planning {len(expected.validation)} validation draws on the table as it is now")
        static = static_table(table, io_properties)
        now_of = partition_reads_now(static, base_id, expected.validation, {p: part_of[p] for p in files}, live)
    layouts: dict[str, Any] = {}
    guards: dict[str, TemplateGuard] = {}  # of the layouts applied, under the guard
    refused: dict[str, TemplateGuard] = {}
    for i, name in enumerate(names):
        rows = np.flatnonzero(sample_part == i)
        if rows_of[name] == 0 or len(rows) == 0:
            notes.append(f"partition {name}: no live rows sampled; left as it was")
            continue
        part_sample = sample.take(pa.array(rows))
        b_sample = max(1.0, options.min_block_rows * len(rows) / rows_of[name])
        progress(f"partition {name}: k={'1..' if len(ks) > 1 else ''}{options.k} trees on {len(rows):,} sample rows")
        evaluations = Evaluations(part_sample)  # cut masks and sides, shared by the partition's candidates
        learned = [(build_layout(part_sample, cuts, expected.queries, k, b_sample, max_ktuples=options.max_ktuples,
                                 evaluations=evaluations), None) for k in ks]
        if bound is None:
            # one file per block here: the files the validation draws read are the blocks
            choice = select_layout(learned, part_sample, expected.validation, math.inf,
                                   evaluations=evaluations) if len(ks) > 1 else None
            layouts[name] = learned[choice.index if choice else 0][0]
            continue
        now, now_bytes = now_of[name]
        file_fraction = min(1.0, options.min_block_rows / rows_of[name])
        share = len(rows) / rows_of[name]  # the sample's share of the partition
        choice = guarded_choice(learned, part_sample, expected.validation, now, now_bytes, bound, file_fraction,
                                evaluations, share)
        assert choice.guard is not None  # select_layout under a bound always measures one
        if not choice.guard.holds:
            # As the whole-table rewrite does (``rewrite.learn_layout``): the order the partition's
            # files already have as one more tree before the unconstrained choice's, blocks merged
            # with the breaking templates priced in (``guard_multipliers``); then the most
            # constrained candidate (one tree, cuts along that order, the breaking templates' draws
            # weighing the most).
            progress(f"partition {name}: no layout keeps every template within {bound:g}× of what it reads now: "
                     "merging along the partition's current order")
            zones = [c for c, _ in zone_columns(expected.validation, part_sample)]
            mine = {p for p in files if part_of[p] == name}
            extra = order_cuts(file_bounds(static, base_id, zones, mine), part_sample.schema)
            breaking = {t.template for t in choice.guard.breaking()}
            if extra:
                trees = order_trees(part_sample, extra, [(f, w) for f, w in expected.queries
                                                         if template_key(f) in breaking],
                                    learned[choice.index][0].trees, b_sample, evaluations=evaluations,
                                    max_ktuples=options.max_ktuples)
                multipliers: dict[str, float] = {}
                last = choice.guard
                for i in range(GUARD_MERGES):
                    if i:
                        multipliers = guard_multipliers(last, multipliers)
                    weighed = [(f, w * multipliers.get(template_key(f), 1.0)) for f, w in expected.queries]
                    learned.append((merged_layout(trees, part_sample, weighed, b_sample, evaluations=evaluations),
                                    None))
                    choice = guarded_choice(learned, part_sample, expected.validation, now, now_bytes, bound,
                                            file_fraction, evaluations, share)
                    last = choice.guards[-1]
                    if choice.holds[-1]:
                        break
            if not any(choice.holds):
                weighted = [(f, w * GUARD_WEIGHTS[-1] if template_key(f) in breaking else w)
                            for f, w in expected.queries]
                learned.append((build_layout(part_sample, cuts + extra, weighted, 1, b_sample,
                                             max_ktuples=options.max_ktuples, evaluations=evaluations), None))
                choice = guarded_choice(learned, part_sample, expected.validation, now, now_bytes, bound,
                                        file_fraction, evaluations, share)
        guard = choice.guard
        assert guard is not None
        of = f"partition {name}"
        if not guard.holds and not force:
            refused[name] = guard
            notes.append(f"{of} left as it is: " + "; ".join(t.line(of) for t in guard.breaking()))
            continue
        layouts[name], guards[name] = learned[choice.index][0], guard
        notes += [f"{of}: " + ("" if t.holds else "forced: ") + t.line(of) for t in guard.templates]
    if refused and not layouts and bound is not None:
        raise TemplateGuardError(partitions_refusal(table_name, bound, refused))
    if not layouts:
        raise PandoRewriteError(f"no partition of {table_name} has sampled rows to lay out: nothing was written")
    seconds["optimizing"] = time.time() - t1
    laid = sorted(layouts)
    files = [p for p in files if part_of[p] in layouts]
    old_files = [live[p] for p in files]
    offsets = np.cumsum([0] + [layouts[n].num_blocks for n in laid]).tolist()

    # The layouts of the partitions not laid out now are kept as they were.
    kept_entries: dict[str, PartitionEntry] = {}
    ptr = layout_pointer({str(k): str(v) for k, v in dict(table.properties()).items()})
    if ptr is not None and ptr.format_version == PARTITIONED_FORMAT_VERSION:
        location = str(table.location()).rstrip("/")
        previous = read_layout_sidecar(load_file_io(dict(io_properties or {}), location), ptr, location,
                                       str(table.uuid()))
        kept_entries = {n: e for n, e in previous.partitions.items() if n not in layouts}
    weights = sum(w for _, w in queries) or 1.0
    workload_sql = [(q.sql, q.weight) for q in wl.queries if target in q.filters]
    sequence_number = int(current.sequenceNumber())

    def layout_sidecar(layout_id: str, written: list) -> PartitionedLayoutSidecar:
        entries = dict(kept_entries)
        part = [block_partition(offsets, int(w.block)) for w in written]
        for i, name in enumerate(laid):
            mine = [w for w, p in zip(written, part, strict=True) if p == i]
            layout = finalize_layout(layouts[name], mine, offset=offsets[i])
            rows = int(layout.block_rows.sum())
            fraction = float(layout.cost(queries)) / (max(1.0, float(rows)) * weights)
            sc = LayoutSidecar.from_layout(layout, layout_id=new_layout_id(), table_uuid=str(table.uuid()),
                                           block_files=block_file_refs(mine, offsets[i]), base_snapshot_id=base_id,
                                           base_sequence_number=sequence_number,
                                           properties={"pando.expected-rows-fraction": f"{fraction:.6f}",
                                                       "pando.rows": str(rows),
                                                       "pando.workload": json.dumps(workload_sql),
                                                       **({P_TEMPLATE_GUARD: json.dumps(guards[name].to_json())}
                                                          if name in guards else {})})
            entries[name] = PartitionEntry.of(name, spec_id, sc, layout)
        return PartitionedLayoutSidecar(layout_id, str(table.uuid()), entries, base_id,
                                        {"pando.k": str(options.k), "pando.workload-queries": str(len(queries)),
                                         P_OPTIONS: json.dumps(options.to_map()),
                                         "pando.workload": json.dumps(workload_sql)})

    payloads = [LayoutPayload(layouts[n].to_bytes(), {c.key: c.keys_to_bytes() for c in layouts[n].cuts
                                                      if hasattr(c, "keys_to_bytes")}) for n in laid]
    source = df.where(F.col(FILE_COL).isin(files))
    index = {n: i for i, n in enumerate(laid)}
    router = route_partitions(payloads, files, [index[part_of[p]] for p in files], offsets)
    representative = {index[part_of[p]]: live[p].partition() for p in files}  # a file's tuple, per partition
    committed = run_rewrite(spark, table_name, table, base_id, Rewrite(
        routed=routed_rows(source, router, drop=[FILE_COL]), tasks=write_tasks(spark, offsets[-1]),
        batch_rows=batch_rows(source), writing=f"routing + writing {offsets[-1]} blocks of {len(laid)} partition(s)",
        expected_rows=sum(rows_of[n] for n in laid),
        expected_rows_were="the selected partitions have {rows} live rows at the base snapshot",
        layout_sidecar=layout_sidecar, replaced=old_files, pointer_base_snapshot_id=base_id,
        pointer_format_version=PARTITIONED_FORMAT_VERSION, summary={"pando.partitions": str(len(laid))},
        partition_of=lambda w: representative[block_partition(offsets, int(w.block))],
        target_file_size_bytes=options.target_file_size_bytes), io_properties, seconds, progress)
    notes.append(f"{len(laid)} partition(s) laid out, {len(kept_entries)} partition layout(s) kept as they were"
                 + (f", {len(refused)} partition(s) left as they are by the guard" if refused else ""))
    return PartitionedRewriteResult(len(old_files), len(committed.written),
                                    sum(int(f.fileSizeInBytes()) for f in old_files), 0, committed.layout_id,
                                    offsets[-1], committed.snapshot_id, base_id, seconds, laid, len(kept_entries),
                                    notes)


# ---- incremental mode, per partition ----------------------------------------------------------

def _relabel(big: list[int], part_of_block: list[int]):
    """mapInArrow function: blocks with too few new rows → their partition's carry-over id
    ``-1 - p`` (files outside the layout, written per partition)."""
    from .blocks import BLOCK_COL as B

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        keep = np.asarray(big, dtype=np.int64)
        owner = np.asarray(part_of_block, dtype=np.int64)
        for batch in batches:
            i = batch.schema.get_field_index(B)
            blocks = batch.column(i).to_numpy().astype(np.int64)
            out = np.where(np.isin(blocks, keep), blocks, -1 - owner[blocks]).astype(np.int32)
            yield batch.set_column(i, B, pa.array(out, pa.int32()))

    return run


def incremental_partitions(spark, table_name: str, min_block_rows: int | None = None,
                           target_file_size_bytes: int | None = None, io_properties: dict[str, str] | None = None,
                           progress: Callable[[str], None] = lambda m: None):
    """``mode 'incremental'`` on a partitioned table: in every partition that has a layout, the
    rows of its files outside that layout are routed with the partition's stored trees and
    k-tuple → block map (``incremental.py``, per partition); blocks that get >= ``min_block_rows``
    new rows (default: the partition layout's smallest block) get new files, smaller shares go
    to carry-over files outside the layout of their partition. Partitions without a layout are
    not touched (their files stay outside, always read, until a rewrite with ``where``). One
    ``replace`` commit and one new format-version-2 sidecar; none when no block qualifies."""
    from pyiceberg.io import load_file_io
    from pyspark.sql import functions as F

    seconds: dict[str, float] = {}
    t0 = time.time()
    table = jv.load_table(spark, table_name)
    ptr = layout_pointer({str(k): str(v) for k, v in dict(table.properties()).items()})
    if ptr is None or ptr.format_version != PARTITIONED_FORMAT_VERSION:
        raise PandoRewriteError(f"table {table_name} is partitioned but has no per-partition Pando layouts to "
                                "extend; create them with rewrite_data_files(strategy => 'pando', workload => ...) "
                                "(mode 'full', optionally with where => ...)")
    location = str(table.location()).rstrip("/")
    io = load_file_io(dict(io_properties or {}), location)
    current = read_layout_sidecar(io, ptr, location, str(table.uuid()))
    snap = table.currentSnapshot()
    base_id = int(snap.snapshotId())
    spec = table.spec()
    spec_id = int(spec.specId())
    live = jv.live_data_files(table, base_id)
    inside = current.partition_of_path()
    part_of = {p: str(spec.partitionToPath(f.partition())) for p, f in live.items()
               if int(f.specId()) == spec_id and p not in inside}
    stale = {}  # partition → cut columns renamed/dropped since its layout (found by the soak test)
    for n in sorted(set(part_of.values()) & set(current.partitions)):
        entry = current.partitions[n]
        own = dataclasses.replace(ptr, snapshot_id=entry.sidecar.base_snapshot_id) \
            if entry.sidecar.base_snapshot_id is not None else ptr
        stale[n] = stale_cut_columns(table, own, entry.layout, io_properties)
    stale = {n: c for n, c in stale.items() if c}
    outside = {p: n for p, n in part_of.items() if n in current.partitions and n not in stale}
    result = IncrementalResult(0, 0, 0, 0, ptr.layout_id, 0, None, base_id, seconds,
                               min_block_rows=min_block_rows or 0, committed=False)
    skipped = sorted({n for n in part_of.values() if n not in current.partitions})
    if skipped:
        result.notes.append(f"{len(skipped)} partition(s) without a layout left as they are (e.g. {skipped[0]}); lay "
                            "them out with rewrite_data_files(strategy => 'pando', where => ...)")
    if stale:
        columns = sorted(set().union(*stale.values()))
        result.notes.append(STALE_NOTE.format(columns=", ".join(columns),
                                              what=f"the rows outside the layouts of {len(stale)} partition(s) are"))
    if not outside:
        result.notes.append("no partition with a layout has files outside it: nothing to lay out")
        return result
    names = sorted(set(outside.values()))
    entries = [current.partitions[n] for n in names]
    offsets = np.cumsum([0] + [e.layout.num_blocks for e in entries]).tolist()
    part_of_block = np.repeat(np.arange(len(names)), np.diff(offsets)).tolist()
    minimum = [min_block_rows if min_block_rows is not None else
               (max(1, int(e.layout.block_rows.min())) if e.layout.num_blocks else 1) for e in entries]
    if min(minimum) < 1:
        raise PandoRewriteError(f"option 'min-block-rows' must be >= 1, got {min_block_rows}")
    files = sorted(outside)
    payloads = [LayoutPayload(e.sidecar.layout_bytes, dict(e.sidecar.literal_keys)) for e in entries]

    source = jv.read_snapshot(spark, table_name, base_id, [FILE_COL]).where(F.col(FILE_COL).isin(files))
    router = route_partitions(payloads, files, [names.index(outside[p]) for p in files], offsets)
    routing = f"routing the rows of {len(files)} file(s) outside the layouts of {len(names)} partition(s)"
    with counted_blocks(routed_rows(source, router, drop=[FILE_COL]), lambda b: minimum[part_of_block[b]], result,
                        seconds, t0, routing, progress) as (routed, counts, big):
        if not big:
            result.notes.append(f"no block gets enough of the {result.rows_read} new rows (largest share "
                                f"{max(counts.values(), default=0)}): nothing committed")
            return result
        touched = sorted({part_of_block[b] for b in big})
        # Only partitions with a qualifying block are rewritten; the others' files stay as they are.
        files = [p for p in files if names.index(outside[p]) in touched]
        touched_blocks = [b for b in range(offsets[-1]) if part_of_block[b] in touched]
        sequence_number = int(snap.sequenceNumber())

        def layout_sidecar(layout_id: str, written: list) -> PartitionedLayoutSidecar:
            new_entries = dict(current.partitions)
            for i in touched:
                e = entries[i]
                mine = [w for w in written if offsets[i] <= int(w.block) < offsets[i + 1]]
                layout = finalize_layout(e.layout, mine, offset=offsets[i], extend=True)
                props = {**e.sidecar.properties, "pando.mode": "incremental", "pando.previous-layout-id": e.layout_id}
                sc = LayoutSidecar.from_layout(layout, layout_id=new_layout_id(), table_uuid=str(table.uuid()),
                                               block_files=block_file_refs(mine, offsets[i], e.sidecar.block_files),
                                               base_snapshot_id=base_id, base_sequence_number=sequence_number,
                                               properties=props)
                new_entries[names[i]] = PartitionEntry.of(names[i], e.spec_id, sc, layout)
            return PartitionedLayoutSidecar(layout_id, str(table.uuid()), new_entries, base_id,
                                            {**current.properties, "pando.mode": "incremental",
                                             "pando.previous-layout-id": ptr.layout_id})

        representative = {outside[p]: live[p].partition() for p in files}

        def partition_of(w) -> Any:  # a carry-over file of partition p has block -1 - p
            b = int(w.block)
            return representative[names[part_of_block[b]] if b >= 0 else names[-1 - b]]

        tagged = routed.where(F.col(BLOCK_COL).isin(touched_blocks)).mapInArrow(_relabel(big, part_of_block),
                                                                                 routed.schema)
        committed = run_rewrite(spark, table_name, table, base_id, Rewrite(
            routed=tagged, tasks=write_tasks(spark, len(big) + len(touched)), batch_rows=batch_rows(source),
            writing=f"writing new files for {len(big)} block(s) of {len(touched)} partition(s), carrying over "
                    f"{result.rows_carried_over} rows",
            expected_rows=sum(n for b, n in counts.items() if part_of_block[b] in touched),
            expected_rows_were="read {rows} rows from the files outside the layouts",
            layout_sidecar=layout_sidecar, replaced=[live[p] for p in files],
            pointer_base_snapshot_id=ptr.base_snapshot_id, pointer_format_version=PARTITIONED_FORMAT_VERSION,
            summary={"pando.mode": "incremental"}, partition_of=partition_of,
            target_file_size_bytes=target_file_size_bytes), io_properties, seconds, progress)
    written = committed.written
    laid = [w for w in written if int(w.block) >= 0]
    result.rewritten_data_files_count = len(files)
    result.added_data_files_count = len(written)
    result.rewritten_bytes_count = sum(int(live[p].fileSizeInBytes()) for p in files)
    result.layout_id, result.snapshot_id, result.committed = committed.layout_id, committed.snapshot_id, True
    result.block_count = int(sum(e.layout.num_blocks for e in committed.sidecar.partitions.values()))
    result.notes.append(f"{len(touched)} partition(s) extended: {result.rows_laid_out} rows in {len(laid)} new file(s) "
                        f"of {len(big)} block(s); {len(written) - len(laid)} carry-over file(s) outside the layouts")
    return result
