"""A table's layout defaults stored with it: the table properties ``pando.layout.<option>`` that
the verbs, the procedures and so the runbooks take for an option not given (option > table
property > built-in default); a malformed property fails naming it."""

from __future__ import annotations

import pytest

from pando_iceberg import LayoutOptions, PandoTable
from pando_iceberg.procedures import ProcedureContext, call
from pando_iceberg.spark.rewrite import PandoRewriteError

pytestmark = pytest.mark.spark

T = "tdefaults.t"
WL = [f"SELECT count(*) FROM {T} WHERE a < {x}" for x in (400, 1300, 2100, 3000)]


@pytest.fixture(scope="module")
def pt(spark, catalog, lakehouse_cfg):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS tdefaults")
    spark.sql(f"DROP TABLE IF EXISTS {T}")
    spark.sql(f"CREATE TABLE {T} USING iceberg AS SELECT CAST(id * 7919 % 4000 AS INT) AS a, id AS b "
              "FROM range(4000)")
    spark.sql(f"ALTER TABLE {T} SET TBLPROPERTIES ('pando.layout.k' = '1', 'pando.layout.min-block-rows' = '500', "
              "'pando.layout.sample-rate' = '1.0', 'pando.layout.k-selection' = 'fixed', "
              # each rewrite here changes the block size on purpose: no per-template guard
              "'pando.layout.max-template-regression' = 'off')")
    return PandoTable(catalog, T, spark=spark, io_properties=lakehouse_cfg.pyiceberg_properties())


def test_options_not_given_come_from_the_tables_properties(pt):
    opts = pt.optimize.resolved_options()
    assert (opts.k, opts.min_block_rows, opts.sample_rate, opts.k_selection) == (1, 500, 1.0, "fixed")
    assert opts.seed == LayoutOptions().seed  # no property: the default
    given = pt.optimize.resolved_options(options=LayoutOptions(k=2, min_block_rows=1000))
    assert (given.k, given.min_block_rows, given.sample_rate) == (2, 1000, 1.0)
    assert pt.optimize.resolved_options(k=3, options=LayoutOptions(min_block_rows=800)).k == 3
    mapped = pt.optimize.resolved_options(options=LayoutOptions.from_map({"min-block-rows": "700"}))
    assert (mapped.k, mapped.min_block_rows) == (1, 700)


def test_a_rewrite_without_options_uses_the_tables_k_and_block_size(pt, spark):
    metrics = pt.optimize.rewrite(WL)
    assert pt.layout.k == 1
    assert 1 < metrics.blocks <= 4000 // 500  # blocks of at least 500 rows (the default, 100,000, makes one)
    metrics = pt.optimize.rewrite(WL, k=2, relearn=True)  # an option given wins over the property
    assert pt.layout.k == 2 and 1 < metrics.blocks <= 4000 // 500


def test_the_procedure_takes_the_tables_defaults(pt, spark, catalog, lakehouse_cfg):
    spark.sql(f"ALTER TABLE {T} SET TBLPROPERTIES ('pando.layout.min-block-rows' = '1000')")
    ctx = ProcedureContext(lakehouse_cfg, catalog, lambda: spark)
    workload = "; ".join(WL).replace('"', "")
    result = call(ctx, f"CALL pando.system.rewrite_data_files(table => '{T}', strategy => 'pando', "
                       f"workload => \"{workload}\")")
    blocks = dict(zip(result.names, result.rows[0], strict=True))["block_count"]
    assert 1 < blocks <= 4000 // 1000
    assert pt.layout.k == 1


def test_a_malformed_property_names_itself(pt, spark):
    spark.sql(f"ALTER TABLE {T} SET TBLPROPERTIES ('pando.layout.k' = 'nine')")
    try:
        with pytest.raises(PandoRewriteError, match=r"table property pando\.layout\.k = 'nine' is not accepted: "
                                                    r"option 'k' must be an integer"):
            pt.optimize.resolved_options()
        assert pt.optimize.resolved_options(k=2).k == 2  # given: the property is not read
        spark.sql(f"ALTER TABLE {T} SET TBLPROPERTIES ('pando.layout.k' = '9')")
        with pytest.raises(PandoRewriteError, match=r"pando\.layout\.k = '9' .*between 1 and 8"):
            pt.optimize.rewrite(WL, relearn=True)
    finally:
        spark.sql(f"ALTER TABLE {T} SET TBLPROPERTIES ('pando.layout.k' = '1')")


def test_a_relayout_from_the_recorded_workload_learns_with_the_current_layouts_options(spark, catalog, lakehouse_cfg):
    """Without a workload, rewrite_data_files learns from the recorded one with the options the
    current layout was learned with (not the built-in defaults: 100,000 rows per block would make
    this table one block); a pending layout of optimize_layout is still applied as it was learned."""
    name = "tdefaults.relayout"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} USING iceberg TBLPROPERTIES ('pando.layout.max-template-regression' = 'off') "
              "AS SELECT CAST(id * 7919 % 4000 AS INT) AS a, id AS b FROM range(4000)")
    ctx = ProcedureContext(lakehouse_cfg, catalog, lambda: spark)
    workload = "; ".join(WL).replace(T, name)

    def blocks(result) -> int:
        return int(dict(zip(result.names, result.rows[0], strict=True))["block_count"])

    first = call(ctx, f"CALL pando.system.rewrite_data_files(table => '{name}', strategy => 'pando', "
                      f"workload => \"{workload}\", options => map('k', '1', 'min-block-rows', '500', "
                      "'sample-rate', '1.0', 'k-selection', 'fixed'))")
    assert blocks(first) > 1
    again = call(ctx, f"CALL pando.system.rewrite_data_files(table => '{name}', strategy => 'pando', relearn => true)")
    reused = [n for n in again.notes if n.startswith("options of the current layout reused: ")]
    assert reused and "min-block-rows=500" in reused[0] and "k=1" in reused[0], again.notes
    assert "max-template-regression" not in reused[0]  # a table property: it decides, not the record
    assert blocks(again) > 1
    call(ctx, f"CALL pando.system.optimize_layout(table => '{name}', workload => \"{workload}\")")
    applied = call(ctx, f"CALL pando.system.rewrite_data_files(table => '{name}', strategy => 'pando')")
    assert any(n.startswith("applied pending layout") for n in applied.notes), applied.notes
    assert not any(n.startswith("options of the current layout reused") for n in applied.notes)
