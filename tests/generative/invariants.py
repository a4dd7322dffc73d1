"""The promises checked after every scenario, on the World's record and the database."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import sagaway as sw
from sagaway._engine.cancel_points import WORKFLOW_END
from tests.generative import fleet, flows, forks, purging, queues, talking
from tests.generative.program import Publish, own_nodes

if TYPE_CHECKING:
    from tests.generative.driver import Driver
    from tests.generative.world import Execution


async def check(driver: Driver) -> list[str]:
    records = await driver.statuses()
    problems = list(driver.problems)
    problems += _outcomes(driver, records)
    problems += _keys(driver)
    problems += _no_rerun(driver)
    completed_at = await _completion_times(driver, records)
    problems += _compensations(
        driver, records, completed_at, await _cancelled_at_end(driver, records)
    )
    problems += _owners(driver, records)
    problems += _cancels_from_owners(driver, records)
    if driver.settings.streams:
        problems += await _streams(driver, records)
    problems += list(driver.idle_violations.values())
    if driver.settings.clock_times_check:
        problems += driver.injector.times_ahead
    problems += await fleet.check(driver, records)
    if driver.settings.purge:
        problems += purging.lost_outcomes(driver, records)
    problems += forks.check(driver)
    problems += flows.check(driver, records)
    problems += await queues.check(driver, records)
    if driver.settings.updates:
        problems += await talking.check(driver)
    return problems


def _cancels_from_owners(driver: Driver, records: dict[str, Any]) -> list[str]:
    """A cancel passed on by a cancelled parent reaches only children it started: a workflow
    that merely attached (a shared key) must not cancel its owner's child."""
    out = []
    for run_id, record in records.items():
        reason = record.cancel_reason or ""
        if not reason.startswith("its parent "):
            continue
        sender = reason.removeprefix("its parent ").split(" was cancelled", 1)[0]
        if sender != repr(record.parent_key):
            out.append(
                f"{_name(driver, run_id)}: cancelled by {sender}, which is not its parent "
                f"({record.parent_key!r}): {reason!r}"
            )
    return out


async def _streams(driver: Driver, records: dict[str, Any]) -> list[str]:
    """Each run's stream holds each of its ``Publish`` labels at most once, at offsets 0, 1, ...
    in order, and, once it COMPLETED, every one of them (a crash or a replay never repeats or
    loses an item). Read as a reader would, from an offset, a page at a time."""
    assert driver.observer is not None
    out = []
    for run_id, record in records.items():
        items: list[Any] = []
        while page := await driver.observer.read_stream(
            run_id, stream="progress", offset=len(items), limit=3
        ):
            items.extend(page)
        labels = [json.loads(i.value) for i in items]
        program = driver.programs[driver.world.runs[run_id].program]
        own = {n.label for n in own_nodes(program.body) if isinstance(n, Publish)}
        if [i.offset for i in items] != list(range(len(items))) or len(set(labels)) != len(labels):
            out.append(f"{_name(driver, run_id)}: stream items repeated or out of place: {labels}")
        elif not set(labels) <= own:
            out.append(f"{_name(driver, run_id)}: stream items of no Publish node: {labels}")
        elif record.status.value == "COMPLETED" and set(labels) != own and items:
            out.append(f"{_name(driver, run_id)}: COMPLETED, stream {labels}, expected {own}")
        elif record.status.value == "COMPLETED" and own and not items and not driver.settings.purge:
            out.append(f"{_name(driver, run_id)}: COMPLETED with an empty stream, expected {own}")
    return out


def _name(driver: Driver, run_id: str) -> str:
    info = driver.world.runs[run_id]
    # The id's end: its first characters are its creation time, alike for runs made together.
    return f"{info.key} [{info.program}, run {run_id[-8:]}]"


def _outcomes(driver: Driver, records: dict[str, Any]) -> list[str]:
    """Each run ends as the model says, or waits/is suspended where it says."""
    out = []
    for run_id, record in records.items():
        want = driver.expectation(run_id, records)
        status = record.status.value
        got = status
        if status == "COMPLETED":
            got += f" result={json.loads(record.result)!r}"
        elif record.error:
            err = json.loads(record.error)
            got += f" error={err.get('type')}: {str(err.get('message'))[:300]!r}"
        wrong = not want.holds(status, record.suspend_count)
        if not wrong and status == "COMPLETED":
            wrong = json.loads(record.result) != want.result
        if not wrong and status == "FAILED" and want.error is not None:
            wrong = want.error not in str(json.loads(record.error or "{}").get("message", ""))
        if wrong:
            out.append(f"{_name(driver, run_id)}: expected {want.describe()}, got {got}")
    return out


def _keys(driver: Driver) -> list[str]:
    """One idempotency key per logical activity call; no key shared by two logical calls."""
    keys_of: dict[tuple[str, str, bool], set[str]] = defaultdict(set)
    calls_of: dict[str, set[tuple[str, str, bool]]] = defaultdict(set)
    for e in driver.world.executions:
        logical = (e.run_id, e.label, e.compensation)
        keys_of[logical].add(e.key)
        calls_of[e.key].add(logical)
    out = []
    for (run_id, label, comp), keys in keys_of.items():
        if len(keys) > 1:
            what = "compensation" if comp else "activity"
            out.append(f"{what} {label} of {_name(driver, run_id)} ran under keys {sorted(keys)}")
    for key, calls in calls_of.items():
        if driver.settings.purge and purging.reused_after_purge(driver, calls):
            continue
        if len(calls) > 1:
            described = sorted(
                f"{'undo ' if c else ''}{label} of {_name(driver, r)}" for r, label, c in calls
            )
            out.append(f"idempotency key {key!r} shared by {len(calls)} calls: {described}")
    return out


