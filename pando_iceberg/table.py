"""``PandoTable``: maintenance verbs on one Iceberg table, in delta-rs's shape.

    pt = pando_iceberg.PandoTable(catalog, "db.t", spark=spark)
    prediction = pt.optimize.layout(workload, k=3)   # learn, store as pending, predict files read
    metrics = pt.optimize.rewrite()                  # apply it: ONE `replace` snapshot
    pt.optimize.incremental()                        # lay out rows added since, with the same trees
    pt.optimize.refresh_literal_cuts()               # key sets of join-induced cuts after dimension changes
    pt.layout                                        # typed view: trees, blocks, files (None: no layout)
    pt.health(); pt.remove_layout()
    pt.scan(row_filter="a < 5").to_arrow()           # pando_iceberg.scan on this table

Options are frozen dataclasses (:class:`LayoutOptions`), results typed frozen records. The
verbs call the same functions as the ``CALL pando.system.*`` procedures, which call these verbs.
Spark is needed for learning and rewriting only; ``layout``, ``health``, ``remove_layout`` and
``scan`` run on pyiceberg alone.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.expressions import BooleanExpression
from pyiceberg.table import Table

from .datascan import PandoDataScan, scan
from .exceptions import UsageError
from .spark.rewrite_common import IncrementalFields, OptionFields, with_table_defaults
from .storage.sidecar import DataFileRef
from .workload.in_block import TemplateRead

__all__ = ["BlockView", "Health", "IncrementalMetrics", "LayoutOptions", "LayoutPrediction", "LayoutView",
           "LiteralCutChange", "LiteralCutsRefresh", "NodeView", "PandoApiError", "PandoTable",
           "PartitionLayoutView", "QueryPrediction", "RemovedLayout", "RewriteMetrics", "TableOptimizer", "TreeView"]

Workload = str | Sequence[str | tuple[str, float]]


class PandoApiError(UsageError, ValueError):
    """A verb cannot run with these inputs; the message says what is accepted."""

    def __init__(self, verb: str, detail: str):
        super().__init__(f"{verb}: {detail}")
        self.verb, self.detail = verb, detail


# ---- options ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class LayoutOptions(OptionFields):
    """How a layout is learned and written (the ``options => map(...)`` of the procedures): the
    fields and defaults of ``spark.rewrite_common.OptionFields``, frozen, checked on construction.
    The fields given to the constructor are :attr:`given`; the verbs take each other one from the
    table's property ``pando.layout.<option>`` when it has one (``k``, ``sample-rate``,
    ``min-block-rows``, ``in-block-order``, ...), else its default."""

    def __new__(cls, *args: Any, **kwargs: Any) -> LayoutOptions:
        self = super().__new__(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        object.__setattr__(self, "_given", frozenset(names[:len(args)]) | frozenset(kwargs))
        return self

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            ok = {"str": isinstance(value, str), "float": number, "int": number and isinstance(value, int),
                  "int | None": value is None or (number and isinstance(value, int))}[str(f.type)]
            if not ok:
                raise TypeError(f"LayoutOptions.{f.name} must be {_kind(f)}, got {value!r}")
        self.to_rewrite_options()  # validates the ranges, naming the option

    @property
    def given(self) -> frozenset[str]:
        """The fields the caller set (field names, e.g. ``min_block_rows``)."""
        return frozenset(getattr(self, "_given", frozenset()))

    def to_rewrite_options(self) -> Any:
        from .spark.rewrite import RewriteOptions

        opts = RewriteOptions(**dataclasses.asdict(self))
        opts.validate()
        return opts

    @classmethod
    def from_map(cls, options: Mapping[str, str]) -> LayoutOptions:
        """From Iceberg-style string options (``{'k': '3', 'sample-rate': '0.05'}``); the keys
        given are the fields :attr:`given`."""
        from .spark.rewrite import RewriteOptions

        parsed = RewriteOptions.from_map(dict(options))
        return cls(**{RewriteOptions.OPTION_NAMES[key]: getattr(parsed, RewriteOptions.OPTION_NAMES[key])
                      for key in options})

    def to_map(self) -> dict[str, str]:
        out: dict[str, str] = self.to_rewrite_options().to_map()
        return out

    def with_table_defaults(self, properties: Mapping[str, str]) -> LayoutOptions:
        """These options for a table with ``properties``: each field not :attr:`given` from the
        table property ``pando.layout.<option>`` when set, else its default (option > table
        property > default; a malformed property raises naming it)."""
        names = {attr: key for key, attr in _option_names().items()}
        given = {names[f]: str(getattr(self, f)) for f in self.given if getattr(self, f) is not None}
        resolved = with_table_defaults(given, properties)
        return LayoutOptions(**{f.name: getattr(resolved, f.name) for f in dataclasses.fields(LayoutOptions)})


def _option_names() -> dict[str, str]:
    from .spark.rewrite import RewriteOptions

    return dict(RewriteOptions.OPTION_NAMES)


def _kind(f: dataclasses.Field[Any]) -> str:
    by_type = {"str": "a string", "float": "a number", "int | None": "an integer or None"}
    kind = by_type.get(str(f.type), "an integer")
    return {"in_block_order": "a string ('auto', 'none' or a column)",
            "k_selection": "'validate' or 'fixed'",
            "max_template_regression": "a string (a number > 0, '0' or 'off'; '' = the table property)",
            }.get(f.name, kind)


# ---- results ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class QueryPrediction:
    """One workload query: files read now, and with the learned layout."""

    query: int
    weight: float
    filter: str
    files_read_now: int
    files_total_now: int
    files_read_with_layout: int
    files_total_with_layout: int
    rows_fraction_now: float
    rows_fraction_with_layout: float


@dataclass(frozen=True)
class LayoutPrediction:
    """What ``optimize.layout`` learned (stored as the pending layout) and predicts."""

    pending_layout_id: str
    base_snapshot_id: int
    k: int
    blocks: int
    files: int
    sample_rows: int
    candidate_cuts: int
    queries_used: int
    queries: tuple[QueryPrediction, ...]
    mean_files_read_now: float
    mean_files_read_with_layout: float
    notes: tuple[str, ...] = ()
    # Per workload template: the fraction of the table's rows its validation draws read now and
    # with the layout, and what the guard allows (workload.in_block.TemplateRead); empty when the
    # guard is off. ``guard_holds``: False when a rewrite would refuse the layout without force.
    templates: tuple[TemplateRead, ...] = ()
    guard_holds: bool = True


@dataclass(frozen=True)
class RewriteMetrics:
    """One rewrite: what it replaced and wrote, the layout and the snapshot it committed."""

    rewritten_data_files: int
    added_data_files: int
    rewritten_bytes: int
    failed_data_files: int
    layout_id: str
    blocks: int
    snapshot_id: int | None
    base_snapshot_id: int | None
    seconds: Mapping[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    # peak resident memory (MiB) per phase, by process: 'driver' (Python), 'jvm', 'python-worker'
    peak_rss_mib: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def row(self) -> tuple[Any, ...]:
        """The row of ``rewrite_data_files`` (Iceberg's column order, then Pando's)."""
        return (self.rewritten_data_files, self.added_data_files, self.rewritten_bytes, self.failed_data_files,
                self.layout_id, self.blocks, self.snapshot_id)


@dataclass(frozen=True)
class IncrementalMetrics(IncrementalFields, RewriteMetrics):
    """An incremental rewrite: rows outside the layout routed with the stored trees. The fields
    of ``RewriteMetrics``, then those of ``spark.rewrite_common.IncrementalFields``."""


def _refresh_advice(stale: Sequence[Any]) -> str:
    """The recommendation of a healthy layout with stale literal cuts (``maintenance.cut_staleness``)."""
    if not stale:
        return "ok"
    if any(c.from_snapshot != c.to_snapshot for c in stale):
        return (f"refresh the key sets of {len(stale)} stale literal cut(s): optimize.refresh_literal_cuts() "
                "(procedure refresh_literal_cuts)")
    return f"{len(stale)} literal cut(s) hold keys a refresh kept stale: a re-layout regroups them"


def _metrics(r: Any, notes: Sequence[str] = ()) -> RewriteMetrics:
    common = dict(rewritten_data_files=r.rewritten_data_files_count, added_data_files=r.added_data_files_count,
                  rewritten_bytes=r.rewritten_bytes_count, failed_data_files=r.failed_data_files_count,
                  layout_id=r.layout_id, blocks=r.block_count, snapshot_id=r.snapshot_id,
                  base_snapshot_id=r.base_snapshot_id, seconds=dict(r.seconds), peak_rss_mib=dict(r.peak_rss_mib),
                  notes=tuple(notes) + tuple(getattr(r, "notes", ())))
    if hasattr(r, "rows_read"):
        counts = {f.name: getattr(r, f.name) for f in dataclasses.fields(IncrementalFields)}
        return IncrementalMetrics(**common, **counts)
    return RewriteMetrics(**common)


@dataclass(frozen=True)
class LiteralCutChange:
    """One literal (join-induced) cut's key set after a refresh."""

    cut: str
    dim_table: str
    mode: str  # unchanged | incremental | full
    from_snapshot: int | None
    to_snapshot: int | None
    keys_before: int
    keys_added: int
    keys_removed: int
    keys_kept_stale: int
    partition: str | None

    def row(self) -> tuple[Any, ...]:
        return dataclasses.astuple(self)


