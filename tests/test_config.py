import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pando_iceberg.config import ConfigError, ensure_local_dirs, load_config


def test_embedded_default_yields_the_same_catalog_on_both_sides(tmp_path):
    cfg = load_config(home=tmp_path / "lh", env={})
    py = cfg.pyiceberg_properties()
    sp = cfg.spark_conf()
    assert py["type"] == "sql"
    assert py["uri"] == f"sqlite:///{tmp_path}/lh/catalog.db"
    assert sp["spark.sql.catalog.lake.uri"] == f"jdbc:sqlite:{tmp_path}/lh/catalog.db"
    assert sp["spark.sql.catalog.lake.type"] == "jdbc"
    # the same warehouse directory, spelled the way each side accepts it
    assert sp["spark.sql.catalog.lake.warehouse"] == f"file:{tmp_path}/lh/warehouse"
    assert py["warehouse"] == f"file://{tmp_path}/lh/warehouse"
    assert sp["spark.sql.defaultCatalog"] == "lake"


def test_yaml_env_and_overrides_precedence(tmp_path):
    (tmp_path / "pando.yaml").write_text(
        "catalog:\n  name: corp\n  type: rest\n  uri: http://127.0.0.1:8181\n  warehouse: s3://bucket/wh\n"
        "s3:\n  endpoint: http://127.0.0.1:9000\nspark:\n  master: local[2]\n  shuffle_partitions: 8\n")
    cfg = load_config(home=tmp_path, env={"PANDO_SPARK_MASTER": "spark://127.0.0.1:7077"})
    assert cfg.catalog.name == "corp" and cfg.catalog.type == "rest"
    assert cfg.spark.master == "spark://127.0.0.1:7077"  # env beats the file
    assert cfg.spark.shuffle_partitions == 8
    sp, py = cfg.spark_conf(), cfg.pyiceberg_properties()
    assert sp["spark.sql.catalog.corp.type"] == "rest" and py["type"] == "rest"
    assert sp["spark.sql.catalog.corp.uri"] == py["uri"] == "http://127.0.0.1:8181"
    assert sp["spark.sql.catalog.corp.io-impl"] == "org.apache.iceberg.aws.s3.S3FileIO"
    assert py["s3.endpoint"] == sp["spark.sql.catalog.corp.s3.endpoint"] == "http://127.0.0.1:9000"
    cfg2 = load_config(home=tmp_path, env={"PANDO_SPARK_MASTER": "local[1]"}, overrides={"spark": {"master": "local[3]"}})
    assert cfg2.spark.master == "local[3]"  # CLI flag beats env


def test_postgres_jdbc_catalog_translates_for_pyiceberg(tmp_path):
    cfg = load_config(home=tmp_path, env={"PANDO_CATALOG_TYPE": "jdbc", "PANDO_CATALOG_URI": "jdbc:postgresql://127.0.0.1:5432/lake",
                                          "PANDO_CATALOG_USER": "u", "PANDO_CATALOG_PASSWORD": "secret"})
    assert cfg.pyiceberg_properties()["uri"] == "postgresql+psycopg2://u:secret@127.0.0.1:5432/lake"
    assert cfg.spark_conf()["spark.sql.catalog.lake.jdbc.password"] == "secret"
    assert cfg.jdbc_driver_jars() == ["/usr/share/java/postgresql.jar"]
    assert "secret" not in repr(cfg) and "secret" not in str(cfg.describe())


@pytest.mark.parametrize("env, setting, accepted", [
    ({"PANDO_CATALOG_TYPE": "mongo"}, "catalog.type", "embedded, jdbc, rest, hive, glue"),
    ({"PANDO_SPARK_MASTER": "spark://nohost"}, "spark.master", "spark://host:port"),
    ({"PANDO_SPARK_MASTER": "local[0]"}, "spark.master", "local[N]"),
    ({"PANDO_CATALOG_TYPE": "jdbc", "PANDO_CATALOG_URI": "jdbc:mysql://x/y"}, "catalog.uri", "jdbc:postgresql://"),
    ({"PANDO_CATALOG_TYPE": "rest"}, "catalog.uri", "http(s)://"),
    ({"PANDO_WAREHOUSE": "hdfs://nn/wh"}, "catalog.warehouse", "s3://bucket/prefix"),
    ({"PANDO_DRIVER_MEMORY": "lots"}, "spark.driver_memory", "2g"),
    ({"PANDO_SHUFFLE_PARTITIONS": "many"}, "spark.shuffle_partitions", "positive integer"),
])
def test_bad_settings_fail_fast_naming_setting_and_accepted_values(tmp_path, env, setting, accepted):
    with pytest.raises(ConfigError) as e:
        load_config(home=tmp_path, env=env)
    assert setting in str(e.value) and accepted in str(e.value)


def test_unknown_yaml_keys_and_missing_explicit_file(tmp_path):
    (tmp_path / "pando.yaml").write_text("catalog:\n  flavour: x\n")
    with pytest.raises(ConfigError, match=r"catalog: unknown setting\(s\) \['flavour'\]"):
        load_config(home=tmp_path, env={})
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(config_file=tmp_path / "nope.yaml", home=tmp_path, env={})


def test_unwritable_home_names_the_setting(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    cfg = load_config(home=blocker / "lh", env={})
    with pytest.raises(ConfigError, match=r"home: .* is not a writable directory"):
        ensure_local_dirs(cfg)


def test_missing_java_is_reported_before_spark_starts(tmp_path, monkeypatch):
    from pando_iceberg.spark.session import SparkSetupError, start_spark

    cfg = load_config(home=tmp_path, env={})
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    with pytest.raises(SparkSetupError, match="JAVA_HOME=.*has no bin/java"):
        start_spark(cfg)
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path))  # no java on PATH
    with pytest.raises(SparkSetupError, match="Java is missing.*openjdk-17-jre-headless"):
        start_spark(cfg)


def test_cli_reports_bad_master_with_exit_code_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pando_iceberg.cli", "--home", str(tmp_path), "--master", "spark://x", "tables"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "spark.master: 'spark://x' is not a valid Spark master URL" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_processes_opening_one_lakehouse_at_once_all_succeed(tmp_path):
    """Regression: every process probed the home with the same file name, so one could unlink
    the probe another had just written and fail with 'not a writable directory' (CI, two
    concurrent appenders). Threads race the same way, many times over."""
    from concurrent.futures import ThreadPoolExecutor

    cfg = load_config(home=tmp_path / "lh", env={})

    def many(_: int) -> int:
        for _ in range(300):
            ensure_local_dirs(cfg)
        return 1

    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(many, range(8))) == 8
    assert not [p for p in (tmp_path / "lh").iterdir() if p.name.startswith(".pando-write-probe")]
