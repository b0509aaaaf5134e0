"""Attribute-range cuts: join-induced cuts over groups of a dimension attribute's values (§7,
beyond the paper's literal cuts).

A join-induced cut taken from a training predicate (``p_brand = 'Brand#137'``) decides the
queries that name that brand; another brand, held out, matches none of them. Where a dimension's
surrogate keys follow its attributes (a loader grouping products by category), range cuts on the
foreign key decide it anyway; where keys are assigned in load order they decide nothing, and the
fact is read whole.

So for every attribute A a dimension filter of the workload compares with a point literal (a
template's parameter: ``p_brand = ?``, ``c_region_key = ? AND c_segment = ?``), the cuts

    fact.fk IN (SELECT pk FROM dim WHERE A < c)

at boundaries c among A's sorted values, chosen so that each group between two consecutive
boundaries holds a similar share of the fact's rows in the sample (dyadic quantiles: the
halves, then the quarters, ... down to ``groups`` groups). Every value of A, named in training
or not, lies on one side of each: the query ``A = 'x'`` (or ``A IN``, ``A BETWEEN``) implies
``A < c`` or its negation. They are ordinary literal cuts (``expr.LiteralCut``): key sets read
from the dimension, decided at query time by comparing predicates while the dimension holds
the rows the keys were read from, by comparing key sets after it changed, refreshed by
``refresh_literal_cuts`` and reported stale by ``layout_health`` like every other.

Where the dimension's keys follow A (in key order its value changes about once per value), the
foreign key's range cuts already decide every value and no attribute-range cut is proposed.

This module proposes the cuts as fact filters (one join each) that
``Workload.join_induced_cuts`` turns into literal cuts; it reads no data itself: the caller
supplies, per dimension, each attribute's aggregate (``AttributeWeights``: do the keys follow
it, and the fact sample's rows before each value a boundary may fall on), at most a few rows per
quantile and never the dimension's rows (``spark/attribute_weights.py`` aggregates in Spark;
``arrow_weights`` is the same on Arrow tables).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from pando_iceberg.expr import JoinFilter, TableFilter
from pando_iceberg.expr.errors import PandoExprError
from pando_iceberg.expr.evaluate import arrow_kind
from pando_iceberg.expr.values import render
from pando_iceberg.workload.templates import literal_columns, to_line, typed_value

#: The most groups of one attribute's values: 2^4 groups, 15 cuts. Finer groups gave the
#: greedy optimizer more cuts to fit the sample's draws with (a 30-block star fact read more
#: with 32 groups, and its optimizer took twice as long).
MAX_GROUPS = 16
_ORDERED_KINDS = ("int", "decimal", "float", "date", "timestamp", "timestamp_ntz", "string")


@dataclass(frozen=True)
class AttributeWeights:
    """What the cuts of one dimension attribute A are chosen from: do the dimension's keys follow
    A (``keys_follow``), and, of A's ``count`` distinct values joined by the fact's sample (sorted
    in Spark's order, no NULL or NaN; ``total`` sample rows), the ones a boundary may fall on —
    every value but the smallest, or only those next to a quantile (``near_quantiles``) — with
    ``below``, the sample's rows of the values before each."""

    follows: bool
    values: pa.Array
    below: np.ndarray
    count: int
    total: int


# (dimension table, its pk as its schema spells it, attributes, the fact sample's foreign keys,
# groups) -> each attribute's AttributeWeights
DimensionWeights = Callable[[str, str, Sequence[str], pa.Array, int], dict[str, AttributeWeights]]


def group_count(blocks: float) -> int:
    """Groups per attribute for a table of about ``blocks`` blocks: the power of two at or above
    it (a group smaller than a block cannot be read alone), at most ``MAX_GROUPS``."""
    return int(min(MAX_GROUPS, 2 ** math.ceil(math.log2(max(2.0, blocks)))))


def attributes(filters: Iterable[TableFilter]) -> list[tuple[TableFilter, JoinFilter, str]]:
    """(filter, join, attribute) for every attribute of an ordered type that a one-hop join's
    dimension filter compares with a point literal (``=``, ``<>``, IN: a range on it is cut at
    its own literals, §6.1), once per (fk, dimension, pk, attribute), first seen."""
    out: dict[tuple[str, str, str, str], tuple[TableFilter, JoinFilter, str]] = {}
    for f in filters:
        for j in f.joins:
            dim = j.dim_filter
            if dim.schema is None or dim.is_true_expr():
                continue
            names = {n.lower(): n for n in dim.schema.names}
            for col in literal_columns(dim, "point"):
                kind = arrow_kind(dim.schema.field(names[col]).type) if col in names else None
                if kind is not None and kind[0] in _ORDERED_KINDS and col != j.dim_pk:
                    out.setdefault((j.column, j.dim_table.lower(), j.dim_pk, col), (f, j, names[col]))
    return list(out.values())


def fact_weights(fact_keys: pa.Array, dim_keys: pa.Array, values: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """A's distinct values (sorted in Spark's order, no NULL or NaN) and how many of the fact's
    rows (``fact_keys``, its sample's foreign keys) join a dimension row of each (``dim_keys`` →
    ``values``, the dimension's key and attribute columns)."""
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    if fact_keys.type != dim_keys.type:
        fact_keys = pc.cast(fact_keys, dim_keys.type)
    at = pc.index_in(fact_keys, value_set=dim_keys)
    joined = values.take(at.drop_null())
    if pa.types.is_floating(joined.type):
        joined = joined.filter(pc.invert(pc.is_nan(joined)))
    counts = pc.value_counts(joined.drop_null())
    distinct = counts.field("values")
    order = pc.sort_indices(distinct)
    return distinct.take(order), counts.field("counts").take(order).to_numpy(zero_copy_only=False)


def keys_follow(dim_keys: pa.Array, values: pa.Array) -> bool:
    """Do the dimension's keys follow the attribute: in key order, does its value change at most
    twice per distinct value (a loader that grouped products by brand)? Then the foreign key's
    range cuts (``TableFilter.key_range_cuts``) already decide every value, trained or not."""
    order = pc.sort_indices(dim_keys)
    ordered = values.take(order)
    if pa.types.is_dictionary(ordered.type):
        ordered = ordered.cast(ordered.type.value_type)
    if len(ordered) < 2:
        return True
    changes = pc.sum(pc.fill_null(pc.not_equal(ordered[1:], ordered[:-1]), True)).as_py() or 0
    return changes <= 2 * pc.count_distinct(ordered).as_py()


def split_points(below: np.ndarray, count: int, total: float, groups: int) -> list[int]:
    """Positions in ``below`` (the weight before each of a sorted attribute's values but the
    first, or before some of them: those ``near_quantiles``) of the cuts ``A < value`` that split
    the weight at the dyadic quantiles j / ``groups`` (each the nearest split point; the same one
    once). ``count``: the attribute's distinct values; fewer than groups: every value on its own."""
    if count < 2:
        return []
    if count <= groups:
        return list(range(len(below)))
    if total <= 0:
        return []
    wanted = np.arange(1, groups) / groups * total
    pick = np.abs(np.asarray(below, dtype=np.float64)[None, :] - wanted[:, None]).argmin(axis=1)
    return sorted(set(int(i) for i in pick))


def near_quantiles(before: np.ndarray, count: int, total: int, groups: int) -> np.ndarray:
    """Which of a sorted attribute's values (``before``: the weight of the values before each,
    ``count`` of them) a boundary may fall on (``split_points``): every one but the smallest when
    there are at most ``groups``; else, ``before`` being strictly increasing, the nearest split
    point to a quantile j / groups is the last value at or below it or the next one: the values
    where ``before * groups // total`` steps and their neighbours, and the second and the last.
    The same test runs in Spark (``spark/attribute_weights.py``), so only these reach the driver."""
    idx = np.arange(len(before))
    if count <= groups or total <= 0:
        return idx >= 1
    q = np.asarray(before, dtype=np.int64) * groups // total
    step = np.zeros(len(before), dtype=bool)
    step[1:] |= q[1:] != q[:-1]
    step[:-1] |= q[:-1] != q[1:]
    return (idx >= 1) & (step | (idx == 1) | (idx == count - 1))


def candidates(follows: bool, values: pa.Array, weights: np.ndarray, groups: int) -> AttributeWeights:
    """``AttributeWeights`` from every distinct value (sorted) and the sample's rows of each."""
    counts = np.asarray(weights, dtype=np.int64)
    before = np.cumsum(counts) - counts
    total = int(counts.sum())
    keep = near_quantiles(before, len(values), total, groups)
    return AttributeWeights(follows, values.filter(pa.array(keep)), before[keep], len(values), total)


def boundaries(values: pa.Array, weights: np.ndarray, groups: int) -> list:
    """Indices i of ``values`` (sorted, distinct) such that the cuts ``A < values[i]`` split the
    weight (rows per value) at the dyadic quantiles j / ``groups`` (``split_points``)."""
    counts = np.asarray(weights, dtype=np.int64)
    return [i + 1 for i in split_points(np.cumsum(counts)[:-1], len(values), int(counts.sum()), groups)]


def arrow_weights(dimensions: Callable[[str, Sequence[str]], pa.Table]) -> DimensionWeights:
    """``DimensionWeights`` from dimension tables in Arrow (``dimensions(table, columns)``)."""
    def weights(dim: str, pk: str, attrs: Sequence[str], fact_keys: pa.Array,
                groups: int) -> dict[str, AttributeWeights]:
        t = dimensions(dim, [pk, *attrs])
        keys = t.column(pk).combine_chunks()
        out = {}
        for a in attrs:
            column = t.column(a).combine_chunks()
            out[a] = candidates(keys_follow(keys, column), *fact_weights(fact_keys, keys, column), groups)
        return out

    return weights


def attribute_range_filters(filters: Sequence[TableFilter], fact_sample: pa.Table, weights: DimensionWeights,
                            groups: int) -> list[TableFilter]:
    """The attribute-range cuts of ``filters`` (the fact's training and synthetic filters), each as
    a filter of the fact with one join ``fk IN (SELECT pk FROM dim WHERE A < c)``; a filter's
    join-induced cut is that cut (``Workload.join_induced_cuts``). ``fact_sample``: the fact's
    sample (its foreign keys weigh the values); ``weights``: aggregates a dimension's attributes."""
    names = {n.lower(): n for n in fact_sample.schema.names}
    found = []  # (fact filter, join, the dimension's pk as its schema spells it, attribute)
    for fact, j, attr in attributes(filters):
        pk = next((n for n in j.dim_filter.schema.names if n.lower() == j.dim_pk), None)  # type: ignore[union-attr]
        if j.column in names and pk is not None:
            found.append((fact, j, pk, attr))
    # (fk, dimension, pk) → its attributes, aggregated at once
    wanted: dict[tuple[str, str, str], dict[str, None]] = {}
    for _, j, pk, attr in found:
        wanted.setdefault((j.column, j.dim_table, pk), {})[attr] = None
    read = {(fk, dim, pk): weights(dim, pk, list(attrs), fact_sample.column(names[fk]).combine_chunks(), groups)
            for (fk, dim, pk), attrs in wanted.items()}
    out: list[TableFilter] = []
    for fact, j, pk, attr in found:
        w = read[(j.column, j.dim_table, pk)][attr]
        if w.follows:
            continue
        values = w.values
        kind = arrow_kind(values.type)
        if kind is None:
            continue
        for i in split_points(w.below, w.count, w.total, groups):
            literal = render(typed_value(to_line(values[i].as_py(), kind[0]), kind[0]), compared_to_float=True)
            try:
                cut = TableFilter(exp.LT(this=exp.column(attr, quoted=True), expression=literal),
                                  j.dim_filter.schema, table=j.dim_table)
            except PandoExprError:  # a value the binder refuses: no cut there
                continue
            out.append(TableFilter(None, fact.schema, [JoinFilter(j.column, j.dim_table, j.dim_pk, cut)], fact.table))
    return out


__all__ = ["MAX_GROUPS", "AttributeWeights", "DimensionWeights", "arrow_weights", "attribute_range_filters",
           "attributes", "boundaries", "candidates", "fact_weights", "group_count", "keys_follow", "near_quantiles",
           "split_points"]
