"""The lab's five experiments, run on Sagaway, with their expected outcomes.

1. **card declined**: the pivot fails; ReleaseStock then CancelOrder, in reverse order; the
   stock is back to 3 and the order CANCELLED (not deleted).
2. **dirty read**: one book; alice's saga holds it until her card is declined; bob, who reads
   the stock in between, fails too. With a PENDING mark (semantic lock) bob is told "busy",
   retries, and gets the book.
3. **lost update**: two books, alice and bob reserve one each, alice's card is declined. A
   compensation that writes the old value back erases bob's reservation (2 left, wrong); one
   that adds the quantity back commutes with it (1 left, right).
4. **pivot then retry**: the carrier times out once after the card was charged; the step is
   resent, nothing is compensated, the order is confirmed.
5. **duplicated compensation**: the relay dies after publishing ReleaseStock and before marking
   it sent; the restarted relay sends it again. Adding back blindly makes 4 books out of 3;
   checking the reservation's state keeps 3.

Every run uses fresh databases and the :class:`~sagaway.lab.clock.SimClock`, so its log is the
same on every machine and every run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import sagaway as sw
from sagaway.lab.clock import SimClock
from sagaway.lab.saga import Bus, CommandRefused, LabOrder, register
from sagaway.lab.services import (
    InventoryService,
    Log,
    OrderService,
    PaymentService,
    ReleaseMode,
    Service,
    ShippingService,
    close_all,
)

CUSTOMERS = {"alice": 500, "bob": 5000}
"""Credit limits in yen: alice's card is declined for a 1000-yen book, bob's is not."""
BOOK_PRICE = 1000


@dataclasses.dataclass(frozen=True)
class Setup:
    """The world of one run."""

    stock: int
    orders: tuple[tuple[float, str, str], ...]
    """(start time, saga id, customer) of each order."""
    page_at: float | None = None
    """When the product page reads the stock (it reads before orders starting then)."""
    semantic_lock: bool = False
    release: ReleaseMode = ReleaseMode.CHECKED
    shipping_timeouts: int = 0
    relay_stops_after: str | None = None


@dataclasses.dataclass(frozen=True)
class Expected:
    available: int
    orders: dict[str, str]
    """Final order status by saga: CONFIRMED or CANCELLED."""


@dataclasses.dataclass(frozen=True)
class Variant:
    label: str
    setup: Setup
    expected: Expected
    verdict: str
    """Whether the outcome is right for the business, and why."""


@dataclasses.dataclass(frozen=True)
class Experiment:
    number: int
    key: str
    title: str
    lesson: str
    variants: tuple[Variant, ...]


EXPERIMENTS: tuple[Experiment, ...] = (
    Experiment(
        1,
        "card_declined",
        "card declined",
        "compensations run in reverse order: ReleaseStock, then CancelOrder",
        (
            Variant(
                "alice's card is declined",
                Setup(stock=3, orders=((0, "saga-A", "alice"),)),
                Expected(3, {"saga-A": "CANCELLED"}),
                "right: stock back, order CANCELLED",
            ),
        ),
    ),
    Experiment(
        2,
        "dirty_read",
        "dirty read",
        "a PENDING mark tells readers the value may still change",
        (
            Variant(
                "no semantic lock",
                Setup(stock=1, orders=((0, "saga-A", "alice"), (4, "saga-B", "bob")), page_at=4),
                Expected(1, {"saga-A": "CANCELLED", "saga-B": "CANCELLED"}),
                "wrong: 1 book left, nobody got it",
            ),
            Variant(
                "semantic lock (PENDING)",
                Setup(
                    stock=1,
                    orders=((0, "saga-A", "alice"), (4, "saga-B", "bob")),
                    page_at=4,
                    semantic_lock=True,
                ),
                Expected(0, {"saga-A": "CANCELLED", "saga-B": "CONFIRMED"}),
                "right: bob waited, got the book",
            ),
        ),
    ),
    Experiment(
        3,
        "lost_update",
        "lost update",
        "a commutative compensation adds back what was taken",
        (
            Variant(
                "write the old value back",
                Setup(
                    stock=2,
                    orders=((0, "saga-A", "alice"), (1, "saga-B", "bob")),
                    release=ReleaseMode.WRITE_BACK,
                ),
                Expected(2, {"saga-A": "CANCELLED", "saga-B": "CONFIRMED"}),
                "wrong: bob's reservation erased",
            ),
            Variant(
                "add the quantity back",
                Setup(
                    stock=2,
                    orders=((0, "saga-A", "alice"), (1, "saga-B", "bob")),
                    release=ReleaseMode.DELTA,
                ),
                Expected(1, {"saga-A": "CANCELLED", "saga-B": "CONFIRMED"}),
                "right: the updates commute",
            ),
        ),
    ),
    Experiment(
        4,
        "pivot_retry",
        "pivot, then retry",
        "after the pivot a step is retried until it succeeds, never compensated",
        (
            Variant(
                "carrier times out once",
                Setup(stock=3, orders=((0, "saga-A", "bob"),), shipping_timeouts=1),
                Expected(2, {"saga-A": "CONFIRMED"}),
                "right: retried, not compensated",
            ),
        ),
    ),
    Experiment(
        5,
        "duplicate_compensation",
        "duplicated compensation",
        "compensations must be idempotent: check the state, not just the delta",
        (
            Variant(
                "add back, unchecked",
                Setup(
                    stock=3,
                    orders=((0, "saga-A", "alice"),),
                    release=ReleaseMode.DELTA,
                    relay_stops_after="ReleaseStock",
                ),
                Expected(4, {"saga-A": "CANCELLED"}),
                "wrong: a 4th book that is not there",
            ),
            Variant(
                "release a held one only",
                Setup(
                    stock=3,
                    orders=((0, "saga-A", "alice"),),
                    release=ReleaseMode.CHECKED,
                    relay_stops_after="ReleaseStock",
                ),
                Expected(3, {"saga-A": "CANCELLED"}),
                "right: the duplicate did nothing",
            ),
        ),
    ),
)


@dataclasses.dataclass(frozen=True)
class Result:
    """What one variant did."""

    experiment: Experiment
    variant: Variant
    available: int
    orders: dict[str, str]
    """Order status by saga, from the order service's database."""
    workflows: dict[str, str]
    """Workflow status by saga, from Sagaway (COMPLETED / FAILED)."""
    compensations: dict[str, list[str]]
    """Compensation activities run, in order, by saga (from the workflow's recorded steps)."""
    attempts: dict[str, dict[str, int]]
    """Attempts of each forward step, by saga."""
    deliveries: list[str]
    """Commands delivered by the relay, in order (a redelivery appears twice)."""
    charges: int
    shipments: int
    log: list[str]

    @property
    def ok(self) -> bool:
        """The outcome is the one this variant is meant to show (right or, for the careless
        variants, wrong)."""
        expected = self.variant.expected
        return self.available == expected.available and self.orders == expected.orders

    def as_json(self) -> dict[str, Any]:
        return {
            "experiment": self.experiment.number,
            "key": self.experiment.key,
            "title": self.experiment.title,
            "variant": self.variant.label,
            "available": self.available,
            "orders": self.orders,
            "workflows": self.workflows,
            "compensations": self.compensations,
            "attempts": self.attempts,
            "deliveries": self.deliveries,
            "charges": self.charges,
            "shipments": self.shipments,
            "expected": {
                "available": self.variant.expected.available,
                "orders": self.variant.expected.orders,
            },
            "ok": self.ok,
            "log": self.log,
        }


