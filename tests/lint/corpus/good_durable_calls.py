# ruff: noqa
"""Near misses of SW203 and SW402: awaited or passed-on durable calls, complete compensations."""

from __future__ import annotations

import asyncio
from typing import Any

import sagaway as sw

manager = sw.Manager()


@manager.register_activity
async def pay(order: str) -> str:
    return f"pay-{order}"


@manager.register_activity
async def refund(payment: str, amount: int = 0, *, note: str = "") -> None: ...


@manager.register_activity
async def undo_all() -> None: ...


@manager.register_activity
async def release(*args: str, **kwargs: str) -> None: ...


def plain(order: str) -> str:
    return order


def later(order: str) -> Any:
    return pay(order)  # handed to the caller, which awaits it


@manager.register_workflow
async def checkout(order: str, parts: list[str], options: dict[str, str]) -> None:
    first = pay(order)
    second = pay(order)
    await asyncio.gather(first, second)
    task = pay(order)
    await task
    await later(order)
    plain(order)
    name = plain(order)
    receipt = await pay(order)
    await asyncio.gather(pay(order), pay(order))
    calls = [pay(p) for p in parts]
    await asyncio.gather(*calls)
    async with sw.Saga() as saga:
        saga.add_compensation(refund, receipt)
        saga.add_compensation(refund, payment=receipt)
        saga.add_compensation(undo_all)
        saga.add_compensation(release)
        saga.add_compensation(refund, *parts)
        saga.add_compensation(refund, **options)
        saga.add_compensation("refund")  # by name: not checked


async def main() -> None:
    pay("o-1")  # outside a workflow: the function itself (SW203 is about workflow code)
    async with manager:
        await manager.workflow(checkout, "o-1", [], {}).execute()
