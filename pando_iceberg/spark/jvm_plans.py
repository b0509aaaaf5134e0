"""What Spark's executed plan of a DataFrame did: its Iceberg scans (files read and skipped, rows)
and shuffles, walked through py4j after an action; and its scans planned without running it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .jvm_classes import helper

SCAN_METRICS = ("resultDataFiles", "skippedDataFiles", "totalDataFileSize", "numOutputRows")


def executed_nodes(df) -> Iterator[tuple[Any, bool]]:
    """The nodes of the plan an action on ``df`` executed, each with whether it is in the final
    plan. Call after an action ran on ``df``.

    Adaptive query execution hides finished stages behind query-stage nodes, and when a stage's
    result makes the rest of the plan empty (TPC-H Q18 at small scale: no order passes the HAVING)
    it replaces the whole final plan by an empty ``LocalTableScan``. So the walk covers the final
    plan and the initial plan (``final`` False: nodes there may never have run)."""
    def visit(node, final: bool) -> Iterator[tuple[Any, bool]]:
        yield node, final
        children = node.children()
        for i in range(children.size()):
            yield from visit(children.apply(i), final)
        kind = node.getClass().getSimpleName()
        if kind == "AdaptiveSparkPlanExec":
            yield from visit(node.executedPlan(), final)
            yield from visit(node.initialPlan(), False)
        elif kind.endswith("QueryStageExec"):
            yield from visit(node.plan(), final)

    yield from visit(df._jdf.queryExecution().executedPlan(), True)


def planned_partitions(df, *, in_jvm: bool = True) -> int:
    """Build ``df``'s executed plan and every Iceberg scan's input partitions in it (the initial
    plan under adaptive execution: where Iceberg plans its file tasks), without running it; the
    number of input partitions. One JVM call (``PlannedPartitions.java``); through py4j, a node at a
    time, when ``in_jvm`` is False or the helper cannot be compiled."""
    root = df._jdf.queryExecution().executedPlan()
    method = helper("PlannedPartitions", "plannedPartitions", ("java.lang.Object",)) if in_jvm else None
    if method is not None:
        return int(method(root))
    total, stack, seen = 0, [root], set()
    while stack:
        node = stack.pop()
        if int(node.id()) in seen:
            continue
        seen.add(int(node.id()))
        if node.nodeName().startswith("BatchScan"):
            total += int(node.inputPartitions().size())
        if node.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
            stack.append(node.initialPlan())
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
    return total


def executed_scans(df) -> list[tuple[str, dict[str, int]]]:
    """The scans an action on ``df`` executed: ``(table name, metrics)`` per ``BatchScan`` node
    (Iceberg's resultDataFiles / skippedDataFiles / totalDataFileSize where the scan reports them,
    numOutputRows), each node once (by plan id; :func:`executed_nodes`): a node only in the
    initial plan counts if it ran (it produced rows or read files)."""
    found: dict[int, tuple[str, dict[str, int], bool]] = {}
    for node, final in executed_nodes(df):
        if node.nodeName().startswith("BatchScan"):
            metrics = node.metrics()
            m = {k: int(metrics.apply(k).value()) for k in SCAN_METRICS if metrics.contains(k)}
            name = str(node.nodeName())[len("BatchScan"):].strip()
            key = int(node.id())
            found[key] = (name, m, final or (key in found and found[key][2]))
    return [(name, m) for name, m, final in found.values()
            if final or m.get("numOutputRows", 0) or m.get("resultDataFiles", 0)]


def executed_shuffle_ids(df) -> set[int]:
    """The shuffles an action on ``df`` wrote: the exchanges whose shuffle dependency exists, which
    Spark creates when the exchange first runs and then sets the exchange's ``numPartitions``
    metric (an exchange that never ran is not asked for its dependency: asking would create and
    register a new shuffle)."""
    ids = set()
    for node, _ in executed_nodes(df):
        if node.getClass().getSimpleName() == "ShuffleExchangeExec":
            metrics = node.metrics()
            if metrics.contains("numPartitions") and int(metrics.apply("numPartitions").value()) > 0:
                ids.add(int(node.shuffleDependency().shuffleId()))
    return ids


def scan_metrics(df) -> dict[str, int]:
    """:func:`executed_scans`' metrics summed over every executed scan."""
    totals: dict[str, int] = {}
    for _, m in executed_scans(df):
        for k, v in m.items():
            totals[k] = totals.get(k, 0) + v
    return totals
