"""One scenario from start to checks: the client's actions in order, then the invariants."""

from __future__ import annotations

import dataclasses
from collections import Counter

import sagaway as sw
from sagaway import observe
from tests.generative import (
    fleet,
    flows,
    forks,
    invariants,
    purging,
    queues,
    talking,
    telemetry_check,
)
from tests.generative.driver import FINAL_BUDGET, FIRST_BUDGET, Driver
from tests.generative.program import Scenario
from tests.generative.settings import GenSettings


@dataclasses.dataclass
class Report:
    problems: list[str]
    faults: Counter[str]
    """Store faults injected, by kind, and ``delayed_wakeup`` clock jumps."""
    runs: int
    processes: int
    store_calls: int
    jumps: int
    settled: bool
    fault_log: list[str]
    blocks: Counter[str] = dataclasses.field(default_factory=Counter)
    """Building blocks counted apart: scenarios with a schedule and its ticks' runs, scenarios
    with two code versions (``fleet.py``)."""


async def run_scenario(scenario: Scenario, settings: GenSettings, url: str) -> Report:
    driver = Driver(scenario, settings, url)
    checker = telemetry_check.CheckingObserver() if settings.telemetry else None
    if checker is not None:
        observe.install(checker)
    try:
        problems = await _run(driver, scenario, checker)
    finally:
        if checker is not None:
            observe.uninstall(checker)
    return Report(
        problems=problems,
        faults=driver.injector.injected + Counter(delayed_wakeup=driver.delayed),
        runs=len(driver.world.runs),
        processes=driver.processes_opened,
        store_calls=driver.injector.calls,
        jumps=driver.jumps,
        settled=driver.settled,
        fault_log=driver.injector.log,
        blocks=fleet.blocks(driver)
        + flows.blocks(driver)
        + forks.blocks(driver)
        + purging.blocks(driver)
        + talking.blocks(driver)
        + queues.blocks(driver),
    )


async def _run(
    driver: Driver, scenario: Scenario, checker: telemetry_check.CheckingObserver | None
) -> list[str]:
    async with driver.running():
        for top in scenario.workflows:
            await driver.start(top)
        if scenario.scheduled is not None:
            await fleet.create_schedule(driver)
        for top in scenario.workflows:
            for label, when, dup in top.signals:
                if when == "before":
                    await driver.send(top, label, dup, 1)
        await driver.settle(driver.first_phase_done, FIRST_BUDGET)
        if scenario.scheduled is not None:
            await driver.settle(lambda: fleet.ticks_started(driver, 2), FIRST_BUDGET)
            await fleet.pause_schedule(driver)
        if driver.settings.fork:
            await forks.fork_all(driver, last=False)
        held = await _pause(driver, scenario) if driver.settings.pauses else []
        for top in scenario.workflows:
            for label, when, dup in top.signals:
                if when == "after":
                    await driver.send(top, label, dup, 1)
        if held:
            await _resume(driver, held)
        for top in scenario.workflows:
            if top.cancel:
                await driver.end(top.key, cancel=True)
            if top.restart:
                old = driver.top_runs[top.key]
                await driver.start(top, replace=True)
                if driver.top_runs[top.key] != old:
                    for label, when, dup in top.signals:
                        if when != "never":
                            await driver.send(top, label, dup, 2)
            if top.cancel_child:
                children = sorted(
                    (r for r in driver.world.runs.values() if r.parent_key == top.key),
                    key=lambda r: r.seq,
                )
                if children:
                    await driver.end(children[0].key, cancel=True)
        driver.settled = await driver.settle(driver.all_as_expected, FINAL_BUDGET)
        if driver.settings.fork and await forks.fork_all(driver, last=True):
            driver.settled = await driver.settle(driver.all_as_expected, FINAL_BUDGET)
        problems = await invariants.check(driver)
        if checker is not None:
            problems += checker.check(driver, await driver.statuses())
        seen = len(driver.problems)
    problems += driver.problems[seen:]  # found while closing the processes
    return problems


async def _pause(driver: Driver, scenario: Scenario) -> list[str]:
    """Pause some top-level runs (``talking``); the keys paused."""
    records = await driver.statuses()
    # Only runs no process holds: a running one would stop only at its next durable call.
    idle = {
        key
        for key, run_id in driver.top_runs.items()
        if run_id in records
        and records[run_id].status in (sw.WorkflowStatus.WAITING, sw.WorkflowStatus.SUSPENDED)
    }
    held = [top.key for top in scenario.workflows if talking.paused(top) and top.key in idle]
    for key in held:
        await talking.pause(driver, key, True)
    return held


async def _resume(driver: Driver, held: list[str]) -> None:
    """With the "after" signals sent, nothing of a paused run may begin: check, then resume."""
    runs = {driver.top_runs[key] for key in held if key in driver.top_runs}
    before = talking.began(driver, runs)
    await driver.wait_idle()
    await driver.handle_requests()
    await driver.wait_idle()
    after = talking.began(driver, runs)
    if after != before:
        driver.problems.append(f"{after - before} activity attempts of paused runs {held} began")
    for key in held:
        await talking.pause(driver, key, False)
    driver.paused += len(held)
