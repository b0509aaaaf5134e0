"""``pando serve``: an Iceberg REST catalog whose server-side scan planning is Pando's.

Any client of the REST protocol that plans scans on the server (pyiceberg with
``scan-planning-mode=server``, Iceberg Java 1.11+) reads the files Pando's planner keeps,
without importing ``pando_iceberg``::

    from pando_iceberg.serve import run
    run(catalog, host="127.0.0.1", port=8181, token=None)     # blocks; Ctrl-C / SIGTERM stop it gracefully

    with ServerThread(catalog) as server:                     # in-process, on a free loopback port
        RestCatalog("pando", uri=server.uri)

``app.create_app`` builds the ASGI app (FastAPI) for another ASGI server; ``proxy.create_proxy_app``
the proxy in front of another REST catalog (``ServerThread(app=...)`` serves either).
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
from typing import Any

from .app import ServeOptions, create_app
from .errors import RestError

__all__ = ["RestError", "ServeOptions", "ServerThread", "create_app", "run"]

LOOPBACK = "127.0.0.1"


def _config(app: Any, host: str, log_level: str, access_log: bool) -> Any:
    import uvicorn

    return uvicorn.Config(app, host=host, log_level=log_level, access_log=access_log, timeout_graceful_shutdown=30,
                          server_header=False)


def run(catalog: Any, host: str = LOOPBACK, port: int = 8181, options: ServeOptions | None = None,
        log_level: str = "info", access_log: bool = True, upstream: str | None = None,
        upstream_token: str | None = None) -> None:
    """Serve ``catalog`` until SIGINT/SIGTERM; requests under way finish first (at most 30 s).
    With ``upstream`` (a REST catalog's URI; ``catalog`` is then None): the proxy in front of it
    (``proxy.py``)."""
    import uvicorn

    if upstream is not None:
        from .proxy import create_proxy_app

        app = create_proxy_app(upstream, options, upstream_token)
    else:
        app = create_app(catalog, options)
    config = _config(app, host, log_level, access_log)
    config.port = port
    logging.getLogger("pando_iceberg.serve").setLevel(getattr(logging, log_level.upper(), logging.INFO))
    if threading.current_thread() is threading.main_thread():
        # uvicorn shuts down on SIGINT/SIGTERM, then re-raises the signal to the handler it found:
        # a no-op one, so a requested stop ends the process normally (exit 0), not by the signal.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: None)
    uvicorn.Server(config).run()


class ServerThread:
    """The server in a background thread on ``host`` and a free port (tests, notebooks, benchmarks);
    ``uri`` is the catalog URI for a REST client. A context manager: leaving it stops the server
    gracefully and joins the thread."""

    def __init__(self, catalog: Any = None, options: ServeOptions | None = None, host: str = LOOPBACK,
                 log_level: str = "warning", access_log: bool = False, app: Any = None):
        import uvicorn

        # IPPROTO_TCP spelled out: asyncio sets TCP_NODELAY only on sockets whose proto says TCP (with
        # proto 0 every response waits ~40 ms for the client's delayed ACK: Nagle's algorithm)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self.host, self.port = self._sock.getsockname()[:2]
        self.app = app if app is not None else create_app(catalog, options)
        self.server = uvicorn.Server(_config(self.app, host, log_level, access_log))
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._sock]},
                                        name=f"pando-serve-{self.port}", daemon=True)

    @property
    def uri(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"pando serve did not start on {self.uri}")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)
        self._sock.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
