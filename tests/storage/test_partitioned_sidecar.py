"""The format-version-2 sidecar (one layout per Iceberg partition, storage/partitions.py): round
trip, lazy per-partition decoding, path → partition index, and errors; version 1 still read."""

from __future__ import annotations

import pytest

from pando_iceberg.storage import LayoutSidecar, SidecarError, layout_pointer
from pando_iceberg.storage.partitions import PartitionedLayoutSidecar, PartitionEntry
from pando_iceberg.storage.puffin import PuffinBlob, encode_puffin

from conftest import TABLE_UUID

PID = "7c1d2e3f-0000-4000-8000-000000000001"


def _partitioned(sidecar, names=("m=1995-01", "m=1995-02")):
    entries = {}
    for i, name in enumerate(names):
        sc = LayoutSidecar.from_bytes(sidecar.to_bytes())
        sc.layout_id = f"{PID[:-1]}{i + 2}"
        sc.block_files = {b: [type(r)(r.path.replace("block-", f"p{i}-block-"), r.record_count, r.file_size_in_bytes)
                              for r in refs] for b, refs in sc.block_files.items()}
        entries[name] = PartitionEntry.of(name, 1, sc)
    return PartitionedLayoutSidecar(PID, TABLE_UUID, entries, 123, {"pando.k": "2"})


def test_round_trip_and_lazy_decoding(sidecar, tiny_layout):
    original = _partitioned(sidecar)
    back = PartitionedLayoutSidecar.from_bytes(original.to_bytes(), expected_layout_id=PID,
                                               expected_table_uuid=TABLE_UUID)
    assert sorted(back.partitions) == ["m=1995-01", "m=1995-02"] and back.base_snapshot_id == 123
    assert back.properties == {"pando.k": "2"}
    assert all(e._sidecar is None for e in back.partitions.values())  # nothing decoded yet
    index = back.partition_of_path()
    assert len(index) == 2 * sum(len(v) for v in sidecar.block_files.values())
    assert {index[p] for p in back.partitions["m=1995-02"].paths} == {"m=1995-02"}
    layout = back.partitions["m=1995-01"].layout
    assert layout.num_blocks == tiny_layout[0].num_blocks
    assert back.partitions["m=1995-01"].sidecar.layout_id == f"{PID[:-1]}2"


def test_errors_name_the_problem(sidecar):
    data = _partitioned(sidecar).to_bytes()
    with pytest.raises(SidecarError, match="layout id mismatch"):
        PartitionedLayoutSidecar.from_bytes(data, expected_layout_id="other")
    with pytest.raises(SidecarError, match="a partitioned layout sidecar has format version 2"):
        PartitionedLayoutSidecar.from_bytes(sidecar.to_bytes())  # a version-1 file
    with pytest.raises(SidecarError, match="format version 2 is newer"):
        LayoutSidecar.from_bytes(data)  # a version-1 reader refuses version 2 by name
    bad = encode_puffin([PuffinBlob("pando-partition-layout-v1", b"x", properties={"partition": "p"})],
                        {"pando.format-version": "2", "pando.layout-id": PID, "pando.table-uuid": TABLE_UUID},
                        checksums=True)
    with pytest.raises(SidecarError, match="'partition', 'spec-id' .* and 'layout-id' are required"):
        PartitionedLayoutSidecar.from_bytes(bad)
    broken = PartitionedLayoutSidecar.from_bytes(encode_puffin(
        [PuffinBlob("pando-partition-layout-v1", b"not a sidecar",
                    properties={"partition": "p", "spec-id": "0", "layout-id": PID})],
        {"pando.format-version": "2", "pando.layout-id": PID, "pando.table-uuid": TABLE_UUID}, checksums=True))
    with pytest.raises(SidecarError, match="partition 'p'"):
        broken.partitions["p"].sidecar


def test_pointer_accepts_both_versions():
    props = {"pando.format-version": "2", "pando.layout-id": PID, "pando.sidecar": f"{PID}.puffin",
             "pando.snapshot-id": "5", "pando.base-snapshot-id": "4"}
    assert layout_pointer(props).format_version == 2
    assert layout_pointer({**props, "pando.format-version": "1"}).format_version == 1
