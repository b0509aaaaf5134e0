"""Do no harm, per partition: a table partitioned by month, loaded in arrival (date) order, a
file a week in each month. The week template (``month = ? AND day BETWEEN ? AND ?``) reads one or
two of its month's four files as loaded; layouts learned for the heavier carrier and delay
templates give that up. With the guard each partition keeps it (within the bound of what it
reads of that partition now, measured by planning held-out weeks on the result) or keeps its
files; without it the week is sacrificed; a bound no layout can hold refuses unless forced."""

import json

import pytest

from pando_iceberg.planner import plan_scan
from pando_iceberg.procedures import ProcedureContext, ProcedureError, call
from pando_iceberg.storage.partitions import PartitionedLayoutSidecar
from pando_iceberg.storage.paths import sidecar_path
from pando_iceberg.storage.pointer import layout_pointer

pytestmark = pytest.mark.spark

MONTHS = 3
WEEK_ROWS = 1_000
WEEK_SQL = "month = {m} AND day BETWEEN {d} AND {e}"
TRAINING_WEEKS = [(1, 1), (2, 10), (3, 20)]
HELD_OUT = [(m, d) for m in range(1, MONTHS + 1) for d in (4, 8, 15, 22)]
WORKLOAD = "\n".join(
    [f"SELECT count(*) FROM pguard.{{t}} WHERE carrier = 'c{c}';" for c in (1, 4, 7)] * 3
    + [f"SELECT avg(delay) FROM pguard.{{t}} WHERE delay > {v};" for v in (40, 60, 80)] * 3
    + [f"SELECT count(*) FROM pguard.{{t}} WHERE {WEEK_SQL.format(m=m, d=d, e=d + 6)};" for m, d in TRAINING_WEEKS])
LAYOUT = "'k', '3', 'min-block-rows', '500', 'sample-rate', '1.0'"


def _arrival_order_table(spark, name):
    """Four weekly appends, each one file per month with the week's rows: in every month
    partition, four files in day order, as a loader appending week by week writes them."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS pguard")
    spark.sql(f"DROP TABLE IF EXISTS pguard.{name}")
    spark.sql(f"CREATE TABLE pguard.{name} (month INT, day INT, carrier STRING, delay DOUBLE) USING iceberg "
              "PARTITIONED BY (month)")
    for w in range(4):
        (spark.range(MONTHS * WEEK_ROWS).selectExpr(
            f"CAST(1 + floor(id / {WEEK_ROWS}) AS INT) AS month",
            f"CAST({7 * w + 1} + floor(pmod(id, {WEEK_ROWS}) * 7 / {WEEK_ROWS}) AS INT) AS day",
            f"concat('c', pmod(xxhash64(id, {w}), 10)) AS carrier",
            f"-20 * ln((pmod(xxhash64(id, {w}, 7), 10000) + 0.5) / 10000) AS delay")
         .repartition(1).sortWithinPartitions("month", "day").writeTo(f"pguard.{name}").append())


@pytest.fixture(scope="module")
def ctx(spark, catalog, lakehouse_cfg, tmp_path_factory):
    c = ProcedureContext(lakehouse_cfg, catalog, lambda: spark)
    c.workload_dir = tmp_path_factory.mktemp("wl")
    return c


def _workload(ctx, name):
    path = ctx.workload_dir / f"{name}.sql"
    path.write_text(WORKLOAD.replace("{t}", name))
    return str(path)


def _rewrite(ctx, name, options, force=False):
    return call(ctx, f"CALL pando.system.rewrite_data_files(table => 'pguard.{name}', strategy => 'pando', "
                     f"{'force => true, ' if force else ''}workload => '{_workload(ctx, name)}', "
                     f"options => map({LAYOUT}, {options}))")


def _week_rows(catalog, name):
    """Rows of the files each held-out week opens (all in its month's partition)."""
    t = catalog.load_table(f"pguard.{name}")
    return [plan_scan(t, WEEK_SQL.format(m=m, d=d, e=d + 6)).explain.pando_rows for m, d in HELD_OUT]


def _state(catalog, name):
    t = catalog.load_table(f"pguard.{name}")
    files = sorted(task.file.file_path for task in t.scan().plan_files())
    return t.current_snapshot().snapshot_id, files


def test_the_guard_keeps_each_partition_s_week_template(ctx, spark, catalog):
    _arrival_order_table(spark, "guarded")
    before = _week_rows(catalog, "guarded")
    assert all(0 < b <= 2 * WEEK_ROWS for b in before), before  # one or two files of the month's four
    r = _rewrite(ctx, "guarded", "'max-template-regression', '1.1'")
    after = _week_rows(catalog, "guarded")
    ratios = [a / b for a, b in zip(after, before, strict=True)]
    # per partition, each template's reads of it now and with its layout
    week = [n for n in r.notes if n.startswith("partition month=") and "day BETWEEN" in n]
    assert len(week) == MONTHS and all(n.endswith(": holds") for n in week), r.notes
    assert f"{MONTHS} partition(s) laid out, 0 partition layout(s) kept as they were" in r.notes
    # each partition's sidecar keeps its guard; the layout's options are recorded (a re-layout reuses them)
    table = catalog.load_table("pguard.guarded")
    ptr = layout_pointer(table.properties)
    sc = PartitionedLayoutSidecar.read(table.io, sidecar_path(table.location(), ptr.sidecar))
    assert json.loads(sc.properties["pando.options"])["min-block-rows"] == "500"
    for entry in sc.partitions.values():
        guard = json.loads(entry.sidecar.properties["pando.template-guard"])
        assert guard["holds"] and guard["max_template_regression"] == 1.1, guard
    # the held-out weeks on the files written: within the bound, per partition (the estimate is on
    # the sample: one block of slack)
    assert all(a <= 1.1 * b + 500 for a, b in zip(after, before, strict=True)), dict(zip(HELD_OUT, ratios))
    assert spark.table("pguard.guarded").count() == MONTHS * 4 * WEEK_ROWS


def test_without_the_guard_the_week_is_sacrificed(ctx, spark, catalog):
    _arrival_order_table(spark, "unguarded")
    before = _week_rows(catalog, "unguarded")
    r = _rewrite(ctx, "unguarded", "'max-template-regression', 'off'")
    after = _week_rows(catalog, "unguarded")
    ratios = [a / b for a, b in zip(after, before, strict=True)]
    assert not [n for n in r.notes if "of the table now" in n]
    assert max(ratios) > 1.5, dict(zip(HELD_OUT, ratios))


def test_a_bound_no_partition_can_hold_refuses_until_forced(ctx, spark, catalog):
    """Every template at most half of what it reads of its partition now: the week template reads
    one or two files of its month and no layout reads half a file. Nothing is written, the
    refusal names each partition and the template; force => true applies the layouts."""
    _arrival_order_table(spark, "forced")
    state = _state(catalog, "forced")
    with pytest.raises(ProcedureError, match=r"no partition of pguard\.forced is laid out.*partition month=1: "
                                             r".*day BETWEEN.*force => true"):
        _rewrite(ctx, "forced", "'max-template-regression', '0.5'")
    assert _state(catalog, "forced") == state
    r = _rewrite(ctx, "forced", "'max-template-regression', '0.5'", force=True)
    assert any(n.startswith("partition month=2: forced: ") and "day BETWEEN" in n for n in r.notes), r.notes
    assert _state(catalog, "forced") != state
    assert spark.table("pguard.forced").count() == MONTHS * 4 * WEEK_ROWS
