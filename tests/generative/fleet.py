"""Schedules and two code versions in one fleet, as building blocks of the generated scenarios.

``settings.schedules``: the scenario's ``scheduled`` program is started by a schedule (a tick
every 10 minutes, catch-up ``all``) created when the top-level workflows start and paused once
the first settle is over and two ticks have been started (or half an hour more has passed).
Every worker process runs a scheduler, under the same faults as the rest. At the end each tick
from the first up to the last one started has exactly one execution (catch-up ``all`` starts
the missed ones too), and each ends as the model says (``invariants``).

``settings.code_versions``: the fleet has a process of each of two versions
(``Manager(version=V, run_versions={V})``; a crashed or restarted one is replaced by one of its
version, a stalled one's work is taken over by one of its version), and the top-level workflows
are started alternately by each. Every execution records the version of the process that
created it (a top-level one its starter's, a child its parent's, a tick's the scheduler's), and
every activity attempt ran in a process of its execution's version.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from sagaway._engine import cron
from sagaway.schedules.ticks import tick_key
from tests.generative.program import Scenario, to_json

if TYPE_CHECKING:
    from tests.generative.driver import Driver

VERSIONS = ("v1", "v2")
SCHEDULE_ID = "gen"
CRON = "*/10 * * * *"


def top_version(scenario: Scenario, index: int) -> str | None:
    """The version of the process that starts the ``index``-th top-level workflow."""
    return VERSIONS[index % 2] if scenario.versions else None


def first_versions(scenario: Scenario) -> list[str | None]:
    """The versions of the worker processes a scenario opens with."""
    return list(VERSIONS) if scenario.versions else [None]


async def create_schedule(driver: Driver) -> None:
    program = driver.scenario.scheduled
    assert program is not None
    await driver.client(
        lambda m: m.schedule(
            SCHEDULE_ID, "interp", CRON, args=(to_json(program), None), catch_up="all"
        )
    )


async def ticks_started(driver: Driver, n: int) -> bool:
    """Whether ``n`` ticks' executions have been created (a ``settle`` condition)."""
    await driver.discover()
    return sum(_is_tick(r.key, r.parent_key) for r in driver.world.runs.values()) >= n


def _is_tick(key: str, parent_key: str | None) -> bool:
    """A tick's execution (not one of its children, whose keys extend the tick's)."""
    return parent_key is None and key.startswith(f"schedule:{SCHEDULE_ID}:")


async def pause_schedule(driver: Driver) -> None:
    await driver.client(lambda m: m.pause_schedule(SCHEDULE_ID))


def blocks(driver: Driver) -> Counter[str]:
    """What of this module a scenario used (for the session's summary)."""
    scenario = driver.scenario
    ticks = sum(_is_tick(r.key, r.parent_key) for r in driver.world.runs.values())
    return Counter(
        schedules=scenario.scheduled is not None,
        schedule_ticks=ticks,
        two_versions=scenario.versions,
    )


async def check(driver: Driver, records: dict[str, Any]) -> list[str]:
    problems = await _ticks(driver, records) if driver.scenario.scheduled is not None else []
    if driver.scenario.versions:
        problems += _versions(driver, records)
    return problems


async def _ticks(driver: Driver, records: dict[str, Any]) -> list[str]:
    assert driver.observer is not None
    (schedule,) = [s for s in await driver.observer.list_schedules() if s.id == SCHEDULE_ID]
    started = {r.key for r in records.values() if _is_tick(r.key, r.parent_key)}
    # The first tick after the schedule was stored, not the one the client's call returned: a
    # call retried after a lost acknowledgement (its first try committed, then its process
    # died, and the clock passed the dead process's lease) returns the schedule as the retry
    # finds it, whose next tick may be past ticks the schedulers started meanwhile. The
    # schedule's ``created_at`` is the first try's: an update keeps it.
    first = cron.next_tick(CRON, "UTC", schedule.created_at)
    want: set[str] = set()
    if schedule.last_tick_at is not None:
        ticks = cron.ticks_between(CRON, "UTC", first, schedule.last_tick_at, 10**6)
        want = {tick_key(SCHEDULE_ID, t) for t in ticks}
    problems = [f"schedule tick {k} has no execution" for k in sorted(want - started)]
    problems += [f"schedule execution {k} is not a tick up to the last one" for k in started - want]
    return problems


def _versions(driver: Driver, records: dict[str, Any]) -> list[str]:
    out = []
    scenario = driver.scenario
    tops = {top.key: top_version(scenario, i) for i, top in enumerate(scenario.workflows)}
    for run_id, record in records.items():
        got = record.code_version
        if record.parent_key is not None:
            want = {r.code_version for r in records.values() if r.key == record.parent_key}
        elif _is_tick(record.key, record.parent_key):
            want = set(VERSIONS)
        else:
            want = {tops.get(record.key)}
        if got not in want:
            out.append(f"run {run_id[-8:]} ({record.key}) records version {got!r}, not {want}")
    for e in driver.world.executions:
        ran_by = driver.process_versions.get(e.process)
        record = records.get(e.run_id)
        if record is not None and ran_by != record.code_version:
            out.append(
                f"{e.label} of run {e.run_id[-8:]} ({record.key}, version "
                f"{record.code_version!r}) ran in process {e.process} of version {ran_by!r}"
            )
    return out
