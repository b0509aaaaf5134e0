"""PartitionTree: one logical partitioning of a table (§4).

Each inner node holds a cut; its TRUE child is the logical subspace where the cut is TRUE, its
NOT-TRUE child the rest (FALSE or NULL). A leaf's "leaf node expression" is the conjunction along
its root path. Leaves do not own rows physically: the layout maps each leaf to the set of
blocks holding at least one row of its subspace (complete, not precise).

Node ids are stable and grow from parent to child (children are appended when a leaf is split),
so a single pass in id order visits parents first. A truncated tree (§6.2) keeps the node ids of
the tree it came from: its leaves are nodes of the original tree, so a k-tuple of original leaves
maps to truncated leaves by walking up to the nearest truncated leaf.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Decision", "KTuple", "PartitionTree", "cut_table"]

#: A k-tuple (§6.2): the leaf node id a row reaches in each of the k non-truncated trees.
KTuple = tuple[int, ...]

TRUE_SIDE = "TRUE"
NOT_TRUE_SIDE = "NOT-TRUE"


@dataclass(frozen=True)
class Decision:
    """A node where a filter skipped one child (§5), kept for explain output (``cost.decisions``)."""

    node: int
    cut_key: str
    skipped: str  # TRUE_SIDE or NOT_TRUE_SIDE


@dataclass
class PartitionTree:
    node_cut: list[Any] = field(default_factory=lambda: [None])
    true_child: list[int] = field(default_factory=lambda: [-1])
    not_true_child: list[int] = field(default_factory=lambda: [-1])
    parent: list[int] = field(default_factory=lambda: [-1])
    depth: list[int] = field(default_factory=lambda: [0])

    # --- structure ------------------------------------------------------------------------

    @property
    def num_nodes(self) -> int:
        return len(self.node_cut)

    def is_leaf(self, node: int) -> bool:
        return self.node_cut[node] is None

    def split(self, node: int, cut: Any) -> tuple[int, int]:
        """Cut a leaf (§6.1 step 3); returns (TRUE child, NOT-TRUE child)."""
        if not self.is_leaf(node):
            raise ValueError(f"node {node} is already cut by {self.node_cut[node].key}")
        t, f = self.num_nodes, self.num_nodes + 1
        for _ in (t, f):
            self.node_cut.append(None)
            self.true_child.append(-1)
            self.not_true_child.append(-1)
            self.parent.append(node)
            self.depth.append(self.depth[node] + 1)
        self.node_cut[node] = cut
        self.true_child[node] = t
        self.not_true_child[node] = f
        return t, f

    def _reachable(self) -> list[int]:
        """Nodes reachable from the root (a truncated tree keeps orphaned ids), in id order."""
        out, stack = [], [0]
        while stack:
            n = stack.pop()
            out.append(n)
            if self.node_cut[n] is not None:
                stack.append(self.not_true_child[n])
                stack.append(self.true_child[n])
        return sorted(out)

    def leaves(self) -> list[int]:
        return [n for n in self._reachable() if self.node_cut[n] is None]

    def inner_nodes(self) -> list[int]:
        return [n for n in self._reachable() if self.node_cut[n] is not None]

    def cuts(self) -> list[Any]:
        return [self.node_cut[n] for n in self.inner_nodes()]

    def path(self, node: int) -> list[int]:
        """Root → node."""
        out = [node]
        while self.parent[out[-1]] >= 0:
            out.append(self.parent[out[-1]])
        return out[::-1]

    def covering_leaf(self, node: int) -> int:
        """The leaf of this tree whose subspace contains ``node``'s (nearest leaf ancestor).

        Used to map leaves of the non-truncated tree to leaves of its truncation."""
        for n in self.path(node):
            if self.node_cut[n] is None:
                return n
        raise ValueError(f"node {node} is below no leaf")  # pragma: no cover - structural bug

    def copy(self) -> PartitionTree:
        return PartitionTree(
            list(self.node_cut), list(self.true_child), list(self.not_true_child),
            list(self.parent), list(self.depth),
        )

    # --- routing (§6.2 step 1, §7) ---------------------------------------------------------

    def route(self, masks: Mapping[str, np.ndarray], num_rows: int) -> np.ndarray:
        """Leaf node id per row, given every cut's TRUE mask (``masks[cut.key]``).

        Walks the tree with index arrays: each node looks only at the rows that reach it.
        """
        leaf = np.full(num_rows, -1, dtype=np.int32)
        stack = [(0, np.arange(num_rows, dtype=np.int64))]
        while stack:
            node, idx = stack.pop()
            cut = self.node_cut[node]
            if cut is None:
                leaf[idx] = node
                continue
            m = np.asarray(masks[cut.key], dtype=bool)[idx]
            t_idx, f_idx = idx[m], idx[~m]
            if len(f_idx):
                stack.append((self.not_true_child[node], f_idx))
            if len(t_idx):
                stack.append((self.true_child[node], t_idx))
        return leaf

    # --- truncation (§6.2, last step) ------------------------------------------------------

    def truncate(
        self, leaf_blocks: Mapping[int, np.ndarray]
    ) -> tuple[PartitionTree, dict[int, np.ndarray]]:
        """Collapse every cut whose two children point to the same block set, bottom-up.

        A collapsed node becomes a leaf pointing to that set; repeated until all siblings
        differ. Node ids are kept. Any query reaching a collapsed node reached at least one
        of its original leaves (sides are never both False for a satisfiable filter) and all
        of them point to the same set, so the blocks any query gets are unchanged.
        """
        out = self.copy()
        sets: dict[int, np.ndarray] = {}
        for n in reversed(self._reachable()):  # children before parents
            if self.node_cut[n] is None:
                sets[n] = np.unique(np.asarray(leaf_blocks.get(n, ()), dtype=np.int32))
                continue
            t, f = self.true_child[n], self.not_true_child[n]
            if out.node_cut[t] is None and out.node_cut[f] is None and np.array_equal(sets[t], sets[f]):
                out.node_cut[n] = None
                out.true_child[n] = -1
                out.not_true_child[n] = -1
                sets[n] = sets[t]
        return out, {leaf: sets[leaf] for leaf in out.leaves()}

    # --- serialization helpers -------------------------------------------------------------

    def to_arrays(self, cut_index: Mapping[str, int]) -> dict[str, list[int]]:
        return {
            "cut": [-1 if c is None else cut_index[c.key] for c in self.node_cut],
            "true": list(self.true_child),
            "not_true": list(self.not_true_child),
            "parent": list(self.parent),
        }

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, Sequence[int]], cuts: Sequence[Any]) -> PartitionTree:
        """Rebuild and validate (ids in range, parents before children, consistent links)."""
        cut_ids = [int(x) for x in arrays["cut"]]
        t = [int(x) for x in arrays["true"]]
        f = [int(x) for x in arrays["not_true"]]
        p = [int(x) for x in arrays["parent"]]
        n = len(cut_ids)
        if n == 0 or not (len(t) == len(f) == len(p) == n):
            raise ValueError("node arrays are empty or of different lengths")
        if p[0] != -1:
            raise ValueError("node 0 must be the root")
        depth = [0] * n
        for i in range(n):
            if i > 0 and not (0 <= p[i] < i):
                raise ValueError(f"node {i}: parent {p[i]} is not an earlier node")
            if i > 0:
                depth[i] = depth[p[i]] + 1
            if cut_ids[i] == -1:
                if t[i] != -1 or f[i] != -1:
                    raise ValueError(f"leaf {i} has children")
                continue
            if not 0 <= cut_ids[i] < len(cuts):
                raise ValueError(f"node {i}: cut index {cut_ids[i]} outside the cut table of {len(cuts)}")
            for c in (t[i], f[i]):
                if not (i < c < n) or p[c] != i:
                    raise ValueError(f"node {i}: child {c} is not a later node whose parent is {i}")
        node_cut = [None if c == -1 else cuts[c] for c in cut_ids]
        return cls(node_cut, t, f, p, depth)


def cut_table(trees: Sequence[PartitionTree]) -> tuple[list[Any], dict[str, int]]:
    """The distinct cuts of some trees, in first-seen order, and key → index."""
    cuts: list[Any] = []
    index: dict[str, int] = {}
    for tree in trees:
        for n in range(tree.num_nodes):
            c = tree.node_cut[n]
            if c is not None and c.key not in index:
                index[c.key] = len(cuts)
                cuts.append(c)
    return cuts, index
