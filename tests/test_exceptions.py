"""``pando_iceberg.exceptions``: every error Pando raises on purpose is a ``PandoError`` of one
kind, and stays the built-in exception it was (``ValueError`` for bad input, ``RuntimeError`` for
a failure). Each public failure is triggered for real here and caught with ``except PandoError``
and with its kind; an AST scan finds every exception class of the package, so a new one that
does not join the hierarchy fails here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

import pando_iceberg
from pando_iceberg import exceptions as ex
from pando_iceberg.bench.checkpoint import CheckpointError
from pando_iceberg.bench.harness import BenchError
from pando_iceberg.bench.tpcds import TpcdsError
from pando_iceberg.cli import CliError
from pando_iceberg.config import ConfigError
from pando_iceberg.expr import PandoExprError
from pando_iceberg.layout.serialize import LayoutFormatError
from pando_iceberg.planner.pyiceberg_sql import UnsupportedFilter
from pando_iceberg.procedures import ProcedureError
from pando_iceberg.runner import RunbookError
from pando_iceberg.spark.iceberg_jvm import CommitConflict
from pando_iceberg.spark.rewrite_common import PandoRewriteError, TemplateGuardError
from pando_iceberg.spark.session import SparkSetupError, SparkSqlError
from pando_iceberg.storage import SidecarError
from pando_iceberg.table import PandoApiError
from pando_iceberg.tpch import TpchError
from pando_iceberg.workload.model import PandoWorkloadError

PACKAGE = Path(pando_iceberg.__file__).parent

# class → (its kind, the built-in base it always had)
RAISED = {
    ConfigError: (ex.ConfigurationError, ValueError),
    SparkSetupError: (ex.EngineError, RuntimeError),
    SparkSqlError: (ex.EngineError, RuntimeError),
    CommitConflict: (ex.CommitConflictError, RuntimeError),
    SidecarError: (ex.LayoutError, ValueError),
    LayoutFormatError: (ex.LayoutError, ValueError),
    PandoRewriteError: (ex.LayoutError, ValueError),
    TemplateGuardError: (ex.TemplateRegressionError, ValueError),
    PandoWorkloadError: (ex.WorkloadError, ValueError),
    PandoExprError: (ex.PlanningError, ValueError),
    UnsupportedFilter: (ex.PlanningError, ValueError),
    ProcedureError: (ex.UsageError, ValueError),
    RunbookError: (ex.UsageError, ValueError),
    PandoApiError: (ex.UsageError, ValueError),
    CliError: (ex.UsageError, Exception),
    BenchError: (ex.UsageError, ValueError),
    CheckpointError: (ex.UsageError, ValueError),
    TpcdsError: (ex.UsageError, ValueError),
    TpchError: (ex.PandoError, RuntimeError),
}
# Signals between the planner's own functions, caught where they are raised (never reach a caller):
# "this expression is beyond the exact model, prune nothing" and "stop reading keys".
INTERNAL = {"pando_iceberg.planner.metrics.Unsupported", "pando_iceberg.expr.sides.TooComplex",
            "pando_iceberg.expr.sides._NotIntegral",  # bulk sides: that cut is asked one by one
            "pando_iceberg.planner.keysets.TooManyKeys", "pando_iceberg.spark.jvm_filter.UnsupportedFilter",
            "pando_iceberg.serve.errors.RestError"}  # pando serve answers it as an HTTP ErrorModel; no caller sees it


@pytest.mark.parametrize("cls", list(RAISED), ids=lambda c: c.__name__)
def test_each_error_is_its_kind_and_keeps_its_builtin_base(cls: type[Exception]) -> None:
    kind, builtin = RAISED[cls]
    assert issubclass(cls, kind) and issubclass(cls, ex.PandoError) and issubclass(cls, builtin)


def test_the_kinds_are_exported_from_the_package() -> None:
    for name in ex.__all__:
        assert getattr(pando_iceberg, name) is getattr(ex, name) and name in pando_iceberg.__all__
    assert issubclass(ex.TemplateRegressionError, ex.LayoutError)
    assert {c for c in vars(ex).values() if isinstance(c, type) and issubclass(c, ex.PandoError)} == \
        {getattr(ex, n) for n in ex.__all__}


def _exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module of the package: dotted name → class."""
    import importlib
    import pkgutil

    found = {}
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="pando_iceberg."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == info.name:
                found[f"{info.name}.{name}"] = value
    return found


