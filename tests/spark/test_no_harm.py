"""Do no harm: the per-template guard of ``rewrite_data_files(strategy => 'pando')`` on a real
table loaded in arrival (date) order, one file a month. The week template (``month = ? AND day
BETWEEN ? AND ?``) reads one file of twelve as loaded; a layout learned for the heavier carrier
and delay templates would give that up. The rewrite keeps it (within the bound) or refuses
before writing anything, unless ``force => true``."""

import pytest

from pando_iceberg.planner import plan_scan
from pando_iceberg.procedures import ProcedureContext, ProcedureError, call

pytestmark = pytest.mark.spark

MONTH_ROWS = 4_000
WEEKS = [(3, 1), (7, 10), (11, 20)]
WEEK_SQL = "month = {m} AND day BETWEEN {d} AND {e}"
WORKLOAD = "\n".join(
    [f"SELECT count(*) FROM noharm.{{t}} WHERE carrier = 'c{c}';" for c in (1, 4, 7)] * 3
    + [f"SELECT avg(delay) FROM noharm.{{t}} WHERE delay > {v};" for v in (40, 60, 80)] * 3
    + [f"SELECT count(*) FROM noharm.{{t}} WHERE {WEEK_SQL.format(m=m, d=d, e=d + 6)};" for m, d in WEEKS])
LAYOUT = "'k', '3', 'min-block-rows', '1000', 'sample-rate', '0.25'"
OPTIONS = f"map({LAYOUT}, 'max-template-regression', '1.1')"
NO_BOUND = f"map({LAYOUT})"  # the bound is the table property's