def _no_rerun(driver: Driver) -> list[str]:
    """An activity whose completion was committed never executes again."""
    out = []
    for e in driver.world.executions:
        committed = driver.world.commits.get((e.run_id, e.call_id))
        if committed is not None and e.seq > committed:
            what = "compensation" if e.compensation else "activity"
            out.append(
                f"{what} {e.label} (call {e.call_id}) of {_name(driver, e.run_id)} ran again "
                f"(attempt {e.attempt}, process {e.process}) after its completion was committed"
            )
    return out


async def _completion_times(
    driver: Driver, records: dict[str, Any]
) -> dict[tuple[str, str], float]:
    """When each recorded step's outcome reached its workflow, by (run id, call id).

    The order the promise is about is the order in which the workflow received the outcomes:
    two activities finishing at nearly the same moment (one in a thread, one on the loop) can
    reach it in either order, so the end of the activity function is not that order.
    """
    assert driver.observer is not None
    times: dict[tuple[str, str], float] = {}
    for run_id in records:
        for step in await driver.observer.load_steps(run_id):
            if step.ended_at is not None:
                times[(run_id, step.call_id)] = step.ended_at
    return times


async def _cancelled_at_end(driver: Driver, records: dict[str, Any]) -> set[str]:
    """The runs whose cancellation was delivered at the workflow's own end: it arrived after
    the last ``async with`` saga block had ended (and committed), so such a block has nothing
    left to compensate; an explicit saga's compensations still run (docs/cancellation.md)."""
    assert driver.observer is not None
    ended = set()
    for run_id, record in records.items():
        if record.status is not sw.WorkflowStatus.CANCELLED:
            continue
        for step in await driver.observer.load_steps(run_id):
            if step.kind is sw.StepKind.CANCEL and step.name == WORKFLOW_END:
                ended.add(run_id)
    return ended


def _compensations(
    driver: Driver,
    records: dict[str, Any],
    completed_at: dict[tuple[str, str], float],
    cancelled_at_end: set[str],
) -> list[str]:
    """Compensations of completed steps run exactly once, in reverse order of completion."""
    out = []
    by_run: dict[str, list[Execution]] = defaultdict(list)
    for e in driver.world.executions:
        by_run[e.run_id].append(e)
    for run_id, record in records.items():
        want = driver.expectation(run_id, records)
        runs = by_run.get(run_id, [])
        done = [e for e in runs if e.outcome == "ok"]
        undone_first: dict[str, int] = {}
        for e in done:
            if e.compensation:
                # The record is in the order attempts began in their threads; seq is the order
                # they were handed over (see handover).
                undone_first[e.label] = min(e.seq, undone_first.get(e.label, e.seq))
        completed_last: dict[str, float] = {}
        for e in done:
            if not e.compensation:
                completed_last[e.label] = completed_at.get((run_id, e.call_id), float(e.end_seq))
        # A fork replayed its kept steps: their completions and compensations count as done.
        replayed = forks.kept(driver, run_id, completed_at)
        completed_last = {**replayed.completed, **completed_last}
        expected = want.compensated
        if record.status is sw.WorkflowStatus.CANCELLED and driver.settings.cancel_compensates:
            # The steps whose completion was committed: an attempt that ran in a process that
            # died (or froze) before its outcome was written is unknown to the engine, and a
            # cancel delivered at that call does not compensate it (docs/cancellation.md). A
            # fork's kept steps were committed in its source and copied: it undoes them too.
            committed = {
                e.label
                for e in done
                if not e.compensation and (run_id, e.call_id) in driver.world.commits
            } | set(replayed.completed)
            program = driver.programs[driver.world.runs[run_id].program]
            expected = frozenset(
                label
                for label in completed_last
                if label in committed
                and not (run_id in cancelled_at_end and program.saga == "with")
                and driver.world.acts[label].compensate != "none"
                and program.saga != "none"
            )
        if expected is None or record.status.value not in want.statuses:
            continue  # the outcome check reports it
        expected = expected - replayed.compensated
        got = set(undone_first)
        if got != expected:
            out.append(
                f"{_name(driver, run_id)} ({record.status.value}): compensated {sorted(got)}, "
                f"expected {sorted(expected)}"
            )
            continue
        order = sorted(got, key=lambda label: undone_first[label])
        forward = sorted(got, key=lambda label: completed_last.get(label, -1), reverse=True)
        if order != forward:
            out.append(
                f"{_name(driver, run_id)}: compensations ran in order {order}, the steps "
                f"completed in order {forward[::-1]}"
            )
    return out


def _owners(driver: Driver, records: dict[str, Any]) -> list[str]:
    """Nothing stays RUNNING without a live owner."""
    out = []
    owners = driver.live_owners()
    for run_id, record in records.items():
        if record.status is not sw.WorkflowStatus.RUNNING:
            continue
        if record.lease_owner not in owners:
            out.append(
                f"{_name(driver, run_id)} is RUNNING, owner {record.lease_owner} is not a live "
                f"process (lease expires {record.lease_expires_at})"
            )
    return out
