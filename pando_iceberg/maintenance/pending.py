"""Pending layouts: what ``optimize_layout`` learns and stores without rewriting data, and what
a later ``rewrite_data_files(strategy => 'pando')`` applies without learning again.

A pending layout is a sidecar like any other (``<table location>.pando/<id>.puffin``, the
same blobs, an empty block → files map, file property ``pando.pending = true``), pointed to
by its own table properties:

==================================  ===========================================================
``pando.pending-layout-id``         the pending layout's id
``pando.pending-sidecar``           its sidecar's bare file name
``pando.pending-base-snapshot-id``  the snapshot it was learned from
==================================  ===========================================================

The planner reads only the ``pando.layout-id`` pointer (``storage/pointer.py``), so a pending
layout never prunes a scan: no data file follows it until a rewrite applies it. Applying it
writes a new sidecar with the real block → files map, then these properties and the pending
sidecar are removed.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from ..storage.paths import check_sidecar_name, sidecar_path

P_PENDING_ID = "pando.pending-layout-id"
P_PENDING_SIDECAR = "pando.pending-sidecar"
P_PENDING_BASE = "pando.pending-base-snapshot-id"
PENDING_PROPERTIES = (P_PENDING_ID, P_PENDING_SIDECAR, P_PENDING_BASE)
# Sidecar file properties of a pending layout.
S_PENDING = "pando.pending"
S_LEARN_OPTIONS = "pando.learn-options"  # JSON: the RewriteOptions that shape learning
S_REQUEST = "pando.workload-request"  # JSON: the workload arguments optimize_layout was given

LEARNING_OPTIONS = ("k", "sample_rate", "sample_rows_per_block", "seed", "min_block_rows", "min_sample_rows",
                    "max_ktuples", "template_draws", "in_block_order", "k_selection", "max_template_regression")


def learning_options(options: Any) -> dict[str, Any]:
    """The options that change what is learned (not e.g. the target file size)."""
    return {k: v for k, v in asdict(options).items() if k in LEARNING_OPTIONS}


def store_pending(tbl: Any, learned: Any, options: Any, request: dict[str, Any], base_snapshot_id: int) -> Any:
    """Write the learned (not applied) layout's sidecar and point the table's pending properties
    at it (one property-only commit); an older pending layout's sidecar is deleted."""
    from ..storage.sidecar import LayoutSidecar, new_layout_id

    previous = tbl.properties.get(P_PENDING_SIDECAR)
    sidecar = LayoutSidecar.from_layout(
        learned.layout, layout_id=new_layout_id(), table_uuid=tbl.metadata.table_uuid, block_files={},
        base_snapshot_id=base_snapshot_id,
        properties={S_PENDING: "true", **learned.properties(),
                    S_LEARN_OPTIONS: json.dumps(learning_options(options), sort_keys=True),
                    S_REQUEST: json.dumps(request, sort_keys=True)})
    sidecar.write(tbl.io, tbl.location())
    with tbl.transaction() as tx:
        tx.set_properties({P_PENDING_ID: sidecar.layout_id, P_PENDING_SIDECAR: sidecar.file_name,
                           P_PENDING_BASE: str(base_snapshot_id)})
    if previous and previous != sidecar.file_name:
        _delete_quietly(tbl, previous)
    return sidecar


def load_pending(tbl: Any) -> Any:
    """The table's pending layout sidecar, or None when it has none."""
    from ..storage.sidecar import LayoutSidecar

    name = tbl.properties.get(P_PENDING_SIDECAR)
    if not name:
        return None
    return LayoutSidecar.read(tbl.io, sidecar_path(tbl.location(), check_sidecar_name(name)),
                              expected_layout_id=tbl.properties.get(P_PENDING_ID),
                              expected_table_uuid=tbl.metadata.table_uuid)


def clear_pending(tbl: Any) -> str | None:
    """Remove the pending properties and sidecar; returns the pending layout id, if there was one."""
    present = [p for p in PENDING_PROPERTIES if p in tbl.properties]
    if not present:
        return None
    layout_id, name = tbl.properties.get(P_PENDING_ID), tbl.properties.get(P_PENDING_SIDECAR)
    with tbl.transaction() as tx:
        tx.remove_properties(*present)
    if name:
        _delete_quietly(tbl, name)
    return layout_id


def matches(sidecar: Any, options: Any, request: dict[str, Any]) -> str | None:
    """None if ``rewrite_data_files`` may apply this pending layout as is; else why not."""
    stored = json.loads(sidecar.properties.get(S_LEARN_OPTIONS, "{}"))
    wanted = learning_options(options)
    changed = sorted(k for k in wanted if k in stored and stored[k] != wanted[k])
    if changed:
        return f"learning options differ from optimize_layout's ({', '.join(changed)})"
    asked = {k: v for k, v in request.items() if v is not None}
    if asked and asked != {k: v for k, v in json.loads(sidecar.properties.get(S_REQUEST, "{}")).items()
                           if v is not None}:
        return "the workload arguments differ from optimize_layout's"
    return None


def learned_from_pending(spark: Any, table_name: str, sidecar: Any) -> Any:
    """A ``LearnedLayout`` for ``rewrite_table(learned=...)`` from a pending sidecar: the stored
    layout and key sets, the stored workload parsed again for the expected-fraction estimate, and
    the per-template guard as measured when it was learned (the rewrite refuses it as it would
    a layout learned then)."""
    from ..spark.rewrite import P_IN_BLOCK, P_K_SELECTION, P_TEMPLATE_GUARD, LearnedLayout
    from ..spark.rewrite_common import identifier_fields, namespace_schemas, schema_key
    from ..workload import parse_workload
    from ..workload.in_block import InBlockOrder, TemplateGuard

    layout = sidecar.load_layout()
    workload = [tuple(x) if isinstance(x, list) else x
                for x in json.loads(sidecar.properties.get("pando.workload", "[]"))]
    schemas = namespace_schemas(spark, table_name)
    target = schema_key(table_name, schemas)
    pks = {name: identifier_fields(spark, name) for name in schemas}
    wl = parse_workload(workload, schemas, primary_keys={k: v for k, v in pks.items() if v})
    queries = [(q.filters[target], q.weight) for q in wl.queries if target in q.filters]
    literal_keys = {c.key: c.keys_to_bytes() for c in layout.cuts if hasattr(c, "keys_to_bytes")}
    in_block = json.loads(sidecar.properties.get(P_IN_BLOCK, "null"))
    guard = json.loads(sidecar.properties.get(P_TEMPLATE_GUARD, "null"))
    return LearnedLayout(layout, literal_keys, 0, 0, len(queries), len(layout.cuts), list(wl.unsupported),
                         queries=queries, workload_sql=[(q.sql, q.weight) for q in wl.queries if target in q.filters],
                         templates=json.loads(sidecar.properties.get("pando.templates", "[]")),
                         in_block=None if in_block is None else InBlockOrder(
                             in_block["column"], in_block.get("workload_rows_fraction", {})),
                         k_selection=json.loads(sidecar.properties.get(P_K_SELECTION, "null")),
                         guard=None if guard is None else TemplateGuard.from_json(guard))


def _delete_quietly(tbl: Any, name: str) -> None:
    from ..storage.paths import delete_sidecar

    try:
        delete_sidecar(tbl.io, tbl.location(), name)
    except Exception:  # a leftover sidecar is listed (and removable) by `pando cleanup`
        pass
