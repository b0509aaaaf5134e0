"""The Iceberg REST catalog routes over a pyiceberg catalog, with server-side scan planning.

Routes (the REST specification's paths, no prefix): config; namespaces list/create/load/exists/
drop/properties; tables list/create/load/exists/commit/drop/register and rename; planTableScan
(``POST .../plan``), fetchPlanningResult (``GET .../plan/{plan-id}``), cancelPlanning
(``DELETE .../plan/{plan-id}``) and fetchScanTasks (``POST .../tasks``). Request and response
bodies are pyiceberg's own models. Catalog and planning work runs in the server's thread pool;
the planner's caches are process-wide, bounded and locked (``planner.caches``), so concurrent
requests share them.

Every route checks the bearer token when one is set, every request body is limited to
``max_request_bytes``, and every failure answers with the REST ErrorModel (``errors.py``).
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import Field
from pydantic import ValidationError as PydanticValidationError
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import (
    DEFAULT_NAMESPACE_SEPARATOR,
    SCAN_PLANNING_MODE,
    Capability,
    CreateTableRequest,
    ListNamespaceResponse,
    ListTableResponseEntry,
    ListTablesResponse,
    NamespaceResponse,
    RegisterTableRequest,
    TableResponse,
    UpdateNamespacePropertiesResponse,
)
from pyiceberg.catalog.rest.scan_planning import FetchScanTasksRequest, PlanTableScanRequest
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.table import CommitTableRequest, Table, TableIdentifier
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from pyiceberg.table.update import AssertCreate
from pyiceberg.typedef import IcebergBaseModel, Identifier, Properties
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import RestError, as_rest_error, bad_request, error_body
from .planning import Planned, PlanStore, build, completed_plan, plan_request

log = logging.getLogger("pando_iceberg.serve")

__all__ = ["ServeOptions", "create_app"]

# The endpoints advertised in the config response (pyiceberg checks each call against them).
ENDPOINTS = [str(e) for e in (
    Capability.V1_LIST_NAMESPACES, Capability.V1_LOAD_NAMESPACE, Capability.V1_NAMESPACE_EXISTS,
    Capability.V1_UPDATE_NAMESPACE, Capability.V1_CREATE_NAMESPACE, Capability.V1_DELETE_NAMESPACE,
    Capability.V1_LIST_TABLES, Capability.V1_LOAD_TABLE, Capability.V1_TABLE_EXISTS, Capability.V1_CREATE_TABLE,
    Capability.V1_UPDATE_TABLE, Capability.V1_DELETE_TABLE, Capability.V1_RENAME_TABLE,
    Capability.V1_REGISTER_TABLE, Capability.V1_SUBMIT_TABLE_SCAN_PLAN, Capability.V1_TABLE_SCAN_PLAN_TASKS)] + [
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
]


@dataclass
class ServeOptions:
    """``token``: the bearer token every request must carry (None: no check).
    ``max_request_bytes``: larger request bodies are answered 413.
    ``tasks_per_page``: plans with more file scan tasks answer with plan-task tokens, one page each.
    ``max_plans``: completed plans kept for fetchPlanningResult and their pages."""

    token: str | None = None
    max_request_bytes: int = 8 * 1024 * 1024
    tasks_per_page: int = 1000
    max_plans: int = 256


class CreateNamespaceRequest(IcebergBaseModel):
    namespace: Identifier
    properties: Properties = Field(default_factory=dict)


class UpdateNamespacePropertiesRequest(IcebergBaseModel):
    removals: list[str] = Field(default_factory=list)
    updates: Properties = Field(default_factory=dict)


class CreateTableBody(CreateTableRequest):
    """pyiceberg's ``CreateTableRequest`` with the fields the specification makes optional
    optional (pyiceberg's client leaves out the ones it has no value for)."""

    location: str | None = Field(default=None)
    partition_spec: PartitionSpec | None = Field(alias="partition-spec", default=None)
    write_order: SortOrder | None = Field(alias="write-order", default=None)


class CommitTableBody(CommitTableRequest):
    """pyiceberg's ``CommitTableRequest``; the identifier is optional (the path names the table)."""

    identifier: TableIdentifier | None = Field(default=None)  # type: ignore[assignment]


class _Named:
    """A table known by its name only: what a SQL catalog's ``commit_table`` reads of a table that
    a commit with ``assert-create`` creates."""

    def __init__(self, identifier: tuple[str, ...]):
        self.identifier = identifier

    def name(self) -> tuple[str, ...]:
        return self.identifier


class RenameTableRequest(IcebergBaseModel):
    source: TableIdentifier
    destination: TableIdentifier


def _json(model: IcebergBaseModel, status: int = 200) -> Response:
    # serialize_as_any: fields typed BooleanExpression (a task's residual) hold its subclasses
    return Response(model.model_dump_json(serialize_as_any=True), status_code=status, media_type="application/json")


def _error(e: RestError) -> Response:
    return Response(error_body(e.status, e.type, e.message), status_code=e.status, media_type="application/json")


def namespace_levels(raw: str) -> tuple[str, ...]:
    """A namespace path parameter: its levels joined by the unit separator (0x1F)."""
    parts = tuple(unquote(raw).split(DEFAULT_NAMESPACE_SEPARATOR))
    if not all(parts):
        raise bad_request(f"namespace {raw!r} has an empty level; accepted: levels joined by %1F")
    return parts


def _parse(model: type[IcebergBaseModel], body: bytes) -> Any:
    """``body`` as ``model``; 400 naming the specification's request (``...Request``) and each problem."""
    name = model.__name__.removesuffix("Body") + "Request" if model.__name__.endswith("Body") else model.__name__
    try:
        return model.model_validate_json(body or b"{}")
    except PydanticValidationError as e:
        detail = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}" for err in e.errors())
        raise bad_request(f"invalid {name} body: {detail}") from None
    except (TypeError, ValueError) as e:  # pyiceberg's expression parser: an unknown expression type
        raise bad_request(f"invalid {name} body: {e}; accepted: the Iceberg REST expression JSON "
                          "(filter types and, or, not, lt, lt-eq, gt, gt-eq, eq, not-eq, in, not-in, is-null, "
                          "not-null, is-nan, not-nan, starts-with, not-starts-with, true, false)") from None


