"""An application for the batch operation tests: an order saga that reserves (compensated by
a release that counts, per key, how often it ran) and waits for a signal, one that sets the
search attributes it is given and waits for a signal, a workflow that suspends, and one that
completes. ``build(url)`` makes a Manager with them."""

from __future__ import annotations

import collections
from typing import Any

import sagaway as sw

released: collections.Counter[str] = collections.Counter()
"""How often each order's reservation was released (compensated), in this process."""


def build(url: str | None, **options: Any) -> sw.Manager:
    options.setdefault("poll_interval", 0.05)
    options.setdefault("recovery_interval", 3600.0)
    m = sw.Manager(url, **options)

    @m.register_activity(name="reserve")
    async def reserve(key: str) -> str:
        return f"r-{key}"

    @m.register_activity(name="release")
    async def release(reservation: str) -> None:
        released[reservation.removeprefix("r-")] += 1

    @m.register_workflow(name="order")
    async def order(key: str) -> Any:
        async with sw.Saga() as saga:
            saga.add_compensation(release, await reserve(key))
            return await m.signal("go").receive()

    @m.register_workflow(name="tagged")
    async def tagged(attributes: dict[str, Any]) -> Any:
        await sw.set_search_attributes(attributes)
        return await m.signal("go").receive()

    @m.register_workflow(name="broken")
    async def broken() -> None:
        raise RuntimeError("the provider is down")

    @m.register_workflow(name="ok")
    async def ok() -> str:
        return "ok"

    return m
