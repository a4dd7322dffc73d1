"""The lab's order saga, orchestrated by a Sagaway workflow.

A hand-written saga orchestrator typically follows a table of steps, each a command, the service
it goes to and the command that undoes it; here the table is a
:class:`sagaway.steps.SagaDefinition` and the orchestrator is a workflow::

    STEPS = [
        ("order", "CreateOrder", "CancelOrder"),
        ("inventory", "ReserveStock", "ReleaseStock"),
        ("payment", "ChargeCard", None),         # pivot
        ("shipping", "ArrangeShipping", None),   # retryable
    ]

Each step is an activity that sends one command to a service and waits for its reply. Commands
leave the orchestrator through its transactional outbox and a relay (:mod:`sagaway.outbox`) on a
bus with virtual time: a service takes 1 time unit per command (the card API 5), and the
orchestrator takes 1 to handle each reply. A refusal the service may lift later (``busy``,
``timeout``) is retried by the step's retry policy: resent 6 time units later, never
compensated. Any other refusal is a business failure: the saga is compensated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import sagaway as sw
from sagaway import localdb, steps
from sagaway.lab.clock import SimClock
from sagaway.lab.services import Log, Reply, Service
from sagaway.outbox import CallbackPublisher, Message, Outbox, Relay

ORCHESTRATOR_COST = 1.0
"""Virtual time the orchestrator takes to handle a reply."""
RETRYABLE_REASONS = frozenset({"busy", "timeout"})
"""Refusals that may pass: the command is sent again, nothing is compensated."""
RESEND_AFTER_6 = sw.RetryPolicy(
    initial_interval=6.0, backoff_coefficient=1.0, maximum_interval=6.0, maximum_attempts=0
)
"""A command refused for a reason that may pass is resent 6 time units later."""
RESEND_BUSY = dataclasses.replace(RESEND_AFTER_6, maximum_attempts=10)
"""A busy reservation is tried again, but a compensable step does not wait forever."""

ORDER_SAGA = steps.SagaDefinition(
    [
        steps.Compensable("order.CreateOrder", "order.CancelOrder"),
        steps.Compensable("inventory.ReserveStock", "inventory.ReleaseStock", retry=RESEND_BUSY),
        steps.Pivot("payment.ChargeCard"),
        steps.Retryable("shipping.ArrangeShipping", retry=RESEND_AFTER_6),
        # After the last step the PENDING mark comes off and the order is confirmed.
        steps.Retryable("inventory.ConfirmReservation", retry=RESEND_AFTER_6),
        steps.Retryable("order.ConfirmOrder", retry=RESEND_AFTER_6),
    ]
)
"""The ``STEPS`` table above as a checked saga definition."""


@dataclasses.dataclass(frozen=True)
class LabOrder:
    """The saga's input; every command carries it."""

    saga: str
    customer: str
    item: str
    qty: int
    amount: int


class CommandRefused(sw.CompletableError):
    """A service refused a command for good (the saga is compensated)."""


class RelayStopped(BaseException):
    """The relay process died (simulated): not an Exception, so no handler records anything."""


class Bus:
    """Carries the orchestrator's commands to the services: its outbox, a relay, virtual time.

    Args:
        services: the services by name (the topic of their commands).
        path: the orchestrator's own database (the outbox lives there).
        relay_stops_after: a command name: once, the relay dies right after publishing it,
            before marking it sent, and a new relay starts (experiment 5).
    """

    def __init__(
        self,
        clock: SimClock,
        log: Log,
        services: dict[str, Service],
        path: Path,
        *,
        relay_stops_after: str | None = None,
    ) -> None:
        self.clock = clock
        self.log = log
        self.services = services
        self.db = localdb.connect_sqlite(str(path))
        self.outbox = Outbox(clock=clock)
        self.outbox.install(self.db)
        self.relay_stops_after = relay_stops_after
        self.relay_restarts = 0
        self.deliveries: list[str] = []
        """Every command delivered, in order (a redelivered one appears twice)."""
        self._replies: dict[str, Reply] = {}
        self.relay = self._new_relay()

    def _new_relay(self) -> Relay:
        return Relay(self.outbox, self.db, CallbackPublisher(self._deliver), name="orchestrator")

    async def command(self, service: str, command: str, order: LabOrder) -> Reply:
        """Send ``command`` through the outbox, and return the service's reply."""
        info = sw.activity_info()
        # One message per attempt: a retried command is a new message; a redelivered one is not.
        message_id = f"{info.idempotency_key}#{info.attempt}"
        with localdb.transaction(self.db):
            self.outbox.put(
                self.db,
                service,
                {"command": command, "body": dataclasses.asdict(order)},
                message_id=message_id,
            )
        try:
            await self.relay.run_once()
        except RelayStopped:
            self.relay_restarts += 1
            self.log.write("relay", "stopped", order.saga, f"after sending {command}; restarted")
            self.relay = self._new_relay()  # same name: takes the dead relay's claims back
            await self.relay.run_once()
        reply = self._replies.pop(message_id)
        await self.clock.sleep(ORCHESTRATOR_COST)
        return reply

    async def _deliver(self, message: Message) -> None:
        service = self.services[message.topic]
        command, body = message.payload["command"], message.payload["body"]
        await self.clock.sleep(service.cost)
        self._replies[message.message_id] = service.handle(command, body)
        self.deliveries.append(command)
        if command == self.relay_stops_after:
            self.relay_stops_after = None
            raise RelayStopped  # published, not yet marked sent

    def close(self) -> None:
        self.db.close()


def register(
    manager: sw.Manager, bus: Bus, clock: SimClock, log: Log
) -> Callable[[LabOrder], Coroutine[Any, Any, str]]:
    """Register the saga's activities and workflow on ``manager``; returns the workflow."""

    def command_activity(service: str, command: str) -> None:
        async def send(order: LabOrder) -> Reply:
            reply = await bus.command(service, command, order)
            if reply["ok"]:
                return reply
            reason = str(reply["reason"])
            if reason in RETRYABLE_REASONS:
                log.write("orchestrator", "retry", order.saga, f"{command}: {reason}")
                raise sw.RetryableError(f"{command}: {reason}")
            log.write("orchestrator", "compensate", order.saga, f"{command}: {reason}")
            raise CommandRefused(f"{service} refused {command}: {reason}", code=reason)

        send.__name__ = send.__qualname__ = command
        manager.register_activity(name=f"{service}.{command}")(send)

    for service, command in (
        ("order", "CreateOrder"),
        ("order", "CancelOrder"),
        ("order", "ConfirmOrder"),
        ("inventory", "ReserveStock"),
        ("inventory", "ReleaseStock"),
        ("inventory", "ConfirmReservation"),
        ("payment", "ChargeCard"),
        ("shipping", "ArrangeShipping"),
    ):
        command_activity(service, command)

    @manager.register_workflow(name="order_lab.place_order")
    async def place_order(order: LabOrder) -> str:
        # The lab writes its log from workflow code because it never replays a workflow (no
        # crash, no suspension); real workflow code keeps side effects in activities.
        async with clock.acting(order.saga):
            log.write("orchestrator", "start", order.saga, f"{order.customer}: {order.qty} book")
            try:
                await ORDER_SAGA.run(manager, order)
            except CommandRefused:
                log.write("orchestrator", "cancelled", order.saga, "compensations done")
                raise
            log.write("orchestrator", "done", order.saga)
            return "CONFIRMED"

    return place_order
