"""Where layout sidecars live, and how to find them again.

Policy: the sidecars of a table live in ``<table location>.pando/<file name>``, a *sibling*
directory of the table location, never under it:

* Iceberg's ``remove_orphan_files`` lists the table's ``data/`` and ``metadata/`` directories
  (or an explicit ``location`` the caller passes) and deletes what metadata does not
  reference; our files are in neither, so it never sees them (tested in
  ``tests/storage/test_iceberg_maintenance.py`` against the real Spark procedure).
* ``expire_snapshots`` deletes only files that metadata references (data, manifests, lists,
  statistics); sidecars are referenced from *table properties* only, never from the
  ``statistics`` list (pyiceberg cannot load a table whose statistics name a custom blob type).
* The table property ``pando.sidecar`` holds a bare file name, resolved with
  :func:`sidecar_path`; names are restricted to ``[A-Za-z0-9][A-Za-z0-9_.-]*\\.puffin`` without
  ``..``, so a property can never point outside that directory (no traversal, no other table,
  no other bucket).
* A location that is a bucket or filesystem root (``s3://bucket``, ``/``) has no sibling; it
  is refused rather than producing ``s3://bucket.pando`` (another bucket).

Caveats: ``remove_orphan_files`` pointed at a *parent* of the table location (a namespace or
warehouse directory) would see and delete sidecars, as it would any foreign file (with the table's own location,
Iceberg 1.10 lists ``<location>/data`` and ``<location>/metadata`` only, by directory listing or
with ``usePrefixListing``; all three variants are tested). Dropping a table with ``PURGE`` does not
remove ``<location>.pando/`` — use
:func:`list_sidecars` / :func:`delete_sidecar`. Listing works for any location the table's
``PyArrowFileIO`` can open (local and ``file:`` are tested; ``s3://`` goes through the same
pyarrow filesystem API but is untested here); with another FileIO only local paths can be
listed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from .errors import SidecarError

__all__ = [
    "LAYOUT_ID_PATTERN",
    "SIDECAR_DIR_SUFFIX",
    "SIDECAR_NAME_PATTERN",
    "SidecarFile",
    "check_layout_id",
    "check_sidecar_name",
    "delete_sidecar",
    "list_sidecars",
    "sidecar_dir",
    "sidecar_path",
]

SIDECAR_DIR_SUFFIX = ".pando"
SIDECAR_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,200}\.puffin$"
LAYOUT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
_NAME_RE = re.compile(SIDECAR_NAME_PATTERN)
_ID_RE = re.compile(LAYOUT_ID_PATTERN)


def check_sidecar_name(file_name: Any) -> str:
    if not isinstance(file_name, str) or not _NAME_RE.fullmatch(file_name) or ".." in file_name:
        raise SidecarError(f"invalid sidecar file name {file_name!r}: expected a bare file name matching "
                           f"{SIDECAR_NAME_PATTERN} without '..' (e.g. '<layout-id>.puffin')")
    return file_name


def check_layout_id(layout_id: Any) -> str:
    if not isinstance(layout_id, str) or not _ID_RE.fullmatch(layout_id) or ".." in layout_id:
        raise SidecarError(f"invalid layout id {layout_id!r}: expected {LAYOUT_ID_PATTERN} without '..' "
                           "(e.g. a UUID)")
    return layout_id


def sidecar_dir(table_location: str) -> str:
    """``<table location>.pando`` (trailing slashes of the location are ignored)."""
    if not isinstance(table_location, str) or not table_location.strip():
        raise SidecarError(f"invalid table location {table_location!r}: must be a non-empty string")
    loc = table_location.rstrip("/")
    parsed = urlparse(loc)
    if len(parsed.scheme) > 1:  # a URI (one-letter schemes are Windows drives)
        root = parsed.path in ("", "/")
    else:
        root = loc in ("", ".") or os.path.dirname(os.path.abspath(loc)) == os.path.abspath(loc)
    if root:
        raise SidecarError(f"table location {table_location!r} is a bucket or filesystem root: there is no "
                           f"sibling directory for {SIDECAR_DIR_SUFFIX} sidecars")
    return loc + SIDECAR_DIR_SUFFIX


def sidecar_path(table_location: str, file_name: str) -> str:
    """The location of sidecar ``file_name`` of the table at ``table_location``."""
    return f"{sidecar_dir(table_location)}/{check_sidecar_name(file_name)}"


@dataclass(frozen=True)
class SidecarFile:
    name: str
    location: str
    size: int


def _local_path(location: str) -> str | None:
    parsed = urlparse(location)
    if len(parsed.scheme) <= 1:
        return location
    if parsed.scheme == "file":
        return parsed.path
    return None


def list_sidecars(io: Any, table_location: str) -> list[SidecarFile]:
    """The ``*.puffin`` files in the table's sidecar directory (empty if it does not exist),
    sorted by name. Files whose names the pointer policy would reject are left out."""
    d = sidecar_dir(table_location)
    found: list[tuple[str, int]] = []
    if hasattr(io, "parse_location") and hasattr(io, "fs_by_scheme"):  # PyArrowFileIO: any scheme
        from pyarrow.fs import FileSelector, FileType

        scheme, netloc, path = io.parse_location(d)
        fs = io.fs_by_scheme(scheme, netloc)
        try:
            infos = fs.get_file_info(FileSelector(path, allow_not_found=True, recursive=False))
        except OSError as e:
            raise SidecarError(f"cannot list {d}: {type(e).__name__}: {e}") from e
        found = [(i.base_name, int(i.size or 0)) for i in infos if i.type == FileType.File]
    else:
        local = _local_path(d)
        if local is None:
            raise SidecarError(f"cannot list {d}: listing needs pyiceberg's PyArrowFileIO for non-local locations "
                               f"(got {type(io).__name__})")
        try:
            with os.scandir(local) as it:
                found = [(e.name, e.stat().st_size) for e in it if e.is_file()]
        except FileNotFoundError:
            found = []
        except OSError as e:
            raise SidecarError(f"cannot list {d}: {type(e).__name__}: {e}") from e
    out = []
    for name, size in sorted(found):
        if _NAME_RE.fullmatch(name) and ".." not in name:
            out.append(SidecarFile(name, f"{d}/{name}", size))
    return out


def delete_sidecar(io: Any, table_location: str, file_name: str) -> str:
    """Delete one sidecar (the name is validated); returns its location."""
    loc = sidecar_path(table_location, file_name)
    try:
        io.delete(loc)
    except FileNotFoundError:
        raise SidecarError(f"sidecar {loc} does not exist") from None
    except OSError as e:
        raise SidecarError(f"cannot delete {loc}: {type(e).__name__}: {e}") from e
    return loc
