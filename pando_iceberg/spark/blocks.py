"""Executor-side steps of a Pando rewrite: route rows to blocks, write one data file per block.

Both are plain functions of Arrow batches so Spark runs them with ``mapInArrow`` on the
executors; nothing here touches the driver or the JVM. Each task deserializes the layout once
(from a broadcast of its bytes) and reuses it for all its batches.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# The one k-tuple codec (layout/ktuple.py); re-exported here for the rewrite modules.
from ..layout.ktuple import ktuple_radices, pack_ktuples, unpack_ktuples  # noqa: F401

BLOCK_COL = "_pando_block"
KTUPLE_COL = "_pando_kt"
# The row's position in the table as read (Spark's monotonically_increasing_id): a file's rows are
# written in that order, whatever order cut the block into files (see write_blocks).
ROW_COL = "_pando_row"

# Spark-side schema of the per-file result rows (kept in sync with write_blocks' output).
WRITTEN_FILE_DDL = ("block INT, path STRING, record_count BIGINT, file_size_in_bytes BIGINT, ktuples STRING, "
                    "split_offsets ARRAY<BIGINT>, nan_value_counts MAP<INT, BIGINT>")


@dataclass
class LayoutPayload:
    """What an executor needs to route: the layout bytes and the literal cuts' key sets."""

    layout_bytes: bytes
    literal_keys: dict[str, bytes]

    def load(self):
        """The layout, decoded once per Python worker: Spark reuses a worker for the tasks of a
        stage, and each literal cut builds its key lookup at its first batch (``IntKeyLookup``)."""
        from ..expr import cut_from_json
        from ..layout import Layout

        digest = hashlib.sha256(self.layout_bytes)
        for key in sorted(self.literal_keys):
            digest.update(key.encode())
            digest.update(hashlib.sha256(self.literal_keys[key]).digest())
        if _LOADED.get("digest") != digest.digest():
            _LOADED.clear()
            _LOADED["layout"] = Layout.from_bytes(self.layout_bytes, cut_from_json=cut_from_json,
                                                  literal_keys=self.literal_keys)
            _LOADED["digest"] = digest.digest()
        return _LOADED["layout"]


# The last layout this worker process decoded, by the digest of its payload (LayoutPayload.load).
_LOADED: dict[str, Any] = {}


