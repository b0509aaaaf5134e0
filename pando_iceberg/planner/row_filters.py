"""Row filters: Spark's policy for filtering a table's rows by a join filter's key set
(``planner.keysets``) before its joins and aggregates see them (beyond the paper, which prunes
blocks only).

The settings (``pando_iceberg.settings``) read here, per planning: ``rowFilter.maxKeys``,
``rowFilter.minRows`` and ``joinKeys.maxDimensionRows`` (see :func:`row_filters`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..expr import keys as keyset
from ..settings import value as setting
from .caches import KEY_SETS, TOO_MANY_KEYS
from .keysets import (
    KeyReader,
    TooManyKeys,
    chain_snapshots,
    chain_within,
    dimension_keys,
    dimension_rows,
    kept_rows,
    key_set_key,
)

# Sideways information passing (beyond the paper, which prunes blocks only): a join filter's key
# set, once read, also filters the table's rows before Spark's joins and aggregates see them —
# the same reasoning that lets a file holding none of the keys be skipped lets each row holding
# none be dropped. It pays where Spark would otherwise carry the whole table through a shuffle:
# TPC-H Q17's correlated AVG per part key, Q7's sort-merge join with orders.
# A key set filters rows only when it has at most rowFilter.maxKeys keys (0: no row filters), and
# only a table of at least rowFilter.minRows rows is filtered: Spark joins a smaller one about as fast as it
# semi-joins it, and the keys' broadcast and views cost planning time (TPC-H SF 1: customer and
# supplier filtered by a nation's keys, partsupp by a nation's suppliers, 20-50 ms per query for no
# gain in the run).
# A key set is read for a row filter alone only when every table of the join's chain has at most
# this share of the filtered table's rows: reading it then costs at most about that share of
# the scan it may save (TPC-H: part and customer qualify for lineitem, orders does not).
ROW_FILTER_DIMENSION_SHARE = 0.1
# ... and it filters only when it keeps at most this share of the dimension's rows, so about that
# share of the table's: at TPC-H SF 10 (Pando k=3) Q17's 0.1 % of
# part, Q7's 8 % of supplier and Q9's 5.4 % of part made those queries 9.6×, 2.7× and 1.5× faster;
# Q3's 20 % of customer, semi-joined to orders, made it about 1 s slower in a first try (the
# semi-join repeats the join Spark does anyway, for a fifth of the rows).
ROW_FILTER_KEY_SHARE = 0.1


# A row filter's key set is first estimated on every ESTIMATE_EVERY-th row of a dimension of at
# least ESTIMATE_MIN_ROWS rows (4,096 rows or more: a share's standard error under 0.8 %); one
# estimated above ESTIMATE_MARGIN × the share a row filter may keep is not read (TPC-H SF 1: Q8's
# 20 % and Q22's 28 % of customer took 4-6 ms of planning each to be refused).
ESTIMATE_EVERY = 16
ESTIMATE_MIN_ROWS = 65_536
ESTIMATE_MARGIN = 1.5


def estimated_key_share(catalog, join) -> float | None:
    """The share of the dimension's rows (= of its keys: the joined column is unique) the join
    keeps, estimated on every :data:`ESTIMATE_EVERY`-th row; None when the dimension has fewer
    than :data:`ESTIMATE_MIN_ROWS` rows or its chain more than the setting ``joinKeys.maxDimensionRows``."""
    tables: dict[str, Any] = {}
    chain_snapshots(catalog, join, tables)
    rows = dimension_rows(tables[join.dim_table])
    limit = setting("joinKeys.maxDimensionRows")
    if rows < ESTIMATE_MIN_ROWS or any(dimension_rows(t) > limit for t in tables.values()):
        return None
    _, mask = kept_rows(tables, join, ESTIMATE_EVERY)
    return float(mask.mean()) if len(mask) else None


@dataclass(frozen=True)
class RowFilter:
    """Rows of the table whose ``join.column`` is not among ``keys`` are dropped before Spark's
    joins: exact, because the join filter is (an inner FK→PK join keeps none of them)."""

    join: Any  # the JoinFilter
    keys: Any  # its key set (expr.keys)
    source: str  # how the keys were read

    def note(self) -> str:
        return (f"row filter: {self.join.column} semi-joined with {keyset.keys_len(self.keys):,} keys of "
                f"{self.join.dim_table} ({self.source})")


def constrains(join) -> bool:
    """Does the join keep fewer than all of its dimension's keys (a predicate other than TRUE
    somewhere along its chain)? ``fk IN (SELECT pk FROM dim WHERE TRUE)`` filters nothing."""
    return not join.dim_filter.is_true_expr() or any(constrains(j) for j in join.dim_filter.joins)


def row_filters(catalog, tf, table_rows: int, *, max_keys: int | None = None,
                reader: Callable[[int], KeyReader] | None = None,
                repeats: Callable[[Any], str | None] | None = None) -> tuple[list[RowFilter], list[str]]:
    """The join filters of ``tf`` to apply to the table's rows, with their key sets, and notes
    for those left out. A join that filters nothing is left out. A key set may have at most
    ``max_keys`` (default the setting ``rowFilter.maxKeys``) keys and :data:`ROW_FILTER_KEY_SHARE` of
    its dimension's rows; a table under the setting ``rowFilter.minRows`` rows gets none. One already
    on the filter is used; otherwise one is read (cached, :func:`dimension_keys`; above
    the setting ``joinKeys.maxDimensionRows`` rows by ``reader(limit)``, which raises past ``limit`` keys) when
    every table of the chain has at most :data:`ROW_FILTER_DIMENSION_SHARE` of ``table_rows``,
    unless its estimate (:func:`estimated_key_share`) is above :data:`ESTIMATE_MARGIN` × the limit.
    ``repeats(join)``: why the query's own plan already does that join's filtering (its note), or
    None; such a join gets no row filter and no key set is read for it."""
    max_keys = setting("rowFilter.maxKeys") if max_keys is None else max_keys
    out: list[RowFilter] = []
    notes: list[str] = []
    if max_keys <= 0 or catalog is None:
        return out, notes
    min_rows = setting("rowFilter.minRows")
    if table_rows < min_rows:
        if any(constrains(j) for j in tf.joins):
            notes.append(f"no row filters: {table_rows:,} rows (fewer than {min_rows:,}: "
                         "Spark's own join is as fast)")
        return out, notes
    for j in tf.joins:
        if not constrains(j):
            continue
        why = repeats(j) if repeats is not None else None
        if why is not None:
            notes.append(f"no row filter for {j.to_sql()}: {why}")
            continue
        dim_rows = dimension_rows(catalog.load_table(j.dim_table))
        limit = min(max_keys, int(dim_rows * ROW_FILTER_KEY_SHARE))
        if j.dim_keys is not None:
            keys, source = j.dim_keys, j.key_source or "supplied"
        elif chain_within(catalog, j, int(table_rows * ROW_FILTER_DIMENSION_SHARE)):
            seen = key_set_key(catalog, j, {})
            known = TOO_MANY_KEYS.get(seen)
            if known is not None and limit <= known:
                notes.append(f"no row filter for {j.to_sql()}: more than {known:,} keys "
                             "(an earlier read, same snapshots)")
                continue
            try:
                share = None if KEY_SETS.get(seen) is not None else estimated_key_share(catalog, j)
                if share is not None and share * dim_rows > ESTIMATE_MARGIN * limit:
                    notes.append(f"no row filter for {j.to_sql()}: about {share:.0%} of {j.dim_table}'s "
                                 f"{dim_rows:,} keys, estimated on one row in {ESTIMATE_EVERY} (more than "
                                 f"{limit:,}: at most {max_keys:,} and {ROW_FILTER_KEY_SHARE:.0%})")
                    continue
                r = dimension_keys(catalog, j, fallback=None if reader is None else reader(limit))
            except TooManyKeys as e:  # the reader stopped past the limit
                TOO_MANY_KEYS.put(seen, limit)
                notes.append(f"no row filter for {j.to_sql()}: {e}")
                continue
            except Exception as e:  # an unreadable dimension: Spark's own join decides
                notes.append(f"no row filter for {j.to_sql()}: {type(e).__name__}: {e}")
                continue
            keys, source = r.keys, r.source
        else:
            notes.append(f"no row filter for {j.to_sql()}: its chain has a table above "
                         f"{ROW_FILTER_DIMENSION_SHARE:.0%} of this table's rows")
            continue
        if keys is None:
            notes.append(f"no row filter for {j.to_sql()}: {source}")
        elif keyset.keys_len(keys) > limit:
            notes.append(f"no row filter for {j.to_sql()}: {keyset.keys_len(keys):,} keys (more than {limit:,}: "
                         f"at most {max_keys:,} and {ROW_FILTER_KEY_SHARE:.0%} of {j.dim_table}'s {dim_rows:,} rows)")
        else:
            out.append(RowFilter(j, keys, source))
    return out, notes


__all__ = [
    "ESTIMATE_EVERY",
    "ESTIMATE_MARGIN",
    "ESTIMATE_MIN_ROWS",
    "ROW_FILTER_DIMENSION_SHARE",
    "ROW_FILTER_KEY_SHARE",
    "RowFilter",
    "constrains",
    "estimated_key_share",
    "row_filters",
]
