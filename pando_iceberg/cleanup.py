"""``pando cleanup``: find (and with ``apply`` delete) what failed or crashed Pando rewrites left.

A rewrite writes its data files under ``<table location>/data/pando-<layout id>/`` and its
sidecar to ``<table location>.pando/<layout id>.puffin`` before its one commit. A rewrite that
fails deletes both itself; a process that is killed (or a machine that dies) cannot. What this
module removes, and only that:

* **data files** under ``<table location>/data/pando-*/`` that no snapshot of the table
  references: every manifest of every retained snapshot is read (data and delete manifests,
  entries of any status), so a file stays as long as any snapshot — current, older, on any
  branch or tag — names it. Files elsewhere under ``data/`` are Iceberg's business
  (``remove_orphan_files``).
* **sidecars** in ``<table location>.pando/`` that are neither the current layout's (table
  property ``pando.sidecar``) nor the layout of a retained snapshot (summary property
  ``pando.layout-id`` of a Pando ``replace`` snapshot): an older layout's sidecar becomes
  removable once ``expire_snapshots`` has dropped the snapshots it was made for.

A rewrite that is still running has written files no snapshot references yet. They are
protected by age: a ``pando-<layout id>`` group (its data directory and its sidecar) is kept
whole while its newest file is younger than ``older_than_minutes`` (default 60); pick a
larger value if rewrites run longer than that. The directory is listed *before* the table's
metadata is read, so a rewrite committing meanwhile is seen as referenced, never as a leftover.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from .storage.paths import list_sidecars, sidecar_dir

__all__ = ["DEFAULT_OLDER_THAN_MINUTES", "CleanupReport", "Leftover", "cleanup_table", "find_leftovers"]

DEFAULT_OLDER_THAN_MINUTES = 60.0
DATA_PREFIX = "pando-"


@dataclass
class Leftover:
    kind: str  # "data" | "sidecar"
    location: str
    size: int
    age_minutes: float
    layout_id: str
    action: str = "would delete"  # "would delete" | "deleted" | "kept: recent" | "failed: <error>"

    COLUMNS = ("kind", "location", "size_bytes", "age_minutes", "layout_id", "action")

    def row(self) -> tuple:
        return (self.kind, self.location, self.size, round(self.age_minutes, 1), self.layout_id, self.action)


@dataclass
class CleanupReport:
    table: str
    location: str
    applied: bool
    older_than_minutes: float
    leftovers: list[Leftover] = field(default_factory=list)
    referenced_pando_files: int = 0
    kept_sidecars: list[str] = field(default_factory=list)

    @property
    def removable(self) -> list[Leftover]:
        return [x for x in self.leftovers if not x.action.startswith("kept")]

    @property
    def failed(self) -> list[Leftover]:
        return [x for x in self.leftovers if x.action.startswith("failed")]

    def summary(self) -> dict[str, Any]:
        rem = self.removable
        return {"table": self.table, "mode": "apply" if self.applied else "dry run",
                "older_than_minutes": self.older_than_minutes,
                "removable_files": len(rem), "removable_bytes": sum(x.size for x in rem),
                "deleted_files": sum(1 for x in rem if x.action == "deleted"),
                "kept_recent_files": len(self.leftovers) - len(rem),
                "referenced_pando_files": self.referenced_pando_files,
                "kept_sidecars": ", ".join(self.kept_sidecars) or "-"}


# ---- file system helpers (PyArrowFileIO: any scheme pyarrow opens; else local paths) --------

def _fs(io: Any, location: str):
    if hasattr(io, "parse_location") and hasattr(io, "fs_by_scheme"):
        scheme, netloc, path = io.parse_location(location)
        return io.fs_by_scheme(scheme, netloc), path
    from pyarrow.fs import LocalFileSystem

    parsed = urlparse(location)
    if len(parsed.scheme) > 1 and parsed.scheme != "file":
        raise ValueError(f"cannot list {location}: needs pyiceberg's PyArrowFileIO (got {type(io).__name__})")
    return LocalFileSystem(), parsed.path if parsed.scheme == "file" else location


def _join(location: str, fs_path: str, base_path: str) -> str:
    """The location of ``fs_path`` (a path inside ``base_path``) with ``location``'s scheme."""
    rel = fs_path[len(base_path):].lstrip("/")
    return f"{location.rstrip('/')}/{rel}" if rel else location


def _key(location: str) -> tuple[str, str, str]:
    """A comparable form of a file location (``file:/a``, ``file:///a`` and ``/a`` are equal)."""
    p = urlparse(location)
    scheme = p.scheme if len(p.scheme) > 1 else "file"
    path = p.path if len(p.scheme) > 1 else location
    while "//" in path:
        path = path.replace("//", "/")
    return scheme.replace("s3a", "s3").replace("s3n", "s3"), p.netloc, path.rstrip("/")


def _list_pando_data(io: Any, location: str) -> list[tuple[str, str, int, float]]:
    """(layout id, location, size, mtime) of every file under ``<location>/data/pando-*/``."""
    from pyarrow.fs import FileSelector, FileType

    data = f"{location.rstrip('/')}/data"
    fs, path = _fs(io, data)
    out = []
    for d in fs.get_file_info(FileSelector(path, allow_not_found=True, recursive=False)):
        if d.type != FileType.Directory or not d.base_name.startswith(DATA_PREFIX):
            continue
        layout_id = d.base_name[len(DATA_PREFIX):]
        for f in fs.get_file_info(FileSelector(d.path, allow_not_found=True, recursive=True)):
            if f.type == FileType.File:
                mtime = f.mtime.timestamp() if f.mtime is not None else 0.0
                out.append((layout_id, _join(data, f.path, path), int(f.size or 0), mtime))
    return out


