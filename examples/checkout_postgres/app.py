"""Cross-border checkout on PostgreSQL.

    pip install 'sagaway[postgres]'    # PostgreSQL needs the extra (psycopg)
    export SAGAWAY_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test
    python examples/checkout_postgres/app.py

Use the coupon, create the order, forward it to the overseas partner, send the notification.
If the partner refuses, the saga compensates in reverse: cancel the order, then give the coupon
back. The notification comes after the pivot (the partner accepted): it is retried until it
succeeds and never compensated. Run several `sagaway worker` processes against the same
database and they share the work.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Callable, Coroutine
from decimal import Decimal
from typing import Any

import sagaway as sw


@dataclasses.dataclass(frozen=True)
class Checkout:
    order_id: str
    customer: str
    coupon: str | None
    amount: Decimal
    country: str


class PartnerRefused(sw.CompletableError):
    """The overseas partner refused the order."""


@dataclasses.dataclass
class Services:
    """Stand-ins for the coupon, order, partner and notification services."""

    coupons: dict[str, str] = dataclasses.field(default_factory=lambda: {"WELCOME10": "unused"})
    orders: dict[str, str] = dataclasses.field(default_factory=dict)
    partner_orders: dict[str, str] = dataclasses.field(default_factory=dict)
    notifications: dict[str, str] = dataclasses.field(default_factory=dict)
    refused_countries: set[str] = dataclasses.field(default_factory=lambda: {"XX"})


def build(manager: sw.Manager, svc: Services) -> Callable[[Checkout], Coroutine[Any, Any, str]]:
    @manager.register_activity(name="checkout.use_coupon")
    async def use_coupon(c: Checkout) -> None:
        if c.coupon is not None:
            svc.coupons[c.coupon] = f"used by {c.order_id}"

    @manager.register_activity(name="checkout.restore_coupon")
    async def restore_coupon(c: Checkout) -> None:
        # State-checked: only a coupon this order used is given back, so a repeat does nothing.
        if c.coupon is not None and svc.coupons.get(c.coupon) == f"used by {c.order_id}":
            svc.coupons[c.coupon] = "unused"

    @manager.register_activity(name="checkout.create_order")
    async def create_order(c: Checkout) -> str:
        svc.orders.setdefault(c.order_id, "PENDING")
        return c.order_id

    @manager.register_activity(name="checkout.cancel_order")
    async def cancel_order(order_id: str) -> None:
        if order_id in svc.orders:
            svc.orders[order_id] = "CANCELLED"

    @manager.register_activity(name="checkout.forward_to_partner")
    async def forward_to_partner(c: Checkout) -> str:
        if c.country in svc.refused_countries:
            raise PartnerRefused(f"partner does not ship to {c.country}", code="NO_ROUTE")
        ref = f"P-{c.order_id}"
        svc.partner_orders[sw.activity_info().idempotency_key] = ref
        svc.orders[c.order_id] = "CONFIRMED"
        return ref

    @manager.register_activity(
        name="checkout.send_notification", retry=sw.RetryPolicy(maximum_attempts=0)
    )
    async def send_notification(c: Checkout, partner_ref: str) -> None:
        svc.notifications[sw.activity_info().idempotency_key] = f"{c.customer}: {partner_ref}"

    @manager.register_workflow(name="checkout.global")
    async def checkout(c: Checkout) -> str:
        async with sw.Saga() as saga:
            saga.add_compensation(restore_coupon, c)  # safe even if use_coupon never ran
            await use_coupon(c)
            order_id = await create_order(c)
            saga.add_compensation(cancel_order, order_id)
            partner_ref = await forward_to_partner(c)  # the pivot: after it, no going back
        await send_notification(c, partner_ref)
        return partner_ref

    return checkout


async def main() -> None:
    url = os.environ.get("SAGAWAY_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
    manager = sw.Manager(url)
    svc = Services()
    checkout = build(manager, svc)
    run = f"{asyncio.get_running_loop().time():.0f}"
    async with manager:
        for country in ("JP", "XX"):
            c = Checkout(f"o-{country}-{run}", "alice", "WELCOME10", Decimal("49.90"), country)
            try:
                ref = await manager.workflow(checkout, c).execute_get(idempotency_key=c.order_id)
                print(f"{c.order_id}: forwarded as {ref}")
            except PartnerRefused as exc:
                print(f"{c.order_id}: compensated ({exc})")
            print(f"  order {svc.orders[c.order_id]}, coupon {svc.coupons['WELCOME10']}")


if __name__ == "__main__":
    asyncio.run(main())
