"""SQL workload → per-table filters, candidate cuts, join graph and join-induced cuts (§6.1, §7)."""

from pando_iceberg.workload.extraction import parse_query, parse_workload
from pando_iceberg.workload.join_scopes import has_subquery
from pando_iceberg.workload.model import (
    ArrowKeyProvider,
    JoinEdge,
    PandoWorkloadError,
    UnsupportedPredicate,
    Workload,
    WorkloadQuery,
    arrow_key_provider,
    dimension_atoms,
)
from pando_iceberg.workload.qualify import qualify_query

__all__ = [
    "ArrowKeyProvider",
    "JoinEdge",
    "PandoWorkloadError",
    "UnsupportedPredicate",
    "Workload",
    "WorkloadQuery",
    "arrow_key_provider",
    "dimension_atoms",
    "has_subquery",
    "parse_query",
    "parse_workload",
    "qualify_query",
]
