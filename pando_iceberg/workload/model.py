"""The workload model: the queries of a workload with their per-table filters and join edges,
the candidate cuts of a table (§6.1) and its join-induced (literal) cuts through FK→PK joins
(§6.1, §7), and key providers that read a dimension's key sets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from pando_iceberg.expr import Cut, CutOrigin, JoinFilter, LiteralCut, TableFilter
from pando_iceberg.expr import keys as keyset

from ..exceptions import WorkloadError


class PandoWorkloadError(WorkloadError, ValueError):
    """A workload statement cannot be parsed."""


@dataclass(frozen=True)
class UnsupportedPredicate:
    query_sql: str
    predicate_sql: str
    reason: str


@dataclass(frozen=True)
class JoinEdge:
    """An inner equi-join `table.column = dim_table.dim_column` seen in a query."""

    table: str
    column: str
    dim_table: str
    dim_column: str


@dataclass
class WorkloadQuery:
    sql: str
    weight: float
    filters: dict[str, TableFilter]
    tables: list[str]
    join_edges: list[JoinEdge] = field(default_factory=list)
    # One filter per read of a table (self-joins, subqueries); `filters` is their OR.
    occurrence_filters: dict[str, list[TableFilter]] = field(default_factory=dict)
    # A top-k query of one table (``workload/limits.py``): the rows it needs and its order
    # (``planner.limit.Ordering``), which the learning reads as a range (``top_k_learning``).
    top_k: tuple[int, Any] | None = None

    def table_filters(self, table: str) -> list[TableFilter]:
        return self.occurrence_filters.get(table) or ([self.filters[table]] if table in self.filters else [])


KeyProvider = Callable[[str, str, TableFilter], Any]
UniquenessOracle = Callable[[str, str], bool]  # (table, column) -> the column is unique and not NULL


class Workload:
    def __init__(self, queries: list[WorkloadQuery], unsupported: list[UnsupportedPredicate],
                 schemas: dict[str, pa.Schema], primary_keys: dict[str, list[str]]):
        self.queries = queries
        self.unsupported = unsupported
        self.schemas = schemas
        self.primary_keys = primary_keys

    def _table_key(self, table: str) -> str:
        return resolve_table(table, self.schemas)

    def candidate_cuts(self, table: str) -> list[Cut]:
        """§6.1: each query's predicate on `table` decomposed into simple predicates (no AND;
        an OR group over the table stays one cut), deduplicated by key."""
        key = self._table_key(table)
        out: dict[str, Cut] = {}
        for q in self.queries:
            for f in q.table_filters(key):
                for cut in f.candidate_cuts():
                    out.setdefault(cut.key, cut)
        return list(out.values())

    def join_induced_cuts(self, table: str, key_provider: KeyProvider,
                          filters: Iterable[TableFilter] | None = None) -> list[LiteralCut]:
        """§6.1/§7: the dimension predicates of the queries' FK→PK joins into `table`, one
        literal cut per atom of each dimension filter (nested atoms reach along chains).
        ``filters``: the table's filters to take them from instead of the queries' (e.g. the
        synthetic draws of ``templates.expected_workload``)."""
        key = self._table_key(table)
        if filters is None:
            filters = [f for q in self.queries for f in q.table_filters(key)]
        seen: dict[str, tuple[str, str, str, TableFilter]] = {}
        for f in filters:
            for j in f.joins:
                for atom in dimension_atoms(j.dim_filter):
                    ident = f"{j.column}|{j.dim_table}|{j.dim_pk}|{atom.to_sql()}"
                    seen.setdefault(ident, (j.column, j.dim_table, j.dim_pk, atom))
        cuts: dict[str, LiteralCut] = {}
        for column, dim, pk, atom in seen.values():
            basis = self.key_basis(dim, pk, key_provider)
            if basis is None:
                continue
            keys = key_provider(dim, pk, atom)
            cut = LiteralCut(column, keys, CutOrigin(dim, pk, atom.to_sql(), None, basis))
            cuts.setdefault(cut.key, cut)
        return list(cuts.values())

    def key_basis(self, dim: str, column: str, key_provider: Any) -> str | None:
        """Why `dim.column` is a primary key: ``"declared"`` (Iceberg identifier field; declared
        keys win), ``"unique"`` (no declaration; the provider's ``is_unique`` checked the data),
        or None (not a key: no join-induced cut through it)."""
        declared = self.primary_keys.get(dim)
        if declared:
            return "declared" if [c.lower() for c in declared] == [column.lower()] else None
        check = getattr(key_provider, "is_unique", None)
        return "unique" if check is not None and check(dim, column) else None

    def join_graph(self) -> list[JoinEdge]:
        edges: dict[JoinEdge, None] = {}
        for q in self.queries:
            for e in q.join_edges:
                edges.setdefault(e)
        return list(edges)

    def tables(self) -> list[str]:
        return sorted({t for q in self.queries for t in q.tables})


def dimension_atoms(f: TableFilter) -> list[TableFilter]:
    """The atoms of a dimension filter, each as a filter of its own: its simple predicates,
    and (multi-hop) each atom of every nested join as `col IN (SELECT pk FROM dim2 WHERE atom)`."""
    out = [TableFilter(cut.expr, f.schema, table=f.table) for cut in f.candidate_cuts()]
    for j in f.joins:
        for inner in dimension_atoms(j.dim_filter):
            out.append(TableFilter(None, f.schema, [JoinFilter(j.column, j.dim_table, j.dim_pk, inner)], f.table))
    return out


# ---------------------------------------------------------------- key providers


class ArrowKeyProvider:
    """Key sets computed on in-memory Arrow tables (tests, demos, samples). The Spark
    pipeline supplies its own provider that runs SQL."""

    def __init__(self, tables: dict[str, pa.Table]):
        self.tables = tables

    def _table(self, name: str) -> pa.Table:
        key = resolve_table(name, {k: None for k in self.tables})
        return self.tables[key]

    def rows(self, dim_table: str, dim_filter: TableFilter) -> np.ndarray:
        t = self._table(dim_table)
        mask = dim_filter.evaluate(t)
        for j in dim_filter.joins:  # multi-hop: recurse into the next dimension
            inner = self(j.dim_table, j.dim_pk, j.dim_filter)
            names = {n.lower(): n for n in t.schema.names}
            mask &= keyset.member_mask(t.column(names[j.column]), keyset.normalize_keys(inner))
        return mask

    def __call__(self, dim_table: str, pk_column: str, dim_filter: TableFilter) -> np.ndarray:
        t = self._table(dim_table)
        names = {n.lower(): n for n in t.schema.names}
        col = t.column(names[pk_column.lower()])
        return col.filter(pa.array(self.rows(dim_table, dim_filter))).drop_null().to_numpy(zero_copy_only=False)

    def is_unique(self, table: str, column: str) -> bool:
        t = self._table(table)
        names = {n.lower(): n for n in t.schema.names}
        col = t.column(names[column.lower()])
        return col.null_count == 0 and len(col.unique()) == len(col)


def arrow_key_provider(tables: dict[str, pa.Table]) -> ArrowKeyProvider:
    return ArrowKeyProvider(tables)


def resolve_table(name: str, schemas: dict[str, Any]) -> str:
    """The schema key for a table name: exact (case-insensitive), else by last name part
    when unambiguous."""
    low = name.lower()
    for key in schemas:
        if key.lower() == low:
            return key
    last = low.split(".")[-1]
    matches = [k for k in schemas if k.lower().split(".")[-1] == last]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise KeyError(name)
    raise PandoWorkloadError(f"table name {name!r} is ambiguous among {matches}")


__all__ = [
    "ArrowKeyProvider",
    "JoinEdge",
    "KeyProvider",
    "PandoWorkloadError",
    "UniquenessOracle",
    "UnsupportedPredicate",
    "Workload",
    "WorkloadQuery",
    "arrow_key_provider",
    "dimension_atoms",
    "resolve_table",
]
