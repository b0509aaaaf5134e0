"""The Iceberg JDBC catalog on a real PostgreSQL server (Debian's, started here on 127.0.0.1).

* One configuration yields both sides: Spark's JdbcCatalog (PostgreSQL JDBC driver) and
  pyiceberg's SqlCatalog (psycopg2), with the password from $PANDO_CATALOG_PASSWORD only.
* The integration suite runs on it: the Spark↔pyiceberg interop tests, the Pando rewrite and
  pruned-equals-unpruned tests, and the two-process concurrency tests are re-run in a child
  pytest whose lakehouse catalog is a fresh PostgreSQL database (PANDO_TEST_CATALOG_URI).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _services import LOOPBACK, PostgresServer
from pando_iceberg.config import POSTGRES_JDBC_JAR, load_config

REPO = Path(__file__).resolve().parents[2]

# The integration subset re-run on PostgreSQL (each also runs on SQLite in the normal run).
SUITE = ["tests/test_interop.py", "tests/spark/test_rewrite_and_planner.py", "tests/cluster/test_catalog_concurrency.py"]


@pytest.fixture(scope="module")
def postgres():
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


def test_one_config_gives_both_sides_with_the_password_from_the_environment(postgres, tmp_path):
    uri = postgres.create_database("creds", owner=PostgresServer.PW_USER)
    env = {"PANDO_CATALOG_TYPE": "jdbc", "PANDO_CATALOG_URI": uri, "PANDO_CATALOG_USER": PostgresServer.PW_USER,
           "PANDO_CATALOG_PASSWORD": PostgresServer.PASSWORD, "PANDO_WAREHOUSE": str(tmp_path / "wh")}
    cfg = load_config(home=tmp_path, env=env)
    conf = cfg.spark_conf()
    assert conf["spark.sql.catalog.lake.type"] == "jdbc" and conf["spark.sql.catalog.lake.uri"] == uri
    assert conf["spark.sql.catalog.lake.jdbc.user"] == PostgresServer.PW_USER
    assert conf["spark.sql.catalog.lake.jdbc.password"] == PostgresServer.PASSWORD
    assert cfg.jdbc_driver_jars() == [POSTGRES_JDBC_JAR] and Path(POSTGRES_JDBC_JAR).exists()
    assert PostgresServer.PASSWORD not in str(cfg.describe())

    from pando_iceberg.catalog import load_catalog

    cat = load_catalog(cfg)  # psycopg2 with the same user and password
    cat.create_namespace("probe")
    assert ("probe",) in cat.list_namespaces()

    bad = load_config(home=tmp_path, env={**env, "PANDO_CATALOG_PASSWORD": "wrong"})
    with pytest.raises(Exception, match="password authentication failed"):
        load_catalog(bad).list_namespaces()


def test_password_with_url_special_characters_reaches_postgres(postgres, tmp_path):
    postgres.sql("CREATE ROLE odd_pw LOGIN PASSWORD 'p@ss:w/rd%'")
    uri = postgres.create_database("odd", owner="odd_pw")
    cfg = load_config(home=tmp_path, env={"PANDO_CATALOG_TYPE": "jdbc", "PANDO_CATALOG_URI": uri,
                                         "PANDO_CATALOG_USER": "odd_pw", "PANDO_CATALOG_PASSWORD": "p@ss:w/rd%",
                                         "PANDO_WAREHOUSE": str(tmp_path / "wh")})
    from pando_iceberg.catalog import load_catalog

    # Trusted on loopback except for pando_pw, so check the URI itself, then that it connects.
    assert cfg.pyiceberg_properties()["uri"] == f"postgresql+psycopg2://odd_pw:p%40ss%3Aw%2Frd%25@{LOOPBACK}:{postgres.port}/odd"
    load_catalog(cfg).create_namespace("ok")


@pytest.mark.spark
def test_integration_suite_runs_on_postgres(postgres, tmp_path):
    uri = postgres.create_database("suite")
    env = {**os.environ, "PANDO_TEST_CATALOG_URI": uri, "PANDO_TEST_CATALOG_USER": PostgresServer.USER,
           "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
                          str(tmp_path / "suite"), *SUITE], cwd=str(REPO), env=env, capture_output=True, text=True,
                         timeout=1500)
    tail = "\n".join(out.stdout.splitlines()[-30:])
    assert out.returncode == 0, tail + "\n" + out.stderr[-2000:] + "\n--- server log\n" + postgres.log()[-2000:]
    summary = out.stdout.strip().splitlines()[-1]
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed >= 30 and not re.search(r"failed|skipped|error|deselected", summary), summary

    # ...and the tables the suite made are rows in PostgreSQL, not in a SQLite file.
    import psycopg2

    con = psycopg2.connect(host=LOOPBACK, port=postgres.port, user=PostgresServer.USER, dbname="suite")
    try:
        with con.cursor() as cur:
            cur.execute("SELECT table_namespace || '.' || table_name FROM iceberg_tables")
            tables = {r[0] for r in cur.fetchall()}
    finally:
        con.close()
    assert {"tpch.lineitem", "tpch.li_pando", "interop.from_py", "conc.appends", "conc.rw_append"} <= tables, tables
    assert not list((tmp_path / "suite").rglob("catalog.db"))