def route_batches(payload: LayoutPayload):
    """mapInArrow function: append the block id and the packed k-tuple to every row."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from ..expr import cut_masks

        layout = payload.load()
        radices = ktuple_radices(layout)
        for batch in batches:
            if batch.num_rows == 0:
                continue
            kt = layout.route_ktuples(batch, cut_masks(layout.cuts, batch))
            _, blocks, inv = layout._blocks_of(kt)
            yield append_block_columns(batch, blocks[inv].astype(np.int32), pack_ktuples(kt, radices))

    return run


def append_block_columns(batch: pa.RecordBatch, blocks: np.ndarray, codes: np.ndarray) -> pa.RecordBatch:
    """``batch`` with the routing columns appended: ``BLOCK_COL`` (int32 block ids) and ``KTUPLE_COL``
    (int64 packed k-tuples, ``pack_ktuples``)."""
    arrays = list(batch.columns) + [pa.array(blocks, pa.int32()), pa.array(codes, pa.int64())]
    names = list(batch.schema.names) + [BLOCK_COL, KTUPLE_COL]
    return pa.RecordBatch.from_arrays(arrays, names=names)


@dataclass
class WriteSpec:
    """Where and how data files are written (all plain values: shipped to executors)."""

    data_dir: str  # <table location>/data/pando-<layout id>
    iceberg_schema_json: str  # the table schema (field ids come from here)
    io_properties: dict[str, str]
    target_file_size_bytes: int
    row_group_bytes: int = 64 * 1024 * 1024
    compression: str = "zstd"
    # The table's write.parquet.compression-level; None: the codec's default in Iceberg's own
    # writer (zstd 3), not pyarrow's (zstd 1: taxi SF 1 files were 14 % larger at level 1).
    compression_level: int | None = None
    # Files of about b rows (workload/in_block.py): each block's rows per file and file count
    # from its estimated rows (None: one file per block, split only above the target size);
    # the block's last file takes what the estimate missed, up to max_file_rows (1.3 b).
    order_column: str | None = None
    file_rows: list[int] | None = None
    block_files: list[int] | None = None
    max_file_rows: int | None = None

    def file_limit(self, block: int, index: int) -> int | None:
        """Rows the ``index``-th file of ``block`` may hold (None: no limit but the target size)."""
        if self.file_rows is None or not 0 <= block < len(self.file_rows):
            return None
        rows = int(self.file_rows[block])
        last = self.block_files is not None and index >= int(self.block_files[block]) - 1
        return max(rows, int(self.max_file_rows or rows)) if last else rows


def write_blocks(spec: WriteSpec):
    """mapInArrow function over rows sorted by block (then by ``spec.order_column``): each
    block as files of ``spec.file_rows[block]`` rows (one file when None), split also above the
    target file size. Yields one result row per file written.

    With a ``ROW_COL`` column, each row group is written in the table's own row order: the
    in-block order decides which file a row goes to (the files' min/max), not the order inside
    it. Measured on taxi SF 1 (zstd level 1): rows sorted by the in-block order (duration) gave a
    163 MB table, the table's order 158 MB; and a file of about b rows is one row group, so the
    in-file order skips nothing more in Spark (Iceberg's reader filters row groups, it does not
    use Parquet's page index)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.parquet as pq
        from pyiceberg.io import load_file_io
        from pyiceberg.io.pyarrow import schema_to_pyarrow
        from pyiceberg.schema import Schema

        schema = Schema.model_validate_json(spec.iceberg_schema_json)
        arrow_schema = schema_to_pyarrow(schema)  # carries PARQUET:field_id metadata
        io = load_file_io(spec.io_properties, spec.data_dir)
        writer = _BlockWriter(spec, io, arrow_schema, pq)
        for batch in batches:
            if batch.num_rows == 0:
                continue
            blocks = batch.column(BLOCK_COL).to_numpy()
            codes = batch.column(KTUPLE_COL).to_numpy()
            data = pa.Table.from_batches([batch.drop_columns([BLOCK_COL, KTUPLE_COL])])
            # Rows arrive sorted by block: cut the batch where the block id changes.
            bounds = np.flatnonzero(np.diff(blocks)) + 1
            for s, e in zip(np.r_[0, bounds], np.r_[bounds, len(blocks)]):
                yield from writer.add(int(blocks[s]), data.slice(s, e - s), codes[s:e])
        yield from writer.close()

    return run


def dictionary_columns(table: pa.Table) -> list[str] | bool:
    """The columns worth dictionary encoding in a file whose first rows are ``table``: parquet-mr's
    rule (a column falls back to plain encoding when its dictionary plus the indices are not
    smaller than the plain values), estimated from the distinct count. Nested columns keep
    pyarrow's default (every column dictionary-encoded)."""
    n = table.num_rows
    if n == 0 or any(pa.types.is_nested(f.type) for f in table.schema):
        return True
    out = []
    for name, column in zip(table.column_names, table.columns):
        typ = column.type
        if pa.types.is_boolean(typ) or pa.types.is_null(typ):
            out.append(name)
            continue
        non_null = n - column.null_count
        if non_null == 0:
            out.append(name)
            continue
        distinct = int(pc.count_distinct(column).as_py())
        if pa.types.is_binary(typ) or pa.types.is_string(typ) or pa.types.is_large_string(typ) \
                or pa.types.is_large_binary(typ):
            width = 4.0 + float(pc.sum(pc.binary_length(column)).as_py() or 0) / non_null
        else:
            width = max(1.0, typ.bit_width / 8.0) if hasattr(typ, "bit_width") else 8.0
            if pa.types.is_decimal(typ):
                width = 4.0 if typ.precision <= 9 else 8.0 if typ.precision <= 18 else 16.0
        index_bytes = non_null * max(1, int(np.ceil(np.log2(max(distinct, 2))))) / 8.0
        if distinct * width + index_bytes < non_null * width:
            out.append(name)
    return out


def split_offsets(metadata) -> list[int]:
    """The row groups' starting offsets of a written Parquet file (pyarrow's FileMetaData): where
    each row group's first column chunk begins, its dictionary page if it has one. Iceberg's own
    writers record them in the data file (``ParquetUtil.getSplitOffsets``) and plan splits at
    them; a reader can tell how many row groups a file holds without opening it."""
    out = []
    for i in range(metadata.num_row_groups):
        first = metadata.row_group(i).column(0)
        out.append(first.dictionary_page_offset if first.has_dictionary_page else first.data_page_offset)
    return sorted(out)


def float_field_ids(arrow_schema: pa.Schema) -> dict[str, int]:
    """Top-level float and double columns of a schema carrying Iceberg field ids → their ids."""
    out = {}
    for f in arrow_schema:
        field_id = (f.metadata or {}).get(b"PARQUET:field_id")
        if field_id is not None and pa.types.is_floating(f.type):
            out[f.name] = int(field_id)
    return out


class _BlockWriter:
    def __init__(self, spec: WriteSpec, io, arrow_schema: pa.Schema, pq):
        self.spec, self.io, self.schema, self.pq = spec, io, arrow_schema, pq
        # NaN counts per float column of the open file: Iceberg's own writers record them, a
        # Parquet footer has none, and without them a file with NaN-free floats cannot be pruned
        # for a comparison NaN satisfies in Spark (`x > c`; see expr/iceberg.py).
        self.float_fields = float_field_ids(arrow_schema)
        self.nans: dict[int, int] = {}
        self.block: int | None = None
        self.pending: list[pa.Table] = []
        self.pending_bytes = 0
        self.codes: list[np.ndarray] = []
        self.file: Any = None  # pyiceberg OutputFile while a file is open
        self.file_index = 0  # files of the current block closed so far
        self.in_file = 0  # rows of the current block's current file (written or pending)

    def add(self, block: int, data: pa.Table, codes: np.ndarray):
        if block != self.block:
            yield from self.close()
            self.block = block
            self.file_index = 0
            self.in_file = 0
        while data.num_rows:
            limit = self.spec.file_limit(block, self.file_index)
            take = data.num_rows if limit is None else min(data.num_rows, limit - self.in_file)
            self.pending.append(data.slice(0, take))
            self.pending_bytes += data.slice(0, take).nbytes
            self.codes.append(codes[:take])
            self.in_file += take
            data, codes = data.slice(take), codes[take:]
            if limit is not None and self.in_file >= limit:
                yield from self._flush()
                if self.file is not None:
                    yield self._finish()
                self.file_index += 1
                self.in_file = 0
            elif self.pending_bytes >= self.spec.row_group_bytes:
                yield from self._flush()

    def _flush(self):
        if not self.pending:
            return
        table = pa.concat_tables(self.pending)
        if ROW_COL in table.column_names:
            table = table.sort_by(ROW_COL).drop_columns([ROW_COL])
        table = table.cast(self.schema)
        self.pending, self.pending_bytes = [], 0
        if self.file is None:
            self._open(table)
        # row groups of at least row_group_bytes of Arrow data: one, unless a flush holds several
        for name, field_id in self.float_fields.items():
            self.nans[field_id] += int(pc.sum(pc.is_nan(table.column(name))).as_py() or 0)
        groups = max(1, table.nbytes // max(1, self.spec.row_group_bytes))
        self.writer.write_table(table, row_group_size=max(1, -(-table.num_rows // groups)))
        self.rows += table.num_rows
        if self.stream.tell() >= self.spec.target_file_size_bytes:
            yield self._finish()

    def _open(self, first: pa.Table):
        name = f"{self.block:05d}-{uuid.uuid4().hex}.parquet"
        self.path = f"{self.spec.data_dir.rstrip('/')}/{name}"
        self.file = self.io.new_output(self.path)
        self.stream = self.file.create(overwrite=False)
        level = self.spec.compression_level
        if level is None and self.spec.compression == "zstd":
            level = 3
        # As Iceberg's own (parquet-mr) writer does: decimals of precision <= 18 as INT32/INT64, and
        # no dictionary where it would not pay (TPC-H lineitem: 174 MB written as pyarrow's defaults
        # vs 141 MB by Iceberg's sort, mostly l_extendedprice and l_partkey).
        self.writer = self.pq.ParquetWriter(self.stream, self.schema, compression=self.spec.compression,
                                            compression_level=level, store_decimal_as_integer=True,
                                            use_dictionary=dictionary_columns(first))
        self.rows = 0
        self.nans = dict.fromkeys(self.float_fields.values(), 0)

    def _finish(self) -> pa.RecordBatch:
        self.writer.close()
        size = self.stream.tell()
        offsets = split_offsets(self.writer.writer.metadata)
        self.stream.close()
        codes = np.unique(np.concatenate(self.codes)) if self.codes else np.zeros(0, np.int64)
        self.codes = []
        self.file = None
        return pa.RecordBatch.from_pydict({
            "block": pa.array([self.block], pa.int32()),
            "path": pa.array([self.path], pa.string()),
            "record_count": pa.array([self.rows], pa.int64()),
            "file_size_in_bytes": pa.array([size], pa.int64()),
            "ktuples": pa.array([",".join(map(str, codes.tolist()))], pa.string()),
            "split_offsets": pa.array([offsets], pa.list_(pa.int64())),
            "nan_value_counts": pa.array([list(self.nans.items())], pa.map_(pa.int32(), pa.int64())),
        })

    def close(self):
        yield from self._flush()
        if self.file is not None:
            yield self._finish()
        self.block = None
