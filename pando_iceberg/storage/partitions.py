"""Per-partition layouts of a partitioned table (the paper's §7 two-level scheme: the
Iceberg partition first, a Pando layout inside each partition). Sidecar format version 2.

ONE Puffin file per partitioned layout, ``<table location>.pando/<layout-id>.puffin`` (same
directory and naming as version 1, ``paths.py``), pointed to by the same table properties with
``pando.format-version`` = ``"2"`` (``pointer.py``):

==============================  =====  ========================================================
blob type                       codec  payload
==============================  =====  ========================================================
``pando-partition-layout-v1``   none   a complete version-1 layout sidecar (``LayoutSidecar.
                                       to_bytes()``: layout, literal key sets, block → files) of
                                       ONE partition; blob properties ``partition`` (Iceberg's
                                       partition path, e.g. ``o_orderdate_day=1995-01-01``),
                                       ``spec-id`` and ``layout-id`` (the partition layout's own
                                       id); one blob per laid-out partition, partitions unique
==============================  =====  ========================================================

File properties: ``pando.format-version`` ("2"), ``pando.layout-id``, ``pando.table-uuid``,
``pando.base-snapshot-id`` (when known), ``created-by``, ``pando.footer-crc32``, plus free-form
caller properties (the recorded workload ``pando.workload``, ``pando.k``).

Reading parses the footer once and keeps each partition's bytes; a partition's sidecar is
verified and decoded only when the planner meets one of its files (many partitions × small
layouts: a plan decodes the partitions Iceberg's pruning left, the file is read once and cached
with the layout id). A data file belongs to a partition layout exactly when its path is in that
partition's block → files map; every other live file is read by every plan.
Version-1 sidecars (unpartitioned tables) are read by ``sidecar.py`` as before.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from .errors import SidecarError
from .paths import check_layout_id, sidecar_path
from .puffin import (
    FOOTER_CHECKSUM_PROPERTY,
    PuffinBlob,
    blob_payload,
    encode_puffin,
    parse_footer,
    read_bytes,
    verify_footer_checksum,
)
from .sidecar import (
    P_BASE_SNAPSHOT,
    P_CREATED_BY,
    P_FORMAT_VERSION,
    P_LAYOUT_ID,
    P_TABLE_UUID,
    LayoutSidecar,
    created_by,
    norm_uuid,
    read_identity,
    write_sidecar_file,
)

PARTITIONED_FORMAT_VERSION = 2
BLOB_PARTITION_LAYOUT = "pando-partition-layout-v1"
_RESERVED = {P_FORMAT_VERSION, P_LAYOUT_ID, P_TABLE_UUID, P_BASE_SNAPSHOT, P_CREATED_BY, FOOTER_CHECKSUM_PROPERTY}


@dataclass
class PartitionEntry:
    """One partition's layout: its sidecar bytes, decoded on first use."""

    partition: str  # Iceberg partition path under spec ``spec_id``
    spec_id: int
    layout_id: str
    sidecar_bytes: bytes
    _sidecar: LayoutSidecar | None = field(default=None, repr=False, compare=False)
    _layout: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, partition: str, spec_id: int, sidecar: LayoutSidecar, layout: Any = None) -> PartitionEntry:
        return cls(partition, int(spec_id), sidecar.layout_id, sidecar.to_bytes(), sidecar, layout)

    @property
    def sidecar(self) -> LayoutSidecar:
        if self._sidecar is None:
            try:
                self._sidecar = LayoutSidecar.from_bytes(self.sidecar_bytes, expected_layout_id=self.layout_id)
            except SidecarError as e:
                raise SidecarError(f"partition {self.partition!r}: {e}") from None
        return self._sidecar

    @property
    def layout(self) -> Any:
        if self._layout is None:
            self._layout = self.sidecar.load_layout()
        return self._layout

    @property
    def paths(self) -> set[str]:
        return set(self.block_of_path())

    def block_of_path(self) -> dict[str, int]:
        """Data file path → block of this partition's layout."""
        if not hasattr(self, "_block_of_path"):
            self._block_of_path = {ref.path: b for b, refs in self.sidecar.block_files.items() for ref in refs}
        return self._block_of_path


