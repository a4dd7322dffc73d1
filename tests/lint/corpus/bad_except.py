# ruff: noqa
"""SW501: broad handlers around durable calls swallow cancellation and incompletable errors."""

from __future__ import annotations

import asyncio

import sagaway as sw
from sagaway import Cancelled

manager = sw.Manager()


@manager.register_activity
async def charge(order: str) -> str:
    return order


@manager.register_activity
async def reserve(order: str) -> str:
    return order


@manager.register_activity
async def release(reservation: str) -> None: ...


@manager.register_workflow
async def swallow_all(order: str) -> str:
    try:
        return await charge(order)
    except:  # expect: SW501
        return "failed"


@manager.register_workflow
async def swallow_base(order: str) -> str:
    try:
        await charge(order)
    except BaseException:  # expect: SW501
        pass
    return "ok"


@manager.register_workflow
async def compensates_on_cancel(order: str) -> None:
    saga = sw.Saga()
    try:
        saga.add_compensation(release, await reserve(order))
        await charge(order)
    except (ValueError, BaseException):  # expect: SW501
        await saga.execute()
        raise


@manager.register_workflow
async def swallow_cancel(order: str) -> None:
    try:
        await manager.sleep(60)
    except sw.Cancelled:  # expect: SW501
        return None
    except asyncio.CancelledError:  # expect: SW501
        return None
    except Cancelled as exc:  # expect: SW501
        print(exc)


@manager.register_workflow
async def broad_without_durable_calls(order: str) -> str:
    try:
        value = int(order)  # nothing durable here: not reported
    except BaseException:
        value = 0
    return await charge(str(value))
