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

Learning is here (``learn_layout``); from the routed rows on, the rewrite is the one pipeline
all Pando rewrites share (``pipeline.run_rewrite``), this module handing it the whole table
(``whole_table_rewrite``). What else it shares with the incremental one (``incremental.py``) and
the per-partition ones (``partitioned.py``, which ``rewrite_table`` hands a partitioned table to)
is in ``rewrite_common.py``: options, results, learning from the workload, clean-up after a
failure.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa

from ..progress import spark_job_progress
from ..workload.in_block import (
    GUARD_MERGES,
    GUARD_REFINES,
    GUARD_WEIGHTS,
    BlockFiles,
    InBlockOrder,
    TemplateGuard,
    between_multipliers,
    block_files,
    choose_in_block_order,
    guard_multipliers,
    merged_layout,
    order_cuts,
    order_trees,
    select_layout,
    zone_columns,
)
from ..workload.templates import template_key
from . import iceberg_jvm as jv
from .blocks import ROW_COL, LayoutPayload, route_batches
from .partitioned import rewrite_partitions
from .phases import peak_rss_mib
from .pipeline import Rewrite, block_file_refs, finalize_layout, routed_rows, run_rewrite, test_pause, write_tasks
from .rewrite_common import (
    P_OPTIONS,
    P_TEMPLATE_GUARD,
    PandoRewriteError,
    RewriteOptions,
    RewriteResult,
    SparkKeyProvider,
    TemplateGuardError,
    arrow_schema_of,
    batch_rows,
    candidate_ks,
    collect_arrow,
    file_bounds,
    identifier_fields,
    learning_workload,
    namespace_schemas,
    reads_now,
    row_count,
    sample_fraction,
    sample_rate,
    seeded_sample,
    static_table,
    table_workload,
    template_bound,
)

