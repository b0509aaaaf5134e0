"""Bottom-up block assignment (§6.2).

1. Route the sample rows down every tree → a k-tuple per row.
2. All rows with the same k-tuple form one block (the trees cannot tell them apart).
3–5. Repeatedly merge the pair of blocks whose merge adds the least I/O cost, until every block
   has ≥ b rows. Then truncate the trees (collapse cuts whose children point to the same blocks).

Cost of a merge. A block's cost (cost.py) is rows(B) × Σ{w_q : q scans B}, and q scans B iff
every tree t returns B for q, i.e. iff for every t one of B's k-tuples has a leaf that q reaches
in t. So per block we keep, per tree, a bitset over queries R_t(B) = OR over its k-tuples, and
merging B_i, B_j gives R_t = R_t(i) | R_t(j), scan = AND_t R_t. The workload cost is the sum
of independent per-block terms, so the added cost of a merge is exact and local:
    Δ(i, j) = cost(i ∪ j) − cost(i) − cost(j)  (≥ 0).

Scaling (the paper: quadratic in the number of k-tuples). Only blocks below b need a partner.
For a small block i we compute Δ(i, ·) against all blocks at once (numpy over packed uint64
bitsets) and keep its m best partners in a candidate list plus a floor: every block not in the
list has Δ ≥ floor. A heap holds each small block's best candidate, invalidated lazily by
version counters. A newly merged block M is compared to every block once (Δ is symmetric) and
offered to the lists it beats, so a list's head is always the true best partner; only a list
that runs empty is recomputed. No all-pairs recomputation per round.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .cost import (
    SideMatrix,
    WeightedPopcount,
    block_costs,
    normalize_queries,
    pack_query_bits,
    reach_matrix,
    side_matrix,
)
from .ktuple import distinct_ktuples, radices_of
from .tree import PartitionTree, cut_table

__all__ = ["BlockAssignment", "assign_blocks", "merge_blocks", "route_ktuples"]


def route_ktuples(trees: Sequence[PartitionTree], table: Any, masks: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """n × k int32: the leaf node id of every row in every tree (§6.2 step 1)."""
    n = table.num_rows
    if masks is None:
        cuts, _ = cut_table(trees)
        masks = {c.key: np.asarray(c.evaluate(table), dtype=bool) for c in cuts}
    out = np.empty((n, len(trees)), dtype=np.int32)
    for t, tree in enumerate(trees):
        out[:, t] = tree.route(masks, n)
    return out


@dataclass
class BlockAssignment:
    """Result of §6.2 on the sample."""

    trees: list[PartitionTree]  # non-truncated: route inserts (§7)
    ktuples: np.ndarray  # K × k int32 leaf node ids, distinct
    ktuple_block: np.ndarray  # K int32 block id per k-tuple
    ktuple_rows: np.ndarray  # K int64 sample rows per k-tuple
    block_rows: np.ndarray  # B int64 sample rows per block
    row_block: np.ndarray  # n int32 block of every sample row
    cost: float  # the workload's cost on the sample (cost.py model), after merging
    merges: int = 0
    stats: dict = field(default_factory=dict)
    sides: SideMatrix | None = None  # the workload's side matrix over cut_table(trees)'s cut order
    weights: np.ndarray | None = None  # the workload's query weights (Q)


class _TreeProximity:
    """How close two blocks are in the trees: Σ_t depth of the lowest common ancestor of the
    blocks' covering nodes in tree t (a block's covering node in t is the LCA of the leaves
    of its k-tuples). Rows of the LCA-depth matrix are computed lazily per node."""

    def __init__(self, trees: Sequence[PartitionTree]):
        self.anc: list[np.ndarray] = []
        for tree in trees:
            anc = np.full((tree.num_nodes, max(tree.depth) + 1), -1, dtype=np.int32)
            for n in range(tree.num_nodes):
                p = tree.parent[n]
                if p >= 0:
                    anc[n] = anc[p]
                anc[n, tree.depth[n]] = n
            self.anc.append(anc)
        self._rows: dict[tuple[int, int], np.ndarray] = {}

    def depth_row(self, t: int, node: int) -> np.ndarray:
        got = self._rows.get((t, node))
        if got is None:
            anc = self.anc[t]
            a = anc[node]
            same = (anc == a[None, :]) & (a[None, :] >= 0)
            got = self._rows[(t, node)] = np.cumprod(same, axis=1).sum(axis=1).astype(np.int64) - 1
        return got

    def lca(self, t: int, u: int, v: int) -> int:
        return int(self.anc[t][u, self.depth_row(t, u)[v]])


class _Merger:
    """Greedy least-added-cost merging of blocks until each has ≥ b rows (§6.2 steps 3-5).

    Merge order: least Δ first (the paper); among equal Δ, the pair closest in the trees
    (largest Σ_t LCA depth, see ``_TreeProximity``), then the smaller merged block, then ids.
    Why the proximity tie-break (not in the paper): on a workload of a few dozen queries many
    pairs of small k-tuples have exactly the same Δ (often 0: no training query tells them
    apart), and an id-order tie-break then merges k-tuples from unrelated corners of the
    trees. Queries of the same templates with other parameters (the held-out half of §8.2)
    do tell them apart; merging within the smallest common subtree keeps blocks aligned with
    the cuts, as the trees intend. It never changes the cost of a merge the greedy takes.

    State. A block is known by an id (a k-tuple's; a merge keeps the smaller one). The live
    blocks also sit in columns 0..live-1 of dense arrays (a merge moves the last column into
    the one it frees), their bitsets word-major (k × W × columns): Δ of one block against every
    live block is then a few numpy operations over contiguous rows, with no gather of the live
    blocks, whatever order the columns are in (every choice below is by value, then by id)."""

    def __init__(self, bits: np.ndarray, rows: np.ndarray, weigh: WeightedPopcount, b: float, candidates: int = 8,
                 cover: np.ndarray | None = None, proximity: _TreeProximity | None = None):
        n = len(rows)
        self.n = n
        self.bits = np.transpose(bits, (0, 2, 1)).copy()  # k × W × column: R_t of the block there (own copy)
        self.rows = rows.astype(np.int64).copy()  # by id
        self.weigh = weigh
        self.b = b
        self.m = candidates
        self.proximity = proximity
        # cover[t, c]: the covering node in tree t of the block in column c
        self.cover = None if cover is None or proximity is None else np.asarray(cover, dtype=np.int64).copy()
        self.alive = np.ones(n, dtype=bool)
        self.version = np.zeros(n, dtype=np.int64)
        self.live = n  # columns in use
        self.ids = np.arange(n)  # column → id
        self.col = np.arange(n)  # id → column (-1 once merged away)
        self.crows = self.rows.copy()  # by column, as the cost and cover below
        self.ccost = self._cost_of(np.arange(n))
        self.members: list[list[int]] = [[i] for i in range(n)]
        # cand[i]: i's best partners as sorted (Δ, -shared, rows_j, j, version_j) — the heap's tie order.
        # floor_key[i]: every block not in cand[i] sorts at or after it; floor[i] is its Δ.
        self.cand: list[list[tuple[float, int, int, int, int]] | None] = [None] * n
        self.floor = np.full(n, np.inf)
        self.floor_key: list[tuple[float, int, int, int]] = [(np.inf, 0, 0, 0)] * n
        self.heap: list[tuple[float, int, int, int, int, int, int]] = []
        # _deltas' k × W × rows × live words, reused: rows of Δ are computed 1 (a merge) to a few
        # (the first lists) at a time, within about a megabyte of scratch
        self._scratch_words_per_row = max(1, self.bits.shape[0] * self.bits.shape[1] * n)
        self._scratch = np.empty(max(self._scratch_words_per_row, 131_072), dtype=np.uint64)
        self.merges = 0
        self.full_recomputes = 0

    def _cost_of(self, cols: np.ndarray) -> np.ndarray:
        scan = self.bits[0][:, cols]
        for t in range(1, self.bits.shape[0]):
            scan &= self.bits[t][:, cols]
        return self.crows[cols].astype(np.float64) * self.weigh.leading(scan)

    def _shared(self, c: int, others: np.ndarray) -> np.ndarray:
        """Tree proximity of the block in column ``c`` to the blocks in columns ``others`` (0
        without trees). Only asked where Δ ties could need it: a few columns per row of Δ."""
        out = np.zeros(len(others), dtype=np.int64)
        if self.cover is None or self.proximity is None:
            return out
        for t in range(self.cover.shape[0]):
            out += self.proximity.depth_row(t, int(self.cover[t, c]))[self.cover[t, others]]
        return out

    def _deltas(self, cols: np.ndarray) -> np.ndarray:
        """len(cols) × live: Δ of merging the blocks in columns ``cols`` with every live block
        (inf with itself)."""
        live, (k, w, _) = self.live, self.bits.shape
        acc = self._scratch[: k * w * len(cols) * live].reshape(k, w, len(cols), live)
        np.bitwise_or(self.bits[:, :, None, :live], self.bits[:, :, cols][..., None], out=acc)
        scan = acc[0]
        for t in range(1, k):
            scan &= acc[t]
        size = self.crows[cols][:, None] + self.crows[None, :live]
        d = size * self.weigh.leading(scan) - self.ccost[cols][:, None] - self.ccost[None, :live]
        d[np.arange(len(cols)), cols] = np.inf
        return d

    def _set_list(self, i: int, d: np.ndarray) -> None:
        """Candidate list of i from its row of Δ over the live columns (tree proximity asked
        only of the columns tied with the (m+1)-th Δ or better)."""
        ids, rows = self.ids[: len(d)], self.crows[: len(d)]
        if len(d) - 1 > self.m:
            # Everything tied with the (m+1)-th Δ is kept for the exact (Δ, -shared, rows, id) order
            # (i's own Δ is inf, the last of the order: the (m+1)-th is among the others).
            near = _smallest_at_least(d, self.m + 1)
            kth = np.partition(d[near], self.m)[self.m]
            part = near[d[near] <= kth]
        else:
            part = np.flatnonzero(np.isfinite(d))
        nsh = -self._shared(int(self.col[i]), part)
        order = np.lexsort((ids[part], rows[part], nsh, d[part]))
        if len(d) - 1 > self.m:
            r = order[self.m]
            self.floor[i] = d[part[r]]
            self.floor_key[i] = (float(d[part[r]]), int(nsh[r]), int(rows[part[r]]), int(ids[part[r]]))
        else:
            self.floor[i] = np.inf
            self.floor_key[i] = (np.inf, 0, 0, 0)
        top = order[: self.m]
        self.cand[i] = list(zip(d[part[top]].tolist(), nsh[top].tolist(), rows[part[top]].tolist(),
                                ids[part[top]].tolist(), self.version[ids[part[top]]].tolist()))
        self.full_recomputes += 1

    def _valid(self, entry: tuple[float, int, int, int, int]) -> bool:
        return bool(self.alive[entry[3]]) and self.version[entry[3]] == entry[4]

    def _push_best(self, i: int) -> None:
        """Push i's true best partner; recompute its list if none of it is still valid."""
        lst = self.cand[i]
        while lst and not self._valid(lst[0]):
            lst.pop(0)
        if not lst:
            if self.live < 2:
                return
            cols = self.col[[i]]
            self._set_list(i, self._deltas(cols)[0])
            lst = self.cand[i]
            if not lst:
                return
        d, nsh, _, j, vj = lst[0]
        heapq.heappush(self.heap, (d, nsh, int(self.rows[i] + self.rows[j]), i, j, int(self.version[i]), vj))

    def _small(self, i: int) -> bool:
        return bool(self.alive[i]) and self.rows[i] < self.b

    def run(self, progress: Any = None) -> None:
        """``progress``: a ``pando_iceberg.progress`` reporter; merges are counted against the
        number of small blocks (each merge absorbs at least one)."""
        from ..progress import progress_step

        small = np.flatnonzero(self.rows < self.b)  # ids, here also their columns
        batch = max(1, len(self._scratch) // max(1, self._scratch_words_per_row))
        with progress_step(progress, "bottom-up: merge candidates", len(small)) as step:
            for s in range(0, len(small), batch):
                cols = small[s : s + batch]
                dd = self._deltas(cols)
                for r, i in enumerate(cols):
                    self._set_list(int(i), dd[r])
                step.advance(len(cols))
        for i in small:
            self._push_best(int(i))
        with progress_step(progress, "bottom-up: merges", len(small)) as step:
            self._merge_all(step)
            step.finish()

    def _merge_all(self, step: Any) -> None:
        while self.heap:
            _, _, _, i, j, vi, vj = heapq.heappop(self.heap)
            if not self._small(i) or self.version[i] != vi:
                continue  # stale: i merged or grew since
            lst = self.cand[i]
            head_ok = lst and self._valid(lst[0]) and lst[0][3] == j and lst[0][4] == vj
            if not head_ok:
                if not (self.alive[j] and self.version[j] == vj):
                    self._push_best(i)  # partner gone: next valid candidate (or recompute)
                continue
            self._merge(i, j)
            step.advance()

    def _drop_column(self, o: int) -> None:
        """Free block o's column: the last live column moves into it."""
        c, last = int(self.col[o]), self.live - 1
        if c != last:
            moved = int(self.ids[last])
            self.bits[:, :, c] = self.bits[:, :, last]
            self.crows[c], self.ccost[c] = self.crows[last], self.ccost[last]
            if self.cover is not None:
                self.cover[:, c] = self.cover[:, last]
            self.ids[c], self.col[moved] = moved, c
        self.col[o] = -1
        self.live -= 1

    def _merge(self, i: int, j: int) -> None:
        s, o = min(i, j), max(i, j)
        cs, co = self.col[s], self.col[o]
        self.bits[:, :, cs] |= self.bits[:, :, co]
        self.rows[s] += self.rows[o]
        self.rows[o] = 0
        if self.cover is not None and self.proximity is not None:
            for t in range(self.cover.shape[0]):
                self.cover[t, cs] = self.proximity.lca(t, int(self.cover[t, cs]), int(self.cover[t, co]))
        self.alive[o] = False
        self.version[s] += 1
        self.version[o] += 1
        self._drop_column(o)
        cs = self.col[[s]]
        self.crows[cs] = self.rows[s]
        self.ccost[cs] = self._cost_of(cs)
        self.members[s].extend(self.members[o])
        self.members[o] = []
        self.cand[o] = None
        self.cand[s] = None
        self.floor[o] = -np.inf  # never offered anything again
        self.merges += 1
        if self.live < 2:
            return
        d = self._deltas(cs)[0]
        if self.rows[s] < self.b:
            self._set_list(s, d)
            self._push_best(s)
        else:
            self.floor[s] = -np.inf
        # Offer the new block to every small block whose list it beats (Δ and proximity are symmetric).
        live = self.live
        offer = np.flatnonzero((self.crows[:live] < self.b) & (d <= self.floor[self.ids[:live]]))
        nsh = -self._shared(int(cs[0]), offer)
        for r in np.argsort(self.ids[offer]):
            c, i = int(offer[r]), int(self.ids[offer[r]])
            entry = (float(d[c]), int(nsh[r]), int(self.rows[s]), s, int(self.version[s]))
            lst = self.cand[i]
            if i == s or lst is None or entry[:4] >= self.floor_key[i]:
                continue
            lst[:] = [e for e in lst if self._valid(e)]
            old_head = lst[0] if lst else None
            bisect.insort(lst, entry)
            while len(lst) > self.m:
                dropped = lst.pop()
                if dropped[:4] < self.floor_key[i]:
                    self.floor_key[i] = dropped[:4]
                    self.floor[i] = dropped[0]
            if lst[0] != old_head:
                self._push_best(i)


def _smallest_at_least(d: np.ndarray, count: int) -> np.ndarray:
    """Positions of a subset of ``d`` holding its ``count`` smallest values (and all their ties):
    those at or below the ``count``-th smallest of an even spread of about √(len · count) of
    them. Partitioning that subset instead of ``d`` gives the same order statistics below
    ``count`` at a fraction of the cost (len(d) ≥ count)."""
    step = max(1, int(len(d) / np.sqrt(len(d) * count)))
    spread = d[::step]
    if len(spread) <= count:
        return np.arange(len(d))
    return np.flatnonzero(d <= np.partition(spread, count - 1)[count - 1])


def merge_blocks(
    returned: np.ndarray, rows: np.ndarray, weights: np.ndarray, min_block_rows: float, candidates: int = 8,
    *, trees: Sequence[PartitionTree] | None = None, ktuples: np.ndarray | None = None, progress: Any = None,
    split_oversized: bool = True,
) -> tuple[np.ndarray, dict]:
    """Merge k-tuples into blocks (§6.2 steps 2-5).

    returned: k × K × Q bool — tree t returns k-tuple κ's leaf for query q.
    rows: K sample rows per k-tuple. Returns the block id of every k-tuple (blocks numbered
    in order of their smallest k-tuple) and statistics. With ``trees`` and ``ktuples``
    (K × k leaf ids), equal-Δ merges are ordered by tree proximity (see ``_Merger``).
    ``split_oversized`` (with ``trees`` and ``ktuples``): then split blocks of ≥ 2b rows where the
    workload gains (``_split_oversized``; False: the paper's greedy alone).
    """
    k, nk, _ = returned.shape
    bits = np.stack([pack_query_bits(returned[t]) for t in range(k)]) if nk else np.zeros((k, 0, 1), np.uint64)
    cover = proximity = None
    if trees is not None and ktuples is not None and nk:
        proximity = _TreeProximity(trees)
        cover = np.asarray(ktuples, dtype=np.int64).T  # k × K: a k-tuple's covering node = its leaf
    weigh = WeightedPopcount(weights)
    merger = _Merger(bits, rows, weigh, float(min_block_rows), candidates, cover, proximity)
    groups: list[np.ndarray] = []
    splits = 0
    if nk:
        merger.run(progress)
        groups = [np.asarray(merger.members[s], dtype=np.int64) for s in np.flatnonzero(merger.alive)]
        if split_oversized and trees is not None and ktuples is not None:
            groups, splits = _split_oversized(groups, bits, rows, weigh, float(min_block_rows), trees,
                                              np.asarray(ktuples))
    block_of = np.empty(nk, dtype=np.int32)
    groups.sort(key=lambda g: int(g.min()))
    for b, members in enumerate(groups):
        block_of[members] = b
    stats = {
        "ktuples": nk,
        "blocks": len(groups),
        "merges": merger.merges,
        "full_recomputes": merger.full_recomputes,
        "split_blocks": splits,
        "cost": float(sum(_group_cost(bits, rows, weigh, g) for g in groups)),
    }
    return block_of, stats


def _group_cost(bits: np.ndarray, rows: np.ndarray, weigh: WeightedPopcount, members: np.ndarray) -> float:
    """cost.py's cost of one block made of k-tuples ``members`` (R_t = OR over its k-tuples)."""
    returned = np.bitwise_or.reduce(bits[:, members], axis=1)[:, None, :]  # k × 1 × W
    return float(block_costs(returned, np.array([rows[members].sum()]), weigh)[0])


def _leaf_order(tree: PartitionTree) -> np.ndarray:
    """Node id → rank of the node in a depth-first walk (TRUE child first): leaves close in the
    tree get close ranks, and every subtree is one run of ranks."""
    rank = np.zeros(tree.num_nodes, dtype=np.int64)
    stack, r = [0], 0
    while stack:
        n = stack.pop()
        rank[n] = r
        r += 1
        if tree.node_cut[n] is not None:
            stack.append(tree.not_true_child[n])
            stack.append(tree.true_child[n])
    return rank


def _split_oversized(groups: list[np.ndarray], bits: np.ndarray, rows: np.ndarray, weigh: WeightedPopcount,
                     b: float, trees: Sequence[PartitionTree], ktuples: np.ndarray) -> tuple[list[np.ndarray], int]:
    """Blocks of ≥ 2b rows split in two where the workload gains (beyond the paper's §6.2).

    The greedy merge lets a small block join its cheapest partner even when that partner already
    has ≥ b rows, so blocks end up well above b (≈ 1.8 b on TPC-H). For such a block, its
    k-tuples are ordered by their leaf in tree t (depth-first, so a subtree is one run) and cut
    at the point, over every t, that minimizes the cost of the two parts, both keeping ≥ b rows.
    A part is scanned only by queries that scan the block (its R_t ⊆ the block's), so the cost
    never rises; the split is taken only when it falls (some training query skips a part), and
    the parts are split again while they hold ≥ 2b rows. Prefix and suffix ORs of the packed
    query bitsets give every cut point's cost at once."""
    ranks = [_leaf_order(t) for t in trees]
    out: list[np.ndarray] = []
    splits = 0
    todo = list(groups)
    while todo:
        members = todo.pop()
        total = int(rows[members].sum())
        if len(members) < 2 or total < 2 * b:
            out.append(members)
            continue
        best_cost, best = _group_cost(bits, rows, weigh, members), None
        for t, rank in enumerate(ranks):
            order = members[np.argsort(rank[ktuples[members, t]], kind="stable")]
            left_rows = np.cumsum(rows[order])[:-1]  # rows left of cut point i (after position i)
            ok = np.flatnonzero((left_rows >= b) & (total - left_rows >= b))
            if not len(ok):
                continue
            pre = np.bitwise_or.accumulate(bits[:, order], axis=1)  # k × n × W
            suf = np.bitwise_or.accumulate(bits[:, order[::-1]], axis=1)[:, ::-1]
            cost = (block_costs(pre[:, ok], left_rows[ok], weigh)
                    + block_costs(suf[:, ok + 1], total - left_rows[ok], weigh))
            i = int(np.argmin(cost))
            if cost[i] < best_cost - 1e-9 * max(1.0, best_cost):
                best_cost, best = float(cost[i]), (order[: ok[i] + 1], order[ok[i] + 1 :])
        if best is None:
            out.append(members)
            continue
        splits += 1
        todo.extend(best)
    return out, splits


def ktuple_returns(
    trees: Sequence[PartitionTree], ktuples: np.ndarray, sides: SideMatrix, cut_column: dict[str, int]
) -> np.ndarray:
    """k × K × Q bool: tree t returns (reaches the leaf of) k-tuple κ for query q."""
    out = np.zeros((len(trees), len(ktuples), sides.num_queries), dtype=bool)
    for t, tree in enumerate(trees):
        reach = reach_matrix(tree, sides, cut_column)  # Q × nodes
        out[t] = reach[:, ktuples[:, t]].T
    return out


def assign_blocks(
    trees: Sequence[PartitionTree],
    sample: Any,
    queries: Iterable[Any],
    min_block_rows: float,
    *,
    sides: SideMatrix | None = None,
    candidates: int = 8,
    tie_break: str = "tree",
    progress: Any = None,
    masks: dict[str, np.ndarray] | None = None,
) -> BlockAssignment:
    """§6.2 on ``sample``; ``min_block_rows`` is b already scaled to the sample.

    ``sides``, if given, is over ``cut_table(trees)``'s cut order; ``masks``, if given, the TRUE
    rows of those cuts on ``sample`` by key (``route_ktuples``). ``tie_break``: "tree"
    (equal-Δ merges by tree proximity, see ``_Merger``) or "id" (block ids only)."""
    if tie_break not in ("tree", "id"):
        raise ValueError(f"tie_break must be 'tree' or 'id', got {tie_break!r}")
    trees = list(trees)
    filters, weights = normalize_queries(queries)
    cuts, cut_column = cut_table(trees)
    if sides is None:
        sides = side_matrix(filters, cuts)
    kt = route_ktuples(trees, sample, masks)
    uniq, inv = distinct_ktuples(kt, radices_of(trees))
    kt_rows = np.bincount(inv, minlength=len(uniq)).astype(np.int64)
    returned = ktuple_returns(trees, uniq, sides, cut_column)
    block_of, stats = merge_blocks(returned, kt_rows, weights, min_block_rows, candidates,
                                   trees=trees if tie_break == "tree" else None, ktuples=uniq, progress=progress)
    block_rows = np.bincount(block_of, weights=kt_rows, minlength=stats["blocks"]).astype(np.int64)
    return BlockAssignment(
        trees=trees,
        ktuples=uniq,
        ktuple_block=block_of,
        ktuple_rows=kt_rows,
        block_rows=block_rows,
        row_block=block_of[inv] if len(inv) else np.zeros(0, dtype=np.int32),
        cost=stats["cost"],
        merges=stats["merges"],
        stats=stats,
        sides=sides,
        weights=weights,
    )
