"""pando-iceberg: Pando learned multi-tree layouts for Apache Iceberg.

The public Python API::

    pando_iceberg.scan(table, row_filter=...)          # a pyiceberg DataScan planned with the trees
    pando_iceberg.PandoTable(catalog, "db.t", spark=spark).optimize.rewrite(workload, k=3)
    pando_iceberg.enable(spark)                        # spark.sql("CALL pando.system.<procedure>(...)")
    with pando_iceberg.pruning(spark): spark.sql(q)    # spark.sql's queries read the files Pando keeps

The scan and the table verbs are imported on first use (``import pando_iceberg`` and the ``pando``
command stay quick, and an internal module never imports these facades back); type checkers
see them through the imports below. The errors (``pando_iceberg.exceptions``) are imported at once.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .exceptions import (
    CommitConflictError,
    ConfigurationError,
    EngineError,
    LayoutError,
    PandoError,
    PlanningError,
    TemplateRegressionError,
    UsageError,
    WorkloadError,
)
from .version import __version__

if TYPE_CHECKING:
    from .datascan import PandoDataScan, scan
    from .procedures.spark_sql import disable, enable, pruning
    from .table import (
        BlockView,
        Health,
        IncrementalMetrics,
        LayoutOptions,
        LayoutPrediction,
        LayoutView,
        LiteralCutChange,
        LiteralCutsRefresh,
        NodeView,
        PandoApiError,
        PandoTable,
        PartitionLayoutView,
        QueryPrediction,
        RemovedLayout,
        RewriteMetrics,
        TableOptimizer,
        TreeView,
    )

# name → the module that defines it, imported by __getattr__ on first use
_LAZY = {
    "scan": "datascan", "PandoDataScan": "datascan",
    "enable": "procedures.spark_sql", "disable": "procedures.spark_sql", "pruning": "procedures.spark_sql",
    **{name: "table" for name in (
        "PandoTable", "TableOptimizer", "LayoutOptions", "LayoutPrediction", "QueryPrediction", "RewriteMetrics",
        "IncrementalMetrics", "LiteralCutsRefresh", "LiteralCutChange", "LayoutView", "TreeView", "NodeView",
        "BlockView", "PartitionLayoutView", "Health", "RemovedLayout", "PandoApiError")},
}

__all__ = [
    "BlockView",
    "CommitConflictError",
    "ConfigurationError",
    "EngineError",
    "Health",
    "IncrementalMetrics",
    "LayoutError",
    "LayoutOptions",
    "LayoutPrediction",
    "LayoutView",
    "LiteralCutChange",
    "LiteralCutsRefresh",
    "NodeView",
    "PandoApiError",
    "PandoDataScan",
    "PandoError",
    "PandoTable",
    "PartitionLayoutView",
    "PlanningError",
    "QueryPrediction",
    "RemovedLayout",
    "RewriteMetrics",
    "TableOptimizer",
    "TemplateRegressionError",
    "TreeView",
    "UsageError",
    "WorkloadError",
    "__version__",
    "disable",
    "enable",
    "pruning",
    "scan",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pando_iceberg' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next lookup finds it without __getattr__
    return value
