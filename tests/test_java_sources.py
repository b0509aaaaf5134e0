"""The Java helpers are real ``.java`` files shipped as package resources: none is left inside a
Python string, each declares the class its file names, and an installed wheel holds them all and
finds them through ``importlib.resources``."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from pando_iceberg.spark import jvm_classes

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pando_iceberg"
JAVA = PACKAGE / "spark" / "java" / jvm_classes.PACKAGE


def test_every_java_source_is_a_file_declaring_its_class() -> None:
    files = sorted(JAVA.glob("*.java"))
    assert len(files) >= 10
    assert jvm_classes.java_sources() == {f.stem: f.read_text(encoding="utf-8") for f in files}
    for f in files:
        text = f.read_text(encoding="utf-8")
        assert text.startswith(f"package {jvm_classes.PACKAGE};\n"), f
        assert re.search(rf"^public class {f.stem} \{{$", text, re.M), f


def test_no_java_inside_python_strings() -> None:
    found = [f"{p.relative_to(ROOT)}:{i}" for p in sorted(PACKAGE.rglob("*.py"))
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if "public static" in line
             or re.search(r"\b(public|static) (static |synchronized )*[\w.<>\[\]]+ \w+\(", line)]
    assert found == []


def test_the_package_data_globs_cover_every_java_file() -> None:
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"]["pando_iceberg"]
    shipped = {p for g in globs for p in PACKAGE.glob(g)}
    assert set(PACKAGE.rglob("*.java")) <= shipped


def test_an_installed_wheel_finds_the_java_sources(tmp_path: Path) -> None:
    """Built as a user builds it (``pip wheel``), unpacked as an installer lays it out, imported
    from there (not from this checkout): every source is found."""
    src = tmp_path / "src"  # a copy: the build writes its build/ and egg-info beside the sources
    shutil.copytree(PACKAGE, src / PACKAGE.name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(src)],
                   check=True, capture_output=True, timeout=600)
    (wheel,) = (tmp_path / "dist").glob("pando_iceberg-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); from pando_iceberg.spark import jvm_classes as j; "
             "print(j.__file__); print(' '.join(sorted(j.java_sources())))")
    out = subprocess.run([sys.executable, "-c", probe, str(site)], check=True, capture_output=True, text=True,
                         timeout=120).stdout.splitlines()
    assert out[0].startswith(str(site))
    assert out[1].split() == sorted(f.stem for f in JAVA.glob("*.java"))


def test_the_version_guard_names_what_is_untested() -> None:
    assert jvm_classes.untested_versions("3.5.9", "1.10.2") is None
    assert jvm_classes.untested_versions("3.5.0", "1.10.0") is None
    spark_only = jvm_classes.untested_versions("3.4.1", "1.10.2")
    assert spark_only is not None and "not on Spark 3.4.1" in spark_only and "Iceberg 1.10.2" not in spark_only
    both = jvm_classes.untested_versions("4.0.0", "1.9.2")
    assert both is not None and "not on Spark 4.0.0 with Iceberg 1.9.2" in both
    assert jvm_classes.untested_versions("3.50.0", "1.10.2") is not None  # major.minor, not a prefix
    assert jvm_classes.untested_versions("3.5.9", "1.1.0") is not None
