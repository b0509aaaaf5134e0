"""Iceberg's own Java Puffin implementation (through the Spark JVM) reads what we write and
writes what we read."""

from __future__ import annotations

import pytest

from pando_iceberg.storage import (
    BLOB_LAYOUT,
    BLOB_LITERAL_CUT,
    PuffinBlob,
    SidecarError,
    read_puffin,
    write_puffin,
)

pytestmark = pytest.mark.spark


def _java_bytes(jvm, buf) -> bytes:
    # py4j does not convert ByteBuffers; Iceberg's helper copies the remaining bytes to a byte[],
    # which py4j returns as Python bytes.
    return bytes(jvm.org.apache.iceberg.util.ByteBuffers.toByteArray(buf))


def _java_read(spark, path):
    jvm = spark._jvm
    reader = jvm.org.apache.iceberg.puffin.Puffin.read(jvm.org.apache.iceberg.Files.localInput(str(path))).build()
    try:
        meta = reader.fileMetadata()
        file_props = dict(meta.properties())
        blobs = meta.blobs()
        out = []
        it = reader.readAll(blobs).iterator()
        while it.hasNext():
            pair = it.next()
            m = pair.first()
            out.append({
                "type": m.type(),
                "fields": list(m.inputFields()),
                "snapshot_id": m.snapshotId(),
                "sequence_number": m.sequenceNumber(),
                "codec": m.compressionCodec(),
                "properties": dict(m.properties()),
                "payload": _java_bytes(jvm, pair.second()),
            })
        return file_props, out
    finally:
        reader.close()


def test_java_reads_our_puffin(spark, tmp_path):
    big = b"zstd me please " * 1000
    blobs = [
        PuffinBlob("custom-a-v1", bytes(range(256)), fields=(3, 1), snapshot_id=77, sequence_number=5,
                   properties={"k": "v"}),
        PuffinBlob("custom-b-v1", big, compression_codec="zstd", properties={"note": "ü"}),
        PuffinBlob("empty-v1", b""),
    ]
    path = tmp_path / "ours.puffin"
    write_puffin(str(path), blobs, {"created-by": "pando-test"}, checksums=True)
    props, got = _java_read(spark, path)
    assert props["created-by"] == "pando-test" and "pando.footer-crc32" in props
    assert [b["type"] for b in got] == ["custom-a-v1", "custom-b-v1", "empty-v1"]
    assert [b["payload"] for b in got] == [bytes(range(256)), big, b""]
    assert got[0]["fields"] == [3, 1] and got[0]["snapshot_id"] == 77 and got[0]["sequence_number"] == 5
    assert got[0]["codec"] is None and got[1]["codec"] == "zstd"
    assert got[0]["properties"]["k"] == "v" and got[1]["properties"]["note"] == "ü"
    assert got[1]["properties"]["pando.crc32"]  # our checksum is a plain property to Java


def test_java_reads_our_layout_sidecar(spark, tmp_path, sidecar):
    path = tmp_path / "sidecar.puffin"
    path.write_bytes(sidecar.to_bytes())
    props, got = _java_read(spark, path)
    assert props["pando.layout-id"] == sidecar.layout_id and props["pando.format-version"] == "1"
    assert got[0]["type"] == BLOB_LAYOUT and got[0]["payload"] == sidecar.layout_bytes
    lits = [b for b in got if b["type"] == BLOB_LITERAL_CUT]
    assert lits and all(b["codec"] == "zstd" for b in lits)
    assert {b["properties"]["key"]: b["payload"] for b in lits} == sidecar.literal_keys


def test_we_read_java_written_puffin(spark, tmp_path):
    jvm = spark._jvm
    path = tmp_path / "java.puffin"
    writer = (jvm.org.apache.iceberg.puffin.Puffin.write(jvm.org.apache.iceberg.Files.localOutput(str(path)))
              .createdBy("java-test").set("extra", "x").build())
    fields = jvm.java.util.ArrayList()
    fields.add(7)
    props = jvm.java.util.HashMap()
    props.put("p", "q")
    payload = b"java zstd payload " * 200
    codec = jvm.org.apache.iceberg.puffin.PuffinCompressionCodec
    for t, data, c in [("j-zstd", payload, codec.ZSTD), ("j-raw", b"\x00\x01raw", codec.NONE)]:
        writer.add(jvm.org.apache.iceberg.puffin.Blob(t, fields, 99, 4, jvm.java.nio.ByteBuffer.wrap(bytearray(data)),
                                                      c, props))
    writer.finish()
    writer.close()
    got = read_puffin(path.read_bytes())
    assert got.properties["created-by"] == "java-test" and got.properties["extra"] == "x"
    (m1, p1), (m2, p2) = got.blobs
    assert (m1.type, m1.compression_codec, p1) == ("j-zstd", "zstd", payload)
    assert (m2.type, m2.compression_codec, p2) == ("j-raw", None, b"\x00\x01raw")
    assert m1.fields == (7,) and m1.snapshot_id == 99 and m1.sequence_number == 4 and m1.properties == {"p": "q"}
    with pytest.raises(SidecarError, match="pando.footer-crc32.*missing"):
        read_puffin(path.read_bytes(), require_checksums=True)
