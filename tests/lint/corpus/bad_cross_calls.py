# ruff: noqa
"""SW201, SW203, SW402 across files: found when cross_defs.py is analysed in the same run."""

from __future__ import annotations

import sagaway as sw

from cross_defs import manager, pack_parcel, ship_parcel


@manager.register_workflow
async def fulfil(order: str) -> None:
    await manager.activity(pack_parcel, order).execute_get()
    await manager.activity(ship_parcel, order).execute_get()  # expect: SW201
    pack_parcel(order)  # expect: SW203
    async with sw.Saga() as saga:
        saga.add_compensation(pack_parcel)  # expect: SW402
        saga.add_compensation(pack_parcel, order)
