"""TPC-DS for ``pando bench --dataset tpcds``: the paper's second benchmark.

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

from ..exceptions import UsageError

TPCDS_TABLES = (
    "call_center", "catalog_page", "catalog_returns", "catalog_sales", "customer", "customer_address",
    "customer_demographics", "date_dim", "household_demographics", "income_band", "inventory", "item",
    "promotion", "reason", "ship_mode", "store", "store_returns", "store_sales", "time_dim", "warehouse",
    "web_page", "web_returns", "web_sales", "web_site",
)
#: The fact tables (written in files of ``file_rows`` rows in generation order).
FACT_TABLES = ("store_sales", "store_returns", "catalog_sales", "catalog_returns", "web_sales", "web_returns",
               "inventory")
#: The fact tables ``pando bench`` lays out, and the date key each is sorted on by the sort baseline
#: (``bench/harness.py``'s ``LAID_OUT`` and ``SORT_COLUMN`` take them from here).
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
LOAD_ORDER_PROPERTY = "pando.bench.load-order"
#: How the fact tables' rows are written (``load_tpcds``): "generated", in dsdgen's order; "date",
#: the facts of ``DATE_KEYS`` sorted by their date key, as a loader appending day by day writes them.
LOAD_ORDERS = ("generated", "date")
_ARRIVAL = "__pando_arrival"


class TpcdsError(UsageError, ValueError):
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


def _loaded(catalog, namespace: str, sf: float, load_order: str = "generated") -> bool:
    """Every table is in ``namespace``, loaded at ``sf`` in ``load_order``, with its recorded row count."""
    from pyiceberg.exceptions import NoSuchTableError

    for t in TPCDS_TABLES:
        try:
            table = catalog.load_table(f"{namespace}.{t}")
        except NoSuchTableError:
            return False
        props = table.properties
        snap = table.current_snapshot()
        if props.get(SF_PROPERTY) != repr(sf) or snap is None or props.get(LOAD_ORDER_PROPERTY,
                                                                          "generated") != load_order:
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
               work_dir: Path | None = None, progress: Callable[[str], None] = lambda m: None,
               load_order: str = "generated") -> Loaded:
    """Generate TPC-DS at ``sf`` and load its 24 tables into ``namespace`` (default
    ``tpcds_sf<SF>``) with Spark; reuse them when already loaded at ``sf`` in ``load_order``
    (``LOAD_ORDERS``). The fact tables are written in files of ``file_rows`` rows."""
    from ..tpch import quote_ident
    from .datasets import dataset_namespace

    sf = check_sf(sf)
    if load_order not in LOAD_ORDERS:
        raise TpcdsError(f"load order {load_order!r} is not known; accepted: {', '.join(LOAD_ORDERS)}")
    namespace = namespace or dataset_namespace("tpcds", sf)
    ns = quote_ident(namespace)
    t_all = time.perf_counter()
    if _loaded(catalog, namespace, sf, load_order):
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
                      f"'{ROWS_PROPERTY}'='{gen.rows[t]}', '{LOAD_ORDER_PROPERTY}'='{load_order}')")
            if keys:
                spark.sql(f"ALTER TABLE {fq} SET IDENTIFIER FIELDS "
                          + ", ".join(quote_ident(c) for c in PRIMARY_KEYS[t]))
            if t in FACT_TABLES:
                # arrival: generation order (by date first, in date load order), cut into files of
                # ~file_rows rows (one task each)
                order = ((DATE_KEYS[t],) if load_order == "date" and t in DATE_KEYS else ()) + (_ARRIVAL,)
                n_files = max(1, math.ceil(gen.rows[t] / file_rows))
                df = df.repartitionByRange(n_files, *order).sortWithinPartitions(*order).drop(_ARRIVAL)
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
    when ``plan``) and ``filter`` (Spark analyses each laid-out fact's planned filter, as the bench
    counts matching rows with it). A query is ok when every stage passes; failures are kept with
    the stage."""
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
                qp = plan_query(spark, catalog, sql, use_layout=False)
            except Exception as e:
                out.failed[n] = ("planner", _first_line(e))
                continue
            try:  # the bench counts each laid-out fact's matching rows with the planner's filter
                for name, p in qp.plans.items():
                    if name.split(".")[-1] in LAID_OUT_FACTS and not (p.filter.is_true_expr() and not p.filter.joins):
                        spark.sql(f"SELECT count(*) FROM {name} WHERE {p.filter.to_sql()}").schema  # noqa: B018
            except Exception as e:
                out.failed[n] = ("filter", _first_line(e))
                continue
        out.ok[n] = sql
        progress(f"TPC-DS q{n}: ok ({out.seconds[n]:.1f}s)")
    return out


