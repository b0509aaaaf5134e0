"""The README's code runs as written: its quickstart (the CLI, the SQL CALLs, the Python) is
extracted from README.md and run on a fresh embedded lakehouse, and what it prints is checked
against the tables themselves, so the quickstart cannot drift from the product.

The blocks run as a reader runs them, in one lakehouse one after the other: the bash block with
``pando`` on the PATH (this checkout's, ``python -m pando_iceberg.cli``) in a working directory that
has the repository's ``procedures/``, the SQL block as a runbook (``pando run``), the Python block
as a script. The only change made to them is the scale: the README is written for TPC-H SF 0.1
and blocks of 10,000 rows, the test runs SF 0.01 with blocks of 1,000 rows (the same number of
blocks per table); each replacement must apply exactly as often as listed, so a README that
changes its numbers fails here until this list follows it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

# (README text, what the test runs instead, how many times it occurs in the quickstart)
SCALE = (("--sf 0.1\n", "--sf 0.01\n", 1),
         ("min_block_rows=10000 ", "min_block_rows=1000 ", 1),
         ("'min-block-rows', '10000'", "'min-block-rows', '1000'", 2),
         ("min_block_rows=10_000", "min_block_rows=1_000", 1))

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\s*$", re.S | re.M)
_MARK = "### pando "


def code_blocks(text: str) -> list[tuple[str, str, str]]:
    """(the ``##`` section it stands in, language, code) of every fenced block, in order."""
    out = []
    for m in _FENCE.finditer(text):
        sections = re.findall(r"^## (.+)$", text[: m.start()], re.M)
        out.append((sections[-1] if sections else "", m.group(1), m.group(2)))
    return out


def quickstart() -> dict[str, str]:
    """The quickstart's blocks by language, at the test's scale."""
    blocks = [(lang, code) for section, lang, code in code_blocks(README.read_text(encoding="utf-8"))
              if section == "Quickstart"]
    assert [lang for lang, _ in blocks] == ["bash", "sql", "python"], "one CLI, one SQL and one Python block"
    text = "\0".join(code for _, code in blocks)
    for old, new, times in SCALE:
        assert text.count(old) == times, f"the quickstart has {text.count(old)} × {old!r}, the test expects {times}"
        text = text.replace(old, new)
    return dict(zip([lang for lang, _ in blocks], text.split("\0")))


def test_the_readme_stays_a_front_page() -> None:
    """At most 150 lines: reference material belongs in docs/."""
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 150


def test_the_two_commands_are_make_targets() -> None:
    blocks = [code for section, lang, code in code_blocks(README.read_text(encoding="utf-8"))
              if section == "The two commands"]
    assert len(blocks) == 1
    commands = [line.split("#")[0].split() for line in blocks[0].splitlines()]
    assert commands == [["make", "demo"], ["make", "test"]]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for _, target in commands:
        assert re.search(rf"^{target}:", makefile, re.M), f"no make target {target}"


def test_the_quickstart_is_extracted_at_the_test_scale() -> None:
    blocks = quickstart()
    assert "pando load-tpch --sf 0.01\n" in blocks["bash"] and "--var min_block_rows=1000 " in blocks["bash"]
    assert "'min-block-rows', '1000'" in blocks["sql"] and "min_block_rows=1_000" in blocks["python"]
    assert all("10000" not in code and "10_000" not in code for code in blocks.values())
    assert code_blocks("## A\n```sql\nx\n```\ntext\n## B\n```\ny\n```\n") == [("A", "sql", "x\n"), ("B", "", "y\n")]


# ---- the quickstart, run --------------------------------------------------------------------------


def _env(tmp: Path) -> dict[str, str]:
    """A fresh embedded lakehouse in ``tmp/home``: no catalog or config of the caller's leaks in."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PANDO_CATALOG", "PANDO_CONFIG", "PANDO_WAREHOUSE", "PANDO_TEST_CATALOG"))}
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    pando = bin_dir / "pando"
    # each invocation announces itself on stdout, so that the output can be split per command
    pando.write_text(f'#!/bin/sh\necho "{_MARK}$*"\nexec "{sys.executable}" -m pando_iceberg.cli "$@"\n')
    pando.chmod(0o755)
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(ROOT),
               PANDO_HOME=str(tmp / "home"), PANDO_SPARK_MASTER="local[2]", PANDO_DRIVER_MEMORY="2g")
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, f"{cmd[:3]} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc.stdout


def _per_command(stdout: str) -> list[tuple[str, str]]:
    """(the pando command line, what it printed) for each ``pando`` invocation of the bash block."""
    parts = stdout.split(_MARK)[1:]
    return [(p.split("\n", 1)[0], p.split("\n", 1)[1] if "\n" in p else "") for p in parts]


def _cells(output: str, column: str) -> list[str]:
    """The values of one column of the tables ``pando`` prints (``+---+`` rules, ``| a | b |`` rows)."""
    values: list[str] = []
    header: list[str] | None = None
    prev = ""
    for line in output.splitlines():
        if line.startswith("+") and not prev.startswith("|"):
            header = None  # a table's top rule: its header follows
        elif line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            elif column in header and len(cells) == len(header):
                values.append(cells[header.index(column)])
        prev = line
    return values


def test_the_printed_tables_are_read() -> None:
    two = ("t1\n+---+----+\n| a | b  |\n+---+----+\n| 1 | x  |\n| 2 | yy |\n+---+----+\n"
           "+---+\n| b |\n+---+\n| z |\n+---+\n")
    assert _cells(two, "a") == ["1", "2"] and _cells(two, "b") == ["x", "yy", "z"]


@pytest.mark.spark
def test_the_quickstart_runs_on_a_fresh_lakehouse(tmp_path: Path) -> None:
    import pyarrow.compute as pc

    from pando_iceberg.catalog import load_catalog
    from pando_iceberg.config import load_config

    blocks = quickstart()
    env = _env(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    (work / "procedures").symlink_to(ROOT / "procedures")

    # ---- the CLI --------------------------------------------------------------------------------
    out = _per_command(_run(["bash", "-euo", "pipefail", "-c", blocks["bash"]], work, env))
    assert [cmd.split()[0] for cmd, _ in out] == ["load-tpch", "run", "sql", "explain"]
    loaded, runbook, query, explain = (text for _, text in out)
    assert "tpch.lineitem" in loaded and "60175" in loaded.replace(",", "")  # SF 0.01's lineitem rows
    assert "applied pending layout" in runbook, runbook  # the rewrite applied what optimize_layout learned

    catalog = load_catalog(load_config(home=tmp_path / "home", env={}))
    lineitem = catalog.load_table("tpch.lineitem")
    assert lineitem.properties.get("pando.layout-id"), "the runbook applied a layout"
    assert int(lineitem.current_snapshot().summary["total-data-files"]) > 1
    rows = lineitem.scan().to_arrow()
    expected = pc.sum(pc.and_(pc.greater_equal(rows["l_shipdate"], pc.strptime("1996-06-01", "%Y-%m-%d", "s")
                                                .cast(rows["l_shipdate"].type)),
                              pc.less(rows["l_quantity"], 10))).as_py()
    assert _cells(query, "count(1)") == [str(expected)], query
    files = dict(zip(_cells(explain, "stage"), _cells(explain, "files")))
    assert int(files["pando (∩ trees)"]) < int(files["all live files"]), explain

    # ---- the SQL CALLs, as a runbook --------------------------------------------------------------
    (work / "quickstart.sql").write_text(blocks["sql"])
    calls = _run(["pando", "run", "quickstart.sql"], work, env)
    orders = catalog.load_table("tpch.orders")
    assert orders.properties.get("pando.layout-id") and not orders.properties.get("pando.pending-layout-id")
    assert "applied pending layout" in calls, calls
    assert orders.current_snapshot().summary.operation.value == "replace"
    assert _cells(calls, "metric")[:1] == ["status"] and _cells(calls, "value")[0] == "ok", calls
    stages = list(zip(_cells(calls, "table"), _cells(calls, "stage"), _cells(calls, "files")))
    read = {(t, stage): files for t, stage, files in stages}
    assert int(read["tpch.orders", "pando (∩ trees)"]) < int(read["tpch.orders", "all live files"]), calls
    candidates = _cells(calls, "candidate")
    assert "as is" in candidates and "pando k=1" in candidates, calls
    assert [v.lower() for v in _cells(calls, "advised")].count("true") == 1, calls
    assert _cells(calls, "column") == ["l_shipdate"] and int(_cells(calls, "max_depth")[0]) >= 1, calls

    # ---- the Python -------------------------------------------------------------------------------
    (work / "quickstart.py").write_text(blocks["python"])
    printed = _run([sys.executable, "quickstart.py"], work, env)
    table = catalog.load_table("tpch.lineitem").scan().to_arrow()
    matching = pc.sum(pc.and_(pc.less(table["l_quantity"], 10), pc.greater(table["l_discount"], 0.08))).as_py()
    m = re.search(r"^(\d+) rows from (\d+) of (\d+) files$", printed, re.M)
    assert m and int(m.group(1)) == matching and int(m.group(2)) < int(m.group(3)), printed
    # df.show(): the join's counts per priority add up to the lineitem rows the query selects
    shown = dict(re.findall(r"^\|\s*(\d-[A-Z ]+?)\|\s*(\d+)\|$", printed, re.M))
    selected = pc.sum(pc.and_(pc.equal(table["l_shipmode"], "AIR"), pc.less(table["l_quantity"], 10))).as_py()
    assert len(shown) == 5 and sum(map(int, shown.values())) == selected, printed
    assert "tpch.lineitem: read " in printed  # df.pando.notes()
    assert "RewriteMetrics(" in printed
    partsupp = catalog.load_table("tpch.partsupp")
    assert partsupp.properties.get("pando.layout-id")
    assert partsupp.current_snapshot().summary.operation.value == "replace"
