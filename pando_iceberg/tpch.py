"""TPC-H into Iceberg: generate with tpchgen-cli (PyPI), load every table with Spark.

Types follow the TPC-H spec (dates as DATE, money as DECIMAL(15,2), keys as BIGINT), every
column is NOT NULL, and each table's primary key is declared as its Iceberg identifier fields
(what the workload module uses to recognise FK→PK joins, paper §7).
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .exceptions import PandoError

TPCH_TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")

PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "region": ("r_regionkey",),
    "nation": ("n_nationkey",),
    "supplier": ("s_suppkey",),
    "customer": ("c_custkey",),
    "part": ("p_partkey",),
    "partsupp": ("ps_partkey", "ps_suppkey"),
    "orders": ("o_orderkey",),
    "lineitem": ("l_orderkey", "l_linenumber"),
}

# How a table's rows are written (``load_tpch``'s ``load_order``): "generated", in tpchgen-cli's order
# (order keys, dates random), in the files Spark's read makes of it; "date", in arrival order, as
# a loader appending day by day writes them: sorted by these columns (the date first, then the
# key, so that files split ties evenly) into files of ``file_rows`` rows. Tables not named here are
# written as generated either way.
LOAD_ORDERS = ("generated", "date")
ARRIVAL_ORDER: dict[str, tuple[str, ...]] = {
    "lineitem": ("l_shipdate", "l_orderkey", "l_linenumber"),
    "orders": ("o_orderdate", "o_orderkey"),
}

# Rows per unit of scale factor (TPC-H spec §4.2.5); lineitem is not an exact multiple.
_BASE_ROWS = {"supplier": 10_000, "customer": 150_000, "part": 200_000, "partsupp": 800_000, "orders": 1_500_000}
# dbgen's lineitem counts (tpchgen-cli reproduces dbgen exactly).
LINEITEM_ROWS = {0.01: 60_175, 0.1: 600_572, 1: 6_001_215, 10: 59_986_052}

_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class TpchError(PandoError, RuntimeError):
    pass


def expected_row_count(table: str, sf: float) -> int | None:
    """The TPC-H row count of ``table`` at scale factor ``sf`` (None where the spec gives no formula)."""
    if table == "region":
        return 5
    if table == "nation":
        return 25
    if table == "lineitem":
        return LINEITEM_ROWS.get(sf)
    return math.floor(_BASE_ROWS[table] * sf)


def tpchgen_executable() -> str:
    cand = Path(sys.executable).parent / "tpchgen-cli"
    if cand.exists():
        return str(cand)
    found = shutil.which("tpchgen-cli")
    if not found:
        raise TpchError("tpchgen-cli is missing: it comes with the benchmark extra, pip install 'pando-iceberg[bench]'")
    return found


def generate(sf: float, out_dir: Path, tables: tuple[str, ...] = TPCH_TABLES) -> dict[str, Path]:
    """Write each table as Parquet under ``out_dir`` with tpchgen-cli; returns table → path."""
    if not (sf > 0):
        raise TpchError(f"scale factor must be > 0, got {sf!r}")
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [tpchgen_executable(), "parquet", "-s", _fmt_sf(sf), f"--output-dir={out_dir}", "--overwrite",
           f"--tables={','.join(tables)}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise TpchError(f"tpchgen-cli failed ({' '.join(cmd)}): {proc.stderr.strip()[-2000:]}")
    paths = {t: out_dir / f"{t}.parquet" for t in tables}
    missing = [t for t, p in paths.items() if not p.exists()]
    if missing:
        raise TpchError(f"tpchgen-cli did not write {missing} under {out_dir}")
    return paths


def _fmt_sf(sf: float) -> str:
    return str(int(sf)) if float(sf).is_integer() else repr(float(sf))


def quote_ident(name: str) -> str:
    """Backtick-quote a validated identifier (never paste raw user text into SQL)."""
    if not _IDENT_RE.match(name):
        raise TpchError(f"invalid identifier {name!r}: use letters, digits and '_' (not starting with a digit)")
    return f"`{name}`"


@dataclass
class LoadedTable:
    table: str
    rows: int
    files: int
    seconds: float


def load_tpch(spark, sf: float, namespace: str = "tpch", replace: bool = False,
              tables: tuple[str, ...] = TPCH_TABLES, work_dir: Path | None = None,
              progress=None, load_order: str = "generated", file_rows: int | None = None) -> list[LoadedTable]:
    """Generate TPC-H at ``sf`` and load it as Iceberg tables ``<namespace>.<table>``.

    Existing tables are kept unless ``replace``; a table that exists is reported with its
    current row count and not loaded again. ``load_order`` (``LOAD_ORDERS``): "date" writes
    lineitem and orders in arrival order (``ARRIVAL_ORDER``), in files of ``file_rows`` rows
    (default the bench's block size, 100,000 × ``sf``, at least 1,000).
    """
    import time

    if load_order not in LOAD_ORDERS:
        raise TpchError(f"load order {load_order!r} is not known; accepted: {', '.join(LOAD_ORDERS)}")
    file_rows = file_rows or max(1000, int(100_000 * sf))
    if file_rows < 1:
        raise TpchError(f"rows per data file must be >= 1, got {file_rows}")
    ns = quote_ident(namespace)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    existing = {r[1] if len(r) > 1 else r[0] for r in spark.sql(f"SHOW TABLES IN {ns}").collect()}
    todo = [t for t in tables if replace or t not in existing]
    results: list[LoadedTable] = []
    tmp_ctx = tempfile.TemporaryDirectory(prefix="pando-tpch-", dir=work_dir) if todo else None
    try:
        paths = generate(sf, Path(tmp_ctx.name), tuple(todo)) if tmp_ctx is not None else {}
        for table in tables:
            fq = f"{ns}.{quote_ident(table)}"
            t0 = time.time()
            if table in paths:
                if progress:
                    progress(f"loading {namespace}.{table}")
                df = spark.read.parquet(str(paths[table]))
                cols = ", ".join(f"{quote_ident(f.name)} {f.dataType.simpleString()} NOT NULL"
                                 for f in df.schema.fields)
                spark.sql(f"DROP TABLE IF EXISTS {fq}")
                spark.sql(f"CREATE TABLE {fq} ({cols}) USING iceberg "
                          "TBLPROPERTIES ('format-version'='2', 'write.parquet.compression-codec'='zstd')")
                pk = ", ".join(quote_ident(c) for c in PRIMARY_KEYS[table])
                spark.sql(f"ALTER TABLE {fq} SET IDENTIFIER FIELDS {pk}")
                if load_order == "date" and table in ARRIVAL_ORDER:
                    write_in_order(df, f"{namespace}.{table}", ARRIVAL_ORDER[table], file_rows)
                else:
                    df.writeTo(f"{namespace}.{table}").append()
            rows = spark.table(f"{namespace}.{table}").count()
            files = spark.sql(f"SELECT count(*) FROM {fq}.files").collect()[0][0]
            results.append(LoadedTable(table, rows, files, time.time() - t0))
    finally:
        if tmp_ctx is not None:
            tmp_ctx.cleanup()
    return results


def write_in_order(df, table: str, columns: Sequence[str], file_rows: int) -> None:
    """Append ``df`` to ``table`` sorted by ``columns``, cut into files of about ``file_rows``
    rows (Spark's range partitioning, one file per task, none split by size): the files' bounds
    on the first column barely overlap, as those of a loader appending in that order."""
    files = max(1, math.ceil(df.count() / file_rows))
    (df.repartitionByRange(files, *columns).sortWithinPartitions(*columns).writeTo(table)
     .option("distribution-mode", "none").option("target-file-size-bytes", str(1 << 40)).append())


def copy_table(spark, source: str, target: str) -> None:
    """Copy a table with the same columns, nullability and identifier fields (CTAS would drop
    NOT NULL and identifier fields) and the same data files' rows: file for file, in order."""
    src_parts, dst_parts = source.split("."), target.split(".")
    src = ".".join(quote_ident(p) for p in src_parts)
    dst = ".".join(quote_ident(p) for p in dst_parts)
    df = spark.table(source)
    cols = ", ".join(f"{quote_ident(f.name)} {f.dataType.simpleString()}{'' if f.nullable else ' NOT NULL'}"
                     for f in df.schema.fields)
    spark.sql(f"DROP TABLE IF EXISTS {dst}")
    spark.sql(f"CREATE TABLE {dst} ({cols}) USING iceberg TBLPROPERTIES ('format-version'='2')")
    from .spark.iceberg_jvm import load_table

    jt = load_table(spark, source)
    ids = [str(jt.schema().findColumnName(i)) for i in jt.schema().identifierFieldIds()]
    if ids:
        spark.sql(f"ALTER TABLE {dst} SET IDENTIFIER FIELDS {', '.join(quote_ident(c) for c in ids)}")
    # One read task per source file, never split nor combined (Iceberg's split-size and
    # file-open-cost read options), and no shuffle before the write: each file of the copy holds
    # one source file's rows in their order, so the copy keeps the order the table arrived in (a
    # plain INSERT ... SELECT packs small files into a few tasks and loses it).
    whole = str(1 << 60)
    spark.read.option("split-size", whole).option("file-open-cost", whole).table(src).writeTo(dst).append()


# TPC-H Q6 with the spec's validation parameters: the smoke query of `pando demo` and the tests.
Q6_SQL = """
SELECT sum(l_extendedprice * l_discount) AS revenue
FROM tpch.lineitem
WHERE l_shipdate >= date '1994-01-01'
  AND l_shipdate < date '1995-01-01'
  AND l_discount BETWEEN 0.05 AND 0.07
  AND l_quantity < 24
"""


def q6_pyiceberg(catalog, namespace: str = "tpch"):
    """Q6 through pyiceberg (Iceberg's own file pruning) and pyarrow compute; returns a Decimal."""
    import datetime
    from decimal import Decimal

    import pyarrow.compute as pc
    from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan, LessThanOrEqual, Reference
    from pyiceberg.expressions.literals import literal

    # By keyword: pyiceberg's pydantic fields are what mypy sees (the positional (name, value)
    # form works at runtime but is not in its types).
    shipdate, discount, quantity = Reference("l_shipdate"), Reference("l_discount"), Reference("l_quantity")
    tbl = catalog.load_table(f"{namespace}.lineitem")
    flt = And(GreaterThanOrEqual(term=shipdate, value=literal(datetime.date(1994, 1, 1))),
              LessThan(term=shipdate, value=literal(datetime.date(1995, 1, 1))),
              GreaterThanOrEqual(term=discount, value=literal(Decimal("0.05"))),
              LessThanOrEqual(term=discount, value=literal(Decimal("0.07"))),
              LessThan(term=quantity, value=literal(Decimal("24.00"))))
    arrow = tbl.scan(row_filter=flt, selected_fields=("l_extendedprice", "l_discount")).to_arrow()
    revenue = pc.sum(pc.multiply(arrow["l_extendedprice"], arrow["l_discount"])).as_py()
    return revenue
