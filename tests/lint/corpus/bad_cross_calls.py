# ruff: noqa
"""SW201 across files: found when cross_defs.py is analysed in the same run."""

from __future__ import annotations

from cross_defs import manager, pack_parcel, ship_parcel


@manager.register_workflow
async def fulfil(order: str) -> None:
    await manager.activity(pack_parcel, order).execute_get()
    await manager.activity(ship_parcel, order).execute_get()  # expect: SW201