@dataclass
class PartitionedLayoutSidecar:
    layout_id: str
    table_uuid: str
    partitions: dict[str, PartitionEntry]  # partition path → entry
    base_snapshot_id: int | None = None
    properties: dict[str, str] = field(default_factory=dict)
    location: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._path_index: dict[str, str] | None = None

    @property
    def file_name(self) -> str:
        return f"{check_layout_id(self.layout_id)}.puffin"

    def partition_of_path(self) -> dict[str, str]:
        """Data file path → partition of the layout it belongs to (built once; decodes every
        partition's block → files map, not its trees)."""
        with self._lock:
            if self._path_index is None:
                self._path_index = {p: name for name, e in self.partitions.items() for p in e.paths}
            return self._path_index

    @property
    def cuts(self) -> list:
        """Every partition layout's cuts (decodes every layout; for ``needs_keys``)."""
        return [c for e in self.partitions.values() for c in e.layout.cuts]

    # ------------------------------------------------------------------ writing

    def to_bytes(self) -> bytes:
        check_layout_id(self.layout_id)
        table_uuid = norm_uuid(self.table_uuid, "table uuid")
        clash = _RESERVED & set(self.properties)
        if clash:
            raise SidecarError(f"properties may not set reserved keys: {', '.join(sorted(clash))}")
        snap = -1 if self.base_snapshot_id is None else int(self.base_snapshot_id)
        blobs = [PuffinBlob(BLOB_PARTITION_LAYOUT, bytes(e.sidecar_bytes), (), snap, -1, None,
                            {"partition": name, "spec-id": str(e.spec_id), "layout-id": e.layout_id})
                 for name, e in sorted(self.partitions.items())]
        props = dict(self.properties)
        props.update({P_FORMAT_VERSION: str(PARTITIONED_FORMAT_VERSION), P_LAYOUT_ID: self.layout_id,
                      P_TABLE_UUID: table_uuid, P_CREATED_BY: created_by()})
        if self.base_snapshot_id is not None:
            props[P_BASE_SNAPSHOT] = str(self.base_snapshot_id)
        return encode_puffin(blobs, props, checksums=True)

    def write(self, io: Any, table_location: str) -> tuple[str, int]:
        """Write to ``<table location>.pando/<layout-id>.puffin`` (never overwriting)."""
        data = self.to_bytes()
        self.location = write_sidecar_file(io, table_location, self.file_name, data)
        return self.location, len(data)

    # ------------------------------------------------------------------ reading

    @classmethod
    def read(cls, io: Any, location: str, expected_layout_id: str | None = None,
             expected_table_uuid: Any = None) -> PartitionedLayoutSidecar:
        try:
            sc = cls.from_bytes(read_bytes(location, io), expected_layout_id=expected_layout_id,
                                expected_table_uuid=expected_table_uuid)
        except SidecarError as e:
            raise SidecarError(f"partitioned layout sidecar {location}: {e}") from None
        sc.location = location
        return sc

    @classmethod
    def from_bytes(cls, data: bytes, *, expected_layout_id: str | None = None,
                   expected_table_uuid: Any = None) -> PartitionedLayoutSidecar:
        data = bytes(data)
        footer = parse_footer(data)
        props = footer.properties
        version = props.get(P_FORMAT_VERSION)
        if version != str(PARTITIONED_FORMAT_VERSION):
            raise SidecarError(f"file property {P_FORMAT_VERSION} = {version!r}: a partitioned layout sidecar has "
                               f"format version {PARTITIONED_FORMAT_VERSION}")
        verify_footer_checksum(footer, required=True)
        layout_id, table_uuid, base_snapshot = read_identity(props, expected_layout_id, expected_table_uuid)
        parts: dict[str, PartitionEntry] = {}
        for i, m in enumerate(footer.blobs):
            if m.type != BLOB_PARTITION_LAYOUT:
                raise SidecarError(f"blob {i} has unexpected type {m.type!r} (a format-version-2 sidecar holds only "
                                   f"{BLOB_PARTITION_LAYOUT!r})")
            name, spec_id, pid = (m.properties.get(k) for k in ("partition", "spec-id", "layout-id"))
            if name is None or spec_id is None or pid is None or not spec_id.lstrip("-").isdigit():
                raise SidecarError(f"blob {i}: properties 'partition', 'spec-id' (an integer) and 'layout-id' are "
                                   f"required, got {dict(m.properties)}")
            if name in parts:
                raise SidecarError(f"blob {i}: duplicate partition {name!r}")
            parts[name] = PartitionEntry(name, int(spec_id), check_layout_id(pid),
                                         blob_payload(data, m, i, require_checksum=True))
        extra = {k: v for k, v in props.items() if k not in _RESERVED}
        return cls(layout_id, table_uuid, parts, base_snapshot, extra)


def read_layout_sidecar(io: Any, pointer: Any, table_location: str, table_uuid: Any) -> Any:
    """The sidecar a pointer names: ``LayoutSidecar`` (version 1) or ``PartitionedLayoutSidecar``
    (version 2)."""
    cls = PartitionedLayoutSidecar if pointer.format_version == PARTITIONED_FORMAT_VERSION else LayoutSidecar
    return cls.read(io, sidecar_path(table_location, pointer.sidecar), expected_layout_id=pointer.layout_id,
                    expected_table_uuid=table_uuid)


__all__ = ["BLOB_PARTITION_LAYOUT", "PARTITIONED_FORMAT_VERSION", "PartitionEntry", "PartitionedLayoutSidecar",
           "read_layout_sidecar"]
