"""The layout sidecar: ONE Puffin file per layout, ``<table location>.pando/<layout-id>.puffin``
(see ``paths.py`` for why it lives there).

Blobs (all carry ``pando.crc32`` of their uncompressed payload; the footer carries
``pando.footer-crc32``; ``snapshot-id`` / ``sequence-number`` are the base snapshot's, -1 when
unknown; ``fields`` is empty):

=========================  =====  ==========================================================
type                       codec  payload
=========================  =====  ==========================================================
``pando-layout-v1``        none   ``Layout.to_bytes()`` as is (already zstd + crc32 inside);
                                  exactly one
``pando-literal-cut-v1``   zstd   ``LiteralCut.keys_to_bytes()``, one per literal (join-
                                  induced) cut; properties ``key`` (the cut key) and ``column``
``pando-block-files-v1``   zstd   JSON ``{"base-snapshot-id": int|null, "blocks": {"<block
                                  id>": [{"path", "record_count", "file_size_in_bytes"}]}}``;
                                  exactly one
=========================  =====  ==========================================================

File properties: ``pando.format-version`` ("1"), ``pando.layout-id``, ``pando.table-uuid``,
``pando.base-snapshot-id`` (when known), ``created-by`` ("pando-iceberg <version>"),
``pando.footer-crc32``, plus free-form caller properties (which may not reuse these keys).

On read everything is checked and any problem raises :class:`SidecarError`: Puffin structure,
checksums, format version (a newer one is named as such), blob types (exactly the expected
ones), duplicate literal keys, the block-file JSON, and — when given — the expected layout id
and table uuid. Decoding the ``Layout`` is the caller's business (``load_layout()`` does it).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import SidecarError
from .paths import check_layout_id, sidecar_path
from .puffin import (
    CODEC_ZSTD,
    FOOTER_CHECKSUM_PROPERTY,
    PuffinBlob,
    blob_payload,
    encode_puffin,
    parse_footer,
    read_bytes,
    verify_footer_checksum,
)

__all__ = [
    "BLOB_BLOCK_FILES",
    "BLOB_LAYOUT",
    "BLOB_LITERAL_CUT",
    "SIDECAR_FORMAT_VERSION",
    "DataFileRef",
    "LayoutSidecar",
    "new_layout_id",
]

SIDECAR_FORMAT_VERSION = 1
BLOB_LAYOUT = "pando-layout-v1"
BLOB_LITERAL_CUT = "pando-literal-cut-v1"
BLOB_BLOCK_FILES = "pando-block-files-v1"

P_FORMAT_VERSION = "pando.format-version"
P_LAYOUT_ID = "pando.layout-id"
P_TABLE_UUID = "pando.table-uuid"
P_BASE_SNAPSHOT = "pando.base-snapshot-id"
P_CREATED_BY = "created-by"
_RESERVED = {P_FORMAT_VERSION, P_LAYOUT_ID, P_TABLE_UUID, P_BASE_SNAPSHOT, P_CREATED_BY, FOOTER_CHECKSUM_PROPERTY}


def created_by() -> str:
    """The ``created-by`` property of the files we write: ``pando-iceberg <version>``."""
    from ..version import __version__

    return f"pando-iceberg {__version__}"


def new_layout_id() -> str:
    """A fresh layout id (a UUID4 string; valid as a sidecar file name stem)."""
    return str(uuid.uuid4())


def norm_uuid(value: Any, what: str) -> str:
    """``value`` as a canonical UUID string; SidecarError naming ``what`` if it is not a UUID."""
    try:
        return str(uuid.UUID(str(value)))
    except (ValueError, TypeError):
        raise SidecarError(f"{what} {value!r} is not a UUID") from None


@dataclass(frozen=True)
class DataFileRef:
    """A data file of a block: its path, row count and size as committed."""

    path: str
    record_count: int
    file_size_in_bytes: int

    def to_json(self) -> dict:
        return {"path": self.path, "record_count": self.record_count, "file_size_in_bytes": self.file_size_in_bytes}

    @staticmethod
    def from_json(d: Any, where: str) -> DataFileRef:
        if not isinstance(d, dict):
            raise SidecarError(f"{where}: a data file entry must be an object, got {type(d).__name__}")
        path, rc, size = d.get("path"), d.get("record_count"), d.get("file_size_in_bytes")
        if not isinstance(path, str) or not path:
            raise SidecarError(f"{where}: data file 'path' must be a non-empty string, got {path!r}")
        for name, v in (("record_count", rc), ("file_size_in_bytes", size)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise SidecarError(f"{where}: data file {name!r} must be a non-negative integer, got {v!r}")
        assert isinstance(rc, int) and isinstance(size, int)  # checked just above
        return DataFileRef(path, rc, size)


def _opt_int(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SidecarError(f"{what} must be an integer or None, got {value!r}")
    return value


def read_identity(props: dict[str, str], expected_layout_id: str | None,
                  expected_table_uuid: Any) -> tuple[str, str, int | None]:
    """A sidecar's layout id, table uuid and base snapshot from its file properties, checked
    against what the table points to (either expectation may be None: not checked)."""
    layout_id, table_uuid = props.get(P_LAYOUT_ID), props.get(P_TABLE_UUID)
    if layout_id is None or table_uuid is None:
        missing = [p for p in (P_LAYOUT_ID, P_TABLE_UUID) if props.get(p) is None]
        raise SidecarError(f"file properties missing: {', '.join(missing)}")
    check_layout_id(layout_id)
    table_uuid = norm_uuid(table_uuid, f"file property {P_TABLE_UUID}")
    if expected_layout_id is not None and layout_id != expected_layout_id:
        raise SidecarError(f"layout id mismatch: the sidecar holds layout {layout_id!r}, the table points to "
                           f"{expected_layout_id!r}")
    if expected_table_uuid is not None and table_uuid != norm_uuid(expected_table_uuid, "expected table uuid"):
        raise SidecarError(f"table uuid mismatch: the sidecar belongs to table {table_uuid}, not to "
                           f"{norm_uuid(expected_table_uuid, 'expected table uuid')}")
    base = props.get(P_BASE_SNAPSHOT)
    try:
        return layout_id, table_uuid, (int(base) if base is not None else None)
    except ValueError:
        raise SidecarError(f"file property {P_BASE_SNAPSHOT} = {base!r} is not an integer") from None


@dataclass
class LayoutSidecar:
    layout_id: str
    table_uuid: str
    layout_bytes: bytes
    literal_keys: dict[str, bytes] = field(default_factory=dict)  # cut key → keys_to_bytes()
    block_files: dict[int, list[DataFileRef]] = field(default_factory=dict)
    base_snapshot_id: int | None = None
    properties: dict[str, str] = field(default_factory=dict)  # free-form, stored as file properties
    literal_columns: dict[str, str] = field(default_factory=dict)  # cut key → column (informative)
    base_sequence_number: int | None = None
    location: str | None = field(default=None, compare=False)  # set by read()/write()

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_layout(cls, layout: Any, *, layout_id: str, table_uuid: Any,
                    block_files: Mapping[int, list[DataFileRef]], base_snapshot_id: int | None,
                    base_sequence_number: int | None = None,
                    properties: Mapping[str, str] | None = None) -> LayoutSidecar:
        """Serialize ``layout`` and collect its literal cuts' key sets (any cut with
        ``keys_to_bytes()``)."""
        keys: dict[str, bytes] = {}
        columns: dict[str, str] = {}
        for cut in getattr(layout, "cuts", ()):
            if hasattr(cut, "keys_to_bytes"):
                keys[cut.key] = cut.keys_to_bytes()
                if getattr(cut, "column", None) is not None:
                    columns[cut.key] = cut.column
        return cls(layout_id, str(table_uuid), layout.to_bytes(), keys, dict(block_files), base_snapshot_id,
                   dict(properties or {}), columns, base_sequence_number)

    def _validate(self) -> None:
        check_layout_id(self.layout_id)
        self.table_uuid = norm_uuid(self.table_uuid, "table uuid")
        _opt_int(self.base_snapshot_id, "base_snapshot_id")
        _opt_int(self.base_sequence_number, "base_sequence_number")
        if not isinstance(self.layout_bytes, (bytes, bytearray, memoryview)) or len(self.layout_bytes) == 0:
            raise SidecarError("layout_bytes must be non-empty bytes")
        for k, v in self.literal_keys.items():
            if not isinstance(k, str) or not k:
                raise SidecarError(f"literal cut key must be a non-empty string, got {k!r}")
            if not isinstance(v, (bytes, bytearray, memoryview)):
                raise SidecarError(f"literal cut {k!r}: key set must be bytes (keys_to_bytes()), "
                                   f"got {type(v).__name__}")
        for b, files in self.block_files.items():
            if isinstance(b, bool) or not isinstance(b, int) or b < 0:
                raise SidecarError(f"block id must be a non-negative integer, got {b!r}")
            for f in files:
                if not isinstance(f, DataFileRef):
                    raise SidecarError(f"block {b}: files must be DataFileRef, got {type(f).__name__}")
        clash = _RESERVED & set(self.properties)
        if clash:
            raise SidecarError(f"properties may not set reserved keys: {', '.join(sorted(clash))}")

    # ------------------------------------------------------------------ writing

    def to_bytes(self) -> bytes:
        self._validate()
        snap = -1 if self.base_snapshot_id is None else self.base_snapshot_id
        seq = -1 if self.base_sequence_number is None else self.base_sequence_number

        def blob(t: str, payload: bytes, codec: str | None, props: dict[str, str]) -> PuffinBlob:
            return PuffinBlob(t, bytes(payload), (), snap, seq, codec, props)

        blobs = [blob(BLOB_LAYOUT, self.layout_bytes, None, {P_LAYOUT_ID: self.layout_id})]
        for key in sorted(self.literal_keys):
            props = {"key": key}
            if key in self.literal_columns:
                props["column"] = str(self.literal_columns[key])
            blobs.append(blob(BLOB_LITERAL_CUT, self.literal_keys[key], CODEC_ZSTD, props))
        doc = {
            "base-snapshot-id": self.base_snapshot_id,
            "blocks": {str(b): [f.to_json() for f in files] for b, files in sorted(self.block_files.items())},
        }
        blobs.append(blob(BLOB_BLOCK_FILES, json.dumps(doc, separators=(",", ":"), sort_keys=True).encode("utf-8"),
                          CODEC_ZSTD, {"blocks": str(len(self.block_files))}))
        props = dict(self.properties)
        props.update({
            P_FORMAT_VERSION: str(SIDECAR_FORMAT_VERSION),
            P_LAYOUT_ID: self.layout_id,
            P_TABLE_UUID: self.table_uuid,
            P_CREATED_BY: created_by(),
        })
        if self.base_snapshot_id is not None:
            props[P_BASE_SNAPSHOT] = str(self.base_snapshot_id)
        return encode_puffin(blobs, props, checksums=True)

    @property
    def file_name(self) -> str:
        return f"{check_layout_id(self.layout_id)}.puffin"

    def write(self, io: Any, table_location: str, *, overwrite: bool = False) -> tuple[str, int]:
        """Write to ``<table location>.pando/<layout-id>.puffin``; returns (location, bytes).
        An existing file is never replaced unless ``overwrite``."""
        data = self.to_bytes()
        self.location = write_sidecar_file(io, table_location, self.file_name, data, overwrite=overwrite)
        return self.location, len(data)

    # ------------------------------------------------------------------ reading

    @classmethod
    def read(cls, io: Any, location: str, expected_layout_id: str | None = None,
             expected_table_uuid: Any = None) -> LayoutSidecar:
        """Read and fully verify the sidecar at ``location`` (a full path: build it with
        ``sidecar_path(table.location(), pointer.sidecar)``)."""
        data = read_bytes(location, io)
        try:
            sc = cls.from_bytes(data, expected_layout_id=expected_layout_id, expected_table_uuid=expected_table_uuid)
        except SidecarError as e:
            raise SidecarError(f"layout sidecar {location}: {e}") from None
        sc.location = location
        return sc

    @classmethod
    def from_bytes(cls, data: bytes, *, expected_layout_id: str | None = None,
                   expected_table_uuid: Any = None) -> LayoutSidecar:
        data = bytes(data)
        footer = parse_footer(data)
        props = footer.properties
        version = props.get(P_FORMAT_VERSION)
        if version is None:
            raise SidecarError(f"not a pando layout sidecar: file property {P_FORMAT_VERSION!r} is missing")
        if not version.isdigit() or not version.isascii():
            raise SidecarError(f"file property {P_FORMAT_VERSION!r} = {version!r} is not a format version "
                               f"(expected a decimal integer such as '{SIDECAR_FORMAT_VERSION}')")
        if int(version) != SIDECAR_FORMAT_VERSION:
            if int(version) > SIDECAR_FORMAT_VERSION:
                msg = (f"sidecar format version {int(version)} is newer than this pando-iceberg supports "
                       f"({SIDECAR_FORMAT_VERSION}); upgrade pando-iceberg to use this layout")
            else:
                msg = f"sidecar format version {version} is not supported (supported: {SIDECAR_FORMAT_VERSION})"
            try:
                verify_footer_checksum(footer)
            except SidecarError as e:
                msg += f" (or the footer is corrupt: {e})"
            raise SidecarError(msg)
        verify_footer_checksum(footer, required=True)

        layout_id, table_uuid, base_snapshot = read_identity(props, expected_layout_id, expected_table_uuid)

        known = (BLOB_LAYOUT, BLOB_LITERAL_CUT, BLOB_BLOCK_FILES)
        for i, m in enumerate(footer.blobs):
            if m.type not in known:
                raise SidecarError(f"blob {i} has unexpected type {m.type!r} (a format-version-1 sidecar holds only "
                                   f"{', '.join(known)})")
        for t in (BLOB_LAYOUT, BLOB_BLOCK_FILES):
            n = sum(m.type == t for m in footer.blobs)
            if n != 1:
                raise SidecarError(f"expected exactly one {t!r} blob, found {n}")

        layout_bytes = b""
        literal: dict[str, bytes] = {}
        columns: dict[str, str] = {}
        block_doc: Any = None
        seq = None
        for i, m in enumerate(footer.blobs):
            payload = blob_payload(data, m, i, require_checksum=True)
            what = f"blob {i} of type {m.type!r}"
            if m.type == BLOB_LAYOUT:
                layout_bytes = payload
                if m.properties.get(P_LAYOUT_ID, layout_id) != layout_id:
                    raise SidecarError(f"{what}: layout id {m.properties[P_LAYOUT_ID]!r} differs from the file's "
                                       f"{layout_id!r}")
                seq = m.sequence_number if m.sequence_number >= 0 else None
            elif m.type == BLOB_LITERAL_CUT:
                key = m.properties.get("key")
                if not key:
                    raise SidecarError(f"{what}: blob property 'key' (the cut key) is missing")
                if key in literal:
                    raise SidecarError(f"{what}: duplicate literal cut key {key!r}")
                literal[key] = payload
                if "column" in m.properties:
                    columns[key] = m.properties["column"]
            else:
                try:
                    block_doc = json.loads(payload.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError) as e:
                    raise SidecarError(f"{what}: payload is not valid JSON: {e}") from None
        block_files = _parse_block_files(block_doc, base_snapshot)
        extra = {k: v for k, v in props.items() if k not in _RESERVED}
        return cls(layout_id, table_uuid, layout_bytes, literal, block_files, base_snapshot, extra, columns, seq)

    # ------------------------------------------------------------------ decoding the layout

    def load_layout(self) -> Any:
        """Decode the ``Layout`` with ``pando_iceberg.expr.cut_from_json`` and the literal key
        sets; any failure (corrupt bytes, unknown cut, missing key set, block files naming a
        block the layout does not have) raises SidecarError."""
        try:
            from pando_iceberg.expr import LiteralCut, cut_from_json
            from pando_iceberg.layout import Layout
        except ImportError as e:  # pragma: no cover - depends on the checkout
            raise SidecarError(f"cannot decode the layout: {e}") from e
        keys = {}
        for k, raw in self.literal_keys.items():
            try:
                keys[k] = LiteralCut.keys_from_bytes(raw)
            except Exception as e:
                raise SidecarError(f"literal cut {k!r}: key set cannot be decoded: {type(e).__name__}: {e}") from e
        try:
            layout = Layout.from_bytes(bytes(self.layout_bytes), cut_from_json=cut_from_json, literal_keys=keys)
        except Exception as e:  # LayoutFormatError, PandoExprError, anything a corrupt blob provokes
            raise SidecarError(f"layout {self.layout_id!r} cannot be decoded: {type(e).__name__}: {e}") from e
        nb = int(layout.num_blocks)
        bad = sorted(b for b in self.block_files if b >= nb)
        if bad:
            raise SidecarError(f"block files name blocks {bad[:5]} but layout {self.layout_id!r} has {nb} blocks")
        return layout


def _parse_block_files(doc: Any, base_snapshot: int | None) -> dict[int, list[DataFileRef]]:
    where = f"{BLOB_BLOCK_FILES} blob"
    if not isinstance(doc, dict) or not isinstance(doc.get("blocks"), dict):
        raise SidecarError(f"{where}: expected an object with a 'blocks' object")
    snap = doc.get("base-snapshot-id")
    if snap is not None and (isinstance(snap, bool) or not isinstance(snap, int)):
        raise SidecarError(f"{where}: 'base-snapshot-id' must be an integer or null, got {snap!r}")
    if snap != base_snapshot:
        raise SidecarError(f"{where}: base snapshot {snap} differs from the file property {P_BASE_SNAPSHOT} "
                           f"({base_snapshot})")
    out: dict[int, list[DataFileRef]] = {}
    for k, files in doc["blocks"].items():
        if not (k.isascii() and k.isdigit()):
            raise SidecarError(f"{where}: block id {k!r} is not a non-negative integer")
        if not isinstance(files, list):
            raise SidecarError(f"{where}: block {k}: expected a list of data files, got {type(files).__name__}")
        out[int(k)] = [DataFileRef.from_json(f, f"{where}, block {k}") for f in files]
    return out


def write_sidecar_file(io: Any, table_location: str, file_name: str, data: bytes, *, overwrite: bool = False) -> str:
    """Write sidecar bytes to ``<table location>.pando/<file_name>``; returns the path. An
    existing file is never replaced unless ``overwrite`` (layout ids are unique)."""
    path = sidecar_path(table_location, file_name)
    try:
        with io.new_output(path).create(overwrite=overwrite) as stream:
            stream.write(data)
    except FileExistsError:
        raise SidecarError(f"sidecar {path} already exists (layout ids are unique; refusing to overwrite)") from None
    except OSError as e:
        raise SidecarError(f"cannot write sidecar {path}: {type(e).__name__}: {e}") from e
    return path
