"""The core install works without the benchmark extra, and says which extra a command needs.

``pyproject.toml`` keeps the benchmark, demo and dataset dependencies in ``pando-iceberg[bench]``.
The checks run in a core environment made for the test: a throwaway virtual environment whose
site-packages holds this checkout's package and every distribution of the project environment
except the ``bench`` extra's (so ``import duckdb`` fails there and no ``tpchgen-cli`` is on its
PATH), as after ``pip install .``. There, importing the package, ``pando --help``, ``pando sql``,
a procedure and a verb work, and ``pando bench`` / ``demo`` / ``load-tpch`` stop before starting
Spark, naming ``pip install 'pando-iceberg[bench]'``.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sysconfig
import tomllib
import venv
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pando_iceberg"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
# import name → the extra that provides it (imported only inside the functions that need it)
OPTIONAL_IMPORTS = {"duckdb": "bench", "matplotlib": "bench", "polars": "dev"}


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()


def test_the_bench_dependencies_are_an_extra_not_core() -> None:
    core = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    bench = {_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["bench"]}
    assert {"tpchgen-cli", "duckdb", "duckdb-extension-tpcds", "matplotlib"} <= bench
    assert not core & bench
    assert PYPROJECT["project"]["license"] == "Apache-2.0" and (ROOT / "LICENSE").read_text().lstrip().startswith(
        "Apache License\n                           Version 2.0")


def test_optional_packages_are_imported_only_where_they_are_used() -> None:
    """A module-level import of an extra's package would break ``import pando_iceberg.<module>``
    in a core install; inside a function it costs only that function's callers."""
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            bad += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n.split(".")[0] in OPTIONAL_IMPORTS]
    assert bad == []


# ---- a core environment ---------------------------------------------------------------------------


def _bench_entries(site: Path) -> set[str]:
    """The top-level site-packages entries of the bench extra's distributions."""
    out = set()
    for req in PYPROJECT["project"]["optional-dependencies"]["bench"]:
        dist = metadata.distribution(_name(req))
        for f in dist.files or ():
            if not str(f).startswith(".."):
                out.add(Path(str(f)).parts[0])
    return out


@pytest.fixture(scope="module")
def core_env(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """(python, environment) of a virtual environment holding the core install only."""
    tmp = tmp_path_factory.mktemp("core-env")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(tmp / "venv")
    python = tmp / "venv" / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    project_site = Path(sysconfig.get_paths()["purelib"])
    skip = _bench_entries(project_site)
    for entry in project_site.iterdir():
        if entry.name in skip or entry.name.startswith(("__editable__", "pando_iceberg", "__pycache__")):
            continue
        (site / entry.name).symlink_to(entry)
    (site / "pando_iceberg").symlink_to(PACKAGE, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PANDO_", "PYTHONPATH"))}
    env.update(PATH=f"{python.parent}{os.pathsep}/usr/bin{os.pathsep}/bin", PANDO_HOME=str(tmp / "home"),
               PANDO_SPARK_MASTER="local[2]", PANDO_DRIVER_MEMORY="1g")
    return python, env


def _run(core_env, *args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    python, env = core_env
    return subprocess.run([str(python), *args], env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=python.parents[2])


def test_the_core_environment_has_no_bench_dependency(core_env) -> None:
    proc = _run(core_env, "-c", "import duckdb")
    assert proc.returncode != 0 and "No module named 'duckdb'" in proc.stderr
    proc = _run(core_env, "-c", "import matplotlib")
    assert proc.returncode != 0
    proc = _run(core_env, "-c", "import shutil, sys, pathlib; print(shutil.which('tpchgen-cli'), "
                "(pathlib.Path(sys.executable).parent / 'tpchgen-cli').exists())")
    assert proc.stdout.split() == ["None", "False"]


def test_the_package_and_the_cli_help_work_without_the_extra(core_env) -> None:
    code = ("import pando_iceberg, pando_iceberg.procedures, pando_iceberg.spark, pando_iceberg.cli; "
            "print(pando_iceberg.PandoTable.__name__, pando_iceberg.scan.__name__, pando_iceberg.__version__)")
    proc = _run(core_env, "-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["PandoTable", "scan", pando_iceberg_version()]
    for command in ([], ["bench"], ["sql"], ["describe-layout"], ["soak"]):
        proc = _run(core_env, "-m", "pando_iceberg.cli", *command, "--help")
        assert proc.returncode == 0 and "usage: pando" in proc.stdout, proc.stderr


def pando_iceberg_version() -> str:
    return re.search(r'__version__ = "(.*)"', (PACKAGE / "version.py").read_text()).group(1)


@pytest.mark.parametrize("command", [["bench", "--dataset", "star"], ["demo"], ["load-tpch", "--sf", "0.01"]])
def test_a_bench_command_names_the_extra_to_install(core_env, command) -> None:
    proc = _run(core_env, "-m", "pando_iceberg.cli", *command)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "pip install 'pando-iceberg[bench]'" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.spark
def test_sql_a_procedure_and_a_verb_work_without_the_extra(core_env) -> None:
    sql = _run(core_env, "-m", "pando_iceberg.cli", "sql", "--json", "SELECT 40 + 2 AS answer")
    assert sql.returncode == 0, sql.stderr
    assert json.loads(sql.stdout)["rows"] == [{"answer": 42}]
    code = """
import pyarrow as pa
import pando_iceberg
from pando_iceberg.catalog import load_catalog
from pando_iceberg.config import load_config
from pando_iceberg.procedures import ProcedureContext, call
cfg = load_config()
cat = load_catalog(cfg)
cat.create_namespace_if_not_exists("ns")
t = cat.create_table_if_not_exists("ns.t", pa.schema([("a", pa.int64())]))
t.append(pa.table({"a": pa.array(range(100), pa.int64())}))
print(pando_iceberg.scan(cat.load_table("ns.t"), row_filter="a < 10").count())
print(pando_iceberg.PandoTable(cat, "ns.t").health().status)
def no_spark():
    raise AssertionError("this procedure runs without Spark")
print(call(ProcedureContext(cfg, cat, no_spark), "CALL pando.system.layout_health(table => 'ns.t')").rows[0])
"""
    proc = _run(core_env, "-c", code)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "10" and lines[1] == "no layout" and "status" in lines[2], proc.stdout
