"""Grammar-based differential fuzzer: ``pando_iceberg.spark.sql`` == plain ``spark.sql``, per query.

Data (once per run, tests/reliability/fuzzgen.py): a star schema (sales, date_dim, store,
product) and a taxi-like table in namespace ``fuzz``, laid out by the Spark rewrite with a
training workload from the same grammar (small blocks: many files, trees cutting on many
columns), then changed: merge-on-read deletes (delete files), copy-on-write deletes, appends
(a duplicate dimension key among them). Temporary views ``fuzzv_<table>`` add narrow widths.

Each case (a seed): one random query of the grammar, run in the same session and settings
(``spark.sql.session.timeZone`` and ``spark.sql.ansi.enabled`` vary per batch of cases) through
``pando_iceberg.spark.sql(spark, q)`` and through ``spark.sql(q)``; results compared as multisets
(integers, decimals, strings and timestamps exactly; floats within a relative tolerance of
``REL_TOL``, as summation order differs; NaN equals NaN, -0.0 equals 0.0). When the two differ,
the query runs a third time over in-memory copies of the tables (``fuzzref_<table>``, no
Iceberg file pruning at all): Spark's semantics over the unpruned table decide who is right —
Iceberg's own pruning drops NaN rows Spark's ordering selects, so plain Spark on Iceberg can
be the wrong one.

Outcomes counted: ``wrong`` (Pando differs from the reference), ``pando_only_failures`` (Pando
raised, Spark answered), ``both_failed``, ``plain_failed_pando_answered`` (ANSI errors on rows
the pruned scan never reads) and its mirror ``pando_failed_ansi_error`` (an ANSI error of the query's
own expression on rows Spark's plan filtered out first), ``plain_iceberg_wrong`` (Pando right,
plain Spark on Iceberg not), and the share of cases where Pando read fewer files than the tables hold.

Profiles (``PANDO_FUZZ_PROFILE``): ``fast`` (default, CI: 300 cases) and ``long`` (20,000 cases);
``PANDO_FUZZ_CASES`` overrides the count, ``PANDO_FUZZ_BASE`` shifts the seeds (of ``test_fuzz``;
``PANDO_FUZZ_LIMIT_BASE``: the first LIMIT case run, a multiple of 50, to resume or split the
LIMIT cases: each batch's counts are in the log),
``PANDO_FUZZ_SEED=<seed>`` replays one case (its batch's settings), ``PANDO_FUZZ_LOG=<file>``
appends every failure and the running counts as JSON lines::

    PANDO_FUZZ_PROFILE=long .venv/bin/python -m pytest -q tests/reliability/test_fuzz.py
"""

from __future__ import annotations

import json
import math
import os
import time
import traceback
from collections import Counter
from datetime import datetime
from decimal import Decimal

import pytest
from fuzzgen import (
    COLUMNS,
    NS,
    VIEWS,
    Values,
    cut_edges,
    make_limit_query,
    make_query,
    settings_for,
    star_tables,
    taxi_table,
    training_workload,
    view_name,
    view_sql,
)

# LIMIT and top-k cases (``test_limit_fuzz``) per profile
LIMIT_CASES = {"fast": 100, "long": 10_000}
PROFILES = {  # (cases, fact rows, taxi rows)
    "fast": (300, 20_000, 20_000),
    "long": (20_000, 40_000, 30_000),
}
PROFILE = os.environ.get("PANDO_FUZZ_PROFILE", "fast")
if PROFILE not in PROFILES:
    raise ValueError(f"PANDO_FUZZ_PROFILE={PROFILE!r}: accepted values are {', '.join(PROFILES)}")
