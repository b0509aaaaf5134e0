"""``rewrite_data_files`` with strategy ``pando`` on Spark (paper §6, applied to Iceberg).

    base snapshot ─Spark read (Iceberg, deletes applied)─▶ sample (seeded) ─▶ learn layout
                  (workload → cuts, join-induced literal cuts from Spark; §6.1 + §6.2)
    base snapshot ─Spark read─▶ mapInArrow(route) ─▶ shuffle by block, sort by the in-block
                  order ─▶ mapInArrow(write): each block as files of about b rows
                  (workload/in_block.py; split also above the target size)
    driver: finalize the layout from the (block, k-tuple) pairs actually written (§7),
            write the Puffin sidecar, ONE Iceberg commit: `replace` snapshot + pointers.

Table data never goes through the driver: the driver sees the sample, the literal cuts' key
sets and one small row per written file. A failure before the commit deletes what was written
and leaves the table exactly as it was.

What this rewrite shares with the incremental one (``incremental.py``) and the per-partition ones
(``partitioned.py``, which ``rewrite_table`` hands a partitioned table to) is in
``rewrite_common.py``: options, results, learning from the workload, writing, clean-up after a
failure.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from ..progress import progress_step, spark_job_progress
from ..workload.in_block import BlockFiles, InBlockOrder, block_files, choose_in_block_order, select_layout
from . import iceberg_jvm as jv
from .session import refresh_table
from .blocks import (BLOCK_COL, KTUPLE_COL, ROW_COL, WRITTEN_FILE_DDL, LayoutPayload, WriteSpec, ktuple_radices,
                     route_batches, unpack_ktuples, write_blocks)
from .partitioned import rewrite_partitions
from .rewrite_common import (PandoRewriteError, RewriteOptions, RewriteResult, SparkKeyProvider, after_failure,
                             arrow_batch_rows, arrow_schema_of, batch_rows, candidate_ks, collect_arrow,
                             identifier_fields, learning_workload, namespace_schemas, row_count, table_workload,
                             write_spec)

__all__ = [
    "LearnedLayout", "P_IN_BLOCK", "P_K_SELECTION", "learn_layout", "rewrite_table",
    # defined in rewrite_common.py; re-exported, their users import them from here
    "PandoRewriteError", "RewriteOptions", "RewriteResult", "SparkKeyProvider", "arrow_schema_of", "collect_arrow",
    "identifier_fields", "namespace_schemas",
]

P_IN_BLOCK = "pando.in-block-order"  # sidecar property: JSON of workload.in_block.InBlockOrder
P_K_SELECTION = "pando.k-selection"  # sidecar property: JSON of workload.in_block.LayoutChoice


@dataclass
class LearnedLayout:
    layout: Any  # pando_iceberg.layout.Layout
    literal_keys: dict[str, bytes]
    table_rows: int
    sample_rows: int
    queries_used: int
    cuts: int
    unsupported: list[Any] = field(default_factory=list)
    seconds_sampling: float = 0.0
    seconds_optimizing: float = 0.0
    queries: list[Any] = field(default_factory=list)  # (TableFilter, weight) for this table
    workload_sql: list[tuple[str, float]] = field(default_factory=list)  # (statement, weight)
    templates: list[dict] = field(default_factory=list)  # templates.Template.to_json() of each template
    in_block: Any = None  # workload.in_block.InBlockOrder (None: files in routing order)
    k_selection: dict | None = None  # workload.in_block.LayoutChoice.to_json (None: k fixed)

    @property
    def in_block_column(self) -> str | None:
        return getattr(self.in_block, "column", None)

    def properties(self) -> dict[str, str]:
        """What the sidecar records about how the layout was learned (describe_layout shows it)."""
        props = {"pando.k": str(self.layout.k), "pando.workload-queries": str(self.queries_used),
                 "pando.workload": json.dumps(list(self.workload_sql)),
                 "pando.expected-rows-fraction": f"{self.expected_fraction():.6f}",
                 "pando.templates": json.dumps(self.templates)}
        if self.in_block is not None:
            props[P_IN_BLOCK] = json.dumps(self.in_block.to_json())
        if self.k_selection is not None:
            props[P_K_SELECTION] = json.dumps(self.k_selection)
        return props

    def expected_fraction(self, layout=None) -> float:
        """Weighted share of the table's rows the workload reads with this layout (§5, the one
        cost model), as the layout itself predicts it."""
        layout = layout or self.layout
        total = float(layout.block_rows.sum()) or 1.0
        weights = sum(w for _, w in self.queries) or 1.0
        return float(layout.cost(self.queries)) / (total * weights)


# ---- learning -------------------------------------------------------------------------------

def learn_layout(spark, table_name: str, workload: Sequence[str] | str, options: RewriteOptions,
                 snapshot_id: int | None = None, progress: Callable[[str], None] = lambda m: None) -> LearnedLayout:
    """Sample the table, learn k trees and the block assignment from the workload (§6), and the
    in-block order of its files (``workload/in_block.py``)."""
    from ..layout import build_layout

    t0 = time.time()
    df = jv.read_snapshot(spark, table_name, snapshot_id)
    wl, target, queries, schemas = table_workload(spark, table_name, workload)

    total_rows = row_count(spark, table_name, snapshot_id)
    if total_rows == 0:
        raise PandoRewriteError(f"table {table_name} is empty: nothing to lay out")
    fraction = min(1.0, max(options.sample_rate, options.min_sample_rows / total_rows))
    with spark_job_progress(spark, progress, f"sampling {table_name} ({fraction:.2%} of {total_rows:,} rows)"):
        test_pause("SAMPLING")
        sample = collect_arrow(df.sample(withReplacement=False, fraction=fraction, seed=options.seed))
    t1 = time.time()
    if sample.num_rows == 0:
        sample = collect_arrow(df.limit(options.min_sample_rows))
    ks = candidate_ks(options)
    expected, cuts = learning_workload(spark, wl, target, schemas, queries, sample, options, validate=len(ks) > 1)
    scale = sample.num_rows / total_rows
    b_sample = max(1.0, options.min_block_rows * scale)
    learned = []
    test_pause("OPTIMIZING")
    for k in ks:
        progress(f"optimizing k={k} trees on {sample.num_rows:,} sample rows, {len(cuts)} candidate cuts, "
                 f"{len(queries)} queries + {len(expected.queries) - len(queries)} synthetic draws of their templates")
        layout = build_layout(sample, cuts, expected.queries, k, b_sample, max_ktuples=options.max_ktuples,
                              progress=progress)
        learned.append((layout, in_block_order(layout, sample, expected.queries, b_sample, options)))
    k_selection = None
    if len(learned) > 1:
        choice = select_layout([(lay, getattr(o, "column", None)) for lay, o in learned], sample,
                               expected.validation, b_sample)
        k_selection = choice.to_json(ks)
        progress(f"kept k={ks[choice.index]} trees: validation draws read "
                 + ", ".join(f"{c:.3f} (k={k})" for k, c in zip(ks, choice.costs)) + " of the sample's rows")
        layout, in_block = learned[choice.index]
    else:
        layout, in_block = learned[0]
    literal_keys = {c.key: c.keys_to_bytes() for c in layout.cuts if hasattr(c, "keys_to_bytes")}
    return LearnedLayout(layout, literal_keys, total_rows, sample.num_rows, len(queries), len(cuts),
                         list(wl.unsupported), t1 - t0, time.time() - t1, queries,
                         [(q.sql, q.weight) for q in wl.queries if target in q.filters],
                         expected.describe(), in_block, k_selection)


def in_block_order(layout, sample: pa.Table, queries: list, b_sample: float, options: RewriteOptions):
    """The in-block order option resolved: 'auto' → measured (``workload/in_block.py``),
    'none' → None, else the named column (checked against the table)."""
    choice = options.in_block_order
    if choice == "none":
        return None
    if choice == "auto":
        order = choose_in_block_order(layout, sample, queries, b_sample)
        return order if order.column is not None else None
    names = {n.lower() for n in sample.schema.names}
    if choice not in names:
        raise PandoRewriteError(f"option 'in-block-order' names column {choice!r}, which the table does not have; "
                                f"accepted: 'auto', 'none' or one of {', '.join(sample.schema.names)}")
    return InBlockOrder(choice)


# ---- applying -------------------------------------------------------------------------------

def rewrite_table(spark, table_name: str, workload: Sequence[str] | str, options: RewriteOptions | None = None,
                  io_properties: dict[str, str] | None = None,
                  progress: Callable[[str], None] = lambda m: None,
                  learned: LearnedLayout | None = None, where: str | None = None) -> RewriteResult:
    """Learn a layout for the table's current snapshot (or use ``learned``) and apply it in one
    ``replace`` commit. A partitioned table gets one layout per partition (``partitioned.py``;
    ``where`` selects the partitions)."""
    from ..storage.pointer import P_SNAPSHOT, LayoutPointer
    from ..storage.sidecar import new_layout_id
    from ..storage.sidecar import DataFileRef, LayoutSidecar

    options = options or RewriteOptions()
    options.validate()
    seconds: dict[str, float] = {}
    table = jv.load_table(spark, table_name)
    if table.spec().isPartitioned() or where is not None:
        if learned is not None:
            raise PandoRewriteError(f"table {table_name} is partitioned: its layouts are learned per partition, a "
                                    "pending whole-table layout cannot be applied (pass relearn => true)")
        return rewrite_partitions(spark, table_name, workload, options, where, io_properties, progress)
    current = table.currentSnapshot()
    if current is None:
        raise PandoRewriteError(f"table {table_name} has no snapshot (no data): nothing to lay out")
    base_id = int(current.snapshotId())

    base_rows = None
    if learned is None:
        learned = learn_layout(spark, table_name, workload, options, base_id, progress)
        base_rows = learned.table_rows  # counted on base_id while learning: no second count
    seconds["sampling"] = learned.seconds_sampling
    seconds["optimizing"] = learned.seconds_optimizing
    layout = learned.layout
    layout_id = new_layout_id()

    location = str(table.location()).rstrip("/")
    data_dir = f"{location}/data/pando-{layout_id}"
    if base_rows is None:
        base_rows = row_count(spark, table_name, base_id)
    spec = write_spec(spark, table, data_dir, io_properties, options.target_file_size_bytes,
                      order_column=learned.in_block_column,
                      files=plan_block_files(layout, base_rows, options.min_block_rows))
    payload = LayoutPayload(layout.to_bytes(), learned.literal_keys)
    written: list[Any] = []
    sidecar_path = None
    committing = False
    try:
        t0 = time.time()
        with spark_job_progress(spark, progress, f"routing + writing {layout.num_blocks} blocks (Spark tasks)"):
            written = _route_and_write(spark, table_name, base_id, layout, payload, spec)
        seconds["writing"] = time.time() - t0

        t0 = time.time()
        # §7: the leaf → block maps come from the (block, k-tuple) pairs actually written.
        radices = ktuple_radices(layout)
        pairs = []
        for w in written:
            codes = np.array([int(c) for c in w.ktuples.split(",") if c], dtype=np.int64)
            pairs += [(int(w.block), tuple(kt)) for kt in unpack_ktuples(codes, radices).tolist()]
        layout.finalize(pairs)
        block_rows = np.zeros(layout.num_blocks, dtype=np.int64)
        for w in written:
            block_rows[w.block] += w.record_count
        layout.block_rows = block_rows

        old_files = jv.live_data_files(table, base_id)
        rewritten_bytes = sum(int(f.fileSizeInBytes()) for f in old_files.values())
        new_rows = int(sum(w.record_count for w in written))
        if new_rows != base_rows:
            raise PandoRewriteError(f"wrote {new_rows} rows but the base snapshot has {base_rows} live rows: not committing")

        block_files: dict[int, list] = {}
        for w in written:
            block_files.setdefault(int(w.block), []).append(DataFileRef(w.path, int(w.record_count), int(w.file_size_in_bytes)))
        sidecar = LayoutSidecar.from_layout(
            layout, layout_id=layout_id, table_uuid=str(table.uuid()), block_files=block_files,
            base_snapshot_id=base_id, base_sequence_number=int(current.sequenceNumber()),
            properties=learned.properties())
        from pyiceberg.io import load_file_io

        io = load_file_io(dict(io_properties or {}), location)
        sidecar_path, sidecar_size = sidecar.write(io, location)
        seconds["metadata"] = time.time() - t0

        test_pause("BEFORE_COMMIT")
        t0 = time.time()
        with progress_step(progress, "commit: data file metadata, one replace snapshot", 2) as step:
            new_files = jv.build_data_files(spark, table, [jv.NewFile(w.path, w.file_size_in_bytes) for w in written])
            step.advance()
            pointer = LayoutPointer(layout_id, sidecar.file_name, snapshot_id=0, base_snapshot_id=base_id)
            props = {**pointer.to_properties(), P_SNAPSHOT: "{snapshot-id}"}
            committing = True
            snapshot_id = jv.commit_replace(spark, table, base_id, list(old_files.values()), new_files, props,
                                            summary={"pando.layout-id": layout_id})
            step.advance()
        seconds["commit"] = time.time() - t0
    except BaseException as failure:
        snapshot_id = after_failure(spark, failure, table_name, layout_id, committing, written, sidecar_path,
                                    io_properties, location, data_dir, progress)
    refresh_table(spark, table_name)
    return RewriteResult(len(old_files), len(written), rewritten_bytes, 0, layout_id, layout.num_blocks,
                         snapshot_id, base_id, seconds)


def _route_and_write(spark, table_name: str, base_id: int, layout, payload: LayoutPayload, spec: WriteSpec) -> list:
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    df = jv.read_snapshot(spark, table_name, base_id)
    if spec.order_column:  # files keep the table's row order inside (blocks.write_blocks)
        df = df.withColumn(ROW_COL, F.monotonically_increasing_id())
    routed_schema = StructType(df.schema.fields + [StructField(BLOCK_COL, IntegerType(), False),
                                                   StructField(KTUPLE_COL, LongType(), False)])
    routed = df.mapInArrow(route_batches(payload), routed_schema)
    parallel = max(1, int(spark.sparkContext.defaultParallelism))
    tasks = max(1, min(layout.num_blocks, 4 * parallel))
    order = [BLOCK_COL] + ([spec.order_column] if spec.order_column else [])
    shuffled = routed.repartition(tasks, BLOCK_COL).sortWithinPartitions(*order)
    writer = write_blocks(spec)
    pause_path = os.environ.get(PAUSE_ENV_PREFIX + "WRITING")
    if pause_path:
        writer = _pause_after_first_file(writer, pause_path, float(os.environ.get("PANDO_TEST_PAUSE_TIMEOUT", "300")))
    with arrow_batch_rows(spark, batch_rows(df)):
        return shuffled.mapInArrow(writer, WRITTEN_FILE_DDL).collect()


def plan_block_files(layout, table_rows: int, min_block_rows: int) -> BlockFiles:
    """How each block is written (``workload/in_block.py``: files of about b rows), from the
    block's share of the sample scaled to the table's rows."""
    sample_rows = float(layout.block_rows.sum()) or 1.0
    return block_files(layout.block_rows * (table_rows / sample_rows), min_block_rows)


# ---- test hook --------------------------------------------------------------------------------
# For reliability tests only (tests/spark/test_reliability.py): park a rewrite at a stage so a
# test can race another writer against it or kill the process there. With the environment
# variable PANDO_TEST_PAUSE_<STAGE>=<path> set, the rewrite creates ``<path>.ready`` on reaching
# the stage and waits until ``<path>.go`` exists (at most PANDO_TEST_PAUSE_TIMEOUT seconds,
# default 300, then it fails and cleans up). Stages: SAMPLING (before the sample is collected),
# OPTIMIZING (before the trees are built), WRITING (in an executor task, after its first data
# file is complete; read on the driver, so set it before the rewrite starts), BEFORE_COMMIT
# (files and sidecar written, nothing committed). Unset (always, in production): no effect.

PAUSE_ENV_PREFIX = "PANDO_TEST_PAUSE_"


def test_pause(stage: str, path: str | None = None, timeout: float | None = None) -> None:
    path = path or os.environ.get(PAUSE_ENV_PREFIX + stage)
    if not path:
        return
    if timeout is None:
        timeout = float(os.environ.get("PANDO_TEST_PAUSE_TIMEOUT", "300"))
    with open(path + ".ready", "w") as f:
        f.write(f"{stage} {os.getpid()}\n")
    deadline = time.time() + timeout
    while not os.path.exists(path + ".go"):
        if time.time() > deadline:
            raise RuntimeError(f"test hook {PAUSE_ENV_PREFIX}{stage}: {path}.go did not appear within {timeout:g} s")
        time.sleep(0.05)


test_pause.__test__ = False  # not a pytest test


def _pause_after_first_file(writer, path: str, timeout: float):
    def run(batches):
        paused = False
        for out in writer(batches):
            yield out
            if not paused:
                paused = True
                test_pause("WRITING", path, timeout)

    return run
