"""The location policy holds against Iceberg's own maintenance: remove_orphan_files and
expire_snapshots (real Spark, real Iceberg runtime) leave the sidecar alone, and a table with a
pointer stays loadable by pyiceberg (nothing custom in `statistics`)."""

from __future__ import annotations

import dataclasses
import os
import time
from urllib.parse import urlparse

import pytest

from pando_iceberg.storage import LayoutPointer, LayoutSidecar, layout_pointer, list_sidecars

NS = "pando_storage"
pytestmark = pytest.mark.spark


def _local(loc: str) -> str:
    return urlparse(loc).path if "://" in loc or loc.startswith("file:") else loc


def test_sidecar_survives_orphan_removal_and_snapshot_expiry(spark, catalog, lakehouse_cfg, sidecar):
    cat = lakehouse_cfg.catalog.name
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    spark.sql(f"DROP TABLE IF EXISTS {NS}.maint")
    spark.sql(f"CREATE TABLE {NS}.maint (id BIGINT, v STRING) USING iceberg")
    for i in range(3):
        spark.sql(f"INSERT INTO {NS}.maint VALUES ({i}, 'r{i}')")

    tbl = catalog.load_table(f"{NS}.maint")
    base = tbl.current_snapshot().snapshot_id
    sc = dataclasses.replace(sidecar, table_uuid=str(tbl.metadata.table_uuid), base_snapshot_id=base)
    path, size = sc.write(tbl.io, tbl.location())
    assert not path.startswith(tbl.location().rstrip("/") + "/")
    with tbl.transaction() as tx:
        tx.set_properties(LayoutPointer(sc.layout_id, sc.file_name, base, base).to_properties())

    orphan = os.path.join(_local(tbl.location()), "data", "orphan-planted.parquet")
    with open(orphan, "wb") as f:
        f.write(b"not referenced by metadata")
    time.sleep(0.05)

    jvm = spark._jvm
    # Spark's catalog caches the table: without a refresh it still sees the metadata from before
    # pyiceberg's property commit, and the orphan action then deletes the *current* metadata.json.
    spark.sql(f"REFRESH TABLE {NS}.maint")
    jtable = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, f"{cat}.{NS}.maint")
    jtable.refresh()
    assert dict(jtable.properties()).get("pando.layout-id") == sc.layout_id
    actions = jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
    later = int(time.time() * 1000) + 60_000
    shuffle = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")  # the action joins listings with metadata
    try:
        results = []
        for explicit in (False, True, "prefix"):
            action = actions.deleteOrphanFiles(jtable).olderThan(later)
            if explicit:
                action = action.location(jtable.location())
            if explicit == "prefix":  # FileIO prefix listing instead of directory listing
                action = action.usePrefixListing(True)
            results.append((explicit, [str(p) for p in action.execute().orphanFileLocations()]))
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", shuffle)
    for explicit, removed in results:
        assert all(".pando/" not in p for p in removed), removed
        if not explicit:
            assert any(p.endswith("orphan-planted.parquet") for p in removed), removed  # the action did run
    assert not os.path.exists(orphan)

    spark.sql(f"CALL {cat}.system.expire_snapshots(table => '{NS}.maint', "
              f"older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)")
    assert spark.sql(f"SELECT count(*) FROM {NS}.maint.snapshots").collect()[0][0] == 1

    assert os.path.getsize(_local(path)) == size
    tbl = catalog.load_table(f"{NS}.maint")  # still loadable by pyiceberg
    assert not tbl.metadata.statistics
    ptr = layout_pointer(tbl.properties)
    assert ptr is not None and ptr.layout_id == sc.layout_id
    back = LayoutSidecar.read(tbl.io, ptr.sidecar_location(tbl.location()), expected_layout_id=ptr.layout_id,
                              expected_table_uuid=tbl.metadata.table_uuid)
    assert back == sc
    assert [f.location for f in list_sidecars(tbl.io, tbl.location())] == [path]
    assert spark.sql(f"SELECT count(*) FROM {NS}.maint").collect()[0][0] == 3
