"""Type checkers see the public API's real types: mypy, run on a user's script against the package
as an installed distribution sees it (found in site-packages, so only through its ``py.typed``),
reveals the scan, the Arrow table, the verbs' records and the errors — no ``Any`` — and flags a
wrong argument type.

The package is installed into a throwaway virtual environment as a link to this checkout, with the
project environment's packages (pyiceberg, pyarrow-stubs from the dev extra, ...) on its path
through a ``.pth`` file; mypy runs with that environment's interpreter and no configuration of the
repository's."""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pando_iceberg"

SCRIPT = '''\
from pyiceberg.catalog import Catalog

import pando_iceberg
from pando_iceberg import LayoutOptions, PandoTable


def use(catalog: Catalog) -> None:
    scan = pando_iceberg.scan(catalog.load_table("tpch.lineitem"), row_filter="l_quantity < 24")
    reveal_type(scan)
    reveal_type(scan.to_arrow())
    reveal_type(scan.explain().pando_files)
    pt = PandoTable(catalog, "tpch.lineitem")
    metrics = pt.optimize.rewrite(["SELECT * FROM tpch.lineitem WHERE l_quantity < 24"], options=LayoutOptions(k=3))
    reveal_type(metrics)
    reveal_type(metrics.snapshot_id)
    reveal_type(pt.layout)
    try:
        pt.health()
    except pando_iceberg.CommitConflictError as e:
        reveal_type(e)
    pando_iceberg.scan(catalog.load_table("t"), row_filter=5)
'''

EXPECTED = [
    "pando_iceberg.datascan.PandoDataScan",
    "pyarrow.__lib_pxi.table.Table",  # pyarrow-stubs' name of pyarrow.Table
    "int",
    "pando_iceberg.table.RewriteMetrics",
    "int | None",
    "pando_iceberg.table.LayoutView | None",
    "pando_iceberg.exceptions.CommitConflictError",
]


def _project_paths() -> list[str]:
    """The project environment's package directories (site-packages, PYTHONPATH): not the standard
    library, not this checkout (the package must come from the environment's site-packages)."""
    stdlib = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")}
    out = [sysconfig.get_paths()["purelib"]]
    for entry in sys.path:
        path = Path(entry or ".").resolve()
        if path.is_dir() and str(path) not in stdlib and path != ROOT and ROOT not in path.parents \
                and not str(path).startswith(tuple(stdlib)) and str(path) not in out:
            out.append(str(path))
    return out


def _user_environment(tmp: Path, package: Path = PACKAGE) -> Path:
    """A virtual environment with ``package`` installed as pando_iceberg (a link); its python."""
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "pando_iceberg").symlink_to(package, target_is_directory=True)
    (site / "project-environment.pth").write_text("\n".join(_project_paths()) + "\n")
    return python


def _mypy(tmp: Path, script: str, package: Path = PACKAGE) -> subprocess.CompletedProcess[str]:
    python = _user_environment(tmp, package)
    (tmp / "user.py").write_text(script)
    (tmp / "mypy.ini").write_text("[mypy]\n")
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(tmp / "mypy.ini"),
                           "--python-executable", str(python), "--cache-dir", str(tmp / "cache"),
                           "--no-error-summary", "user.py"],
                          cwd=tmp, capture_output=True, text=True, timeout=900)


def test_mypy_sees_the_public_api_s_types(tmp_path: Path) -> None:
    proc = _mypy(tmp_path, SCRIPT)
    revealed = re.findall(r'note: Revealed type is "(.*)"', proc.stdout)
    assert revealed == EXPECTED, proc.stdout + proc.stderr
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and 'Argument "row_filter" to "scan" has incompatible type "int"' in errors[0], proc.stdout


def test_without_py_typed_mypy_would_see_nothing(tmp_path: Path) -> None:
    """The check above depends on the marker: a copy of the package without it is skipped."""
    if not (PACKAGE / "py.typed").exists():
        pytest.fail("pando_iceberg/py.typed is missing")
    copy = tmp_path / "pkg" / "pando_iceberg"
    copy.mkdir(parents=True)
    for name in ("__init__.py", "exceptions.py", "version.py"):
        (copy / name).write_text((PACKAGE / name).read_text())
    proc = _mypy(tmp_path, "import pando_iceberg\nreveal_type(pando_iceberg.PandoError)\n", package=copy)
    assert "missing library stubs or py.typed marker" in proc.stdout, proc.stdout
