"""The issue's test of the per-template guard, end to end on real Spark and Iceberg: a table loaded
in arrival (date) order, one file a month; a workload whose heavy templates (a carrier, a delay
threshold) make the unconstrained objective give up the light week template (``month = ? AND day
BETWEEN ? AND ?``), which reads one file of twelve as loaded. Guard off: the week reads several
times more after the rewrite. Guard on (the default bound, 1.1): the layout written keeps it —
planned on the files written, each held-out week reads at most 1.1× what it read before, plus a
file — and a bound no layout can hold refuses, writing nothing, until ``force => true``."""

import pytest

from pando_iceberg.planner import plan_scan
from pando_iceberg.procedures import ProcedureContext, ProcedureError, call

pytestmark = pytest.mark.spark

MONTH_ROWS = 4_000
WEEK_SQL = "month = {m} AND day BETWEEN {d} AND {e}"
TRAINING_WEEKS = [(3, 1), (7, 10), (11, 20)]
HELD_OUT = [(m, d) for m in (1, 2, 5, 6, 9, 12) for d in (3, 17)]
WORKLOAD = "\n".join(
    [f"SELECT count(*) FROM dateguard.{{t}} WHERE carrier = 'c{c}';" for c in (1, 4, 7)] * 3
    + [f"SELECT avg(delay) FROM dateguard.{{t}} WHERE delay > {v};" for v in (40, 60, 80)] * 3
    + [f"SELECT count(*) FROM dateguard.{{t}} WHERE {WEEK_SQL.format(m=m, d=d, e=d + 6)};"
       for m, d in TRAINING_WEEKS])
LAYOUT = "'k', '3', 'min-block-rows', '1000', 'sample-rate', '1.0'"


@pytest.fixture(scope="module")
def ctx(spark, catalog, lakehouse_cfg, tmp_path_factory):
    c = ProcedureContext(lakehouse_cfg, catalog, lambda: spark)
    c.workload_dir = tmp_path_factory.mktemp("wl")
    return c


def _loaded(spark, ctx, name):
    """Twelve monthly appends, each one file with its rows in day order; the workload's path."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS dateguard")
    spark.sql(f"DROP TABLE IF EXISTS dateguard.{name}")
    spark.sql(f"CREATE TABLE dateguard.{name} (month INT, day INT, carrier STRING, delay DOUBLE) USING iceberg")
    for m in range(1, 13):
        (spark.range(MONTH_ROWS).selectExpr(
            f"{m} AS month", f"CAST(1 + floor(id * 28 / {MONTH_ROWS}) AS INT) AS day",
            f"concat('c', pmod(xxhash64(id, {m}), 10)) AS carrier",
            f"-20 * ln((pmod(xxhash64(id, {m}, 7), 10000) + 0.5) / 10000) AS delay")
         .coalesce(1).writeTo(f"dateguard.{name}").append())
    path = ctx.workload_dir / f"{name}.sql"
    path.write_text(WORKLOAD.replace("{t}", name))
    return str(path)


def _week_rows(catalog, name):
    t = catalog.load_table(f"dateguard.{name}")
    return [plan_scan(t, WEEK_SQL.format(m=m, d=d, e=d + 6)).explain.pando_rows for m, d in HELD_OUT]


def _rewrite(name, wl, options):
    return (f"CALL pando.system.rewrite_data_files(table => 'dateguard.{name}', strategy => 'pando', "
            f"workload => '{wl}', options => map({LAYOUT}{options}))")


def _snapshot(catalog, name):
    return catalog.load_table(f"dateguard.{name}").current_snapshot().snapshot_id


def test_the_unconstrained_objective_sacrifices_the_week_and_the_guard_keeps_it(ctx, spark, catalog):
    off_wl = _loaded(spark, ctx, "unguarded")
    on_wl = _loaded(spark, ctx, "guarded")
    before = _week_rows(catalog, "guarded")
    assert before == _week_rows(catalog, "unguarded") and all(r == MONTH_ROWS for r in before)  # a file of twelve
    call(ctx, _rewrite("unguarded", off_wl, ", 'max-template-regression', 'off'"))
    sacrificed = _week_rows(catalog, "unguarded")
    assert sum(sacrificed) > 2 * sum(before), sacrificed  # the unconstrained layout gives the week up
    r = call(ctx, _rewrite("guarded", on_wl, ""))  # the default bound
    week = [n for n in r.notes if n.startswith("month = ? AND day BETWEEN")]
    assert len(week) == 1 and week[0].endswith(": holds"), r.notes
    kept = _week_rows(catalog, "guarded")
    # the guard bounds the template's mean read (estimated on the sample's draws; here the whole
    # table, so that the files it estimates are the files written): held-out weeks, planned on the
    # files written, within it and a file of b rows
    assert sum(kept) / len(kept) <= 1.1 * sum(before) / len(before) + 1_000, (kept, sacrificed)
    assert sum(kept) < sum(sacrificed) / 2
    assert spark.table("dateguard.guarded").count() == 12 * MONTH_ROWS


def test_a_bound_no_layout_holds_refuses_without_force(ctx, spark, catalog):
    wl = _loaded(spark, ctx, "tight")
    before = _snapshot(catalog, "tight")
    with pytest.raises(ProcedureError, match=r"day BETWEEN \? AND \?.*force => true"):
        call(ctx, _rewrite("tight", wl, ", 'max-template-regression', '0.5'"))
    assert _snapshot(catalog, "tight") == before  # nothing written
    r = call(ctx, _rewrite("tight", wl, ", 'max-template-regression', '0.5'").replace(
        "strategy => 'pando',", "strategy => 'pando', force => true,"))
    assert any(n.startswith("forced: month = ? AND day BETWEEN") for n in r.notes), r.notes
    assert _snapshot(catalog, "tight") != before
    assert spark.table("dateguard.tight").count() == 12 * MONTH_ROWS


def test_the_guard_holds_on_the_files_written_when_learned_on_a_sample(ctx, spark, catalog):
    """Learned on a quarter of the rows, the guard's estimate of each file's bounds is widened for
    the rows its sample misses (``in_block.widened_bounds``): a layout it says keeps the week
    keeps it on the files written, for held-out weeks (planned on them)."""
    wl = _loaded(spark, ctx, "sampled")
    before = _week_rows(catalog, "sampled")
    r = call(ctx, _rewrite("sampled", wl, "").replace("'sample-rate', '1.0'", "'sample-rate', '0.25'"))
    week = [n for n in r.notes if n.startswith("month = ? AND day BETWEEN")]
    assert len(week) == 1 and week[0].endswith(": holds"), r.notes
    kept = _week_rows(catalog, "sampled")
    assert sum(kept) / len(kept) <= 1.1 * sum(before) / len(before) + 1_000, (kept, before)
    assert spark.table("dateguard.sampled").count() == 12 * MONTH_ROWS
