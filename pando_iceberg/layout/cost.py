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
- the simulator and the tests: ``workload_cost`` over a finished layout.

One rule beyond the paper keeps planning and truncation exact: a filter whose sides on some cut
are (False, False) cannot be satisfied by any row (every row is TRUE or NOT-TRUE on every cut),
so it scans nothing. Such queries are "unsatisfiable" and reach no node at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

__all__ = [
    "WeightedQuery",
    "SideMatrix",
    "normalize_queries",
    "side_matrix",
    "reach_matrix",
    "returns_matrix",
    "scanned_blocks",
    "scan_matrix",
    "io_cost",
    "workload_cost",
    "lower_bound",
    "pack_query_bits",
    "WeightedPopcount",
    "block_costs",
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


def reach_matrix(tree: Any, sides: SideMatrix, cut_column: Mapping[str, int]) -> np.ndarray:
    """Q × nodes bool: does query q reach node n of ``tree`` in the §5 traversal.

    Node ids grow from parent to child (see ``PartitionTree``), so one pass in id order
    propagates reachability. Unsatisfiable queries reach nothing (module docstring).
    """
    reach = np.zeros((sides.num_queries, tree.num_nodes), dtype=bool)
    reach[:, 0] = ~sides.unsatisfiable
    for node in range(tree.num_nodes):
        cut = tree.node_cut[node]
        if cut is None:
            continue
        c = cut_column[cut.key]
        reach[:, tree.true_child[node]] = reach[:, node] & sides.may_true[:, c]
        reach[:, tree.not_true_child[node]] = reach[:, node] & sides.may_not_true[:, c]
    return reach


def returns_matrix(
    tree: Any, reach: np.ndarray, leaf_blocks: Mapping[int, np.ndarray], num_blocks: int
) -> np.ndarray:
    """Q × B bool: tree returns block B for query q (union over the reached leaves, §5)."""
    out = np.zeros((reach.shape[0], num_blocks), dtype=bool)
    for leaf in tree.leaves():
        blocks = leaf_blocks.get(leaf)
        if blocks is None or len(blocks) == 0:
            continue
        hit = reach[:, leaf]
        if hit.any():
            out[np.ix_(hit, np.asarray(blocks, dtype=np.int64))] = True
    return out


def scanned_blocks(returns: Sequence[np.ndarray]) -> np.ndarray:
    """Q × B bool: the intersection over trees (§5: blocks are disjoint, so intersect)."""
    out = returns[0].copy()
    for r in returns[1:]:
        out &= r
    return out


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
    return scanned_blocks([
        returns_matrix(t, reach_matrix(t, sides, cut_column), lb, num_blocks)
        for t, lb in zip(trees, leaf_blocks)
    ])


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
        self._groups: list[tuple[float, np.ndarray]] | None = None
        self._table: np.ndarray | None = None
        if len(distinct) <= self.MAX_GROUPS:
            self._groups = [
                (float(v), pack_query_bits((weights == v)[None, :])[0]) for v in distinct
            ]
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
            for value, mask in self._groups:
                out += value * np.bitwise_count(bits & mask).sum(axis=-1, dtype=np.int64)
            return out
        assert self._table is not None
        b = np.ascontiguousarray(bits).view(np.uint8).reshape(bits.shape[:-1] + (self.words * 8,))
        return self._table.ravel()[b.astype(np.intp) + self._offsets].sum(axis=-1)


def block_costs(returned_bits: np.ndarray, block_rows: np.ndarray, weigh: WeightedPopcount) -> np.ndarray:
    """Per block: rows × Σ weights of the queries that scan it.

    returned_bits: k × N × W — tree t returns block N for the queries whose bits are set.
    The scan is the AND over trees (§5); the workload cost is the sum of this vector.
    """
    scanned = returned_bits[0].copy()
    for t in range(1, returned_bits.shape[0]):
        scanned &= returned_bits[t]
    return np.asarray(block_rows, dtype=np.float64) * weigh(scanned)
