"""Scan planning with Pando layouts on top of pyiceberg (paper §5). No Spark.

    plan = plan_scan(table, "l_shipdate >= date '1995-01-01' AND l_quantity < 24")
    plan.tasks        # pyiceberg FileScanTasks: Iceberg's own pruning, then every Pando tree
    plan.explain      # files/bytes/rows after each stage, per tree, fallback and its reason
    arrow = read_arrow(table, plan)   # the pruned plan read into Arrow, filter applied

Soundness (ARCHITECTURE.md invariant 1): a file is skipped only if it is a file of the current
layout's block → files map, still live, and every tree proves that no row of its block can
satisfy the filter. Files added after the layout are always read. A missing, stale, corrupt or
unreadable layout never fails the scan: it falls back to Iceberg's plan and says why
(invariant 2).
"""

from .scan import ExplainRecord, LayoutCache, ScanPlan, TreeReport, plan_scan, read_arrow, table_filter

__all__ = ["ExplainRecord", "LayoutCache", "ScanPlan", "TreeReport", "plan_scan", "read_arrow", "table_filter"]
