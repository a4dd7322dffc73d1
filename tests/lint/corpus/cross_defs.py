# ruff: noqa
"""Functions used by bad_cross_calls.py: one registered, one forgotten."""

from __future__ import annotations

import sagaway as sw

manager = sw.Manager()


@manager.register_activity
async def pack_parcel(order: str) -> str:
    return order


async def ship_parcel(order: str) -> str:  # forgot @manager.register_activity
    return order
