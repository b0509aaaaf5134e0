"""Cuts (§4): the predicates in the nodes of a partitioning tree.

A cut splits a table's rows into its TRUE side and its NOT-TRUE side; a row whose cut is
NULL goes to the NOT-TRUE side (three-valued logic). `ExprCut` is any single-table
predicate; `LiteralCut` is a join-induced cut `col IN (SELECT pk FROM dim WHERE p)`
materialized as the key set it had when the layout was made (§7).
"""

from __future__ import annotations

import base64
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from sqlglot import exp

from pando_iceberg.expr import keys as keyset
from pando_iceberg.expr import semantics
from pando_iceberg.expr.bind import DIALECT, bind
from pando_iceberg.expr.errors import PandoExprError
from pando_iceberg.expr.evaluate import Context, evaluate_predicate
from pando_iceberg.expr.sides import NT, AtomTable, CompiledDnf, T, TooComplex, dnf_satisfiable, keyed_dnf, to_dnf


class Cut(ABC):
    key: str
    columns: frozenset[str]

    @abstractmethod
    def evaluate(self, table: pa.Table | pa.RecordBatch, ctx: Context | None = None) -> np.ndarray:
        """True exactly where the cut is TRUE (FALSE and NULL → False). ``ctx``: ``table``'s
        evaluation context when the caller shares one across cuts (``cut_masks``)."""

    @abstractmethod
    def to_json(self) -> dict:
        ...

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cut) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.key!r})"


