"""The application of the Engine Server crash tests, run as its own process:

    python -c "from tests.acceptance.server_app import main; main()" URL LEDGER MARKS NAME HOLD

URL is the server (``grpc://HOST:PORT``). The process runs Workers (``async with manager``),
prints ``READY`` once they run, and stops gracefully on SIGTERM. Every activity applies its
effect to LEDGER (a SQLite file standing for the services' databases) once per idempotency key,
counting executions and the processes (NAME) that ran it.

The ``charge`` activity, once its effect is applied, writes ``MARKS/inside.NAME.KEY``; with
HOLD=1 it then blocks for good (a process to be killed holding work), else it waits for the
file ``MARKS/gate``, writes ``MARKS/left.NAME.KEY`` and returns.

The environment variable SRV_POLL_INTERVAL sets the Manager's poll_interval (default 0.1 s).

The test process imports this module too, as a client (``manager.connect()``, no Workers).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

import sagaway as sw

manager = sw.Manager(
    "grpc://127.0.0.1:1",  # replaced by main() or by the test before the Manager opens
    lease_timeout=2.0,
    poll_interval=float(os.environ.get("SRV_POLL_INTERVAL", "0.1")),
    recovery_interval=0.2,
    concurrency=50,
)
LEDGER = Path("ledger.db")
MARKS = Path(".")
NAME = "client"
HOLD = False


class Refused(sw.CompletableError):
    """The carrier refused the parcel."""


def init_ledger(path: Path) -> None:
    with sqlite3.connect(path, timeout=30) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS ledger (idem_key TEXT PRIMARY KEY, workflow TEXT NOT "
            "NULL, step TEXT NOT NULL, executions INTEGER NOT NULL, runners TEXT NOT NULL)"
        )


def effect(step: str) -> None:
    """Apply ``step``'s effect once per idempotency key; count every execution, and by whom."""
    info = sw.activity_info()
    with sqlite3.connect(LEDGER, timeout=30) as conn:
        conn.execute(
            "INSERT INTO ledger VALUES (?, ?, ?, 1, ?) ON CONFLICT (idem_key) DO UPDATE SET "
            "executions = executions + 1, runners = runners || ',' || excluded.runners",
            (info.idempotency_key, info.workflow_key, step, NAME),
        )


@manager.register_activity(name="srv.step")
async def step(name: str) -> None:
    effect(name)


@manager.register_activity(name="srv.charge")
async def charge() -> None:
    effect("charge")
    key = sw.activity_info().workflow_key
    (MARKS / f"inside.{NAME}.{key}").touch()
    if HOLD:
        await asyncio.Event().wait()  # held until this process is killed
    while not (MARKS / "gate").exists():  # noqa: ASYNC110 (another process makes the file)
        await asyncio.sleep(0.02)
    (MARKS / f"left.{NAME}.{key}").touch()


@manager.register_activity(name="srv.ship")
async def ship(fail: bool) -> None:
    if fail:
        raise Refused("no carrier", code="NO_CARRIER")
    effect("ship")


@manager.register_workflow(name="srv.order")
async def order(key: str, fail: bool) -> dict[str, Any]:
    saga = sw.Saga()
    await step("reserve")
    saga.add_compensation(step, "release")
    await charge()
    saga.add_compensation(step, "refund")
    try:
        await ship(fail)
    except Refused:
        await saga.execute()
        return {"key": key, "status": "compensated"}
    return {"key": key, "status": "shipped"}


@manager.register_workflow(name="srv.timer")
async def timer(key: str, seconds: float) -> dict[str, Any]:
    await step("before")
    await manager.sleep(seconds)
    await step("after")
    return {"key": key, "status": "woke"}


@manager.register_workflow(name="srv.approval")
async def approval(key: str) -> dict[str, Any]:
    await step("ask")
    decision = await manager.signal("approval").receive(str)
    await step("grant")
    return {"key": key, "status": decision}


async def _serve(url: str) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    manager.url = url
    async with manager:
        print("READY", flush=True)
        await stop.wait()
        await manager.close(drain_timeout=5)


def main() -> None:
    global LEDGER, MARKS, NAME, HOLD
    url, ledger, marks, NAME, hold = sys.argv[1:6]
    LEDGER, MARKS, HOLD = Path(ledger), Path(marks), hold == "1"
    init_ledger(LEDGER)
    asyncio.run(_serve(url))