def _arrival_order_table(spark, name):
    """Twelve monthly appends, each one file with its rows in day order: the table as it arrived."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS noharm")
    spark.sql(f"DROP TABLE IF EXISTS noharm.{name}")
    spark.sql(f"CREATE TABLE noharm.{name} (month INT, day INT, carrier STRING, delay DOUBLE) USING iceberg")
    for m in range(1, 13):
        (spark.range(MONTH_ROWS).selectExpr(
            f"{m} AS month", f"CAST(1 + floor(id * 28 / {MONTH_ROWS}) AS INT) AS day",
            f"concat('c', pmod(xxhash64(id, {m}), 10)) AS carrier",
            f"-20 * ln((pmod(xxhash64(id, {m}, 7), 10000) + 0.5) / 10000) AS delay")
         .coalesce(1).writeTo(f"noharm.{name}").append())


@pytest.fixture(scope="module")
def ctx(spark, catalog, lakehouse_cfg, tmp_path_factory):
    c = ProcedureContext(lakehouse_cfg, catalog, lambda: spark)
    c.workload_dir = tmp_path_factory.mktemp("wl")
    return c


def _workload(ctx, name):
    path = ctx.workload_dir / f"{name}.sql"
    path.write_text(WORKLOAD.replace("{t}", name))
    return str(path)


def _state(catalog, name):
    t = catalog.load_table(f"noharm.{name}")
    snap = t.current_snapshot()
    files = sorted(task.file.file_path for task in t.scan().plan_files())
    return snap.snapshot_id, files, {k: v for k, v in t.properties.items() if k.startswith("pando.")}


def _week_rows(catalog, name):
    t = catalog.load_table(f"noharm.{name}")
    return [plan_scan(t, WEEK_SQL.format(m=m, d=d, e=d + 6)).explain.pando_rows for m, d in WEEKS]


def _replace_snapshots(spark, name):
    return [r[0] for r in spark.sql(f"SELECT operation FROM noharm.{name}.snapshots ORDER BY committed_at").collect()
            if r[0] == "replace"]


def test_the_guard_keeps_the_week_template_or_refuses(ctx, spark, catalog):
    _arrival_order_table(spark, "flights_a")
    before_rows = _week_rows(catalog, "flights_a")
    assert all(r == MONTH_ROWS for r in before_rows)  # one file of twelve
    wl = _workload(ctx, "flights_a")
    stmt = f"CALL pando.system.rewrite_data_files(table => 'noharm.flights_a', strategy => 'pando', " \
           f"workload => '{wl}', options => {OPTIONS})"
    state = _state(catalog, "flights_a")
    try:
        r = call(ctx, stmt)
    except ProcedureError as e:  # no candidate keeps it: nothing written, the table as it was
        assert "day BETWEEN" in str(e) and "force => true" in str(e)
        assert _state(catalog, "flights_a") == state
        r = call(ctx, stmt.replace("strategy => 'pando',", "strategy => 'pando', force => true,"))
        assert any(n.startswith("forced: ") and "day BETWEEN" in n for n in r.notes), r.notes
    else:
        lines = [n for n in r.notes if "of the table now" in n]
        assert len(lines) == 3 and all(n.endswith(": holds") for n in lines), r.notes
        # what the week queries read on the files written: within the bound, one file of slack
        after = _week_rows(catalog, "flights_a")
        assert all(a <= 1.1 * b + MONTH_ROWS for a, b in zip(after, before_rows, strict=True)), (after, before_rows)
    assert _replace_snapshots(spark, "flights_a") == ["replace"]
    assert spark.table("noharm.flights_a").count() == 12 * MONTH_ROWS


def test_a_bound_no_layout_can_hold_refuses_until_forced(ctx, spark, catalog):
    """The table property asks every template to read at most half of what it reads now: the
    week template reads one file now and no layout can read half a file. optimize_layout says so,
    the rewrite (of the pending layout) refuses naming the template, and force => true applies it."""
    _arrival_order_table(spark, "flights_b")
    spark.sql("ALTER TABLE noharm.flights_b SET TBLPROPERTIES ('pando.layout.max-template-regression' = '0.5')")
    wl = _workload(ctx, "flights_b")
    p = call(ctx, f"CALL pando.system.optimize_layout(table => 'noharm.flights_b', workload => '{wl}', "
                  f"options => {NO_BOUND})")
    week = [n for n in p.notes if n.startswith("template month = ? AND day BETWEEN")]
    assert len(week) == 1 and week[0].endswith("BREAKS the guard"), p.notes
    assert "reads 8.33% of the table now" in week[0]
    assert any("refuses it unless force => true" in n for n in p.notes)
    state = _state(catalog, "flights_b")
    stmt = ("CALL pando.system.rewrite_data_files(table => 'noharm.flights_b', strategy => 'pando', "
            f"options => {NO_BOUND})")
    with pytest.raises(ProcedureError, match=r"within 0\.5× .*month = \? AND day BETWEEN \? AND \?: reads 8\.33% "
                                             r"of the table now.*force => true"):
        call(ctx, stmt)
    assert _state(catalog, "flights_b") == state  # same snapshot, files and properties (pending kept)
    assert _replace_snapshots(spark, "flights_b") == []
    r = call(ctx, stmt.replace("strategy => 'pando',", "strategy => 'pando', force => true,"))
    assert r.notes[0].startswith("applied pending layout")
    assert any(n.startswith("forced: month = ? AND day BETWEEN") for n in r.notes), r.notes
    assert _replace_snapshots(spark, "flights_b") == ["replace"]
    assert spark.table("noharm.flights_b").count() == 12 * MONTH_ROWS


def test_the_verb_refuses_and_forces_too(ctx, spark, catalog):
    from pando_iceberg import LayoutOptions
    from pando_iceberg.spark.rewrite import TemplateGuardError

    _arrival_order_table(spark, "flights_c")
    pt = ctx.pando_table(ctx.table("noharm.flights_c"))
    opts = LayoutOptions(k=2, min_block_rows=2000, sample_rate=1.0, max_template_regression="0.5")
    wl = _workload(ctx, "flights_c")
    state = _state(catalog, "flights_c")
    with pytest.raises(TemplateGuardError, match="day BETWEEN"):
        pt.optimize.rewrite(wl, options=opts)
    assert _state(catalog, "flights_c") == state
    m = pt.optimize.rewrite(wl, options=opts, force=True)
    assert m.snapshot_id is not None and _replace_snapshots(spark, "flights_c") == ["replace"]
    # the guard off: no template report, no refusal
    off = pt.optimize.rewrite(wl, options=LayoutOptions(k=2, min_block_rows=2000, sample_rate=1.0,
                                                        max_template_regression="off"))
    assert not [n for n in off.notes if "of the table now" in n]
