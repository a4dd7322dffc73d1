# ruff: noqa
"""SW201/SW202: durable calls must name functions registered as the right kind."""

from __future__ import annotations

import sagaway as sw

manager = sw.Manager()


async def not_registered(order: str) -> str:
    return order


async def release_plain(reservation: str) -> None: ...


@manager.register_activity
async def reserve(order: str) -> str:
    return f"res-{order}"


@manager.register_activity
async def release(reservation: str) -> None: ...


@manager.register_workflow
async def child(order: str) -> None: ...


@manager.register_workflow
async def checkout(order: str) -> None:
    await manager.activity(not_registered, order).execute_get()  # expect: SW201
    await manager.workflow(not_registered, order).execute()  # expect: SW201
    async with sw.Saga() as saga:
        reservation = await reserve(order)
        saga.add_compensation(release_plain, reservation)  # expect: SW201
        saga.add_compensation(release, reservation)
        saga.add_compensation(child, reservation)  # expect: SW202
        await manager.activity(child, order).execute_get()  # expect: SW202
        await manager.workflow(reserve, order).execute()  # expect: SW202
        await manager.workflow(child, order).execute()
        await manager.activity("reserve", order).execute_get()  # by name: not checked


async def main() -> None:
    async with manager:
        await manager.workflow(not_registered, "o-1").execute()  # expect: SW201
        await manager.workflow(checkout, "o-1").execute()
