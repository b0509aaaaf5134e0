"""The table-property pointer to the current layout (small, pure, strict).

=============================  ====================================================================
property                       value
=============================  ====================================================================
``pando.format-version``       sidecar format version, decimal: ``"1"`` one layout (``sidecar.py``),
                               ``"2"`` one layout per Iceberg partition (``partitions.py``)
``pando.layout-id``            the layout id (``[A-Za-z0-9][A-Za-z0-9_.-]*``, e.g. a UUID)
``pando.sidecar``              the sidecar's bare file name (``<layout-id>.puffin``), resolved with
                               ``sidecar_path(table.location(), name)``: never a path
``pando.snapshot-id``          the snapshot the layout's rewrite committed (the layout describes
                               the table as of this snapshot)
``pando.base-snapshot-id``     the snapshot the layout was built from (the rewrite's base)
=============================  ====================================================================

No pando property at all → no layout (``None``). Some present, some missing, or any malformed
→ :class:`SidecarError` naming the property and the accepted form.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import SidecarError
from .paths import LAYOUT_ID_PATTERN, SIDECAR_NAME_PATTERN, check_layout_id, check_sidecar_name, sidecar_path
from .sidecar import SIDECAR_FORMAT_VERSION

__all__ = ["LAYOUT_PROPERTIES", "LayoutPointer", "layout_pointer"]

P_FORMAT_VERSION = "pando.format-version"
P_LAYOUT_ID = "pando.layout-id"
P_SIDECAR = "pando.sidecar"
P_SNAPSHOT = "pando.snapshot-id"
P_BASE_SNAPSHOT = "pando.base-snapshot-id"
LAYOUT_PROPERTIES = (P_FORMAT_VERSION, P_LAYOUT_ID, P_SIDECAR, P_SNAPSHOT, P_BASE_SNAPSHOT)
POINTER_FORMAT_VERSIONS = (SIDECAR_FORMAT_VERSION, 2)  # 2: partitioned layouts (partitions.py)
_SNAPSHOT_RE = re.compile(r"^-?[0-9]{1,19}$")


@dataclass(frozen=True)
class LayoutPointer:
    layout_id: str
    sidecar: str  # bare file name
    snapshot_id: int
    base_snapshot_id: int
    format_version: int = SIDECAR_FORMAT_VERSION

    def to_properties(self) -> dict[str, str]:
        check_layout_id(self.layout_id)
        check_sidecar_name(self.sidecar)
        return {
            P_FORMAT_VERSION: str(self.format_version),
            P_LAYOUT_ID: self.layout_id,
            P_SIDECAR: self.sidecar,
            P_SNAPSHOT: str(int(self.snapshot_id)),
            P_BASE_SNAPSHOT: str(int(self.base_snapshot_id)),
        }

    def sidecar_location(self, table_location: str) -> str:
        return sidecar_path(table_location, self.sidecar)


def _snapshot(props: Mapping[str, str], key: str) -> int:
    v = props[key]
    if not isinstance(v, str) or not _SNAPSHOT_RE.fullmatch(v) or not -(1 << 63) <= int(v) < (1 << 63):
        raise SidecarError(f"table property {key} = {v!r} is malformed: expected a 64-bit decimal snapshot id")
    return int(v)


def layout_pointer(props: Mapping[str, str]) -> LayoutPointer | None:
    present = [k for k in LAYOUT_PROPERTIES if k in props]
    if not present:
        return None
    missing = [k for k in LAYOUT_PROPERTIES if k not in props]
    if missing:
        raise SidecarError(f"incomplete layout pointer: table properties {', '.join(missing)} missing "
                           f"(present: {', '.join(present)}); all of {', '.join(LAYOUT_PROPERTIES)} are needed")
    v = props[P_FORMAT_VERSION]
    if not isinstance(v, str) or not (v.isascii() and v.isdigit()) or len(v) > 9:
        raise SidecarError(f"table property {P_FORMAT_VERSION} = {v!r} is malformed: expected a decimal integer "
                           f"such as '{SIDECAR_FORMAT_VERSION}'")
    if int(v) > POINTER_FORMAT_VERSIONS[-1]:
        raise SidecarError(f"table property {P_FORMAT_VERSION} = {v!r}: format version {int(v)} is newer than this "
                           f"pando-iceberg supports ({POINTER_FORMAT_VERSIONS[-1]})")
    if int(v) not in POINTER_FORMAT_VERSIONS:
        raise SidecarError(f"table property {P_FORMAT_VERSION} = {v!r}: unsupported format version "
                           f"(supported: {', '.join(map(str, POINTER_FORMAT_VERSIONS))})")
    try:
        layout_id = check_layout_id(props[P_LAYOUT_ID])
    except SidecarError:
        raise SidecarError(f"table property {P_LAYOUT_ID} = {props[P_LAYOUT_ID]!r} is malformed: expected "
                           f"{LAYOUT_ID_PATTERN} without '..'") from None
    try:
        sidecar = check_sidecar_name(props[P_SIDECAR])
    except SidecarError:
        raise SidecarError(f"table property {P_SIDECAR} = {props[P_SIDECAR]!r} is malformed: expected a bare file "
                           f"name matching {SIDECAR_NAME_PATTERN} without '..'") from None
    return LayoutPointer(layout_id, sidecar, _snapshot(props, P_SNAPSHOT), _snapshot(props, P_BASE_SNAPSHOT), int(v))
