"""A spec-compliant Puffin writer and a strict Puffin reader.

Puffin (https://iceberg.apache.org/puffin-spec/) is Iceberg's container for blobs that do not
fit in manifests. The layout of a file::

    Magic  Blob_1 ... Blob_n  Footer
    Footer = Magic FooterPayload FooterPayloadSize Flags Magic

* ``Magic`` is the four bytes ``PFA1`` (0x50 0x46 0x41 0x31).
* ``FooterPayload`` is UTF-8 JSON: ``{"blobs": [BlobMetadata...], "properties": {...}}``;
  each BlobMetadata has ``type``, ``fields`` (list of int), ``snapshot-id``, ``sequence-number``,
  ``offset``, ``length`` and optionally ``compression-codec`` and ``properties`` (str → str).
* ``FooterPayloadSize`` is a 4-byte signed little-endian int (the JSON's length).
* ``Flags`` are 4 bytes; bit 0 of byte 0 says the footer payload is LZ4-compressed, all other
  bits are reserved and 0. We always write an uncompressed footer and reject any flag on read.
* Blob codecs: ``zstd`` (a single Zstandard frame) or none. ``lz4`` exists in the spec but no
  Iceberg implementation writes it; we reject it with a precise message.

Checksums (our addition, compatible with every Puffin reader because they are plain
properties): with ``checksums=True`` the writer adds, to each blob's properties,
``pando.crc32`` = crc32 of the *uncompressed* payload (8 lowercase hex digits) and, to the file
properties, ``pando.footer-crc32`` = crc32 of the canonical JSON of the whole footer without
that property. Puffin itself has no checksum; with these, every single-bit flip anywhere in
the file is detected (the pando sidecar requires them, see ``sidecar.py``).

Everything wrong with a file raises :class:`SidecarError` with a message naming what was wrong;
no ``struct``/``json``/``zstd`` exception escapes the reader.

I/O goes through pyiceberg's ``FileIO`` so local paths, ``file:`` URIs and ``s3://`` all work.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import zstandard

from .errors import SidecarError

__all__ = [
    "CHECKSUM_PROPERTY",
    "CODEC_ZSTD",
    "FOOTER_CHECKSUM_PROPERTY",
    "MAGIC",
    "BlobMetadata",
    "PuffinBlob",
    "PuffinContents",
    "PuffinFooter",
    "blob_payload",
    "encode_puffin",
    "parse_footer",
    "read_bytes",
    "read_puffin",
    "read_puffin_file",
    "verify_footer_checksum",
    "write_puffin",
]

MAGIC = b"PFA1"
CODEC_ZSTD = "zstd"
KNOWN_CODECS = (None, CODEC_ZSTD)
CHECKSUM_PROPERTY = "pando.crc32"
FOOTER_CHECKSUM_PROPERTY = "pando.footer-crc32"
_FOOTER_STRUCT_SIZE = 4 + 4 + 4  # payload size, flags, magic
_MIN_FILE = 4 + 4 + _FOOTER_STRUCT_SIZE  # header magic + footer magic + size/flags/magic
_INT32_MAX = (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


@dataclass(frozen=True)
class PuffinBlob:
    """A blob to write. ``compression_codec`` is ``None`` or ``"zstd"`` (the writer compresses)."""

    type: str
    payload: bytes
    fields: tuple[int, ...] = ()
    snapshot_id: int = -1
    sequence_number: int = -1
    compression_codec: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BlobMetadata:
    """A blob's entry in the footer (what the file says about it)."""

    type: str
    fields: tuple[int, ...]
    snapshot_id: int
    sequence_number: int
    offset: int
    length: int
    compression_codec: str | None
    properties: Mapping[str, str]

    def to_json(self) -> dict:
        d: dict[str, Any] = {
            "type": self.type,
            "fields": list(self.fields),
            "snapshot-id": self.snapshot_id,
            "sequence-number": self.sequence_number,
            "offset": self.offset,
            "length": self.length,
        }
        if self.compression_codec is not None:
            d["compression-codec"] = self.compression_codec
        if self.properties:
            d["properties"] = dict(self.properties)
        return d