async def call_blocking(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in the thread pool; a catalog's exception as its REST error."""
    try:
        return await run_in_threadpool(fn, *args)
    except RestError:
        raise
    except Exception as e:
        rest = as_rest_error(e)
        if rest is None:
            raise
        raise rest from None


class _Guard:
    """Every request: the bearer token when one is set (401 otherwise) and the body size
    (413 past ``max_request_bytes``, by Content-Length or as the body arrives)."""

    def __init__(self, app: ASGIApp, options: ServeOptions):
        self.app = app
        self.options = options
        self.expected = f"Bearer {options.token}".encode() if options.token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if self.expected is not None and not hmac.compare_digest(headers.get(b"authorization", b""), self.expected):
            await self._reject(send, RestError(401, "NotAuthorizedException",
                                               "missing or wrong bearer token (Authorization: Bearer <token>)"))
            return
        limit = self.options.max_request_bytes
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await self._reject(send, _too_large(limit))
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _too_large(limit)
            return message

        await self.app(scope, limited, send)

    @staticmethod
    async def _reject(send: Send, e: RestError) -> None:
        body = error_body(e.status, e.type, e.message)
        await send({"type": "http.response.start", "status": e.status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def _too_large(limit: int) -> RestError:
    return RestError(413, "RequestTooLargeException", f"request body larger than {limit} bytes (the server's limit)")


def create_app(catalog: Catalog, options: ServeOptions | None = None) -> FastAPI:
    """The REST catalog app over ``catalog`` (a pyiceberg catalog; ``pando_iceberg.catalog.load_catalog``
    gives the configured one)."""
    from ..catalog import load_table

    opts = options or ServeOptions()
    app = base_app(opts)

    def table_of(namespace: str, table: str, _: Request | None = None) -> Table:
        ident = (*namespace_levels(namespace), unquote(table))
        return load_table(catalog, ident)

    # ---- config ---------------------------------------------------------------------------------

    @app.get("/v1/config")
    async def get_config() -> Response:
        # scan-planning-mode=server by default: a client plans through Pando unless it sets
        # scan-planning-mode=client itself. Endpoints as the specification writes them ("GET /v1/...").
        body = {"defaults": {SCAN_PLANNING_MODE: "server"}, "overrides": {}, "endpoints": ENDPOINTS}
        return Response(json.dumps(body), media_type="application/json")

    # ---- namespaces -----------------------------------------------------------------------------

    @app.get("/v1/namespaces")
    async def list_namespaces(parent: str | None = None) -> Response:
        ns = namespace_levels(parent) if parent else ()
        if ns and not await call_blocking(catalog.namespace_exists, ns):
            raise RestError(404, "NoSuchNamespaceException", f"namespace {'.'.join(ns)} does not exist")
        found = await call_blocking(catalog.list_namespaces, ns)
        return _json(ListNamespaceResponse(namespaces=[tuple(n) for n in found]))

    @app.post("/v1/namespaces")
    async def create_namespace(request: Request) -> Response:
        req = _parse(CreateNamespaceRequest, await request.body())
        if not req.namespace or not all(req.namespace):
            raise bad_request("namespace must be a non-empty list of non-empty levels, e.g. [\"db\"]")
        await call_blocking(catalog.create_namespace, tuple(req.namespace), req.properties)
        props = await call_blocking(catalog.load_namespace_properties, tuple(req.namespace))
        return _json(NamespaceResponse(namespace=tuple(req.namespace), properties=props))

    @app.get("/v1/namespaces/{namespace}")
    async def load_namespace(namespace: str) -> Response:
        ns = namespace_levels(namespace)
        props = await call_blocking(catalog.load_namespace_properties, ns)
        return _json(NamespaceResponse(namespace=ns, properties=props))

    @app.head("/v1/namespaces/{namespace}")
    async def namespace_exists(namespace: str) -> Response:
        exists = await call_blocking(catalog.namespace_exists, namespace_levels(namespace))
        return Response(status_code=204 if exists else 404)

    @app.delete("/v1/namespaces/{namespace}")
    async def drop_namespace(namespace: str) -> Response:
        await call_blocking(catalog.drop_namespace, namespace_levels(namespace))
        return Response(status_code=204)

    @app.post("/v1/namespaces/{namespace}/properties")
    async def update_namespace_properties(namespace: str, request: Request) -> Response:
        req = _parse(UpdateNamespacePropertiesRequest, await request.body())
        overlap = set(req.removals) & set(req.updates)
        if overlap:
            raise RestError(422, "UnprocessableEntityException",
                            f"properties both removed and updated: {', '.join(sorted(overlap))}")
        summary = await call_blocking(catalog.update_namespace_properties, namespace_levels(namespace),
                                      set(req.removals), req.updates)
        return _json(UpdateNamespacePropertiesResponse(removed=summary.removed, updated=summary.updated,
                                                       missing=summary.missing))

    # ---- tables ---------------------------------------------------------------------------------

    def table_response(table: Table) -> TableResponse:
        return build(TableResponse, metadata_location=table.metadata_location, metadata=table.metadata,
                             config={SCAN_PLANNING_MODE: "server"})

    @app.get("/v1/namespaces/{namespace}/tables")
    async def list_tables(namespace: str) -> Response:
        ns = namespace_levels(namespace)
        if not await call_blocking(catalog.namespace_exists, ns):
            raise RestError(404, "NoSuchNamespaceException", f"namespace {'.'.join(ns)} does not exist")
        found = await call_blocking(catalog.list_tables, ns)
        return _json(ListTablesResponse(identifiers=[ListTableResponseEntry(namespace=tuple(t[:-1]), name=t[-1])
                                                     for t in found]))

    @app.post("/v1/namespaces/{namespace}/tables")
    async def create_table(namespace: str, request: Request) -> Response:
        req = _parse(CreateTableBody, await request.body())
        ns = namespace_levels(namespace)
        if not await call_blocking(catalog.namespace_exists, ns):
            raise RestError(404, "NoSuchNamespaceException", f"namespace {'.'.join(ns)} does not exist")
        kwargs: dict[str, Any] = {"properties": req.properties}
        if req.location:
            kwargs["location"] = req.location
        if req.partition_spec is not None:
            kwargs["partition_spec"] = req.partition_spec
        if req.write_order is not None:
            kwargs["sort_order"] = req.write_order

        def create() -> Table:
            return catalog.create_table((*ns, req.name), req.table_schema, **kwargs)

        def stage() -> TableResponse:
            # stage-create (CREATE TABLE AS SELECT): the new table's metadata, nothing written; the
            # client's commit (requirement assert-create) creates it
            if catalog.table_exists((*ns, req.name)):
                raise RestError(409, "AlreadyExistsException", f"table {'.'.join((*ns, req.name))} already exists")
            location = catalog.create_table_transaction((*ns, req.name), req.table_schema,
                                                        **kwargs).table_metadata.location
            metadata = new_table_metadata(req.table_schema, req.partition_spec or UNPARTITIONED_PARTITION_SPEC,
                                          req.write_order or UNSORTED_SORT_ORDER, location, dict(req.properties))
            return build(TableResponse, metadata_location=None, metadata=metadata,
                         config={SCAN_PLANNING_MODE: "server"})

        if req.stage_create:
            return _json(await call_blocking(stage))
        return _json(table_response(await call_blocking(create)))

    @app.post("/v1/namespaces/{namespace}/register")
    async def register_table(namespace: str, request: Request) -> Response:
        req = _parse(RegisterTableRequest, await request.body())
        if req.overwrite:
            raise RestError(501, "NotImplementedException", "register with overwrite is not supported by pando serve")
        table = await call_blocking(catalog.register_table, (*namespace_levels(namespace), req.name),
                                    req.metadata_location)
        return _json(table_response(table))

    @app.get("/v1/namespaces/{namespace}/tables/{table}")
    async def load_table_route(namespace: str, table: str) -> Response:
        return _json(table_response(await call_blocking(table_of, namespace, table)))

    @app.head("/v1/namespaces/{namespace}/tables/{table}")
    async def table_exists(namespace: str, table: str) -> Response:
        exists = await call_blocking(catalog.table_exists, (*namespace_levels(namespace), unquote(table)))
        return Response(status_code=204 if exists else 404)

    @app.post("/v1/namespaces/{namespace}/tables/{table}")
    async def commit_table(namespace: str, table: str, request: Request) -> Response:
        req = _parse(CommitTableBody, await request.body())

        def commit() -> Any:
            ident = (*namespace_levels(namespace), unquote(table))
            current: Any
            if any(isinstance(r, AssertCreate) for r in req.requirements):
                current = _Named(ident)  # a staged table's first commit: the catalog creates it (SQL catalogs)
            else:
                current = catalog.load_table(ident)
            return catalog.commit_table(current, tuple(req.requirements), tuple(req.updates))

        return _json(await call_blocking(commit))

    @app.delete("/v1/namespaces/{namespace}/tables/{table}")
    async def drop_table(namespace: str, table: str, purgeRequested: bool = False) -> Response:
        ident = (*namespace_levels(namespace), unquote(table))
        await call_blocking(catalog.purge_table if purgeRequested else catalog.drop_table, ident)
        return Response(status_code=204)

    @app.post("/v1/tables/rename")
    async def rename_table(request: Request) -> Response:
        req = _parse(RenameTableRequest, await request.body())
        source = (*req.source.namespace.root, req.source.name)
        destination = (*req.destination.namespace.root, req.destination.name)
        await call_blocking(catalog.rename_table, source, destination)
        return Response(status_code=204)

    @app.post("/v1/namespaces/{namespace}/tables/{table}/metrics")
    async def report_metrics(namespace: str, table: str, request: Request) -> Response:
        """Iceberg Java's scan and commit reports: accepted (logged at debug), not kept."""
        body = await request.body()
        log.debug("pando serve: metrics report for %s.%s: %d bytes", namespace, table, len(body))
        return Response(status_code=204)

    add_planning(app, table_of, opts)
    return app


def base_app(opts: ServeOptions) -> FastAPI:
    """A FastAPI app answering every failure with the ErrorModel, behind the token and size guard,
    with its plan store (``app.state.plans``)."""
    app = FastAPI(title="pando serve", description="Iceberg REST catalog with Pando's server-side scan planning",
                  docs_url=None, redoc_url=None, openapi_url=None)
    app.state.plans = PlanStore(max_plans=opts.max_plans)

    @app.exception_handler(RestError)
    async def rest_error(_: Request, e: RestError) -> Response:
        if e.status >= 500:
            log.warning("pando serve: %s %s", e.type, e.message)
        return _error(e)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, e: RequestValidationError) -> Response:
        return _error(bad_request(f"invalid request: {e.errors()}"))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, e: StarletteHTTPException) -> Response:
        if e.status_code == 404:
            return _error(RestError(404, "NoSuchEndpointException",
                                    f"no route {request.method} {request.url.path}; the routes: GET /v1/config"))
        if e.status_code == 405:
            return _error(RestError(405, "MethodNotAllowedException",
                                    f"{request.method} is not accepted on {request.url.path}"))
        return _error(RestError(e.status_code, "RESTException", str(e.detail)))

    @app.exception_handler(Exception)
    async def server_error(_: Request, e: Exception) -> Response:
        log.exception("pando serve: internal error")
        return _error(RestError(500, "InternalServerError", f"{type(e).__name__}: {e}"))

    app.add_middleware(_Guard, options=opts)
    return app


def add_planning(app: FastAPI, table_of: Callable[[str, str, Request], Table], opts: ServeOptions,
                 root: str = "/v1") -> None:
    """The scan-planning routes under ``root`` (``/v1``, or ``/v1/{prefix}`` behind a catalog with a
    prefix); ``table_of(namespace, table, request)`` loads the table planned."""
    store: PlanStore = app.state.plans
    base = root + "/namespaces/{namespace}/tables/{table}"

    @app.post(base + "/plan")
    async def plan_table_scan(namespace: str, table: str, request: Request) -> Response:
        req = _parse(PlanTableScanRequest, await request.body())

        def plan() -> tuple[Table, Planned, bytes]:  # one trip to the thread pool per plan
            tbl = table_of(namespace, table, request)
            planned = plan_request(tbl, req)
            body = completed_plan(store, tbl, planned, opts.tasks_per_page).model_dump_json(serialize_as_any=True)
            return tbl, planned, body.encode()

        tbl, planned, body = await call_blocking(plan)
        log.info("pando serve: plan %s: %d files (%s%s) in %.1f ms", ".".join(tbl.name()), len(planned.tasks),
                 planned.planner, "" if planned.iceberg_files is None else f"; Iceberg's plan {planned.iceberg_files}",
                 planned.seconds * 1000)
        return Response(body, media_type="application/json")

    @app.get(base + "/plan/{plan_id}")
    async def fetch_planning_result(namespace: str, table: str, plan_id: str) -> Response:
        return _json(store.plan((*namespace_levels(namespace), unquote(table)), plan_id))

    @app.delete(base + "/plan/{plan_id}")
    async def cancel_planning(namespace: str, table: str, plan_id: str) -> Response:
        store.cancel((*namespace_levels(namespace), unquote(table)), plan_id)
        return Response(status_code=204)

    @app.post(base + "/tasks")
    async def fetch_scan_tasks(namespace: str, table: str, request: Request) -> Response:
        req = _parse(FetchScanTasksRequest, await request.body())
        return _json(store.page((*namespace_levels(namespace), unquote(table)), req.plan_task))
