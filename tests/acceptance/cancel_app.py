"""A saga cancelled while it waits, for the kill -9 test: python cancel_app.py DB_URL KEY LEDGER.

Starts an order saga (reserve, charge, then a wait for the `ship` signal), cancels it once it is
WAITING, and prints COMPENSATING when the first compensation (the refund) has begun; the refund
then blocks until the process is killed (BLOCK_REFUND=1). Every activity appends one line to the
LEDGER file, so the test counts how often each effect ran, across processes.

With MODE=last, the saga's last step is the charge, and the cancel is accepted while it runs
(no durable call follows it: the end of the saga block delivers it); the process prints ENDED
and the status if the workflow ends without compensating.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys

import sagaway as sw

manager = sw.Manager(
    sys.argv[1] if len(sys.argv) > 1 else None, lease_timeout=1.0, poll_interval=0.05
)
LEDGER = os.environ.get("LEDGER", "ledger.txt")
BLOCK_REFUND = os.environ.get("BLOCK_REFUND") == "1"
LAST = os.environ.get("MODE") == "last"


def _note(line: str) -> None:
    with open(LEDGER, "a", encoding="utf-8") as ledger:
        ledger.write(line + "\n")


@manager.register_activity(name="reserve")
async def reserve(order: str) -> str:
    _note("reserve")
    return f"res-{order}"


@manager.register_activity(name="release")
async def release(reservation: str) -> None:
    _note(f"release {reservation}")


@manager.register_activity(name="charge")
async def charge(order: str) -> str:
    _note("charge")
    if LAST and sw.activity_info().attempt == 1:
        assert await manager.cancel(order, "customer withdrew")  # accepted while it runs
    return f"pay-{order}"


@manager.register_activity(name="refund")
async def refund(payment: str) -> None:
    _note(f"refund {payment}")
    if BLOCK_REFUND:
        print("COMPENSATING", flush=True)
        await asyncio.Event().wait()


@manager.register_workflow(name="order")
async def order(order_id: str) -> str:
    async with sw.Saga() as saga:
        reservation = await reserve(order_id)
        saga.add_compensation(release, reservation)
        payment = await charge(order_id)
        saga.add_compensation(refund, payment)
        if LAST:
            return payment
        return await manager.signal("ship").receive(str)


async def main() -> None:
    key = sys.argv[2]
    async with manager:
        handle = await manager.workflow(order, key).execute(idempotency_key=key)
        if LAST:
            # Killed before this, if it compensates (the refund blocks).
            with contextlib.suppress(sw.WorkflowCancelled):
                await handle.result(timeout=30)
            print("ENDED", (await handle.status()).value, flush=True)
            return
        while await handle.status() is not sw.WorkflowStatus.WAITING:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        await handle.cancel("customer withdrew")
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
