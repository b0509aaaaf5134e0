"""What every layout learned on one sample shares: each candidate cut's rows on the sample and
every query's sides on every cut, each computed once.

A rewrite learns several layouts from the same sample, cuts and queries (the 1..k trees that
k-selection compares, the candidates of the per-template guard), then measures them on the
sample with other draws of the same templates (``workload/in_block.py``). None of that changes
a cut's TRUE rows or a filter's answer about a cut, so an ``Evaluations`` made once per sample
is passed to each of them (``build_layout``, ``files_read``, ...):

- ``masks(cuts)``: C × n bool, each cut evaluated on the sample once (``evaluate_cuts``);
- ``sides(filters, cuts)``: the Q × C ``SideMatrix``, each (filter, cut) answered once: a table
  filter with the expression cuts that are domains of one term of its table (comparisons,
  ranges, IN lists: most candidate cuts; ``expr.sides.single_term``) at once, vectorized over
  the cuts (``expr.sides.bulk_sides``, the
  same reasoning as the filter's ``sides``, which decides every other pair one by one), and
  with the join-induced literal cuts (§7) at once (``expr.filters.literal_sides``: each filter's
  join once per cut origin, the dimension filters' comparisons with the cuts' origin predicates
  through ``bulk_sides`` where they are domains of one term). Filters that say the same thing
  (the same SQL on the same table and column types, the same key-set objects in their joins:
  templates' draws repeat) are asked once between them.

A cut is known by its key (what names it in a serialized layout); the sample never changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..expr import ExprCut, LiteralCut, TableFilter
from ..expr.errors import PandoExprError
from ..expr.filters import literal_sides
from ..expr.sides import NT, T, TooComplex, bulk_sides, single_term
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
        urows, ucols = np.unique(rows), np.unique(cols)
        todo = ~self._known[np.ix_(urows, ucols)]
        if todo.any():
            self._bulk(urows[todo.any(axis=1)], ucols[todo.any(axis=0)])
            todo = ~self._known[np.ix_(urows, ucols)]
        for i, j in zip(*np.nonzero(todo)):  # the questions never asked, each once
            r, c = int(urows[i]), int(ucols[j])
            t, n = self._filters[r].sides(self._cuts[c])
            self._may_true[r, c], self._may_not[r, c], self._known[r, c] = bool(t), bool(n), True
        return SideMatrix(self._may_true[np.ix_(rows, cols)], self._may_not[np.ix_(rows, cols)])

    def _bulk(self, rows: np.ndarray, cols: np.ndarray) -> None:
        """Answer at once what ``bulk_sides`` can of the filters ``rows`` × cuts ``cols``: table
        filters, by their atom table, with the expression cuts on their table's columns that
        are domains of one term (``single_term``), and with every literal cut (``literal_sides``); the rest is asked
        one by one."""
        by_atoms: dict[int, tuple[Any, list[tuple[int, Any]]]] = {}
        tables = [int(r) for r in rows if isinstance(self._filters[int(r)], TableFilter)
                  and type(self._filters[int(r)]).sides is TableFilter.sides]  # others answer their own way
        literal = [int(c) for c in cols if isinstance(self._cuts[int(c)], LiteralCut)]
        if tables and literal:
            may_true, may_not = literal_sides([self._filters[r] for r in tables], [self._cuts[c] for c in literal])
            at = np.ix_(np.asarray(tables, dtype=np.int64), np.asarray(literal, dtype=np.int64))
            self._may_true[at], self._may_not[at], self._known[at] = may_true, may_not, True
        for r in tables:
            f = self._filters[r]
            try:
                parts = f.side_parts()
            except (PandoExprError, TooComplex):
                continue
            if parts is None or parts[1] is None:
                continue
            by_atoms.setdefault(id(parts[0]), (parts[0], []))[1].append((int(r), (parts[1], parts[2])))
        for atoms, members in by_atoms.values():
            picked, constraints = [], []
            for c in cols:
                cut = self._cuts[int(c)]
                if not isinstance(cut, ExprCut) or not cut.columns <= atoms.names:
                    continue
                try:
                    one = single_term(atoms, cut.compiled_dnf(T, atoms), cut.compiled_dnf(NT, atoms))
                except (PandoExprError, TooComplex):
                    continue
                if one is not None:
                    picked.append(int(c))
                    constraints.append(one)
            if not picked:
                continue
            may_true, may_not, answered = bulk_sides(atoms, [p for _, p in members], constraints)
            at = np.ix_(np.asarray([r for r, _ in members], dtype=np.int64), np.asarray(picked, dtype=np.int64))
            self._may_true[at] = np.where(answered, may_true, self._may_true[at])
            self._may_not[at] = np.where(answered, may_not, self._may_not[at])
            self._known[at] |= answered

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
