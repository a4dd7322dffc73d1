"""An application for the web console tests: workflows that complete, suspend until a flag
file exists, wait for a typed signal after a compensable step, answer an update, write many
stream items, and start a child."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import sagaway as sw


@dataclasses.dataclass
class Approval:
    ok: bool
    by: str


def build(url: str | None, flag: Path) -> sw.Manager:
    """The Manager; ``deliver`` fails (the workflow suspends) until ``flag`` exists."""
    m = sw.Manager(url, poll_interval=0.05, recovery_interval=3600.0)

    @m.register_activity(name="book")
    def book(item: str) -> str:
        return f"booking of {item}"

    @m.register_activity(name="unbook")
    def unbook(booking: str) -> None:
        pass

    @m.register_activity(name="deliver", retry=sw.RetryPolicy(maximum_attempts=1))
    def deliver(item: str) -> str:
        if not flag.exists():
            raise RuntimeError(f"courier offline: no route for {item}")
        return f"{item} delivered"

    @m.register_workflow(name="simple")
    async def simple(item: str) -> str:
        return await book(item)

    @m.register_workflow(name="flaky")
    async def flaky(item: str) -> str:
        await book(item)
        return await deliver(item)

    @m.register_workflow(name="held")
    async def held(item: str) -> str:
        async with sw.Saga() as saga:
            booking = await book(item)
            saga.add_compensation(unbook, booking)
            decision = await m.signal("approval").receive(Approval)
            return f"approved by {decision.by}"

    def positive(amount: int) -> None:
        if amount <= 0:
            raise ValueError(f"amount {amount} is not positive")

    async def double(amount: int) -> int:
        return amount * 2

    @m.register_workflow(name="approvals")
    async def approvals(item: str) -> int:
        return int(await m.update("approve").handle(double, validator=positive))

    @m.register_workflow(name="chatty")
    async def chatty(count: str) -> int:
        """Writes ``count`` stream items ("n0", "n1", ...), 500 a step, between two events."""
        await sw.set_event("phase", "writing")
        for start in range(0, int(count), 500):
            end = min(start + 500, int(count))
            await sw.write_stream("lines", *(f"n{i}" for i in range(start, end)))
        await sw.set_event("phase", "done")
        return int(count)

    @m.register_workflow(name="family")
    async def family(item: str) -> str:
        return str(await m.workflow(simple, item).execute_get())

    return m


manager = build(None, Path(os.environ.get("CONSOLE_APP_FLAG", "courier-back")))
"""For ``sagaway worker tests.integration.console_app:manager`` (the browser tests): its flag
file is ``$CONSOLE_APP_FLAG``."""
