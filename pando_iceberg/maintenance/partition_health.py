"""Drift of per-partition layouts: for each partition of a partitioned table, the
share of rows and files outside its layout and the skipping efficiency of the recorded workload
now versus at layout time; the degraded partitions, and those without a layout yet (a new day),
get a re-layout CALL with a ``where`` that selects exactly them.

Rows read "now" come from the real planner (``plan_scan``, Iceberg's pruning then each
partition's trees): one plan per workload query, its chosen files grouped by partition, so the
cost does not grow with the number of partitions. "At layout time" is the partition layout's own
prediction (``pando.expected-rows-fraction``, the cost model of ``Layout.cost`` on the rows
written), as for whole-table layouts.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

EPOCH = dt.date(1970, 1, 1)


@dataclass
class PartitionHealth:
    partition: str
    has_layout: bool
    files_in_layout: int = 0
    files_outside: int = 0
    rows_in_layout: int = 0
    rows_outside: int = 0
    fraction_at_layout: float | None = None
    fraction_now: float | None = None
    where: str | None = None  # a predicate selecting exactly this partition (None: not expressible)
    reasons: tuple[str, ...] = ()

    @property
    def share_outside(self) -> float:
        return self.rows_outside / max(1, self.rows_in_layout + self.rows_outside)

    @property
    def status(self) -> str:
        return "no layout" if not self.has_layout else ("degraded" if self.reasons else "ok")

    def row(self) -> tuple:
        fmt = lambda v: None if v is None else round(float(v), 4)  # noqa: E731
        return (self.partition, self.status, self.files_in_layout, self.files_outside, self.rows_outside,
                fmt(self.share_outside), fmt(self.fraction_at_layout), fmt(self.fraction_now),
                "; ".join(self.reasons) or None)


COLUMNS = [("partition", "string"), ("status", "string"), ("layout_files_live", "int"),
           ("files_outside_layout", "int"), ("rows_outside_layout", "bigint"), ("rows_outside_share", "double"),
           ("workload_rows_fraction_at_layout", "double"), ("workload_rows_fraction_now", "double"),
           ("reasons", "string")]


def _literal(value: Any) -> exp.Expression:
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, (int, float)):
        return exp.Literal.number(value)
    if isinstance(value, dt.datetime):
        return exp.Cast(this=exp.Literal.string(value.isoformat(sep=" ")), to=exp.DataType.build("timestamp"))
    if isinstance(value, dt.date):
        return exp.Cast(this=exp.Literal.string(value.isoformat()), to=exp.DataType.build("date"))
    return exp.Literal.string(str(value))


def _month(months: int) -> dt.date:
    return dt.date(1970 + months // 12, months % 12 + 1, 1)


def partition_predicate(spec, schema, values) -> str | None:
    """Spark SQL selecting exactly the rows of one partition (pyiceberg spec, schema, partition
    Record), or None when a transform cannot be inverted to a range (bucket, truncate)."""
    from pyiceberg.transforms import DayTransform, HourTransform, IdentityTransform, MonthTransform, YearTransform

    parts: list[exp.Expr] = []
    for pos, field in enumerate(spec.fields):
        column = exp.column(schema.find_column_name(field.source_id), quoted=True)
        value, t = values[pos], field.transform
        if value is None:
            parts.append(exp.Is(this=column.copy(), expression=exp.Null()))
            continue
        if isinstance(t, IdentityTransform):
            parts.append(exp.EQ(this=column.copy(), expression=_literal(value)))
            continue
        if isinstance(t, YearTransform):
            lo, hi = dt.date(1970 + value, 1, 1), dt.date(1971 + value, 1, 1)
        elif isinstance(t, MonthTransform):
            lo, hi = _month(value), _month(value + 1)
        elif isinstance(t, DayTransform):
            lo = value if isinstance(value, dt.date) else EPOCH + dt.timedelta(days=int(value))
            hi = lo + dt.timedelta(days=1)
        elif isinstance(t, HourTransform):
            lo = dt.datetime(1970, 1, 1) + dt.timedelta(hours=int(value))
            hi = lo + dt.timedelta(hours=1)
        else:
            return None
        parts.append(exp.and_(exp.GTE(this=column.copy(), expression=_literal(lo)),
                              exp.LT(this=column.copy(), expression=_literal(hi))))
    return exp.and_(*parts).sql(dialect="spark") if parts else None


def _schemas(tbl, table_name: str, out: dict[str, Any]) -> dict[str, Any]:
    """Arrow schemas of the table and of the other tables of its namespace (a workload may join
    them), from the table's catalog; filled once into ``out``."""
    out[table_name] = tbl.schema().as_arrow()
    catalog = getattr(tbl, "catalog", None)
    if catalog is not None and "." in table_name:
        for ident in catalog.list_tables(table_name.rsplit(".", 1)[0]):
            name = ".".join(ident)
            if name not in out:
                try:
                    out[name] = catalog.load_table(name).schema().as_arrow()
                except Exception:
                    pass  # unreadable: a workload naming it gets no estimate
    return out