# PandoRewriteError, TemplateGuardError, RewriteOptions, RewriteResult, SparkKeyProvider, arrow_schema_of,
# collect_arrow, identifier_fields and namespace_schemas are defined in rewrite_common.py and re-exported: their
# users import them from here.
__all__ = [
    "P_IN_BLOCK", "P_K_SELECTION", "P_TEMPLATE_GUARD", "LearnedLayout", "PandoRewriteError", "RewriteOptions",
    "RewriteResult", "SparkKeyProvider", "TemplateGuardError", "arrow_schema_of", "collect_arrow", "identifier_fields",
    "learn_layout", "namespace_schemas", "rewrite_table",
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
    # parts of seconds_optimizing: 'draws+cuts' (template draws, candidate and literal cuts), 'trees'
    # (top-down and bottom-up of every candidate layout, with its in-block order), 'k-selection'
    # (the validation draws on each candidate, the guard's planning)
    seconds_parts: dict[str, float] = field(default_factory=dict)
    # peak resident memory (MiB) per phase, 'sampling' and 'optimizing' (phases.peak_rss_mib)
    peak_rss_mib: dict[str, dict[str, float]] = field(default_factory=dict)
    queries: list[Any] = field(default_factory=list)  # (TableFilter, weight) for this table
    workload_sql: list[tuple[str, float]] = field(default_factory=list)  # (statement, weight)
    templates: list[dict] = field(default_factory=list)  # templates.Template.to_json() of each template
    in_block: Any = None  # workload.in_block.InBlockOrder (None: files in routing order)
    k_selection: dict | None = None  # workload.in_block.LayoutChoice.to_json (None: k fixed)
    guard: TemplateGuard | None = None  # each template's reads now and with the layout (None: guard off)
    validation: list[Any] = field(default_factory=list)  # (TableFilter, weight): the draws the guard measured
    options: dict[str, str] = field(default_factory=dict)  # RewriteOptions.to_map of the learning
    sample: Any = None  # the sample (pyarrow) it was learned on (the advisor measures other layouts on it)

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
        if self.guard is not None:
            props[P_TEMPLATE_GUARD] = json.dumps(self.guard.to_json())
        if self.options:
            props[P_OPTIONS] = json.dumps(self.options)
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
                 snapshot_id: int | None = None, progress: Callable[[str], None] = lambda m: None,
                 io_properties: dict[str, str] | None = None) -> LearnedLayout:
    """Sample the table, learn k trees and the block assignment from the workload (§6), and the
    in-block order of its files (``workload/in_block.py``). Under 'validate' (§6.3's k, measured)
    the layouts of 1..k trees are candidates; under the per-template guard
    (``max-template-regression``) only those whose every template reads at most the bound × what
    it reads on the table now; when none does, more candidates, cheapest first (docs/LAYOUT.md):
    the order the table already has (``in_block.order_cuts``) as one more tree before the
    unconstrained choice's trees, blocks merged (§6.2) with the breaking templates' draws weighing
    ``guard_multipliers`` more until one holds (``GUARD_MERGES`` at most, nothing learned again); then k trees
    learned again so weighed; then the most constrained (one tree, ``GUARD_WEIGHTS[-1]``).
    ``LearnedLayout.guard`` says whether the kept layout holds the guard: ``rewrite_table`` refuses
    one that does not, unless forced."""
    from ..layout import Evaluations, build_layout

    t0 = time.time()
    peak_rss_mib(spark)  # the peaks from here on
    df = jv.read_snapshot(spark, table_name, snapshot_id)
    wl, target, queries, schemas = table_workload(spark, table_name, workload)
    jtable = jv.load_table(spark, table_name)
    bound = template_bound(options, jtable)

    total_rows = row_count(spark, table_name, snapshot_id)
    if total_rows == 0:
        raise PandoRewriteError(f"table {table_name} is empty: nothing to lay out")
    fraction = sample_fraction(options, total_rows)
    with spark_job_progress(spark, progress, f"sampling {table_name} ({fraction:.2%} of {total_rows:,} rows)"):
        test_pause("SAMPLING")
        sample = seeded_sample(df, fraction, options.seed)
    t1 = time.time()
    if sample.num_rows == 0:
        sample = collect_arrow(df.limit(options.min_sample_rows))
    memory = {"sampling": peak_rss_mib(spark)}
    ks = candidate_ks(options)
    expected, cuts = learning_workload(spark, wl, target, schemas, queries, sample, options,
                                       sample_rate(options, total_rows), validate=len(ks) > 1 or bound is not None,
                                       fraction=sample.num_rows / total_rows)
    parts = {"draws+cuts": time.time() - t1, "trees": 0.0}
    scale = sample.num_rows / total_rows
    b_sample = max(1.0, options.min_block_rows * scale)
    learned = []
    evaluations = Evaluations(sample)  # cut masks and sides, shared by every candidate layout
    test_pause("OPTIMIZING")

    def learn(k: int, with_cuts: list, workload: list) -> None:
        started = time.time()
        progress(f"optimizing k={k} trees on {sample.num_rows:,} sample rows, {len(with_cuts)} candidate cuts, "
                 f"{len(queries)} queries + {len(expected.queries) - len(queries)} synthetic draws of their templates")
        layout = build_layout(sample, with_cuts, workload, k, b_sample, max_ktuples=options.max_ktuples,
                              progress=progress, evaluations=evaluations)
        learned.append((layout, in_block_order(layout, sample, workload, b_sample, options, evaluations)))
        parts["trees"] += time.time() - started

    for k in ks:
        learn(k, cuts, expected.queries)
    labels: list[Any] = list(ks)
    guard: dict[str, Any] = {}
    static = None
    if bound is not None:
        static = static_table(jtable, io_properties)
        progress(f"planning {len(expected.validation)} validation draws on the table as it is now")
        now, now_bytes = reads_now(static, snapshot_id, expected.validation)
        guard = {"now": now, "now_bytes": now_bytes, "bound": bound,
                 "file_fraction": min(1.0, options.min_block_rows / total_rows)}

    measured: list = []  # files_read of each candidate, measured once

    def choose():
        return select_layout([(lay, getattr(o, "column", None)) for lay, o in learned], sample,
                             expected.validation, b_sample, measured=measured, evaluations=evaluations,
                             fraction=scale if guard else 1.0, **guard)

    choice = choose() if len(learned) > 1 or guard else None
    if choice is not None and choice.guard is not None and not choice.guard.holds:
        # The guard as a constraint (docs/LAYOUT.md, "Do no harm"): more candidates, cheapest
        # construction first (GUARD_MERGES merges, then at most two layouts learned again), each
        # measured as it comes (select_layout keeps the best that holds the guard).
        zones = [c for c, _ in zone_columns(expected.validation, sample)]
        extra = order_cuts(file_bounds(static, snapshot_id, zones), sample.schema)
        first_guard = choice.guard
        breaking: set[str] = {t.template for t in first_guard.breaking()}

        def add(label: str, build: Callable[[], Any], workload: list) -> bool:
            """One more candidate (with its in-block order); whether it holds the guard."""
            nonlocal choice
            started = time.time()
            progress(f"no layout keeps every template within {bound:g}× of what it reads now: {label}")
            layout = build()
            learned.append((layout, in_block_order(layout, sample, workload, b_sample, options, evaluations)))
            parts["trees"] += time.time() - started
            labels.append(label)
            choice = choose()
            return choice.holds[-1]

        def weighed(multipliers: dict[str, float]) -> list:
            return [(f, w * multipliers.get(template_key(f), 1.0)) for f, w in expected.queries]

        held, last = False, first_guard
        multipliers: dict[str, float] = {}
        if extra:
            # 1. The order the table has as one more tree before the unconstrained choice's k (no
            #    learning again); §6.2's blocks of their k-tuples with the constraint priced in
            #    (guard_multipliers: the breaking templates' draws weigh more by how far the last
            #    candidate was over), a few times.
            started = time.time()
            guarded = [(f, w) for f, w in expected.queries if template_key(f) in breaking]
            free = learned[choice.index][0]
            trees = order_trees(sample, extra, guarded, free.trees, b_sample, evaluations=evaluations,
                                max_ktuples=options.max_ktuples)
            parts["trees"] += time.time() - started

            def merge(multipliers: dict[str, float]) -> bool:
                w = ", ".join(f"{m:.1f}" for m in multipliers.values())
                return add(f"{len(trees)} (the table's order and k={free.k}'s trees), merged"
                           + (f" with {len(multipliers)} template(s) weighing {w}×" if multipliers else ""),
                           partial(merged_layout, trees, sample, weighed(multipliers), b_sample,
                                   evaluations=evaluations), weighed(multipliers))

            broke: dict[str, float] | None = None  # the last multipliers whose merge broke the guard
            for i in range(GUARD_MERGES):
                if i:
                    broke, multipliers = multipliers, guard_multipliers(last, multipliers)
                held = merge(multipliers)
                last = choice.guards[-1]
                if held or all(multipliers.get(t.template) == GUARD_WEIGHTS[-1] for t in last.breaking()):
                    break
            if held and broke is not None:
                # The constraint priced no higher than it needs (Lagrange multipliers bisected
                # between the last merge that broke the guard and the first that held it): the
                # smaller the price, the less total reads give up; select_layout keeps the
                # cheapest candidate that holds.
                holding = multipliers
                for _ in range(GUARD_REFINES):
                    mid = between_multipliers(broke, holding)
                    if merge(mid):
                        holding = mid
                    else:
                        broke = mid
        if not held:
            # 2. Trees learned again with the constraint priced in (the order cuts among the cuts).
            multipliers = guard_multipliers(last, multipliers)
            w = ", ".join(f"{m:.1f}" for m in multipliers.values())
            held = add(f"{options.k} with the table's order, {len(multipliers)} template(s) weighing {w}×",
                       partial(build_layout, sample, cuts + extra, weighed(multipliers), options.k, b_sample,
                               max_ktuples=options.max_ktuples, evaluations=evaluations), weighed(multipliers))
        if not held and not any(choice.holds):
            # 3. The most constrained (one tree, cuts along the table's order, the breaking templates
            #    weighing the most): when even it breaks the guard, the rewrite is refused.
            top = {t: float(GUARD_WEIGHTS[-1]) for t in breaking | set(multipliers)}
            add(f"1 with the table's order, {len(top)} template(s) weighing {GUARD_WEIGHTS[-1]}×",
                lambda: build_layout(sample, cuts + extra, weighed(top), 1, b_sample,
                                     max_ktuples=options.max_ktuples, evaluations=evaluations), weighed(top))
    k_selection = None
    if choice is not None:
        k_selection = choice.to_json(labels)
        read = ", ".join(f"{c:.3f} (k={k})" for k, c in zip(labels, choice.costs, strict=False))
        progress(f"kept k={labels[choice.index]} trees: validation draws read {read} of the sample's rows")
        layout, in_block = learned[choice.index]
    else:
        layout, in_block = learned[0]
    literal_keys = {c.key: c.keys_to_bytes() for c in layout.cuts if hasattr(c, "keys_to_bytes")}
    optimizing = time.time() - t1
    parts["k-selection"] = optimizing - parts["draws+cuts"] - parts["trees"]
    memory["optimizing"] = peak_rss_mib(spark)
    return LearnedLayout(layout, literal_keys, total_rows, sample.num_rows, len(queries), len(cuts),
                         list(wl.unsupported), t1 - t0, optimizing, parts, memory, queries,
                         [(q.sql, q.weight) for q in wl.queries if target in q.filters],
                         expected.describe(), in_block, k_selection, None if choice is None else choice.guard,
                         list(expected.validation), options.to_map(), sample=sample)


