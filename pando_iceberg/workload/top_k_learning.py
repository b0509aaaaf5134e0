"""Top-k queries as the layout learns from them (the Snowflake seed §5; the paper's §6.1 cuts).

A top-k query ``SELECT .. FROM t [WHERE p] ORDER BY c [ASC|DESC] [NULLS ..] LIMIT k`` reads, once
pruned (``planner/limit.py``), the files that may hold its k first rows: the boundary that the
fully matching files prove removes the rest. Its filter ``p`` alone says nothing about ``c``, so a
layout learned from ``p`` has no cut on ``c``, every block holds some high and some low values, and
the boundary drops few files. For learning only (proposing cuts, costing layouts), such a query
is read as the range query it answers, an ordinary filter the one cut/filter reasoning binds:

    p AND c >= b   (DESC)        p AND c <= b   (ASC)

``b`` is the value of the k-th best row matching ``p``, estimated on the learning sample: the
r-th best matching sample value in the query's order, r = ⌈k × sample fraction⌉, at least the
sample's best, and at least a block's rows on the sample (``block_rows``): a layout reads no less
than one block, and the cheapest layout for the query is the one whose best block holds the best
rows; a cut with fewer sample rows on its side than a leaf keeps (§6.1's threshold) is never
taken. The trees can then cut on ``c`` at that quantile, and a held-out draw with another k reads
the block(s) holding the best values, whose fully matching files give the planner its boundary.
The boundary is put on the learning's draws (training and synthetic, ``templates.py``), not on the
training queries before their templates are drawn: it follows each draw's filter (another
moment, another day) and is never itself a literal drawn anew (a top-k query's boundary redrawn
"as the data lies" was a range over half the table, and taught the trees cuts no query needs).

Only an order column the filter does not constrain gets a boundary. A filter on it already gives
the trees cuts at the edge where the best rows start (a moment's first trips begin at the moment),
and the planner drops files by their bounds on it, not by the trees' regions: the window
``p AND c <= b`` would price as skipped a block the trees keep away from it but whose bounds
span it (the greedy merge of §6.2 joins k-tuples months apart), which the planner reads (BENCHMARKS.md,
the LIMIT and top-k section).

NULLs sort as the query says (Spark's default: first for ASC, last for DESC), NaN above every
number. With NULLs first, a boundary among the NULLs is ``p AND c IS NULL``, and a boundary past
them keeps them: ``p AND (c <= b OR c IS NULL)`` (only when the matching sample holds NULLs: the
estimate is the sample's). The query stays ``p`` alone (no boundary) when the r-th best row lies
beyond the matching sample rows (the query reads all of them: there is no narrower range), in
the NULLs sorted last (every non-NULL row comes first), or at NaN or an infinity (no range of
numbers). A LIMIT without ORDER BY needs nothing: any fully matching files serve it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from pando_iceberg.expr import TableFilter
from pando_iceberg.expr.evaluate import arrow_kind
from pando_iceberg.expr.values import render

from .templates import to_line, typed_value

if TYPE_CHECKING:
    from ..planner.limit import Ordering
    from .model import Workload


def boundary_rank(k: int, fraction: float, block_rows: float = 1.0) -> int:
    """The rank (1 = the best) of the matching sample row whose value estimates the boundary of
    a top-``k`` query on a sample of ``fraction`` of the table (module docstring)."""
    return max(1, math.ceil(k * fraction - 1e-9), math.ceil(block_rows - 1e-9))


def top_k_learning_filter(f: TableFilter, order: Ordering, k: int, sample: pa.Table, fraction: float,
                          block_rows: float = 1.0) -> TableFilter:
    """The filter ``f`` of a top-``k`` query in ``order`` as the learning reads it: ``f`` AND the
    estimated boundary on the order's column, or ``f`` alone (module docstring)."""
    names = {n.lower(): n for n in sample.schema.names}
    if order.column not in names or f.joins or order.column in f.constrained_columns():
        return f
    column = sample.column(names[order.column])
    kind = arrow_kind(column.type)
    if kind is None:
        return f
    values = column.filter(pa.array(f.evaluate(sample), pa.bool_()))
    nulls = values.null_count
    rank = boundary_rank(k, fraction, block_rows)
    col = exp.column(order.column)
    if order.nulls_first:
        if rank <= nulls:
            return _and(f, exp.Is(this=col, expression=exp.Null()))
        rank -= nulls
    present = values.drop_null()
    if rank > len(present):
        return f  # the query reads every matching row (or reaches the NULLs sorted last)
    if pa.types.is_floating(present.type):
        nan = pc.is_nan(present)
        nans = int(pc.sum(nan).as_py() or 0)
        if order.descending and rank <= nans:
            return f  # NaN sorts above every number: no range of numbers holds the best rows
        present = present.filter(pc.invert(nan))
        if order.descending:
            rank -= nans
        if rank > len(present):
            return f  # among the NaNs sorted last in ascending order
    ranked = present.take(pc.array_sort_indices(present, order="descending" if order.descending else "ascending"))
    value = ranked[rank - 1].as_py()
    if isinstance(value, float) and not math.isfinite(value):
        return f
    literal = render(typed_value(to_line(value, kind[0]), kind[0]), compared_to_float=True)
    bound: exp.Expression = exp.GTE(this=col, expression=literal) if order.descending \
        else exp.LTE(this=col.copy(), expression=literal)
    if order.nulls_first and nulls:
        bound = exp.Paren(this=exp.Or(this=bound, expression=exp.Is(this=col.copy(), expression=exp.Null())))
    return _and(f, bound)


