"""Storage of a layout: a Puffin writer/reader (``puffin``), the one-file-per-layout sidecar
(``sidecar``), where sidecars live (``paths``) and the table-property pointer (``pointer``).

    sc = LayoutSidecar.from_layout(layout, layout_id=new_layout_id(), table_uuid=table.metadata.table_uuid,
                                   block_files={0: [DataFileRef(path, rows, size)], ...},
                                   base_snapshot_id=snap)
    path, size = sc.write(table.io, table.location())
    props = LayoutPointer(sc.layout_id, sc.file_name, new_snapshot_id, snap).to_properties()
    ...
    ptr = layout_pointer(table.properties)               # None: no layout
    sc = LayoutSidecar.read(table.io, ptr.sidecar_location(table.location()),
                            expected_layout_id=ptr.layout_id, expected_table_uuid=table.metadata.table_uuid)
    layout = sc.load_layout()

Every problem is a :class:`SidecarError` (a ``ValueError``) with a precise message.
"""

from .errors import SidecarError
from .paths import (
    LAYOUT_ID_PATTERN,
    SIDECAR_NAME_PATTERN,
    SidecarFile,
    check_layout_id,
    check_sidecar_name,
    delete_sidecar,
    list_sidecars,
    sidecar_dir,
    sidecar_path,
)
from .pointer import LAYOUT_PROPERTIES, LayoutPointer, layout_pointer
from .puffin import (
    BlobMetadata,
    PuffinBlob,
    PuffinContents,
    encode_puffin,
    read_puffin,
    read_puffin_file,
    write_puffin,
)
from .sidecar import (
    BLOB_BLOCK_FILES,
    BLOB_LAYOUT,
    BLOB_LITERAL_CUT,
    SIDECAR_FORMAT_VERSION,
    DataFileRef,
    LayoutSidecar,
    new_layout_id,
)

__all__ = [
    "BLOB_BLOCK_FILES",
    "BLOB_LAYOUT",
    "BLOB_LITERAL_CUT",
    "LAYOUT_ID_PATTERN",
    "LAYOUT_PROPERTIES",
    "SIDECAR_FORMAT_VERSION",
    "SIDECAR_NAME_PATTERN",
    "BlobMetadata",
    "DataFileRef",
    "LayoutPointer",
    "LayoutSidecar",
    "PuffinBlob",
    "PuffinContents",
    "SidecarError",
    "SidecarFile",
    "check_layout_id",
    "check_sidecar_name",
    "delete_sidecar",
    "encode_puffin",
    "layout_pointer",
    "list_sidecars",
    "new_layout_id",
    "read_puffin",
    "read_puffin_file",
    "sidecar_dir",
    "sidecar_path",
    "write_puffin",
]