@dataclass(frozen=True)
class LiteralCutsRefresh:
    layout_id: str
    previous_layout_id: str
    cuts: tuple[LiteralCutChange, ...]
    seconds: float

    @property
    def changed(self) -> bool:
        return self.layout_id != self.previous_layout_id


@dataclass(frozen=True)
class NodeView:
    node: int
    depth: int
    cut: str | None  # None: a leaf
    blocks: tuple[int, ...]  # a leaf's blocks


@dataclass(frozen=True)
class TreeView:
    tree: int
    nodes: tuple[NodeView, ...]


@dataclass(frozen=True)
class BlockView:
    block: int
    files: tuple[DataFileRef, ...]

    @property
    def rows(self) -> int:
        return sum(f.record_count for f in self.files)

    @property
    def bytes(self) -> int:
        return sum(f.file_size_in_bytes for f in self.files)


@dataclass(frozen=True)
class PartitionLayoutView:
    partition: str
    layout_id: str
    k: int
    blocks: int
    files: int
    rows: int


@dataclass(frozen=True)
class LayoutView:
    """The table's current layout. A partitioned table has one layout per partition
    (``partitions``; ``trees`` and ``blocks`` are then empty and ``k`` is None)."""

    layout_id: str
    base_snapshot_id: int | None
    k: int | None
    trees: tuple[TreeView, ...]
    blocks: tuple[BlockView, ...]
    partitions: tuple[PartitionLayoutView, ...]
    properties: Mapping[str, str]  # how it was learned: workload, templates, in-block order
    pending_layout_id: str | None
    pending_base_snapshot_id: str | None


