"""TPC-DS for ``pando bench --dataset tpcds`` (issue 17 item 3): the paper's second benchmark.

- Data: DuckDB's TPC-DS extension (PyPI ``duckdb`` + ``duckdb-extension-tpcds``, same version;
  loaded from the package's own directory, no network) runs ``dsdgen`` at a scale factor; every
  table is exported to Parquet (in generation order) and loaded by Spark into Iceberg tables
  ``<namespace>.<table>``. The fact tables arrive as generated, in data files of about
  ``file_rows`` rows each (a feed's files), so the arrival layout is the generation order.
  Surrogate primary keys are declared as Iceberg identifier fields where the generated data
  has them NOT NULL and unique (the workload module's FK→PK joins, paper §7).
- Queries: the extension's 99 queries (``tpcds_queries()``, DuckDB's dialect, one parameter draw
  each) transpiled to Spark SQL with sqlglot and qualified with the namespace.
  :func:`check_queries` runs each in Spark and through the product's planner and reports
  which fail and why.

The loader is idempotent: a namespace whose 24 tables were loaded at the same scale factor
(recorded in a table property) with their recorded row counts is reused.
"""

from __future__ import annotations

import importlib.resources
import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

TPCDS_TABLES = (
    "call_center", "catalog_page", "catalog_returns", "catalog_sales", "customer", "customer_address",
    "customer_demographics", "date_dim", "household_demographics", "income_band", "inventory", "item",
    "promotion", "reason", "ship_mode", "store", "store_returns", "store_sales", "time_dim", "warehouse",
    "web_page", "web_returns", "web_sales", "web_site",
)
#: The fact tables (written in files of ``file_rows`` rows in generation order).
FACT_TABLES = ("store_sales", "store_returns", "catalog_sales", "catalog_returns", "web_sales", "web_returns",
               "inventory")
#: The fact tables ``pando bench`` lays out, and the date key each is sorted on by the sort baseline.
LAID_OUT_FACTS = ("store_sales", "catalog_sales", "web_sales", "inventory")
DATE_KEYS = {"store_sales": "ss_sold_date_sk", "catalog_sales": "cs_sold_date_sk", "web_sales": "ws_sold_date_sk",
             "inventory": "inv_date_sk"}

#: TPC-DS primary keys (spec §2); declared when the generated data has them NOT NULL and unique.
PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "call_center": ("cc_call_center_sk",), "catalog_page": ("cp_catalog_page_sk",),
    "catalog_returns": ("cr_item_sk", "cr_order_number"), "catalog_sales": ("cs_item_sk", "cs_order_number"),
    "customer": ("c_customer_sk",), "customer_address": ("ca_address_sk",),
    "customer_demographics": ("cd_demo_sk",), "date_dim": ("d_date_sk",),
    "household_demographics": ("hd_demo_sk",), "income_band": ("ib_income_band_sk",),
    "inventory": ("inv_date_sk", "inv_item_sk", "inv_warehouse_sk"), "item": ("i_item_sk",),
    "promotion": ("p_promo_sk",), "reason": ("r_reason_sk",), "ship_mode": ("sm_ship_mode_sk",),
    "store": ("s_store_sk",), "store_returns": ("sr_item_sk", "sr_ticket_number"),
    "store_sales": ("ss_item_sk", "ss_ticket_number"), "time_dim": ("t_time_sk",), "warehouse": ("w_warehouse_sk",),
    "web_page": ("wp_web_page_sk",), "web_returns": ("wr_item_sk", "wr_order_number"),
    "web_sales": ("ws_item_sk", "ws_order_number"), "web_site": ("web_site_sk",),
}

QUERY_NUMBERS = tuple(range(1, 100))
#: dsdgen below SF 0.01 does not finish (checked: SF 0.001 runs > 60 s without output); SF ≤ 0 gives empty tables.
MIN_SF = 0.01
SF_PROPERTY = "pando.bench.tpcds-sf"
ROWS_PROPERTY = "pando.bench.tpcds-rows"
_ARRIVAL = "__pando_arrival"


