"""Workflows for the fork tests: an order pipeline whose step 3 has a bug (``BUG``, a module
flag a test turns off as a deploy of the fix would), the same as a Saga, a gather before the
buggy step (and one that opens a saga), a parent with a child, and a workflow that waits for a
signal. Every activity counts its executions and the idempotency keys it was given (``calls``,
``idempotency_keys``).
"""

from __future__ import annotations

import asyncio
import collections

import sagaway as sw

BUG = {"on": True}
calls: collections.Counter[str] = collections.Counter()
idempotency_keys: dict[str, list[str]] = collections.defaultdict(list)


class LabelBug(sw.CompletableError):
    """Shipping failed: the label printer code has a bug."""


def reset() -> None:
    BUG["on"] = True
    calls.clear()
    idempotency_keys.clear()


def _count(name: str) -> None:
    calls[name] += 1
    idempotency_keys[name].append(sw.activity_info().idempotency_key)


def build(url: str | None) -> sw.Manager:
    m = sw.Manager(url, poll_interval=0.05, recovery_interval=3600.0)

    @m.register_activity(name="reserve")
    async def reserve(order: int) -> str:
        _count("reserve")
        return f"stock-{order}"

    @m.register_activity(name="charge")
    async def charge(reservation: str) -> str:
        _count("charge")
        return f"paid-{reservation}"

    @m.register_activity(name="ship")
    async def ship(payment: str) -> str:
        _count("ship")
        if BUG["on"]:
            raise LabelBug("label printer bug", code="BUG")
        return f"shipped-{payment}"

    @m.register_activity(name="pack")
    async def pack(reservation: str, box: str) -> str:
        _count(f"pack-{box}")
        return f"{box}:{reservation}"

    @m.register_activity(name="release")
    async def release(reservation: str) -> None:
        _count("release")

    @m.register_activity(name="refund")
    async def refund(payment: str) -> None:
        _count("refund")

    @m.register_activity(name="print_label")
    async def print_label(order: int) -> str:
        _count("print_label")
        return f"label-{order}"

    @m.register_workflow(name="pipeline")
    async def pipeline(order: int) -> str:
        reservation = await reserve(order)  # step 1
        payment = await charge(reservation)  # step 2
        return await ship(payment)  # step 3

    @m.register_workflow(name="saga_pipeline")
    async def saga_pipeline(order: int) -> str:
        async with sw.Saga() as saga:
            reservation = await reserve(order)  # step 1
            saga.add_compensation(release, reservation)
            payment = await charge(reservation)  # step 2
            saga.add_compensation(refund, payment)
            return await ship(payment)  # step 3; compensations are steps 4 and 5

    @m.register_workflow(name="gathered")
    async def gathered(order: int) -> str:
        reservation = await reserve(order)  # step 1
        a, b = await asyncio.gather(pack(reservation, "a"), pack(reservation, "b"))  # 1/1, 2/1
        return await ship(f"{a}+{b}")  # step 2

    @m.register_workflow(name="packed_first")
    async def packed_first(order: int) -> str:
        async with sw.Saga() as saga:
            a, b = await asyncio.gather(pack(order, "a"), pack(order, "b"))  # 1/1, 2/1
            saga.add_compensation(release, a)
            return await ship(f"{a}+{b}")  # step 1; the compensation is step 2

    @m.register_workflow(name="label")
    async def label(order: int) -> str:
        return await print_label(order)

    @m.register_workflow(name="slow_label")
    async def slow_label(order: int) -> str:
        return str(await m.signal("printer_ready").receive(str))

    @m.register_workflow(name="parent")
    async def parent(order: int, slow: bool = False) -> str:
        child = slow_label if slow else label
        printed = await m.workflow(child, order).execute_get()  # steps 1 (start), 2 (result)
        return await ship(printed)  # step 3

    @m.register_workflow(name="approval")
    async def approval(order: int) -> str:
        reservation = await reserve(order)  # step 1
        decision = await m.signal("approve").receive(str)  # step 2
        return f"{reservation}: {decision}"

    @m.register_workflow(name="broken")
    async def broken(order: int) -> str:
        await reserve(order)
        raise RuntimeError("the warehouse service is down")

    return m
