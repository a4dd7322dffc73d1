"""A cluster-wide activity queue, activity-call priorities and registered priority defaults
(``settings.activity_queue``, ``settings.activity_priority``, ``settings.registered_priorities``),
and their checks.

Drawn, as ``flows.py`` draws its blocks, from a hash of the scenario's programs, not from
hypothesis's stream: scenarios found before these blocks existed replay as before with them
off, and draw the same programs with them on.

- **Queue**: in half the scenarios every process's Manager is given
  ``queues={QUEUE: sw.Queue(concurrency=1 or 2, scope="cluster")}``, and about half of the
  programs' activities of ``SLOW`` seconds or less (by label) are called through activities
  registered on it
  (``act_async_q`` / ``act_sync_q``), their compensations too: calls of different workflows and
  processes wait for each other's slots under every fault.
- **Call priority**: a third of the queued activities are called with
  ``execute_get(priority=N)``, N from 1 to 5.
- **Registered priorities**: in half the queue scenarios the queue's activities are registered
  with ``register_activity(..., priority=N)``; in half of all scenarios the interpreter is
  registered with ``register_workflow(..., priority=N)``: a top-level start that gives no
  priority (and every child, which takes its registration's) records it.

Checks: at no moment do more attempts of the queue run than its concurrency, over all processes
(the World's record of attempt begins and ends). An attempt stops counting once a lease has
passed while it ran: its process froze or died (docs/limits.md: a holder that stops renewing
loses its slots at most ``lease_timeout`` after its last renewal), or the driver moved the clock
past a lease in one step (a crash's or a stall's), in which no process renews. No call is
left waiting in the queue's line once every process is idle (the settles do not count a
scenario as settled while a call waits, so a waiter that nobody admits is reported at the end).
"""

from __future__ import annotations

import dataclasses
import zlib
from collections import Counter
from typing import TYPE_CHECKING, Any

import sagaway as sw
from tests.generative.flows import _hash
from tests.generative.program import Act, Scenario, walk
from tests.generative.world import QUEUE

if TYPE_CHECKING:
    from tests.generative.driver import Driver
    from tests.generative.settings import GenSettings
    from tests.generative.world import Execution, World


LIVE = frozenset({"PENDING", "RUNNING", "WAITING"})
SLOW = 5.0
"""The longest activity (virtual seconds) called through the queue. A call waiting for a slot
polls every 0.1 to 0.3 s (docs/limits.md): each poll is a clock jump of the driver's, so a
slot held for 120 s costs up to 1,200 jumps of every waiting scenario (the final settle stops
at 3,000)."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a scenario draws of these blocks."""

    concurrency: int | None = None
    """The cluster queue's concurrency (None: no queue)."""
    queued: frozenset[str] = frozenset()
    """Labels of the activities called through the queue."""
    call_priority: dict[str, int] = dataclasses.field(default_factory=dict)
    """label -> the priority its calls are made with (``execute_get(priority=)``)."""
    activity_priority: int | None = None
    """``register_activity(priority=)`` of the queue's activities."""
    workflow_priority: int | None = None
    """``register_workflow(priority=)`` of the interpreter."""

    def manager_options(self) -> dict[str, Any]:
        if self.concurrency is None:
            return {}
        return {"queues": {QUEUE: sw.Queue(concurrency=self.concurrency, scope="cluster")}}


def _bits(seed: int, label: str) -> int:
    return zlib.crc32(f"{seed}:{label}".encode())


