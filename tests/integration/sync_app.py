"""Workflows for the SyncClient tests, registered on a fresh Manager per test."""

from __future__ import annotations

import dataclasses
from typing import Any

import sagaway as sw


@dataclasses.dataclass(frozen=True)
class Order:
    sku: str
    qty: int


@dataclasses.dataclass(frozen=True)
class Receipt:
    sku: str
    total: int


class OutOfStock(sw.CompletableError):
    """The business refused the order (a completable error: the workflow ends FAILED)."""


@dataclasses.dataclass
class App:
    manager: sw.Manager
    price: Any
    refuse: Any
    approval: Any
    hold: Any
    released: list[str]


def make_app(url: str, **options: Any) -> App:
    """A Manager on ``url`` with the test workflows registered (names: sync.price, ...)."""
    options.setdefault("poll_interval", 0.05)
    manager = sw.Manager(url, **options)
    released: list[str] = []

    @manager.register_activity(name="sync.unit_price")
    async def unit_price(sku: str) -> int:
        return 7 if sku == "tea" else 3

    @manager.register_activity(name="sync.release")
    async def release(what: str) -> None:
        released.append(what)

    @manager.register_workflow(name="sync.price")
    async def price(order: Order) -> Receipt:
        unit = await unit_price(order.sku)
        return Receipt(order.sku, unit * order.qty)

    @manager.register_workflow(name="sync.refuse")
    async def refuse(sku: str) -> str:
        raise OutOfStock(f"no {sku} left", code="stock")

    @manager.register_workflow(name="sync.approval")
    async def approval(who: str) -> str:
        answer = await manager.signal("approve").receive(str)
        return f"{who}:{answer}"

    @manager.register_workflow(name="sync.hold")
    async def hold(what: str) -> str:
        async with sw.Saga() as saga:
            saga.add_compensation(release, what)
            await manager.signal("never").receive(str)
        return "unreachable"

    return App(manager, price, refuse, approval, hold, released)
