"""Pando's layout engine (VLDB 2023, §4–§7): pure Python + numpy, no Spark, no Iceberg.

    trees  = build_trees(sample, cuts, queries, k, min_leaf_rows)   # §6.1 top-down
    assign = assign_blocks(trees, sample, queries, b_on_sample)      # §6.2 bottom-up
    layout = Layout.from_assignment(assign)                          # + truncation
    obs    = ObservedKTuples.combine(layout.observed_ktuples(batch) for batch in table)
    layout.finalize(obs)                                             # leaf maps from full data
    block  = layout.route(batch)                                     # §7, per row
    ids, why = layout.blocks_for(filter)                             # §5 planning
    blob   = layout.to_bytes();  Layout.from_bytes(blob, cut_from_json=...)

Cuts and filters are duck-typed (see ``pando_iceberg.expr``): a cut has ``.key``,
``.evaluate(table) -> bool array`` (TRUE only; NULL/FALSE → False) and ``.to_json()``; a filter
has ``.sides(cut) -> (may_true, may_not_true)``.
"""

from collections.abc import Iterable, Sequence
from typing import Any

from .bottomup import BlockAssignment, assign_blocks, merge_blocks, route_ktuples
from .cost import (
    SideMatrix,
    WeightedQuery,
    io_cost,
    lower_bound,
    normalize_queries,
    side_matrix,
    workload_cost,
)
from .evaluations import Evaluations
from .layout import Layout, ObservedKTuples, ScanExplanation, TreeScan
from .serialize import FORMAT_VERSION, SUPPORTED_VERSIONS, LayoutFormatError
from .topdown import build_trees, evaluate_cuts
from .tree import Decision, KTuple, PartitionTree, cut_table

Block = int  #: a block id: blocks are numbered 0..B-1; a block is written as files of about b rows

__all__ = [
    "FORMAT_VERSION",
    "SUPPORTED_VERSIONS",
    "Block",
    "BlockAssignment",
    "Decision",
    "Evaluations",
    "KTuple",
    "Layout",
    "LayoutFormatError",
    "ObservedKTuples",
    "PartitionTree",
    "ScanExplanation",
    "SideMatrix",
    "TreeScan",
    "WeightedQuery",
    "assign_blocks",
    "build_layout",
    "build_trees",
    "cut_table",
    "evaluate_cuts",
    "io_cost",
    "lower_bound",
    "merge_blocks",
    "normalize_queries",
    "route_ktuples",
    "side_matrix",
    "top_down_threshold",
    "workload_cost",
]


def top_down_threshold(min_block_rows: float, k: int) -> int:
    """The §6.1 threshold (minimum sample rows per leaf): b for every k.

    The paper uses b for k = 1 (= MTO) and, for k ≥ 2, a threshold small enough that the
    bottom-up phase sees under 10,000 k-tuples (§8.2); ``max_ktuples`` enforces that budget.
    We do not go below b for k ≥ 2 (deviation, measured): on TPC-H SF 1 with b = 100,000 and a
    1% sample, held-out queries read 0.580 of lineitem's rows with k = 2 at b/2 vs 0.534 at
    2b, and the bottom-up phase loses most of a finer top-down's estimated gain (k = 3 at b/2
    on SF 0.1: top-down 0.394 vs bottom-up 0.471 on the training half). Leaves smaller than a
    block mostly add k-tuples that greedy merging must glue back together, trained on a
    few dozen queries. See benchmarks/README.md."""
    del k
    return max(1, int(min_block_rows))


def build_layout(
    sample: Any,
    cuts: Sequence[Any],
    queries: Iterable[Any],
    k: int,
    min_block_rows: float,
    min_leaf_rows: int | None = None,
    max_ktuples: int | None = 10_000,
    progress: Any = None,
    evaluations: Evaluations | None = None,
) -> Layout:
    """Both phases on a sample. ``min_block_rows`` is b scaled to the sample; the top-down
    threshold defaults to ``top_down_threshold`` (b, for every k). Not finalized.
    ``progress``: a ``pando_iceberg.progress`` reporter (counted steps for splits and merges).
    ``evaluations``: the cut masks and side answers on ``sample`` shared by the layouts learned
    on it (``Evaluations``); the layout is the same with or without."""
    queries = list(queries)
    cuts = list(cuts)
    if min_leaf_rows is None:
        min_leaf_rows = top_down_threshold(min_block_rows, k)
    if evaluations is None:
        trees = build_trees(sample, cuts, queries, k, min_leaf_rows, max_ktuples, progress=progress)
        return Layout.from_assignment(assign_blocks(trees, sample, queries, min_block_rows, progress=progress))
    if evaluations.sample is not sample:
        raise ValueError("build_layout: the evaluations were made on another sample")
    filters, _ = normalize_queries(queries)
    trees = build_trees(sample, cuts, queries, k, min_leaf_rows, max_ktuples, progress=progress,
                        masks=evaluations.masks(cuts), sides=evaluations.sides(filters, cuts))
    used, _ = cut_table(trees)
    masks = evaluations.mask_map(used)
    return Layout.from_assignment(assign_blocks(trees, sample, queries, min_block_rows, progress=progress,
                                                sides=evaluations.sides(filters, used), masks=masks))
