"""A 4-step saga for the kill -9 tests, run as its own process.

    python crash_app.py DB_URL LEDGER KEY FAIL CRASH

FAIL: "none" or "ship" (the last step fails with a completable error -> compensations).
CRASH: "none", or "<n>:before" / "<n>:after": at the n-th durable write (create, step, finish,
counted from 1) the process prints ``BOUNDARY <n> <when>`` and blocks, so the test can kill -9
it exactly there. Without CRASH the process (re)starts the workflow under KEY (a client retry:
it attaches to the existing execution) and prints ``RESULT <json>`` once it has ended.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from typing import Any

import sagaway as sw
from sagaway.testing.internals import store_of

DB_URL, LEDGER, KEY, FAIL, CRASH = sys.argv[1:6]

manager = sw.Manager(DB_URL, lease_timeout=1.0, poll_interval=0.05, recovery_interval=0.2)


class ShippingRefused(sw.CompletableError):
    """The carrier refused the parcel."""


def effect(name: str) -> None:
    """Apply an effect once per idempotency key; count every execution."""
    info = sw.activity_info()
    with sqlite3.connect(LEDGER, timeout=30) as conn:
        conn.execute(
            "INSERT INTO ledger (idem_key, activity, executions) VALUES (?, ?, 1) "
            "ON CONFLICT (idem_key) DO UPDATE SET executions = executions + 1",
            (info.idempotency_key, name),
        )


@manager.register_activity
async def create_order(key: str) -> str:
    effect("create_order")
    return f"order:{key}"


@manager.register_activity
def reserve_stock(key: str) -> int:
    effect("reserve_stock")
    return 3


@manager.register_activity
async def charge_payment(key: str, amount: int) -> str:
    effect("charge_payment")
    return f"charge:{amount}"


@manager.register_activity
async def arrange_shipping(key: str, fail: bool) -> str:
    if fail:
        raise ShippingRefused("no carrier", code="NO_CARRIER")
    effect("arrange_shipping")
    return "shipped"


@manager.register_activity
async def cancel_order(order: str) -> None:
    effect("cancel_order")


@manager.register_activity
def release_stock(qty: int) -> None:
    effect("release_stock")


@manager.register_activity
async def refund_payment(charge: str) -> None:
    effect("refund_payment")


@manager.register_workflow
async def order_saga(key: str, fail: bool) -> dict[str, Any]:
    async with sw.Saga() as saga:
        order = await create_order(key)
        saga.add_compensation(cancel_order, order)
        qty = await manager.activity(reserve_stock, key).execute_get()
        saga.add_compensation(release_stock, qty)
        charge = await charge_payment(key, 100)
        saga.add_compensation(refund_payment, charge)
        shipped = await arrange_shipping(key, fail)
    return {"order": order, "shipped": shipped}


def install_crash_hook(store: Any, spec: str) -> None:
    target, when = spec.split(":")
    counter = {"n": 0}

    def wrap(name: str) -> None:
        real = getattr(store, name)

        async def hooked(*args: Any, **kwargs: Any) -> Any:
            counter["n"] += 1
            n = counter["n"]
            if n == int(target) and when == "before":
                await boundary(n, when)
            result = await real(*args, **kwargs)
            if n == int(target) and when == "after":
                await boundary(n, when)
            return result

        setattr(store, name, hooked)

    for name in ("create_workflow", "record_step", "finish_workflow"):
        wrap(name)


async def boundary(n: int, when: str) -> None:
    print(f"BOUNDARY {n} {when}", flush=True)
    await asyncio.Event().wait()  # wait here to be killed


async def main() -> None:
    with sqlite3.connect(LEDGER, timeout=30) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS ledger "
            "(idem_key TEXT PRIMARY KEY, activity TEXT NOT NULL, executions INTEGER NOT NULL)"
        )
    async with manager:
        if CRASH != "none":
            install_crash_hook(store_of(manager), CRASH)
        handle = await manager.workflow(order_saga, KEY, FAIL == "ship").execute(
            idempotency_key=KEY
        )
        try:
            result: Any = {"completed": await handle.result(timeout=60)}
        except ShippingRefused as exc:
            result = {"failed": exc.code}
        print("RESULT " + json.dumps(result), flush=True)
        # The end is visible before the worker's write returns: let the worker reach its
        # boundary (after the last write) instead of cancelling it on the way out.
        await manager.close(drain_timeout=30)


asyncio.run(main())
