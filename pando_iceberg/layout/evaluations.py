"""What every layout learned on one sample shares: each candidate cut's rows on the sample and
every query's sides on every cut, each computed once.

A rewrite learns several layouts from the same sample, cuts and queries (the 1..k trees that
k-selection compares, the candidates of the per-template guard), then measures them on the
sample with other draws of the same templates (``workload/in_block.py``). None of that changes
a cut's TRUE rows or a filter's answer about a cut, so an ``Evaluations`` made once per sample
is passed to each of them (``build_layout``, ``files_read``, ...):

- ``masks(cuts)``: C × n bool, each cut evaluated on the sample once (``evaluate_cuts``);
- ``sides(filters, cuts)``: the Q × C ``SideMatrix``, each (filter, cut) asked once of the
  filter's own ``sides`` — the one place that decides a side. Filters that say the same thing
  (the same SQL on the same table and column types, the same key-set objects in their joins:
  templates' draws repeat) are asked once between them.

A cut is known by its key (what names it in a serialized layout); the sample never changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .cost import SideMatrix
from .topdown import evaluate_cuts

__all__ = ["Evaluations"]


def _filter_key(f: Any) -> Any:
    """Filters with the same key get the same ``sides`` answers: ``TableFilter``'s SQL, table and
    column types of its own and its dimensions' schemas, and the identity of every key set its
    joins (and theirs) carry; any other filter is only itself."""
    if not hasattr(f, "memo_key") or not hasattr(f, "schema_fingerprints"):
        return ("object", id(f))
    fps = f.schema_fingerprints()
    return (f.memo_key(), tuple(sorted((str(k), v) for k, v in fps.items())), _key_sets(f))


def _key_sets(f: Any) -> tuple:
    return tuple((None if j.dim_keys is None else id(j.dim_keys), _key_sets(j.dim_filter))
                 for j in getattr(f, "joins", None) or ())


class Evaluations:
    """Cut masks and side answers on one sample, computed on demand and kept (module docstring)."""

    def __init__(self, sample: Any):
        self.sample = sample
        self._masks: dict[str, np.ndarray] = {}
        self._rows: dict[Any, int] = {}  # filter key → row of the side arrays
        self._filters: list[Any] = []  # one filter per row (keeps ids in keys alive)
        self._cols: dict[str, int] = {}  # cut key → column of the side arrays
        self._cuts: list[Any] = []
        self._known = np.zeros((0, 0), dtype=bool)
        self._may_true = np.zeros((0, 0), dtype=bool)
        self._may_not = np.zeros((0, 0), dtype=bool)

    def masks(self, cuts: Sequence[Any]) -> np.ndarray:
        """C × n bool: cut c is TRUE on sample row r (``evaluate_cuts``), each cut evaluated once."""
        todo = list({c.key: c for c in cuts if c.key not in self._masks}.values())
        if todo:
            for c, m in zip(todo, evaluate_cuts(todo, self.sample)):
                self._masks[c.key] = m
        n = self.sample.num_rows
        if not cuts:
            return np.zeros((0, n), dtype=bool)
        return np.stack([self._masks[c.key] for c in cuts])

    def mask_map(self, cuts: Sequence[Any]) -> dict[str, np.ndarray]:
        """Cut key → TRUE rows on the sample, as ``route_ktuples`` takes them (each cut evaluated once)."""
        self.masks([c for c in cuts if c.key not in self._masks])
        return {c.key: self._masks[c.key] for c in cuts}

    def sides(self, filters: Sequence[Any], cuts: Sequence[Any]) -> SideMatrix:
        """The Q × C side matrix of ``filters`` over ``cuts`` (``cost.side_matrix``), asking each
        distinct filter about each cut at most once over the life of this object."""
        rows = np.asarray([self._row(f) for f in filters], dtype=np.int64)
        cols = np.asarray([self._col(c) for c in cuts], dtype=np.int64)
        self._grow()
        urows = np.unique(rows)
        todo = ~self._known[np.ix_(urows, cols)]
        for i, j in zip(*np.nonzero(todo)):  # the questions never asked, each once
            r, c = int(urows[i]), int(cols[j])
            t, n = self._filters[r].sides(self._cuts[c])
            self._may_true[r, c], self._may_not[r, c], self._known[r, c] = bool(t), bool(n), True
        return SideMatrix(self._may_true[np.ix_(rows, cols)], self._may_not[np.ix_(rows, cols)])

    def _row(self, f: Any) -> int:
        key = _filter_key(f)
        got = self._rows.get(key)
        if got is None:
            got = self._rows[key] = len(self._filters)
            self._filters.append(f)
        return got

    def _col(self, cut: Any) -> int:
        got = self._cols.get(cut.key)
        if got is None:
            got = self._cols[cut.key] = len(self._cuts)
            self._cuts.append(cut)
        return got

    def _grow(self) -> None:
        have = self._known.shape
        need = (len(self._filters), len(self._cuts))
        if have[0] >= need[0] and have[1] >= need[1]:
            return
        shape = tuple(max(h, 2 * n if n > h else h) for h, n in zip(have, need))
        for name in ("_known", "_may_true", "_may_not"):
            old = getattr(self, name)
            new = np.zeros(shape, dtype=bool)
            new[: have[0], : have[1]] = old
            setattr(self, name, new)
