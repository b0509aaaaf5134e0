"""Layout: k trees + the k-tuple → block map + the leaf → block sets used for planning.

Two views of the trees are kept (§6.2, §7):
- the non-truncated trees and the k-tuple → block map route rows to blocks (rewrite, inserts);
- the truncated trees and their leaf → block sets plan scans (§5).

Soundness of planning. A leaf points to block B iff some row routed to B reached that leaf.
The sample alone cannot promise that for the full table (rows with k-tuples never seen in the
sample exist), so after routing the full table the caller aggregates the distinct
(block, k-tuple) pairs it actually produced (``observed_ktuples`` per batch,
``ObservedKTuples.combine`` across batches) and calls ``finalize``: every leaf's block set is
recomputed from those pairs, then the trees are truncated again.

Unseen k-tuples (§7 leaves this open; our rule). A row whose k-tuple is not in the map goes to
the block where it adds the least I/O cost for the workload the layout was learned from (the
cost.py model, the same Δ as a §6.2 merge, taken for a k-tuple of vanishing size): least
rows(B) × Σ{w_q : q starts scanning B}; ties → fewest Σ{w_q : q scans B afterwards}; ties →
the block of the nearest known k-tuple: fewest trees whose leaf differs, then the largest
total depth of the common root path of the differing-or-not leaves (Σ_t depth(LCA)); ties →
the smallest block id. A layout without its workload (``workload_sides`` None, e.g. format
version 1) uses the nearest-k-tuple rule alone. The result is computed once per distinct
unseen k-tuple and cached; it depends only on the layout, so every batch routes alike.
Why the cost (measured, TPC-H SF 0.1, k = 4): a third of the table's rows have k-tuples the
1% sample never saw; the nearest-k-tuple rule sent them where they made leaves point to
blocks many queries then read (held-out queries read 0.695 of the rows, 0.567 by cost).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .bottomup import BlockAssignment, route_ktuples
from .cost import (
    Forest,
    SideMatrix,
    WeightedPopcount,
    normalize_queries,
    pack_query_bits,
    reach_matrix,
    scanned_cost,
    side_matrix,
    traverse,
)
from .ktuple import KTupleIndex, distinct_ktuples, radices_of
from .serialize import FORMAT_VERSION, layout_from_bytes, layout_to_bytes
from .tree import Decision, PartitionTree, cut_table

__all__ = ["Layout", "ObservedKTuples", "ScanExplanation", "TreeScan"]


@dataclass
class ObservedKTuples:
    """Distinct (block, k-tuple) pairs produced by routing, with their row counts."""

    blocks: np.ndarray  # P int32
    ktuples: np.ndarray  # P × k int32
    rows: np.ndarray  # P int64

    @staticmethod
    def combine(parts: Iterable[ObservedKTuples]) -> ObservedKTuples:
        parts = list(parts)
        if not parts:
            raise ValueError("ObservedKTuples.combine needs at least one part")
        k = parts[0].ktuples.shape[1]
        blocks = np.concatenate([p.blocks for p in parts]).astype(np.int64)
        kts = np.concatenate([p.ktuples for p in parts]).astype(np.int64)
        rows = np.concatenate([p.rows for p in parts]).astype(np.int64)
        if len(blocks) == 0:
            return ObservedKTuples(np.zeros(0, np.int32), np.zeros((0, k), np.int32), np.zeros(0, np.int64))
        key = np.concatenate([blocks[:, None], kts], axis=1)
        u, inv = np.unique(key, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        return ObservedKTuples(
            u[:, 0].astype(np.int32), u[:, 1:].astype(np.int32),
            np.bincount(inv, weights=rows, minlength=len(u)).astype(np.int64)
        )

    def pairs(self) -> set[tuple[int, tuple[int, ...]]]:
        return {(int(b), tuple(int(x) for x in kt)) for b, kt in zip(self.blocks, self.ktuples)}


@dataclass
class TreeScan:
    """What one tree said about a filter (§5)."""

    tree: int
    leaves: list[int]
    blocks: np.ndarray
    decisions: list[Decision]

    def to_text(self) -> str:
        why = ", ".join(
            f"node {d.node} [{d.cut_key}] skips {d.skipped}" for d in self.decisions
        ) or "no cut decided (all leaves reached)"
        return f"tree {self.tree}: leaves {self.leaves} → {len(self.blocks)} blocks; {why}"


@dataclass
class ScanExplanation:
    trees: list[TreeScan]
    blocks: np.ndarray
    total_blocks: int
    unsatisfiable_by: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_text(self) -> str:
        head = f"{len(self.blocks)} of {self.total_blocks} blocks"
        if self.unsatisfiable_by is not None:
            return (f"{head}: the filter cannot be satisfied "
                    f"(no row can be TRUE or NOT-TRUE on cut {self.unsatisfiable_by})")
        return "\n".join([head + " (intersection over trees)"] + [t.to_text() for t in self.trees] + self.notes)

    __str__ = to_text


class Layout:
    def __init__(
        self,
        trees: Sequence[PartitionTree],
        ktuples: np.ndarray,
        ktuple_block: np.ndarray,
        block_rows: np.ndarray,
        *,
        ktuple_observed: np.ndarray | None = None,
        finalized: bool = False,
        cuts: Sequence[Any] | None = None,
        workload_sides: SideMatrix | None = None,
        workload_weights: np.ndarray | None = None,
    ):
        """``workload_sides`` (queries × ``self.cuts``) and ``workload_weights``: the workload
        the layout was learned from, for routing unseen k-tuples (module docstring)."""
        self.trees = list(trees)
        # The serialized form's version it was read from (layout/serialize.py); a new layout is current.
        self.format_version = FORMAT_VERSION
        self.k = len(self.trees)
        if self.k < 1:
            raise ValueError("a layout needs at least one tree")
        if cuts is None:
            self.cuts, self.cut_index = cut_table(self.trees)
        else:
            self.cuts = list(cuts)
            self.cut_index = {c.key: i for i, c in enumerate(self.cuts)}
        self.ktuples = np.asarray(ktuples, dtype=np.int32).reshape(-1, self.k)
        self.ktuple_block = np.asarray(ktuple_block, dtype=np.int32)
        self.block_rows = np.asarray(block_rows, dtype=np.int64)
        self.ktuple_observed = (
            np.ones(len(self.ktuples), dtype=bool) if ktuple_observed is None
            else np.asarray(ktuple_observed, dtype=bool)
        )
        self.finalized = finalized
        self.workload_sides, self.workload_weights = _check_workload(workload_sides, workload_weights, len(self.cuts))
        self._check_map()
        self._index = {tuple(int(x) for x in kt): i for i, kt in enumerate(self.ktuples)}
        self._unseen: dict[tuple[int, ...], int] = {}
        self._anc: list[np.ndarray] | None = None
        self._lca: dict[tuple[int, int], np.ndarray] = {}
        self._ktuple_index: KTupleIndex | None = None
        self._route_bits: tuple[list[np.ndarray], np.ndarray, np.ndarray, WeightedPopcount] | None = None
        self._plan_from_map()

    # --- construction ----------------------------------------------------------------------

    @classmethod
    def from_assignment(cls, assignment: BlockAssignment) -> Layout:
        """The layout of the sample (not finalized: leaf maps come from the sample only)."""
        return cls(assignment.trees, assignment.ktuples, assignment.ktuple_block, assignment.block_rows,
                   workload_sides=assignment.sides, workload_weights=assignment.weights)

    @property
    def num_blocks(self) -> int:
        return len(self.block_rows)

    def _check_map(self) -> None:
        if len(self.ktuple_block) != len(self.ktuples) or len(self.ktuple_observed) != len(self.ktuples):
            raise ValueError("k-tuple map arrays have different lengths")
        if len(self.ktuple_block) and (self.ktuple_block.min() < 0 or self.ktuple_block.max() >= self.num_blocks):
            raise ValueError(f"k-tuple map points outside the {self.num_blocks} blocks")
        for t, tree in enumerate(self.trees):
            col = self.ktuples[:, t]
            if len(col) and (col.min() < 0 or col.max() >= tree.num_nodes):
                raise ValueError(f"tree {t}: k-tuple leaf id outside its {tree.num_nodes} nodes")
            if len(col) and any(not tree.is_leaf(int(x)) for x in np.unique(col)):
                raise ValueError(f"tree {t}: a k-tuple names an inner node, not a leaf")

    def _plan_from_map(self) -> None:
        """Leaf → block sets from the observed (block, k-tuple) pairs, then truncation (§6.2)."""
        obs = self.ktuple_observed
        self._forests: dict[bool, Forest] = {}
        self.full_leaf_blocks: list[dict[int, np.ndarray]] = []
        self.truncated: list[PartitionTree] = []
        self.leaf_blocks: list[dict[int, np.ndarray]] = []
        for t, tree in enumerate(self.trees):
            lb = _group(self.ktuples[obs, t], self.ktuple_block[obs])
            self.full_leaf_blocks.append(lb)
            tt, tlb = tree.truncate(lb)
            self.truncated.append(tt)
            self.leaf_blocks.append(tlb)

    # --- routing (§7) ----------------------------------------------------------------------

    def route_ktuples(self, table: Any, masks: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """n × k leaf node ids in the non-truncated trees. ``masks``: the cuts' TRUE rows on
        ``table`` by key, when already evaluated (``Evaluations.mask_map``)."""
        if masks is None:
            masks = {c.key: np.asarray(c.evaluate(table), dtype=bool) for c in self.cuts}
        return route_ktuples(self.trees, table, dict(masks))

    def _blocks_of(self, kt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Distinct k-tuples of kt, their block, and the inverse index (vectorized)."""
        uniq, inv = distinct_ktuples(kt, radices_of(self.trees))
        blocks = np.full(len(uniq), -1, dtype=np.int32)
        if len(uniq) and len(self.ktuples):
            hit, pos = self._lookup(uniq)
            blocks[hit] = self.ktuple_block[pos[hit]]
        unseen = np.flatnonzero(blocks < 0)
        if len(unseen):
            blocks[unseen] = self._cheapest_many(uniq[unseen])
        return uniq, blocks, inv

    def _lookup(self, kts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each row of kts: is it a known k-tuple, and its index in ``self.ktuples``."""
        if self._ktuple_index is None or self._ktuple_index.known is not self.ktuples:
            self._ktuple_index = KTupleIndex(self.ktuples, radices_of(self.trees))
        return self._ktuple_index.lookup(kts)

    def route(self, table: Any, masks: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """Block id per row (int32), vectorized; unseen k-tuples by the nearest-k-tuple rule.
        ``masks``: as ``route_ktuples`` takes them."""
        if table.num_rows == 0:
            return np.zeros(0, dtype=np.int32)
        _, blocks, inv = self._blocks_of(self.route_ktuples(table, masks))
        return blocks[inv]

    def observed_ktuples(self, table: Any) -> ObservedKTuples:
        """Distinct (block, k-tuple) pairs of this batch with row counts (for ``finalize``)."""
        if table.num_rows == 0:
            return ObservedKTuples(np.zeros(0, np.int32), np.zeros((0, self.k), np.int32), np.zeros(0, np.int64))
        uniq, blocks, inv = self._blocks_of(self.route_ktuples(table))
        return ObservedKTuples(blocks, uniq, np.bincount(inv, minlength=len(uniq)).astype(np.int64))

    def route_observed(self, table: Any) -> tuple[np.ndarray, ObservedKTuples]:
        """``route`` and ``observed_ktuples`` of one batch with a single pass over its cuts."""
        if table.num_rows == 0:
            return np.zeros(0, dtype=np.int32), self.observed_ktuples(table)
        uniq, blocks, inv = self._blocks_of(self.route_ktuples(table))
        obs = ObservedKTuples(blocks, uniq, np.bincount(inv, minlength=len(uniq)).astype(np.int64))
        return blocks[inv], obs

    def _ancestors(self) -> list[np.ndarray]:
        if self._anc is None:
            self._anc = []
            for tree in self.trees:
                dmax = max(tree.depth)
                anc = np.full((tree.num_nodes, dmax + 1), -1, dtype=np.int32)
                for n in range(tree.num_nodes):
                    for d, a in enumerate(tree.path(n)):
                        anc[n, d] = a
                self._anc.append(anc)
        return self._anc

    def _lca_depths(self, t: int, node: int) -> np.ndarray:
        """Depth of the lowest common ancestor of ``node`` and every node of tree t (cached)."""
        key = (t, node)
        got = self._lca.get(key)
        if got is None:
            anc = self._ancestors()[t]
            a_u = anc[node]
            same = (anc == a_u[None, :]) & (a_u[None, :] >= 0)
            got = self._lca[key] = (np.cumprod(same, axis=1).sum(axis=1) - 1).astype(np.int32)
        return got

    def _workload_bits(self) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, WeightedPopcount]:
        """Per tree: node × query-word bits "q reaches the node"; per tree and block the OR over
        the block's observed k-tuples (k × B × W); per block Σ w of the queries scanning it."""
        if self._route_bits is None:
            sides, weights = self.workload_sides, self.workload_weights
            assert sides is not None and weights is not None  # only _cheapest_many calls this, with a workload
            weigh = WeightedPopcount(weights)
            node_bits = [pack_query_bits(reach_matrix(t, sides, self.cut_index).T) for t in self.trees]
            words = node_bits[0].shape[1]
            obs = self.ktuple_observed
            block_bits = np.zeros((self.k, self.num_blocks, words), dtype=np.uint64)
            for t in range(self.k):
                np.bitwise_or.at(block_bits[t], self.ktuple_block[obs], node_bits[t][self.ktuples[obs, t]])
            scan = block_bits[0].copy()
            for t in range(1, self.k):
                scan &= block_bits[t]
            self._route_bits = (node_bits, block_bits, weigh(scan), weigh)
        return self._route_bits

    def _cheapest_many(self, kts: np.ndarray) -> np.ndarray:
        """Block of each unseen k-tuple by the least-added-cost rule (module docstring)."""
        if self.workload_sides is None:
            return self._nearest_many(kts)
        if len(self.ktuples) == 0:
            raise ValueError("the layout has no k-tuple map: cannot route rows")
        words = self._workload_bits()[1].shape[2]
        return self._memoized(kts, self._cheapest_chunk, 4_000_000 // max(1, self.num_blocks * words * self.k))

    def _memoized(self, kts: np.ndarray, choose, chunk_size: int) -> np.ndarray:
        """Blocks of unseen k-tuples: the ones already decided from the memo, the others by
        ``choose`` (k-tuples → blocks) in chunks of ``chunk_size``, then memoized. Loops once per
        distinct unseen k-tuple, never per row."""
        if len(self.ktuples) == 0:
            raise ValueError("the layout has no k-tuple map: cannot route rows")
        out = np.empty(len(kts), dtype=np.int32)
        keys = [tuple(int(x) for x in row) for row in kts]
        todo = np.asarray([i for i, key in enumerate(keys) if key not in self._unseen], dtype=np.int64)
        chunk = max(1, chunk_size)
        for s in range(0, len(todo), chunk):
            ids = todo[s : s + chunk]
            for i, b in zip(ids, choose(kts[ids])):
                self._unseen[keys[i]] = int(b)
        for i, key in enumerate(keys):
            out[i] = self._unseen[key]
        return out

    def _cheapest_chunk(self, kts: np.ndarray) -> np.ndarray:
        """The least-added-cost block of each k-tuple of one chunk (module docstring)."""
        node_bits, block_bits, scan_w, weigh = self._workload_bits()
        rows = self.block_rows.astype(np.float64)
        u = kts.astype(np.int64)
        acc = block_bits[0][None, :, :] | node_bits[0][u[:, 0]][:, None, :]
        for t in range(1, self.k):
            acc &= block_bits[t][None, :, :] | node_bits[t][u[:, t]][:, None, :]
        after = weigh(acc)  # U × B: Σ w of the queries scanning B with the k-tuple in it
        added = rows[None, :] * (after - scan_w[None, :])
        best = added == added.min(axis=1, keepdims=True)
        after = np.where(best, after, np.inf)
        best &= after == after.min(axis=1, keepdims=True)
        choice = np.argmax(best, axis=1).astype(np.int32)  # smallest tied block id
        tied = np.flatnonzero(best.sum(axis=1) > 1)
        if len(tied):
            choice[tied] = self._nearest_among(u[tied], best[tied])
        return choice

    def _nearest_among(self, kts: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        """The nearest-k-tuple rule restricted to the blocks ``allowed`` (U × B bool) per row."""
        out = np.empty(len(kts), dtype=np.int32)
        chunk = max(1, 8_000_000 // max(1, len(self.ktuples)))
        for s in range(0, len(kts), chunk):
            score = self._nearest_scores(kts[s : s + chunk])  # U × K
            score = np.where(allowed[s : s + chunk][:, self.ktuple_block], score, np.iinfo(np.int64).max)
            out[s : s + chunk] = self.ktuple_block[np.argmin(score, axis=1)]
        return out

    def _nearest_scores(self, u: np.ndarray) -> np.ndarray:
        """U × K: (differing trees, −Σ_t depth(LCA), block id) of every known k-tuple, packed
        into one int64 whose order is the rule's order."""
        known = self.ktuples
        nk = len(known)
        max_depth = sum(int(max(t.depth)) for t in self.trees) + 1
        nblocks = max(1, self.num_blocks)
        differ = np.zeros((len(u), nk), dtype=np.int64)
        shared = np.zeros((len(u), nk), dtype=np.int64)
        for t in range(self.k):
            differ += u[:, t][:, None] != known[:, t][None, :]
            lca = np.stack([self._lca_depths(t, int(x)) for x in u[:, t]])  # U × nodes
            shared += np.take_along_axis(lca, np.broadcast_to(known[:, t][None, :], (len(u), nk)), axis=1)
        return (differ * (max_depth + 1) + (max_depth - shared)) * nblocks + self.ktuple_block[None, :]

    def _nearest(self, key: tuple[int, ...]) -> int:
        """Block of the nearest known k-tuple (module docstring); cached per k-tuple."""
        return int(self._nearest_many(np.asarray([key], dtype=np.int32))[0])

    def _nearest_many(self, kts: np.ndarray) -> np.ndarray:
        """``_nearest`` for many unseen k-tuples at once: one U × K score matrix per chunk.

        score = differing trees, then −Σ_t depth(LCA), then block id, packed into one int64
        so that argmin picks exactly the module docstring's rule."""
        return self._memoized(kts, lambda u: self.ktuple_block[np.argmin(self._nearest_scores(u), axis=1)],
                              8_000_000 // max(1, len(self.ktuples)))

    def finalize(self, observed: ObservedKTuples | Iterable[tuple[int, Sequence[int]]]) -> Layout:
        """Replace the sample's leaf → block sets by those of the full routed data (§7).

        ``observed``: what routing the FULL table produced (``observed_ktuples`` combined over
        all batches), or an iterable of (block, k-tuple) pairs. New k-tuples join the map with
        the block they were routed to, so later routing agrees; block row counts become the
        observed ones when counts are given. Returns self.
        """
        if not isinstance(observed, ObservedKTuples):
            pairs = list(observed)
            observed = ObservedKTuples(
                np.array([p[0] for p in pairs], dtype=np.int32),
                np.array([list(p[1]) for p in pairs], dtype=np.int32).reshape(-1, self.k),
                np.zeros(len(pairs), dtype=np.int64),
            )
            counts_known = False
        else:
            counts_known = True
        kts = np.asarray(observed.ktuples, dtype=np.int32).reshape(-1, self.k)
        blocks = np.asarray(observed.blocks, dtype=np.int32)
        if len(blocks) and (blocks.min() < 0 or blocks.max() >= self.num_blocks):
            raise ValueError(f"observed pairs name blocks outside 0..{self.num_blocks - 1}")
        observed_flag = np.zeros(len(self.ktuples), dtype=bool)
        new_kt: list[np.ndarray] = []
        new_block: dict[tuple[int, ...], int] = {}
        for b, row in zip(blocks, kts):
            key = tuple(int(x) for x in row)
            j = self._index.get(key)
            mapped = int(self.ktuple_block[j]) if j is not None else new_block.get(key)
            if mapped is not None and mapped != int(b):
                raise ValueError(
                    f"k-tuple {key} was routed to block {int(b)} but the layout maps it to block "
                    f"{mapped}: the pairs come from a different layout"
                )
            if j is not None:
                observed_flag[j] = True
            elif key not in new_block:
                new_block[key] = int(b)
                new_kt.append(row)
        if new_kt:
            self.ktuples = np.concatenate([self.ktuples, np.asarray(new_kt, dtype=np.int32)])
            extra = np.asarray([new_block[tuple(int(x) for x in r)] for r in new_kt], dtype=np.int32)
            self.ktuple_block = np.concatenate([self.ktuple_block, extra])
            observed_flag = np.concatenate([observed_flag, np.ones(len(new_kt), dtype=bool)])
        self.ktuple_observed = observed_flag
        self._check_map()
        self._index = {tuple(int(x) for x in kt): i for i, kt in enumerate(self.ktuples)}
        if counts_known:
            self.block_rows = np.bincount(blocks, weights=observed.rows, minlength=self.num_blocks).astype(np.int64)
        self.finalized = True
        self._unseen.clear()
        self._route_bits = None
        self._plan_from_map()
        return self

    # --- planning (§5) ---------------------------------------------------------------------

    def blocks_for(self, filter: Any, *, truncated: bool = True) -> tuple[np.ndarray, ScanExplanation]:
        """Block ids a filter must scan: cost.py's §5 traversal (``traverse``) for this one
        filter, explained per tree (leaves reached, blocks returned, sides skipped)."""
        forest = self.forest(truncated)
        sides = forest.reached_sides(filter, self.cuts)  # ``filter.sides`` for the cuts it meets
        if sides.unsatisfiable[0]:
            first = int(np.flatnonzero(~(sides.may_true[0] | sides.may_not_true[0]))[0])
            empty = np.zeros(0, dtype=np.int32)
            return empty, ScanExplanation([], empty, self.num_blocks, unsatisfiable_by=self.cuts[first].key)
        walk = traverse(forest, sides)
        scans = [
            TreeScan(t, plan.reached_leaves(walk.reach[t]), np.flatnonzero(walk.returns[t][0]).astype(np.int32),
                     plan.decisions(walk.reach[t], sides))
            for t, plan in enumerate(forest.plans)
        ]
        blocks = np.flatnonzero(walk.scanned[0]).astype(np.int32)
        notes = [] if self.finalized else ["layout not finalized: leaf → block sets come from the sample only"]
        return blocks, ScanExplanation(scans, blocks, self.num_blocks, notes=notes)

    def forest(self, truncated: bool = True) -> Forest:
        """The planning trees as cost.py's ``Forest`` (built once per leaf → block map): the
        truncated trees (§6.2) or the full ones, with their leaf → block sets."""
        got = self._forests.get(truncated)
        if got is None:
            trees, lb = (self.truncated, self.leaf_blocks) if truncated else (self.trees, self.full_leaf_blocks)
            got = self._forests[truncated] = Forest.of(trees, lb, self.num_blocks, self.cut_index)
        return got

    def scanned(self, queries: Iterable[Any], *, truncated: bool = True, sides: SideMatrix | None = None) -> np.ndarray:
        """Q × B bool: the blocks each query scans (cost.py's §5 traversal). ``sides``: the
        queries' side matrix over ``self.cuts`` when already known (``Evaluations.sides``)."""
        filters, _ = normalize_queries(queries)
        if sides is None:
            sides = side_matrix(filters, self.cuts)
        return traverse(self.forest(truncated), sides).scanned

    def cost(self, queries: Iterable[Any], *, truncated: bool = True, per_query: bool = False) -> Any:
        """The workload's I/O cost on this layout (cost.py), in rows of ``block_rows``."""
        filters, weights = normalize_queries(queries)
        scanned = traverse(self.forest(truncated), side_matrix(filters, self.cuts)).scanned
        return scanned_cost(scanned, self.block_rows, weights, per_query=per_query)

    # --- serialization (see serialize.py) --------------------------------------------------

    def to_bytes(self) -> bytes:
        return layout_to_bytes(self)

    @classmethod
    def from_bytes(
        cls,
        data: bytes,
        cut_from_json: Callable[[dict, Any], Any] | None = None,
        literal_keys: Any = None,
    ) -> Layout:
        return layout_from_bytes(data, cls, cut_from_json=cut_from_json, literal_keys=literal_keys)


def _check_workload(
    sides: SideMatrix | None, weights: np.ndarray | None, num_cuts: int
) -> tuple[SideMatrix | None, np.ndarray | None]:
    if sides is None and weights is None:
        return None, None
    if sides is None or weights is None:
        raise ValueError("workload_sides and workload_weights go together: give both or neither")
    weights = np.asarray(weights, dtype=np.float64).reshape(-1)
    mt, mn = np.asarray(sides.may_true, dtype=bool), np.asarray(sides.may_not_true, dtype=bool)
    if mt.shape != (len(weights), num_cuts) or mn.shape != mt.shape:
        raise ValueError(f"workload side matrix is {mt.shape}/{mn.shape}, expected ({len(weights)} queries, "
                         f"{num_cuts} cuts)")
    if not np.isfinite(weights).all() or (weights < 0).any():
        raise ValueError("workload weights must be finite numbers >= 0")
    return SideMatrix(mt, mn), weights


def _group(leaves: np.ndarray, blocks: np.ndarray) -> dict[int, np.ndarray]:
    """leaf → sorted distinct blocks, from parallel arrays."""
    if len(leaves) == 0:
        return {}
    pairs = np.unique(np.stack([leaves.astype(np.int64), blocks.astype(np.int64)], axis=1), axis=0)
    ids, starts = np.unique(pairs[:, 0], return_index=True)
    ends = np.append(starts[1:], len(pairs))
    return {int(leaf): pairs[s:e, 1].astype(np.int32) for leaf, s, e in zip(ids, starts, ends)}

