# ruff: noqa
"""SW301: activities that write to external systems without an idempotency key."""

from __future__ import annotations

import sqlite3
from typing import Any

import httpx

import sagaway as sw

manager = sw.Manager()
PAY_URL = "https://pay.example/charges"


@manager.register_activity
async def charge(order_id: str, amount: int) -> str:
    async with httpx.AsyncClient() as client:
        response = await client.post(PAY_URL, json={"amount": amount})  # expect: SW301
    return str(response.json()["id"])


@manager.register_activity(retry=sw.RetryPolicy(maximum_attempts=3))
def record(order_id: str) -> None:
    with sqlite3.connect("orders.db") as conn:
        conn.execute("INSERT INTO orders (id) VALUES (?)", (order_id,))  # expect: SW301


@manager.register_activity
def rename(db: Any, table: str, name: str) -> None:
    db.execute(f"UPDATE {table} SET name = ?", (name,))  # expect: SW301


@manager.register_activity
async def notify(bus: Any, user: str) -> None:
    await bus.publish("user.notified", {"user": user})  # expect: SW301


@manager.register_activity
def export(rows: list[str], path: str) -> None:
    with open(path, "w") as handle:  # expect: SW301
        handle.write("\n".join(rows))


def _create_invoice(api: Any, order_id: str) -> str:
    return str(api.Invoice.create(order=order_id))  # expect: SW301


create_invoice = manager.register_activity(_create_invoice)
