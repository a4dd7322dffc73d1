# The README's "saga in 20 lines" (kept identical by tests/acceptance/test_examples.py).
import asyncio
import sagaway as sw

manager = sw.Manager()  # sqlite:///sagaway.db, or $SAGAWAY_DATABASE_URL

class OutOfStock(sw.CompletableError):
    """No stock left."""

@manager.register_activity
async def reserve(order_id: str, qty: int) -> str:
    return f"res-{order_id}"   # call the inventory service with sw.activity_info().idempotency_key

@manager.register_activity
async def release(reservation: str) -> None: ...      # idempotent: releasing twice does nothing

@manager.register_activity(retry=sw.RetryPolicy(maximum_attempts=5))
async def charge(order_id: str, amount: int) -> str:
    raise OutOfStock("card declined", code="DECLINED")  # a business failure: compensate

@manager.register_workflow
async def checkout(order_id: str, amount: int) -> str:
    async with sw.Saga() as saga:                    # compensates on a completable error
        reservation = await reserve(order_id, 1)       # durable: recorded, never run twice
        saga.add_compensation(release, reservation)
        return await charge(order_id, amount)

async def main() -> None:
    async with manager:                              # opens the store, runs workers + recovery
        try:
            await manager.workflow(checkout, "order-1", 100).execute_get(idempotency_key="order-1")
        except OutOfStock as exc:
            print("failed and compensated:", exc)

asyncio.run(main())
