"""The layout's join-induced (literal) cuts at planning (paper §5, §7): when the query's dimension
predicate decides a literal cut by itself (implication or disjointness through the unique key,
no data read), which of the query's join filters need key sets instead, and which literal cuts
the planner ignores because their join column is no longer the dimension's key.
"""

from __future__ import annotations

from ..expr import same_table
from ..settings import value as setting
from .keysets import chain_within, current_snapshot_id
from .uniqueness import key_basis


def holds_rows_of(table, snapshot_id: int) -> bool:
    """Does the table's current snapshot hold exactly the rows of ``snapshot_id``, under the same
    schema? True when it is that snapshot, or descends from it through ``replace`` snapshots
    only (files rewritten, data unchanged), and the current schema is that snapshot's."""
    from pyiceberg.table.snapshots import Operation

    then = table.snapshot_by_id(snapshot_id)
    if then is None or then.schema_id != table.metadata.current_schema_id:
        return False
    snap = table.current_snapshot()
    while snap is not None and snap.snapshot_id != snapshot_id:
        if snap.summary is None or snap.summary.operation != Operation.REPLACE or snap.parent_snapshot_id is None:
            return False
        snap = table.snapshot_by_id(snap.parent_snapshot_id)
    return snap is not None


def predicates_decide(catalog, origin, memo: dict | None = None) -> bool:
    """May a literal cut of ``origin`` be decided by comparing the query's dimension predicate
    with the cut's own (paper §5: implication / disjointness through the unique key, no data
    read)? Only while its keys are exactly the predicate's key set over the rows every table of
    its chain holds now (``CutOrigin.exact_at``, ``holds_rows_of``); otherwise key sets are
    compared. ``memo`` (one dict per plan) keeps the answers per (table, snapshot)."""
    if origin.exact_at is None or catalog is None:
        return False
    memo = {} if memo is None else memo
    for name, sid in origin.exact_at:
        if (name, sid) not in memo:
            try:
                memo[(name, sid)] = holds_rows_of(catalog.load_table(name), sid)
            except Exception:  # a dropped or unreadable table: compare key sets (they say why)
                memo[(name, sid)] = False
        if not memo[(name, sid)]:
            return False
    return True


def joins_needing_keys(catalog, tf, cuts, memo: dict | None = None) -> list:
    """The join filters of ``tf`` without a key set that meet one of ``cuts`` (a layout's) that
    predicates cannot decide (``predicates_decide``): comparing key sets is exact whatever
    happened to the dimension since the layout; comparing predicates only while its rows are
    the ones the cut's keys were read from. And those whose foreign key a range cut of
    ``cuts`` splits, when the chain is within the join-pruning limit (``chain_within``)."""
    if not getattr(tf, "joins", None):
        return []
    memo = {} if memo is None else memo
    # Only the cuts on this filter's own joins: each check loads the tables of the cut's chain.
    open_joins = {(j.column, j.dim_table, j.dim_pk) for j in tf.joins if j.dim_keys is None}
    undecided = {key for c in cuts if hasattr(c, "origin")
                 and (key := (c.column, c.origin.dim_table, c.origin.dim_pk)) in open_joins
                 and not predicates_decide(catalog, c.origin, memo)}
    ranged = {col.lower() for c in cuts if not hasattr(c, "origin") for col in c.columns}

    def needed(j) -> bool:
        if (j.column, j.dim_table, j.dim_pk) in undecided:
            return True
        # A range cut on the foreign key is decided by the key set's range (TableFilter.key_ranges):
        # read where join pruning reads it anyway (small dimensions, cached whole).
        if j.column not in ranged or catalog is None:
            return False
        try:
            return chain_within(catalog, j, setting("joinPruning.maxDimensionRows"))
        except Exception:  # an unreadable dimension: the range cuts read both sides
            return False

    return [j for j in tf.joins if j.dim_keys is None and needed(j)]


def non_unique_literal_joins(table, layout, memo: dict | None = None,
                             joined: set[tuple[str, str]] | None = None) -> dict[tuple[str, str], str]:
    """(dimension, pk) of the layout's literal cuts whose pk is no longer the dimension's key
    (not declared, and not unique in the dimension's current snapshot) → a note for explain.
    Their cuts are ignored by the planner (a stale uniqueness never gives a wrong result).
    ``joined``: only these (dimension, pk), the ones the query's filter joins — a literal cut
    whose join the query lacks is decided by the key's nullness alone, which holds whatever the
    dimension holds, so its dimension is not loaded. ``memo`` (one dict per plan) keeps the
    answers across the partition layouts of one plan."""
    catalog = getattr(table, "catalog", None)
    out: dict[tuple[str, str], str] = {}
    if catalog is None:
        return out
    memo = {} if memo is None else memo
    dims = {(c.origin.dim_table, c.origin.dim_pk) for c in layout.cuts if hasattr(c, "origin")}
    if joined is not None:
        dims = {(d, pk) for d, pk in dims if any(same_table(d, jd) and pk.lower() == jpk for jd, jpk in joined)}
    for dim_name, pk in sorted(dims):
        if (dim_name, pk) not in memo:
            dim = catalog.load_table(dim_name)
            memo[(dim_name, pk)] = None if key_basis(dim, pk) is not None else (
                f"literal cuts through {dim_name}.{pk} ignored: it is no longer unique "
                f"(snapshot {current_snapshot_id(dim)}) nor a declared identifier field")
        if memo[(dim_name, pk)] is not None:
            out[(dim_name, pk)] = memo[(dim_name, pk)]
    return out


__all__ = ["holds_rows_of", "joins_needing_keys", "non_unique_literal_joins", "predicates_decide"]