def _sidecar_mtimes(io: Any, location: str) -> dict[str, float]:
    from pyarrow.fs import FileSelector, FileType

    fs, path = _fs(io, sidecar_dir(location))
    return {f.base_name: (f.mtime.timestamp() if f.mtime is not None else 0.0)
            for f in fs.get_file_info(FileSelector(path, allow_not_found=True, recursive=False))
            if f.type == FileType.File}


# ---- what the table references ----------------------------------------------------------------

def referenced_files(table: Any) -> set[tuple[str, str, str]]:
    """Keys of every file named by any manifest of any retained snapshot (data and delete files,
    entries of every status), plus the manifests themselves."""
    io = table.io
    seen_manifests: set[str] = set()
    files: set[tuple[str, str, str]] = set()
    for snap in table.metadata.snapshots:
        for manifest in snap.manifests(io):
            if manifest.manifest_path in seen_manifests:
                continue
            seen_manifests.add(manifest.manifest_path)
            files.add(_key(manifest.manifest_path))
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                files.add(_key(entry.data_file.file_path))
    return files


def referenced_layout_ids(table: Any) -> set[str]:
    ids = {s.summary.additional_properties.get("pando.layout-id") if s.summary else None
           for s in table.metadata.snapshots}
    current = table.properties.get("pando.layout-id")
    pending = table.properties.get("pando.pending-layout-id")  # optimize_layout's, not applied yet
    return {i for i in ids | {current, pending} if i}


# ---- the procedure ----------------------------------------------------------------------------

def find_leftovers(table: Any, name: str = "", older_than_minutes: float = DEFAULT_OLDER_THAN_MINUTES,
                   now: float | None = None, io: Any = None) -> CleanupReport:
    """Pando files of ``table`` (a pyiceberg Table, loaded by the caller) that nothing references.
    Lists first, then reloads the table's metadata when it can (``table.refresh()``)."""
    if older_than_minutes < 0:
        raise ValueError(f"older_than_minutes must be >= 0, got {older_than_minutes}")
    io = io or table.io
    location = table.location().rstrip("/")
    data_files = _list_pando_data(io, location)
    sidecars = list_sidecars(io, location)
    sidecar_mtimes = _sidecar_mtimes(io, location) if sidecars else {}
    if hasattr(table, "refresh"):
        table = table.refresh()  # metadata read AFTER listing: a commit in between is seen
    now = time.time() if now is None else now
    cutoff = now - older_than_minutes * 60.0

    refs = referenced_files(table)
    layout_ids = referenced_layout_ids(table)
    current_sidecar = table.properties.get("pando.sidecar")
    kept_sidecars = sorted({s.name for s in sidecars if s.name == current_sidecar
                            or s.name[: -len(".puffin")] in layout_ids})

    # Newest modification per layout-id group: a group still being written is kept whole.
    newest: dict[str, float] = {}
    for layout_id, _, _, mtime in data_files:
        newest[layout_id] = max(newest.get(layout_id, 0.0), mtime)
    for s in sidecars:
        lid = s.name[: -len(".puffin")]
        newest[lid] = max(newest.get(lid, 0.0), sidecar_mtimes.get(s.name, 0.0))

    report = CleanupReport(name or ".".join(getattr(table, "name", lambda: ())()) or location, location, False,
                           older_than_minutes, kept_sidecars=kept_sidecars)
    for layout_id, loc, size, mtime in data_files:
        if _key(loc) in refs:
            report.referenced_pando_files += 1
            continue
        report.leftovers.append(Leftover("data", loc, size, max(0.0, (now - mtime) / 60.0), layout_id,
                                         "would delete" if newest[layout_id] < cutoff else "kept: recent"))
    for s in sidecars:
        if s.name in kept_sidecars:
            continue
        lid = s.name[: -len(".puffin")]
        mtime = sidecar_mtimes.get(s.name, 0.0)
        report.leftovers.append(Leftover("sidecar", s.location, s.size, max(0.0, (now - mtime) / 60.0), lid,
                                         "would delete" if newest[lid] < cutoff else "kept: recent"))
    report.leftovers.sort(key=lambda x: (x.layout_id, x.kind, x.location))
    return report


def apply_cleanup(report: CleanupReport, io: Any) -> CleanupReport:
    """Delete the report's removable files; empty ``pando-*`` directories go too."""
    report.applied = True
    emptied: set[str] = set()
    for x in report.removable:
        try:
            io.delete(x.location)
            x.action = "deleted"
            if x.kind == "data":
                emptied.add(f"{report.location}/data/{DATA_PREFIX}{x.layout_id}")
        except FileNotFoundError:
            x.action = "deleted"  # gone already (another cleanup)
        except Exception as e:
            x.action = f"failed: {type(e).__name__}: {e}"
    for d in sorted(emptied):
        _remove_dir_if_empty(io, d)
    return report


def _remove_dir_if_empty(io: Any, location: str) -> None:
    from pyarrow.fs import FileSelector, FileType

    try:
        fs, path = _fs(io, location)
        left = [f for f in fs.get_file_info(FileSelector(path, allow_not_found=True, recursive=True))
                if f.type == FileType.File]
        if not left and fs.get_file_info(path).type == FileType.Directory:
            fs.delete_dir(path)
    except Exception:
        pass


def cleanup_table(catalog: Any, name: str, apply: bool = False,
                  older_than_minutes: float = DEFAULT_OLDER_THAN_MINUTES) -> CleanupReport:
    """List (and with ``apply`` delete) the files failed Pando rewrites of table ``name`` left."""
    table = catalog.load_table(name)
    report = find_leftovers(table, name, older_than_minutes)
    if apply:
        apply_cleanup(report, table.io)
    return report


def rows(report: CleanupReport) -> Iterable[tuple]:
    return [x.row() for x in report.leftovers]