# ---- held-out draws: the project's own parameter substitution --------------------------------
#
# Templates whose parameters are plain literals on dimension columns. Every ``col = literal``,
# ``col IN (literals)``, ``col BETWEEN a AND b`` (numbers, also ``a AND a + w``) and
# ``d_date BETWEEN CAST('…' AS DATE) AND CAST('…' AS DATE)`` on a column of :data:`DOMAIN_SQL`
# gets a new value drawn (seeded) from that column's values in the loaded data; spans keep their
# width; other literals (zip codes, flags, quantity ranges) stay as the template has them.

HELD_OUT_TEMPLATES = (3, 7, 12, 15, 19, 20, 26, 37, 42, 43, 52, 55, 82, 96, 98)

#: column → the query giving its domain in the data (``{ns}`` is the namespace). Years, dates and
#: month sequences are those of days with store sales (the facts' date range; years only whole ones:
#: the sales end on 2003-01-02).
_SALES_DAYS = "d_date_sk BETWEEN (SELECT min(ss_sold_date_sk) FROM {ns}.store_sales) " \
              "AND (SELECT max(ss_sold_date_sk) FROM {ns}.store_sales)"
DOMAIN_SQL = {
    "d_year": "SELECT d_year FROM {ns}.date_dim WHERE " + _SALES_DAYS + " GROUP BY d_year HAVING count(*) >= 360",
    "d_moy": "SELECT DISTINCT d_moy FROM {ns}.date_dim",
    "d_qoy": "SELECT DISTINCT d_qoy FROM {ns}.date_dim",
    "d_month_seq": "SELECT DISTINCT d_month_seq FROM {ns}.date_dim WHERE " + _SALES_DAYS,
    "d_date": "SELECT DISTINCT d_date FROM {ns}.date_dim WHERE " + _SALES_DAYS,
    "i_manufact_id": "SELECT DISTINCT i_manufact_id FROM {ns}.item",
    "i_manager_id": "SELECT DISTINCT i_manager_id FROM {ns}.item",
    "i_category": "SELECT DISTINCT i_category FROM {ns}.item",
    "i_current_price": "SELECT DISTINCT i_current_price FROM {ns}.item",
    "cd_gender": "SELECT DISTINCT cd_gender FROM {ns}.customer_demographics",
    "cd_marital_status": "SELECT DISTINCT cd_marital_status FROM {ns}.customer_demographics",
    "cd_education_status": "SELECT DISTINCT cd_education_status FROM {ns}.customer_demographics",
    "ca_state": "SELECT DISTINCT ca_state FROM {ns}.customer_address",
    "s_gmt_offset": "SELECT DISTINCT s_gmt_offset FROM {ns}.store",
    "s_store_name": "SELECT DISTINCT s_store_name FROM {ns}.store",
    "hd_dep_count": "SELECT DISTINCT hd_dep_count FROM {ns}.household_demographics",
    "t_hour": "SELECT DISTINCT t_hour FROM {ns}.time_dim",
}


def load_domains(spark, namespace: str) -> dict[str, list]:
    """Each substitutable column's non-null values in the loaded data, sorted."""
    out = {}
    for col, sql in DOMAIN_SQL.items():
        values = [r[0] for r in spark.sql(sql.format(ns=namespace)).collect() if r[0] is not None]
        out[col] = sorted(values)
    return out


def _literal(value):
    from decimal import Decimal

    from sqlglot import exp

    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, (Decimal, float)):
        return exp.Literal.number(format(Decimal(str(value)).normalize(), "f"))
    return exp.Literal.number(int(value))


def _number(node):
    """A literal number, or ``a + b`` of literal numbers (e.g. ``68 + 30``), as a float; else None."""
    from sqlglot import exp

    if isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Literal) and not node.is_string:
        return float(node.this)
    if isinstance(node, exp.Add):
        a, b = _number(node.this), _number(node.expression)
        return None if a is None or b is None else a + b
    return None


def _date(node):
    import datetime as dt

    from sqlglot import exp

    if isinstance(node, exp.Cast) and node.to.is_type("date") and isinstance(node.this, exp.Literal):
        try:
            return dt.date.fromisoformat(node.this.this)
        except ValueError:
            return None
    return None