def _make_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)


async def run_variant(experiment: Experiment, variant: Variant, workdir: Path) -> Result:
    """Run one variant on fresh databases under ``workdir``."""
    setup = variant.setup
    _make_dir(workdir)
    clock = SimClock()
    log = Log(clock)
    inventory = InventoryService(
        workdir / "inventory.db",
        log,
        stock=setup.stock,
        semantic_lock=setup.semantic_lock,
        release=setup.release,
    )
    orders_service = OrderService(workdir / "order.db", log)
    payment = PaymentService(workdir / "payment.db", log, customers=CUSTOMERS)
    shipping = ShippingService(workdir / "shipping.db", log, timeouts=setup.shipping_timeouts)
    services: dict[str, Service] = {
        s.name: s for s in (orders_service, inventory, payment, shipping)
    }
    bus = Bus(
        clock,
        log,
        services,
        workdir / "orchestrator.db",
        relay_stops_after=setup.relay_stops_after,
    )
    # The engine's own timers (leases, scans) are far beyond the lab's few dozen time units.
    manager = sw.Manager(
        f"sqlite:///{workdir / 'sagaway.db'}",
        clock=clock,
        lease_timeout=86400.0,
        recovery_interval=86400.0,
        poll_interval=3600.0,
    )
    workflow = register(manager, bus, clock, log)
    try:
        async with clock, manager:
            handles = await _place_orders(setup, clock, log, inventory, manager, workflow)
            workflows, compensations, attempts = await _outcomes(handles)
        return Result(
            experiment=experiment,
            variant=variant,
            available=inventory.available(),
            orders=orders_service.statuses(),
            workflows=workflows,
            compensations=compensations,
            attempts=attempts,
            deliveries=list(bus.deliveries),
            charges=payment.charges(),
            shipments=shipping.shipments(),
            log=list(log.lines),
        )
    finally:
        bus.close()
        close_all(services)


