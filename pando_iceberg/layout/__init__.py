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

import numpy as np

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
from .topdown import build_trees, evaluate_cuts, one_blas_thread
from .tree import Decision, KTuple, PartitionTree, cut_table

#: k-tuples per block of the sample in the k trees' shared leaf budget (``leaf_budget``)
LEAF_BUDGET_PER_BLOCK = 4

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
    "leaf_budget",
    "lower_bound",
    "merge_blocks",
    "normalize_queries",
    "route_ktuples",
    "side_matrix",
    "top_down_threshold",
    "workload_cost",
]


def top_down_threshold(min_block_rows: float, k: int) -> int:
    """The §6.1 threshold (minimum sample rows per leaf): b for one tree, b/2 for k ≥ 2.

    One tree's leaves are its blocks (MTO), so they keep b rows. For k ≥ 2 the paper lowers the
    threshold so that the bottom-up phase (§6.2) sees a bounded number of k-tuples (§8.2); here
    the bound is the trees' shared leaf budget (``leaf_budget``), and the threshold is b/2. Without
    that budget a threshold below b hurt (measured: TPC-H SF 1, b = 100,000, 1% sample, held-out
    queries read 0.580 of lineitem with k = 2 at b/2 vs 0.534 at 2b: leaves smaller than a block
    multiplied k-tuples that greedy merging glued back together); within it, each tree's leaves
    halve the others' k-tuples, and b/2 lets the first tree go one level deeper (validation draws
    on the sample, k = 3 with 3 k-tuples per block: star with keys in load order 0.316 of the
    sample's rows at b → 0.295 at b/2, TPC-H SF 0.1 0.353 → 0.350). See benchmarks/README.md."""
    return max(1, int(min_block_rows) // (1 if k <= 1 else 2))


def leaf_budget(sample_rows: int, min_block_rows: float, k: int) -> int | None:
    """The k-tuples the k trees may make together in §6.1: ``LEAF_BUDGET_PER_BLOCK`` per block
    the sample holds (sample rows / b); None for one tree (its leaves are its blocks).

    Why one budget for all k trees (beyond the paper, which bounds only the total k-tuples at
    10,000): the bottom-up phase merges k-tuples into about sample rows / b blocks, and a block
    made of k-tuples from different corners of the trees is scanned by every query that reaches
    any of them. When each tree grows to leaves of b rows on its own, the k-way product has
    thousands of k-tuples for a few dozen blocks and the merge keeps one tree's cuts: on a star
    with four independent dimensions and keys in load order (30 blocks), k = 1, 2, 3 kept 22
    blocks each and validation draws read 0.358, 0.431, 0.416 of the sample. Within the budget
    the trees stop where the blocks can still follow them.

    ``build_layout`` orders the splits within the budget two ways and keeps the blocks that cost
    the training workload less on the sample. Charged by the k-tuples it adds, a split of a second
    tree that halves every leaf of the first competes fairly with one more level of the first:
    k = 3 then reads 0.294 on that star (4 k-tuples per block; 2: 0.311, 3: 0.295, 6: 0.301; by
    benefit alone 0.329), 0.347 on TPC-H SF 0.1 (unbudgeted 0.353) and 0.295 on the star with
    keys ordered by their attributes (unbudgeted 0.485). But the charge also favours cuts that
    repeat another tree's (they add few k-tuples): on the paper's Fig. 2 it puts y cuts in the
    x tree and reads 0.57 of the table where the paper's greedy, by benefit, reads 0.40."""
    if k <= 1:
        return None
    return max(2, int(np.ceil(LEAF_BUDGET_PER_BLOCK * sample_rows / max(1.0, float(min_block_rows)))))


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
    threshold defaults to ``top_down_threshold``, and the k trees share ``leaf_budget``'s
    k-tuples (§6.1, then §6.2 merges them into blocks). Not finalized.
    ``progress``: a ``pando_iceberg.progress`` reporter (counted steps for splits and merges).
    ``evaluations``: the cut masks and side answers on ``sample`` shared by the layouts learned
    on it (``Evaluations``); the layout is the same with or without."""
    queries = list(queries)
    cuts = list(cuts)
    if min_leaf_rows is None:
        min_leaf_rows = top_down_threshold(min_block_rows, k)
    if evaluations is None:
        evaluations = Evaluations(sample)
    elif evaluations.sample is not sample:
        raise ValueError("build_layout: the evaluations were made on another sample")
    filters, _ = normalize_queries(queries)
    budget = leaf_budget(sample.num_rows, min_block_rows, k)
    # Under the leaf budget the splits are ordered two ways (``leaf_budget``): the blocks of the
    # one that costs the workload less on the sample are kept.
    best: BlockAssignment | None = None
    with one_blas_thread():  # the trees' and the merge's products (``one_blas_thread``)
        best = _best_assignment(sample, cuts, queries, filters, k, min_block_rows, min_leaf_rows, max_ktuples,
                                progress, evaluations, budget)
    assert best is not None
    return Layout.from_assignment(best)


def _best_assignment(sample, cuts, queries, filters, k, min_block_rows, min_leaf_rows, max_ktuples, progress,
                     evaluations, budget) -> BlockAssignment | None:
    best: BlockAssignment | None = None
    for per_ktuple in (True, False) if budget is not None else (False,):
        trees = build_trees(sample, cuts, queries, k, min_leaf_rows, max_ktuples, progress=progress,
                            masks=evaluations.masks(cuts), sides=evaluations.sides(filters, cuts),
                            leaf_budget=budget, per_ktuple=per_ktuple)
        used, _ = cut_table(trees)
        assignment = assign_blocks(trees, sample, queries, min_block_rows, progress=progress,
                                   sides=evaluations.sides(filters, used), masks=evaluations.mask_map(used))
        if best is None or assignment.cost < best.cost:
            best = assignment
    return best
