"""The `pando` command: help everywhere, JSON that parses, exit codes scripts can rely on."""

import json
import subprocess
import sys

import pytest

COMMANDS = ["init", "tables", "sql", "run", "explain", "describe-layout", "load-tpch", "demo", "cleanup"]


def run(*args, home=None):
    cmd = [sys.executable, "-m", "pando_iceberg.cli"] + ([f"--home={home}"] if home else []) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    proc = run(command, "--help")
    assert proc.returncode == 0
    assert f"usage: pando {command}" in proc.stdout


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
