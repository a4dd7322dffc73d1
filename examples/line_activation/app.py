"""Mobile line activation: answer at once, finish in the background.

    python examples/line_activation/app.py

The workflow saves the activation request and starts a child workflow, fire-and-forget, that
publishes the `LineActivated` event; the client gets its answer without waiting for the
publication. The child is a workflow of its own: if its process dies or the broker fails, the
Recovery Worker finishes it later.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Coroutine
from typing import Any

import sagaway as sw


@dataclasses.dataclass(frozen=True)
class Activation:
    phone: str
    plan: str


@dataclasses.dataclass
class Backend:
    """Stand-ins for the activation table and the event broker."""

    requests: dict[str, Activation] = dataclasses.field(default_factory=dict)
    events: dict[str, str] = dataclasses.field(default_factory=dict)
    broker_up: bool = True


def build(
    manager: sw.Manager, backend: Backend
) -> Callable[[Activation], Coroutine[Any, Any, str]]:
    @manager.register_activity(name="line.save_request")
    async def save_request(req: Activation) -> str:
        backend.requests[req.phone] = req
        return req.phone

    @manager.register_activity(
        name="line.publish_event",
        retry=sw.RetryPolicy(initial_interval=0.5, maximum_attempts=5),
    )
    async def publish_event(phone: str) -> None:
        if not backend.broker_up:
            raise sw.RetryableError("broker unavailable")
        # The idempotency key makes a re-published event a duplicate the consumer can drop.
        backend.events[sw.activity_info().idempotency_key] = f"LineActivated {phone}"

    @manager.register_workflow(name="line.publish_activation")
    async def publish_activation(phone: str) -> None:
        await publish_event(phone)

    @manager.register_workflow(name="line.activate")
    async def activate(req: Activation) -> str:
        phone = await save_request(req)
        await manager.workflow(publish_activation, phone).execute()  # fire-and-forget child
        return f"activation of {phone} accepted"

    return activate


async def main() -> None:
    manager = sw.Manager()
    backend = Backend()
    activate = build(manager, backend)
    async with manager:
        key = f"line-{asyncio.get_running_loop().time():.0f}"
        request = Activation("080-1234-5678", "5G")
        answer = await manager.workflow(activate, request).execute_get(idempotency_key=key)
        print(answer)
        child = (await manager.get_workflow(key).describe()).children[0]
        await manager.get_workflow(child).result()
        print(f"child {child}: {backend.events}")


if __name__ == "__main__":
    asyncio.run(main())
