# ruff: noqa
"""SW402: compensations added without the arguments they require."""

from __future__ import annotations

import sagaway as sw

manager = sw.Manager()


@manager.register_activity
async def pay(order: str) -> str:
    return f"pay-{order}"


@manager.register_activity
async def refund(payment: str, amount: int, note: str = "") -> None: ...


@manager.register_activity
async def release(*, reservation: str) -> None: ...


@manager.register_workflow
async def checkout(order: str) -> None:
    async with sw.Saga() as saga:
        payment = await pay(order)
        saga.add_compensation(refund)  # expect: SW402
        saga.add_compensation(refund, payment)  # expect: SW402
        saga.add_compensation(refund, payment, note="x")  # expect: SW402
        saga.add_compensation(release)  # expect: SW402
