"""The fork kill -9 test's application, run as its own process:

    python fork_app.py DB_URL LEDGER MODE

MODE "source": run ``order-7``, whose step 3 has a bug, until it has FAILED; print FAILED.
MODE "victim": the bug fixed, fork ``order-7`` from step 3 as ``order-7-fixed`` and run it; print
SHIPPING once step 3 runs, and block there (to be killed with SIGKILL).
MODE "rescue": the bug fixed, run a worker until ``order-7-fixed`` has ended; print RESULT <json>.

Every activity execution is counted in the LEDGER (an SQLite file) by activity and idempotency
key, across processes.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys

import sagaway as sw

DB_URL, LEDGER, MODE = sys.argv[1:4]

manager = sw.Manager(DB_URL, lease_timeout=1.0, poll_interval=0.05, recovery_interval=0.2)


class LabelBug(sw.CompletableError):
    """Shipping failed: the label printer code has a bug."""


def effect(name: str) -> None:
    with sqlite3.connect(LEDGER, timeout=30) as conn:
        conn.execute(
            "INSERT INTO ledger (activity, idem_key, executions) VALUES (?, ?, 1) "
            "ON CONFLICT (activity, idem_key) DO UPDATE SET executions = executions + 1",
            (name, sw.activity_info().idempotency_key),
        )


@manager.register_activity(name="reserve")
async def reserve(order: int) -> str:
    effect("reserve")
    return f"stock-{order}"


@manager.register_activity(name="charge")
def charge(reservation: str) -> str:
    effect("charge")
    return f"paid-{reservation}"


@manager.register_activity(name="ship")
async def ship(payment: str) -> str:
    effect("ship")
    if MODE == "source":
        raise LabelBug("label printer bug", code="BUG")
    if MODE == "victim":
        print("SHIPPING", flush=True)
        await asyncio.Event().wait()  # killed here, in the middle of step 3
    return f"shipped-{payment}"


@manager.register_workflow(name="pipeline")
async def pipeline(order: int) -> str:
    reservation = await reserve(order)
    payment = await charge(reservation)
    return await ship(payment)


async def main() -> None:
    with sqlite3.connect(LEDGER, timeout=30) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS ledger (activity TEXT NOT NULL, idem_key TEXT NOT NULL, "
            "executions INTEGER NOT NULL, PRIMARY KEY (activity, idem_key))"
        )
    async with manager:
        if MODE == "source":
            try:
                await manager.workflow(pipeline, 7).execute_get(idempotency_key="order-7")
            except LabelBug:
                print("FAILED", flush=True)
            return
        if MODE == "victim":
            await manager.fork("order-7", from_step=3, new_key="order-7-fixed")
            await asyncio.Event().wait()
        result = await manager.get_workflow("order-7-fixed").result(timeout=60)
        print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
