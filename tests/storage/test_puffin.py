"""Puffin writer/reader: round trips through our reader and pyiceberg's, and strict validation."""

from __future__ import annotations

import json
import struct
import zlib

import pytest
import zstandard

from pando_iceberg.storage import PuffinBlob, SidecarError, encode_puffin, read_puffin, read_puffin_file, write_puffin
from pando_iceberg.storage.puffin import CHECKSUM_PROPERTY, FOOTER_CHECKSUM_PROPERTY, MAGIC

PAYLOAD_A = bytes(range(256)) * 3
PAYLOAD_B = b"compress me " * 500


def _blobs():
    return [
        PuffinBlob("custom-a-v1", PAYLOAD_A, fields=(1, 2), snapshot_id=11, sequence_number=2,
                   properties={"k": "v", "ünï": "cödé"}),
        PuffinBlob("custom-b-v1", PAYLOAD_B, snapshot_id=11, sequence_number=2, compression_codec="zstd"),
        PuffinBlob("empty-v1", b""),
    ]


def _footer(data: bytes) -> dict:
    (size,) = struct.unpack("<i", data[-12:-8])
    return json.loads(data[-12 - size:-12])


def test_layout_of_the_bytes_follows_the_spec():
    data = encode_puffin(_blobs(), {"created-by": "test"})
    assert data[:4] == MAGIC and data[-4:] == MAGIC and data[-8:-4] == b"\0\0\0\0"
    (size,) = struct.unpack("<i", data[-12:-8])
    assert data[-16 - size:-12 - size] == MAGIC  # footer's own leading magic
    footer = _footer(data)
    assert footer["properties"] == {"created-by": "test"}
    a, b, e = footer["blobs"]
    assert a == {"type": "custom-a-v1", "fields": [1, 2], "snapshot-id": 11, "sequence-number": 2, "offset": 4,
                 "length": len(PAYLOAD_A), "properties": {"k": "v", "ünï": "cödé"}}
    assert data[a["offset"]:a["offset"] + a["length"]] == PAYLOAD_A
    assert b["compression-codec"] == "zstd" and b["offset"] == 4 + len(PAYLOAD_A) and b["length"] < len(PAYLOAD_B)
    assert zstandard.ZstdDecompressor().decompress(data[b["offset"]:b["offset"] + b["length"]]) == PAYLOAD_B
    assert "compression-codec" not in a and e["length"] == 0


def test_round_trip_through_our_reader():
    data = encode_puffin(_blobs(), {"created-by": "test", "x": "y"})
    got = read_puffin(data)
    assert got.properties == {"created-by": "test", "x": "y"}
    assert [(m.type, p) for m, p in got.blobs] == [("custom-a-v1", PAYLOAD_A), ("custom-b-v1", PAYLOAD_B),
                                                   ("empty-v1", b"")]
    m = got.blobs[0][0]
    assert (m.fields, m.snapshot_id, m.sequence_number, dict(m.properties)) == ((1, 2), 11, 2,
                                                                               {"k": "v", "ünï": "cödé"})
    assert got.of_type("custom-b-v1")[0][0].compression_codec == "zstd"


def test_empty_file_round_trips():
    data = encode_puffin([], {})
    assert len(data) == 4 + 4 + len(b'{"blobs":[],"properties":{}}') + 12
    assert read_puffin(data).blobs == []


def test_round_trip_through_pyiceberg_reader():
    """pyiceberg's PuffinFile types blob `type` as a plain str (only the table-metadata
    statistics model is a closed Literal), so it parses our footer and payloads, custom types included."""
    from pyiceberg.table.puffin import PuffinFile

    data = encode_puffin(_blobs(), {"created-by": "test"}, checksums=True)
    pf = PuffinFile(data)
    assert [b.type for b in pf.footer.blobs] == ["custom-a-v1", "custom-b-v1", "empty-v1"]
    assert pf.footer.properties["created-by"] == "test"
    assert FOOTER_CHECKSUM_PROPERTY in pf.footer.properties
    assert [pf.get_blob_payload(b) for b in pf.footer.blobs] == [PAYLOAD_A, PAYLOAD_B, b""]
    assert pf.footer.blobs[0].fields == [1, 2] and pf.footer.blobs[1].compression_codec == "zstd"
    assert pf.footer.blobs[0].properties["k"] == "v"


def test_checksums_are_written_and_verified():
    data = encode_puffin(_blobs(), {"created-by": "t"}, checksums=True)
    got = read_puffin(data, require_checksums=True)
    for m, p in got.blobs:
        assert m.properties[CHECKSUM_PROPERTY] == f"{zlib.crc32(p):08x}"
    with pytest.raises(SidecarError, match="pando.footer-crc32.*missing"):
        read_puffin(encode_puffin(_blobs(), {}), require_checksums=True)


def test_write_and_read_through_file_io(tmp_path):
    from pyiceberg.io import load_file_io

    loc = f"file:{tmp_path}/sub/dir/x.puffin"
    n = write_puffin(loc, _blobs(), {"created-by": "t"})
    assert n == (tmp_path / "sub/dir/x.puffin").stat().st_size
    assert read_puffin_file(loc).blobs[1][1] == PAYLOAD_B
    io = load_file_io({}, str(tmp_path))
    assert read_puffin_file(io.new_input(str(tmp_path / "sub/dir/x.puffin"))).properties == {"created-by": "t"}
    with pytest.raises(SidecarError, match="refusing to overwrite"):
        write_puffin(loc, _blobs(), {})
    assert write_puffin(io.new_output(loc), [], {}, overwrite=True) < n
    with pytest.raises(SidecarError, match="does not exist"):
        read_puffin_file(f"{tmp_path}/nope.puffin")