class TpcdsError(ValueError):
    """Bad TPC-DS input (the message names what is accepted)."""


def check_sf(sf: float) -> float:
    try:
        sf = float(sf)
    except (TypeError, ValueError):
        raise TpcdsError(f"TPC-DS scale factor must be a number >= {MIN_SF}, got {sf!r}") from None
    if not math.isfinite(sf) or sf < MIN_SF:
        raise TpcdsError(f"TPC-DS scale factor must be a finite number >= {MIN_SF} (dsdgen does not finish "
                         f"below it), got {sf!r}")
    return sf


def check_numbers(numbers) -> list[int]:
    """Query numbers, checked against 1..99."""
    out = sorted({int(n) for n in numbers})
    bad = [n for n in out if n not in QUERY_NUMBERS]
    if bad:
        raise TpcdsError(f"TPC-DS query number(s) {', '.join(map(str, bad))} not known; accepted: 1..99")
    return out


def extension_path() -> Path:
    """The TPC-DS extension of the installed ``duckdb`` (package ``duckdb-extension-tpcds``)."""
    import duckdb

    try:
        root = importlib.resources.files("duckdb_extension_tpcds")
    except ModuleNotFoundError:
        raise TpcdsError("duckdb-extension-tpcds is not installed (a dev extra of pando-iceberg: "
                         "pip install -e '.[dev]', same version as duckdb)") from None
    path = Path(str(root)) / "extensions" / f"v{duckdb.__version__}" / "tpcds.duckdb_extension"
    if not path.is_file():
        raise TpcdsError(f"no TPC-DS extension for duckdb {duckdb.__version__} at {path}: install "
                         f"duckdb-extension-tpcds=={duckdb.__version__}")
    return path


def connect(database: str = ":memory:", threads: int = 2):
    """A DuckDB connection with the TPC-DS extension loaded."""
    import duckdb

    con = duckdb.connect(database)
    con.execute(f"SET threads = {int(threads)}")
    con.execute(f"LOAD '{extension_path()}'")
    return con


def duckdb_queries() -> dict[int, str]:
    """The 99 TPC-DS queries in DuckDB's dialect, by number."""
    con = connect()
    try:
        return {int(n): q for n, q in con.execute("SELECT query_nr, query FROM tpcds_queries()").fetchall()}
    finally:
        con.close()


def to_spark(sql: str, namespace: str | None = None) -> str:
    """One DuckDB-dialect query as Spark SQL (tables qualified with ``namespace`` when given)."""
    import sqlglot

    from .workloads import qualify

    out = sqlglot.transpile(sql.strip().rstrip(";"), read="duckdb", write="spark")
    if len(out) != 1:
        raise TpcdsError(f"expected one statement, got {len(out)}")
    return qualify(out[0], namespace) if namespace else out[0]


def spark_queries(namespace: str | None = None, numbers=None) -> dict[int, str]:
    """The TPC-DS queries (all 99, or ``numbers``) as Spark SQL."""
    wanted = check_numbers(numbers) if numbers is not None else list(QUERY_NUMBERS)
    q = duckdb_queries()
    return {n: to_spark(q[n], namespace) for n in wanted}


# ---- data -----------------------------------------------------------------------------------

@dataclass
class Generated:
    paths: dict[str, Path]
    rows: dict[str, int]
    keys: dict[str, tuple[str, ...]]  # the primary keys that are NOT NULL and unique in the data