@dataclass(frozen=True)
class PuffinFooter:
    blobs: list[BlobMetadata]
    properties: dict[str, str]
    raw: dict  # the parsed footer JSON, as stored
    footer_offset: int  # where the footer's leading magic starts


@dataclass
class PuffinContents:
    """A fully read Puffin file: (metadata, decompressed payload) per blob, file properties."""

    blobs: list[tuple[BlobMetadata, bytes]]
    properties: dict[str, str]

    def of_type(self, blob_type: str) -> list[tuple[BlobMetadata, bytes]]:
        return [(m, p) for m, p in self.blobs if m.type == blob_type]


# ----------------------------------------------------------------------------- writing


def _crc_hex(data: bytes) -> str:
    return f"{zlib.crc32(data) & 0xFFFFFFFF:08x}"


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _footer_checksum(raw_footer: Mapping) -> str:
    props = dict(raw_footer.get("properties") or {})
    props.pop(FOOTER_CHECKSUM_PROPERTY, None)
    doc = dict(raw_footer)
    doc["properties"] = props
    return _crc_hex(_canonical(doc))


def _check_str_map(what: str, m: Mapping) -> dict[str, str]:
    out = {}
    for k, v in m.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise SidecarError(f"{what}: properties must map str to str, got {k!r}: {v!r}")
        out[k] = v
    return out


def encode_puffin(blobs: Iterable[PuffinBlob], properties: Mapping[str, str] | None = None,
                  *, checksums: bool = False) -> bytes:
    """The bytes of a Puffin file holding ``blobs`` (in order) and file ``properties``."""
    parts = [MAGIC]
    offset = len(MAGIC)
    metas = []
    for i, b in enumerate(blobs):
        what = f"blob {i} of type {b.type!r}"
        if not isinstance(b.type, str) or not b.type:
            raise SidecarError(f"blob {i}: type must be a non-empty string, got {b.type!r}")
        if b.compression_codec not in KNOWN_CODECS:
            raise SidecarError(f"{what}: cannot write compression codec {b.compression_codec!r} "
                               f"(supported: none, {CODEC_ZSTD!r})")
        payload = bytes(b.payload)
        props = _check_str_map(what, b.properties)
        if checksums:
            props[CHECKSUM_PROPERTY] = _crc_hex(payload)
        stored = payload
        if b.compression_codec == CODEC_ZSTD:
            stored = zstandard.ZstdCompressor(level=3, write_checksum=True, write_content_size=True).compress(payload)
        meta = BlobMetadata(b.type, tuple(int(f) for f in b.fields), int(b.snapshot_id), int(b.sequence_number),
                            offset, len(stored), b.compression_codec, props)
        metas.append(meta)
        parts.append(stored)
        offset += len(stored)
    file_props = _check_str_map("file", properties or {})
    raw = {"blobs": [m.to_json() for m in metas], "properties": file_props}
    if checksums:
        file_props[FOOTER_CHECKSUM_PROPERTY] = _footer_checksum(raw)
        raw["properties"] = file_props
    payload_json = json.dumps(raw, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if len(payload_json) > _INT32_MAX:
        raise SidecarError(f"footer payload of {len(payload_json)} bytes does not fit Puffin's 4-byte size")
    parts += [MAGIC, payload_json, struct.pack("<i", len(payload_json)), b"\x00\x00\x00\x00", MAGIC]
    return b"".join(parts)


def _file_io(location: str, io: Any = None) -> Any:
    if io is not None:
        return io
    from pyiceberg.io import load_file_io

    return load_file_io({}, location)


def write_puffin(output: Any, blobs: Iterable[PuffinBlob], properties: Mapping[str, str] | None = None,
                 *, io: Any = None, overwrite: bool = False, checksums: bool = False) -> int:
    """Write a Puffin file; ``output`` is a pyiceberg ``OutputFile`` or a path/URI (then ``io``,
    or a FileIO inferred from the location, opens it). Returns the number of bytes written.
    Refuses to replace an existing file unless ``overwrite``."""
    data = encode_puffin(blobs, properties, checksums=checksums)
    if isinstance(output, str):
        output = _file_io(output, io).new_output(output)
    try:
        with output.create(overwrite=overwrite) as stream:
            stream.write(data)
    except FileExistsError as e:
        raise SidecarError(f"refusing to overwrite existing Puffin file {output.location}") from e
    return len(data)


# ----------------------------------------------------------------------------- reading


def _req(d: dict, key: str, kind: type | tuple, what: str) -> Any:
    if key not in d:
        raise SidecarError(f"{what}: footer field {key!r} is missing")
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, kind):
        raise SidecarError(f"{what}: footer field {key!r} has the wrong type ({type(v).__name__}: {v!r:.60})")
    return v


