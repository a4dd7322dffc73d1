"""The crypto purchase saga, on the embedded default.

A customer buys bitcoin with yen and loyalty points. Three services, three local transactions:
authorise the yen balance, authorise the points, credit the coin. If crediting fails with a
business error, the saga undoes the points and then the balance, in reverse order, and the
trade ends FAILED. Every service call carries the activity's idempotency key, so a retried or
recovered call takes effect once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Coroutine
from decimal import Decimal
from typing import Any

import sagaway as sw


@dataclasses.dataclass(frozen=True)
class Purchase:
    trade_id: str
    user: str
    yen: Decimal
    points: int
    btc: Decimal


@dataclasses.dataclass(frozen=True)
class Receipt:
    trade_id: str
    btc: Decimal
    yen_paid: Decimal
    points_used: int


class CoinUnavailable(sw.CompletableError):
    """The exchange refused to credit the coin."""


class Services:
    """In-memory stand-ins for the balance, points and coin services.

    Each keeps the idempotency keys it has applied, as a real service would in its database.
    """

    def __init__(self, yen: Decimal = Decimal("1000000"), points: int = 5000) -> None:
        self.yen = yen
        self.points = points
        self.btc = Decimal("0")
        self.applied: dict[str, str] = {}
        self.market_open = True

    def apply(self, key: str, what: str) -> bool:
        """Record ``key``; False if it was already applied (a duplicate delivery)."""
        if key in self.applied:
            return False
        self.applied[key] = what
        return True


def build(
    manager: sw.Manager, services: Services
) -> Callable[[Purchase], Coroutine[Any, Any, Receipt]]:
    """Register the saga's activities and workflow on ``manager``; returns the workflow."""

    @manager.register_activity(name="balance.authorize")
    async def authorize_balance(p: Purchase) -> str:
        key = sw.activity_info().idempotency_key
        if services.apply(key, "authorize_balance"):
            services.yen -= p.yen
        return key

    @manager.register_activity(name="balance.cancel")
    async def cancel_balance(p: Purchase, authorization: str) -> None:
        if services.apply(f"cancel:{authorization}", "cancel_balance"):
            services.yen += p.yen  # commutative: add back what was taken

    @manager.register_activity(name="points.authorize")
    async def authorize_points(p: Purchase) -> str:
        key = sw.activity_info().idempotency_key
        if services.apply(key, "authorize_points"):
            services.points -= p.points
        return key

    @manager.register_activity(name="points.cancel")
    async def cancel_points(p: Purchase, authorization: str) -> None:
        if services.apply(f"cancel:{authorization}", "cancel_points"):
            services.points += p.points

    @manager.register_activity(name="coin.credit")
    async def credit_coin(p: Purchase) -> Decimal:
        if not services.market_open:
            raise CoinUnavailable(
                f"exchange closed; cannot credit {p.btc} BTC", code="MARKET_CLOSED"
            )
        if services.apply(sw.activity_info().idempotency_key, "credit_coin"):
            services.btc += p.btc
        return p.btc

    @manager.register_workflow(name="crypto.purchase")
    async def purchase(p: Purchase) -> Receipt:
        async with sw.Saga() as saga:
            balance_auth = await authorize_balance(p)
            saga.add_compensation(cancel_balance, p, balance_auth)
            points_auth = await authorize_points(p)
            saga.add_compensation(cancel_points, p, points_auth)
            btc = await credit_coin(p)
        return Receipt(p.trade_id, btc, p.yen, p.points)

    return purchase