def generate(sf: float, out_dir: Path, progress: Callable[[str], None] = lambda m: None) -> Generated:
    """``dsdgen`` at ``sf`` into a DuckDB file under ``out_dir``, each table exported as Parquet in
    generation order (the facts with their generation position ``__pando_arrival``)."""
    sf = check_sf(sf)
    out_dir.mkdir(parents=True, exist_ok=True)
    con = connect(str(out_dir / "tpcds.duckdb"))
    try:
        t0 = time.perf_counter()
        con.execute(f"CALL dsdgen(sf={sf!r})")
        progress(f"dsdgen sf={sf:g}: {time.perf_counter() - t0:.1f}s")
        paths, rows, keys = {}, {}, {}
        for t in TPCDS_TABLES:
            path = out_dir / f"{t}.parquet"
            extra = f", rowid AS {_ARRIVAL}" if t in FACT_TABLES else ""
            con.execute(f"COPY (SELECT *{extra} FROM {t} ORDER BY rowid) TO '{path}' (FORMAT parquet)")
            pk = PRIMARY_KEYS[t]
            cols = ", ".join(pk)
            n, nulls, distinct = con.execute(
                f"SELECT count(*), count(*) FILTER (WHERE {' OR '.join(f'{c} IS NULL' for c in pk)}), "
                f"(SELECT count(*) FROM (SELECT DISTINCT {cols} FROM {t})) FROM {t}").fetchone()
            paths[t], rows[t] = path, int(n)
            if n and nulls == 0 and distinct == n:
                keys[t] = pk
        return Generated(paths, rows, keys)
    finally:
        con.close()


def _loaded(catalog, namespace: str, sf: float) -> bool:
    """Every table is in ``namespace``, loaded at ``sf``, with its recorded row count."""
    from pyiceberg.exceptions import NoSuchTableError

    for t in TPCDS_TABLES:
        try:
            table = catalog.load_table(f"{namespace}.{t}")
        except NoSuchTableError:
            return False
        props = table.properties
        snap = table.current_snapshot()
        if props.get(SF_PROPERTY) != repr(sf) or snap is None:
            return False
        if int(snap.summary.get("total-records", -1)) != int(props.get(ROWS_PROPERTY, -2)):
            return False
    return True


def _snapshot_counts(catalog, name: str) -> tuple[int, int]:
    """(data files, rows) of the table's current snapshot."""
    snap = catalog.load_table(name).current_snapshot()
    if snap is None:
        return 0, 0
    return int(snap.summary.get("total-data-files", 0)), int(snap.summary.get("total-records", 0))


def fact_file_rows(sf: float) -> int:
    """Rows per arrival data file of a fact table: the bench's default block size b."""
    return max(1000, int(100_000 * sf))


@dataclass
class Loaded:
    namespace: str
    rows: dict[str, int] = field(default_factory=dict)
    files: dict[str, int] = field(default_factory=dict)
    reused: bool = False
    seconds: float = 0.0