def _int64(d: dict, key: str, what: str) -> int:
    v = _req(d, key, int, what)
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise SidecarError(f"{what}: footer field {key!r} = {v} is out of the 64-bit range")
    return v


def parse_footer(data: bytes) -> PuffinFooter:
    """Validate the file structure and parse the footer (payloads are not touched)."""
    n = len(data)
    if n < _MIN_FILE:
        raise SidecarError(f"truncated: a Puffin file has at least {_MIN_FILE} bytes, got {n}")
    if data[:4] != MAGIC:
        raise SidecarError(f"bad magic at the start of the file: expected {MAGIC!r}, got {bytes(data[:4])!r} "
                           "(not a Puffin file)")
    if data[-4:] != MAGIC:
        raise SidecarError(f"bad magic at the end of the file: expected {MAGIC!r}, got {bytes(data[-4:])!r} "
                           "(truncated, or not a Puffin file)")
    flags = bytes(data[-8:-4])
    if flags[0] & 1:
        raise SidecarError("the footer payload is LZ4-compressed (flag bit 0), which is not supported")
    if flags != b"\x00\x00\x00\x00":
        raise SidecarError(f"unknown footer flags 0x{flags.hex()} (reserved bits must be 0)")
    (size,) = struct.unpack("<i", data[-12:-8])
    if size < 0:
        raise SidecarError(f"footer payload size is negative ({size})")
    footer_offset = n - _FOOTER_STRUCT_SIZE - size - 4
    if footer_offset < 4:
        raise SidecarError(f"truncated: the footer says its payload has {size} bytes, which needs a file of at "
                           f"least {size + _MIN_FILE} bytes, got {n} (wrong footer payload size, or truncated)")
    if data[footer_offset : footer_offset + 4] != MAGIC:
        raise SidecarError(f"bad magic at the start of the footer (offset {footer_offset}): expected {MAGIC!r}, got "
                           f"{bytes(data[footer_offset:footer_offset + 4])!r} (wrong footer payload size {size}, "
                           "or the file was truncated)")
    payload = bytes(data[footer_offset + 4 : footer_offset + 4 + size])
    try:
        raw = json.loads(payload.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise SidecarError(f"footer payload is not valid UTF-8: {e}") from None
    except json.JSONDecodeError as e:
        raise SidecarError(f"footer payload is not valid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise SidecarError(f"footer payload must be a JSON object, got {type(raw).__name__}")
    blobs_raw = _req(raw, "blobs", list, "footer")
    props_raw = raw.get("properties", {})
    if not isinstance(props_raw, dict):
        raise SidecarError(f"footer: file properties must be a JSON object, got {type(props_raw).__name__}")
    file_props = _check_str_map("file", props_raw)
    blobs = []
    for i, b in enumerate(blobs_raw):
        if not isinstance(b, dict):
            raise SidecarError(f"blob {i}: footer entry must be a JSON object, got {type(b).__name__}")
        btype = b.get("type")
        what = f"blob {i} of type {btype!r}" if isinstance(btype, str) else f"blob {i}"
        btype = _req(b, "type", str, what)
        fields = _req(b, "fields", list, what)
        if any(isinstance(f, bool) or not isinstance(f, int) for f in fields):
            raise SidecarError(f"{what}: footer field 'fields' must be a list of integers, got {fields!r:.60}")
        snap = _int64(b, "snapshot-id", what)
        seq = _int64(b, "sequence-number", what)
        off = _int64(b, "offset", what)
        length = _int64(b, "length", what)
        codec = b.get("compression-codec")
        if codec not in KNOWN_CODECS:
            raise SidecarError(f"{what}: unsupported compression codec {codec!r} (supported: none, {CODEC_ZSTD!r})")
        props = b.get("properties", {})
        if not isinstance(props, dict):
            raise SidecarError(f"{what}: blob properties must be a JSON object, got {type(props).__name__}")
        props = _check_str_map(what, props)
        if off < 4 or length < 0 or off + length > footer_offset:
            raise SidecarError(f"{what}: offset {off} + length {length} lies outside the blob area "
                               f"[4, {footer_offset}) (corrupt footer, or truncated file)")
        blobs.append(BlobMetadata(btype, tuple(fields), snap, seq, off, length, codec, props))
    return PuffinFooter(blobs, file_props, raw, footer_offset)


def verify_footer_checksum(footer: PuffinFooter, *, required: bool = False) -> None:
    want = footer.properties.get(FOOTER_CHECKSUM_PROPERTY)
    if want is None:
        if required:
            raise SidecarError(f"file property {FOOTER_CHECKSUM_PROPERTY!r} is missing (footer cannot be verified)")
        return
    got = _footer_checksum(footer.raw)
    if got != want:
        raise SidecarError(f"footer checksum mismatch: {FOOTER_CHECKSUM_PROPERTY} says {want}, the footer hashes "
                           f"to {got} (the footer is corrupt)")


def blob_payload(data: bytes, meta: BlobMetadata, index: int = 0, *, verify: bool = True,
                 require_checksum: bool = False) -> bytes:
    """The decompressed payload of one blob; checks ``pando.crc32`` when present (or required)."""
    what = f"blob {index} of type {meta.type!r}"
    raw = bytes(data[meta.offset : meta.offset + meta.length])
    if len(raw) != meta.length:
        raise SidecarError(f"truncated: {what} expected {meta.length} bytes at offset {meta.offset}, got {len(raw)}")
    if meta.compression_codec == CODEC_ZSTD:
        try:
            d = zstandard.ZstdDecompressor().decompressobj()
            payload = d.decompress(raw)
            complete = d.eof
            trailing = d.unused_data
        except zstandard.ZstdError as e:
            raise SidecarError(f"{what}: zstd payload does not decompress: {e}") from None
        if not complete:
            raise SidecarError(f"{what}: zstd payload does not decompress: the frame is incomplete (truncated)")
        if trailing:
            raise SidecarError(f"{what}: zstd payload has {len(trailing)} trailing bytes after its frame")
    elif meta.compression_codec is None:
        payload = raw
    else:  # pragma: no cover - parse_footer rejects these
        raise SidecarError(f"{what}: unsupported compression codec {meta.compression_codec!r}")
    if verify:
        want = meta.properties.get(CHECKSUM_PROPERTY)
        if want is None:
            if require_checksum:
                raise SidecarError(f"{what}: blob property {CHECKSUM_PROPERTY!r} is missing "
                                   "(payload cannot be verified)")
        elif _crc_hex(payload) != want:
            raise SidecarError(f"{what}: payload checksum mismatch ({CHECKSUM_PROPERTY} says {want}, payload hashes "
                               f"to {_crc_hex(payload)}): the payload is corrupt")
    return payload


def read_puffin(data: bytes, *, require_checksums: bool = False) -> PuffinContents:
    """Parse and validate a whole Puffin file held in memory."""
    data = bytes(data)
    footer = parse_footer(data)
    verify_footer_checksum(footer, required=require_checksums)
    blobs = [(m, blob_payload(data, m, i, require_checksum=require_checksums)) for i, m in enumerate(footer.blobs)]
    return PuffinContents(blobs, dict(footer.properties))


def read_bytes(location: Any, io: Any = None) -> bytes:
    """All bytes of a file (``InputFile`` or path/URI); I/O failures become SidecarError."""
    try:
        if isinstance(location, str):
            location = _file_io(location, io).new_input(location)
        with location.open(seekable=False) as stream:
            return bytes(stream.read())
    except FileNotFoundError:
        raise SidecarError(f"file does not exist: {getattr(location, 'location', location)}") from None
    except OSError as e:
        raise SidecarError(f"cannot read {getattr(location, 'location', location)}: {type(e).__name__}: {e}") from e


def read_puffin_file(location: Any, io: Any = None, *, require_checksums: bool = False) -> PuffinContents:
    return read_puffin(read_bytes(location, io), require_checksums=require_checksums)
