"""``pando_iceberg.spark.sql`` without ``catalog=`` plans against the Spark session's own catalog,
opened from the session's settings, whatever the working directory or ``PANDO_HOME`` say."""

from __future__ import annotations

import pyarrow as pa
import pytest

import pando_iceberg.spark
from pando_iceberg import LayoutOptions, PandoTable
from pando_iceberg.catalog import load_catalog
from pando_iceberg.config import ConfigError, load_config, same_catalog, spark_catalog_config

pytestmark = pytest.mark.spark

WL = ["SELECT count(*) FROM homes.t WHERE a < 100", "SELECT count(*) FROM homes.t WHERE a >= 900",
      "SELECT count(*) FROM homes.t WHERE a BETWEEN 400 AND 450"]
QUERY = "SELECT count(*), sum(b) FROM homes.t WHERE a < 50"


@pytest.fixture(scope="module")
def laid_out(spark, catalog, lakehouse_cfg):
    """homes.t in the session's lakehouse, laid out by Pando so that `a < 50` skips files."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS homes")
    spark.sql("DROP TABLE IF EXISTS homes.t")
    spark.sql("CREATE TABLE homes.t (a INT, b BIGINT) USING iceberg")
    for part in range(4):  # four files, each spanning the whole range of a
        spark.sql(f"INSERT INTO homes.t SELECT CAST((id * 7 + {part}) % 1000 AS INT), id "
                  f"FROM range({part * 2000}, {(part + 1) * 2000})")
    PandoTable(catalog, "homes.t", spark=spark).optimize.rewrite(
        WL, options=LayoutOptions(k=1, min_block_rows=1000, sample_rate=1.0))
    return spark.sql(QUERY).collect()[0]


@pytest.fixture
def other_home(tmp_path, monkeypatch, lakehouse_cfg):
    """A second lakehouse whose catalog has the session catalog's name and a homes.t with other
    rows, named by PANDO_HOME and holding the working directory."""
    home = tmp_path / "other"
    cfg = load_config(home=home, env={"PANDO_CATALOG_NAME": lakehouse_cfg.catalog.name})
    other = load_catalog(cfg)
    other.create_namespace_if_not_exists("homes")
    schema = pa.schema([("a", pa.int32()), ("b", pa.int64())])
    t = other.create_table("homes.t", schema=schema)
    t.append(pa.table({"a": pa.array([1, 2, 3], pa.int32()), "b": pa.array([10, 20, 30], pa.int64())}))
    monkeypatch.setenv("PANDO_HOME", str(home))
    monkeypatch.setenv("PANDO_CATALOG_NAME", lakehouse_cfg.catalog.name)
    monkeypatch.chdir(tmp_path)
    return cfg


def test_the_session_catalog_not_the_working_directorys(spark, laid_out, other_home):
    assert load_config().home == other_home.home  # what the working directory's configuration names
    with pando_iceberg.spark.sql(spark, QUERY) as df:
        assert df.collect()[0] == laid_out
        (record,) = df.pando.explains.values()
        assert record.used_layout and record.total_files >= 4 and record.pando_files < record.total_files, record
        assert any("homes.t" in note for note in df.pando.notes())


def test_the_session_settings_describe_the_lakehouse(spark, lakehouse_cfg):
    name = spark.catalog.currentCatalog()
    prefix = f"spark.sql.catalog.{name}"
    settings = {"": spark.conf.get(prefix), "type": spark.conf.get(f"{prefix}.type"),
                "uri": spark.conf.get(f"{prefix}.uri"), "warehouse": spark.conf.get(f"{prefix}.warehouse")}
    cfg = spark_catalog_config(name, settings, lakehouse_cfg.home)
    assert cfg.jdbc_uri() == lakehouse_cfg.jdbc_uri() and cfg.warehouse_uri == lakehouse_cfg.warehouse_uri
    assert same_catalog(lakehouse_cfg, name, settings)
    assert not same_catalog(lakehouse_cfg, name, {**settings, "warehouse": "file:/elsewhere"})
    with pytest.raises(ConfigError, match=r"spark.sql.catalog.x.type = 'hadoop' cannot be opened by pyiceberg"):
        spark_catalog_config("x", {**settings, "type": "hadoop"}, lakehouse_cfg.home)
    with pytest.raises(ConfigError, match="is not an Iceberg catalog"):
        spark_catalog_config("x", {**settings, "": "org.example.Other"}, lakehouse_cfg.home)