def in_block_order(layout, sample: pa.Table, queries: list, b_sample: float, options: RewriteOptions,
                   evaluations=None):
    """The in-block order option resolved: 'auto' → measured (``workload/in_block.py``, with the
    ``layout.Evaluations`` of ``sample`` when given), 'none' → None, else the named column
    (checked against the table)."""
    choice = options.in_block_order
    if choice == "none":
        return None
    if choice == "auto":
        order = choose_in_block_order(layout, sample, queries, b_sample, evaluations=evaluations)
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
                  learned: LearnedLayout | None = None, where: str | None = None,
                  force: bool = False) -> RewriteResult:
    """Learn a layout for the table's current snapshot (or use ``learned``) and apply it in one
    ``replace`` commit (``pipeline.run_rewrite``). A partitioned table gets one layout per
    partition (``partitioned.py``; ``where`` selects the partitions). A layout that breaks the
    per-template guard (``LearnedLayout.guard``) stops the rewrite before anything is written
    (``TemplateGuardError``), unless ``force``."""
    options = options or RewriteOptions()
    options.validate()
    seconds: dict[str, float] = {}
    table = jv.load_table(spark, table_name)
    if table.spec().isPartitioned() or where is not None:
        if learned is not None:
            raise PandoRewriteError(f"table {table_name} is partitioned: its layouts are learned per partition, a "
                                    "pending whole-table layout cannot be applied (pass relearn => true)")
        return rewrite_partitions(spark, table_name, workload, options, where, io_properties, progress, force)
    current = table.currentSnapshot()
    if current is None:
        raise PandoRewriteError(f"table {table_name} has no snapshot (no data): nothing to lay out")
    base_id = int(current.snapshotId())

    base_rows = None
    if learned is None:
        learned = learn_layout(spark, table_name, workload, options, base_id, progress, io_properties)
        base_rows = learned.table_rows  # counted on base_id while learning: no second count
    if learned.guard is not None and not learned.guard.holds:
        if not force:
            raise TemplateGuardError(learned.guard.refusal(table_name))
        progress(f"force: applying a layout that breaks the guard for {len(learned.guard.breaking())} template(s)")
    seconds["sampling"] = learned.seconds_sampling
    seconds["optimizing"] = learned.seconds_optimizing
    seconds.update({f"optimizing.{part}": s for part, s in learned.seconds_parts.items()})
    memory = dict(learned.peak_rss_mib)
    if base_rows is None:
        base_rows = row_count(spark, table_name, base_id)
    layout = learned.layout
    old_files = list(jv.live_data_files(table, base_id).values())
    rewrite = whole_table_rewrite(spark, table_name, table, current, learned, base_rows, old_files, options)
    committed = run_rewrite(spark, table_name, table, base_id, rewrite, io_properties, seconds, progress, memory)
    return RewriteResult(len(old_files), len(committed.written), sum(int(f.fileSizeInBytes()) for f in old_files), 0,
                         committed.layout_id, layout.num_blocks, committed.snapshot_id, base_id, seconds,
                         guard=learned.guard, peak_rss_mib=memory)


