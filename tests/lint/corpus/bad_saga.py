# ruff: noqa
"""SW401: compensations added to a saga that is never run."""

from __future__ import annotations

import sagaway as sw
from sagaway import Saga

manager = sw.Manager()


@manager.register_activity
async def reserve(order: str) -> str:
    return order


@manager.register_activity
async def release(reservation: str) -> None: ...


@manager.register_activity
async def charge(order: str) -> None: ...


@manager.register_workflow
async def forgets(order: str) -> None:
    saga = sw.Saga()
    reservation = await reserve(order)
    saga.add_compensation(release, reservation)  # expect: SW401
    saga.add_compensation(release, reservation)
    await charge(order)


@manager.register_workflow
async def forgets_too(order: str) -> None:
    undo = Saga()
    undo.add_compensation(release, await reserve(order))  # expect: SW401
    if undo.pending:  # reading `pending` does not run anything
        await charge(order)