def substitute(sql: str, domains: dict[str, list], rng) -> tuple[str, int]:
    """``sql`` (Spark SQL) with its parameters on :data:`DOMAIN_SQL` columns drawn anew from
    ``domains`` with ``rng`` (a ``random.Random``); returns the query and how many parameters
    were drawn."""
    import datetime as dt

    from sqlglot import exp, parse_one

    tree = parse_one(sql, read="spark")
    drawn = 0
    for node in list(tree.find_all(exp.EQ, exp.In, exp.Between)):
        col = node.this
        if not isinstance(col, exp.Column) or not domains.get(col.name):
            continue
        values = domains[col.name]
        if isinstance(node, exp.EQ) and (isinstance(node.expression, exp.Literal) or (
                isinstance(node.expression, exp.Neg) and isinstance(node.expression.this, exp.Literal))):
            node.set("expression", _literal(rng.choice(values)))
            drawn += 1
        elif isinstance(node, exp.In) and node.expressions and not node.args.get("query") \
                and all(isinstance(e, exp.Literal) for e in node.expressions):
            k = min(len(node.expressions), len(values))
            node.set("expressions", [_literal(v) for v in rng.sample(values, k)])
            drawn += 1
        elif isinstance(node, exp.Between):
            lo, hi = node.args["low"], node.args["high"]
            d0, d1 = _date(lo), _date(hi)
            if d0 is not None and d1 is not None and isinstance(values[0], dt.date):
                span = (d1 - d0).days
                starts = [d for d in values if d + dt.timedelta(days=span) <= values[-1]] or values[:1]
                start = rng.choice(starts)
                lo.this.set("this", start.isoformat())
                hi.this.set("this", (start + dt.timedelta(days=span)).isoformat())
                drawn += 1
                continue
            a, b = _number(lo), _number(hi)
            if a is None or b is None:
                continue
            width = b - a
            nums = [float(v) for v in values]
            top = max(nums[0], nums[-1] - width)
            start = rng.randint(math.floor(nums[0]), max(math.floor(nums[0]), math.floor(top)))
            node.set("low", exp.Literal.number(start))
            node.set("high", exp.Add(this=exp.Literal.number(start), expression=exp.Literal.number(
                int(width) if float(width).is_integer() else width)))
            drawn += 1
    return tree.sql(dialect="spark"), drawn


def check_held_out(templates) -> list[int]:
    """Template numbers, checked against the ones with held-out parameter draws."""
    wanted = check_numbers(templates)
    bad = [n for n in wanted if n not in HELD_OUT_TEMPLATES]
    if bad:
        raise TpcdsError(f"TPC-DS template(s) {', '.join(map(str, bad))} have no held-out parameter draws: these "
                         "templates have no parameter substitution; accepted: "
                         f"{', '.join(map(str, HELD_OUT_TEMPLATES))} (or --in-sample for 1..99)")
    return wanted


def held_out_split(domains: dict[str, list], per_template: int, seed: int, templates=None):
    """``per_template`` draws of each held-out template (:data:`HELD_OUT_TEMPLATES`, or
    ``templates``), split half/half per template like ``tpch_split`` (unqualified Spark SQL)."""
    import random

    from .workloads import split_workload

    wanted = check_held_out(templates) if templates else list(HELD_OUT_TEMPLATES)
    base = spark_queries(numbers=wanted)
    queries = []
    for n in wanted:
        rng = random.Random(f"tpcds-{seed}-{n}")
        for _ in range(per_template):
            sql, drawn = substitute(base[n], domains, rng)
            if not drawn:
                raise TpcdsError(f"TPC-DS template {n}: no parameter could be drawn")
            queries.append((n, sql))
    return split_workload(queries, seed)


def bench_split(spark, catalog, opts, namespace: str, progress: Callable[[str], None] = lambda m: None):
    """The bench's train and test queries for TPC-DS (unqualified Spark SQL) and what to add to the
    report. In-sample (``opts.in_sample``): the extension's 99 queries (or ``opts.templates``) that
    Spark analyses and the product plans, train = test; failures listed with their stage.
    Held-out: :func:`held_out_split` over the data's domains."""
    if opts.in_sample:
        progress("TPC-DS in-sample: checking the queries (Spark analysis, the product's planner)")
        chk = check_queries(spark, catalog, namespace, opts.templates, execute=False, progress=progress)
        raw = duckdb_queries()
        queries = [(n, to_spark(raw[n])) for n in sorted(chk.ok)]
        return queries, queries, {"workload": "in-sample: train = test (TPC-DS's own parameter draw of each query; "
                                              "not held out)", "tpcds_queries": chk.as_dict()}
    domains = load_domains(spark, namespace)
    train, test = held_out_split(domains, opts.per_template, opts.seed, opts.templates)
    return train, test, {"workload": f"held-out: {opts.per_template} draws per template (parameters drawn from the "
                                     "data's domains), half train, half test",
                         "tpcds_templates": sorted({t for t, _ in test})}
