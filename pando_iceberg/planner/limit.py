"""LIMIT and top-k pruning (the Snowflake seed, §4 and §5).

A ``LIMIT k`` scan with no order needs any k matching rows, so when the planned files that
*fully* match the filter hold at least k rows, reading the fewest of them is enough. An
``ORDER BY c LIMIT k`` scan needs the k first rows in c's order: the fully matching files prove
that k rows reach some value of c (the boundary), and a file whose bound on c cannot reach it
holds none of the k first rows.

A file fully matches when every live row of it satisfies the filter. It is decided from the
file's metrics (``column_ranges``: lower/upper bounds, NULL and NaN counts) by the filter's own
reasoning in the other direction (``TableFilter.all_rows_satisfy``: its NOT-TRUE side is
unsatisfiable within the ranges), so Spark's semantics (three-valued logic, NaN above every
number and equal to itself) are the ones pruning uses. Whatever is not known counts against it:
a file with delete files or an unknown row count never fully matches, a missing bound leaves
that side open, a missing NULL (NaN) count means the column may hold NULL (NaN).

On a Pando layout the trees prove more (§5 read the other way, ``TreeRegions``): every row of a
block lies, in each tree, in a leaf whose block set holds the block (the map planning skips
blocks with), and a row of a leaf satisfies every cut on the leaf's path on the side the path
takes. When, in some tree, no row of any of the block's leaves can be on the filter's NOT-TRUE
side (the filter's NOT-TRUE DNF AND the path's cuts, AND the file's metrics, is unsatisfiable),
every row of every file of the block satisfies the filter, however wide its min/max bounds:
``x IN ('a', 'z')``, ``a < b``, a LIKE or an OR group a cut decides, or a conjunction split
between a cut and a bound. Only files of the layout count (a file added since is in no block);
cuts the planner ignores (their column changed, their meaning may have) and literal cuts are
dropped from the paths, which only widens the regions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from ..expr.cuts import ExprCut
from ..expr.domain import ColumnRange
from ..expr.sides import MAX_CONJUNCTIONS, AtomTable, CompiledDnf, TooComplex, dnf_satisfiable, keyed_dnf, to_dnf
from ..expr.visitor import NT, T

# Iceberg's default string metrics mode is truncate(16): a bound of 16 characters or more may be
# a truncated value. A truncated lower bound (a prefix) is still below every value; an upper one
# is only if its writer incremented it (the spec's writers do), which is not assumed here.
STRING_TRUNCATION = 16


def column_kind(iceberg_type: Any) -> str | None:
    """The filter reasoning's kind (``expr.sides.AtomTable.kind``) of a column of ``iceberg_type``
    whose bounds are used; None for types whose bounds are not."""
    from pyiceberg.types import (
        BooleanType,
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        StringType,
        TimestampType,
        TimestamptzType,
    )

    if isinstance(iceberg_type, (IntegerType, LongType)):
        return "int"
    if isinstance(iceberg_type, (FloatType, DoubleType)):
        return "float"
    if isinstance(iceberg_type, DecimalType):
        return f"decimal:{iceberg_type.scale}"
    kinds: dict[type, str] = {StringType: "string", DateType: "date", TimestamptzType: "timestamp",
                              TimestampType: "timestamp_ntz", BooleanType: "bool"}
    return kinds.get(type(iceberg_type))


def column_ranges(data_file: Any, fields: Sequence[tuple[str, Any]]) -> dict[str, ColumnRange]:
    """What ``data_file``'s metrics prove about each of ``fields`` ((lower-case name, Iceberg
    field) pairs whose type has a kind)."""
    lowers, uppers = data_file.lower_bounds or {}, data_file.upper_bounds or {}
    nulls, nans = data_file.null_value_counts or {}, data_file.nan_value_counts or {}
    out = {}
    for name, field in fields:
        kind = column_kind(field.field_type)
        if kind is None:
            continue
        fid = field.field_id
        lower, upper = _decoded(field.field_type, lowers.get(fid)), _decoded(field.field_type, uppers.get(fid))
        if kind == "string" and isinstance(upper, str) and len(upper) >= STRING_TRUNCATION:
            upper = None
        null_count = nulls.get(fid)
        out[name] = ColumnRange(kind, lower, upper, null=null_count != 0, nan=nans.get(fid) != 0,
                                only_null=null_count is not None and null_count == data_file.record_count)
    return out


def _decoded(field_type: Any, raw: bytes | None) -> Any:
    from pyiceberg.conversions import from_bytes

    if raw is None:
        return None
    try:
        return from_bytes(field_type, raw)
    except Exception:  # e.g. the bytes of the type before a promotion: no bound
        return None


class TreeRegions:
    """A finalized layout's truncated trees read as regions (module docstring): per tree, the
    path of each leaf (its cuts, each with the side taken) and the leaves holding each block's
    rows. ``ignore(cut)``: cuts the planner does not trust for this table (they are left out of
    the paths: a wider region, never a wrong one)."""

    def __init__(self, layout: Any, ignore: Any = None):
        self.paths: list[dict[int, list[tuple[Any, str]]]] = []
        self.leaves_of: list[dict[int, list[int]]] = []
        for tree, leaf_blocks in zip(layout.truncated, layout.leaf_blocks):
            paths: dict[int, list[tuple[Any, str]]] = {}
            leaves_of: dict[int, list[int]] = {}
            for leaf, blocks in leaf_blocks.items():
                nodes = tree.path(int(leaf))
                paths[int(leaf)] = [(tree.node_cut[p], T if tree.true_child[p] == c else NT)
                                    for p, c in pairwise(nodes)
                                    if not (ignore is not None and ignore(tree.node_cut[p]))]
                for b in np.asarray(blocks, dtype=np.int64).reshape(-1).tolist():
                    leaves_of.setdefault(int(b), []).append(int(leaf))
            self.paths.append(paths)
            self.leaves_of.append(leaves_of)

    @staticmethod
    def of(layout: Any, ignore: Any = None) -> TreeRegions | None:
        """The regions of ``layout``; None when its leaf → block sets are not the full table's
        (a layout not finalized: they come from a sample)."""
        return TreeRegions(layout, ignore) if getattr(layout, "finalized", False) else None


class RegionProof:
    """Does every row of a block satisfy a filter, by the trees (``TreeRegions``)? Leaf answers
    without a file's metrics are memoized (a leaf proven alone is proven for every file)."""

    def __init__(self, tf: Any):
        self.atoms = AtomTable.shared(tf.schema) if tf.schema is not None else None
        self.not_true: CompiledDnf | None = None
        if self.atoms is not None and not tf.joins and not tf.is_true_expr():
            try:
                kd = keyed_dnf(to_dnf(tf.expr, NT))
            except TooComplex:  # too many conjunctions to reason about: nothing is proven
                kd = None
            self.not_true = None if kd is None else self.atoms.compile(kd)
        self._paths: dict[tuple[int, int, int], CompiledDnf] = {}
        self._alone: dict[tuple[int, int, int], bool] = {}

    def _path_dnf(self, regions: TreeRegions, t: int, leaf: int) -> CompiledDnf:
        key = (id(regions), t, leaf)
        got = self._paths.get(key)
        if got is None:
            assert self.atoms is not None
            got = [[]]
            for cut, side in regions.paths[t][leaf]:
                if not isinstance(cut, ExprCut) or not cut.columns <= self.atoms.names:
                    continue  # a literal cut, or one on columns the table lacks: no constraint
                d = cut.compiled_dnf(side, self.atoms)
                if d is None or len(got) * len(d) > MAX_CONJUNCTIONS:
                    continue  # too complex: the region is wider without it
                got = [a + b for a in got for b in d]
            self._paths[key] = got
        return got

    def _leaf(self, regions: TreeRegions, t: int, leaf: int, extra: list) -> bool:
        assert self.atoms is not None and self.not_true is not None
        key = (id(regions), t, leaf)
        alone = self._alone.get(key)
        if alone is None:
            alone = self._alone[key] = not dnf_satisfiable(self.atoms, self.not_true, self._path_dnf(regions, t, leaf))
        if alone or not extra:
            return alone
        return not dnf_satisfiable(self.atoms, self.not_true, self._path_dnf(regions, t, leaf), extra)

    def proves(self, regions: TreeRegions, block: int, ranges: dict[str, ColumnRange]) -> bool:
        """In some tree, every leaf holding ``block``'s rows lies (with ``ranges``, what the
        file's metrics prove) inside the filter."""
        if self.atoms is None or self.not_true is None:
            return False
        extra = []
        for name, r in ranges.items():
            if name in self.atoms.names:
                term, kind = self.atoms.column_term(name)
                if kind == r.kind:
                    extra.append((term, kind, r.domain()))
        for t, leaves_of in enumerate(regions.leaves_of):
            leaves = leaves_of.get(int(block))
            if leaves and all(self._leaf(regions, t, leaf, extra) for leaf in leaves):
                return True
        return False


