# ruff: noqa
"""Idiomatic workflow and activity code, including near misses the rules must not report."""

from __future__ import annotations

import asyncio
import datetime
import os
import random
import time
import uuid
from typing import Any

import requests

import sagaway as sw

manager = sw.Manager(os.environ.get("DATABASE_URL"))  # module level, not workflow code

STEPS = ["reserve", "charge"]  # read-only: a constant
NAMESPACE = uuid.UUID("12345678-1234-5678-1234-567812345678")


class Declined(sw.CompletableError):
    """The card was declined."""


@manager.register_activity
async def now() -> float:
    return time.time()  # activities may read the clock


@manager.register_activity
def fetch_rates() -> dict[str, float]:
    return dict(requests.get("https://rates.example", timeout=5).json())  # reads only


@manager.register_activity
async def reserve(order: str, qty: int) -> str:
    key = sw.activity_info().idempotency_key
    response = requests.post(
        "https://stock.example/reservations",
        json={"order": order, "qty": qty},
        headers={"Idempotency-Key": key},
        timeout=5,
    )
    return str(response.json()["id"])


@manager.register_activity
async def release(reservation: str) -> None:
    requests.delete(
        f"https://stock.example/reservations/{reservation}",
        headers={"Idempotency-Key": f"release:{reservation}"},
        timeout=5,
    )


@manager.register_activity(retry=sw.RetryPolicy(maximum_attempts=5), timeout=30.0)
def charge(db: Any, order: str, amount: int, idempotency_key: str) -> str:
    db.execute(
        "INSERT INTO charges (key, order_id, amount) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
        (idempotency_key, order, amount),
    )
    return order


@manager.register_activity
def shuffle_lines(lines: list[str]) -> list[str]:
    lines.insert(0, "header")  # list.insert, not a database insert
    cache: dict[str, str] = {}
    cache.update({"a": "b"})  # dict.update, not SQL UPDATE
    random.shuffle(lines)  # activities may be random
    return lines


async def _audit(entry: str) -> str:
    return entry


audit = manager.register_activity(name="audit")(_audit)


@manager.register_workflow
async def child(order: str) -> None: ...


@manager.register_workflow(name="checkout")
async def checkout(order: str, amount: int, tags: list[str]) -> str:
    started = await now()
    deadline = started + datetime.timedelta(hours=1).total_seconds()
    key = uuid.uuid5(NAMESPACE, order)  # deterministic
    rng = random.Random(order)  # seeded by the arguments
    time = deadline  # a local variable called time
    await manager.sleep(max(0.0, time - started))
    await asyncio.sleep(0)
    unique = sorted(set(tags))
    for tag in sorted({"a", "b"} | set(unique)):
        await manager.activity(audit, tag).execute_get()
    if "vip" in {"vip", "gold"}:  # membership test: no iteration
        await audit("vip")
    labels = {t.upper() for t in set(tags)}  # set from a set: order does not leak
    counts = {step: len(step) for step in STEPS}  # dict order is insertion order
    first = min(t for t in set(tags)) if tags else ""
    results = await asyncio.gather(*(manager.activity(audit, t).execute_get() for t in unique))
    async with sw.Saga() as saga:
        reservation = await reserve(order, 1)
        saga.add_compensation(release, reservation)
        await manager.activity(charge, None, order, amount, str(key)).execute_get()
    await manager.workflow(child, order).execute()
    await _audit(f"{rng.random()}{labels}{counts}{first}{results}")  # plain helper call
    return reservation


@manager.register_workflow
async def explicit_saga(order: str) -> str:
    saga = sw.Saga()
    try:
        reservation = await reserve(order, 1)
        saga.add_compensation(release, reservation)
        return await manager.activity(charge, None, order, 1, order).execute_get()
    except Declined:
        await saga.compensate()
        raise
    except BaseException:
        raise  # re-raised untouched: cancellation still reaches the engine


@manager.register_workflow
async def compensates_on_cancel(order: str) -> str:
    saga = sw.Saga()
    try:
        reservation = await reserve(order, 1)
        saga.add_compensation(release, reservation)
        return await manager.activity(charge, None, order, 1, order).execute_get()
    except (sw.CompletableError, sw.Cancelled):
        await saga.compensate()  # a cancellation is undone too, then re-raised
        raise


def build_saga(order: str) -> sw.Saga:
    saga = sw.Saga()
    saga.add_compensation(release, order)
    return saga  # the caller runs it


@manager.register_workflow
async def uses_built_saga(order: str) -> None:
    saga = build_saga(order)
    try:
        await reserve(order, 1)
    except sw.CompletableError:
        await saga.execute()
        raise
    except Exception:  # incompletable errors come back at the next durable call
        raise


async def dispatch(fn: Any, order: str) -> None:
    await manager.activity(fn, order).execute_get()  # a parameter: unknown, not reported


async def main() -> None:
    stamp = time.time() if False else 0.0  # not workflow code
    with open(os.devnull) as handle:
        handle.read()
    async with manager:
        await manager.workflow(checkout, "o-1", 100, ["a"]).execute(idempotency_key="o-1")
        print(stamp)


@manager.register_workflow
async def patched_order(order_id: str) -> str:
    """A change behind sw.patched, and an older one already deprecated: both clean."""
    sw.deprecate_patch("retired-change")
    if sw.patched("new-change"):
        return order_id
    return order_id.upper()
