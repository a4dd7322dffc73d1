"""A travel-booking agent as a saga: three compensated tools, one of them behind an approval.

Offline (a scripted model, no key, no network):

    python examples/travel_agent/app.py                 # approve the car: the trip is booked
    python examples/travel_agent/app.py --reject        # reject it: hotel and flight cancelled

With a real model, name it (and install its client, e.g. ``pip install 'pydantic-ai-slim[openai]'``
with ``OPENAI_API_KEY`` set): ``SAGAWAY_AGENT_MODEL=openai:gpt-4o-mini python examples/...``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

import sagaway as sw
from sagaway.agents import Approval, DurableAgent

PLAN = ("book_flight", "book_hotel", "book_car")
"""What the scripted model asks for, in this order, before it answers."""


@dataclasses.dataclass
class Booking:
    kind: str
    ref: str
    city: str


class SoldOut(sw.CompletableError):
    """Nothing left to book."""


class Agency:
    """The travel services the tools call: a fake that writes one line per effect to a ledger
    file (a booking, a cancellation), so what happened can be counted from any process."""

    def __init__(self, ledger: Path, *, sold_out: frozenset[str] = frozenset()) -> None:
        self.ledger = ledger
        self.sold_out = sold_out
        self.before_booking: Callable[[str], Awaitable[None]] | None = None
        """Awaited before each booking (tests hold a booking in flight with it)."""

    def write(self, line: str) -> None:
        with self.ledger.open("a") as out:
            out.write(line + "\n")

    def lines(self) -> list[str]:
        return self.ledger.read_text().splitlines() if self.ledger.exists() else []

    async def book(self, kind: str, city: str) -> Booking:
        if self.before_booking is not None:
            await self.before_booking(kind)
        if kind in self.sold_out:
            self.write(f"sold out {kind}")
            raise SoldOut(f"no {kind} left in {city}", code="SOLD_OUT")
        # The step's idempotency key is stable across retries and processes: a real agency
        # would take it as its own, so a repeated attempt books once.
        ref = f"{kind[0].upper()}-{sw.activity_info().idempotency_key}"
        self.write(f"book {kind} {city}")
        return Booking(kind, ref, city)

    async def cancel(self, booking: Booking) -> None:
        self.write(f"cancel {booking.kind} {booking.city}")


def scripted_model(
    on_request: Callable[[int], Awaitable[None]] | None = None,
) -> FunctionModel:
    """A model that books a flight, a hotel and a car, one tool call per request, then says
    so. ``on_request(n)`` is awaited at request ``n`` (0, 1, ...): tests count and hold them."""

    async def plan(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(
            isinstance(part, ToolReturnPart | RetryPromptPart)
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
        )
        if on_request is not None:
            await on_request(done)
        prompt = next(
            str(part.content)
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, UserPromptPart)
        )
        city = prompt.rsplit(" ", 1)[-1]
        if done < len(PLAN):
            return ModelResponse(parts=[ToolCallPart(PLAN[done], {"city": city})])
        return ModelResponse(parts=[TextPart(f"Your trip to {city} is booked.")])

    return FunctionModel(plan)


def build(manager: sw.Manager, agency: Agency, model: Model | str) -> Callable[..., object]:
    """Register the agent's activities and the ``plan_trip`` workflow on ``manager``."""
    agent: Agent[None, str] = Agent(
        model,
        instructions="Book a flight, then a hotel, then a car, one tool at a time, then confirm.",
    )
    travel = DurableAgent(manager, agent, name="travel", approval_timeout=3600)

    @manager.register_activity(name="travel.cancel_flight")
    async def cancel_flight(booking: Booking) -> None:
        await agency.cancel(booking)

    @manager.register_activity(name="travel.cancel_hotel")
    async def cancel_hotel(booking: Booking) -> None:
        await agency.cancel(booking)

    @manager.register_activity(name="travel.cancel_car")
    async def cancel_car(booking: Booking) -> None:
        await agency.cancel(booking)

    @travel.tool(compensate=cancel_flight)
    async def book_flight(city: str) -> Booking:
        """Book a flight to the city."""
        return await agency.book("flight", city)

    @travel.tool(compensate=cancel_hotel)
    async def book_hotel(city: str) -> Booking:
        """Book a hotel in the city."""
        return await agency.book("hotel", city)

    @travel.tool(compensate=cancel_car, approval=True)
    async def book_car(city: str) -> Booking:
        """Rent a car in the city (a person approves it first)."""
        return await agency.book("car", city)

    @manager.register_workflow(name="plan_trip")
    async def plan_trip(city: str) -> str:
        result = await travel.run(f"Book a trip to {city}")
        return result.output

    return plan_trip


async def main(db: str, reject: bool) -> None:
    ledger = Path(tempfile.mkdtemp()) / "ledger.txt"
    manager = sw.Manager(db)
    model = os.environ.get("SAGAWAY_AGENT_MODEL") or scripted_model()
    plan_trip = build(manager, Agency(ledger), model)
    async with manager:
        handle = await manager.workflow(plan_trip, "Lisbon").execute()
        while True:  # until the run waits for the car's approval
            if (await handle.status()) is sw.WorkflowStatus.WAITING:
                break
            await asyncio.sleep(0.05)
        steps = (await handle.describe()).steps
        asked = [step.result for step in steps if step.name == "travel.approval_request"]
        print("waiting for approval:", asked[-1])
        await manager.signal("approval").send(handle.key, Approval(approved=not reject))
        try:
            print("result:", await handle.result(timeout=120))
        except sw.CompletableError as exc:
            print("failed and compensated:", exc)
    print("ledger:", ", ".join(Agency(ledger).lines()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--db", default=f"sqlite:///{tempfile.mkdtemp()}/travel.db")
    parser.add_argument("--reject", action="store_true", help="reject the car at the approval")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.db, arguments.reject))