CASES, FACT_ROWS, TAXI_ROWS = PROFILES[PROFILE]
CASES = int(os.environ.get("PANDO_FUZZ_CASES", CASES))
BASE = int(os.environ.get("PANDO_FUZZ_BASE", "0"))
ONLY = os.environ.get("PANDO_FUZZ_SEED")
LOG = os.environ.get("PANDO_FUZZ_LOG")
# PANDO_FUZZ_SQL: queries (separated by lines holding only ';') run instead of the grammar's, under
# the settings of PANDO_FUZZ_SEED's batch (batch 0 without one): to minimize a finding by hand.
MANUAL = [q.strip() for q in os.environ.get("PANDO_FUZZ_SQL", "").split("\n;\n") if q.strip()]
BATCH = 50  # cases per session setting
DATA_SEED = 51
REL_TOL = 1e-6
BATCHES = ([int(ONLY) // BATCH] if ONLY else [0] if os.environ.get("PANDO_FUZZ_SQL") else
           list(range(BASE // BATCH, (BASE + CASES + BATCH - 1) // BATCH)))

LIMIT_BASE = int(os.environ.get("PANDO_FUZZ_LIMIT_BASE", "0"))
LIMIT_BATCHES = list(range(LIMIT_BASE // BATCH, LIMIT_CASES[PROFILE] // BATCH))

STATS: Counter = Counter()
LIMIT_STATS: Counter = Counter()


def replay(seed: int) -> str:
    return (f"PANDO_FUZZ_PROFILE={PROFILE} PANDO_FUZZ_SEED={seed} .venv/bin/python -m pytest -q "
            f"tests/reliability/test_fuzz.py")


def _log(record: dict) -> None:
    if LOG:
        with open(LOG, "a") as f:
            f.write(json.dumps(record, default=str) + "\n")


# ---------------------------------------------------------------- the lakehouse, once per run

def _load(catalog, name, table, files):
    if catalog.table_exists(name):
        catalog.purge_table(name)
    t = catalog.create_table(name, schema=table.schema, properties={"format-version": "2"})
    step = table.num_rows // files + 1
    for lo in range(0, table.num_rows, step):  # a few files, as loaded
        t.append(table.slice(lo, step))


@pytest.fixture(scope="module")
def lake(spark, catalog, lakehouse_cfg):
    from pando_iceberg.planner.scan import layout_of
    from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table

    t0 = time.perf_counter()
    tables = {**star_tables(DATA_SEED, FACT_ROWS), "taxi": taxi_table(DATA_SEED, TAXI_ROWS)}
    values = Values(tables)
    catalog.create_namespace_if_not_exists(NS)
    for name, table in tables.items():
        _load(catalog, f"{NS}.{name}", table, 4 if table.num_rows > 1000 else 2)
    t_load = time.perf_counter() - t0
    layouts = {}
    # (k, min block rows) per table: small blocks, so each table has many files to prune
    plan = {"sales": (3, FACT_ROWS // 40), "taxi": (2, TAXI_ROWS // 30), "date_dim": (2, 60), "product": (2, 30)}
    for name, (k, b) in plan.items():
        workload = training_workload(values, name, 40, DATA_SEED + len(name))
        opts = RewriteOptions(k=k, sample_rate=1.0, min_sample_rows=1, min_block_rows=b, seed=DATA_SEED,
                              template_draws=0, k_selection="fixed", max_template_regression="off")
        result = rewrite_table(spark, f"{NS}.{name}", workload, opts,
                               io_properties=lakehouse_cfg.pyiceberg_properties())
        layouts[name] = (result.block_count, round(time.perf_counter() - t0 - t_load, 1))
    t_layout = time.perf_counter() - t0 - t_load
    # the literals of the cases: a share from either side of each layout cut (Values.add_edges)
    edges = {}
    for name in plan:
        _, layout, _ = layout_of(catalog.load_table(f"{NS}.{name}"), cache=None)
        found = cut_edges(tables[name], layout.cuts)
        values.add_edges(name, found)
        edges[name] = sum(map(len, found.values()))
    # changes after the layout: merge-on-read deletes (delete files), copy-on-write deletes, appends
    for name in ("sales", "taxi"):
        spark.sql(f"ALTER TABLE {NS}.{name} SET TBLPROPERTIES ('write.delete.mode'='merge-on-read', "
                  "'write.update.mode'='merge-on-read')")
    spark.sql(f"DELETE FROM {NS}.sales WHERE sale_id % 53 = 0 OR (store_key = 3 AND qty > 20)")
    spark.sql(f"DELETE FROM {NS}.taxi WHERE trip_id % 41 = 0 OR isnan(fare)")
    spark.sql(f"DELETE FROM {NS}.date_dim WHERE date_key % 97 = 0")  # copy-on-write: dangling keys
    spark.sql(f"INSERT INTO {NS}.sales VALUES "
              f"({FACT_ROWS + 1}, 5, 7, 9, 2147483647, 9223372036854775807, -32769, float('NaN'), "
              "double('-inf'), 1.25, DATE '2026-01-17', TIMESTAMP '2026-01-17 02:00:00+05:00', "
              "TIMESTAMP_NTZ '2026-01-17 02:00:00', '2026-12'), "
              f"({FACT_ROWS + 2}, NULL, NULL, NULL, NULL, NULL, NULL, -0.0, 0.0, NULL, NULL, NULL, NULL, NULL), "
              f"({FACT_ROWS + 3}, 9999, 60, 300, -2147483648, -9223372036854775808, 128, 1.81, 1.81, -0.01, "
              "DATE '2027-05-31', TIMESTAMP '2027-05-31 23:59:59.999999', TIMESTAMP_NTZ '2025-06-01 00:00:00', 'NaN')")
    spark.sql(f"INSERT INTO {NS}.taxi VALUES ({TAXI_ROWS + 1}, TIMESTAMP_NTZ '2026-01-17 02:30:00', "
              "TIMESTAMP '2026-01-17 02:30:00+05:00', float('inf'), double('NaN'), -0.0, 300, 7, 'CMT', 12.50, "
              "'0.2f'), "
              f"({TAXI_ROWS + 2}, NULL, NULL, NULL, NULL, NULL, NULL, 8, NULL, NULL, NULL)")
    spark.sql(f"INSERT INTO {NS}.store VALUES (7, 40000, 'north', double('NaN'), TIMESTAMP '2026-01-17 00:00:00')")
    # temporary views (the grammar's) and the reference copies: in memory, no Iceberg pruning
    for name in COLUMNS:
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {view_name(name)} AS {view_sql(name, f'{NS}.{name}')}")
        spark.table(f"{NS}.{name}").localCheckpoint().createOrReplaceTempView(f"fuzzref_{name}")
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW fuzzrefv_{name} AS {view_sql(name, f'fuzzref_{name}')}")
    files = {n: spark.sql(f"SELECT count(*) FROM {NS}.{n}.files").collect()[0][0] for n in COLUMNS}
    deletes = {n: spark.sql(f"SELECT count(*) FROM {NS}.{n}.delete_files").collect()[0][0] for n in COLUMNS}
    import pando_iceberg

    info = {"pando_iceberg": pando_iceberg.__file__, "load_s": round(t_load, 1), "layout_s": round(t_layout, 1),
            "setup_s": round(time.perf_counter() - t0, 1), "blocks": layouts, "edge_values": edges,
            "files": files, "delete_files": deletes}
    print(f"\nfuzz lakehouse ({PROFILE}): {info}")
    _log({"setup": info})
    assert VIEWS.keys() == COLUMNS.keys()
    return values


# ---------------------------------------------------------------- comparing results

def _key(x):
    if x is None:
        return (0, "")
    if isinstance(x, float):
        return (1, "nan") if math.isnan(x) else (1, f"{x:.6g}" if x != 0 else "0")
    if isinstance(x, (int, Decimal)):
        return (2, f"{x:040.6f}" if abs(x) < 10**30 else str(x))
    if isinstance(x, datetime):
        return (3, x.isoformat())
    return (4, repr(x))


def _close(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or math.isclose(a, b, rel_tol=REL_TOL)
    return a == b and type(a) is type(b)


def same_rows(got: list, want: list) -> bool:
    if len(got) != len(want):
        return False
    g = sorted((tuple(r) for r in got), key=lambda r: tuple(_key(x) for x in r))
    w = sorted((tuple(r) for r in want), key=lambda r: tuple(_key(x) for x in r))
    return all(len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b)) for a, b in zip(g, w))


def reference_sql(q: str) -> str:
    """The query over the in-memory copies (no Iceberg pruning): Spark's semantics, unpruned."""
    out = q.replace("fuzzv_", "fuzzrefv_")
    for name in COLUMNS:
        out = out.replace(f"{NS}.{name} ", f"fuzzref_{name} ").replace(f"{NS}.{name})", f"fuzzref_{name})")
    return out


def _short(e: BaseException) -> str:
    java = getattr(e, "java_exception", None)  # py4j: the JVM's exception says what failed
    text = str(java.toString()) if java is not None else str(e)
    return f"{type(e).__name__}: {text.strip().splitlines()[0][:600] if text.strip() else ''}"


def run_case(spark, catalog, q: str) -> dict:
    """Run ``q`` plainly and through Pando; the outcome and what to report."""
    import pando_iceberg.spark

    out: dict = {"sql": q}
    t = time.perf_counter()
    try:
        plain = [tuple(r) for r in spark.sql(q).collect()]
    except Exception as e:
        plain, out["plain_error"] = None, _short(e)
    out["plain_s"] = time.perf_counter() - t
    out["nonempty"] = (bool(plain) and any(isinstance(r[0], int) and r[0] > 0 for r in plain)) or \
        bool(plain and len(plain) > 1)
    t = time.perf_counter()
    try:
        with pando_iceberg.spark.sql(spark, q, catalog=catalog) as df:
            got = [tuple(r) for r in df.collect()]
            ex = df.pando.explains
            out["pruned"] = any(e.pando_files < e.total_files for e in ex.values())
            out["pruned_beyond_iceberg"] = any(e.pando_files < e.iceberg_files for e in ex.values())
            out["used_layout"] = any(e.used_layout for e in ex.values())
    except Exception as e:
        got, out["pando_error"] = None, _short(e)
        out["pando_where"] = [f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno} {f.name}"  # Pando's frames, innermost last
                              for f in traceback.extract_tb(e.__traceback__) if "pando_iceberg" in f.filename][-6:]
    out["pando_s"] = time.perf_counter() - t
    if plain is None and got is None:
        out["outcome"] = "both_failed"
    elif got is None:
        # Under ANSI an expression of the query itself can raise on rows that one plan evaluates and
        # another filters out first (Spark gives no evaluation order): counted apart, as its mirror
        # plain_failed_pando_answered is. Any other error is Pando's own failure.
        ansi = str(spark.conf.get("spark.sql.ansi.enabled", "false")).lower() == "true"
        out["outcome"] = ("pando_failed_ansi_error" if ansi and any(c in out["pando_error"] for c in ANSI_ERRORS)
                          else "pando_only_failure")
        out["plain"] = plain[:5]
    elif plain is None:
        out["outcome"] = "plain_failed_pando_answered"
        out["pando"] = got[:5]
    elif same_rows(got, plain):
        out["outcome"] = "same"
    else:
        try:
            truth = [tuple(r) for r in spark.sql(reference_sql(q)).collect()]
        except Exception as e:
            truth, out["reference_error"] = None, _short(e)
        out["plain"], out["pando"], out["reference"] = plain[:5], got[:5], (truth or [])[:5]
        out["outcome"] = ("plain_iceberg_wrong" if truth is not None and same_rows(got, truth)
                          and not same_rows(plain, truth) else "wrong")
    return out


# ---------------------------------------------------------------- the cases

BAD = ("wrong", "pando_only_failure")
# Spark's ANSI run-time errors raised by a query's own expressions
ANSI_ERRORS = ("[CAST_INVALID_INPUT]", "[ARITHMETIC_OVERFLOW]", "[DIVIDE_BY_ZERO]", "[CAST_OVERFLOW]",
               "[NUMERIC_VALUE_OUT_OF_RANGE]", "[INVALID_ARRAY_INDEX]")


@pytest.mark.spark
@pytest.mark.parametrize("batch", BATCHES)
def test_fuzz(spark, catalog, lake, batch):
    settings = settings_for(batch)
    seeds = [int(ONLY)] if ONLY else [s for s in range(batch * BATCH, (batch + 1) * BATCH)
                                      if BASE <= s < BASE + CASES]
    if MANUAL:
        seeds = list(range(len(MANUAL)))
    # tiny tables: fewer, cheaper tasks and no adaptive re-planning between stages
    conf = {**settings.conf(), "spark.sql.shuffle.partitions": "2", "spark.sql.adaptive.enabled": "false"}
    before = {k: spark.conf.get(k) for k in conf}
    failures = []
    t0 = time.perf_counter()
    try:
        for k, v in conf.items():
            spark.conf.set(k, v)
        for seed in seeds:
            q = MANUAL[seed] if MANUAL else make_query(lake, seed)
            _log({"running": seed, "sql": q})  # a case that kills the JVM (out of memory) is the last such line
            res = run_case(spark, catalog, q)
            STATS["cases"] += 1
            STATS[res["outcome"]] += 1
            STATS["pruned"] += bool(res.get("pruned"))
            STATS["pruned_beyond_iceberg"] += bool(res.get("pruned_beyond_iceberg"))
            STATS["used_layout"] += bool(res.get("used_layout"))
            STATS["nonempty"] += bool(res.get("nonempty"))
            if res["outcome"] not in ("same",):
                res.update(seed=seed, settings=settings.conf(), replay=replay(seed))
                _log(res)
            if res["outcome"] in BAD:
                failures.append(res)
    finally:
        for k, v in before.items():
            spark.conf.set(k, v)
    STATS["seconds"] += time.perf_counter() - t0
    _log({"batch": batch, "stats": dict(STATS)})

    def show(f):
        detail = (f"plain {f.get('plain')} | pando {f.get('pando')} | reference {f.get('reference')}"
                  if f["outcome"] == "wrong" else f"pando raised {f.get('pando_error')}; plain {f.get('plain')}")
        return f"[{f['outcome']}] seed {f['seed']} {f['settings']}\n  {f['sql']}\n  {detail}\n  replay: {f['replay']}"
    assert not failures, (f"{len(failures)} of {len(seeds)} cases failed (settings {settings.conf()}):\n"
                          + "\n".join(show(f) for f in failures[:6]))


def limit_outcome(spark, full_sql: str, rows: list | None, got: list, keys: int, limit: int, offset: int) -> bool:
    """Does ``got`` answer the LIMIT query whose unlimited form is ``full_sql``? With ORDER BY
    (its ``keys`` columns lead the select list): the same leading values, in order, as ``rows``
    (a plain answer of the limited query). Without: min(limit, matching - offset) rows, each a
    row of the full result (as a multiset). Under ANSI the unlimited query can raise on a row
    neither limited query evaluated: then ``got`` holds as many rows as ``rows`` and each is a row
    of the full result with ANSI off (a row evaluated without an error has the same values)."""
    if keys:
        return rows is not None and len(got) == len(rows) and \
            all(_close(a, b) for g, w in zip(got, rows) for a, b in zip(g[:keys], w[:keys]))
    mine = Counter(tuple(_key(x) for x in r) for r in got)
    try:
        full = Counter(tuple(_key(x) for x in r) for r in spark.sql(full_sql).collect())
    except Exception as e:
        if rows is None or not any(c in str(e) for c in ANSI_ERRORS):
            raise
        ansi = spark.conf.get("spark.sql.ansi.enabled")
        spark.conf.set("spark.sql.ansi.enabled", "false")
        try:
            full = Counter(tuple(_key(x) for x in r) for r in spark.sql(full_sql).collect())
        finally:
            spark.conf.set("spark.sql.ansi.enabled", ansi)
        return sum(mine.values()) == len(rows) and not mine - full
    return sum(mine.values()) == min(limit, max(0, sum(full.values()) - offset)) and not mine - full


@pytest.mark.spark
@pytest.mark.parametrize("batch", LIMIT_BATCHES)
def test_limit_fuzz(spark, catalog, lake, batch):
    """LIMIT and top-k queries: Pando's answer is one plain Spark could give (``limit_outcome``);
    when it is not, the query over the in-memory copies decides whether Pando or plain Spark on
    Iceberg (NaN pruning) is wrong."""
    import pando_iceberg.spark

    settings = settings_for(batch)
    conf = {**settings.conf(), "spark.sql.shuffle.partitions": "2", "spark.sql.adaptive.enabled": "false"}
    before = {k: spark.conf.get(k) for k in conf}
    failures = []
    counts: Counter = Counter()
    try:
        for k, v in conf.items():
            spark.conf.set(k, v)
        for seed in range(BASE + batch * BATCH, BASE + (batch + 1) * BATCH):
            q, full_sql, keys, limit, offset = make_limit_query(lake, seed)
            out = {"sql": q, "seed": seed, "settings": settings.conf()}
            try:
                plain = [tuple(r) for r in spark.sql(q).collect()]
            except Exception as e:
                plain, out["plain_error"] = None, _short(e)
            try:
                with pando_iceberg.spark.sql(spark, q, catalog=catalog) as df:
                    got = [tuple(r) for r in df.collect()]
                    counts["limit_pruned"] += any(e.limit_files_pruned for e in df.pando.explains.values())
                    counts["topk_pruned"] += any(e.limit_files_pruned and e.topk_boundary is not None
                                                 for e in df.pando.explains.values())
                    counts["topk_boundary"] += any(e.topk_boundary is not None for e in df.pando.explains.values())
                    counts["trees_proved"] += any(e.fully_matching_by_trees for e in df.pando.explains.values())
            except Exception as e:
                got, out["pando_error"] = None, _short(e)
            if got is None:
                ansi = settings.conf().get("spark.sql.ansi.enabled") == "true"
                outcome = "both_failed" if plain is None else \
                    "pando_failed_ansi_error" if ansi and any(c in out["pando_error"] for c in ANSI_ERRORS) \
                    else "pando_only_failure"
            elif plain is None:
                outcome = "plain_failed_pando_answered"
            elif limit_outcome(spark, full_sql, plain, got, keys, limit, offset):
                outcome = "same"
            else:
                ref = reference_sql(q)
                truth = [tuple(r) for r in spark.sql(ref).collect()]
                right = limit_outcome(spark, reference_sql(full_sql), truth, got, keys, limit, offset)
                outcome = "plain_iceberg_wrong" if right else "wrong"
                out.update(plain=plain[:5], pando=got[:5], reference=truth[:5])
            counts["cases"] += 1
            counts[outcome] += 1
            if outcome != "same":
                _log({**out, "outcome": outcome, "test": "limit"})
            if outcome in BAD:
                failures.append({**out, "outcome": outcome})
    finally:
        for k, v in before.items():
            spark.conf.set(k, v)
    _log({"limit_batch": batch, "counts": dict(counts)})
    LIMIT_STATS.update(counts)
    assert not failures, f"{len(failures)} LIMIT cases failed:\n" + "\n".join(
        f"[{f['outcome']}] seed {f['seed']} {f['settings']}\n  {f['sql']}\n  plain {f.get('plain')} | "
        f"pando {f.get('pando', f.get('pando_error'))} | reference {f.get('reference')}" for f in failures[:6])


def test_limit_fuzz_summary():
    """LIMIT and top-k pruning was exercised, not only planned around."""
    if not LIMIT_STATS["cases"]:
        pytest.skip("needs the profile's test_limit_fuzz batches in the same run")
    print(f"\nlimit fuzz ({PROFILE}): {dict(LIMIT_STATS)}")
    _log({"limit_summary": dict(LIMIT_STATS)})
    assert LIMIT_STATS["limit_pruned"] >= LIMIT_STATS["cases"] // 20


def test_fuzz_summary():
    """The counts of the run, and the fuzzer is not vacuous: Pando pruned files in a fair share."""
    if not STATS["cases"] or ONLY:
        pytest.skip("needs the profile's test_fuzz batches in the same run")
    s = dict(STATS)
    s["seconds_per_case"] = round(STATS["seconds"] / STATS["cases"], 3)
    s["pruned_share"] = round(STATS["pruned"] / STATS["cases"], 3)
    print(f"\nfuzz ({PROFILE}): {s}")
    _log({"summary": s})
    assert STATS["pruned"] >= 0.25 * STATS["cases"], s


def test_layout_learning_accepts_the_whole_grammar():
    """The rewrite's learning step (parse the workload, then the template draws of
    ``expected_workload``) over training queries drawn from the whole grammar — casts, odd
    literals, zone offsets — must not fail: a predicate it cannot model is left out, never a
    crash of the rewrite. (The layout above trains on the plain part of the grammar.)"""
    from pando_iceberg.workload import parse_workload
    from pando_iceberg.workload.templates import expected_workload

    tables = {**star_tables(DATA_SEED, 4000), "taxi": taxi_table(DATA_SEED, 4000)}
    values = Values(tables)
    schemas = {f"{NS}.{n}": t.schema for n, t in tables.items()}
    failures = []
    for name in ("sales", "taxi", "date_dim", "product"):
        for q in training_workload(values, name, 60, DATA_SEED + len(name), plain=False):
            try:
                wl = parse_workload([q], schemas)
                fq = [(x.filters[f"{NS}.{name}"], x.weight) for x in wl.queries if f"{NS}.{name}" in x.filters]
                expected_workload(fq, tables[name], 16, DATA_SEED)
            except Exception as e:
                failures.append(f"{q}\n    raised {_short(e)}")
    assert not failures, f"{len(failures)} training queries break the learning step:\n" + "\n".join(failures[:6])