def test_every_exception_class_of_the_package_is_a_pando_error_or_internal() -> None:
    found = _exception_classes()
    assert set(RAISED) <= set(found.values())
    assert {name for name, cls in found.items() if not issubclass(cls, ex.PandoError)} == INTERNAL


# ---- real failures, caught as PandoError ----------------------------------------------------------


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    from pando_iceberg.catalog import load_catalog
    from pando_iceberg.config import load_config

    home = tmp_path_factory.mktemp("errors")
    cat = load_catalog(load_config(home=home, env={}))
    cat.create_namespace_if_not_exists("ns")
    t = cat.create_table("ns.t", pa.schema([("a", pa.int64()), ("s", pa.string())]))
    t.append(pa.table({"a": pa.array([1, 2, 3], pa.int64()), "s": ["x", "y", "z"]}))
    return cat.load_table("ns.t")


def _failures(table) -> dict[str, tuple[type[ex.PandoError], Callable[[], object]]]:
    from pando_iceberg.config import load_config
    from pando_iceberg.layout import Layout
    from pando_iceberg.layout.serialize import layout_from_bytes
    from pando_iceberg.procedures import parse_call
    from pando_iceberg.runner import substitute
    from pando_iceberg.storage import read_puffin_file
    from pando_iceberg.workload.log import parse_instant

    return {
        "configuration": (ex.ConfigurationError, lambda: load_config(env={"PANDO_CATALOG_TYPE": "nosuch"})),
        "planning: unknown column": (ex.PlanningError, lambda: pando_iceberg.scan(table, "nosuch < 5").to_arrow()),
        "layout: option": (ex.LayoutError, lambda: pando_iceberg.LayoutOptions(k=0)),
        "layout: sidecar": (ex.LayoutError, lambda: read_puffin_file(str(Path(table.location()) / "nothing.puffin"))),
        "layout: format": (ex.LayoutError, lambda: layout_from_bytes(b"not a pando layout, just bytes", Layout)),
        "workload": (ex.WorkloadError, lambda: parse_instant("yesterday")),
        "usage: procedure": (ex.UsageError, lambda: parse_call("CALL pando.system.describe_layout(table => )")),
        "usage: runbook": (ex.UsageError, lambda: substitute("CALL x(${nope})", {})),
        "usage: verb": (ex.UsageError, lambda: pando_iceberg.PandoTable(  # a verb that needs Spark, without it
            table.catalog, "ns.t").optimize.layout("SELECT * FROM ns.t WHERE a < 2")),
    }


@pytest.mark.parametrize("failure", ["configuration", "planning: unknown column", "layout: option", "layout: sidecar",
                                     "layout: format", "workload", "usage: procedure", "usage: runbook", "usage: verb"])
def test_a_public_failure_is_caught_as_pando_error_and_as_its_kind(table, failure: str) -> None:
    kind, fail = _failures(table)[failure]
    with pytest.raises(kind) as caught:
        fail()
    assert isinstance(caught.value, ex.PandoError) and str(caught.value)
    try:
        fail()
    except ex.PandoError:
        pass
    else:  # pragma: no cover
        pytest.fail("not raised")


@pytest.mark.spark
def test_a_commit_conflict_and_a_spark_error_are_pando_errors(spark, catalog):
    from pando_iceberg.spark import iceberg_jvm as jv
    from pando_iceberg.spark.session import as_spark_sql_error

    spark.sql("CREATE NAMESPACE IF NOT EXISTS errs")
    spark.sql("CREATE TABLE IF NOT EXISTS errs.t (a BIGINT) USING iceberg")
    spark.sql("INSERT INTO errs.t VALUES (1), (2)")
    jtable = jv.load_table(spark, "errs.t")
    # the base snapshot a rewrite started from was expired before it committed
    with pytest.raises(ex.CommitConflictError, match="no longer exists"):
        jv.commit_replace(spark, jtable, -1, [], [], {})
    try:
        spark.sql("SELECT nosuch FROM errs.t").collect()
    except Exception as e:
        err = as_spark_sql_error(e)
    assert isinstance(err, ex.EngineError) and isinstance(err, ex.PandoError) and "nosuch" in str(err)
