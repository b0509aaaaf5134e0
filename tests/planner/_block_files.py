"""A pyiceberg table whose data files are a layout's blocks, as Pando's rewrite leaves them: each
block's rows appended as its own files, then the layout's sidecar and pointer committed."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from pando_iceberg.storage import DataFileRef, LayoutPointer, LayoutSidecar, new_layout_id


def write_blocks(t, layout, data: pa.Table, blocks: np.ndarray) -> None:
    """Append each block's rows of ``data`` (``blocks``: each row's block) to ``t`` as files of
    that block (an empty block gets none), then point ``t`` at the layout."""
    block_files: dict[int, list[DataFileRef]] = {}
    for b in range(layout.num_blocks):
        rows = data.filter(pa.array(blocks == b))
        if not rows.num_rows:
            continue
        before = {task.file.file_path for task in t.scan().plan_files()}
        t.append(rows)
        for task in t.scan().plan_files():
            if task.file.file_path not in before:
                f = task.file
                block_files.setdefault(b, []).append(DataFileRef(f.file_path, f.record_count, f.file_size_in_bytes))
    snap = t.current_snapshot().snapshot_id
    sidecar = LayoutSidecar.from_layout(layout, layout_id=new_layout_id(), table_uuid=t.metadata.table_uuid,
                                        block_files=block_files, base_snapshot_id=snap)
    sidecar.write(t.io, t.location())
    with t.transaction() as tx:
        tx.set_properties(LayoutPointer(sidecar.layout_id, sidecar.file_name, snap, snap).to_properties())