def load_tpcds(spark, catalog, sf: float, namespace: str | None = None, file_rows: int | None = None,
               work_dir: Path | None = None, progress: Callable[[str], None] = lambda m: None) -> Loaded:
    """Generate TPC-DS at ``sf`` and load its 24 tables into ``namespace`` (default
    ``tpcds_sf<SF>``) with Spark; reuse them when already loaded at ``sf``."""
    from ..tpch import quote_ident
    from .datasets import dataset_namespace

    sf = check_sf(sf)
    namespace = namespace or dataset_namespace("tpcds", sf)
    ns = quote_ident(namespace)
    t_all = time.perf_counter()
    if _loaded(catalog, namespace, sf):
        out = Loaded(namespace, reused=True)
        for t in TPCDS_TABLES:
            out.files[t], out.rows[t] = _snapshot_counts(catalog, f"{namespace}.{t}")
        out.seconds = time.perf_counter() - t_all
        return out
    file_rows = file_rows or fact_file_rows(sf)
    if file_rows < 1:
        raise TpcdsError(f"rows per fact data file must be >= 1, got {file_rows}")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    out = Loaded(namespace)
    with tempfile.TemporaryDirectory(prefix="pando-tpcds-", dir=work_dir) as tmp:
        progress(f"generating TPC-DS sf={sf:g} with DuckDB dsdgen")
        gen = generate(sf, Path(tmp), progress)
        for t in TPCDS_TABLES:
            progress(f"loading {namespace}.{t} ({gen.rows[t]:,} rows)")
            fq = f"{ns}.{quote_ident(t)}"
            df = spark.read.parquet(str(gen.paths[t]))
            keys = set(gen.keys.get(t, ()))
            fields = [f for f in df.schema.fields if f.name != _ARRIVAL]
            cols = ", ".join(f"{quote_ident(f.name)} {f.dataType.simpleString()}{' NOT NULL' if f.name in keys else ''}"
                             for f in fields)
            spark.sql(f"DROP TABLE IF EXISTS {fq}")
            # the scale and row count are recorded up front: a table whose append did not finish
            # has no snapshot with these rows, and a later run loads it again (:func:`_loaded`)
            spark.sql(f"CREATE TABLE {fq} ({cols}) USING iceberg TBLPROPERTIES ('format-version'='2', "
                      f"'write.parquet.compression-codec'='zstd', '{SF_PROPERTY}'='{sf!r}', "
                      f"'{ROWS_PROPERTY}'='{gen.rows[t]}')")
            if keys:
                spark.sql(f"ALTER TABLE {fq} SET IDENTIFIER FIELDS "
                          + ", ".join(quote_ident(c) for c in PRIMARY_KEYS[t]))
            if t in FACT_TABLES:
                # arrival: generation order, cut into files of ~file_rows rows (one task each)
                n_files = max(1, math.ceil(gen.rows[t] / file_rows))
                df = df.repartitionByRange(n_files, _ARRIVAL).sortWithinPartitions(_ARRIVAL).drop(_ARRIVAL)
            else:
                df = df.coalesce(1)
            (df.select(*[f.name for f in fields]).writeTo(f"{namespace}.{t}")
             .option("distribution-mode", "none").option("target-file-size-bytes", str(1 << 40)).append())
            out.files[t], out.rows[t] = _snapshot_counts(catalog, f"{namespace}.{t}")
            if out.rows[t] != gen.rows[t]:
                raise TpcdsError(f"{namespace}.{t} holds {out.rows[t]} rows after loading, dsdgen made {gen.rows[t]}")
    out.seconds = time.perf_counter() - t_all
    return out


# ---- which queries run ----------------------------------------------------------------------

@dataclass
class QueryCheck:
    ok: dict[int, str]  # number → Spark SQL (qualified)
    failed: dict[int, tuple[str, str]]  # number → (stage, error's first line)
    seconds: dict[int, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"ok": sorted(self.ok), "failed": {str(n): {"stage": s, "error": e} for n, (s, e) in
                                                  sorted(self.failed.items())},
                "seconds": {str(n): round(v, 3) for n, v in sorted(self.seconds.items())}}


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300] if text else ''}"


def check_queries(spark, catalog, namespace: str, numbers=None, execute: bool = True, plan: bool = True,
                  progress: Callable[[str], None] = lambda m: None) -> QueryCheck:
    """Transpile the queries and try each: ``transpile`` (sqlglot), ``spark`` (analysis, and
    execution when ``execute``), ``planner`` (the product's plan of the query without a layout,
    when ``plan``). A query is ok when every stage passes; failures are kept with the stage."""
    from ..spark.pruned import plan_query

    wanted = check_numbers(numbers) if numbers is not None else list(QUERY_NUMBERS)
    raw = duckdb_queries()
    out = QueryCheck({}, {})
    for n in wanted:
        try:
            sql = to_spark(raw[n], namespace)
        except Exception as e:
            out.failed[n] = ("transpile", _first_line(e))
            continue
        t0 = time.perf_counter()
        try:
            df = spark.sql(sql)
            if execute:
                df.collect()
            else:
                df.schema  # noqa: B018 - analysis only
        except Exception as e:
            out.failed[n] = ("spark", _first_line(e))
            continue
        out.seconds[n] = time.perf_counter() - t0
        if plan:
            try:
                plan_query(spark, catalog, sql, use_layout=False)
            except Exception as e:
                out.failed[n] = ("planner", _first_line(e))
                continue
        out.ok[n] = sql
        progress(f"TPC-DS q{n}: ok ({out.seconds[n]:.1f}s)")
    return out
