"""The `pando` command: help everywhere, JSON that parses, exit codes scripts can rely on."""

import json
import subprocess
import sys

import pytest

COMMANDS = ["init", "tables", "sql", "run", "explain", "describe-layout", "advise", "advise-tables", "load-tpch", "demo",
            "cleanup", "soak"]


def run(*args, home=None):
    cmd = [sys.executable, "-m", "pando_iceberg.cli"] + ([f"--home={home}"] if home else []) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    proc = run(command, "--help")
    assert proc.returncode == 0
    assert f"usage: pando {command}" in proc.stdout


def test_demo_refuses_a_k_it_cannot_compare_and_names_the_accepted_ones(tmp_path):
    proc = run("demo", "--k", "7", home=tmp_path / "lh")
    assert proc.returncode == 2
    assert "--k must be one of 1, 2, 3, 4, got 7" in proc.stderr


def test_init_creates_the_embedded_lakehouse_and_reports_it_as_json(tmp_path):
    proc = run("init", "--json", home=tmp_path / "lh")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    settings = {r["setting"]: r["value"] for r in doc["rows"]}
    assert settings["catalog"] == "lake (embedded)"
    assert (tmp_path / "lh" / "catalog.db").exists() and (tmp_path / "lh" / "warehouse").is_dir()


def test_sql_prints_rows_and_bad_sql_exits_2(tmp_path):
    home = tmp_path / "lh"
    ok = run("sql", "--json", "SELECT 1 + 1 AS two, 'x' AS s", home=home)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["rows"] == [{"two": 2, "s": "x"}]
    human = run("sql", "SELECT 41 + 1 AS answer", home=home)
    assert "| answer |" in human.stdout and "| 42     |" in human.stdout
    bad = run("sql", "SELEC 1", home=home)
    assert bad.returncode == 2
    assert "ParseException" in bad.stderr and "Traceback" not in bad.stderr
    missing = run("sql", "SELECT * FROM nowhere.t", home=home)
    assert missing.returncode == 2 and "does not exist" in missing.stderr or "cannot be found" in missing.stderr


@pytest.mark.parametrize("args,message", [
    ("workload => '/path/that/does/not/exist.sql'",
     "workload '/path/that/does/not/exist.sql': no such file or directory (how a workload string is read: an existing "
     "directory → its .sql files; an existing file → its SQL statements"),
    ("workload_log => '/no/such/log'", "query log '/no/such/log' does not exist"),
])
@pytest.mark.parametrize("procedure", ["optimize_layout", "rewrite_data_files"])
def test_a_workload_path_that_names_nothing_exits_2_and_says_so(tmp_path, args, message, procedure):
    import pyarrow as pa

    from pando_iceberg.catalog import load_catalog
    from pando_iceberg.config import load_config

    home = tmp_path / "lh"
    cat = load_catalog(load_config(home=home, env={}))
    cat.create_namespace_if_not_exists("ns")
    cat.create_table("ns.t", pa.schema([("a", pa.int64())])).append(pa.table({"a": pa.array(range(10), pa.int64())}))
    strategy = ", strategy => 'pando'" if procedure == "rewrite_data_files" else ""
    proc = run("sql", f"CALL pando.system.{procedure}(table => 'ns.t'{strategy}, {args})", home=home)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr and "Div" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("args,message", [
    (["--days", "0"], "--days must be >= 1, got 0"),
    (["--inject", "2:oops"], "--inject '2:oops': expected DAY:KIND with KIND one of delete-behind-model, lose-a-layout-file"),
    (["--inject", "x:delete-behind-model"], "expected DAY:KIND"),
    (["--profile", "huge"], "invalid choice: 'huge'"),
])
def test_soak_bad_arguments_exit_2_before_spark_starts(tmp_path, args, message):
    proc = run("soak", *args, home=tmp_path / "lh")
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


@pytest.mark.parametrize("args,message", [
    (["t", "--options", "k"], "--options 'k': expected KEY=VALUE pairs, comma-separated"),
    (["t", "--max-repay-days", "soon"], "argument --max-repay-days: invalid float value: 'soon'"),
])
def test_advise_bad_arguments_exit_2_before_spark_starts(tmp_path, args, message):
    proc = run("advise", *args, home=tmp_path / "lh")
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_advise_tables_bad_options_exit_2_before_spark_starts(tmp_path):
    proc = run("advise-tables", "a", "b", "--options", "k", home=tmp_path / "lh")
    assert proc.returncode == 2 and "--options 'k': expected KEY=VALUE pairs, comma-separated" in proc.stderr
