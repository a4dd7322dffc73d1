"""The Engine Server end to end: start ``sagaway server`` as a separate process, run sagas
through it from an application that has no database access, and start one more from a client
that uses only the generated gRPC stubs (no SDK), as a program in another language would.

    pip install 'sagaway[server]'
    python examples/engine_server.py

Prints (see docs/engine-server.md):

    server listening on 127.0.0.1:PORT
    connected
    o-1 -> {'order': 'o-1', 'status': 'shipped'}
    released stock of o-2
    o-2 -> compensated: card declined
    o-3 (no SDK) -> COMPLETED {"order":"o-3","status":"shipped"}
    server stopped: exit 0
"""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import grpc

import sagaway as sw
from sagaway.v1 import engine_pb2, engine_pb2_grpc

# ----------------------------------------------------------------------------- the application


class CardDeclined(sw.CompletableError):
    """A business failure: the saga compensates, nothing is retried."""


def application(address: str, token: str) -> tuple[sw.Manager, Any]:
    """The application: its Manager talks to the server, its code runs here."""
    manager = sw.Manager(f"grpc://{address}", token=token)

    @manager.register_activity()
    async def reserve_stock(order: str) -> None:
        pass

    @manager.register_activity()
    async def release_stock(order: str) -> None:
        print(f"released stock of {order}", flush=True)

    @manager.register_activity()
    async def charge(order: str, amount: int) -> None:
        if amount > 1000:
            raise CardDeclined("card declined")

    @manager.register_workflow(name="order")
    async def order(order: str, amount: int) -> dict[str, str]:
        async with sw.Saga() as saga:
            await manager.activity(reserve_stock, order).execute_get()
            saga.add_compensation(release_stock, order)
            await manager.activity(charge, order, amount).execute_get()
        return {"order": order, "status": "shipped"}

    return manager, order


# ----------------------------------------------------------------------------- a client without SDK


def start_without_sdk(address: str, token: str) -> None:
    """Start workflow 'order' under key o-3 and wait for its end, with generated stubs only."""
    with grpc.insecure_channel(address) as channel:
        engine = engine_pb2_grpc.EngineStub(channel)
        auth = (("authorization", f"Bearer {token}"),)
        engine.Hello(engine_pb2.HelloRequest(protocol_version=1, client="example"), metadata=auth)
        engine.StartWorkflow(
            engine_pb2.StartWorkflowRequest(
                name="order", key="o-3", args=json.dumps({"order": "o-3", "amount": 40})
            ),
            metadata=auth,
        )
        while True:  # AwaitWorkflow returns when it ended, or after `timeout` seconds
            record = engine.AwaitWorkflow(
                engine_pb2.AwaitWorkflowRequest(key="o-3", timeout=30), metadata=auth, timeout=40
            )
            if record.status in ("COMPLETED", "FAILED", "CANCELLED", "TERMINATED"):
                break
        print(f"o-3 (no SDK) -> {record.status} {record.result}", flush=True)


# ----------------------------------------------------------------------------- the server process


def start_server(workdir: Path, token: str) -> tuple[subprocess.Popen[str], str]:
    """``sagaway server`` on a free loopback port; returns the process and its address."""
    token_file = workdir / "token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    command = [sys.executable, "-m", "sagaway", "server", "--listen", "127.0.0.1:0"]
    command += ["--db", f"sqlite:///{workdir / 'engine.db'}", "--token-file", str(token_file)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    line = server.stdout.readline()  # blocks until the server is ready (or has exited)
    if not line.startswith("listening on "):
        server.kill()
        raise SystemExit(f"the server did not start (exit {server.wait()})")
    return server, line.removeprefix("listening on ").strip()


async def run_application(address: str, token: str) -> None:
    manager, order = application(address, token)
    async with manager:  # this process's workers; the server holds the database
        print("connected", flush=True)
        print(f"o-1 -> {await manager.workflow(order, 'o-1', 40).execute_get()}", flush=True)
        try:
            await manager.workflow(order, "o-2", 5000).execute_get()
        except CardDeclined as exc:
            print(f"o-2 -> compensated: {exc}", flush=True)
        # A client with no SDK: the workers of this Manager run what it starts.
        await asyncio.to_thread(start_without_sdk, address, token)


def main() -> None:
    token = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory() as tmp:
        server, address = start_server(Path(tmp), token)
        print(f"server listening on {address}", flush=True)
        try:
            asyncio.run(run_application(address, token))
        finally:
            server.send_signal(signal.SIGTERM)  # graceful: calls in flight finish
            print(f"server stopped: exit {server.wait(30)}", flush=True)


if __name__ == "__main__":
    main()
