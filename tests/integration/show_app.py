"""An application for the tests of `sagaway show` and `sagaway list` pages: steps that fail and
are retried, typed signals that are delivered or rejected, and a workflow driven by the test
through a signal (for ``show --follow``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import sagaway as sw

FAST = sw.RetryPolicy(initial_interval=0.001, maximum_interval=0.001, maximum_attempts=5)


class OutOfStock(sw.CompletableError):
    """The item is out of stock."""


@dataclasses.dataclass
class Approval:
    ok: bool
    by: str


def build(url: str | None) -> sw.Manager:
    m = sw.Manager(url, poll_interval=0.05, recovery_interval=3600.0)

    @m.register_activity(retry=FAST, name="reserve")
    def reserve(item: str) -> dict[str, Any]:
        attempt = sw.activity_info().attempt
        if attempt < 3:
            raise sw.RetryableError(f"warehouse busy (attempt {attempt})")
        if item == "gone":
            raise OutOfStock(f"no {item} left (attempt {attempt})")
        return {"item": item, "held": True}

    @m.register_workflow(name="order")
    async def order(item: str, qty: int = 1) -> dict[str, Any]:
        held = await reserve(item)
        return {"reserved": held, "qty": qty}

    @m.register_workflow(name="approve")
    async def approve() -> str:
        decision = await m.signal("approval").receive(Approval)
        return f"approved by {decision.by}" if decision.ok else "declined"

    @m.register_workflow(name="stepwise")
    async def stepwise(item: str) -> dict[str, Any]:
        held = await reserve(item)
        await m.signal("go").receive()
        again = await reserve(item)
        return {"first": held, "second": again}

    return m
