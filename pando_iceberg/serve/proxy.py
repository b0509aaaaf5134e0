"""``pando serve --upstream URI``: the REST catalog at ``URI`` with Pando's scan planning in front.

Every request is forwarded to the upstream catalog unchanged (method, path, query, body, the
client's ``Authorization`` unless ``upstream_token`` replaces it) and its answer returned
unchanged, except:

- ``GET /v1/config``: the upstream's answer with the planning endpoints added to its endpoints
  and ``scan-planning-mode=server`` among its defaults;
- the scan-planning routes (``POST .../plan``, ``GET``/``DELETE .../plan/{plan-id}``,
  ``POST .../tasks``, with or without the upstream's prefix): answered here, by Pando's planner,
  from the table metadata the upstream returns for the table (its ``load table`` answer, read
  with the client's credentials), the data and layout files read with that table's FileIO.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any
from urllib.parse import quote

import requests
from fastapi import FastAPI, Request
from fastapi.responses import Response
from pyiceberg.catalog.rest import TableResponse
from pyiceberg.io import load_file_io
from pyiceberg.table import Table
from starlette.datastructures import Headers

from .app import ENDPOINTS, ServeOptions, add_planning, base_app, call_blocking, namespace_levels
from .errors import RestError

log = logging.getLogger("pando_iceberg.serve")

__all__ = ["create_proxy_app"]

# Planning endpoints the proxy adds to the upstream's list.
PLANNING_ENDPOINTS = [e for e in ENDPOINTS if "/plan" in e or e.endswith("/tasks")]
# Request headers not forwarded (hop-by-hop, or recomputed by the HTTP client).
_DROPPED = {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "upgrade", "te", "trailer",
            "proxy-authorization", "proxy-authenticate", "accept-encoding"}


class Upstream:
    """The upstream REST catalog: one pooled HTTP session per thread (``requests`` sessions are not
    thread-safe)."""

    def __init__(self, uri: str, token: str | None = None, timeout: float = 60.0):
        self.uri = uri.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._local = threading.local()

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        return session

    def headers(self, incoming: Headers) -> dict[str, str]:
        out = {k: v for k, v in incoming.items() if k.lower() not in _DROPPED}
        if self.token is not None:
            out["authorization"] = f"Bearer {self.token}"
        return out

    def send(self, method: str, path: str, query: str, body: bytes, incoming: Headers) -> requests.Response:
        url = f"{self.uri}{path}" + (f"?{query}" if query else "")
        try:
            return self._session().request(method, url, data=body or None, headers=self.headers(incoming),
                                           timeout=self.timeout, allow_redirects=False)
        except requests.RequestException as e:
            raise RestError(502, "BadGatewayException", f"upstream catalog {self.uri} did not answer: "
                                                          f"{type(e).__name__}: {e}") from None

    def load_table(self, prefix: str | None, namespace: str, table: str, incoming: Headers) -> Table:
        """The table as the upstream's load-table answer describes it (its errors as they are)."""
        path = "/v1" + (f"/{quote(prefix, safe='')}" if prefix else "") + \
            f"/namespaces/{quote(namespace, safe='')}/tables/{quote(table, safe='')}"
        response = self.send("GET", path, "", b"", incoming)
        if response.status_code != 200:
            try:
                error = response.json()["error"]
                raise RestError(response.status_code, str(error["type"]), str(error["message"]))
            except (ValueError, KeyError, TypeError):
                raise RestError(response.status_code, "RESTException",
                                f"upstream answered {response.status_code} loading {namespace}.{table}") from None
        loaded = TableResponse.model_validate_json(response.content)
        io = load_file_io({**loaded.metadata.properties, **loaded.config}, loaded.metadata_location)
        return Table(identifier=(*namespace_levels(namespace), table), metadata=loaded.metadata,
                     metadata_location=loaded.metadata_location or "", io=io, catalog=None)  # type: ignore[arg-type]


def create_proxy_app(upstream_uri: str, options: ServeOptions | None = None,
                     upstream_token: str | None = None) -> FastAPI:
    """The proxy app in front of the REST catalog at ``upstream_uri``."""
    opts = options or ServeOptions()
    upstream = Upstream(upstream_uri, upstream_token)
    app = base_app(opts)
    app.state.upstream = upstream

    def relay(response: requests.Response) -> Response:
        kept = {k: v for k, v in response.headers.items()
                if k.lower() in ("content-type", "etag", "cache-control", "location", "www-authenticate")}
        return Response(response.content, status_code=response.status_code, headers=kept)

    @app.get("/v1/config")
    async def get_config(request: Request) -> Response:
        response = await call_blocking(upstream.send, "GET", "/v1/config", request.url.query, b"", request.headers)
        if response.status_code != 200:
            return relay(response)
        config: dict[str, Any] = response.json()
        config["defaults"] = {**(config.get("defaults") or {}), "scan-planning-mode": "server"}
        if config.get("endpoints"):
            config["endpoints"] = list(dict.fromkeys([*config["endpoints"], *PLANNING_ENDPOINTS]))
        return Response(json.dumps(config), media_type="application/json")

    def table_of(namespace: str, table: str, request: Request) -> Table:
        return upstream.load_table(request.path_params.get("prefix"), namespace, table, request.headers)

    for root in ("/v1", "/v1/{prefix}"):
        add_planning(app, table_of, opts, root)

    @app.api_route("/{path:path}", methods=["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"])
    async def forward(path: str, request: Request) -> Response:
        body = await request.body()
        raw = request.scope.get("raw_path")  # as the client encoded it (%1F, %2F kept)
        target = raw.decode("latin-1") if raw else "/" + path
        response = await call_blocking(upstream.send, request.method, target, request.url.query, body,
                                       request.headers)
        return relay(response)

    return app
