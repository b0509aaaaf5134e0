"""``pando soak``: a month of a living lakehouse, compressed.

A star schema (the bench's star dataset, :func:`~pando_iceberg.bench.datasets.load_star`) and a
copy of its fact partitioned by year (``truncate(10000, date_key)``), both laid out with Pando;
then N simulated days, each a random mix (fixed by the seed) of

* data: fact appends (some late, into old partitions), DELETE / UPDATE / MERGE in copy-on-write
  and merge-on-read, dimension updates and appends (keys changing attributes, keys becoming
  duplicated), schema evolution (add, rename, widen, drop a column a cut uses; a dropped name
  added again) and partition-spec evolution;
* maintenance, while template queries run concurrently (pyiceberg, each pruned plan compared
  with the unpruned one of the same snapshot): the runbooks ``procedures/nightly_incremental.sql``,
  ``nightly_partitions.sql`` and ``nightly_maintenance.sql``, a Pando re-layout from a workload
  file, Iceberg's ``rewrite_data_files``, ``expire_snapshots`` and ``remove_orphan_files``,
  ``pando cleanup``, and on some days a Pando rewrite in another process SIGKILLed at a random
  stage (the rewrite's test hook ``PANDO_TEST_PAUSE_<STAGE>``, as tests/spark/test_reliability.py).

After every day the tables are checked against a model (an Arrow copy of every fact row written,
minus those deleted, with every update and schema change applied):

* every query's pruned result equals its unpruned result on the same snapshot: pyiceberg
  (``plan_scan`` + ``read_arrow``, the fact's rows) and Spark (``run_sql`` vs plain Spark SQL);
* the table's content equals the model's (rows matched by ``sale_id``: none missing, none extra,
  none changed; Spark's count and sum agree); a killed rewrite left the table unchanged;
* every file of the current snapshot and every live file of a layout exists;
* after ``pando cleanup`` and ``remove_orphan_files`` neither finds anything left;
* ``layout_health`` counts the same files and rows outside the layout as the soak does.

The model lives in the driver's memory: the soak is a test of the product, sized to fit.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["PROFILES", "Soak", "SoakProfile", "SoakReport", "rewrite_worker_main", "run_soak"]

FACTS = ("sales", "sales_p")  # the star fact laid out whole, and its copy partitioned by year
PARTITION_FIELDS = {"year": "truncate(10000, date_key)", "month": "truncate(100, date_key)",
                    "store": "bucket(2, store_key)"}
KILL_STAGES = ("SAMPLING", "OPTIMIZING", "WRITING", "BEFORE_COMMIT")
DATA_OPS = ("append", "late_append", "delete_cow", "delete_mor", "update_cow", "update_mor", "merge_cow", "merge_mor",
            "dim_update", "dim_append", "dim_duplicate_key", "add_column", "rename_column", "widen_column",
            "drop_column", "spec_evolution")
MAINTENANCE_OPS = ("runbook_incremental", "runbook_partitions", "runbook_maintenance", "pando_relayout",
                   "iceberg_rewrite", "expire_snapshots", "remove_orphan_files", "pando_cleanup")
INJECTIONS = ("delete-behind-model", "lose-a-layout-file")
RUNBOOKS = Path(__file__).resolve().parents[1] / "procedures"


@dataclass(frozen=True)
class SoakProfile:
    """Sizes of a soak: rows, operations per day, queries checked, learning options."""

    name: str
    fact_rows: int
    day_rows: int
    data_ops: tuple[int, int]  # data operations per day (min, max)
    maintenance_ops: tuple[int, int]
    queries: int  # queries checked per table after each day (pyiceberg and Spark)
    concurrent_queries: int  # queries run (pyiceberg, pruned vs unpruned) during the maintenance
    kill_probability: float  # chance a day has a killed rewrite
    k: int = 2
    min_block_rows: int = 1500
    kill_days: tuple[int, ...] = ()  # days that always have a killed rewrite


PROFILES = {
    "ci": SoakProfile("ci", 12_000, 800, (3, 4), (2, 3), 4, 3, 0.0, k=2, min_block_rows=1000, kill_days=(2,)),
    "small": SoakProfile("small", 30_000, 1_500, (3, 6), (2, 4), 8, 6, 0.25, k=2, min_block_rows=2000),
    "default": SoakProfile("default", 120_000, 5_000, (4, 8), (3, 5), 10, 8, 0.2, k=3, min_block_rows=6000),
}


@dataclass
class SoakReport:
    seed: int
    profile: str
    days: int = 0
    ops: Counter = field(default_factory=Counter)
    queries_checked: int = 0
    wrong_results: int = 0
    rows_lost: int = 0
    rows_extra_or_changed: int = 0
    leftover_files: int = 0
    missing_files: int = 0
    health_mismatches: int = 0
    failures: list[str] = field(default_factory=list)  # every discrepancy and failed operation, by day
    known_failures: list[str] = field(default_factory=list)  # failures of a known, reported product bug
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures and not self.known_failures

    def fail(self, day: int, what: str, known: str | None = None) -> None:
        if known:
            self.known_failures.append(f"day {day}: {what} [KNOWN: {known}]")
        else:
            self.failures.append(f"day {day}: {what}")

    def rows(self) -> list[tuple[str, Any]]:
        out = [("seed", self.seed), ("profile", self.profile), ("days", self.days),
               ("operations", sum(self.ops.values()))]
        out += [(f"  {k}", v) for k, v in sorted(self.ops.items())]
        out += [("queries checked", self.queries_checked), ("wrong results", self.wrong_results),
                ("rows lost", self.rows_lost), ("rows extra or changed", self.rows_extra_or_changed),
                ("leftover files", self.leftover_files), ("missing files", self.missing_files),
                ("health mismatches", self.health_mismatches), ("failures", len(self.failures)),
                ("known failures", len(self.known_failures)), ("wall time s", round(self.seconds, 1)),
                ("result", "ok" if self.ok else "DISCREPANCIES" if self.failures else "KNOWN FAILURES ONLY")]
        return out


@dataclass(frozen=True)
class Query:
    """A template query on a fact: Spark SQL with joins, and the fact filter pyiceberg plans."""

    template: str
    sql: str
    filter: str


@dataclass
class FactState:
    """A fact table's model: its rows, the physical names of its logical columns, its spec."""

    rows: pa.Table
    names: dict[str, str | None]  # logical column → current name (None: absent)
    widened: bool = False
    spec: tuple[str, ...] = ("year",)


