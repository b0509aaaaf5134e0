"""Sidecar location policy and the table-property pointer."""

from __future__ import annotations

import pytest

from pando_iceberg.storage import (
    LAYOUT_PROPERTIES,
    LayoutPointer,
    SidecarError,
    layout_pointer,
    new_layout_id,
    sidecar_dir,
    sidecar_path,
)


@pytest.mark.parametrize("name", ["../x.puffin", "/abs.puffin", "a/b.puffin", "x.parquet", "", ".puffin",
                                  "..puffin", "a..b.puffin", "x.puffin/", "x.puffin\n", "a\\b.puffin",
                                  "-x.puffin", "x y.puffin", "x" * 202 + ".puffin", None, 7])
def test_sidecar_path_rejects_unsafe_names(name):
    with pytest.raises(SidecarError, match="invalid sidecar file name"):
        sidecar_path("s3://bucket/wh/db/t", name)


def test_sidecar_path_accepts_uuid_names_and_is_a_sibling():
    lid = new_layout_id()
    assert sidecar_path("s3://bucket/wh/db/t", f"{lid}.puffin") == f"s3://bucket/wh/db/t.pando/{lid}.puffin"
    assert sidecar_path("file:/tmp/wh/db/t/", "a_b-1.2.puffin") == "file:/tmp/wh/db/t.pando/a_b-1.2.puffin"
    assert sidecar_path("/tmp/wh/t", "x.puffin") == "/tmp/wh/t.pando/x.puffin"
    assert not sidecar_path("s3://b/wh/t", "x.puffin").startswith("s3://b/wh/t/")


@pytest.mark.parametrize("loc", ["", "   ", "s3://bucket", "s3://bucket/", "/", "file:/", "file:///", None])
def test_sidecar_dir_refuses_roots(loc):
    with pytest.raises(SidecarError):
        sidecar_dir(loc)


GOOD = {"pando.format-version": "1", "pando.layout-id": "0b9c6f1e-2a44-4c8e-9d0b-5f7e3a1c2d4e",
        "pando.sidecar": "0b9c6f1e-2a44-4c8e-9d0b-5f7e3a1c2d4e.puffin", "pando.snapshot-id": "123",
        "pando.base-snapshot-id": "-45", "write.format.default": "parquet"}


def test_pointer_round_trip():
    p = layout_pointer(GOOD)
    assert p == LayoutPointer("0b9c6f1e-2a44-4c8e-9d0b-5f7e3a1c2d4e", "0b9c6f1e-2a44-4c8e-9d0b-5f7e3a1c2d4e.puffin",
                              123, -45, 1)
    assert p.to_properties() == {k: GOOD[k] for k in LAYOUT_PROPERTIES}
    assert p.sidecar_location("s3://b/t") == "s3://b/t.pando/0b9c6f1e-2a44-4c8e-9d0b-5f7e3a1c2d4e.puffin"


def test_no_pointer_is_none():
    assert layout_pointer({}) is None
    assert layout_pointer({"write.format.default": "parquet", "pando.other": "x"}) is None


@pytest.mark.parametrize(
    "change,match",
    [
        ({"pando.sidecar": None}, "incomplete layout pointer: table properties pando.sidecar missing"),
        ({"pando.format-version": "3"}, "pando.format-version = '3': format version 3 is newer"),
        ({"pando.format-version": "v1"}, "pando.format-version = 'v1' is malformed: expected a decimal integer"),
        ({"pando.format-version": "0"}, "unsupported format version"),
        ({"pando.layout-id": "../x"}, "pando.layout-id = '../x' is malformed"),
        ({"pando.sidecar": "../../other/t.puffin"}, "pando.sidecar = '../../other/t.puffin' is malformed: expected a bare"),
        ({"pando.sidecar": "s3://evil/x.puffin"}, "pando.sidecar .* is malformed"),
        ({"pando.snapshot-id": "12a"}, "pando.snapshot-id = '12a' is malformed: expected a 64-bit decimal"),
        ({"pando.base-snapshot-id": "99999999999999999999"}, "pando.base-snapshot-id .* is malformed"),
        ({"pando.snapshot-id": ""}, "pando.snapshot-id = '' is malformed"),
    ],
)
def test_malformed_pointer_names_property(change, match):
    props = dict(GOOD)
    for k, v in change.items():
        if v is None:
            del props[k]
        else:
            props[k] = v
    with pytest.raises(SidecarError, match=match):
        layout_pointer(props)
