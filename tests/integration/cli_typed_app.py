"""An application whose workflows take and return dataclasses, for `sagaway start` tests:
``build(url)`` makes its Manager; ``manager`` is the one ``--app
tests.integration.cli_typed_app:manager`` loads."""

from __future__ import annotations

import dataclasses

import sagaway as sw


@dataclasses.dataclass
class Order:
    id: str
    amount: int


@dataclasses.dataclass
class Receipt:
    order: str
    total: int


@dataclasses.dataclass
class Approval:
    amount: int
    by: str


class Refused(sw.CompletableError):
    """The order was refused."""


def build(url: str | None) -> sw.Manager:
    m = sw.Manager(url, poll_interval=0.05, recovery_interval=3600.0)

    @m.register_workflow(name="place")
    async def place(order: Order, twice: bool = False) -> Receipt:
        return Receipt(order.id, order.amount * (2 if twice else 1))

    @m.register_workflow(name="refuse")
    async def refuse(order: Order) -> None:
        raise Refused(f"order {order.id} refused")

    @m.register_workflow(name="billing", task_queue="billing")
    async def billing(order: Order) -> Receipt:
        return Receipt(order.id, order.amount)

    @m.register_workflow(name="approve")
    async def approve() -> Approval:
        return await m.signal("approval").receive(Approval)

    @m.register_workflow(name="two_steps")
    async def two_steps() -> list[str]:
        first = await m.signal("first").receive(str)
        return [first, await m.signal("second").receive(str)]

    return m


manager = build(None)