@dataclass(frozen=True)
class Health:
    """Is the layout still useful? ``status``: ok | degraded | no layout | broken."""

    status: str
    reasons: tuple[str, ...]
    recommendation: str
    layout_id: str | None = None
    layout_snapshot_id: str | None = None
    current_snapshot_id: int | None = None
    layout_files_live: int = 0
    files_outside_layout: int = 0
    rows_outside_layout: int = 0
    rows_outside_share: float = 0.0
    workload_rows_fraction_at_layout: float | None = None
    workload_rows_fraction_now: float | None = None
    partitions: tuple[Any, ...] = ()  # maintenance.partition_health.PartitionHealth per partition
    partitions_where: str | None = None  # the degraded or new partitions, as a rewrite's `where`
    stale_cuts: tuple[Any, ...] = ()  # maintenance.cut_staleness.StaleCut per stale literal cut


@dataclass(frozen=True)
class RemovedLayout:
    layout_id: str | None  # None: the table had no layout
    sidecar_deleted: bool
    pending_removed: str | None


# ---- the table and its verbs ------------------------------------------------------------------

class PandoTable:
    """One Iceberg table of ``catalog`` (pyiceberg; or its name: ``catalog.catalog_named``, Pando's
    configured catalog or one of ``.pyiceberg.yaml`` / ``PYICEBERG_CATALOG__*``), with an optional
    Spark session whose catalog of the same name holds it (needed by ``optimize.*``)."""

    def __init__(self, catalog: Catalog | str, name: str, *, spark: Any = None,
                 io_properties: Mapping[str, str] | None = None, progress: Callable[[str], None] | None = None):
        if isinstance(catalog, str):
            from .catalog import catalog_named

            catalog = catalog_named(catalog)
        if not isinstance(catalog, Catalog):
            raise TypeError(f"PandoTable: 'catalog' must be a pyiceberg Catalog (pyiceberg.catalog.load_catalog(...)), "
                            f"got {type(catalog).__name__}")
        if not isinstance(name, str) or not name:
            raise TypeError(f"PandoTable: 'name' must be a table name such as 'db.t', got {name!r}")
        self.catalog = catalog
        parts = name.split(".")
        self.name = ".".join(parts[1:]) if len(parts) == 3 and parts[0] == catalog.name else name
        self.spark = spark
        self.io_properties = dict(io_properties if io_properties is not None else catalog.properties)
        self.progress: Callable[[str], None] = progress or (lambda m: None)
        _ = self.table  # fails now, naming the tables that exist, if there is no such table

    @property
    def table(self) -> Table:
        """The pyiceberg table, loaded afresh (other writers may have committed)."""
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        try:
            return self.catalog.load_table(self.name)
        except (NoSuchTableError, NoSuchNamespaceError, ValueError):
            known = [".".join(t) for ns in self.catalog.list_namespaces() for t in self.catalog.list_tables(ns)]
            raise PandoApiError("PandoTable", f"table {self.name!r} does not exist; tables in catalog "
                                f"{self.catalog.name!r}: {', '.join(sorted(known)) or 'none'}") from None

    def __repr__(self) -> str:
        return f"PandoTable({self.catalog.name!r}, {self.name!r})"

    @property
    def optimize(self) -> TableOptimizer:
        return TableOptimizer(self)

    def scan(self, row_filter: str | BooleanExpression = "TRUE", selected_fields: tuple[str, ...] = ("*",),
             snapshot_id: int | None = None, limit: int | None = None,
             options: Mapping[str, str] | None = None) -> PandoDataScan:
        """``pando_iceberg.scan`` of this table (``options``: pyiceberg's, and ``pando.<setting>``)."""
        return scan(self.table, row_filter=row_filter, selected_fields=selected_fields, snapshot_id=snapshot_id,
                    limit=limit, options=dict(options or {}))

    # ---- the layout ---------------------------------------------------------------------------

    def _sidecar(self, table: Table) -> Any:
        from .storage.partitions import read_layout_sidecar
        from .storage.pointer import layout_pointer

        pointer = layout_pointer(table.properties)
        if pointer is None:
            return None
        return read_layout_sidecar(table.io, pointer, table.location(), table.metadata.table_uuid)

    @property
    def pending_layout_id(self) -> str | None:
        """The layout ``optimize.layout`` stored and no rewrite applied yet."""
        from .maintenance.pending import P_PENDING_ID

        return self.table.properties.get(P_PENDING_ID)

    @property
    def layout(self) -> LayoutView | None:
        """The current layout's trees, blocks and files; None when the table has none."""
        from .maintenance.pending import P_PENDING_BASE, P_PENDING_ID

        table = self.table
        sidecar = self._sidecar(table)
        if sidecar is None:
            return None
        pending = (table.properties.get(P_PENDING_ID), table.properties.get(P_PENDING_BASE))
        if not hasattr(sidecar, "load_layout"):  # one layout per partition
            parts = tuple(PartitionLayoutView(name, e.layout_id, e.layout.k, e.layout.num_blocks,
                                              sum(len(v) for v in e.sidecar.block_files.values()),
                                              sum(f.record_count for v in e.sidecar.block_files.values() for f in v))
                          for name, e in sorted(sidecar.partitions.items()))
            return LayoutView(sidecar.layout_id, sidecar.base_snapshot_id, None, (), (), parts,
                              dict(sidecar.properties), *pending)
        layout = sidecar.load_layout()
        trees = tuple(TreeView(t, tuple(_nodes(tree, layout.leaf_blocks[t])))
                      for t, tree in enumerate(layout.truncated))
        blocks = tuple(BlockView(b, tuple(sidecar.block_files.get(b, []))) for b in range(layout.num_blocks))
        return LayoutView(sidecar.layout_id, sidecar.base_snapshot_id, layout.k, trees, blocks, (),
                          dict(sidecar.properties), *pending)

    # ---- health and removal -------------------------------------------------------------------

    def health(self, max_rows_outside: float = 0.2, max_efficiency_loss: float = 0.5) -> Health:
        """Rows and files outside the layout, and the recorded workload's skipping now vs at layout time."""
        for arg, value in (("max_rows_outside", max_rows_outside), ("max_efficiency_loss", max_efficiency_loss)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise PandoApiError("health", f"{arg!r} must be a non-negative number, got {value!r}")
        table = self.table
        try:
            sidecar = self._sidecar(table)
        except Exception as e:  # a corrupt sidecar is a health finding, not a crash
            return Health("broken", (str(e),), "re-layout (optimize.rewrite / rewrite_data_files strategy 'pando')")
        if sidecar is None:
            return Health("no layout", (), "create one with optimize.rewrite (rewrite_data_files(strategy => 'pando'))")
        if not hasattr(sidecar, "load_layout"):
            return self._partitioned_health(table, sidecar, max_rows_outside, max_efficiency_loss)
        from .maintenance.cut_staleness import stale_cuts
        from .planner.scan import changed_cut_columns
        from .storage.pointer import layout_pointer

        layout_paths = {ref.path for refs in sidecar.block_files.values() for ref in refs}
        tasks = list(table.scan().plan_files())
        inside = [t for t in tasks if t.file.file_path in layout_paths]
        outside = [t for t in tasks if t.file.file_path not in layout_paths]
        rows_in = sum(t.file.record_count for t in inside)
        rows_out = sum(t.file.record_count for t in outside)
        share_out = rows_out / max(1, rows_in + rows_out)
        at_layout = float(sidecar.properties.get("pando.expected-rows-fraction", "nan"))
        now = self._workload_fraction_now(table, json.loads(sidecar.properties.get("pando.workload", "[]")))
        loss = (now - at_layout) / at_layout if at_layout == at_layout and at_layout > 0 and now is not None else None
        reasons = []
        if share_out > max_rows_outside:
            reasons.append(f"{share_out:.0%} of rows are outside the layout (> {max_rows_outside:.0%})")
        if loss is not None and loss > max_efficiency_loss:
            reasons.append(f"the recorded workload reads {loss:.0%} more rows than at layout time "
                           f"(> {max_efficiency_loss:.0%})")
        if not inside:
            reasons.append("no live file belongs to the layout (rewritten by another tool)")
        layout = sidecar.load_layout()
        changed = changed_cut_columns(table, layout_pointer(table.properties), layout)
        if changed:
            reasons.append(f"the layout's cuts on {', '.join(sorted(changed))} no longer apply (column renamed, "
                           "dropped or replaced since the layout)")
        stale = tuple(stale_cuts(self.catalog, {None: layout.cuts}))
        snap = table.current_snapshot()
        return Health("degraded" if reasons else "ok", tuple(reasons),
                      ("re-layout: " + "; ".join(reasons)) if reasons else _refresh_advice(stale), sidecar.layout_id,
                      table.properties.get("pando.snapshot-id"), snap.snapshot_id if snap else None, len(inside),
                      len(outside), rows_out, share_out, at_layout if at_layout == at_layout else None, now,
                      stale_cuts=stale)

    def _partitioned_health(self, table: Table, sidecar: Any, max_rows_outside: float,
                            max_efficiency_loss: float) -> Health:
        from .maintenance.cut_staleness import stale_cuts
        from .maintenance.partition_health import partition_health

        recorded = json.loads(sidecar.properties.get("pando.workload", "[]"))
        workload = [tuple(x) if isinstance(x, list) else x for x in recorded]
        rows, where = partition_health(table, sidecar, self.name, max_rows_outside, max_efficiency_loss, workload)
        degraded = [h for h in rows if h.reasons]
        reasons = tuple(f"partition {h.partition}: {'; '.join(h.reasons)}" for h in degraded)
        stale = tuple(stale_cuts(self.catalog, {name: e.layout.cuts for name, e in sorted(sidecar.partitions.items())}))
        rec = (f"lay out {len(degraded)} degraded or new partition(s): optimize.rewrite(where={where!r})"
               if degraded else "every partition layout is healthy" if not stale else _refresh_advice(stale))
        return Health("degraded" if degraded else "ok", reasons, rec, sidecar.layout_id, partitions=tuple(rows),
                      partitions_where=where if degraded else None, stale_cuts=stale)

    def _workload_fraction_now(self, table: Table, workload: list[Any]) -> float | None:
        """Weighted share of live rows the recorded workload reads now, by the real planner."""
        if not workload:
            return None
        from .planner import plan_scan
        from .workload import parse_workload

        workload = [tuple(x) if isinstance(x, list) else x for x in workload]
        try:
            wl = parse_workload(workload, {self.name: table.schema().as_arrow()})
        except Exception:
            return None  # the recorded workload names other tables we do not load here: no estimate
        total = read = 0.0
        for q in wl.queries:
            if self.name not in q.filters:
                continue
            e = plan_scan(table, q.filters[self.name]).explain
            total += q.weight * max(1, e.total_rows)
            read += q.weight * e.pando_rows
        return read / total if total else None

    def remove_layout(self, delete_sidecar: bool = True) -> RemovedLayout:
        """Forget the layout (and any pending one): remove the pointer properties and the sidecar."""
        from .maintenance.pending import clear_pending
        from .storage.paths import delete_sidecar as delete
        from .storage.pointer import LAYOUT_PROPERTIES, layout_pointer

        if not isinstance(delete_sidecar, bool):
            raise TypeError(f"remove_layout: 'delete_sidecar' must be a bool, got {delete_sidecar!r}")
        table = self.table
        pointer = layout_pointer(table.properties)
        pending = clear_pending(table)
        if pointer is None:
            return RemovedLayout(None, False, pending)
        table = self.table
        with table.transaction() as tx:
            tx.remove_properties(*[p for p in LAYOUT_PROPERTIES if p in table.properties])
        deleted = False
        if delete_sidecar:
            try:
                delete(table.io, table.location(), pointer.sidecar)
                deleted = True
            except Exception:  # a leftover sidecar is listed (and removable) by `pando cleanup`
                deleted = False
        self._refresh_spark()
        return RemovedLayout(pointer.layout_id, deleted, pending)

    # ---- Spark --------------------------------------------------------------------------------

    def _spark(self, verb: str) -> Any:
        if self.spark is None:
            raise PandoApiError(verb, f"needs a Spark session whose Iceberg catalog {self.catalog.name!r} holds "
                                f"{self.name}: PandoTable(catalog, {self.name!r}, spark=spark)")
        return self.spark

    def _refresh_spark(self) -> None:
        if self.spark is not None:
            from .spark.session import refresh_table

            refresh_table(self.spark, self.name)


class TableOptimizer:
    """``PandoTable.optimize``: the verbs that learn layouts and rewrite data files (Spark)."""

    def __init__(self, table: PandoTable):
        self.pt = table

    def resolved_options(self, k: int | None = None, options: LayoutOptions | None = None) -> LayoutOptions:
        """The options the verbs learn and write with: ``k`` when given, then the fields of
        ``options`` given, then the table's ``pando.layout.<option>`` properties, then the defaults."""
        if options is not None and not isinstance(options, LayoutOptions):
            raise TypeError(f"'options' must be a pando_iceberg.LayoutOptions, got {type(options).__name__} "
                            "(LayoutOptions.from_map turns {'k': '3', ...} into one)")
        options = options or LayoutOptions()
        if k is not None:
            options = LayoutOptions(k=k, **{f: getattr(options, f) for f in options.given - {"k"}})
        return options.with_table_defaults(self.pt.table.properties)

    def layout(self, workload: Workload, k: int | None = None, *, options: LayoutOptions | None = None,
               request: Mapping[str, Any] | None = None) -> LayoutPrediction:
        """Learn a layout (k trees; ``k`` overrides ``options.k``; an option not given is the table's
        ``pando.layout.<option>`` property, else its default: :meth:`resolved_options`) and store it as
        pending without rewriting data; predict per workload query the files read now and with it.
        ``request`` records the workload arguments as given (the procedures pass theirs)."""
        from .maintenance.pending import store_pending
        from .planner import plan_scan
        from .spark.rewrite import learn_layout
        from .workload.in_block import files_per_block

        spark = self.pt._spark("optimize.layout")
        opts = self.resolved_options(k, options)
        sources = _workload_list(workload, "optimize.layout")
        table = self.pt.table
        name = self.pt.name
        snapshot = table.current_snapshot()
        if snapshot is None:
            raise PandoApiError("optimize.layout", f"table {name} has no snapshot (no data): nothing to lay out")
        if not table.spec().is_unpartitioned():
            raise PandoApiError("optimize.layout", f"table {name} is partitioned; its layouts are learned per "
                                "partition when they are applied: use optimize.rewrite(workload, where=...) (CALL "
                                "rewrite_data_files(table => ..., strategy => 'pando', where => ...)); pending layouts "
                                "are whole-table only")
        ropts = opts.to_rewrite_options()
        self.pt._refresh_spark()  # Spark's cached metadata may predate pyiceberg's last commit
        learned = learn_layout(spark, name, sources, ropts, snapshot_id=snapshot.snapshot_id, progress=self.pt.progress,
                               io_properties=self.pt.io_properties)
        sidecar = store_pending(table, learned, ropts, dict(request or {"workload": workload}), snapshot.snapshot_id)
        self.pt._refresh_spark()
        layout = learned.layout
        total_rows = max(1, learned.table_rows)
        sample_total = float(layout.block_rows.sum()) or 1.0
        per_query = layout.cost(learned.queries, per_query=True)
        block_files = files_per_block(layout.block_rows * (total_rows / sample_total), opts.min_block_rows)
        queries = []
        files_now = files_new = 0.0
        for i, ((flt, weight), cost) in enumerate(zip(learned.queries, per_query, strict=True)):
            now = plan_scan(table, flt).explain
            blocks, _ = layout.blocks_for(flt)
            chosen = int(block_files[blocks].sum())
            files_now += weight * now.pando_files
            files_new += weight * chosen
            queries.append(QueryPrediction(i + 1, float(weight), flt.to_sql(), now.pando_files, now.total_files, chosen,
                                           int(block_files.sum()), round(now.pando_rows / total_rows, 4),
                                           round(float(cost) / sample_total, 4)))
        weights = sum(w for _, w in learned.queries) or 1.0
        return LayoutPrediction(sidecar.layout_id, snapshot.snapshot_id, layout.k, int(layout.num_blocks),
                                int(block_files.sum()), learned.sample_rows, learned.cuts, learned.queries_used,
                                tuple(queries), files_now / weights, files_new / weights,
                                templates=tuple(learned.guard.templates) if learned.guard else (),
                                guard_holds=learned.guard is None or learned.guard.holds)

    def advise(self, workload: Workload, k: int | None = None, *, options: LayoutOptions | None = None,
               sort_orders: Sequence[str] = (), apply: bool = False, max_repay_days: float | None = None,
               workload_days: float | None = None) -> Any:
        """Rank the candidate layouts of the table for ``workload`` by predicted bytes per held-out
        query, with each one's predicted rewrite cost and the queries after which it repays it
        (``maintenance/advisor.py``): the table as is, Iceberg's sort and z-order on the columns
        the workload filters most, Pando with 1..k trees (``k``, else the options' or the table's
        ``pando.layout.k``, else 4), and Iceberg's ``sort_orders`` asked for (``'c DESC'``,
        ``'zorder(a, b)'``). ``apply``: write the advised one (Pando's without learning it again);
        with ``max_repay_days``, only when it repays its rewrite within that many days of a
        workload like this one, which spans ``workload_days`` (a query log's window). Returns a
        ``maintenance.advisor.Advice``."""
        from .maintenance.advisor import SortOrderError, advise, apply_advice, repay_days

        spark = self.pt._spark("optimize.advise")
        given = options.given if options is not None else frozenset()
        if k is None and "k" not in given and "pando.layout.k" not in self.pt.table.properties:
            k = 4
        opts = self.resolved_options(k, options)
        sources = _workload_list(workload, "optimize.advise")
        table = self.pt.table
        if table.current_snapshot() is None:
            raise PandoApiError("optimize.advise", f"table {self.pt.name} has no snapshot (no data): "
                                "nothing to advise on")
        if not table.spec().is_unpartitioned():
            raise PandoApiError("optimize.advise", f"table {self.pt.name} is partitioned: the advisor ranks "
                                "whole-table layouts only; lay it out with optimize.rewrite(workload, where=...)")
        ropts = opts.to_rewrite_options()
        self.pt._refresh_spark()
        if max_repay_days is not None and not (isinstance(workload_days, (int, float)) and workload_days > 0):
            raise PandoApiError("optimize.advise", "'max_repay_days' needs the days the workload spans "
                                f"('workload_days' > 0, a query log's window), got {workload_days!r}")
        if isinstance(sort_orders, str) or not all(isinstance(o, str) for o in sort_orders):
            raise PandoApiError("optimize.advise", f"'sort_orders' must be a list of Iceberg sort orders "
                                f"('c DESC', 'zorder(a, b)'), got {sort_orders!r}")
        try:
            advice, learned = advise(spark, table, self.pt.name, sources, ropts, io_properties=self.pt.io_properties,
                                     progress=self.pt.progress, sort_orders=sort_orders)
        except SortOrderError as e:
            raise PandoApiError("optimize.advise", str(e)) from None
        why = None
        if apply and max_repay_days is not None and workload_days and advice.advised.strategy != "none":
            per_day = advice.workload_queries / workload_days
            days = repay_days(advice.advised, per_day)
            if days is None or days > max_repay_days:
                when = "never" if days is None else f"after {days:.1f} days"
                why = (f"{advice.advised.name} repays its rewrite {when} of this workload ({per_day:.1f} queries "
                       f"a day on the table): more than max_repay_days {max_repay_days:g}")
        if apply and why is None:
            done = apply_advice(spark, self.pt.name, advice, learned, sources, ropts,
                                io_properties=self.pt.io_properties, progress=self.pt.progress)
            advice = dataclasses.replace(advice, applied=done)
            self.pt._refresh_spark()
        elif apply:
            advice = dataclasses.replace(advice, not_applied=why)
        return advice

    def rewrite(self, workload: Workload | None = None, k: int | None = None, *,
                options: LayoutOptions | None = None, where: str | None = None, relearn: bool = False,
                request: Mapping[str, Any] | None = None, force: bool = False) -> RewriteMetrics:
        """Rewrite the data files to a layout in ONE ``replace`` commit: the pending layout of
        ``optimize.layout`` when there is one learned with the same options and workload (and
        ``relearn`` is False), else one learned now from ``workload`` (or the workload recorded
        with the current layout). A partitioned table gets one layout per partition; ``where``
        (partition source columns only) selects the partitions. A layout under which a workload
        template would read more than ``max-template-regression`` × what it reads now is refused
        before anything is written (``TemplateGuardError``, naming each such template) unless
        ``force``."""
        from .maintenance import pending as pend
        from .spark.rewrite import rewrite_table

        spark = self.pt._spark("optimize.rewrite")
        if where is not None and not isinstance(where, str):
            raise TypeError(f"optimize.rewrite: 'where' must be SQL text on partition source columns, got {where!r}")
        opts = self.resolved_options(k, options)
        ropts = opts.to_rewrite_options()
        sources = None if workload is None else _workload_list(workload, "optimize.rewrite")
        table = self.pt.table
        name = self.pt.name
        partitioned = not table.spec().is_unpartitioned()
        if where is not None and not partitioned:
            raise PandoApiError("optimize.rewrite", f"'where' selects partitions, but {name} is not partitioned (its "
                                "layout covers the whole table): omit 'where'")
        asked = dict(request) if request is not None else ({"workload": workload} if workload is not None else {})
        notes: list[str] = []
        sidecar = None
        if not relearn and not partitioned:  # a partitioned table's layouts are learned per partition
            try:
                sidecar = pend.load_pending(table)
            except Exception as e:  # unreadable pending layout: learn instead
                notes.append(f"the pending layout cannot be read ({e}); learned a new one")
            if sidecar is not None:
                why = pend.matches(sidecar, ropts, asked)
                if why:
                    notes.append(f"pending layout {sidecar.layout_id} not applied: {why}; learned a new one "
                                 "(run optimize_layout again, or pass relearn => true to say so)")
                    sidecar = None
        learned = None
        self.pt._refresh_spark()  # Spark's cached metadata may predate pyiceberg's last commit
        if sidecar is not None:
            learned = pend.learned_from_pending(spark, name, sidecar)
            snap = table.current_snapshot()
            current = snap.snapshot_id if snap else None
            notes.append(f"applied pending layout {sidecar.layout_id} learned by optimize_layout on snapshot "
                         f"{sidecar.base_snapshot_id}" + ("" if current == sidecar.base_snapshot_id else
                                                          f" (the table is at snapshot {current} now; rows added "
                                                          "since are routed by the same trees)")
                         + "; relearn => true learns anew")
        else:
            sources = sources or self._recorded_workload(table, notes)
            if not sources:
                raise PandoApiError("optimize.rewrite", "strategy 'pando' needs a workload "
                                    "(argument 'workload': SQL text, a .sql file, a directory or a query log; or "
                                    "'workload_log') — the table has no recorded one and no pending layout from "
                                    "optimize_layout")
        r = rewrite_table(spark, name, sources or [], ropts, io_properties=self.pt.io_properties,
                          progress=self.pt.progress, learned=learned, where=where, force=force)
        if r.guard is not None:
            notes += [("" if t.holds else "forced: ") + t.line() for t in r.guard.templates]
        dropped = pend.clear_pending(self.pt.table)
        if dropped:
            self.pt._refresh_spark()
        if dropped and sidecar is None:
            notes.append(f"pending layout {dropped} from optimize_layout superseded and removed")
        return _metrics(r, notes)

    def _recorded_workload(self, table: Table, notes: list[str]) -> list[Any] | None:
        """The current layout's recorded workload, brought to the current schema (renamed
        columns followed, statements on dropped ones left out and noted: workload/recorded.py)."""
        from .workload import PandoWorkloadError
        from .workload.recorded import current_recorded_workload

        sidecar = self.pt._sidecar(table)
        if sidecar is None or "pando.workload" not in sidecar.properties:
            return None
        recorded = [tuple(x) if isinstance(x, list) else x for x in json.loads(sidecar.properties["pando.workload"])]
        try:
            kept, said = current_recorded_workload(recorded, table,
                                                   lambda n: self.pt.catalog.load_table(n).schema().as_arrow())
        except PandoWorkloadError as e:
            raise PandoApiError("optimize.rewrite", str(e)) from None
        notes += said
        return kept

    def incremental(self, min_block_rows: int | None = None,
                    target_file_size_bytes: int | None = None) -> IncrementalMetrics:
        """Lay out the rows of the files outside the layout with the stored trees (no learning);
        one ``replace`` commit, or none when no block reaches ``min_block_rows``."""
        from .spark.incremental import incremental_rewrite

        for arg, value in (("min_block_rows", min_block_rows), ("target_file_size_bytes", target_file_size_bytes)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise PandoApiError("optimize.incremental",
                                    f"{arg!r} must be a positive integer or None, got {value!r}")
        spark = self.pt._spark("optimize.incremental")
        self.pt._refresh_spark()
        r = incremental_rewrite(spark, self.pt.name, min_block_rows=min_block_rows,
                                target_file_size_bytes=target_file_size_bytes, io_properties=self.pt.io_properties,
                                progress=self.pt.progress)
        metrics = _metrics(r)
        assert isinstance(metrics, IncrementalMetrics)
        return metrics

    def refresh_literal_cuts(self) -> LiteralCutsRefresh:
        """Update the key sets of the layout's literal (join-induced) cuts after dimension
        changes, soundly: keys whose membership would move laid-out fact rows keep it (§7)."""
        from .maintenance.literal_cuts import refresh_literal_cuts

        spark = self.pt._spark("optimize.refresh_literal_cuts")
        self.pt._refresh_spark()
        r = refresh_literal_cuts(spark, self.pt.name, io_properties=self.pt.io_properties, progress=self.pt.progress)
        return LiteralCutsRefresh(r.layout_id, r.previous_layout_id, tuple(LiteralCutChange(*c.row()) for c in r.cuts),
                                  r.seconds)


def _workload_list(workload: Workload, verb: str) -> list[Any]:
    """SQL text / .sql file paths / (statement, weight) pairs, as ``parse_workload`` takes them."""
    if isinstance(workload, str):
        return [workload]
    if isinstance(workload, Sequence) and all(
            isinstance(w, str) or (isinstance(w, tuple) and len(w) == 2 and isinstance(w[0], str)) for w in workload):
        if not workload:
            raise PandoApiError(verb, "'workload' is empty; give SQL text, .sql files or (statement, weight) pairs")
        return list(workload)
    raise TypeError(f"{verb}: 'workload' must be SQL text, a .sql file path, or a list of those or of "
                    f"(statement, weight) pairs, got {type(workload).__name__}")


def _nodes(tree: Any, leaf_blocks: Mapping[int, Any]) -> list[NodeView]:
    """The nodes reachable from the root, in id order (a truncated tree keeps orphaned ids)."""
    out = []
    for n in sorted(tree.inner_nodes() + tree.leaves()):
        cut = tree.node_cut[n]
        blocks = () if cut is not None else tuple(int(b) for b in leaf_blocks.get(n, []))
        out.append(NodeView(n, int(tree.depth[n]), None if cut is None else cut.key, blocks))
    return out