def _schema_to_b64(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def _schema_from_b64(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


class ExprCut(Cut):
    """A single-table predicate, in canonical form (see bind.py)."""

    def __init__(self, expr: str | exp.Expr, schema: pa.Schema, table: str | None = None,
                 *, bound: bool = False):
        """`bound=True`: `expr` is already canonical (bind's output for this schema), so it
        is not bound again. A cut means what it meant when the layout was made: it is bound and
        evaluated with the default settings (UTC, ANSI off), whatever the session planning a query
        with it (a query's predicate matches it only if it means the same there)."""
        if bound and isinstance(expr, exp.Expression):
            self.expr = expr
        else:
            with semantics.using(semantics.DEFAULT):
                self.expr = bind(expr, schema, table)
        self.key = self.expr.sql(DIALECT)
        self.columns = frozenset(c.name for c in self.expr.find_all(exp.Column))
        self.lower_columns = frozenset(c.lower() for c in self.columns)
        by_lower = {f.name.lower(): f for f in schema}
        # Only the referenced columns: enough to evaluate and to reason, and small in JSON.
        self.schema = pa.schema([by_lower[c] for c in sorted(self.columns)])
        self.table = table
        self._dnf: dict[str, Any] = {}
        self._compiled: dict[tuple[int, str], tuple[AtomTable, CompiledDnf | None]] = {}
        self._sql_keys: dict[int, str] = {}  # node id → canonical SQL, for keyed_dnf
        self._alone: dict[tuple[int, str], tuple[AtomTable, bool]] = {}

    def evaluate(self, table: pa.Table | pa.RecordBatch, ctx: Context | None = None) -> np.ndarray:
        with semantics.using(semantics.DEFAULT):
            return evaluate_predicate(self.expr, table if ctx is None else ctx)

    def dnf(self, polarity: str):
        """DNF of this cut being TRUE (T) or NOT TRUE (NT); None if too complex."""
        if polarity not in self._dnf:
            try:
                self._dnf[polarity] = to_dnf(self.expr, polarity)
            except TooComplex:
                self._dnf[polarity] = None
        return self._dnf[polarity]

    def compiled_dnf(self, polarity: str, atoms: AtomTable) -> CompiledDnf | None:
        """`dnf(polarity)` with its atoms classified by `atoms` (cached per atom table:
        sides() asks every query filter about this cut)."""
        hit = self._compiled.get((id(atoms), polarity))
        if hit is None or hit[0] is not atoms:
            if len(self._compiled) > 32:  # atom tables that were replaced
                self._compiled.clear()
            kd = keyed_dnf(self.dnf(polarity), self._sql_keys)
            hit = self._compiled[(id(atoms), polarity)] = (atoms, None if kd is None else atoms.compile(kd))
        return hit[1]

    def satisfiable_alone(self, polarity: str, atoms: AtomTable) -> bool:
        """Can a row be on the ``polarity`` side of this cut, whatever else holds (sound: True
        unless proven empty; True when the DNF is too complex)? Cached per atom table: a
        filter on other columns only asks this (``TableFilter.sides``)."""
        hit = self._alone.get((id(atoms), polarity))
        if hit is None or hit[0] is not atoms:
            if len(self._alone) > 32:  # atom tables that were replaced
                self._alone.clear()
            compiled = self.compiled_dnf(polarity, atoms)
            ok = True if compiled is None else dnf_satisfiable(atoms, [[]], compiled)
            hit = self._alone[(id(atoms), polarity)] = (atoms, ok)
        return hit[1]

    def to_json(self) -> dict:
        return {"type": "expr", "key": self.key, "sql": self.key, "schema": _schema_to_b64(self.schema)}


@dataclass(frozen=True)
class CutOrigin:
    """Where a literal cut's keys come from: `SELECT dim_pk FROM dim_table WHERE predicate`
    at dimension snapshot `snapshot_id` (None if unknown). `predicate` is TableFilter SQL;
    it may contain nested `col IN (SELECT pk FROM dim2 WHERE ...)` parts (multi-hop).
    `key_basis` records why `dim_pk` was taken as the dimension's key: "declared" (Iceberg
    identifier field) or "unique" (checked on the data at layout time), None if unknown.
    `exact_at` names, for every table of the predicate's chain (the dimension and the
    sub-dimensions of its nested parts), the snapshot id at which the cut's keys are exactly
    the predicate's key set; while each table still holds that snapshot's rows, the planner
    may decide the cut by comparing predicates, with no data read (§5). None when not known
    (layouts written before it existed; keys a refresh kept stale): key sets are compared."""

    dim_table: str
    dim_pk: str
    predicate: str
    snapshot_id: int | None = None
    key_basis: str | None = None
    exact_at: tuple[tuple[str, int], ...] | None = None

    def __post_init__(self):
        if self.exact_at is not None:  # JSON gives lists or a dict: one canonical, hashable form
            pairs = self.exact_at.items() if isinstance(self.exact_at, dict) else self.exact_at
            object.__setattr__(self, "exact_at", tuple(sorted((str(t), int(s)) for t, s in pairs)))

    def tables(self) -> list[str]:
        """The dimension and every table the predicate's nested ``IN (SELECT ...)`` parts name."""
        from sqlglot import exp, parse_one

        tree = parse_one(f"SELECT 1 WHERE {self.predicate}", read="spark")
        nested = {".".join(p for p in (t.catalog, t.db, t.name) if p) for t in tree.find_all(exp.Table) if t.name}
        return [self.dim_table] + sorted(nested - {self.dim_table})

    def to_json(self) -> dict:
        d: dict[str, Any] = {"dim_table": self.dim_table, "dim_pk": self.dim_pk, "predicate": self.predicate,
             "snapshot_id": self.snapshot_id}
        if self.key_basis is not None:  # absent in layouts written before it existed
            d["key_basis"] = self.key_basis
        if self.exact_at is not None:
            d["exact_at"] = {t: s for t, s in self.exact_at}
        return d


class LiteralCut(Cut):
    """`column IN keys`, the literal version of a join-induced cut (§7)."""

    def __init__(self, column: str, keys: Any, origin: CutOrigin | dict):
        self.column = column.lower()
        self.keys = keyset.normalize_keys(keys)
        self.origin = origin if isinstance(origin, CutOrigin) else CutOrigin(**origin)
        self.columns = frozenset({self.column})
        snap = f" @snapshot={self.origin.snapshot_id}" if self.origin.snapshot_id is not None else ""
        self.key = (f"{self.column} IN (SELECT {self.origin.dim_pk} FROM {self.origin.dim_table} "
                    f"WHERE {self.origin.predicate}){snap} #keys={len(self.keys)}:{keyset.keys_digest(self.keys)}")
        # keys_array(keys) — as an IntKeyLookup for integer keys — built at the first evaluation
        # and kept: a routing task asks it batch after batch.
        self._lookup: keyset.IntKeyLookup | np.ndarray | None = None
        # The origin predicate bound per dimension schema (filters.py; binding is costly).
        self._origin_filters: dict[Any, Any] = {}

    def evaluate(self, table: pa.Table | pa.RecordBatch, ctx: Context | None = None) -> np.ndarray:
        names = {n.lower(): n for n in table.schema.names}
        if self.column not in names:
            raise PandoExprError(f"column {self.column!r} of literal cut is not in the evaluated table "
                                 f"(columns: {', '.join(table.schema.names)})")
        if self._lookup is None:
            keys = keyset.keys_array(self.keys)
            self._lookup = keyset.IntKeyLookup(keys) if keyset.is_integer_keys(self.keys) else keys
        if isinstance(self._lookup, keyset.IntKeyLookup):
            if ctx is not None and not pa.types.is_uint64(table.schema.field(names[self.column]).type):
                v = ctx.column(names[self.column])  # int64, NULLs as 0 (column_vec), shared with other cuts
                if v.kind == "int":
                    return self._lookup(v.data, v.valid)
            return keyset.member_mask(table.column(names[self.column]), self.keys, self._lookup.ks, self._lookup)
        return keyset.member_mask(table.column(names[self.column]), self.keys, self._lookup)

    def keys_to_bytes(self) -> bytes:
        return keyset.keys_to_bytes(self.keys)

    @staticmethod
    def keys_from_bytes(data: bytes) -> keyset.KeySet:
        return keyset.keys_from_bytes(data)

    def to_json(self) -> dict:
        # The key set is stored apart (a Puffin blob), addressed by this cut's key.
        return {"type": "literal", "key": self.key, "column": self.column, "origin": self.origin.to_json(),
                "num_keys": len(self.keys)}


def cut_masks(cuts: Sequence[Cut], table: pa.Table | pa.RecordBatch) -> dict[str, np.ndarray]:
    """Every cut's TRUE rows on ``table`` by key, each column converted once for all the cuts
    (one evaluation ``Context``): a layout's cuts name a few columns many times."""
    ctx = Context(table)
    return {c.key: np.asarray(c.evaluate(table, ctx), dtype=bool) for c in cuts}


def cut_from_json(d: dict, literal_keys: dict[str, object] | None = None) -> Cut:
    kind = d.get("type")
    if kind == "expr":
        cut: Cut = ExprCut(d["sql"], _schema_from_b64(d["schema"]))
    elif kind == "literal":
        if literal_keys is None or d["key"] not in literal_keys:
            raise PandoExprError(f"the key set of literal cut {d['key']!r} was not supplied")
        raw = literal_keys[d["key"]]
        # bytes(): keys_from_bytes slices and decodes, which a memoryview cannot (a no-op on bytes)
        keys = keyset.keys_from_bytes(bytes(raw)) if isinstance(raw, (bytes, bytearray, memoryview)) else raw
        cut = LiteralCut(d["column"], keys, CutOrigin(**d["origin"]))
    else:
        raise PandoExprError(f"unknown cut type {kind!r} (expected 'expr' or 'literal')")
    if "key" in d and d["key"] != cut.key:
        raise PandoExprError(f"cut key mismatch after deserialization: {d['key']!r} != {cut.key!r}")
    return cut


__all__ = ["NT", "Cut", "CutOrigin", "ExprCut", "LiteralCut", "T", "cut_from_json"]
