# ruff: noqa
"""Registration inside a factory function, as in sagaway.demo: nested defs are recognised."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import sagaway as sw


class Ledger:
    def __init__(self) -> None:
        self.applied: dict[str, int] = {}

    def apply(self, key: str, amount: int) -> None:
        self.applied.setdefault(key, amount)


def build(manager: sw.Manager, ledger: Ledger) -> Callable[[str], Coroutine[Any, Any, int]]:
    @manager.register_activity(name="ledger.debit")
    async def debit(account: str) -> int:
        ledger.apply(sw.activity_info().idempotency_key, -1)
        return -1

    @manager.register_activity(name="ledger.credit")
    async def credit(account: str) -> None:
        ledger.apply(f"credit:{account}", 1)

    @manager.register_workflow(name="ledger.transfer")
    async def transfer(account: str) -> int:
        async with sw.Saga() as saga:
            amount = await debit(account)
            saga.add_compensation(credit, account)
            return amount

    return transfer
