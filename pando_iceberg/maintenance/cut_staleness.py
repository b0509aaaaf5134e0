"""Which literal (join-induced) cuts of a layout hold a key set the dimension no longer gives,
for ``layout_health`` (through pyiceberg, no Spark).

A literal cut ``fk IN (SELECT pk FROM dim WHERE p)`` stores the keys ``p`` selected when it was
made (or last refreshed). Pruning stays exact whatever the dimension did since: the planner
compares predicates only while every table of the cut's chain holds the rows the keys were
read from (``CutOrigin.exact_at``, ``planner.literal_cuts.predicates_decide``) and compares key sets
otherwise. A stale set only costs reads: the rows whose keys moved are read on both sides, and
rows laid out later are routed by the old membership. ``refresh_literal_cuts`` updates the sets
(keys that laid-out fact rows hold stay until a re-layout).

A cut is stale when predicates cannot decide it and the key set ``p`` selects now (read as the
planner reads it, ``planner.keysets.dimension_keys``) differs from the stored one; when the keys
cannot be read here (a dimension above the planner's row limit, a predicate that no longer
binds), when the dimension changed since the cut's snapshot. For a cut over one attribute of
the dimension (an attribute-range cut ``A < c``, or a workload literal on A), what changed is
also told by comparing the dimension at the cut's snapshot (Iceberg time travel) with now: new
values of A, keys whose A changed, new keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from ..expr import JoinFilter, LiteralCut, TableFilter, semantics
from ..expr import keys as keyset
from ..planner.keysets import dimension_columns, dimension_keys, dimension_rows
from ..planner.literal_cuts import predicates_decide
from ..settings import value as setting

#: How many of an attribute's new values a report names.
EXAMPLES = 3


@dataclass(frozen=True)
class AttributeChange:
    """What changed in one attribute of a dimension between two snapshots."""

    new_values: int  # distinct non-NULL values now that the older snapshot did not hold
    examples: tuple[Any, ...]  # some of them
    keys_changed: int  # keys in both snapshots whose value of the attribute differs
    keys_new: int  # keys now that the older snapshot did not hold
    keys_gone: int  # keys of the older snapshot that are no longer there


@dataclass(frozen=True)
class StaleCut:
    """A literal cut whose stored key set the dimension no longer gives."""

    cut: str  # "fk IN (SELECT pk FROM dim WHERE p)"
    dim_table: str
    attribute: str | None  # the one dimension column the predicate names (None: several, or nested)
    from_snapshot: int | None  # the dimension snapshot the keys were read at
    to_snapshot: int | None  # the dimension's current snapshot
    keys_missing: int | None  # keys that satisfy the predicate now and the set lacks (None: not read)
    keys_extra: int | None  # keys in the set that no longer satisfy it
    change: AttributeChange | None = None  # the attribute between the two snapshots (None: not compared)
    partition: str | None = None  # the partition whose layout holds the cut (None: a whole-table layout)

    def describe(self) -> str:
        where = f"partition {self.partition}: " if self.partition is not None else ""
        what = f" (cuts on {self.attribute})" if self.attribute else ""
        if self.to_snapshot is None:
            head = f"{self.dim_table} could not be read (dropped, or a predicate that no longer binds)"
        elif self.from_snapshot != self.to_snapshot:
            head = f"{self.dim_table} changed since snapshot {self.from_snapshot} (now {self.to_snapshot})"
        else:
            head = (f"keys kept stale by a refresh at snapshot {self.from_snapshot} of {self.dim_table} (laid-out "
                    "fact rows hold them; a re-layout regroups them)")
        parts = [head]
        c = self.change
        if c is not None:
            if c.new_values:
                shown = ", ".join(repr(v) for v in c.examples) + (", ..." if c.new_values > len(c.examples) else "")
                parts.append(f"{c.new_values} new value(s) of {self.attribute} ({shown})")
            if c.keys_changed:
                parts.append(f"{c.keys_changed} key(s) changed {self.attribute}")
            if c.keys_new or c.keys_gone:
                parts.append(f"{c.keys_new} key(s) added, {c.keys_gone} removed")
        if self.keys_missing is None:
            parts.append("the key set was not compared (the dimension was not read here)")
        else:
            parts.append(f"the key set lacks {self.keys_missing} key(s) that satisfy the predicate now and holds "
                         f"{self.keys_extra} that no longer do")
        return f"{where}{self.cut}{what}: " + "; ".join(parts)


def _snapshot_id(table) -> int | None:
    snap = table.current_snapshot()
    return snap.snapshot_id if snap is not None else None


def _sorted_keys(keys: Any) -> np.ndarray:
    arr = np.asarray(keyset.keys_array(keyset.normalize_keys(keys)))
    return np.unique(arr.astype(np.int64) if arr.dtype.kind in "iu" else arr)


def _origin_join(catalog, cut: LiteralCut, tables: dict[str, Any]) -> JoinFilter:
    """The cut's key set query as a join filter over the dimension's current schema."""
    o = cut.origin
    schemas = {}
    for name in o.tables():
        if name not in tables:
            tables[name] = catalog.load_table(name)
        schemas[name] = tables[name].schema().as_arrow()
    with semantics.using(semantics.DEFAULT):  # as the layout's key sets were read
        flt = TableFilter.from_sql(o.predicate, schemas[o.dim_table], o.dim_table,
                                   schemas={n: s for n, s in schemas.items() if n != o.dim_table})
    return JoinFilter(cut.column, o.dim_table, o.dim_pk, flt)


def attribute_change(dim, pk: str, attribute: str, since: int) -> AttributeChange | None:
    """``attribute`` of the dimension at snapshot ``since`` against now (None when that snapshot
    is gone, the table is above the planner's row limit, or the columns are not both there)."""
    if dim.snapshot_by_id(since) is None or dimension_rows(dim) > setting("joinKeys.maxDimensionRows"):
        return None
    names = {f.name.lower(): f.name for f in dim.schema().fields}
    if pk.lower() not in names or attribute.lower() not in names:
        return None
    k, a = names[pk.lower()], names[attribute.lower()]
    try:
        then = dim.scan(snapshot_id=since, selected_fields=(k, a)).to_arrow()
    except Exception:  # a column the older schema lacks
        return None
    now = dimension_columns(dim, [k, a]).select([k, a])
    then = then.rename_columns([k, "__then"]).cast(pa.schema([pa.field(k, now.schema.field(k).type),
                                                              pa.field("__then", now.schema.field(a).type)]))
    joined = now.join(then, keys=k, join_type="inner")
    differ = pc.fill_null(pc.not_equal(joined[a], joined["__then"]),
                          pc.xor(pc.is_null(joined[a]), pc.is_null(joined["__then"])))
    fresh = pc.filter(pc.unique(now[a].drop_null()), pc.invert(pc.is_in(pc.unique(now[a].drop_null()),
                                                                        value_set=then["__then"].combine_chunks())))
    fresh = fresh.take(pc.sort_indices(fresh))
    return AttributeChange(len(fresh), tuple(fresh[:EXAMPLES].to_pylist()), int(pc.sum(differ).as_py() or 0),
                           int(pc.sum(pc.invert(pc.is_in(now[k], value_set=then[k].combine_chunks()))).as_py() or 0),
                           int(pc.sum(pc.invert(pc.is_in(then[k], value_set=now[k].combine_chunks()))).as_py() or 0))


def refresh_call(table_name: str) -> str:
    """The CALL that refreshes the key sets of a table's literal cuts."""
    return f"CALL pando.system.refresh_literal_cuts(table => {exp.Literal.string(table_name).sql('spark')})"


def stale_cuts(catalog, layouts: Mapping[str | None, Sequence[Any]]) -> list[StaleCut]:
    """The stale literal cuts of ``layouts`` (partition, None for a whole-table layout → the
    layout's cuts; module docstring), each dimension's reads shared by all."""
    tables: dict[str, Any] = {}
    memo: dict = {}
    changes: dict[tuple, AttributeChange | None] = {}  # (dimension, pk, attribute, snapshot) → change
    out = []
    for partition, cut in ((p, c) for p, cs in layouts.items() for c in cs):
        if not isinstance(cut, LiteralCut) or predicates_decide(catalog, cut.origin, memo):
            continue
        o = cut.origin
        text = f"{cut.column} IN (SELECT {o.dim_pk} FROM {o.dim_table} WHERE {o.predicate})"
        try:
            join = _origin_join(catalog, cut, tables)
        except Exception:  # a dropped dimension or a predicate that no longer binds
            join = None
        dim = tables.get(o.dim_table)
        now = _snapshot_id(dim) if dim is not None else None
        missing = extra = None
        if join is not None:
            try:
                found = dimension_keys(catalog, join).keys
            except Exception:  # an unreadable dimension: reported as changed, not compared
                found = None
            if found is not None:
                current, stored = _sorted_keys(found), _sorted_keys(cut.keys)
                missing, extra = len(np.setdiff1d(current, stored)), len(np.setdiff1d(stored, current))
                if not missing and not extra:
                    continue
        if missing is None and now == o.snapshot_id:
            continue  # not read, and the dimension did not move: nothing to report
        attribute = None
        named = {c.name for c in join.dim_filter.expr.find_all(exp.Column)} if join is not None else set()
        if join is not None and not join.dim_filter.joins and len(named) == 1:
            attribute = next(iter(named))
        change = None
        if attribute is not None and dim is not None and o.snapshot_id is not None and now != o.snapshot_id:
            key = (o.dim_table, o.dim_pk, attribute.lower(), o.snapshot_id)
            if key not in changes:
                changes[key] = attribute_change(dim, o.dim_pk, attribute, o.snapshot_id)
            change = changes[key]
        out.append(StaleCut(text, o.dim_table, attribute, o.snapshot_id, now, missing, extra, change, partition))
    return out


__all__ = ["AttributeChange", "StaleCut", "attribute_change", "refresh_call", "stale_cuts"]
