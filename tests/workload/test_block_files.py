"""The block writer's files of about b rows (spark/blocks.py with workload/in_block.py's plan),
run as the executors run it — a function over Arrow batches — on real Parquet files in a
local directory (no Spark needed for this step)."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from pando_iceberg.spark.blocks import BLOCK_COL, KTUPLE_COL, ROW_COL, WriteSpec, write_blocks
from pando_iceberg.workload.in_block import block_files

SCHEMA = Schema(NestedField(1, "x", LongType(), required=False))


def _write(tmp_path, estimated, actual, b, batch_rows=700, row_ids=False):
    plan = block_files(estimated, b)
    spec = WriteSpec(data_dir=f"file://{tmp_path}", iceberg_schema_json=SCHEMA.model_dump_json(), io_properties={},
                     target_file_size_bytes=1 << 30, order_column="x", file_rows=plan.rows_per_file.tolist(),
                     block_files=plan.files.tolist(), max_file_rows=plan.max_file_rows)
    blocks = np.repeat(np.arange(len(actual)), actual).astype(np.int32)
    x = np.concatenate([np.sort(np.random.default_rng(i).integers(0, 10**6, n)) for i, n in enumerate(actual)])
    cols = lambda s: {"x": pa.array(x[s:s + batch_rows], pa.int64()),  # noqa: E731
                      **({ROW_COL: pa.array(-x[s:s + batch_rows], pa.int64())} if row_ids else {}),
                      BLOCK_COL: pa.array(blocks[s:s + batch_rows], pa.int32()),
                      KTUPLE_COL: pa.array(np.zeros(len(x[s:s + batch_rows]), np.int64))}
    batches = [pa.RecordBatch.from_pydict(cols(s)) for s in range(0, len(x), batch_rows)]
    return plan, [r for out in write_blocks(spec)(iter(batches)) for r in out.to_pylist()]


def test_blocks_become_files_of_about_b_rows_without_small_tails(tmp_path):
    b = 1000
    estimated = [1000, 1800, 2600, 500, 3990]
    actual = [1030, 1790, 2700, 480, 4100]  # the sample's estimate is a few percent off
    plan, written = _write(tmp_path, estimated, actual, b)
    by_block: dict[int, list[int]] = {}
    for w in written:
        by_block.setdefault(w["block"], []).append(w["record_count"])
        values = pq.read_table(w["path"].removeprefix("file://"), columns=["x"]).column(0).to_pylist()
        assert values == sorted(values) and len(values) == w["record_count"]
    assert sum(sum(v) for v in by_block.values()) == sum(actual)  # every row once
    for blk, counts in by_block.items():
        assert len(counts) == plan.files[blk]  # the planned number of files: no tail file
        assert max(counts) <= 1.3 * b
        assert min(counts) >= 0.5 * b or actual[blk] < b
    # a block far larger than estimated: its last file stops at 1.3 b and another one follows
    plan, written = _write(tmp_path / "big", [1000], [3000], b)
    counts = [w["record_count"] for w in written]
    assert counts == [1300, 1300, 400] and plan.files.tolist() == [1]


def test_rows_inside_a_file_keep_the_tables_order(tmp_path):
    """The in-block order (x, ascending) cuts the files; inside each file the rows follow the
    row ids (here descending x), and the files' x ranges are still consecutive runs."""
    plan, written = _write(tmp_path, [2000, 3000], [2000, 3000], 1000, row_ids=True)
    runs: dict[int, list] = {}
    for w in written:
        values = pq.read_table(w["path"].removeprefix("file://")).column("x").to_pylist()
        assert pq.read_schema(w["path"].removeprefix("file://")).names == ["x"]  # the row id is not written
        assert values == sorted(values, reverse=True)
        runs.setdefault(w["block"], []).append((min(values), max(values)))
    for r in runs.values():
        r.sort()
        assert all(a[1] <= b[0] for a, b in zip(r, r[1:]))



def test_dictionary_only_where_it_pays_as_iceberg_writes_it(tmp_path):
    """parquet-mr's rule: low-cardinality columns dictionary-encoded, high-cardinality ones plain
    (x here: ~1,000 distinct values per 1,000 rows), decimals stored as integers."""
    from decimal import Decimal

    from pando_iceberg.spark.blocks import dictionary_columns

    rng = np.random.default_rng(0)
    t = pa.table({"few": pa.array(rng.integers(0, 7, 5000)), "many": pa.array(rng.permutation(5000)),
                  "tag": pa.array(rng.choice(["AIR", "SHIP"], 5000)),
                  "price": pa.array([Decimal(int(v)) / 100 for v in rng.integers(0, 10**9, 5000)], pa.decimal128(15, 2))})
    assert dictionary_columns(t) == ["few", "tag"]
    assert dictionary_columns(t.slice(0, 0)) is True
    _, written = _write(tmp_path, [3000], [3000], 1000)
    for w in written:
        meta = pq.ParquetFile(w["path"].removeprefix("file://")).metadata
        assert "RLE_DICTIONARY" not in meta.row_group(0).column(0).encodings
