"""Security (issue 7 §6): credentials never printed or logged, no eval/exec, user names quoted.

Sidecar path confinement is tested in tests/storage/test_paths_pointer.py and, through a real
table, in tests/spark/test_edge_and_fallbacks.py (path traversal from properties).
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pando_iceberg"
SECRETS = ["URI-PW-1", "ENV-PW-2", "S3-SECRET-3", "PROP-PW-4", "SPARK-SECRET-5", "AWS-SECRET-6", "BAD-URI-PW-7"]


@pytest.fixture()
def secret_cfg(tmp_path, monkeypatch):
    from pando_iceberg.config import load_config

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "AWS-SECRET-6")
    return load_config(home=tmp_path, env={
        "PANDO_CATALOG_TYPE": "jdbc", "PANDO_CATALOG_URI": "jdbc:postgresql://127.0.0.1:5432/lake?password=URI-PW-1",
        "PANDO_CATALOG_USER": "u", "PANDO_CATALOG_PASSWORD": "ENV-PW-2", "PANDO_WAREHOUSE": "s3://bucket/wh"},
        overrides={"catalog": {"properties": {"s3.secret-access-key": "S3-SECRET-3", "jdbc.password": "PROP-PW-4"}},
                   "spark": {"conf": {"spark.hadoop.fs.s3a.secret.key": "SPARK-SECRET-5"}}})


def test_config_repr_and_describe_hide_every_credential(secret_cfg):
    shown = repr(secret_cfg) + str(secret_cfg.describe()) + repr(secret_cfg.catalog) + repr(secret_cfg.spark)
    assert not [s for s in SECRETS if s in shown], shown
    assert "***" in shown and "u" in shown  # redacted, not dropped: the user and the keys stay visible
    # ... while the two sides still get them
    assert secret_cfg.spark_conf()["spark.sql.catalog.lake.jdbc.password"] in ("ENV-PW-2", "PROP-PW-4")
    assert secret_cfg.pyiceberg_properties()["s3.secret-access-key"] == "S3-SECRET-3"


def test_configuration_errors_do_not_echo_passwords(tmp_path):
    from pando_iceberg.config import ConfigError, load_config

    for uri in ("jdbc:mysql://u:BAD-URI-PW-7@x/y", "jdbc:postgresql://x/y;password=BAD-URI-PW-7&z"):
        with pytest.raises(ConfigError) as info:
            load_config(home=tmp_path, env={"PANDO_CATALOG_TYPE": "rest", "PANDO_CATALOG_URI": uri})
        assert "BAD-URI-PW-7" not in str(info.value) and "catalog.uri" in str(info.value)


def test_cli_configuration_error_output_hides_the_password(tmp_path, capsys):
    from pando_iceberg.cli import main

    cfg = tmp_path / "pando.yaml"
    cfg.write_text("catalog:\n  type: jdbc\n  uri: jdbc:mysql://admin:BAD-URI-PW-7@db/lake\n")
    assert main(["--config", str(cfg), "--home", str(tmp_path), "tables"]) == 2
    out = capsys.readouterr()
    assert "BAD-URI-PW-7" not in out.out + out.err and "catalog.uri" in out.err


def test_catalog_loading_logs_no_credentials(tmp_path, caplog):
    from pando_iceberg.catalog import load_catalog
    from pando_iceberg.config import load_config

    cfg = load_config(home=tmp_path, env={}, overrides={"catalog": {"properties": {"s3.secret-access-key": "S3-SECRET-3"}}})
    with caplog.at_level(logging.DEBUG):
        catalog = load_catalog(cfg)
        catalog.list_namespaces()
        logging.getLogger("pando_iceberg").debug("config %r", cfg)
    assert caplog.records  # something was logged, and none of it is a secret
    assert "S3-SECRET-3" not in caplog.text


def _calls(name: str) -> list[str]:
    hits = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
                hits.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return hits


def test_no_eval_or_exec_in_the_package():
    assert _calls("eval") == [] and _calls("exec") == [] and _calls("compile") == []


@pytest.mark.spark
def test_hostile_column_names_are_quoted_not_pasted(spark, catalog, lakehouse_cfg):
    """Columns whose names need quoting (a keyword, a space, a quote) through the
    whole path: rewrite (learn, uniqueness check of a dimension key, key sets), pruned reads
    in pyiceberg and Spark, run_sql with a join."""
    from pando_iceberg.planner import plan_scan, read_arrow
    from pando_iceberg.spark.pruned import pruned_table, run_sql
    from pando_iceberg.spark.rewrite import RewriteOptions, SparkKeyProvider, rewrite_table

    spark.sql("CREATE NAMESPACE IF NOT EXISTS secq")
    spark.sql("DROP TABLE IF EXISTS secq.t")
    spark.sql("DROP TABLE IF EXISTS secq.d")
    spark.sql("CREATE TABLE secq.t USING iceberg AS SELECT id AS `from`, CAST(id % 97 AS INT) AS `a b`, "
              "concat('v', id % 5) AS `it's`, id % 20 AS `fk-x` FROM range(0, 3000)")
    spark.sql("CREATE TABLE secq.d (`key col` BIGINT NOT NULL, `cat's` STRING) USING iceberg")
    spark.sql("INSERT INTO secq.d SELECT id, concat('c', id % 3) FROM range(0, 20)")
    spark.sql("ALTER TABLE secq.d SET IDENTIFIER FIELDS `key col`")
    assert SparkKeyProvider(spark, {}).is_unique("secq.d", "key col")
    workload = ["SELECT * FROM secq.t WHERE `a b` < 10", "SELECT * FROM secq.t WHERE `it's` = 'v1' AND `from` > 100",
                "SELECT t.`from` FROM secq.t t JOIN secq.d d ON t.`fk-x` = d.`key col` WHERE d.`cat's` = 'c1'"]
    r = rewrite_table(spark, "secq.t", workload, RewriteOptions(k=2, sample_rate=1.0, min_block_rows=300),
                      io_properties=lakehouse_cfg.pyiceberg_properties())
    assert r.block_count > 1
    flt = "`a b` < 10 AND `it's` <> 'v2'"
    want = sorted(spark.sql(f"SELECT `from` FROM secq.t WHERE {flt}").collect())
    with pruned_table(spark, catalog, "secq.t", flt) as (df, plan):
        assert sorted(df.select("from").collect()) == want
    assert plan.explain.fallback_reason is None and plan.explain.blocks_chosen < plan.explain.blocks_total
    table = catalog.load_table("secq.t")
    got = read_arrow(table, plan_scan(table, flt), columns=("from",)).column(0).to_pylist()
    assert sorted(got) == [w[0] for w in want]
    sql = workload[2]
    assert sorted(run_sql(spark, catalog, sql).rows) == sorted(spark.sql(sql).collect())


def test_table_names_are_quoted_by_sqlglot():
    from pando_iceberg.spark.session import quote_name

    assert quote_name("lake.ns.t") == "`lake`.`ns`.`t`"
    assert quote_name("ns.a`b; DROP TABLE x") == "`ns`.`a``b; DROP TABLE x`"
    package = Path(__file__).resolve().parents[2] / "pando_iceberg"
    pasted = [f"{p.name}:{i}" for p in package.rglob("*.py") for i, line in enumerate(p.read_text().splitlines(), 1)
              if "REFRESH TABLE {" in line and "quote_name" not in line]
    assert pasted == []
