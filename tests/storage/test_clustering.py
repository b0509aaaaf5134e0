"""clustering_information: overlaps and depths of the data files' min/max ranges, against a
brute-force count on random intervals and on real Iceberg tables written by pyiceberg (a sorted
table has depth 1, a shuffled one depth near its file count), through the procedure too."""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pyarrow as pa
import pytest

from pando_iceberg.maintenance.clustering import (
    ClusteringError,
    clustering_information,
    column_clustering,
    depth_bucket,
    interval_clustering,
)


def _brute(lo: np.ndarray, hi: np.ndarray) -> tuple[list[int], list[int]]:
    n = len(lo)
    overlaps = [sum(1 for j in range(n) if j != i and lo[j] <= hi[i] and hi[j] >= lo[i]) for i in range(n)]
    depth = [max(sum(1 for j in range(n) if lo[j] <= x <= hi[j]) for x in range(lo[i], hi[i] + 1)) for i in range(n)]
    return overlaps, depth


@pytest.mark.parametrize("seed", range(40))
def test_overlaps_and_depths_match_a_brute_force_count(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    lo = rng.integers(0, 80, n)
    hi = lo + rng.integers(0, rng.integers(1, 30), n)
    overlaps, depth = interval_clustering(lo, hi)
    want_overlaps, want_depth = _brute(lo, hi)
    assert overlaps.tolist() == want_overlaps and depth.tolist() == want_depth


def test_depth_buckets_are_one_two_then_powers_of_two():
    assert [depth_bucket(d) for d in (1, 2, 3, 4, 5, 8, 9, 16, 17, 1000)] == \
        ["1", "2", "3-4", "3-4", "5-8", "5-8", "9-16", "9-16", "17-32", "513-1024"]


def test_bounds_of_every_ordered_type_and_files_without_bounds():
    s = column_clustering("s", pa.array(["a", "b", None, "c"], pa.large_string()),
                          pa.array(["b", "d", None, "c"], pa.large_string()))
    assert (s.files, s.files_without_bounds, s.constant_files, s.max_depth) == (4, 1, 1, 2)
    assert s.average_overlaps == pytest.approx(4 / 3) and s.depth_histogram == {"2": 3}
    d = column_clustering("d", pa.array([decimal.Decimal("1.10"), decimal.Decimal("2.60")]),
                          pa.array([decimal.Decimal("2.50"), decimal.Decimal("3.00")]))
    assert (d.average_overlaps, d.max_depth) == (0.0, 1)  # 2.50 < 2.60 compared as decimals, not text
    f = column_clustering("f", pa.array([1.0, float("nan"), 0.0]), pa.array([2.0, 3.0, 0.5]))
    assert (f.files_without_bounds, f.max_depth) == (1, 1)
    t = column_clustering("t", pa.array([dt.date(2020, 1, 1), dt.date(2020, 1, 5)]),
                          pa.array([dt.date(2020, 1, 5), dt.date(2020, 1, 9)]))
    assert (t.average_overlaps, t.average_depth) == (1.0, 2.0)  # they share 2020-01-05


@pytest.fixture()
def tables(tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("n")
    rng = np.random.default_rng(0)
    values = rng.permutation(4000)
    schema = pa.schema([("k", pa.int64()), ("label", pa.string()), ("payload", pa.binary())])
    out = {}
    for name, order in (("sorted", np.sort(values)), ("shuffled", values)):
        t = catalog.create_table(f"n.{name}", schema=schema)
        for chunk in np.array_split(order, 8):  # eight appends: eight data files
            t.append(pa.table({"k": chunk, "label": [f"v{v % 7}" for v in chunk],
                               "payload": [b"x"] * len(chunk)}, schema=schema))
        out[name] = catalog.load_table(f"n.{name}")
    out["empty"] = catalog.create_table("n.empty", schema=schema)
    return catalog, out


def test_a_sorted_table_has_depth_one_and_a_shuffled_one_depth_of_its_file_count(tables):
    _, t = tables
    (k_sorted,) = clustering_information(t["sorted"], ["K"])
    assert (k_sorted.column, k_sorted.files, k_sorted.max_depth, k_sorted.average_overlaps) == ("k", 8, 1, 0.0)
    assert k_sorted.depth_histogram == {"1": 8}
    (k_shuffled,) = clustering_information(t["shuffled"], ["k"])
    assert k_shuffled.max_depth == 8 and k_shuffled.average_overlaps == 7.0
    assert k_shuffled.depth_histogram == {"5-8": 8}
    # default: every column with bounds (not the binary payload)
    assert [c.column for c in clustering_information(t["shuffled"])] == ["k", "label"]
    # an older snapshot: the first append alone
    first = t["shuffled"].history()[0].snapshot_id
    assert clustering_information(t["shuffled"], ["k"], snapshot_id=first)[0].files == 1
    assert clustering_information(t["empty"], ["k"])[0].files == 0


def test_bad_columns_and_snapshots_name_what_is_accepted(tables):
    _, t = tables
    with pytest.raises(ClusteringError, match=r"'nope' is not a column of n.sorted; columns with bounds: k, label"):
        clustering_information(t["sorted"], ["nope"])
    with pytest.raises(ClusteringError, match=r"'payload' has type binary, whose files have no ordered bounds"):
        clustering_information(t["sorted"], ["payload"])
    with pytest.raises(ClusteringError, match=r"snapshot 12345 is not a snapshot of n.sorted"):
        clustering_information(t["sorted"], ["k"], snapshot_id=12345)


def test_the_procedure_reads_manifests_only(tables, lakehouse_cfg):
    from pando_iceberg.procedures import ProcedureContext, ProcedureError, call

    catalog, _ = tables

    def no_spark():
        raise AssertionError("clustering_information started Spark")

    ctx = ProcedureContext(lakehouse_cfg, catalog, no_spark)
    r = call(ctx, "CALL pando.system.clustering_information(table => 'n.shuffled', columns => 'label, k')")
    assert r.names[:2] == ["column", "files"] and [row[0] for row in r.rows] == ["label", "k"]
    k = dict(zip(r.names, r.rows[1]))
    assert (k["files"], k["max_depth"], k["average_depth"], k["depth_histogram"]) == (8, 8, 8.0, "5-8: 8")
    with pytest.raises(ProcedureError, match=r"clustering_information: column 'x' is not a column of n.shuffled"):
        call(ctx, "CALL pando.system.clustering_information(table => 'n.shuffled', columns => 'x')")
    with pytest.raises(ProcedureError, match=r"'columns' names no column"):
        call(ctx, "CALL pando.system.clustering_information(table => 'n.shuffled', columns => ' , ')")
    with pytest.raises(ProcedureError, match=r"table 'n.missing' does not exist"):
        call(ctx, "CALL pando.system.clustering_information(table => 'n.missing')")
