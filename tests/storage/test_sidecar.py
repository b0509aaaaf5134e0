"""The layout sidecar: round trip with a real Layout, strict checks, corruption, versions."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from pando_iceberg.storage import (
    BLOB_BLOCK_FILES,
    BLOB_LAYOUT,
    BLOB_LITERAL_CUT,
    DataFileRef,
    LayoutSidecar,
    PuffinBlob,
    SidecarError,
    encode_puffin,
    list_sidecars,
    read_puffin,
    sidecar_path,
)
from pando_iceberg.storage.puffin import MAGIC

TABLE_UUID = "6a2e2c1e-7d3b-4f0a-9c55-0123456789ab"  # as in conftest.py


def test_round_trip_and_layout_decodes(sidecar, tiny_layout):
    layout, table, filters = tiny_layout
    back = LayoutSidecar.from_bytes(sidecar.to_bytes())
    assert back == sidecar
    assert back.literal_keys and all(isinstance(v, bytes) for v in back.literal_keys.values())
    assert back.literal_columns == {k: "custkey" for k in back.literal_keys}
    assert back.base_sequence_number == 3 and back.properties == {"pando.k": "2"}
    got = back.load_layout()
    assert got.num_blocks == layout.num_blocks
    assert np.array_equal(got.route(table), layout.route(table))
    for f in filters:
        assert np.array_equal(got.blocks_for(f)[0], layout.blocks_for(f)[0])


def test_blob_layout_in_the_file(sidecar):
    contents = read_puffin(sidecar.to_bytes(), require_checksums=True)
    types = [m.type for m, _ in contents.blobs]
    assert types[0] == BLOB_LAYOUT and types[-1] == BLOB_BLOCK_FILES
    assert types.count(BLOB_LITERAL_CUT) == len(sidecar.literal_keys) >= 1
    assert contents.properties["pando.format-version"] == "1"
    assert contents.properties["pando.layout-id"] == sidecar.layout_id
    assert contents.properties["pando.table-uuid"] == TABLE_UUID
    assert contents.properties["created-by"].startswith("pando-iceberg ")
    layout_meta, layout_payload = contents.blobs[0]
    assert layout_payload == sidecar.layout_bytes and layout_meta.compression_codec is None
    assert layout_meta.snapshot_id == sidecar.base_snapshot_id and layout_meta.sequence_number == 3
    for m, payload in contents.of_type(BLOB_LITERAL_CUT):
        assert m.compression_codec == "zstd" and m.properties["column"] == "custkey"
        assert payload == sidecar.literal_keys[m.properties["key"]]
    (m, payload), = contents.of_type(BLOB_BLOCK_FILES)
    doc = json.loads(payload)
    assert m.compression_codec == "zstd" and doc["base-snapshot-id"] == sidecar.base_snapshot_id
    assert doc["blocks"]["0"] == [{"path": "file:/wh/db/t/data/block-00000.parquet", "record_count": 100,
                                   "file_size_in_bytes": 4096}]


def test_opaque_layout_bytes_round_trip_without_the_engine():
    sc = LayoutSidecar("lay-1", TABLE_UUID.upper(), b"\x00opaque", {"c IN (..)": b"keys"},
                       {3: [DataFileRef("s3://b/t/data/f.parquet", 5, 50)], 0: []}, None)
    back = LayoutSidecar.from_bytes(sc.to_bytes())
    assert back == sc and back.table_uuid == TABLE_UUID and back.base_snapshot_id is None


def test_write_read_list_delete_through_file_io(tmp_path, sidecar):
    from pyiceberg.io import load_file_io

    from pando_iceberg.storage import delete_sidecar

    table_loc = f"file:{tmp_path}/wh/db/t"
    io = load_file_io({}, table_loc)
    path, size = sidecar.write(io, table_loc)
    assert path == f"file:{tmp_path}/wh/db/t.pando/{sidecar.layout_id}.puffin"
    assert (tmp_path / "wh/db/t.pando" / f"{sidecar.layout_id}.puffin").stat().st_size == size
    back = LayoutSidecar.read(io, path, expected_layout_id=sidecar.layout_id, expected_table_uuid=TABLE_UUID)
    assert back == sidecar and back.location == path
    with pytest.raises(SidecarError, match="already exists"):
        sidecar.write(io, table_loc)
    assert sidecar.write(io, table_loc, overwrite=True) == (path, size)
    (tmp_path / "wh/db/t.pando/notes.txt").write_text("x")
    listed = list_sidecars(io, table_loc)
    assert [(f.name, f.location, f.size) for f in listed] == [(f"{sidecar.layout_id}.puffin", path, size)]
    assert list_sidecars(io, f"{tmp_path}/wh/db/other") == []
    assert list_sidecars(object(), f"{tmp_path}/wh/db/t")[0].size == size  # non-PyArrow FileIO: local listing
    delete_sidecar(io, table_loc, f"{sidecar.layout_id}.puffin")
    assert list_sidecars(io, table_loc) == []
    with pytest.raises(SidecarError, match="does not exist"):
        LayoutSidecar.read(io, path)


def test_expected_ids_are_checked(sidecar):
    data = sidecar.to_bytes()
    with pytest.raises(SidecarError, match="layout id mismatch.*'other'"):
        LayoutSidecar.from_bytes(data, expected_layout_id="other")
    with pytest.raises(SidecarError, match="table uuid mismatch"):
        LayoutSidecar.from_bytes(data, expected_table_uuid="00000000-0000-4000-8000-000000000000")
    assert LayoutSidecar.from_bytes(data, expected_table_uuid=TABLE_UUID.upper()) == sidecar


def _v(props=None, blobs=None, version="1"):
    """A hand-made sidecar-like file with valid checksums."""
    p = {"pando.format-version": version, "pando.layout-id": "L", "pando.table-uuid": TABLE_UUID}
    p.update(props or {})
    if blobs is None:
        blobs = [PuffinBlob(BLOB_LAYOUT, b"x"),
                 PuffinBlob(BLOB_BLOCK_FILES, b'{"base-snapshot-id":null,"blocks":{}}')]
    return encode_puffin(blobs, p, checksums=True)


def test_future_format_version_is_named():
    with pytest.raises(SidecarError, match=r"format version 2 is newer than this pando-iceberg supports \(1\)"):
        LayoutSidecar.from_bytes(_v(version="2", blobs=[PuffinBlob("pando-layout-v2", b"?", compression_codec=None)]))
    with pytest.raises(SidecarError, match="not a format version"):
        LayoutSidecar.from_bytes(_v(version="one"))
    with pytest.raises(SidecarError, match="format version 0 is not supported"):
        LayoutSidecar.from_bytes(_v(version="0"))
    with pytest.raises(SidecarError, match="not a pando layout sidecar"):
        LayoutSidecar.from_bytes(encode_puffin([], {"created-by": "someone else"}))
    assert LayoutSidecar.from_bytes(_v()).layout_id == "L"


@pytest.mark.parametrize(
    "blobs,match",
    [
        ([PuffinBlob(BLOB_BLOCK_FILES, b'{"base-snapshot-id":null,"blocks":{}}')], "exactly one 'pando-layout-v1'"),
        ([PuffinBlob(BLOB_LAYOUT, b"x")], "exactly one 'pando-block-files-v1'"),
        ([PuffinBlob(BLOB_LAYOUT, b"x"), PuffinBlob(BLOB_LAYOUT, b"y"),
          PuffinBlob(BLOB_BLOCK_FILES, b'{"base-snapshot-id":null,"blocks":{}}')], "found 2"),
        ([PuffinBlob(BLOB_LAYOUT, b"x"), PuffinBlob("apache-datasketches-theta-v1", b"y"),
          PuffinBlob(BLOB_BLOCK_FILES, b'{"base-snapshot-id":null,"blocks":{}}')], "unexpected type"),
        ([PuffinBlob(BLOB_LAYOUT, b"x"), PuffinBlob(BLOB_LITERAL_CUT, b"k"),
          PuffinBlob(BLOB_BLOCK_FILES, b'{"base-snapshot-id":null,"blocks":{}}')], "'key' .* is missing"),
        ([PuffinBlob(BLOB_LAYOUT, b"x"), PuffinBlob(BLOB_LITERAL_CUT, b"k", properties={"key": "a"}),
          PuffinBlob(BLOB_LITERAL_CUT, b"j", properties={"key": "a"}),
          PuffinBlob(BLOB_BLOCK_FILES, b'{"base-snapshot-id":null,"blocks":{}}')], "duplicate literal cut key"),
        ([PuffinBlob(BLOB_LAYOUT, b"x"), PuffinBlob(BLOB_BLOCK_FILES, b'{"blocks":[]}')], "'blocks' object"),
        ([PuffinBlob(BLOB_LAYOUT, b"x"), PuffinBlob(BLOB_BLOCK_FILES, b'{"base-snapshot-id":7,"blocks":{}}')],
         "base snapshot 7 differs"),
        ([PuffinBlob(BLOB_LAYOUT, b"x"), PuffinBlob(BLOB_BLOCK_FILES, b'{"blocks":{"-1":[]}}')],
         "block id '-1'"),
        ([PuffinBlob(BLOB_LAYOUT, b"x"), PuffinBlob(BLOB_BLOCK_FILES, b'{"blocks":{"0":[{"path":"p"}]}}')],
         "'record_count' must be a non-negative integer"),
        ([PuffinBlob(BLOB_LAYOUT, b"x"), PuffinBlob(BLOB_BLOCK_FILES, b'not json')], "not valid JSON"),
    ],
)
def test_blob_set_and_block_files_are_checked(blobs, match):
    with pytest.raises(SidecarError, match=match):
        LayoutSidecar.from_bytes(_v(blobs=blobs))


def test_missing_checksums_are_rejected():
    p = {"pando.format-version": "1", "pando.layout-id": "L", "pando.table-uuid": TABLE_UUID}
    blobs = [PuffinBlob(BLOB_LAYOUT, b"x"), PuffinBlob(BLOB_BLOCK_FILES, b'{"blocks":{}}')]
    with pytest.raises(SidecarError, match="pando.footer-crc32.*missing"):
        LayoutSidecar.from_bytes(encode_puffin(blobs, p))


def test_truncations_raise(sidecar):
    data = sidecar.to_bytes()
    for cut in sorted({0, 1, 4, 16, 100, len(data) // 3, len(data) // 2, len(data) - 40, len(data) - 12,
                       len(data) - 5, len(data) - 1}):
        with pytest.raises(SidecarError, match="truncated|bad magic"):
            LayoutSidecar.from_bytes(data[:cut])
    with pytest.raises(SidecarError):
        LayoutSidecar.from_bytes(data + b"\0")


def test_every_bit_flip_is_detected(sidecar):
    """Every single-bit flip anywhere in the file raises SidecarError (never a raw exception,
    never a silently different sidecar): structure, footer and payloads are all covered. The
    only flips that may pass are inside zstd frames and decode to the very same content."""
    data = sidecar.to_bytes()
    undetected, raw = [], []
    for i in range(len(data)):
        for bit in ((i * 3) % 8, (i * 5 + 1) % 8):
            bad = bytearray(data)
            bad[i] ^= 1 << bit
            try:
                got = LayoutSidecar.from_bytes(bytes(bad))
                if got != sidecar:
                    undetected.append((i, bit))
                else:  # zstd's entropy headers have a few don't-care bits: same content, no harm
                    assert any(m.compression_codec == "zstd" and m.offset <= i < m.offset + m.length
                               for m, _ in read_puffin(data).blobs), (i, bit)
            except SidecarError:
                pass
            except Exception as e:  # noqa: BLE001 - what we are testing for
                raw.append((i, bit, repr(e)))
    assert not raw, raw[:5]
    assert not undetected, undetected[:10]


def test_damage_messages_name_the_problem(sidecar):
    data = sidecar.to_bytes()
    (size,) = struct.unpack("<i", data[-12:-8])
    footer_start = len(data) - 16 - size
    cases = {
        "magic": (b"XFA1" + data[4:], "bad magic at the start of the file"),
        "footer length": (data[:-12] + struct.pack("<i", size + 3) + data[-8:], "bad magic at the start of the footer"),
        "footer json": (data[:footer_start + 10] + bytes([data[footer_start + 10] ^ 0x40]) + data[footer_start + 11:],
                        "not valid JSON|checksum|missing|wrong type"),
        "layout payload": (data[:20] + bytes([data[20] ^ 0x10]) + data[21:], "blob 0 of type 'pando-layout-v1': payload checksum mismatch"),
    }
    for name, (bad, match) in cases.items():
        with pytest.raises(SidecarError, match=match):
            LayoutSidecar.from_bytes(bad)
    # a footer value changed consistently (valid JSON, valid structure) is caught by the footer crc
    footer = json.loads(data[footer_start + 4:-12])
    footer["properties"]["pando.layout-id"] = "other-layout"
    js = json.dumps(footer).encode()
    forged = data[:footer_start] + MAGIC + js + struct.pack("<i", len(js)) + b"\0\0\0\0" + MAGIC
    with pytest.raises(SidecarError, match="footer checksum mismatch"):
        LayoutSidecar.from_bytes(forged)


def test_load_layout_reports_undecodable_content(sidecar, tiny_layout):
    import dataclasses

    bad_keys = dataclasses.replace(sidecar, literal_keys={k: b"garbage" for k in sidecar.literal_keys})
    with pytest.raises(SidecarError, match="key set cannot be decoded"):
        bad_keys.load_layout()
    missing = dataclasses.replace(sidecar, literal_keys={})
    with pytest.raises(SidecarError, match="cannot be decoded"):
        missing.load_layout()
    lb = bytearray(sidecar.layout_bytes)
    lb[-1] ^= 1
    with pytest.raises(SidecarError, match="checksum"):
        dataclasses.replace(sidecar, layout_bytes=bytes(lb)).load_layout()
    nb = tiny_layout[0].num_blocks
    extra = dataclasses.replace(sidecar, block_files={**sidecar.block_files, nb + 5: []})
    with pytest.raises(SidecarError, match=f"has {nb} blocks"):
        extra.load_layout()


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"layout_id": "../evil"}, "invalid layout id"),
        ({"table_uuid": "not-a-uuid"}, "not a UUID"),
        ({"layout_bytes": b""}, "non-empty"),
        ({"properties": {"pando.layout-id": "x"}}, "reserved"),
        ({"block_files": {-1: []}}, "block id"),
        ({"block_files": {0: [("p", 1, 2)]}}, "DataFileRef"),
        ({"base_snapshot_id": "12"}, "integer"),
    ],
)
def test_writer_validates(kwargs, match):
    base = dict(layout_id="L", table_uuid=TABLE_UUID, layout_bytes=b"x")
    base.update(kwargs)
    with pytest.raises(SidecarError, match=match):
        LayoutSidecar(**base).to_bytes()


def test_pyiceberg_parses_a_sidecar(sidecar):
    from pyiceberg.table.puffin import PuffinFile

    pf = PuffinFile(sidecar.to_bytes())
    assert pf.footer.properties["pando.layout-id"] == sidecar.layout_id
    payloads = {b.type: pf.get_blob_payload(b) for b in pf.footer.blobs}
    assert payloads[BLOB_LAYOUT] == sidecar.layout_bytes
    assert json.loads(payloads[BLOB_BLOCK_FILES])["base-snapshot-id"] == sidecar.base_snapshot_id
