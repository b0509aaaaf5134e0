"""Shared fixtures: one embedded lakehouse and one Spark session per test run.

Spark is real (local[2], Iceberg runtime, JDBC catalog on SQLite) and pyiceberg points at the
same catalog: nothing the product drives is mocked.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# The test tables are small: row filters (setting rowFilter.minRows, default 1,000,000) are
# on for every table, so the whole differential suite checks them; test_row_filters checks the default.
os.environ.setdefault("PANDO_ROW_FILTER_MIN_ROWS", "0")


@pytest.fixture(scope="session")
def lakehouse_cfg(tmp_path_factory):
    from pando_iceberg.config import load_config

    home = tmp_path_factory.mktemp("lakehouse")
    # PANDO_TEST_CATALOG_URI (a jdbc:postgresql:// URI; tests/cluster/test_postgres.py re-runs the
    # integration suite this way): the lakehouse's catalog is that database instead of SQLite. It
    # goes into <home>/pando.yaml, so subprocesses calling load_config(home=...) use it too.
    uri = os.environ.get("PANDO_TEST_CATALOG_URI")
    if uri:
        import yaml

        catalog = {"type": "jdbc", "uri": uri, "user": os.environ.get("PANDO_TEST_CATALOG_USER") or None,
                   "warehouse": str(home / "warehouse")}
        (home / "pando.yaml").write_text(yaml.safe_dump({"catalog": catalog}))
    return load_config(home=home, env={}, overrides={"spark": {"master": "local[2]", "driver_memory": "2g"}})


@pytest.fixture(scope="session")
def spark(lakehouse_cfg):
    from pando_iceberg.spark.session import start_spark, stop_spark

    session = start_spark(lakehouse_cfg, app_name="pando-tests")
    yield session
    stop_spark(session)


@pytest.fixture
def spark_jobs(spark):
    """``spark_jobs(group, fn)``: ``fn()``'s result and how many Spark jobs it ran (its job group)."""
    sc = spark.sparkContext

    def run(group: str, fn):
        sc.setJobGroup(group, group)
        try:
            got = fn()
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
            sc.setLocalProperty("spark.job.description", None)
        return got, len(sc.statusTracker().getJobIdsForGroup(group))

    return run


@pytest.fixture(scope="session")
def catalog(lakehouse_cfg):
    from pando_iceberg.catalog import load_catalog

    return load_catalog(lakehouse_cfg)


@pytest.fixture(scope="session")
def tpch(spark):
    """TPC-H SF 0.01 loaded once into namespace ``tpch`` (read-only for tests)."""
    from pando_iceberg.tpch import load_tpch

    loaded = load_tpch(spark, 0.01, namespace="tpch")
    return {t.table: t for t in loaded}
