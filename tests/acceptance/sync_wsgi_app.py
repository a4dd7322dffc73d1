"""A WSGI application that runs sagas from synchronous request threads (env: SYNC_DB_URL).

``main()`` serves it on a free port with the standard library's threaded WSGI server and prints
``listening on PORT`` (import it and call it: run as ``__main__``, its error classes would not be
the ones the worker records); ``sagaway worker tests.acceptance.sync_wsgi_app:manager`` runs the
workflows in another process. Routes:

- ``/quote?sku=S&qty=N&key=K``: start ``shop.quote`` under K, wait, return its receipt as JSON;
- ``/refuse?sku=S&key=K``: a workflow that fails as the business says: 409 with the error;
- ``/by-name?sku=S&qty=N&key=K``: the same quote through a client that knows names only.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socketserver
import sys
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import sagaway as sw

manager = sw.Manager(os.environ["SYNC_DB_URL"], poll_interval=0.05)


@dataclasses.dataclass(frozen=True)
class Receipt:
    sku: str
    qty: int
    total: int
    worker_pid: int


class OutOfStock(sw.CompletableError):
    """Nothing left of the item."""


@manager.register_activity(name="shop.unit_price")
async def unit_price(sku: str) -> int:
    return 7 if sku == "tea" else 3


@manager.register_workflow(name="shop.quote")
async def quote(sku: str, qty: int) -> Receipt:
    unit = await unit_price(sku)
    return Receipt(sku, qty, unit * qty, os.getpid())


@manager.register_workflow(name="shop.refuse")
async def refuse(sku: str) -> str:
    raise OutOfStock(f"no {sku} left")


Respond = Callable[[str, list[tuple[str, str]]], Any]


def make_app(client: sw.SyncClient, plain: sw.SyncClient) -> Callable[..., Iterable[bytes]]:
    """The WSGI callable; both clients are shared by every request thread."""

    def app(environ: dict[str, Any], respond: Respond) -> Iterable[bytes]:
        query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
        path = environ.get("PATH_INFO", "")
        status, body = "200 OK", {}
        if path == "/quote":
            receipt = client.execute_get(
                quote, query["sku"], int(query["qty"]), key=query["key"], wait_timeout=30
            )
            body = {"receipt": dataclasses.asdict(receipt), "type": type(receipt).__name__}
        elif path == "/by-name":
            result = plain.execute_get(
                "shop.quote", sku=query["sku"], qty=int(query["qty"]), key=query["key"],
                wait_timeout=30,
            )  # fmt: skip
            body = {"receipt": result, "type": type(result).__name__}
        elif path == "/refuse":
            try:
                client.execute_get(refuse, query["sku"], key=query["key"], wait_timeout=30)
            except OutOfStock as exc:
                status, body = "409 Conflict", {"error": str(exc), "type": type(exc).__name__}
        else:
            status, body = "404 Not Found", {"error": path}
        data = json.dumps(body).encode()
        respond(status, [("Content-Type", "application/json")])
        return [data]

    return app


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 128  # many requests arrive at once


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    # One client per process, created in the serving process (after any fork).
    with manager.sync() as client, sw.SyncClient(manager.url) as plain:
        server = make_server(
            "127.0.0.1", 0, make_app(client, plain),
            server_class=ThreadingWSGIServer, handler_class=QuietHandler,
        )  # fmt: skip
        print(f"listening on {server.server_port}", flush=True)
        sys.stdout.flush()
        server.serve_forever()


if __name__ == "__main__":
    main()