def partition_health(tbl, sidecar, table_name: str, max_rows_outside: float, max_efficiency_loss: float,
                     workload: list) -> tuple[list[PartitionHealth], str | None]:
    """Health of every partition with live files (pyiceberg table, its format-version-2 sidecar)
    and a ``where`` selecting exactly the degraded ones (None when none is, or when a transform
    such as bucket cannot be selected by a predicate)."""
    from ..planner import plan_scan
    from ..workload import parse_workload

    inside = sidecar.partition_of_path()
    schema = tbl.schema()
    specs = tbl.specs()
    health: dict[str, PartitionHealth] = {}
    part_of_path: dict[str, str] = {}
    for task in tbl.scan().plan_files():
        f = task.file
        name = inside.get(f.file_path) or specs[f.spec_id].partition_to_path(f.partition, schema)
        part_of_path[f.file_path] = name
        h = health.get(name)
        if h is None:
            h = health[name] = PartitionHealth(name, name in sidecar.partitions,
                                               where=partition_predicate(specs[f.spec_id], schema, f.partition))
        if f.file_path in inside:
            h.files_in_layout += 1
            h.rows_in_layout += int(f.record_count)
        else:
            h.files_outside += 1
            h.rows_outside += int(f.record_count)
    # Each partition's recorded workload (the one its layout was learned from) through the real
    # planner: one plan per query of each distinct workload, rows read grouped by partition.
    groups: dict[str, list[str]] = {}
    for name in health:
        if name in sidecar.partitions:
            text = sidecar.partitions[name].sidecar.properties.get("pando.workload") or json.dumps(workload)
            groups.setdefault(text, []).append(name)
    read: dict[str, float] = {}
    weights: dict[str, float] = {}
    schemas: dict[str, Any] = {}
    for text, names in groups.items():
        statements = [tuple(x) if isinstance(x, list) else x for x in json.loads(text)]
        try:
            wl = parse_workload(statements, schemas or _schemas(tbl, table_name, schemas)) if statements else None
        except Exception:
            wl = None  # the workload names other tables we do not load here: no estimate
        members = set(names)
        for q in (wl.queries if wl is not None else []):
            if table_name not in q.filters:
                continue
            for name in names:
                weights[name] = weights.get(name, 0.0) + q.weight
            for t in plan_scan(tbl, q.filters[table_name]).tasks:
                name = part_of_path.get(t.file.file_path)
                if name in members:
                    read[name] = read.get(name, 0.0) + q.weight * int(t.file.record_count)
    for name, h in health.items():
        if not h.has_layout:  # e.g. a new day: laid out by the recommended CALL too
            h.reasons = ("no layout yet: its files are always read",)
            continue
        props = sidecar.partitions[name].sidecar.properties
        h.fraction_at_layout = float(props["pando.expected-rows-fraction"]) if "pando.expected-rows-fraction" in props \
            else None
        total = h.rows_in_layout + h.rows_outside
        h.fraction_now = read.get(name, 0.0) / (weights[name] * total) if weights.get(name) and total else None
        reasons = []
        if h.share_outside > max_rows_outside:
            reasons.append(f"{h.share_outside:.0%} of rows outside the layout (> {max_rows_outside:.0%})")
        at, now = h.fraction_at_layout, h.fraction_now
        if at and now is not None and (now - at) / at > max_efficiency_loss:
            reasons.append(f"the workload reads {(now - at) / at:.0%} more rows than at layout time "
                           f"(> {max_efficiency_loss:.0%})")
        if h.files_in_layout == 0:
            reasons.append("no live file belongs to the layout")
        h.reasons = tuple(reasons)
    rows = sorted(health.values(), key=lambda h: h.partition)
    degraded = [h for h in rows if h.reasons]
    where = None
    if degraded and all(h.where for h in degraded):
        where = " OR ".join(f"({h.where})" for h in degraded) if len(degraded) > 1 else degraded[0].where
    return rows, where


def relayout_call(table_name: str, where: str | None) -> str:
    """The exact CALL that re-lays out the partitions ``where`` selects (all when None)."""
    quoted = f'"{where}"' if where is not None and '"' not in where else exp.Literal.string(where or "").sql("spark")
    return (f"CALL pando.system.rewrite_data_files(table => {exp.Literal.string(table_name).sql()}, "
            f"strategy => 'pando'" + (f", where => {quoted})" if where is not None else ")"))