def whole_table_rewrite(spark, table_name: str, table, base, learned: LearnedLayout, base_rows: int,
                        old_files: list, options: RewriteOptions) -> Rewrite:
    """The whole table at snapshot ``base`` (Java) routed with the learned layout, each block written as files
    of about b rows along the in-block order; one sidecar, the learning recorded in it."""
    from pyspark.sql import functions as F

    from ..storage.sidecar import LayoutSidecar

    layout = learned.layout
    base_id, sequence_number = int(base.snapshotId()), int(base.sequenceNumber())
    payload = LayoutPayload(layout.to_bytes(), learned.literal_keys)
    df = jv.read_snapshot(spark, table_name, base_id)
    if learned.in_block_column:  # files keep the table's row order inside (blocks.write_blocks)
        df = df.withColumn(ROW_COL, F.monotonically_increasing_id())

    def layout_sidecar(layout_id: str, written: list) -> LayoutSidecar:
        finalize_layout(layout, written)
        return LayoutSidecar.from_layout(
            layout, layout_id=layout_id, table_uuid=str(table.uuid()), block_files=block_file_refs(written),
            base_snapshot_id=base_id, base_sequence_number=sequence_number, properties=learned.properties())

    return Rewrite(routed=routed_rows(df, route_batches(payload)), tasks=write_tasks(spark, layout.num_blocks),
                   batch_rows=batch_rows(df), writing=f"routing + writing {layout.num_blocks} blocks (Spark tasks)",
                   expected_rows=base_rows, expected_rows_were="the base snapshot has {rows} live rows",
                   layout_sidecar=layout_sidecar, replaced=old_files, pointer_base_snapshot_id=base_id,
                   target_file_size_bytes=options.target_file_size_bytes, order_column=learned.in_block_column,
                   block_files=plan_block_files(layout, base_rows, options.min_block_rows))


def plan_block_files(layout, table_rows: int, min_block_rows: int) -> BlockFiles:
    """How each block is written (``workload/in_block.py``: files of about b rows), from the
    block's share of the sample scaled to the table's rows."""
    sample_rows = float(layout.block_rows.sum()) or 1.0
    return block_files(layout.block_rows * (table_rows / sample_rows), min_block_rows)