async def _place_orders(
    setup: Setup,
    clock: SimClock,
    log: Log,
    inventory: InventoryService,
    manager: sw.Manager,
    workflow: Callable[[LabOrder], Coroutine[Any, Any, str]],
) -> dict[str, sw.WorkflowHandle[str]]:
    """Start the setup's sagas at their times (and read the product page at its own)."""
    handles: dict[str, sw.WorkflowHandle[str]] = {}
    events: list[tuple[float, int, str, str]] = [
        (start, 1, saga, customer) for start, saga, customer in setup.orders
    ]
    if setup.page_at is not None:
        events.append((setup.page_at, 0, "", ""))
    async with clock.acting("driver"):
        for at, _, saga, customer in sorted(events):
            await clock.sleep(at - clock.elapsed)
            if not saga:
                log.write("page", "product page", "", inventory.page())
                continue
            order = LabOrder(saga, customer, "book", 1, BOOK_PRICE)
            clock.expect(saga)
            handles[saga] = await manager.workflow(workflow, order).execute(idempotency_key=saga)
    return handles


async def _outcomes(
    handles: dict[str, sw.WorkflowHandle[str]],
) -> tuple[dict[str, str], dict[str, list[str]], dict[str, dict[str, int]]]:
    """Each saga once ended: its status, the compensations it ran, its activities' attempts."""
    workflows: dict[str, str] = {}
    compensations: dict[str, list[str]] = {}
    attempts: dict[str, dict[str, int]] = {}
    for saga, handle in handles.items():
        with contextlib.suppress(CommandRefused):  # a FAILED saga: its status tells
            await handle.result()
        described = await handle.describe()
        workflows[saga] = described.status.value
        compensations[saga] = [
            s.name for s in described.steps if s.kind is sw.StepKind.COMPENSATION
        ]
        attempts[saga] = {
            s.name: s.attempts for s in described.steps if s.kind is sw.StepKind.ACTIVITY
        }
    return workflows, compensations, attempts


async def run_lab(
    numbers: list[int] | None = None,
    *,
    workdir: Path | None = None,
    timeout: float = 120.0,
) -> list[Result]:
    """Run the experiments (all, or those numbered in ``numbers``); one Result per variant.

    Databases go to a temporary directory, removed afterwards, unless ``workdir`` is given.
    ``timeout`` (real seconds) turns a stuck simulation into an error instead of a hang.
    """
    chosen = [e for e in EXPERIMENTS if numbers is None or e.number in numbers]
    if numbers is not None:
        unknown = sorted(set(numbers) - {e.number for e in EXPERIMENTS})
        if unknown:
            raise ValueError(f"no experiment numbered {unknown}; they are 1 to 5")

    async def go(base: Path) -> list[Result]:
        results = []
        for experiment in chosen:
            for i, variant in enumerate(experiment.variants, 1):
                where = base / f"{experiment.number}-{experiment.key}-{i}"
                results.append(await run_variant(experiment, variant, where))
        return results

    if workdir is not None:
        return await asyncio.wait_for(go(workdir), timeout)
    with tempfile.TemporaryDirectory(prefix="sagaway-lab-") as tmp:
        return await asyncio.wait_for(go(Path(tmp)), timeout)