def fully_matching(tf: Any, tasks: Sequence[Any], schema: Any,
                   blocks: Sequence[tuple[TreeRegions, int] | None] | None = None) -> np.ndarray:
    """Per task: does every live row of its data file satisfy the filter ``tf`` (a
    ``TableFilter``)? ``schema`` is the table's Iceberg schema the filter was bound to.
    ``blocks``: per task, the regions of the layout whose block holds its file and that block
    (None: a file outside every layout), for the trees' proof beyond the bounds."""
    return fully_matching_by(tf, tasks, schema, blocks)[0]


def fully_matching_by(tf: Any, tasks: Sequence[Any], schema: Any,
                      blocks: Sequence[tuple[TreeRegions, int] | None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``fully_matching``, and per task whether only the trees proved it (its bounds did not)."""
    out = np.zeros(len(tasks), dtype=bool)
    by_trees = np.zeros(len(tasks), dtype=bool)
    if tf.joins:
        return out, by_trees
    wanted = tf.constrained_columns()
    fields = [(f.name.lower(), f) for f in schema.fields if f.name.lower() in wanted]
    proof: RegionProof | None = None
    for i, task in enumerate(tasks):
        data_file = task.file
        if task.delete_files or data_file.record_count is None or data_file.record_count < 0:
            continue
        ranges = column_ranges(data_file, fields)
        out[i] = tf.all_rows_satisfy(ranges)
        placed = blocks[i] if blocks is not None else None
        if not out[i] and placed is not None:
            if proof is None:
                proof = RegionProof(tf)
            out[i] = by_trees[i] = proof.proves(placed[0], placed[1], ranges)
    return out, by_trees


def limit_tasks(tasks: Sequence[Any], matching: np.ndarray, k: int) -> list[Any] | None:
    """The fewest fully matching tasks (``matching``) holding at least ``k`` rows, largest first
    (ties in plan order), kept in plan order; None when all of them hold fewer (or ``k`` < 0)."""
    if k < 0:
        return None
    if k == 0:
        return []
    index = np.flatnonzero(matching)
    rows = np.fromiter((int(tasks[int(i)].file.record_count) for i in index), dtype=np.int64, count=len(index))
    if rows.sum() < k:
        return None
    largest_first = np.lexsort((index, -rows))
    need = int(np.searchsorted(np.cumsum(rows[largest_first]), k, side="left")) + 1
    return [tasks[int(i)] for i in np.sort(index[largest_first[:need]])]


def _without_nan_bounds(r: ColumnRange | None) -> ColumnRange | None:
    """A NaN bound (an old writer's) bounds nothing in Spark's order: no bound."""
    if r is None or not any(isinstance(b, float) and b != b for b in (r.lower, r.upper)):
        return r
    nan_free = [None if isinstance(b, float) and b != b else b for b in (r.lower, r.upper)]
    return ColumnRange(r.kind, nan_free[0], nan_free[1], r.null, True, r.only_null)


@dataclass(frozen=True)
class Ordering:
    """``ORDER BY column [ASC|DESC] [NULLS FIRST|LAST]`` in Spark's order of values: NULLs where
    ``nulls_first`` says, NaN above every number, -0.0 equal to 0.0."""
    column: str  # lower case
    descending: bool
    nulls_first: bool

    def sql(self) -> str:
        return f"{self.column} {'DESC' if self.descending else 'ASC'} NULLS {'FIRST' if self.nulls_first else 'LAST'}"


def top_k_tasks(tasks: Sequence[Any], matching: np.ndarray, schema: Any, order: Ordering,
                k: int) -> tuple[list[Any], Any] | None:
    """Top-k pruning: the tasks that may hold one of the ``k`` first matching rows in ``order``,
    in plan order, and the boundary value; None when nothing is proven (fewer than ``k`` rows
    certainly reach a value, or the column's bounds are not used).

    What a fully matching task (``matching``) proves about its rows (``reached_values``): every
    non-NULL row is at least its lower bound (NaN too, being above every number) and, when the
    task holds no NaN, at most its upper bound; and where bounds are values of the file
    (``ATTAINED_KINDS``), one row *is* its upper (lower) bound. Taking these values best first
    until they count ``k`` rows gives a boundary B that ``k`` matching rows reach, so no row
    beyond B is among the ``k`` first: a task is dropped when its bound on the other side is
    beyond B (ties kept: a row equal to B may be one of them), unless it may hold a row that
    sorts before every value (a NULL with NULLS FIRST, a NaN in descending order)."""
    field = next((f for f in schema.fields if f.name.lower() == order.column), None)
    kind = column_kind(field.field_type) if field is not None else None
    if kind is None or k < 0 or field is None:
        return None
    ranges = [_without_nan_bounds(column_ranges(t.file, [(order.column, field)]).get(order.column)) for t in tasks]
    if k == 0:
        return [], None
    values, rows = reached_values([tasks[int(i)].file for i in np.flatnonzero(matching)],
                                  [ranges[int(i)] for i in np.flatnonzero(matching)], field, order)
    if sum(rows) < k:
        return None
    best_first = sorted(range(len(values)), key=values.__getitem__, reverse=order.descending)
    reached = np.cumsum([rows[i] for i in best_first])
    boundary = values[best_first[int(np.searchsorted(reached, k, side="left"))]]
    floating = kind == "float"

    def may_hold(r) -> bool:
        if r is None:
            return True
        if (order.nulls_first and r.null) or (order.descending and floating and r.nan):
            return True
        if r.only_null:
            return False
        if order.descending:
            return r.upper is None or r.upper >= boundary
        return r.lower is None or r.lower <= boundary

    return [t for t, r in zip(tasks, ranges) if may_hold(r)], boundary


# Kinds whose Iceberg bounds are values of the file: its writers record a numeric, date,
# timestamp or boolean column's exact min/max over its non-NULL, non-NaN values (only strings
# and binary are truncated). A file with delete files never fully matches, so those values are
# live rows. Strings are left out: a bound may be a truncated prefix or an incremented one.
ATTAINED_KINDS = ("int", "float", "date", "timestamp", "timestamp_ntz", "bool")


def reached_values(files: Sequence[Any], ranges: Sequence[ColumnRange | None], field: Any,
                   order: Ordering) -> tuple[list[Any], list[int]]:
    """Values that rows of fully matching ``files`` (each with its ``ranges`` on the ORDER BY
    column, NaN bounds removed) certainly reach in ``order`` (are at or before), with how many
    rows reach each: per file, in descending order, one row at its upper bound when bounds are
    attained (``ATTAINED_KINDS``) and its other non-NULL rows (NaN included) at its lower bound;
    in ascending order, one row at its lower bound and its other non-NULL, non-NaN rows at its
    upper bound. A file whose NULL (or, ascending, NaN) count is unknown proves nothing."""
    kind = column_kind(field.field_type)
    fid, floating = field.field_id, kind == "float"
    attained = kind in ATTAINED_KINDS or (kind or "").startswith("decimal:")
    values: list[Any] = []
    rows: list[int] = []
    for f, r in zip(files, ranges):
        if r is None:
            continue
        nulls = (f.null_value_counts or {}).get(fid)
        nans = (f.nan_value_counts or {}).get(fid) if floating and not order.descending else 0
        if nulls is None or nans is None:
            continue
        near, far = (r.upper, r.lower) if order.descending else (r.lower, r.upper)
        left = int(f.record_count) - int(nulls) - int(nans)
        if attained and near is not None and left > 0:
            values.append(near)
            rows.append(1)
            left -= 1
        if far is not None and left > 0:
            values.append(far)
            rows.append(left)
    return values, rows


__all__ = ["ATTAINED_KINDS", "STRING_TRUNCATION", "Ordering", "RegionProof", "TreeRegions", "column_kind",
           "column_ranges", "fully_matching", "fully_matching_by", "limit_tasks", "reached_values", "top_k_tasks"]
