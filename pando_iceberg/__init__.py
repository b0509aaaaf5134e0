"""pando-iceberg: Pando learned multi-tree layouts for Apache Iceberg.

The public Python API (loaded on first use, so that importing an internal module never imports
these facades back):

    pando_iceberg.scan(table, row_filter=...)          # a pyiceberg DataScan planned with the trees
    pando_iceberg.PandoTable(catalog, "db.t", spark=spark).optimize.rewrite(workload, k=3)
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "scan": "datascan", "PandoDataScan": "datascan",
    "PandoTable": "table", "LayoutOptions": "table", "LayoutPrediction": "table", "QueryPrediction": "table",
    "RewriteMetrics": "table", "IncrementalMetrics": "table", "LiteralCutsRefresh": "table",
    "LiteralCutChange": "table", "TableOptimizer": "table", "LayoutView": "table",
    "TreeView": "table", "NodeView": "table", "BlockView": "table", "PartitionLayoutView": "table",
    "Health": "table", "RemovedLayout": "table", "PandoApiError": "table",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pando_iceberg' has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
