# ruff: noqa
"""SW701-SW703: sw.patched and sw.deprecate_patch used against their rules."""

from __future__ import annotations

import sagaway as sw
from sagaway import patched

manager = sw.Manager()
CHANGE = "fraud-check"


@manager.register_activity
async def charge(order: str) -> str:
    if sw.patched("in-activity"):  # expect: SW702
        return "new"
    return order


@manager.register_activity
async def ship(order: str) -> str:
    return order


@manager.register_workflow
async def order(order_id: str) -> str:
    if sw.patched(CHANGE):  # expect: SW701
        await ship(order_id)
    if patched(f"v-{order_id}"):  # expect: SW701
        await ship(order_id)
    if sw.patched("ship-first"):
        await ship(order_id)
    return await charge(order_id)


@manager.register_workflow
async def order_v3(order_id: str) -> str:
    sw.deprecate_patch("ship-first")  # expect: SW703
    await ship(order_id)
    return await charge(order_id)