def _and(f: TableFilter, predicate: exp.Expression) -> TableFilter:
    expr = predicate if f.is_true_expr() else exp.and_(exp.paren(f.expr.copy(), copy=False), predicate, copy=False)
    return TableFilter(expr, f.schema, f.joins, f.table)


def top_k_learning_queries(wl: Workload, target: str, queries: Sequence[tuple[TableFilter, float]],
                           sample: pa.Table, fraction: float,
                           block_rows: float = 1.0) -> list[tuple[TableFilter, float]]:
    """``queries`` (draws of ``wl``'s queries on ``target``, with their weights: its training
    filters, and the synthetic draws ``templates.expected_workload`` makes of their templates)
    with every top-k query's filter read as the range query it answers (module docstring); the
    others as they are. A training filter takes its query's order and k; a synthetic draw, those
    of its template's training draws when they all share one order (the largest of their k), so
    the boundary follows each draw's own filter (a held-out moment, another day). It is applied
    to the draws, not to the training queries before their templates are drawn: the boundary is
    a consequence of the filter, not a literal of the template to draw anew. ``fraction``: the
    share of the table ``sample`` holds; ``block_rows``: the rows of a block on the sample."""
    from .templates import template_key

    by_filter: dict[int, tuple[int, Any]] = {}
    orders: dict[str, set[Any]] = {}
    ks: dict[str, int] = {}
    for q in wl.queries:
        if target not in q.filters:
            continue
        f = q.filters[target]
        key = template_key(f)
        orders.setdefault(key, set()).add(None if q.top_k is None else q.top_k[1])
        if q.top_k is not None:
            by_filter[id(f)] = q.top_k
            ks[key] = max(ks.get(key, 0), q.top_k[0])
    if not by_filter or sample.num_rows == 0:
        return list(queries)
    by_template = {key: (ks[key], next(iter(o))) for key, o in orders.items() if len(o) == 1 and None not in o}
    out = []
    for f, w in queries:
        shape = by_filter.get(id(f))
        if shape is None and by_template and not f.is_true_expr():
            shape = by_template.get(template_key(f))
        out.append((f if shape is None else top_k_learning_filter(f, shape[1], shape[0], sample, fraction,
                                                                  block_rows), w))
    return out


__all__ = ["boundary_rank", "top_k_learning_filter", "top_k_learning_queries"]
