"""The Java helpers (``spark/java/pando/*.java``) compile in the JVM the package supports; one that
does not compile is a warning, once, and its work takes the portable path (same result)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from pando_iceberg.spark import iceberg_jvm as jv
from pando_iceberg.spark import jvm_classes

pytestmark = pytest.mark.spark

T = "jvmc.numbers"


def test_every_java_helper_compiles(spark):
    """Each ``.java`` file compiled with the classes it calls: a failure names the file and gives
    Janino's message (file, line, column)."""
    gateway = spark.sparkContext._gateway
    errors = {f"{name}.java": jvm_classes.compile_error(gateway, name) for name in jvm_classes.java_sources()}
    failed = {f: e for f, e in errors.items() if e is not None}
    assert not failed, "Java helpers that do not compile:\n" + "\n".join(f"{f}: {e}" for f, e in failed.items())


@pytest.fixture
def numbers(spark):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jvmc")
    spark.sql(f"DROP TABLE IF EXISTS {T}")
    spark.sql(f"CREATE TABLE {T} (id bigint) USING iceberg")
    for i in range(3):  # a data file each
        spark.sql(f"INSERT INTO {T} SELECT id FROM range({i * 10}, {i * 10 + 10})")
    yield jv.load_table(spark, T)
    spark.sql(f"DROP TABLE {T}")


def test_a_helper_that_does_not_compile_warns_once_and_the_portable_path_serves(spark, numbers, monkeypatch, caplog):
    """``ChosenTasks.java`` calling a method this Iceberg lacks (as another version's API would):
    one warning naming the class, the file and Janino's message, however often the helper is
    asked for; ``chosen_tasks`` gives the same tasks through py4j (a Python list)."""
    snapshot = int(numbers.currentSnapshot().snapshotId())
    keep = set(list(jv.live_data_files(numbers, snapshot))[:2])
    assert len(keep) == 2
    in_jvm, _ = jv.chosen_tasks(numbers, snapshot, keep)
    assert not isinstance(in_jvm, list)
    want = sorted(str(t.file().location()) for t in in_jvm)

    sources = dict(jvm_classes.java_sources())
    sources["ChosenTasks"] = sources["ChosenTasks"].replace("task.file().location()", "task.file().noSuchMethod()")
    monkeypatch.setattr(jvm_classes, "java_sources", lambda: sources)
    for cache in ("_LOADERS", "_INSTANCES", "_METHODS"):  # a JVM that has not compiled the helpers yet
        monkeypatch.setattr(jvm_classes, cache, {})
    monkeypatch.setattr(jvm_classes, "_WARNED", set())
    with caplog.at_level(logging.WARNING, logger=jvm_classes.__name__):
        for _ in range(3):
            got, _ = jv.chosen_tasks(numbers, snapshot, keep)
            assert isinstance(got, list) and sorted(str(t.file().location()) for t in got) == want
        assert jvm_classes.helper("ChosenTasks", "chosen", ("java.lang.Object", "java.lang.String")) is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "pando.ChosenTasks" in warnings[0] and "ChosenTasks.java" in warnings[0] and "noSuchMethod" in warnings[0]
    gateway = spark.sparkContext._gateway
    assert "ChosenTasks.java" in (jvm_classes.compile_error(gateway, "ChosenTasks") or "")
    assert jvm_classes.compile_error(gateway, "PlannedPartitions") is None  # the others still compile


def test_the_venv_runs_the_versions_the_fast_paths_are_tested_on(spark):
    spark_version, iceberg_version = jvm_classes.jvm_versions(spark.sparkContext._gateway)
    assert spark_version == spark.version and spark_version.startswith("3.5.")
    assert iceberg_version.startswith("1.10.")
    assert jvm_classes.untested_versions(spark_version, iceberg_version) is None


def test_an_untested_version_takes_the_portable_paths_with_one_note(spark, numbers, monkeypatch, caplog):
    """The guard's input says Spark 3.4 (a version the fast paths are not tested on): no helper is
    used, one note is logged, and the portable paths give the same tasks and views."""
    snapshot = int(numbers.currentSnapshot().snapshotId())
    keep = set(jv.live_data_files(numbers, snapshot))
    want = sorted(keep)
    monkeypatch.setattr(jvm_classes, "jvm_versions", lambda gateway: ("3.4.3", "1.10.2"))
    for cache in ("_INSTANCES", "_METHODS", "_TESTED"):  # a JVM whose versions were not asked yet
        monkeypatch.setattr(jvm_classes, cache, {})
    with caplog.at_level(logging.WARNING, logger=jvm_classes.__name__):
        for _ in range(2):
            got, _ = jv.chosen_tasks(numbers, snapshot, keep)
            assert isinstance(got, list) and sorted(str(t.file().location()) for t in got) == want
        assert jvm_classes.helper("TaskCache", "cachedCounts", ()) is None
        assert not jv.long_view(spark, np.arange(3, dtype=np.int64), "k", "jvmc_keys")
        jv.temp_view(spark, spark.table(T), "jvmc_view")  # Spark's createOrReplaceTempView
        assert spark.table("jvmc_view").count() == 30
        jv.drop_temp_views(spark, ["jvmc_view"])
    notes = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(notes) == 1 and "not on Spark 3.4.3" in notes[0] and "portable" in notes[0], notes
    assert not spark.catalog.tableExists("jvmc_view")