def test_writer_rejects_unknown_codec_and_non_string_properties():
    with pytest.raises(SidecarError, match="codec 'lz4'"):
        encode_puffin([PuffinBlob("t", b"x", compression_codec="lz4")])
    with pytest.raises(SidecarError, match="str to str"):
        encode_puffin([PuffinBlob("t", b"x", properties={"a": 1})])


# ------------------------------------------------------------------ malformed files


def _with_footer(data: bytes, mutate) -> bytes:
    """Re-encode the footer JSON after `mutate(footer_dict)`, keeping blobs as they are."""
    (size,) = struct.unpack("<i", data[-12:-8])
    body = data[:-16 - size]
    footer = json.loads(data[-12 - size:-12])
    mutate(footer)
    js = json.dumps(footer).encode()
    return body + MAGIC + js + struct.pack("<i", len(js)) + b"\0\0\0\0" + MAGIC


GOOD = encode_puffin(_blobs(), {"created-by": "t"})


@pytest.mark.parametrize("cut", [0, 3, 4, 10, len(GOOD) // 2, len(GOOD) - 13, len(GOOD) - 5, len(GOOD) - 1])
def test_truncated_files_raise(cut):
    with pytest.raises(SidecarError, match="truncated|bad magic"):
        read_puffin(GOOD[:cut])


def test_truncated_from_the_front_raises():
    with pytest.raises(SidecarError, match="bad magic at the start"):
        read_puffin(GOOD[1:])


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda d: b"PFA2" + d[4:], "bad magic at the start of the file"),
        (lambda d: d[:-4] + b"PFA0", "bad magic at the end of the file"),
        (lambda d: d[:-8] + b"\x01\0\0\0" + d[-4:], "LZ4-compressed"),
        (lambda d: d[:-8] + b"\0\0\x80\0" + d[-4:], "unknown footer flags"),
        (lambda d: d[:-12] + struct.pack("<i", -5) + d[-8:], "negative"),
        (lambda d: d[:-12] + struct.pack("<i", struct.unpack("<i", d[-12:-8])[0] + 1) + d[-8:],
         "bad magic at the start of the footer"),
        (lambda d: d[:-12] + struct.pack("<i", struct.unpack("<i", d[-12:-8])[0] - 1) + d[-8:],
         "bad magic at the start of the footer"),
        (lambda d: d[:-12] + struct.pack("<i", 1 << 30) + d[-8:], "truncated: the footer says its payload has"),
    ],
)
def test_structural_damage_raises(mutate, match):
    with pytest.raises(SidecarError, match=match):
        read_puffin(mutate(GOOD))


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda f: f["blobs"][1].update({"compression-codec": "lz4"}), "blob 1 of type 'custom-b-v1': unsupported compression codec 'lz4'"),
        (lambda f: f["blobs"][0].update({"offset": 10**6}), "blob 0 of type 'custom-a-v1': offset 1000000"),
        (lambda f: f["blobs"][0].update({"offset": 0}), "outside the blob area"),
        (lambda f: f["blobs"][0].update({"length": -1}), "outside the blob area"),
        (lambda f: f["blobs"][0].pop("snapshot-id"), "'snapshot-id' is missing"),
        (lambda f: f["blobs"][0].update({"fields": ["a"]}), "list of integers"),
        (lambda f: f["blobs"][0].update({"offset": "4"}), "'offset' has the wrong type"),
        (lambda f: f["blobs"][0].update({"properties": {"a": 1}}), "str to str"),
        (lambda f: f.pop("blobs"), "'blobs' is missing"),
        (lambda f: f.update({"properties": []}), "file properties must be a JSON object"),
        (lambda f: f["blobs"][1].update({"offset": 4}), "blob 1 of type 'custom-b-v1': zstd payload does not decompress"),
    ],
)
def test_footer_content_errors_name_the_problem(mutate, match):
    with pytest.raises(SidecarError, match=match):
        read_puffin(_with_footer(GOOD, mutate))


def test_footer_that_is_not_json():
    js = b'{"blobs": [}'
    bad = MAGIC + MAGIC + js + struct.pack("<i", len(js)) + b"\0\0\0\0" + MAGIC
    with pytest.raises(SidecarError, match="not valid JSON"):
        read_puffin(bad)
    js = b'\xff\xfe'
    with pytest.raises(SidecarError, match="not valid UTF-8"):
        read_puffin(MAGIC + MAGIC + js + struct.pack("<i", 2) + b"\0\0\0\0" + MAGIC)
    js = b"[1]"
    with pytest.raises(SidecarError, match="must be a JSON object"):
        read_puffin(MAGIC + MAGIC + js + struct.pack("<i", 3) + b"\0\0\0\0" + MAGIC)


def test_every_single_byte_corruption_is_a_sidecar_error_or_detected():
    """Flip every byte (one bit each): never a raw exception; with checksums never silent."""
    data = encode_puffin(_blobs(), {"created-by": "t"}, checksums=True)
    want = read_puffin(data, require_checksums=True)
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= 1 << (i % 8)
        try:
            got = read_puffin(bytes(bad), require_checksums=True)
        except SidecarError:
            continue
        raise AssertionError(f"flip at byte {i} went undetected: {got.properties == want.properties}")