def plan(settings: GenSettings, scenario: Scenario) -> Plan:
    programs = [t.program for t in scenario.workflows]
    programs += [scenario.scheduled] if scenario.scheduled is not None else []
    h = _hash(*programs) >> 12  # not the bits ``flows`` reads
    workflow_priority = 1 + (h >> 5) % 5 if settings.registered_priorities and h >> 4 & 1 else None
    if not settings.activity_queue or h % 2:
        return Plan(workflow_priority=workflow_priority)
    labels = sorted(
        {
            n.label
            for p in programs
            for n in walk(p.body)
            if isinstance(n, Act) and n.kind != "hang" and n.delay <= SLOW
        }
    )
    queued = frozenset(x for x in labels if _bits(h, x) % 2 == 0)
    call_priority = {}
    if settings.activity_priority:
        call_priority = {x: 1 + _bits(h, x) // 2 % 5 for x in queued if _bits(h, x) // 10 % 3 == 0}
    activity_priority = None
    if settings.registered_priorities and h >> 8 & 1:
        activity_priority = 1 + (h >> 9) % 5
    return Plan(
        concurrency=1 + (h >> 1) % 2,
        queued=queued,
        call_priority=call_priority,
        activity_priority=activity_priority,
        workflow_priority=workflow_priority,
    )


def lease_passed(world: World) -> None:
    """The clock passed a lease in one step, or a process froze or died: the attempts running
    now may have lost their slots (``check``)."""
    world.lease_losses.append(world.tick())


def _counted_until(execution: Execution, losses: list[int]) -> int:
    end = execution.end_seq if execution.end_seq >= 0 else 1 << 62
    lost = [s for s in losses if execution.seq < s < end]
    return min(lost, default=end)


def over_concurrency(plan: Plan, world: World) -> list[str]:
    """Attempts of the queue running at once beyond its concurrency (see the module's text)."""
    if plan.concurrency is None:
        return []
    events: list[tuple[int, int, Execution]] = []
    for e in world.executions:
        if e.label in plan.queued:
            events.append((e.seq, 1, e))
            events.append((_counted_until(e, world.lease_losses), -1, e))
    events.sort(key=lambda x: (x[0], x[1]))
    running: list[Execution] = []
    for _, delta, e in events:
        if delta < 0:
            running.remove(e)
            continue
        running.append(e)
        if len(running) > plan.concurrency:
            who = ", ".join(
                f"{x.label}{' (undo)' if x.compensation else ''} #{x.attempt} in p{x.process}"
                for x in running
            )
            return [f"queue {QUEUE} (concurrency {plan.concurrency}) ran {len(running)}: {who}"]
    return []


async def waiting(driver: Driver, records: dict[str, Any]) -> list[str]:
    """Live runs (PENDING, RUNNING, WAITING) that hold a call in the queue's line (a waiter
    of a run that ended or is SUSPENDED stops counting at once: docs/limits.md)."""
    if driver.queue_plan.concurrency is None or driver.observer is None:
        return []
    now = driver.server_time()
    now = driver.clock.now() if now is None else now
    out = []
    for run_id, record in records.items():
        if record.status.value not in LIVE:
            continue
        place = await driver.observer.queue_place(run_id, now=now)
        if place is not None:
            out.append(
                f"run {run_id[-8:]} ({record.key}, {record.status.value}) waits in line for "
                f"queue {place.queue} (priority {place.priority}, {place.ahead} ahead)"
            )
    return out


def registered_priority(driver: Driver, records: dict[str, Any]) -> list[str]:
    """A top-level run started without a priority records the interpreter's registered one."""
    want = driver.queue_plan.workflow_priority
    if want is None:
        return []
    return [
        f"run {run_id[-8:]} started without a priority records {records[run_id].priority}, "
        f"registered {want}"
        for run_id in driver.unprioritised
        if run_id in records and records[run_id].priority != want
    ]


async def check(driver: Driver, records: dict[str, Any]) -> list[str]:
    return (
        over_concurrency(driver.queue_plan, driver.world)
        + await waiting(driver, records)
        + registered_priority(driver, records)
    )


def blocks(driver: Driver) -> Counter[str]:
    """Scenarios with a queue, queued attempts, calls with a priority (the run's summary)."""
    p = driver.queue_plan
    if p.concurrency is None:
        return Counter(registered_workflow_priority=int(p.workflow_priority is not None))
    return Counter(
        queue_scenarios=1,
        queued_attempts=sum(e.label in p.queued for e in driver.world.executions),
        prioritised_calls=len(p.call_priority),
        registered_activity_priority=int(p.activity_priority is not None),
        registered_workflow_priority=int(p.workflow_priority is not None),
    )
