"""Top-down construction of k partitioning trees (§6.1).

Greedy, one cut at a time: start with k root-only trees; repeatedly apply the (tree, leaf, cut)
whose split lowers the workload's I/O cost the most when all k trees are used together (§5: a
query scans what every tree returns); every sample row is its own block in this phase. A cut is
considered only if both children keep ≥ ``min_leaf_rows`` sample rows; stop when no split has a
positive benefit, or when the split would create more than ``max_ktuples`` distinct k-tuples on
the sample (the paper sets its threshold so that the bottom-up phase sees < 10,000 k-tuples).

Beyond the paper, a constant cut: one whose side is empty on the leaf although, at the cut's share
of the whole sample, that side would have held ``min_leaf_rows`` of the leaf's rows. The sample
then shows a correlation with a cut on the leaf's path (a sale's customer lives in its store's
region: under a store-region cut the customer-region cut is constant), and the split records it:
its empty child adds no k-tuple, and the queries that can only lie on that side skip the leaf, so
one tree's cuts serve a correlated dimension's queries. Rows of the full table that break the
correlation are routed like any unseen k-tuple (``layout.py``); the empty leaf then points to their
block, so planning stays sound.

The shared leaf budget (``leaf_budget``; ``build_layout`` gives k ≥ 2 trees the one of
``pando_iceberg.layout.leaf_budget``): the k trees together may make at most that many k-tuples
on the sample (the units §6.2 merges into blocks). A split adds the k-tuples of its leaf with rows
on both sides of the cut, and the greedy takes, among the splits that still fit the budget, the
one of the largest benefit per k-tuple added (``per_ktuple``; a split adding none counts as one)
or of the largest benefit. Per splittable leaf the count per cut is one segmented sum of the cut masks over the
leaf's rows grouped by k-tuple; a split changes the k-tuples only of its own rows, so the other
trees' leaves holding them are corrected by what the split k-tuples count after the split minus
before (one segmented sum over the split leaf's rows, not over those leaves).

How the benefit is computed without re-evaluating the cost model per candidate:
Scan[q, r] = AND over trees of "q reaches the leaf of row r". Splitting leaf l of tree t by cut c
only changes Scan on rows of l, and only for queries decisive on c, so

    benefit(t, l, c) = Σ_q w_q · |Scan_q ∧ rows(l) ∧ skipped_side(q, c)|

where skipped side = the TRUE rows of c if q cannot be TRUE on c, the NOT-TRUE rows if q cannot
be NOT-TRUE (a query not reaching l in t has Scan_q ∧ rows(l) = ∅ already, so no reach test).
Per splittable leaf we cache A[q, c] = |Scan_q ∧ rows(l) ∧ TRUE(c)| (one float32 matrix product
over the leaf's rows) and S[q] = |Scan_q ∧ rows(l)|; then
    benefit = Σ_q w_q (¬may_true[q,c] · A[q,c] + ¬may_not_true[q,c] · (S[q] − A[q,c])).
After a split only the rows of l and the decisive queries change Scan, so the caches of the
other trees' leaves are corrected by the delta (D @ masksᵀ over those rows), and the split
leaf's two children get theirs from one product over the smaller child's rows (the larger
child's counts are the leaf's minus the smaller's; the queries that skip a child count zero there).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from .cost import SideMatrix, normalize_queries, side_matrix
from .tree import PartitionTree

__all__ = ["TopDown", "build_trees", "evaluate_cuts", "one_blas_thread"]


def evaluate_cuts(cuts: Sequence[Any], table: Any) -> np.ndarray:
    """C × n bool: cut c is TRUE on row r (NULL / FALSE → False)."""
    n = table.num_rows
    out = np.zeros((len(cuts), n), dtype=bool)
    for i, cut in enumerate(cuts):
        m = np.asarray(cut.evaluate(table), dtype=bool)
        if m.shape != (n,):
            raise ValueError(f"cut {cut.key!r}: evaluate() returned shape {m.shape}, expected ({n},)")
        out[i] = m
    return out


@dataclass
class _Leaf:
    """Cached counts of a splittable leaf (see module docstring)."""

    rows: np.ndarray  # sample row indices
    A: np.ndarray | None = None  # Q × C float32
    S: np.ndarray | None = None  # Q float64
    N: np.ndarray | None = None  # C int: rows of the leaf TRUE on each cut
    best_cut: int = -1
    best_benefit: float = 0.0
    best_gain: float = 0.0  # what the greedy orders splits by: the benefit, or per k-tuple added
    # With a leaf budget: per cut, the k-tuples of the leaf on both sides of it (the k-tuples
    # the split adds), and the best cut's count (stale when its k-tuples change: None)
    new: np.ndarray | None = None
    best_new: int = 0
    over_budget: bool = False  # a split with positive benefit left out: it does not fit the budget
    stale: bool = False  # its k-tuples changed since it was scored (scored again after the split)


@dataclass
class TopDownStats:
    splits: int = 0
    initial_cost: float = 0.0
    final_cost: float = 0.0
    ktuples: int = 1
    stopped_by: str = ""
    history: list[tuple[int, int, int, float]] = field(default_factory=list)  # (tree, leaf, cut, benefit)


class TopDown:
    """The §6.1 greedy over precomputed cut masks (C × n) and sides (Q × C)."""

    def __init__(
        self,
        masks: np.ndarray,
        sides: SideMatrix,
        weights: np.ndarray,
        k: int,
        min_leaf_rows: int,
        max_ktuples: int | None = None,
        leaf_budget: int | None = None,
        per_ktuple: bool = True,
    ):
        if k < 1:
            raise ValueError(f"k (number of trees) must be >= 1, got {k}")
        c, n = masks.shape
        if sides.may_true.shape != (len(weights), c):
            raise ValueError(f"side matrix shape {sides.may_true.shape} does not match "
                             f"{len(weights)} queries × {c} cuts")
        # Unsatisfiable and zero-weight queries cost nothing on any layout: leave them out.
        keep = (weights > 0) & ~sides.unsatisfiable
        self.w = weights[keep]
        self.may_true = sides.may_true[keep]
        self.may_not = sides.may_not_true[keep]
        self.k, self.n, self.c = k, n, c
        self.min_leaf = max(1, int(min_leaf_rows))
        self.max_ktuples = max_ktuples
        self.leaf_budget = leaf_budget
        self.per_ktuple = per_ktuple
        self.masks = masks
        self.share = masks.mean(axis=1) if n else np.zeros(c)  # each cut's TRUE share of the sample
        self.masks_t = np.ascontiguousarray(masks.T, dtype=np.float32)  # n × C for row subsets
        self.mask_bits = _pack_rows(masks.T)  # n × ⌈C/64⌉ words: each row's TRUE cuts as a bitset
        not_true = ~self.may_true
        not_not = ~self.may_not
        self.w_not_true = self.w[:, None] * not_true  # Q × C
        self.w_not_not = self.w[:, None] * not_not
        self.w_diff = self.w_not_true - self.w_not_not
        self.scan = np.ones((len(self.w), n), dtype=bool)
        self.trees = [PartitionTree() for _ in range(k)]
        self.leaf_of = np.zeros((k, n), dtype=np.int32)
        self.leaves: list[dict[int, _Leaf]] = [{0: _Leaf(np.arange(n))} for _ in range(k)]
        self.kcode = np.zeros(n, dtype=np.int64)  # dense k-tuple id per sample row
        self.num_ktuples = 1 if n else 0
        self.stats = TopDownStats(ktuples=self.num_ktuples)
        if len(self.w) and self._splittable(n):
            # every query scans every row yet: A[q] is each cut's TRUE rows, S[q] the rows
            cnt = masks.sum(axis=1)
            a = np.broadcast_to(cnt.astype(np.float32), (len(self.w), c)).copy()
            s = np.full(len(self.w), float(n))
            for t in range(k):
                leaf = self.leaves[t][0]
                leaf.A, leaf.S, leaf.N = a.copy() if t else a, s.copy(), cnt
                self._score(leaf)

    def _splittable(self, rows: int) -> bool:
        return rows >= 2 * self.min_leaf

    def _score(self, leaf: _Leaf) -> None:
        assert leaf.A is not None and leaf.S is not None and leaf.N is not None
        leaf.stale = False
        live = np.flatnonzero(leaf.S)  # a query scanning none of the leaf's rows adds zeros: left out
        benefit = (self.w_diff[live] * leaf.A[live]).sum(axis=0) + leaf.S @ self.w_not_not
        size = len(leaf.rows)
        valid = (leaf.N >= self.min_leaf) & (size - leaf.N >= self.min_leaf)
        # A cut constant on the leaf although, at its share of the sample, a side would hold
        # min_leaf rows: the leaf's rows follow another cut on its path (a correlation the sample
        # shows); the empty child adds no k-tuple and skips the leaf for the queries on its side.
        valid |= ((leaf.N == 0) & (size * self.share >= self.min_leaf)) \
            | ((leaf.N == size) & (size * (1.0 - self.share) >= self.min_leaf))
        if self.leaf_budget is None:
            benefit = np.where(valid, benefit, -np.inf)
            j = int(np.argmax(benefit)) if len(benefit) else -1
            if j >= 0 and benefit[j] > 1e-9:
                leaf.best_cut, leaf.best_benefit = j, float(benefit[j])
                leaf.best_gain = leaf.best_benefit
            else:
                leaf.best_cut, leaf.best_benefit, leaf.best_gain = -1, 0.0, 0.0
            return
        # The shared leaf budget: only the splits whose added k-tuples fit in what is left of it
        # are candidates; the best is the largest benefit per k-tuple added (a split adding none
        # counts as adding one), or the largest benefit.
        if leaf.new is None:
            leaf.new = self._new_per_cut(leaf.rows)
        valid &= benefit > 1e-9
        fits = leaf.new <= self.leaf_budget - self.num_ktuples
        leaf.over_budget = bool((valid & ~fits).any())
        valid &= fits
        gain = np.where(valid, benefit / np.maximum(leaf.new, 1) if self.per_ktuple else benefit, -np.inf)
        j = int(np.argmax(gain)) if len(gain) else -1
        if j >= 0 and valid[j]:
            leaf.best_cut, leaf.best_benefit, leaf.best_gain = j, float(benefit[j]), float(gain[j])
            leaf.best_new = int(leaf.new[j])
        else:
            leaf.best_cut, leaf.best_benefit, leaf.best_gain, leaf.best_new = -1, 0.0, 0.0, 0

    def _new_per_cut(self, rows: np.ndarray) -> np.ndarray:
        """C int: per cut, the k-tuples among ``rows`` (one leaf's) with rows on both of its sides."""
        codes = self.kcode[rows]
        order = np.argsort(codes, kind="stable")
        sorted_codes = codes[order]
        starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
        return self._cut_counts(_both_sides(*self._any_all(rows[order], starts)))

    def _any_all(self, rows: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per group of ``rows`` (consecutive, from each of ``starts``): the cuts TRUE on some of
        its rows and on all of them, as packed bitsets (groups × words, bit c of a row = cut c)."""
        bits = self.mask_bits[rows]
        return np.bitwise_or.reduceat(bits, starts, axis=0), np.bitwise_and.reduceat(bits, starts, axis=0)

    def _cut_bits(self, packed: np.ndarray) -> np.ndarray:
        """groups × C uint8 (0/1) of packed bitsets (``_any_all``)."""
        return np.unpackbits(packed.view(np.uint8), axis=1, count=self.c, bitorder="little")

    def _cut_counts(self, packed: np.ndarray) -> np.ndarray:
        """C int: per cut, the groups whose bit is set."""
        return self._cut_bits(packed).sum(axis=0, dtype=np.int64)

    def current_cost(self) -> float:
        return float(self.w @ self.scan.sum(axis=1))

    def _best(self) -> tuple[int, int, int, float] | None:
        best = None
        for t in range(self.k):
            for node, leaf in self.leaves[t].items():
                if leaf.best_cut < 0:
                    continue
                key = (-leaf.best_gain, t, node, leaf.best_cut)
                if best is None or key < best:
                    best = key
        if best is None:
            return None
        return best[1], best[2], best[3], self.leaves[best[1]][best[2]].best_benefit

    def _stale_leaves(self, t: int, rows: np.ndarray) -> list[_Leaf]:
        """The other trees' splittable leaves holding ``rows``, whose k-tuples a split of tree t
        may just have changed: scored again after the split."""
        out = []
        for t2 in range(self.k):
            if t2 == t:
                continue
            for leaf_id in np.unique(self.leaf_of[t2, rows]):
                leaf = self.leaves[t2][int(leaf_id)]
                if leaf.A is not None:
                    leaf.stale = True
                    out.append(leaf)
        return out

    def _per_ktuple_any_all(self, rows: np.ndarray, both: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per k-tuple of ``both`` (sorted ids, each with rows among ``rows``): the cuts TRUE on
        some and on all of its rows among ``rows`` (``_any_all``)."""
        idx = np.searchsorted(both, self.kcode[rows])
        order = np.argsort(idx, kind="stable")
        starts = np.flatnonzero(np.r_[True, idx[order][1:] != idx[order][:-1]])
        return self._any_all(rows[order], starts)

    def _update_new(self, t: int, rows_t: np.ndarray, rows_f: np.ndarray, both: np.ndarray) -> None:
        """Before the k-tuples ``both`` of a split of tree t become two each (rows_t keep their
        id, rows_f get a new one): the other trees' leaves holding them get their
        k-tuples-added counts corrected, per cut, by the split k-tuples' count on both sides of
        the cut after the split minus before (a k-tuple lies in one leaf of every tree; the
        rows of the split leaf only, instead of counting those leaves afresh). A k-tuple is on
        both sides of a cut iff the cut is TRUE on some of its rows and not on all (packed
        bitsets: before the split, the two halves' some OR-ed and all AND-ed)."""
        in_t = rows_t[np.isin(self.kcode[rows_t], both)]
        in_f = rows_f[np.isin(self.kcode[rows_f], both)]
        any_t, all_t = self._per_ktuple_any_all(in_t, both)
        any_f, all_f = self._per_ktuple_any_all(in_f, both)
        delta = (self._cut_bits(_both_sides(any_t, all_t)).astype(np.int64)
                 + self._cut_bits(_both_sides(any_f, all_f))
                 - self._cut_bits(_both_sides(any_t | any_f, all_t & all_f)))
        first = np.searchsorted(both, self.kcode[in_t])
        rep = np.empty(len(both), dtype=np.int64)
        rep[first] = in_t  # a row of each split k-tuple
        for t2 in range(self.k):
            if t2 == t:
                continue
            lf = self.leaf_of[t2, rep]
            order = np.argsort(lf, kind="stable")
            ids, starts = np.unique(lf[order], return_index=True)
            sums = np.add.reduceat(delta[order], starts, axis=0)
            for leaf_id, d in zip(ids, sums):
                leaf = self.leaves[t2].get(int(leaf_id))
                if leaf is not None and leaf.new is not None:
                    leaf.new = leaf.new + d

    def _new_ktuples(self, rows_true: np.ndarray, rows_false: np.ndarray) -> np.ndarray:
        """k-tuple ids present on both sides of the split: each becomes two k-tuples."""
        return np.intersect1d(self.kcode[rows_true], self.kcode[rows_false])

    def run(self, step: Any = None) -> list[PartitionTree]:
        """``step``: a progress step advanced once per split (its total an upper bound)."""
        with one_blas_thread():
            return self._run(step)

    def _run(self, step: Any) -> list[PartitionTree]:
        self.stats.initial_cost = self.current_cost()
        while True:
            choice = self._best()
            if choice is None:
                self.stats.stopped_by = "no split with positive benefit"
                if any(leaf.over_budget for leaves in self.leaves for leaf in leaves.values()):
                    self.stats.stopped_by = f"leaf budget of {self.leaf_budget} k-tuples reached"
                break
            t, node, c, benefit = choice
            leaf = self.leaves[t][node]
            if self.leaf_budget is not None and self.num_ktuples + leaf.best_new > self.leaf_budget:
                self._score(leaf)  # its best split no longer fits the budget left: the next one
                continue
            rows = leaf.rows
            m = self.masks[c, rows]
            rows_t, rows_f = rows[m], rows[~m]
            both = self._new_ktuples(rows_t, rows_f)
            if self.max_ktuples is not None and self.num_ktuples + len(both) > self.max_ktuples:
                self.stats.stopped_by = f"max_ktuples={self.max_ktuples} reached"
                break
            # Rows on the NOT-TRUE side of a split k-tuple get a fresh k-tuple id.
            stale: list[_Leaf] = []
            if len(both):
                if self.leaf_budget is not None:
                    self._update_new(t, rows_t, rows_f, both)
                moved = rows_f[np.isin(self.kcode[rows_f], both)]
                _, inv = np.unique(self.kcode[moved], return_inverse=True)
                self.kcode[moved] = self.num_ktuples + inv
                self.num_ktuples += len(both)
                if self.leaf_budget is not None:
                    stale = self._stale_leaves(t, rows)
            self._apply(t, node, c, rows_t, rows_f)
            for other in stale:
                if other.stale:
                    self._score(other)
            self.stats.splits += 1
            self.stats.history.append((t, node, c, benefit))
            if step is not None:
                step.advance()
        self.stats.ktuples = self.num_ktuples
        self.stats.final_cost = self.current_cost()
        return self.trees

    def _apply(self, t: int, node: int, c: int, rows_t: np.ndarray, rows_f: np.ndarray) -> None:
        skip_true = np.flatnonzero(~self.may_true[:, c])
        skip_not = np.flatnonzero(~self.may_not[:, c])
        # The children's caches (module docstring): the smaller child's counts under the scan as
        # it is before this split, the larger one's as the leaf's minus them, then the rows of the
        # queries that stop scanning a child are zero. Every count is an integer below 2^24, so
        # float32 holds them exactly and the caches equal those counted afresh.
        parent = self.leaves[t][node]
        small_true = len(rows_t) <= len(rows_f)
        rows_s = rows_t if small_true else rows_f
        children = None
        if parent.A is not None and (self._splittable(len(rows_t)) or self._splittable(len(rows_f))):
            assert parent.S is not None and parent.N is not None  # set together with A (_score)
            sub = self.masks_t[rows_s]
            scan = self.scan[:, rows_s]
            s_s = scan.sum(axis=1).astype(np.float64)
            live = np.flatnonzero(s_s)  # the queries scanning none of these rows count zero
            a_s = np.zeros((len(s_s), self.c), dtype=np.float32)
            distinct, which = _distinct_rows(scan[live])  # queries scanning the same rows: one product
            a_s[live] = (distinct.astype(np.float32) @ sub)[which]
            n_s = sub.sum(axis=0).astype(np.int64)
            a_l, s_l, n_l = parent.A - a_s, parent.S - s_s, parent.N - n_s
            (a_t, s_t, n_t), (a_f, s_f, n_f) = ((a_s, s_s, n_s), (a_l, s_l, n_l)) if small_true \
                else ((a_l, s_l, n_l), (a_s, s_s, n_s))
            a_t[skip_true], s_t[skip_true] = 0.0, 0.0
            a_f[skip_not], s_f[skip_not] = 0.0, 0.0
            children = ((a_t, s_t, n_t), (a_f, s_f, n_f))

        # Scan delta: decisive queries stop scanning the skipped side's rows of this leaf.
        d_true = self.scan[np.ix_(skip_true, rows_t)] if len(skip_true) else None
        d_not = self.scan[np.ix_(skip_not, rows_f)] if len(skip_not) else None
        if d_true is not None:
            self.scan[np.ix_(skip_true, rows_t)] = False
        if d_not is not None:
            self.scan[np.ix_(skip_not, rows_f)] = False

        # Other trees: subtract the delta from the caches of the leaves holding those rows. Only
        # the queries and rows where the delta has a row are counted (the rest subtract zero), and
        # the queries whose delta is the same rows once (``_distinct_rows``).
        changes = []
        for qs, rows, delta in ((skip_true, rows_t, d_true), (skip_not, rows_f, d_not)):
            if delta is None:
                continue
            live_q, live_r = delta.any(axis=1), delta.any(axis=0)
            if live_q.any():
                changes.append((qs[live_q], rows[live_r], *_distinct_rows(delta[np.ix_(live_q, live_r)])))
        for t2 in range(self.k):
            if t2 == t:
                continue
            touched: set[int] = set()
            for qs, rows, delta, which in changes:
                lf = self.leaf_of[t2, rows]
                order = np.argsort(lf, kind="stable")
                ids, starts = np.unique(lf[order], return_index=True)
                ends = np.append(starts[1:], len(order))
                for leaf_id, s, e in zip(ids, starts, ends):
                    leaf = self.leaves[t2][int(leaf_id)]
                    if leaf.A is None:
                        continue
                    assert leaf.S is not None  # set together with A (_score)
                    sel = order[s:e]
                    dd = delta[:, sel]
                    if not dd.any():
                        continue
                    leaf.A[qs] -= (dd.astype(np.float32) @ self.masks_t[rows[sel]])[which]
                    leaf.S[qs] -= dd.sum(axis=1)[which]
                    touched.add(int(leaf_id))
            for leaf_id in touched:
                self._score(self.leaves[t2][leaf_id])

        # The split tree: replace the leaf by its two children.
        tree = self.trees[t]
        tn, fn = tree.split(node, _CutRef(c))
        del self.leaves[t][node]
        self.leaf_of[t, rows_t] = tn
        self.leaf_of[t, rows_f] = fn
        for i, (child, rows) in enumerate(((tn, rows_t), (fn, rows_f))):
            leaf = self.leaves[t][child] = _Leaf(rows)
            if children is not None and self._splittable(len(rows)):
                leaf.A, leaf.S, leaf.N = children[i]
                self._score(leaf)


def _pack_rows(bits: np.ndarray) -> np.ndarray:
    """rows × C bool as rows × ⌈C/64⌉ uint64 (bit c of word c // 64, little-endian)."""
    rows, c = bits.shape
    packed = np.zeros((rows, 8 * max(1, -(-c // 64))), dtype=np.uint8)
    packed[:, : -(-c // 8)] = np.packbits(bits, axis=1, bitorder="little")
    return packed.view(np.uint64)


def _distinct_rows(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a 2-D bool array and, per row, the index of its own among them: many
    queries scan the same rows (draws of one template, queries a split decides alike), so a
    product over the distinct rows, spread back, equals the one over all (integer counts)."""
    if len(m) <= 1 or m.shape[1] == 0:
        return m[:1], np.zeros(len(m), dtype=np.int64)
    packed = np.ascontiguousarray(np.packbits(m, axis=1))
    keys = packed.view(np.dtype((np.void, packed.shape[1])))[:, 0]
    _, first, which = np.unique(keys, return_index=True, return_inverse=True)
    return m[first], which.reshape(-1)


def _both_sides(some: np.ndarray, every: np.ndarray) -> np.ndarray:
    """Packed bitsets of the cuts with rows on both sides: TRUE on some rows, not on all."""
    return some & ~every


def one_blas_thread():
    """A context in which numpy's products use one BLAS thread. The greedy's products are many
    and small, and the driver shares its cores with Spark: OpenBLAS's threads spinning for them
    made the TPC-H SF 1 k = 3 top-down 4× slower (75 s against 18 s, on 2 busy cores)."""
    return threadpool_limits(limits=1, user_api="blas")


@dataclass(frozen=True)
class _CutRef:
    """Placeholder node content while building (index into the candidate list)."""

    index: int

    @property
    def key(self) -> str:
        return f"#{self.index}"


def build_trees(
    sample: Any,
    cuts: Sequence[Any],
    queries: Iterable[Any],
    k: int,
    min_leaf_rows: int,
    max_ktuples: int | None = 10_000,
    *,
    masks: np.ndarray | None = None,
    sides: SideMatrix | None = None,
    stats: dict | None = None,
    progress: Any = None,
    leaf_budget: int | None = None,
    per_ktuple: bool = True,
) -> list[PartitionTree]:
    """§6.1: k partitioning trees over ``cuts`` for the workload ``queries`` on ``sample``.

    ``queries``: filters, ``(filter, weight)`` pairs or ``WeightedQuery``. With k = 1 and
    ``min_leaf_rows`` = b this is the qd-tree / MTO greedy tree. ``masks`` (C × n) and
    ``sides`` may be passed precomputed. If ``stats`` is a dict it receives the run's numbers.
    """
    filters, weights = normalize_queries(queries)
    cuts = list(cuts)
    keys = [c.key for c in cuts]
    if len(set(keys)) != len(keys):
        dup = sorted({x for x in keys if keys.count(x) > 1})[:3]
        raise ValueError(f"candidate cuts must have unique keys; duplicated: {dup}")
    if masks is None:
        masks = evaluate_cuts(cuts, sample)
    if sides is None:
        sides = side_matrix(filters, cuts)
    td = TopDown(np.asarray(masks, dtype=bool), sides, weights, k, min_leaf_rows, max_ktuples, leaf_budget, per_ktuple)
    from ..progress import progress_step

    n = np.asarray(masks).shape[1]
    bound = k * max(0, n // max(1, int(min_leaf_rows)) - 1)  # splits: every leaf keeps >= min_leaf_rows
    with progress_step(progress, f"top-down: splits of {k} tree(s)", bound) as step:
        trees = td.run(step)
        step.finish()
    # Swap the index placeholders for the real cut objects.
    for tree in trees:
        tree.node_cut = [None if ref is None else cuts[ref.index] for ref in tree.node_cut]
    if stats is not None:
        stats.update(
            splits=td.stats.splits,
            initial_cost=td.stats.initial_cost,
            final_cost=td.stats.final_cost,
            ktuples=td.stats.ktuples,
            stopped_by=td.stats.stopped_by,
            history=list(td.stats.history),
            scan=td.scan,
            kept_queries=np.flatnonzero((weights > 0) & ~sides.unsatisfiable),
        )
    return trees

