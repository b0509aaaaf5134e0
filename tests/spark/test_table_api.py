"""``PandoTable`` verbs end to end (table.py), asserted on the table's history the way delta-rs
asserts on its log: every rewrite adds exactly ONE snapshot, of operation ``replace``, on top of
the history before it; learning and inspecting add none."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from pando_iceberg import (
    Health,
    IncrementalMetrics,
    LayoutOptions,
    LayoutPrediction,
    LayoutView,
    PandoApiError,
    PandoTable,
    RewriteMetrics,
)
from pando_iceberg.config import ConfigError
from pando_iceberg.spark.rewrite import TemplateGuardError

pytestmark = pytest.mark.spark

WL = ["SELECT * FROM api.orders WHERE o_orderdate < date '1993-06-01'",
      "SELECT * FROM api.orders WHERE o_totalprice > 300000",
      "SELECT count(*) FROM api.orders WHERE o_orderpriority = '1-URGENT' AND o_orderdate >= date '1997-01-01'"]
OPTS = LayoutOptions(k=2, min_block_rows=2000, sample_rate=0.5)
FILTER = "o_orderdate < date '1993-06-01'"


@pytest.fixture(scope="module")
def pt(spark, catalog, lakehouse_cfg, tpch):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS api")
    spark.sql("DROP TABLE IF EXISTS api.orders")
    spark.sql("CREATE TABLE api.orders USING iceberg AS SELECT * FROM tpch.orders WHERE o_orderkey % 2 = 0")
    spark.sql("INSERT INTO api.orders SELECT * FROM tpch.orders WHERE o_orderkey % 2 = 1")
    return PandoTable(catalog, "api.orders", spark=spark, io_properties=lakehouse_cfg.pyiceberg_properties())


def _history(pt: PandoTable) -> list[tuple[int, str]]:
    """(snapshot id, operation) along the current branch, oldest first."""
    table = pt.table
    by_id = {s.snapshot_id: s for s in table.metadata.snapshots}
    return [(h.snapshot_id, by_id[h.snapshot_id].summary.operation.value) for h in table.history()]


def _count(spark, where: str = "TRUE") -> int:
    return spark.sql(f"SELECT count(*) FROM api.orders WHERE {where}").collect()[0][0]


def _one_replace(before, after, metrics: RewriteMetrics) -> None:
    assert after[:-1] == before, "a rewrite must add exactly one snapshot on top of the history"
    assert after[-1][1] == "replace"
    assert metrics.snapshot_id == after[-1][0] and metrics.base_snapshot_id == before[-1][0]


def test_layout_stores_pending_and_rewrite_applies_it_in_one_replace(pt, spark):
    rows = _count(spark)
    before = _history(pt)
    prediction = pt.optimize.layout(WL, options=OPTS)
    # k-selection 'validate' (the default) keeps 1 or 2 trees, whichever validation draws read less of
    assert isinstance(prediction, LayoutPrediction) and prediction.k in (1, 2) and len(prediction.queries) == 3
    assert prediction.pending_layout_id == pt.pending_layout_id
    assert prediction.mean_files_read_with_layout < prediction.files
    assert _history(pt) == before, "learning must not commit a snapshot"
    assert pt.layout is None  # pending only: scans do not use it

    metrics = pt.optimize.rewrite(options=OPTS)
    assert isinstance(metrics, RewriteMetrics) and not isinstance(metrics, IncrementalMetrics)
    assert metrics.notes[0].startswith(f"applied pending layout {prediction.pending_layout_id}")
    _one_replace(before, _history(pt), metrics)
    assert pt.pending_layout_id is None

    view = pt.layout
    assert isinstance(view, LayoutView) and view.layout_id == metrics.layout_id and view.k == prediction.k
    assert len(view.blocks) == metrics.blocks == prediction.blocks
    assert sum(b.rows for b in view.blocks) == rows == _count(spark)
    assert any(n.cut for t in view.trees for n in t.nodes) and all(n.blocks for t in view.trees for n in t.nodes
                                                                     if n.cut is None)
    health = pt.health()
    assert isinstance(health, Health) and health.status == "ok" and health.files_outside_layout == 0

    scan = pt.scan(FILTER)
    assert scan.explain().pando_files < scan.explain().total_files
    assert scan.count() == _count(spark, FILTER)


def test_incremental_lays_out_appended_rows_in_one_replace(pt, spark):
    spark.sql("INSERT INTO api.orders SELECT * FROM tpch.orders WHERE o_orderkey % 3 = 0")
    rows = _count(spark)
    degraded = pt.health(max_rows_outside=0.05)
    assert degraded.status == "degraded" and degraded.rows_outside_layout > 0
    before = _history(pt)
    metrics = pt.optimize.incremental(min_block_rows=500)
    assert isinstance(metrics, IncrementalMetrics) and metrics.committed and metrics.rows_read > 0
    _one_replace(before, _history(pt), metrics)
    assert _count(spark) == rows
    assert pt.scan(FILTER).count() == _count(spark, FILTER)


def test_rewrite_with_a_workload_relearns_in_one_replace(pt, spark):
    before = _history(pt)
    # one tree reads more than the table's layout for a template: the guard (on by default)
    # refuses, force applies it
    with pytest.raises(TemplateGuardError, match="o_orderpriority = "):
        pt.optimize.rewrite(WL, k=1, options=OPTS)
    assert _history(pt) == before
    metrics = pt.optimize.rewrite(WL, k=1, options=OPTS, force=True)
    assert any(n.startswith("forced: o_orderpriority = ") for n in metrics.notes), metrics.notes
    _one_replace(before, _history(pt), metrics)
    view = pt.layout
    assert view is not None and view.k == 1 and view.layout_id == metrics.layout_id
    assert pt.health().files_outside_layout == 0


def test_refresh_literal_cuts_without_literal_cuts_changes_nothing(pt):
    before = _history(pt)
    layout_id = pt.layout.layout_id
    r = pt.optimize.refresh_literal_cuts()
    assert r.cuts == () and not r.changed and r.layout_id == layout_id
    assert _history(pt) == before


def test_remove_layout(pt, spark):
    layout_id = pt.layout.layout_id
    removed = pt.remove_layout()
    assert removed.layout_id == layout_id and removed.sidecar_deleted
    assert pt.layout is None and pt.health().status == "no layout"
    assert pt.remove_layout().layout_id is None
    assert not pt.scan(FILTER).explain().used_layout
    assert pt.scan(FILTER).count() == _count(spark, FILTER)


def test_bad_input_names_what_is_accepted(pt, catalog):
    with pytest.raises(PandoApiError, match=r"table 'api\.nope' does not exist; tables in catalog"):
        PandoTable(catalog, "api.nope")
    with pytest.raises(TypeError, match=r"pyiceberg Catalog"):
        PandoTable(42, "api.orders")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"catalog 'nowhere' is neither Pando's configured catalog .* accepted: "):
        PandoTable("nowhere", "api.orders")
    with pytest.raises(PandoApiError, match=r"optimize\.rewrite: needs a Spark session"):
        PandoTable(catalog, "api.orders").optimize.rewrite(WL)
    with pytest.raises(ValueError, match=r"'k' must be between 1 and 8, got 0"):
        LayoutOptions(k=0)
    with pytest.raises(TypeError, match=r"LayoutOptions\.k must be an integer, got '3'"):
        LayoutOptions(k="3")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"'options' must be a pando_iceberg\.LayoutOptions"):
        pt.optimize.rewrite(WL, options={"k": "2"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"'workload' must be SQL text"):
        pt.optimize.layout(42)  # type: ignore[arg-type]
    with pytest.raises(PandoApiError, match=r"'where' selects partitions, but api\.orders is not partitioned"):
        pt.optimize.rewrite(WL, where="o_orderdate > date '1995-01-01'")
    assert LayoutOptions.from_map({"k": "2", "sample-rate": "0.5"}) == LayoutOptions(k=2, sample_rate=0.5)
    assert LayoutOptions.from_map(OPTS.to_map()) == OPTS


def test_options_and_incremental_counts_are_defined_once():
    """Issue 18: LayoutOptions/RewriteOptions and IncrementalMetrics/IncrementalResult take their
    fields and defaults from one definition each (both option classes inherit OptionFields and
    declare no field of their own; IncrementalResult repeats IncrementalFields, checked at import)."""
    from pando_iceberg.spark.rewrite import RewriteOptions
    from pando_iceberg.spark.rewrite_common import IncrementalFields, IncrementalResult, OptionFields

    def spec(cls: type) -> list[tuple[str, object, object]]:
        return [(f.name, f.type, f.default) for f in dataclasses.fields(cls)]

    assert spec(LayoutOptions) == spec(RewriteOptions) == spec(OptionFields)
    assert RewriteOptions.OPTION_NAMES == {f.name.replace("_", "-"): f.name for f in dataclasses.fields(OptionFields)}
    assert "k-selection" in RewriteOptions.OPTION_NAMES and "min-block-rows" in RewriteOptions.OPTION_NAMES
    with pytest.raises(dataclasses.FrozenInstanceError):
        OPTS.k = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        RewriteOptions().k = 1  # type: ignore[misc]
    assert issubclass(RewriteOptions, OptionFields) and issubclass(LayoutOptions, OptionFields)
    assert "k" not in inspect.get_annotations(RewriteOptions)  # inherited, not repeated
    assert dataclasses.replace(RewriteOptions(), k=1).k == 1
    assert LayoutOptions().to_rewrite_options() == RewriteOptions()
    assert spec(IncrementalMetrics)[-6:] == spec(IncrementalResult)[-7:-1] == spec(IncrementalFields)
    common = [f.name for f in dataclasses.fields(RewriteMetrics)]
    assert [f.name for f in dataclasses.fields(IncrementalMetrics)][:len(common)] == common
    assert [f.name for f in dataclasses.fields(IncrementalResult)][-1] == "notes"