# Failures of known product bugs, reported in the summary as such (never skipped): bug → (symptoms
# in the failure's text, what the bug is). None is known today: "snapshot-schema" (a rewrite read
# its base snapshot with that snapshot's schema, so it failed right after a schema change) was
# fixed by spark/iceberg_jvm.read_snapshot; its failures are discrepancies again.
KNOWN_BUGS: dict[str, tuple[tuple[str, ...], str]] = {}


class Soak:
    def __init__(self, spark, catalog, cfg, *, seed: int, profile: SoakProfile, namespace: str = "soak",
                 progress: Callable[[str], None] = lambda m: None, inject: dict[int, str] | None = None,
                 work_dir: str | None = None):
        from .procedures import ProcedureContext

        self.spark, self.catalog, self.cfg = spark, catalog, cfg
        self.seed, self.profile, self.ns, self.progress = seed, profile, namespace, progress
        self.inject = inject or {}
        bad = sorted(set(self.inject.values()) - set(INJECTIONS))
        if bad:
            raise ValueError(f"unknown injection(s) {bad}; accepted: {', '.join(INJECTIONS)}")
        self.rng = random.Random(f"soak-{seed}")
        self.ctx = ProcedureContext(cfg, catalog, lambda: spark)
        self.report = SoakReport(seed, profile.name)
        self.facts: dict[str, FactState] = {}
        self.next_id = 0
        self.next_product = 0
        self.work = Path(work_dir or tempfile.mkdtemp(prefix="pando-soak-"))
        self.day = 0

    # ---- names -------------------------------------------------------------------------------

    def t(self, name: str) -> str:
        return f"{self.ns}.{name}"

    @property
    def catalog_name(self) -> str:
        return self.cfg.catalog.name

    def sql(self, statement: str):
        return self.spark.sql(statement)

    # ---- set-up ------------------------------------------------------------------------------

    def setup(self) -> None:
        from .bench.datasets import STAR_ROWS_PER_SF, generate_star, load_star, star_rows

        self.progress(f"soak: star schema, {self.profile.fact_rows:,} fact rows, into {self.ns}")
        for name in FACTS + ("staging",):
            self.sql(f"DROP TABLE IF EXISTS {self.t(name)}")
        sf = self.profile.fact_rows / STAR_ROWS_PER_SF
        load_star(self.spark, self.catalog, sf, seed=self.seed, namespace=self.ns,
                  batch_rows=max(1000, self.profile.fact_rows // 4))
        star = generate_star(star_rows(sf), self.seed)
        self.dates = star["dates"].column("date_key").to_numpy()
        self.next_product = star["products"].num_rows + 1
        sales = star["sales"]
        self.next_id = sales.num_rows
        fact = self.t("sales_p")
        self.sql(f"CREATE TABLE {fact} USING iceberg PARTITIONED BY ({PARTITION_FIELDS['year']}) "
                 f"TBLPROPERTIES ('format-version'='2') AS SELECT * FROM {self.t('sales')}")
        for name in FACTS:
            self.facts[name] = FactState(sales, {"quantity": "quantity", "amount": "amount", "discount": None})
        for name in FACTS:
            self.relayout(name)

    # ---- queries -----------------------------------------------------------------------------

    def queries(self, fact: str, n: int, rng: random.Random) -> list[Query]:
        from .bench.datasets import (
            STAR_AGE_BANDS,
            STAR_BRANDS_PER_CATEGORY,
            STAR_CATEGORIES,
            STAR_CITIES_PER_REGION,
            STAR_REGIONS,
            STAR_SEGMENTS,
            star_brand,
            star_city,
        )

        st = self.facts[fact]
        q, a, d = st.names["quantity"], st.names["amount"], st.names["discount"]
        dims = {"p": ("products", "product_key"), "d": ("dates", "date_key"), "c": ("customers", "customer_key"),
                "s": ("stores", "store_key")}
        out = []
        for _ in range(n):
            cat = rng.randrange(len(STAR_CATEGORIES))
            brand = star_brand(cat, rng.randrange(STAR_BRANDS_PER_CATEGORY))
            region = rng.randrange(len(STAR_REGIONS))
            lo = int(rng.choice(self.dates))
            hi = int(self.dates[min(len(self.dates) - 1, int(np.searchsorted(self.dates, lo)) + rng.randrange(5, 60))])
            choices = [
                ("brand", "p", f"p_brand = '{brand}'", None),
                ("month", "d", f"d_year = {rng.randint(2022, 2024)} AND d_month = {rng.randint(1, 12)}", None),
                ("segment", "c", f"c_region_key = {region + 1} AND c_segment = '{rng.choice(STAR_SEGMENTS)}'", None),
                ("age", "c", f"c_age_band = '{rng.choice(STAR_AGE_BANDS)}'", f"{q} >= {rng.randint(2, 5)}"),
                ("category_price", "p", f"p_category = '{STAR_CATEGORIES[cat]}' AND p_price > {rng.choice([40, 80])}",
                 None),
                ("city", "s", f"s_city = '{star_city(region, rng.randrange(STAR_CITIES_PER_REGION))}'", None),
                ("quantity", None, None, f"{q} >= {rng.randint(2, 5)}"),
                ("amount", None, None, f"{a} BETWEEN {rng.randint(0, 100)} AND {rng.randint(100, 400)}"),
                ("days", None, None, f"date_key BETWEEN {lo} AND {hi}"),
                ("brand_quantity", "p", f"p_brand = '{brand}'", f"{q} <= {rng.randint(1, 3)}"),
            ]
            if d is not None:
                choices.append(("discount", None, None, f"{d} > {rng.choice([0.05, 0.1, 0.2])}"))
            template, dim, dim_pred, fact_pred = rng.choice(choices)
            select = (f"SELECT count(*) AS n, sum(f.{q}) AS units, sum(CAST(round(f.{a} * 100) AS BIGINT)) AS cents "
                      f"FROM {self.t(fact)} f")
            where, flt = [], []
            if dim is not None:
                assert dim_pred is not None  # every choice with a dimension has its predicate
                table, key = dims[dim]
                select += f" JOIN {self.t(table)} x ON f.{key} = x.{key}"
                where.append(" AND ".join(f"x.{p.strip()}" for p in dim_pred.split(" AND ")))
                flt.append(f"{key} IN (SELECT {key} FROM {self.t(table)} WHERE {dim_pred})")
            if fact_pred is not None:
                where.append(f"f.{fact_pred}")
                flt.append(fact_pred)
            out.append(Query(template, f"{select} WHERE {' AND '.join(where)}", " AND ".join(flt)))
        return out

    def workload_file(self, fact: str) -> str:
        rng = random.Random(f"soak-{self.seed}-workload-{fact}-{self.day}")
        path = self.work / f"workload-{fact}-day{self.day}.sql"
        path.write_text(";\n".join(q.sql for q in self.queries(fact, 12, rng)) + ";\n")
        return str(path)

    # ---- data --------------------------------------------------------------------------------

    def new_rows(self, fact: str, n: int, late: bool) -> pa.Table:
        """``n`` new fact rows in the table's current columns: recent dates, or (late) the first year."""
        from .bench.datasets import generate_star

        rows = generate_star(n, seed=self.rng.randrange(2**31))["sales"]
        nrng = np.random.default_rng(self.rng.randrange(2**31))
        span = self.dates[:365] if late else self.dates[-45:]
        rows = rows.set_column(rows.schema.get_field_index("sale_id"), "sale_id",
                               pa.array(np.arange(self.next_id, self.next_id + n, dtype=np.int64)))
        rows = rows.set_column(rows.schema.get_field_index("date_key"), "date_key",
                               pa.array(nrng.choice(span, n).astype(np.int32)))
        self.next_id += n
        st = self.facts[fact]
        if st.names["discount"] is not None:
            disc = np.round(nrng.random(n) * 0.3, 3)
            rows = rows.append_column("discount", pa.array(disc, mask=nrng.random(n) < 0.1))
        return self.physical(fact, rows)

    def physical(self, fact: str, rows: pa.Table) -> pa.Table:
        """Logical-named rows in the fact's current column names and types."""
        st = self.facts[fact]
        names = [st.names.get(c, c) or c for c in rows.column_names]
        rows = rows.rename_columns(names)
        want = self.facts[fact].rows.schema
        return pa.table([rows.column(f.name).cast(f.type) for f in want], schema=want)

    def stage(self, rows: pa.Table) -> str:
        """``rows`` as the table ``<ns>.staging`` (written by pyiceberg), for Spark to read."""
        from .spark.session import refresh_table

        name = self.t("staging")
        from pyiceberg.exceptions import NoSuchTableError

        try:
            self.catalog.drop_table(name)
        except NoSuchTableError:
            pass
        schema = pa.schema([f.with_nullable(True) for f in rows.schema])
        self.catalog.create_table(name, schema=schema, properties={"format-version": "2"}).append(rows.cast(schema))
        refresh_table(self.spark, name)
        return name

    def columns_sql(self, fact: str) -> str:
        return ", ".join(f"`{c}`" for c in self.facts[fact].rows.column_names)

    def append(self, fact: str, late: bool) -> None:
        n = max(1, int(self.profile.day_rows * self.rng.uniform(0.5, 1.5)) // (4 if late else 1))
        rows = self.new_rows(fact, n, late)
        staging = self.stage(rows)
        self.sql(f"INSERT INTO {self.t(fact)} ({self.columns_sql(fact)}) "
                 f"SELECT {self.columns_sql(fact)} FROM {staging}")
        st = self.facts[fact]
        st.rows = pa.concat_tables([st.rows, rows])

    def set_mode(self, fact: str, kind: str, mode: str) -> None:
        self.sql(f"ALTER TABLE {self.t(fact)} SET TBLPROPERTIES ('write.{kind}.mode' = '{mode}')")

    def delete(self, fact: str, mode: str) -> None:
        st = self.facts[fact]
        q = st.names["quantity"]
        m, r, v = self.rng.choice([13, 17, 29]), self.rng.randrange(13), self.rng.randint(3, 5)
        self.set_mode(fact, "delete", mode)
        self.sql(f"DELETE FROM {self.t(fact)} WHERE store_key % {m} = {r} AND {q} >= {v}")
        store = st.rows.column("store_key").to_numpy()
        qty = st.rows.column(q).to_numpy()
        st.rows = st.rows.filter(pa.array(~((store % m == r) & (qty >= v))))

    def update(self, fact: str, mode: str) -> None:
        st = self.facts[fact]
        q = st.names["quantity"]
        m, r = self.rng.choice([7, 11, 19]), self.rng.randrange(7)
        self.set_mode(fact, "update", mode)
        self.sql(f"UPDATE {self.t(fact)} SET {q} = {q} + 1 WHERE customer_key % {m} = {r}")
        hit = st.rows.column("customer_key").to_numpy() % m == r
        qty = st.rows.column(q)
        new = pc.if_else(pa.array(hit), pc.add(qty, pa.scalar(1, qty.type)), qty)
        st.rows = st.rows.set_column(st.rows.schema.get_field_index(q), q, new)

    def merge(self, fact: str, mode: str) -> None:
        """MERGE a source of changed amounts for existing rows and a few new rows."""
        st = self.facts[fact]
        a = st.names["amount"]
        nrng = np.random.default_rng(self.rng.randrange(2**31))
        pick = np.sort(nrng.choice(st.rows.num_rows, min(st.rows.num_rows, max(1, self.profile.day_rows // 4)),
                                   replace=False))
        changed = st.rows.take(pa.array(pick))
        changed = changed.set_column(changed.schema.get_field_index(a), a,
                                     pa.array(np.round(nrng.uniform(1, 500, len(pick)), 2)))
        fresh = self.new_rows(fact, max(1, self.profile.day_rows // 10), late=False)
        source = pa.concat_tables([changed, fresh])
        staging = self.stage(source)
        self.set_mode(fact, "merge", mode)
        self.sql(f"MERGE INTO {self.t(fact)} t USING {staging} s ON t.sale_id = s.sale_id "
                 f"WHEN MATCHED THEN UPDATE SET t.`{a}` = s.`{a}` WHEN NOT MATCHED THEN INSERT *")
        ids = st.rows.column("sale_id")
        hit = pc.is_in(ids, value_set=changed.column("sale_id"))
        kept = st.rows.filter(pc.invert(hit))
        st.rows = pa.concat_tables([kept, changed, fresh])

    def dim_update(self) -> None:
        """Keys changing attributes: some products change brand and price, customers segment."""
        from .bench.datasets import STAR_BRANDS_PER_CATEGORY, STAR_SEGMENTS, star_brand

        keys = ", ".join(str(self.rng.randint(1, 1000)) for _ in range(self.rng.randint(3, 20)))
        brand = star_brand(self.rng.randrange(8), self.rng.randrange(STAR_BRANDS_PER_CATEGORY))
        if self.rng.random() < 0.5:
            self.sql(f"UPDATE {self.t('products')} SET p_brand = '{brand}', p_price = p_price * 2 "
                     f"WHERE product_key IN ({keys})")
        else:
            self.sql(f"UPDATE {self.t('customers')} SET c_segment = '{self.rng.choice(STAR_SEGMENTS)}' "
                     f"WHERE customer_key IN ({keys})")

    def dim_append(self) -> None:
        from .bench.datasets import STAR_BRANDS_PER_CATEGORY, STAR_CATEGORIES, star_brand

        n = self.rng.randint(1, 5)
        values = []
        for i in range(n):
            c = self.rng.randrange(len(STAR_CATEGORIES))
            values.append(f"({self.next_product + i}, '{star_brand(c, self.rng.randrange(STAR_BRANDS_PER_CATEGORY))}', "
                          f"'{STAR_CATEGORIES[c]}', {self.rng.randint(5, 300)}.5D)")
        self.next_product += n
        self.sql(f"INSERT INTO {self.t('products')} VALUES {', '.join(values)}")

    def dim_duplicate_key(self) -> None:
        """A product key that exists gets a second row with other attributes (the key is no
        longer unique: a join to it doubles rows, and a key set on it is no key set)."""
        from .bench.datasets import STAR_CATEGORIES

        key = self.rng.randint(1, 1000)
        cat = self.rng.randrange(len(STAR_CATEGORIES))
        self.sql(f"INSERT INTO {self.t('products')} VALUES ({key}, 'Brand#dup{key}', '{STAR_CATEGORIES[cat]}', 99.0D)")

    # ---- schema and spec ---------------------------------------------------------------------

    def add_column(self, fact: str) -> bool:
        st = self.facts[fact]
        if st.names["discount"] is not None:
            return False
        self.sql(f"ALTER TABLE {self.t(fact)} ADD COLUMN discount DOUBLE")
        st.names["discount"] = "discount"
        st.rows = st.rows.append_column("discount", pa.nulls(st.rows.num_rows, pa.float64()))
        return True

    def drop_column(self, fact: str) -> bool:
        """Drop ``discount``: a layout learned on discount queries has a cut on it."""
        st = self.facts[fact]
        d = st.names["discount"]
        if d is None:
            return False
        self.sql(f"ALTER TABLE {self.t(fact)} DROP COLUMN `{d}`")
        st.names["discount"] = None
        st.rows = st.rows.drop_columns([d])
        return True

    def rename_column(self, fact: str) -> bool:
        st = self.facts[fact]
        logical = self.rng.choice(["quantity", "amount"])
        old = st.names[logical]
        assert old is not None  # only discount is ever dropped
        new = {"quantity": "qty", "qty": "quantity", "amount": "amount_usd", "amount_usd": "amount"}[old]
        self.sql(f"ALTER TABLE {self.t(fact)} RENAME COLUMN `{old}` TO `{new}`")
        st.names[logical] = new
        st.rows = st.rows.rename_columns([new if c == old else c for c in st.rows.column_names])
        return True

    def widen_column(self, fact: str) -> bool:
        st = self.facts[fact]
        if st.widened:
            return False
        q = st.names["quantity"]
        self.sql(f"ALTER TABLE {self.t(fact)} ALTER COLUMN `{q}` TYPE BIGINT")
        st.widened = True
        i = st.rows.schema.get_field_index(q)
        st.rows = st.rows.set_column(i, q, st.rows.column(q).cast(pa.int64()))
        return True

    def spec_evolution(self) -> bool:
        st = self.facts["sales_p"]
        t = self.t("sales_p")
        if "store" in st.spec:
            self.sql(f"ALTER TABLE {t} DROP PARTITION FIELD {PARTITION_FIELDS['store']}")
            st.spec = tuple(s for s in st.spec if s != "store")
        elif self.rng.random() < 0.5:
            self.sql(f"ALTER TABLE {t} ADD PARTITION FIELD {PARTITION_FIELDS['store']}")
            st.spec = st.spec + ("store",)
        else:
            old, new = ("year", "month") if "year" in st.spec else ("month", "year")
            self.sql(f"ALTER TABLE {t} REPLACE PARTITION FIELD {PARTITION_FIELDS[old]} WITH {PARTITION_FIELDS[new]}")
            st.spec = tuple(new if s == old else s for s in st.spec)
        return True

    # ---- maintenance -------------------------------------------------------------------------

    def call(self, statement: str):
        from .procedures import call

        return call(self.ctx, statement)

    def runbook(self, file: str, variables: dict[str, str]):
        from .runner import run_script

        text = (RUNBOOKS / file).read_text()
        return run_script(self.ctx, text, {"catalog": self.catalog_name, **variables}, where=file)

    def relayout(self, fact: str):
        """A Pando re-layout from a fresh workload file. A partitioned fact whose live files are all
        of older specs is refused with advice (Iceberg's rewrite into the current spec), which
        the soak follows, as an operator would."""
        from .spark.rewrite import PandoRewriteError

        try:
            return self._relayout(fact)
        except PandoRewriteError as e:
            if "has no live data file under its current partition spec" not in str(e):
                raise
        self.report.ops["iceberg_rewrite_to_current_spec"] += 1
        self.sql(f"CALL {self.catalog_name}.system.rewrite_data_files(table => '{self.t(fact)}', "
                 "options => map('rewrite-all', 'true'))")
        return self._relayout(fact)

    def _relayout(self, fact: str):
        p = self.profile
        return self.call(f"CALL pando.system.rewrite_data_files(table => '{self.t(fact)}', strategy => 'pando', "
                         f"workload => '{self.workload_file(fact)}', options => map('k', '{p.k}', 'min-block-rows', "
                         f"'{p.min_block_rows}', 'sample-rate', '1.0', 'seed', '{self.seed}'))")

    def maintenance(self, op: str, fact: str) -> None:
        p, t = self.profile, self.t(fact)
        if op == "runbook_incremental":
            self.runbook("nightly_incremental.sql", {"table": self.t("sales"), "min_block_rows": str(p.min_block_rows),
                                                     "max_rows_outside": "0.3", "retain_last": "4"})
        elif op == "runbook_partitions":
            self.runbook("nightly_partitions.sql", {"table": self.t("sales_p"), "min_block_rows": str(p.min_block_rows),
                                                    "max_rows_outside": "0.3", "retain_last": "4"})
        elif op == "runbook_maintenance":
            self.runbook("nightly_maintenance.sql", {"table": self.t("sales"), "max_rows_outside": "0.2",
                                                     "k": str(p.k), "min_block_rows": str(p.min_block_rows),
                                                     "retain_last": "4"})
        elif op == "pando_relayout":
            self.relayout(fact)
        elif op == "iceberg_rewrite":
            self.sql(f"CALL {self.catalog_name}.system.rewrite_data_files(table => '{t}', "
                     "options => map('min-input-files', '2', 'rewrite-all', 'false'))")
        elif op == "expire_snapshots":
            self.sql(f"CALL {self.catalog_name}.system.expire_snapshots(table => '{t}', older_than => "
                     f"TIMESTAMP '{_now_literal()}', retain_last => {self.rng.randint(1, 3)})")
        elif op == "remove_orphan_files":
            self.remove_orphans(fact, dry_run=False)
        elif op == "pando_cleanup":
            from .cleanup import cleanup_table

            report = cleanup_table(self.catalog, t, apply=True, older_than_minutes=0)
            failed = [x for x in report.leftovers if x.action.startswith("failed")]
            if failed:
                self.report.fail(self.day, f"pando cleanup {t}: {len(failed)} file(s) not deleted: {failed[0].action}")
        else:
            raise ValueError(f"unknown maintenance operation {op!r}")

    def remove_orphans(self, fact: str, dry_run: bool) -> list[str]:
        """Iceberg's orphan-file removal with an interval of zero (the procedure refuses less than
        24 hours, so the action is called, as the procedure's message advises). ``dry_run``:
        the orphans are listed by the soak itself, from the table's metadata tables."""
        t = self.t(fact)
        if dry_run:
            return orphan_files(self.spark, self.catalog.load_table(t), t)
        from .spark.iceberg_jvm import load_table

        jvm = self.spark._jvm
        action = jvm.org.apache.iceberg.spark.actions.SparkActions.get(self.spark._jsparkSession)
        result = action.deleteOrphanFiles(load_table(self.spark, t)).olderThan(int(time.time() * 1000)).execute()
        return [str(x) for x in result.orphanFileLocations()]

    def killed_rewrite(self, fact: str) -> None:
        """A Pando rewrite in another process, SIGKILLed with its process tree at a random stage;
        the table must be exactly as before (snapshot, properties, content)."""
        stage = self.rng.choice(KILL_STAGES)
        self.report.ops[f"killed_rewrite_{stage.lower()}"] += 1
        before = self.catalog.load_table(self.t(fact))
        pause = self.work / f"kill-{self.day}-{stage}"
        options = {"k": self.profile.k, "sample_rate": 1.0, "min_block_rows": self.profile.min_block_rows,
                   "seed": self.seed}
        cmd = [sys.executable, "-c", "from pando_iceberg.soak import rewrite_worker_main; rewrite_worker_main()",
               str(self.cfg.home), self.t(fact), self.workload_file(fact), json.dumps(options)]
        log = open(self.work / f"kill-{self.day}.log", "ab")
        env = {**os.environ, f"PANDO_TEST_PAUSE_{stage}": str(pause), "SPARK_LOCAL_IP": "127.0.0.1",
               "PYTHONPATH": os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[1]),
                                                         os.environ.get("PYTHONPATH")) if p)}
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, env=env, start_new_session=True)
        try:
            deadline = time.time() + 300
            while not Path(f"{pause}.ready").exists():
                if proc.poll() is not None:
                    log.flush()
                    tail = Path(log.name).read_text(errors="replace")[-3000:]
                    self.report.fail(self.day, f"killed rewrite of {fact}: the worker exited ({proc.returncode}) "
                                               f"before stage {stage}; see {log.name}", self.known(fact, tail))
                    return
                if time.time() > deadline:
                    self.report.fail(self.day, f"killed rewrite of {fact}: stage {stage} not reached in 300 s")
                    break
                time.sleep(0.05)
            if stage == "WRITING":
                time.sleep(0.5)  # let another task write a file too
        finally:
            kill_tree(proc.pid)
            proc.wait(timeout=60)
            log.close()
        after = self.catalog.load_table(self.t(fact))
        if after.metadata.current_snapshot_id != before.metadata.current_snapshot_id or \
                dict(after.properties) != dict(before.properties):
            self.report.fail(self.day, f"killed rewrite of {fact} at {stage} changed the table "
                                       f"(snapshot {before.metadata.current_snapshot_id} → "
                                       f"{after.metadata.current_snapshot_id})")

    # ---- a day -------------------------------------------------------------------------------

    def run_day(self, day: int) -> None:
        self.day = day
        rng = self.rng
        p = self.profile
        for _ in range(rng.randint(*p.data_ops)):
            op = rng.choice(DATA_OPS)
            fact = rng.choice(FACTS)
            try:
                done = self.data_op(op, fact)
            except Exception as e:
                self.report.fail(day, f"{op} on {fact} failed: {_short(e)}")
                done = True
            if done:
                self.report.ops[op] += 1
        if self.inject.get(day) == "delete-behind-model":  # a discrepancy the checks must find
            victim = pc.max(self.facts["sales"].rows.column("sale_id")).as_py()
            self.sql(f"DELETE FROM {self.t('sales')} WHERE sale_id = {victim}")
        ops = [rng.choice(MAINTENANCE_OPS) for _ in range(rng.randint(*p.maintenance_ops))]
        kill = rng.random() < p.kill_probability or day in p.kill_days
        stop = threading.Event()
        concurrent = threading.Thread(target=self.concurrent_queries, args=(stop, day), daemon=True)
        concurrent.start()
        try:
            for op in ops:
                fact = ("sales_p" if op == "runbook_partitions" else "sales" if op.startswith("runbook")
                        else rng.choice(FACTS))
                try:
                    self.maintenance(op, fact)
                except Exception as e:
                    self.report.fail(day, f"{op} on {fact} failed: {_short(e)}", self.known(fact, e))
                self.report.ops[op] += 1
            if kill:  # the partitioned rewrite has no SAMPLING/OPTIMIZING test hooks: the whole-table fact
                self.killed_rewrite("sales")
        finally:
            stop.set()
            concurrent.join()
        if self.inject.get(day) == "lose-a-layout-file":
            self.lose_a_layout_file()

    def known(self, fact: str, error: BaseException | str) -> str | None:
        """The known bug (KNOWN_BUGS) whose symptom the failure on ``fact`` shows, if any."""
        text = error if isinstance(error, str) else f"{error!s} {getattr(error, '__cause__', '') or ''}"
        return next((f"{name}: {what} (on {fact})" for name, (symptoms, what) in KNOWN_BUGS.items()
                     if any(s in text for s in symptoms)), None)

    def data_op(self, op: str, fact: str) -> bool:
        if op in ("append", "late_append"):
            self.append(fact, late=op == "late_append")
        elif op.startswith("delete_"):
            self.delete(fact, "copy-on-write" if op.endswith("cow") else "merge-on-read")
        elif op.startswith("update_"):
            self.update(fact, "copy-on-write" if op.endswith("cow") else "merge-on-read")
        elif op.startswith("merge_"):
            self.merge(fact, "copy-on-write" if op.endswith("cow") else "merge-on-read")
        elif op == "dim_update":
            self.dim_update()
        elif op == "dim_append":
            self.dim_append()
        elif op == "dim_duplicate_key":
            self.dim_duplicate_key()
        elif op == "spec_evolution":
            return self.spec_evolution()
        else:
            return getattr(self, op)(fact)
        return True

    def lose_a_layout_file(self) -> None:
        table = self.catalog.load_table(self.t("sales"))
        live = layout_paths(table) & live_paths(table)
        if live:
            os.remove(_local(min(live)))

    # ---- checks ------------------------------------------------------------------------------

    def concurrent_queries(self, stop: threading.Event, day: int) -> None:
        """pyiceberg pruned vs unpruned reads of one snapshot while the maintenance commits."""
        rng = random.Random(f"soak-{self.seed}-concurrent-{day}")
        done = 0
        while not stop.is_set() and done < self.profile.concurrent_queries:
            fact = rng.choice(FACTS)
            query = self.queries(fact, 1, rng)[0]
            self.check_pyiceberg(fact, query, concurrent=True)
            done += 1
            stop.wait(0.5)

    def check_pyiceberg(self, fact: str, query: Query, concurrent: bool = False) -> None:
        from .planner import plan_scan, read_arrow

        table = self.catalog.load_table(self.t(fact))
        try:
            pruned = plan_scan(table, query.filter)
            full = plan_scan(table, query.filter, use_layout=False)
            got = read_arrow(table, pruned).sort_by("sale_id")
            want = read_arrow(table, full).sort_by("sale_id")
        except Exception as e:
            if concurrent and _expired(self.catalog.load_table(self.t(fact)), table.metadata.current_snapshot_id):
                return  # its snapshot was expired meanwhile: files may be gone, not a wrong result
            self.report.queries_checked += 1
            self.report.wrong_results += 1
            self.report.fail(self.day, f"pyiceberg {fact} [{query.template}] {query.filter}: {_short(e)}")
            return
        self.report.queries_checked += 1
        if not got.equals(want):
            self.report.wrong_results += 1
            self.report.fail(self.day, f"pyiceberg {fact} [{query.template}] pruned {got.num_rows} rows, unpruned "
                                       f"{want.num_rows}{' (concurrent)' if concurrent else ''}: {query.filter}")

    def check_spark(self, fact: str, query: Query) -> None:
        from .spark.pruned import run_sql

        self.report.queries_checked += 1
        try:
            got = [tuple(r) for r in run_sql(self.spark, self.catalog, query.sql).rows]
            want = [tuple(r) for r in self.sql(query.sql).collect()]
        except Exception as e:
            self.report.wrong_results += 1
            self.report.fail(self.day, f"spark {fact} [{query.template}]: {_short(e)}\n    {query.sql}")
            return
        if got != want:
            self.report.wrong_results += 1
            self.report.fail(self.day, f"spark {fact} [{query.template}] pruned {got} != unpruned {want}: {query.sql}")

    def check_content(self, fact: str) -> None:
        st = self.facts[fact]
        table = self.catalog.load_table(self.t(fact))
        actual = table.scan().to_arrow()
        model = st.rows
        lost, extra, changed, why = diff_rows(model, actual)
        self.report.rows_lost += lost
        self.report.rows_extra_or_changed += extra + changed
        if lost or extra or changed or why:
            self.report.fail(self.day, f"content of {fact}: {lost} row(s) lost, {extra} extra, {changed} changed"
                                       f"{'; ' + why if why else ''}")
        r = self.sql(f"SELECT count(*) AS n, count(DISTINCT sale_id) AS ids, sum(sale_id) AS s "
                     f"FROM {self.t(fact)}").collect()[0]
        ids = model.column("sale_id")
        want = (model.num_rows, model.num_rows, pc.sum(ids).as_py() or None)
        if (r.n, r.ids, r.s) != want:
            self.report.fail(self.day, f"Spark reads {fact} as (rows, ids, sum of ids) {(r.n, r.ids, r.s)}, "
                                       f"the model holds {want}")

    def check_files(self, fact: str) -> None:
        table = self.catalog.load_table(self.t(fact))
        live = live_paths(table, with_deletes=True)  # a layout's files that are still live are among them
        missing = sorted(p for p in live if not os.path.exists(_local(p)))
        self.report.missing_files += len(missing)
        if missing:
            self.report.fail(self.day, f"{fact}: {len(missing)} live file(s) missing on disk, e.g. {missing[0]}")

    def check_cleanup(self, fact: str) -> None:
        """``pando cleanup`` then ``remove_orphan_files``; afterwards neither finds anything."""
        from .cleanup import cleanup_table, find_leftovers

        t = self.t(fact)
        cleanup_table(self.catalog, t, apply=True, older_than_minutes=0)
        self.remove_orphans(fact, dry_run=False)
        left = [x.location for x in find_leftovers(self.catalog.load_table(t), t, older_than_minutes=0).leftovers]
        left += self.remove_orphans(fact, dry_run=True)
        self.report.leftover_files += len(left)
        if left:
            self.report.fail(self.day, f"{fact}: {len(left)} file(s) left after cleanup, e.g. {left[0]}")

    def check_health(self, fact: str) -> None:
        """layout_health's files/rows outside the layout == the soak's count from the metadata."""
        table = self.catalog.load_table(self.t(fact))
        inside = layout_paths(table)
        if not inside and "pando.layout-id" not in table.properties:
            return
        tasks = list(table.scan().plan_files())
        outside = [t for t in tasks if t.file.file_path not in inside]
        want = (len(outside), sum(t.file.record_count for t in outside))
        result = self.call(f"CALL pando.system.layout_health(table => '{self.t(fact)}')")
        names = result.names
        if "metric" in names:
            values = {r[0]: r[1] for r in result.rows}
            if values.get("status") in ("no layout", "broken"):
                self.report.health_mismatches += 1
                self.report.fail(self.day, f"layout_health of {fact}: {values.get('status')} ({values.get('reason')})")
                return
            got = (int(values["files_outside_layout"]), int(values["rows_outside_layout"]))
        else:
            rows = [dict(zip(names, r)) for r in result.rows if r[0] != "*"]
            got = (sum(int(r["files_outside_layout"] or 0) for r in rows),
                   sum(int(r["rows_outside_layout"] or 0) for r in rows))
        if got != want:
            self.report.health_mismatches += 1
            self.report.fail(self.day, f"layout_health of {fact} says (files, rows) outside the layout {got}, the "
                                       f"table's metadata {want}")

    def check_day(self) -> None:
        rng = random.Random(f"soak-{self.seed}-check-{self.day}")
        for fact in FACTS:
            for query in self.queries(fact, self.profile.queries, rng):
                self.check_pyiceberg(fact, query)
                self.check_spark(fact, query)
            self.check_content(fact)
            self.check_files(fact)
            self.check_health(fact)
            self.check_cleanup(fact)

    def run(self, days: int) -> SoakReport:
        t0 = time.time()
        self.setup()
        self.report.ops["initial_layout"] += len(FACTS)
        for day in range(1, days + 1):
            d0 = time.time()
            failures, known = len(self.report.failures), len(self.report.known_failures)
            self.run_day(day)
            self.check_day()
            self.report.days = day
            self.progress(f"soak day {day}/{days}: {time.time() - d0:.0f} s, "
                          f"{len(self.report.failures) - failures} new discrepancy(ies), "
                          f"{len(self.report.known_failures) - known} known failure(s)")
            for line in self.report.failures[failures:] + self.report.known_failures[known:]:
                self.progress(f"  {line}")
        self.report.seconds = time.time() - t0
        return self.report


# ---- helpers ---------------------------------------------------------------------------------

def run_soak(spark, catalog, cfg, *, seed: int, days: int, profile: str | SoakProfile = "ci", namespace: str = "soak",
             progress: Callable[[str], None] = lambda m: None, inject: dict[int, str] | None = None) -> SoakReport:
    if isinstance(profile, str):
        if profile not in PROFILES:
            raise ValueError(f"unknown soak profile {profile!r}; accepted: {', '.join(PROFILES)}")
        profile = PROFILES[profile]
    if days < 1:
        raise ValueError(f"days must be >= 1, got {days}")
    return Soak(spark, catalog, cfg, seed=seed, profile=profile, namespace=namespace, progress=progress,
                inject=inject).run(days)


def diff_rows(model: pa.Table, actual: pa.Table, key: str = "sale_id") -> tuple[int, int, int, str]:
    """(rows of the model missing from ``actual``, rows of ``actual`` not in the model, rows in
    both whose values differ, a note on columns/duplicates), rows matched by ``key``."""
    why = []
    if sorted(model.column_names) != sorted(actual.column_names):
        why.append(f"columns {actual.column_names} != model's {model.column_names}")
    m_ids, a_ids = model.column(key).to_numpy(), actual.column(key).to_numpy()
    dups = len(a_ids) - len(np.unique(a_ids))
    if dups:
        why.append(f"{dups} duplicate {key}(s)")
    lost = len(np.setdiff1d(m_ids, a_ids))
    extra = len(np.setdiff1d(a_ids, m_ids))
    m = model.filter(pc.is_in(model.column(key), value_set=actual.column(key))).sort_by(key)
    a = actual.filter(pc.is_in(actual.column(key), value_set=model.column(key))).sort_by(key)
    changed = np.zeros(min(m.num_rows, a.num_rows), dtype=bool)
    if m.num_rows == a.num_rows:
        for name in m.column_names:
            if name not in a.column_names:
                continue
            x, y = m.column(name), a.column(name).cast(m.column(name).type)
            same = pc.or_kleene(pc.equal(x, y), pc.and_(pc.is_null(x), pc.is_null(y)))
            changed |= ~pc.fill_null(same, False).to_numpy(zero_copy_only=False)
    return lost, extra, int(changed.sum()), "; ".join(why)


def live_paths(table, with_deletes: bool = False) -> set[str]:
    out = set()
    for task in table.scan().plan_files():
        out.add(task.file.file_path)
        if with_deletes:
            out |= {d.file_path for d in task.delete_files}
    return out


def layout_paths(table) -> set[str]:
    """Every data file path the table's current layout (whole-table or per partition) maps."""
    from .storage.partitions import read_layout_sidecar
    from .storage.pointer import layout_pointer

    pointer = layout_pointer(table.properties)
    if pointer is None:
        return set()
    sidecar = read_layout_sidecar(table.io, pointer, table.location(), table.metadata.table_uuid)
    if hasattr(sidecar, "partition_of_path"):
        return set(sidecar.partition_of_path())
    return {ref.path for refs in sidecar.block_files.values() for ref in refs}


def orphan_files(spark, table, name: str) -> list[str]:
    """Files under the table's location that no snapshot, manifest, metadata file or statistics
    file of the table references (Hadoop's hidden ``.crc`` checksum files aside)."""
    referenced = {r[0] for r in spark.sql(f"SELECT file_path FROM {name}.all_files").collect()}
    referenced |= {r[0] for r in spark.sql(f"SELECT path FROM {name}.all_manifests").collect()}
    referenced |= {r[0] for r in spark.sql(f"SELECT manifest_list FROM {name}.snapshots").collect()}
    referenced |= {r[0] for r in spark.sql(f"SELECT file FROM {name}.metadata_log_entries").collect()}
    referenced |= {s.statistics_path for s in table.metadata.statistics}
    referenced |= {s.statistics_path for s in getattr(table.metadata, "partition_statistics", [])}
    referenced.add(table.metadata_location)
    referenced = {_local(p) for p in referenced}
    root = _local(table.location())
    out = []
    for folder, _, files in os.walk(root):
        out += [os.path.join(folder, f) for f in files
                if not (f.startswith(".") and f.endswith(".crc")) and os.path.join(folder, f) not in referenced]
    return sorted(out)


def kill_tree(pid: int) -> list[int]:
    """SIGKILL ``pid`` and all its descendants at once (a machine crash, as the table sees it);
    returns their pids, ``pid`` first."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    todo, tree = [pid], []
    while todo:
        p = todo.pop()
        tree.append(p)
        todo += children.get(p, [])
    for p in tree:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return tree


def rewrite_worker_main() -> None:
    """Entry of the rewrite process a soak kills: ``home table workload_file options_json``."""
    from .config import load_config
    from .spark.rewrite import RewriteOptions, rewrite_table
    from .spark.session import start_spark

    home, table, workload, options = sys.argv[1:5]
    cfg = load_config(home=home, overrides={"spark": {"master": "local[1]", "driver_memory": "1g"}})
    spark = start_spark(cfg, app_name="pando-soak-killed-rewrite")
    # forced: the kill must find the rewrite at its stage, whatever the per-template guard would say
    rewrite_table(spark, table, Path(workload).read_text(), RewriteOptions(**json.loads(options)),
                  io_properties=cfg.pyiceberg_properties(), force=True)


def _expired(table, snapshot_id: int | None) -> bool:
    return snapshot_id is not None and table.metadata.snapshot_by_id(snapshot_id) is None


def _local(path: str) -> str:
    return urlparse(path).path if path.startswith("file:") else path


def _now_literal() -> str:
    return (dt.datetime.now() + dt.timedelta(seconds=1)).strftime("%Y-%m-%d %H:%M:%S")


def _short(e: BaseException) -> str:
    try:
        text = str(e)
    except Exception:
        text = ""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(e).__name__}: {first[:400]}"
