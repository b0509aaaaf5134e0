"""Server-side scan planning: a ``PlanTableScanRequest`` → the file scan tasks Pando keeps.

The request's filter (Iceberg's expression JSON, parsed by pyiceberg's own model), projection,
snapshot and ``min-rows-requested`` go to ``pando_iceberg.scan`` — the same planner a
Python caller gets: Iceberg's partition and min/max pruning, every tree of the table's
layout, join pruning, and LIMIT pruning where it applies. A table without a layout gets
Iceberg's plan from the same call. Should planning with Pando raise, the answer is pyiceberg's
own plan of the same scan (never a wrong result, only more files).

The answer uses pyiceberg's wire models (``pyiceberg.catalog.rest.scan_planning``): each task's
data file, its delete files (listed once per response, referenced by index) and its residual
filter. Small plans answer inline; larger ones answer with plan-task tokens, one page of tasks
each, fetched with ``fetchScanTasks``. Plans and their pages are kept in a bounded store for
``fetchPlanningResult``, ``cancelPlanning`` and the pages.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pyiceberg.catalog.rest.scan_planning import (
    CountMap,
    PlanCompleted,
    PlanTableScanRequest,
    RESTDataFile,
    RESTEqualityDeleteFile,
    RESTFileScanTask,
    RESTPositionDeleteFile,
    ScanTasks,
)
from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    BoundPredicate,
    Not,
    Or,
)
from pyiceberg.expressions.visitors import bind
from pyiceberg.manifest import DataFile, DataFileContent
from pyiceberg.table import FileScanTask, Table
from pyiceberg.typedef import IcebergBaseModel

from .errors import RestError, bad_request

log = logging.getLogger("pando_iceberg.serve")

__all__ = ["PlanStore", "Planned", "plan_request", "scan_tasks"]

ALWAYS_TRUE = AlwaysTrue()


@dataclass
class Planned:
    """One plan's tasks and how it was made (``pando``: Pando's planner; else why not)."""

    tasks: list[FileScanTask]
    filter: BooleanExpression
    planner: str  # "pando" (layout used), "iceberg" (no layout / layout not usable), "fallback" (Pando raised)
    reason: str | None = None
    iceberg_files: int | None = None  # the files of Iceberg's own plan, when Pando planned
    seconds: float = 0.0


def validate_request(table: Table, request: PlanTableScanRequest) -> BooleanExpression:
    """The request's filter, checked against the table: 400 for an unknown column, a literal of
    the wrong type, an unknown snapshot or an unknown selected column; 501 for an incremental
    scan (``start-snapshot-id``/``end-snapshot-id``), which this server does not plan."""
    name = ".".join(table.name())
    if request.start_snapshot_id is not None or request.end_snapshot_id is not None:
        raise RestError(501, "NotImplementedException",
                        f"incremental scans (start-snapshot-id/end-snapshot-id) are not planned by pando serve; "
                        f"accepted: snapshot-id (a table's snapshot) or none (the current one) on {name}")
    if request.snapshot_id is not None and table.metadata.snapshot_by_id(request.snapshot_id) is None:
        known = ", ".join(str(s.snapshot_id) for s in table.metadata.snapshots) or "none"
        raise bad_request(f"table {name} has no snapshot {request.snapshot_id}; its snapshots: {known}")
    if request.min_rows_requested is not None and request.min_rows_requested < 0:
        raise bad_request(f"min-rows-requested must be a non-negative integer, got {request.min_rows_requested}")
    schema = table.schema()
    if request.snapshot_id is not None and request.use_snapshot_schema:
        snap = table.metadata.snapshot_by_id(request.snapshot_id)
        schemas = {s.schema_id: s for s in table.metadata.schemas}
        if snap is not None and snap.schema_id in schemas:
            schema = schemas[snap.schema_id]
    if request.select:
        try:
            schema.select(*request.select, case_sensitive=request.case_sensitive)
        except ValueError as e:
            raise bad_request(f"select: {e}; the table's columns: {', '.join(schema.column_names)}") from None
    expr = request.filter if request.filter is not None else ALWAYS_TRUE
    try:
        bind(schema, expr, case_sensitive=request.case_sensitive)
    except (ValueError, TypeError) as e:
        raise bad_request(f"filter does not apply to table {name}: {e}; the table's columns: "
                          f"{', '.join(schema.column_names)}") from None
    return expr


def plan_request(table: Table, request: PlanTableScanRequest) -> Planned:
    """The tasks of the scan ``request`` asks for on ``table`` (validated first: see
    :func:`validate_request`)."""
    from ..datascan import scan

    expr = validate_request(table, request)
    selected = tuple(request.select) if request.select else ("*",)
    t0 = time.perf_counter()
    try:
        pando_scan = scan(table, row_filter=expr, selected_fields=selected, case_sensitive=request.case_sensitive,
                          snapshot_id=request.snapshot_id, limit=request.min_rows_requested)
        tasks = list(pando_scan.plan_files())
        explain = pando_scan.explain()
        planned = Planned(tasks, expr, "pando" if explain.used_layout else "iceberg", explain.fallback_reason,
                          explain.iceberg_files)
    except Exception as e:  # never a wrong answer: Iceberg's own plan of the same scan
        reason = f"{type(e).__name__}: {e}"
        log.warning("pando serve: planning %s with Pando failed (%s); answering Iceberg's plan",
                    ".".join(table.name()), reason)
        iceberg_scan = table.scan(row_filter=expr, selected_fields=selected, case_sensitive=request.case_sensitive,
                                  snapshot_id=request.snapshot_id)
        planned = Planned(list(iceberg_scan.plan_files()), expr, "fallback", reason)
    planned.seconds = time.perf_counter() - t0
    return planned


# ---- pyiceberg's tasks → the wire models ---------------------------------------------------------

M = TypeVar("M", bound=IcebergBaseModel)


def build(cls: type[M], **fields: Any) -> M:
    """``cls(**fields)`` with the fields' Python names (pyiceberg's models take them, populate_by_name;
    its type stubs list only the aliases)."""
    return cls.model_validate(fields)


def _counts(values: dict[int, int] | None) -> CountMap | None:
    if not values:
        return None
    keys = sorted(values)
    return CountMap(keys=keys, values=[int(values[k]) for k in keys])


def _partition(data_file: DataFile) -> list[Any]:
    partition = data_file.partition
    return [] if partition is None else [partition[i] for i in range(len(partition))]


def _common(data_file: DataFile) -> dict[str, Any]:
    return {"spec_id": data_file.spec_id, "partition": _partition(data_file), "file_path": data_file.file_path,
            "file_format": data_file.file_format, "file_size_in_bytes": int(data_file.file_size_in_bytes),
            "record_count": int(data_file.record_count), "split_offsets": data_file.split_offsets,
            "sort_order_id": data_file.sort_order_id}


def rest_data_file(data_file: DataFile) -> RESTDataFile:
    """A data file as the REST ``DataFile`` (its counts; bounds are not sent)."""
    return build(RESTDataFile, **_common(data_file), column_sizes=_counts(data_file.column_sizes),
                        value_counts=_counts(data_file.value_counts),
                        null_value_counts=_counts(data_file.null_value_counts),
                        nan_value_counts=_counts(data_file.nan_value_counts))


def rest_delete_file(delete_file: DataFile) -> RESTPositionDeleteFile | RESTEqualityDeleteFile:
    if delete_file.content == DataFileContent.EQUALITY_DELETES:
        return build(RESTEqualityDeleteFile, **_common(delete_file), equality_ids=delete_file.equality_ids)
    return build(RESTPositionDeleteFile, **_common(delete_file),
                                  referenced_data_file=getattr(delete_file, "referenced_data_file", None),
                                  content_offset=getattr(delete_file, "content_offset", None),
                                  content_size_in_bytes=getattr(delete_file, "content_size_in_bytes", None))


def unbound(expr: BooleanExpression, table: Table) -> BooleanExpression:
    """``expr`` (a residual pyiceberg bound to the table's schema) as an unbound expression,
    columns named by their full names, for the wire."""
    if isinstance(expr, (AlwaysTrue, AlwaysFalse)):
        return expr
    if isinstance(expr, And):
        return And(unbound(expr.left, table), unbound(expr.right, table))
    if isinstance(expr, Or):
        return Or(unbound(expr.left, table), unbound(expr.right, table))
    if isinstance(expr, Not):
        return Not(unbound(expr.child, table))
    if isinstance(expr, BoundPredicate):
        field_id = expr.term.ref().field.field_id
        name = table.schema().find_column_name(field_id)
        if name is None:
            raise ValueError(f"no column with field id {field_id}")
        cls: Any = expr.as_unbound
        # the bound literals themselves: they serialize as the filter's did (a date as 'yyyy-mm-dd')
        if hasattr(expr, "literals"):
            return cls(name, set(expr.literals))
        if hasattr(expr, "literal"):
            return cls(name, expr.literal)
        return cls(name)
    return expr  # already unbound


def _residual(task: FileScanTask, planned: Planned, table: Table) -> BooleanExpression | None:
    """The task's residual for the wire; the scan's filter (always a correct residual) when it
    cannot be written unbound."""
    if isinstance(task.residual, AlwaysTrue):
        return None
    try:
        return unbound(task.residual, table)
    except Exception:
        return planned.filter


def scan_tasks(tasks: Sequence[FileScanTask], planned: Planned, table: Table) -> ScanTasks:
    """``tasks`` as the wire's ``ScanTasks``: each delete file once, referenced by index."""
    deletes: list[RESTPositionDeleteFile | RESTEqualityDeleteFile] = []
    index: dict[str, int] = {}
    out = []
    for task in tasks:
        refs = []
        for d in sorted(task.delete_files, key=lambda f: f.file_path):
            if d.file_path not in index:
                index[d.file_path] = len(deletes)
                deletes.append(rest_delete_file(d))
            refs.append(index[d.file_path])
        out.append(build(RESTFileScanTask, data_file=rest_data_file(task.file), delete_file_references=refs or None,
                                    residual_filter=_residual(task, planned, table)))
    return build(ScanTasks, delete_files=deletes, file_scan_tasks=out)


# ---- plans and their pages ----------------------------------------------------------------------

@dataclass
class StoredPlan:
    table: tuple[str, ...]
    completed: PlanCompleted
    pages: list[str] = field(default_factory=list)


class PlanStore:
    """Completed plans by plan id and their pages by plan-task token, at most ``max_plans``
    plans (the oldest forgotten first) each kept ``ttl_seconds``. Thread-safe."""

    def __init__(self, max_plans: int = 256, ttl_seconds: float = 3600.0):
        self._lock = threading.Lock()
        self._plans: OrderedDict[str, tuple[float, StoredPlan]] = OrderedDict()
        self._pages: dict[str, tuple[tuple[str, ...], ScanTasks, str]] = {}
        self.max_plans = max_plans
        self.ttl_seconds = ttl_seconds

    def add(self, identifier: tuple[str, ...], pages: Iterable[ScanTasks], first: ScanTasks | None,
            page_count: int) -> PlanCompleted:
        """Store a plan: ``first`` answered inline, the other pages behind plan-task tokens."""
        plan_id = uuid.uuid4().hex
        tokens = [f"{plan_id}-{i}" for i in range(page_count)]
        inline = first if first is not None else ScanTasks()
        completed = build(PlanCompleted, plan_id=plan_id, delete_files=inline.delete_files,
                                  file_scan_tasks=inline.file_scan_tasks, plan_tasks=tokens)
        with self._lock:
            self._expire(time.monotonic())
            for token, page in zip(tokens, pages):
                self._pages[token] = (identifier, page, plan_id)
            self._plans[plan_id] = (time.monotonic(), StoredPlan(identifier, completed, tokens))
            while len(self._plans) > self.max_plans:
                _, (_, old) = self._plans.popitem(last=False)
                for t in old.pages:
                    self._pages.pop(t, None)
        return completed

    def _expire(self, now: float) -> None:
        while self._plans:
            plan_id, (made, stored) = next(iter(self._plans.items()))
            if now - made < self.ttl_seconds:
                return
            self._plans.pop(plan_id)
            for t in stored.pages:
                self._pages.pop(t, None)

    def plan(self, identifier: tuple[str, ...], plan_id: str) -> PlanCompleted:
        with self._lock:
            self._expire(time.monotonic())
            entry = self._plans.get(plan_id)
        if entry is None or entry[1].table != identifier:
            raise RestError(404, "NoSuchPlanIdException",
                            f"no plan {plan_id!r} for table {'.'.join(identifier)} (unknown, cancelled or expired)")
        return entry[1].completed

    def cancel(self, identifier: tuple[str, ...], plan_id: str) -> None:
        with self._lock:
            entry = self._plans.get(plan_id)
            if entry is None or entry[1].table != identifier:
                raise RestError(404, "NoSuchPlanIdException",
                                f"no plan {plan_id!r} for table {'.'.join(identifier)} (unknown, cancelled or "
                                f"expired)")
            self._plans.pop(plan_id)
            for t in entry[1].pages:
                self._pages.pop(t, None)

    def page(self, identifier: tuple[str, ...], token: str) -> ScanTasks:
        with self._lock:
            self._expire(time.monotonic())
            entry = self._pages.get(token)
        if entry is None or entry[0] != identifier:
            raise RestError(404, "NoSuchPlanTaskException",
                            f"no plan task {token!r} for table {'.'.join(identifier)} (unknown, cancelled or "
                            f"expired)")
        return entry[1]

    def __len__(self) -> int:
        with self._lock:
            return len(self._plans)


def completed_plan(store: PlanStore, table: Table, planned: Planned, tasks_per_page: int) -> PlanCompleted:
    """The ``PlanCompleted`` answer: every task inline when there are at most ``tasks_per_page``,
    else plan-task tokens, one per page of ``tasks_per_page`` tasks (each page with its own
    delete files)."""
    tasks = planned.tasks
    if len(tasks) <= tasks_per_page:
        return store.add(table.name(), [], scan_tasks(tasks, planned, table), 0)
    pages = [scan_tasks(tasks[i:i + tasks_per_page], planned, table) for i in range(0, len(tasks), tasks_per_page)]
    return store.add(table.name(), pages, None, len(pages))
