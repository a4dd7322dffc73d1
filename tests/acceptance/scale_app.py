"""The application of the multi-process tests, run by `sagaway worker` (scale_app:manager).

Environment: SCALE_DB_URL (the engine's database), SCALE_LEDGER (a SQLite file standing for the
services' databases). Every activity applies its effect once per idempotency key and counts
executions; an overlap detector records any moment when two live processes execute steps of one
workflow at the same time.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

import sagaway as sw

LEDGER = os.environ["SCALE_LEDGER"]

manager = sw.Manager(
    os.environ["SCALE_DB_URL"],
    lease_timeout=float(os.environ.get("SCALE_LEASE_TIMEOUT", "2")),
    poll_interval=0.1,
    recovery_interval=0.5,
    concurrency=int(os.environ.get("SCALE_CONCURRENCY", "50")),
)


class OutOfStock(sw.CompletableError):
    """No stock for this order."""


def init_ledger(path: str) -> None:
    with sqlite3.connect(path, timeout=30) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS ledger (idem_key TEXT PRIMARY KEY, workflow TEXT, "
            "activity TEXT, executions INTEGER)"
        )
        conn.execute("CREATE TABLE IF NOT EXISTS active (workflow TEXT PRIMARY KEY, pid INTEGER)")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS overlaps (workflow TEXT, pid INTEGER, other_pid INTEGER)"
        )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def effect(name: str) -> None:
    info = sw.activity_info()
    pid = os.getpid()
    with sqlite3.connect(LEDGER, timeout=30, isolation_level=None) as conn:
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute(
            "SELECT pid FROM active WHERE workflow = ?", (info.workflow_key,)
        ).fetchone()
        if row is not None and row[0] != pid and _alive(row[0]):
            conn.execute("INSERT INTO overlaps VALUES (?, ?, ?)", (info.workflow_key, pid, row[0]))
        conn.execute("INSERT OR REPLACE INTO active VALUES (?, ?)", (info.workflow_key, pid))
        conn.execute(
            "INSERT INTO ledger VALUES (?, ?, ?, 1) "
            "ON CONFLICT (idem_key) DO UPDATE SET executions = executions + 1",
            (info.idempotency_key, info.workflow_key, name),
        )
        conn.execute("COMMIT")
    # Leave the step "active" a moment so overlapping owners would be caught.
    with sqlite3.connect(LEDGER, timeout=30) as conn:
        conn.execute("DELETE FROM active WHERE workflow = ? AND pid = ?", (info.workflow_key, pid))


@manager.register_activity
def create_order(key: str) -> str:
    effect("create_order")
    return key


@manager.register_activity
def reserve_stock(key: str) -> int:
    effect("reserve_stock")
    return 1


@manager.register_activity
def charge_payment(key: str, out_of_stock: bool) -> None:
    if out_of_stock:
        raise OutOfStock(key)
    effect("charge_payment")


@manager.register_activity
def arrange_shipping(key: str) -> None:
    effect("arrange_shipping")


@manager.register_activity
def release_stock(key: str) -> None:
    effect("release_stock")


@manager.register_activity
def cancel_order(key: str) -> None:
    effect("cancel_order")


@manager.register_workflow(name="scale.order")
async def order(key: str, out_of_stock: bool) -> dict[str, Any]:
    saga = sw.Saga()
    await manager.activity(create_order, key).execute_get()
    saga.add_compensation(cancel_order, key)
    await manager.activity(reserve_stock, key).execute_get()
    saga.add_compensation(release_stock, key)
    try:
        await manager.activity(charge_payment, key, out_of_stock).execute_wait()
    except OutOfStock:
        await saga.execute()
        return {"key": key, "status": "compensated"}
    await manager.activity(arrange_shipping, key).execute_wait()
    return {"key": key, "status": "completed"}
