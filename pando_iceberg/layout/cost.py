"""The I/O cost model of Pando (§5, §6.1, §6.2) — defined once, here.

cost(workload, layout) = Σ_q weight_q × (rows in the blocks that q scans)

and q scans a block iff EVERY tree returns it (§5): each tree is traversed from the root; at a
node with cut c the TRUE child is skipped when no row satisfying q's filter can be TRUE on c, the
NOT-TRUE child when none can be NOT-TRUE (NULL counts as NOT-TRUE: SQL three-valued logic);
the tree returns the union of the block sets of the leaves it reaches; the scan is the
intersection over trees.

The three phases use it in three shapes, all built from the functions below:
- top-down (§6.1): every sample row is its own block, so the scan is a Q × rows matrix
  (``topdown.py`` updates that matrix incrementally; its test checks it against ``io_cost``);
- bottom-up (§6.2): a block's cost depends only on its own k-tuples, so per block and per tree
  one bitset over queries "tree t returns this block for q" suffices (``block_costs``);
- a finished layout: ``traverse`` over a ``Forest`` — the one §5 traversal, for the planner
  (``Layout.blocks_for``: one query, explained by ``TreePlan.reached_leaves``/``decisions``) and
  for the cost model (``scan_matrix``, ``workload_cost``, ``Layout.scanned``); the phases above
  take their per-tree reachability from the same ``Forest.reach`` (``reach_matrix``).

One rule beyond the paper keeps planning and truncation exact: a filter whose sides on some cut
are (False, False) cannot be satisfied by any row (every row is TRUE or NOT-TRUE on every cut),
so it scans nothing. Such queries are "unsatisfiable" and reach no node at all.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .tree import NOT_TRUE_SIDE, TRUE_SIDE, Decision

__all__ = [
    "Forest",
    "SideMatrix",
    "Traversal",
    "TreePlan",
    "WeightedPopcount",
    "WeightedQuery",
    "block_costs",
    "io_cost",
    "lower_bound",
    "normalize_queries",
    "pack_query_bits",
    "reach_matrix",
    "scan_matrix",
    "scanned_cost",
    "side_matrix",
    "traverse",
    "workload_cost",
]


@dataclass(frozen=True)
class WeightedQuery:
    """One query of the workload as seen by one table: its filter and how often it runs."""

    filter: Any
    weight: float = 1.0


def normalize_queries(queries: Iterable[Any]) -> tuple[list[Any], np.ndarray]:
    """Accept filters, ``(filter, weight)`` pairs or objects with ``.filter``/``.weight``."""
    filters: list[Any] = []
    weights: list[float] = []
    for i, q in enumerate(queries):
        if isinstance(q, tuple) and len(q) == 2:
            f, w = q
        elif hasattr(q, "filter") and hasattr(q, "weight"):
            f, w = q.filter, q.weight
        else:
            f, w = q, 1.0
        w = float(w)
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"query #{i}: weight must be a finite number >= 0, got {w!r}")
        if not hasattr(f, "sides"):
            raise TypeError(f"query #{i}: a filter needs a .sides(cut) method, got {type(f).__name__}")
        filters.append(f)
        weights.append(w)
    return filters, np.asarray(weights, dtype=np.float64)


@dataclass
class SideMatrix:
    """For each query q and cut c: may a row satisfying q be TRUE on c / NOT-TRUE on c."""

    may_true: np.ndarray  # Q × C bool
    may_not_true: np.ndarray  # Q × C bool

    @property
    def num_queries(self) -> int:
        return self.may_true.shape[0]

    @property
    def unsatisfiable(self) -> np.ndarray:
        """Q bool: some cut has no possible side, so no row can satisfy the query."""
        if self.may_true.shape[1] == 0:
            return np.zeros(self.may_true.shape[0], dtype=bool)
        return (~(self.may_true | self.may_not_true)).any(axis=1)


def side_matrix(filters: Sequence[Any], cuts: Sequence[Any]) -> SideMatrix:
    """Ask every filter about every cut once (Q × C calls of ``filter.sides``)."""
    q, c = len(filters), len(cuts)
    may_true = np.ones((q, c), dtype=bool)
    may_not = np.ones((q, c), dtype=bool)
    for i, f in enumerate(filters):
        for j, cut in enumerate(cuts):
            t, n = f.sides(cut)
            may_true[i, j] = bool(t)
            may_not[i, j] = bool(n)
    return SideMatrix(may_true, may_not)


@dataclass
class TreePlan:
    """One tree (and optionally its leaf → block sets) as arrays, for ``Forest``."""

    num_nodes: int
    inner: np.ndarray  # reachable inner nodes, ascending
    inner_col: np.ndarray  # their cut's column in the side matrix (-1 without ``cut_column``)
    inner_key: list[str]  # their cut's key
    true_child: np.ndarray  # per inner node
    not_true_child: np.ndarray
    inner_depth: np.ndarray
    leaves: np.ndarray  # reachable leaves, ascending
    leaf_blocks: list[np.ndarray]  # per leaf of ``leaves``: the blocks it points to

    @staticmethod
    def of(tree: Any, cut_column: Mapping[str, int] | None = None,
           leaf_blocks: Mapping[int, np.ndarray] | None = None) -> TreePlan:
        inner = np.asarray(tree.inner_nodes(), dtype=np.int64)
        leaves = np.asarray(tree.leaves(), dtype=np.int64)
        keys = [tree.node_cut[n].key for n in inner.tolist()]
        cols = [cut_column[k] for k in keys] if cut_column is not None else [-1] * len(keys)
        lb = leaf_blocks or {}
        return TreePlan(
            int(tree.num_nodes), inner, np.asarray(cols, dtype=np.int64), keys,
            np.asarray(tree.true_child, dtype=np.int64)[inner], np.asarray(tree.not_true_child, dtype=np.int64)[inner],
            np.asarray(tree.depth, dtype=np.int64)[inner], leaves,
            [np.asarray(lb.get(leaf, ()), dtype=np.int64).reshape(-1) for leaf in leaves.tolist()],
        )

    def reached_leaves(self, reach: np.ndarray, q: int = 0) -> list[int]:
        """The leaves query q reaches (``reach``: this tree's Q × nodes), ascending."""
        return self.leaves[reach[q, self.leaves]].tolist()

    def decisions(self, reach: np.ndarray, sides: SideMatrix, q: int = 0) -> list[Decision]:
        """Where query q's traversal skipped a child (the explanation of §5): every reached inner
        node whose cut has a side q cannot take; ascending nodes, TRUE before NOT-TRUE."""
        reached = reach[q, self.inner]
        skip_true = reached & ~sides.may_true[q, self.inner_col]
        skip_not = reached & ~sides.may_not_true[q, self.inner_col]
        out: list[Decision] = []
        for i in np.flatnonzero(skip_true | skip_not).tolist():  # the decisions themselves, never rows
            n, key = int(self.inner[i]), self.inner_key[i]
            if skip_true[i]:
                out.append(Decision(n, key, TRUE_SIDE))
            if skip_not[i]:
                out.append(Decision(n, key, NOT_TRUE_SIDE))
        return out


class Forest:
    """The k trees of a layout (and their leaf → block sets) laid out for ``traverse``.

    All trees are walked together, one numpy step per tree LEVEL (node ids grow from parent to
    child, so parents are decided first), whatever the number of queries, trees or nodes. Built
    once per leaf → block map and reused for every query (``Layout.forest``)."""

    def __init__(self, plans: Sequence[TreePlan], num_blocks: int = 0):
        self.plans = list(plans)
        self.num_blocks = int(num_blocks)
        sizes = [p.num_nodes for p in self.plans]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.total_nodes = int(self.offsets[-1])
        # Edges parent → child, both children of every reachable inner node. The side row of an
        # edge is 2·column (TRUE) or 2·column + 1 (NOT-TRUE) of the interleaved side matrix.
        parent, side_row, child, depth = [], [], [], []
        for p, off in zip(self.plans, self.offsets[:-1].tolist()):
            for kids, side in ((p.true_child, 0), (p.not_true_child, 1)):
                parent.append(p.inner + off)
                side_row.append(2 * p.inner_col + side)
                child.append(kids + off)
                depth.append(p.inner_depth)
        self.levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        if parent and sum(len(x) for x in parent):
            parent_a, side_a, child_a, depth_a = (np.concatenate(x) for x in (parent, side_row, child, depth))
            order = np.argsort(depth_a, kind="stable")
            for i in np.split(order, np.flatnonzero(np.diff(depth_a[order])) + 1):
                self.levels.append((parent_a[i], side_a[i], child_a[i]))
        # (leaf, block) pairs of every tree, by tree-major block id t·B + b, for one reduceat.
        pl, pb = [], []
        for t, (p, off) in enumerate(zip(self.plans, self.offsets[:-1].tolist())):
            counts = [len(b) for b in p.leaf_blocks]
            if sum(counts):
                pl.append(np.repeat(p.leaves + off, counts))
                pb.append(np.concatenate(p.leaf_blocks) + t * self.num_blocks)
        self.pair_leaf = self.pair_start = self.pair_block = np.zeros(0, dtype=np.int64)
        if pl:
            leaf_a, block_a = np.concatenate(pl), np.concatenate(pb)
            by_block = np.argsort(block_a, kind="stable")
            self.pair_leaf = leaf_a[by_block]
            self.pair_block, self.pair_start = np.unique(block_a[by_block], return_index=True)

    @staticmethod
    def of(trees: Sequence[Any], leaf_blocks: Sequence[Mapping[int, np.ndarray]] | None,
           num_blocks: int, cut_column: Mapping[str, int] | None) -> Forest:
        lbs = leaf_blocks if leaf_blocks is not None else [None] * len(trees)
        return Forest([TreePlan.of(t, cut_column, lb) for t, lb in zip(trees, lbs)], num_blocks)

    def reach(self, sides: SideMatrix) -> np.ndarray:
        """nodes of all trees × Q bool: does query q reach the node (§5). Unsatisfiable queries
        reach nothing (module docstring)."""
        q = sides.num_queries
        cols = sides.may_true.shape[1]
        interleaved = np.stack([sides.may_true.T, sides.may_not_true.T], axis=1).reshape(2 * cols, q)  # 2C × Q
        reach = np.zeros((self.total_nodes, q), dtype=bool)
        reach[self.offsets[:-1]] = ~sides.unsatisfiable
        for parent, side_row, child in self.levels:  # tree levels, never rows or queries
            reach[child] = reach[parent] & interleaved[side_row]
        return reach

    def reached_sides(self, filter: Any, cuts: Sequence[Any]) -> SideMatrix:
        """One filter's 1 × C side matrix (``side_matrix``), asking ``filter.sides`` only about
        the cuts of nodes the filter reaches, level by level as ``reach`` walks: a cut met at no
        reached node cannot change what is reached and stays undecided (both sides possible).
        Planning one query asks a fraction of the questions for the same traversal; a filter
        that only a cut it never meets would find unsatisfiable scans what it reaches (a
        superset, never fewer rows)."""
        c = len(cuts)
        may = np.ones(2 * c, dtype=bool)  # interleaved as ``reach`` reads it: 2j TRUE, 2j + 1 NOT-TRUE
        asked = np.zeros(c, dtype=bool)
        reach = np.zeros(self.total_nodes, dtype=bool)
        reach[self.offsets[:-1]] = True
        for parent, side_row, child in self.levels:
            live = reach[parent]
            wanted = np.unique(side_row[live] // 2)
            for j in wanted[~asked[wanted]].tolist():  # the cuts met, each asked once
                t, n = filter.sides(cuts[j])
                may[2 * j], may[2 * j + 1], asked[j] = bool(t), bool(n), True
            reach[child] = live & may[side_row]
        return SideMatrix(may[0::2].reshape(1, c).copy(), may[1::2].reshape(1, c).copy())

    def returns(self, reach: np.ndarray) -> np.ndarray:
        """(k·B) × Q bool: tree t returns block b for query q (row t·B + b): the union of the
        block sets of the leaves it reaches."""
        out = np.zeros((len(self.plans) * self.num_blocks, reach.shape[1]), dtype=bool)
        if len(self.pair_leaf):
            out[self.pair_block] = np.logical_or.reduceat(reach[self.pair_leaf], self.pair_start, axis=0)
        return out


@dataclass
class Traversal:
    """The §5 traversal of Q queries over a finished layout (trees + leaf → block sets)."""

    reach: list[np.ndarray]  # per tree: Q × nodes, query q reaches node n
    returns: list[np.ndarray]  # per tree: Q × B, the tree returns block B for q
    scanned: np.ndarray  # Q × B, the intersection over trees (§5): q scans B


def traverse(forest: Forest, sides: SideMatrix) -> Traversal:
    """THE §5 traversal: every tree from the root (``Forest.reach``), the union of the reached
    leaves' blocks per tree (``Forest.returns``), the intersection over trees."""
    reach = forest.reach(sides)
    per_tree = [reach[a:b].T for a, b in zip(forest.offsets[:-1].tolist(), forest.offsets[1:].tolist())]
    k, nb = len(forest.plans), forest.num_blocks
    returns = forest.returns(reach).reshape(k, nb, sides.num_queries)
    scanned = np.ascontiguousarray(returns.all(axis=0).T)
    return Traversal(per_tree, [r.T for r in returns], scanned)


def reach_matrix(tree: Any, sides: SideMatrix, cut_column: Mapping[str, int]) -> np.ndarray:
    """Q × nodes bool: does query q reach node n of ``tree`` in the §5 traversal (``Forest.reach``
    of this one tree). Unsatisfiable queries reach nothing (module docstring)."""
    return Forest.of([tree], None, 0, cut_column).reach(sides).T


def io_cost(scanned: np.ndarray, block_rows: np.ndarray, weights: np.ndarray) -> float:
    """Σ_q weight_q × rows scanned by q."""
    per_query = scanned.astype(np.float64) @ np.asarray(block_rows, dtype=np.float64)
    return float(np.asarray(weights, dtype=np.float64) @ per_query)


def scan_matrix(
    trees: Sequence[Any],
    leaf_blocks: Sequence[Mapping[int, np.ndarray]],
    num_blocks: int,
    sides: SideMatrix,
    cut_column: Mapping[str, int],
) -> np.ndarray:
    """Q × B bool: query q scans block B on a finished layout (trees + leaf → block sets)."""
    return traverse(Forest.of(trees, leaf_blocks, num_blocks, cut_column), sides).scanned


def workload_cost(
    trees: Sequence[Any],
    leaf_blocks: Sequence[Mapping[int, np.ndarray]],
    block_rows: np.ndarray,
    sides: SideMatrix,
    cut_column: Mapping[str, int],
    weights: np.ndarray,
    *,
    per_query: bool = False,
) -> Any:
    """The cost of a workload on a finished layout (trees + leaf → block sets)."""
    scanned = scan_matrix(trees, leaf_blocks, len(block_rows), sides, cut_column)
    return scanned_cost(scanned, block_rows, weights, per_query=per_query)


def scanned_cost(scanned: np.ndarray, block_rows: np.ndarray, weights: np.ndarray, *, per_query: bool = False) -> Any:
    """The workload's cost from its Q × B scan matrix: ``io_cost``, or rows scanned per query."""
    if per_query:
        return scanned.astype(np.float64) @ np.asarray(block_rows, dtype=np.float64)
    return io_cost(scanned, block_rows, weights)


def lower_bound(matching_rows: Sequence[float], min_block_rows: int, weights: Sequence[float]) -> float:
    """qd-tree's selectivity bound, in blocks: Σ_q weight_q × ceil(matching rows / b).

    No layout with blocks of ≥ b rows can do better when blocks hold exactly b rows; use it to
    report how far a layout is from ideal (blocks scanned / lower bound).
    """
    m = np.asarray(matching_rows, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if min_block_rows <= 0:
        raise ValueError(f"min_block_rows must be > 0, got {min_block_rows}")
    return float(w @ np.ceil(m / float(min_block_rows)))


# --- the same model on query bitsets (bottom-up, §6.2) --------------------------------------


def pack_query_bits(mask: np.ndarray) -> np.ndarray:
    """N × Q bool → N × W uint64 (bit q of the row = mask[:, q]; W = ceil(Q / 64))."""
    n, q = mask.shape
    w = max(1, (q + 63) // 64)
    padded = np.zeros((n, w * 64), dtype=bool)
    padded[:, :q] = mask
    return np.packbits(padded, axis=1, bitorder="little").view(np.uint64).reshape(n, w)


class WeightedPopcount:
    """Σ of the weights of the queries whose bits are set, vectorized over many bitsets.

    Workloads usually have few distinct weights (often all 1), so the fast path is one
    ``np.bitwise_count`` per distinct weight; otherwise a per-byte lookup table.
    """

    MAX_GROUPS = 16

    def __init__(self, weights: np.ndarray):
        weights = np.asarray(weights, dtype=np.float64)
        self.num_queries = len(weights)
        self.words = max(1, (len(weights) + 63) // 64)
        distinct = np.unique(weights[weights != 0])
        self._groups: list[tuple[float, np.ndarray, slice]] | None = None
        self._table: np.ndarray | None = None
        # One weight for every query: its group's mask keeps every bit a bitset can have set.
        self._one_weight = len(distinct) == 1 and bool((weights != 0).all())
        if len(distinct) <= self.MAX_GROUPS:
            # Each group's mask with the span of words it has bits in: the words outside count
            # nothing (queries of one weight, e.g. one template's draws, are often adjacent).
            self._groups = []
            for v in distinct:
                mask = pack_query_bits((weights == v)[None, :])[0]
                used = np.flatnonzero(mask)
                span = slice(int(used[0]), int(used[-1]) + 1)
                self._groups.append((float(v), mask[span], span))
        else:
            nbytes = self.words * 8
            padded = np.zeros(nbytes * 8)
            padded[: len(weights)] = weights
            bits = ((np.arange(256)[:, None] >> np.arange(8)[None, :]) & 1).astype(np.float64)
            # table[j, v] = weight sum of the set bits of value v in byte j
            self._table = (padded.reshape(nbytes, 8) @ bits.T).astype(np.float64)
            self._offsets = (np.arange(nbytes) * 256).astype(np.intp)

    def __call__(self, bits: np.ndarray) -> np.ndarray:
        """bits: (..., W) uint64 → (...) float64."""
        if self._groups is not None:
            out = np.zeros(bits.shape[:-1], dtype=np.float64)
            for value, mask, span in self._groups:
                out += value * np.bitwise_count(bits[..., span] & mask).sum(axis=-1, dtype=np.int64)
            return out
        assert self._table is not None
        b = np.ascontiguousarray(bits).view(np.uint8).reshape(bits.shape[:-1] + (self.words * 8,))
        return self._table.ravel()[b.astype(np.intp) + self._offsets].sum(axis=-1)

    def leading(self, bits: np.ndarray) -> np.ndarray:
        """The same sums of word-major bitsets: bits (W, ...) uint64 → (...) float64, equal to
        ``self(np.moveaxis(bits, 0, -1))`` to the last bit. Each word is then one contiguous row
        over many bitsets, which numpy reduces much faster than W words at the end of each.
        The bits past the last query must be 0 (as ``pack_query_bits`` leaves them)."""
        if self._groups is None:
            return self(np.moveaxis(bits, 0, -1))
        out = np.zeros(bits.shape[1:], dtype=np.float64)
        for value, mask, span in self._groups:
            if self._one_weight:
                count = np.bitwise_count(bits).sum(axis=0, dtype=np.int64)
            else:
                word_mask = mask.reshape(mask.shape + (1,) * (bits.ndim - 1))
                count = np.bitwise_count(bits[span] & word_mask).sum(axis=0, dtype=np.int64)
            out += value * count
        return out


def block_costs(returned_bits: np.ndarray, block_rows: np.ndarray, weigh: WeightedPopcount) -> np.ndarray:
    """Per block: rows × Σ weights of the queries that scan it.

    returned_bits: k × N × W — tree t returns block N for the queries whose bits are set.
    The scan is the AND over trees (§5); the workload cost is the sum of this vector.
    """
    scanned = returned_bits[0].copy()
    for t in range(1, returned_bits.shape[0]):
        scanned &= returned_bits[t]
    return np.asarray(block_rows, dtype=np.float64) * weigh(scanned)
