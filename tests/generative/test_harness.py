"""The generative test's own bookkeeping: what it records must be what the engine did.

A sync activity attempt is decided when the engine hands it to its thread pool; the thread may
start it much later on a loaded machine. The World must count it as running from the hand-over
(or the driver jumps the clock and lets another process take the run over meanwhile) and record
it as begun then (or an attempt the engine decided while it held the lease is reported as run
after another process committed the step).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

import sagaway as sw
from sagaway._engine.threads import DaemonThreadPool
from sagaway.store import open_store
from sagaway.testing import FakeClock
from sagaway.testing.internals import engine_of
from tests.generative import driver as driver_module
from tests.generative import fleet, flows, forks, invariants, model, purging, queues
from tests.generative.driver import FINAL_BUDGET, FIRST_BUDGET, LEASE, Driver
from tests.generative.faults import FaultyStore, Injector
from tests.generative.handover import HandoverPool, recording_handovers
from tests.generative.program import (
    Act,
    FaultPlan,
    Patch,
    Program,
    Receive,
    Scenario,
    TopLevel,
    to_json,
)
from tests.generative.queues import Plan
from tests.generative.runner import run_scenario
from tests.generative.settings import GenSettings
from tests.generative.world import Execution, Process, World, install


class _HeldPool(concurrent.futures.Executor):
    """Starts each call's thread at once, but the call runs only once ``release`` is set;
    notes the activity each hand-over was for."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.handed: list[sw.ActivityInfo] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        self.handed.append(sw.activity_info())  # the caller's context: the attempt's
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            self.release.wait(10.0)
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)

        threading.Thread(target=run, daemon=True).start()
        return future


async def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


async def test_a_sync_attempt_runs_and_begins_from_its_handover(sqlite_url: str) -> None:
    clock = FakeClock()
    act = Act("a1", sync=True)
    world = World(clock, {"a1": act})
    held = _HeldPool()
    with recording_handovers(world, lambda *args, **kwargs: held):
        manager = sw.Manager(sqlite_url, clock=clock, poll_interval=3600.0)
        install(manager, world, Process(1), Plan())
        async with manager:
            program = to_json(Program("p", "none", (act,)))
            handle = await manager.workflow("interp", program).execute()
            await _until(lambda: bool(held.handed))
            # Handed over, its thread not started: idle detection must see work in progress.
            assert world.busy()
            assert world.executions == []
            info = held.handed[0]
            # Meanwhile (a late thread) another process commits the same step.
            world.committed(info.run_id, info.call_id)
            held.release.set()
            assert await asyncio.wait_for(handle.result(), 10.0) == ["a1"]
        await _until(lambda: not world.busy())
    [execution] = world.executions
    assert (execution.run_id, execution.call_id) == (info.run_id, info.call_id)
    assert execution.outcome == "ok"
    # Decided before that commit: not an execution after a committed completion.
    assert execution.seq < world.commits[(info.run_id, info.call_id)]


async def test_a_handover_cancelled_or_refused_is_not_left_running() -> None:
    world = World(FakeClock(), {})
    inner = DaemonThreadPool(1, thread_name_prefix="handover-test")
    pool = HandoverPool(inner, world)
    gate = threading.Event()
    first = pool.submit(gate.wait, 10.0)
    queued = pool.submit(lambda: None)  # behind the first: the only thread is busy
    assert world.sync_running == 2
    pool.shutdown(wait=False, cancel_futures=True)  # a closing engine drops queued work
    assert queued.cancelled()
    assert world.sync_running == 1
    gate.set()
    assert first.result(timeout=10.0) is True
    await _until(lambda: world.sync_running == 0)
    with pytest.raises(RuntimeError):
        pool.submit(lambda: None)
    assert world.sync_running == 0


@pytest.mark.postgres
async def test_processes_opened_apart_in_fake_time_agree_on_the_database_clock(
    postgres_url: str,
) -> None:
    """On PostgreSQL each engine reads the server's clock once, when it opens, and keeps the
    offset. The Driver's processes all read one simulated server clock, which moves with the
    FakeClock: a process opened after a jump agrees with the first on the time. (Each reading
    the real server gave offsets that differed by the jumps between their starts, and a
    process opened after a jump took the earlier one's fresh leases for expired.)"""
    driver = Driver(Scenario(workflows=(), faults=FaultPlan()), GenSettings(), postgres_url)
    async with driver.running():
        [first] = driver.live
        await driver.clock.advance(LEASE + 1.0)
        second = await driver.open_process()
        first_clock = engine_of(first.manager).clock
        second_clock = engine_of(second.manager).clock
        assert driver.server_offset is not None
        assert second_clock.now() == first_clock.now()
        assert first_clock.now() == driver.clock.now() + driver.server_offset
        assert first.process.offset == second.process.offset == driver.server_offset


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_ticks_started_after_a_schedule_call_lost_its_acknowledgement_are_counted(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """The client's schedule call committed, then its process died (a lost acknowledgement);
    while the dead process's lease expired the schedulers started the first tick, and the
    retried call returned the schedule with its next tick past it. That tick is a tick of the
    schedule: the check counts from the first tick after the schedule was stored (a
    PostgreSQL run reported it as 'not a tick up to the last one')."""
    url = request.getfixturevalue(f"{backend}_url")
    scenario = Scenario(workflows=(), faults=FaultPlan(), scheduled=Program("sch", "none", ()))
    driver = Driver(scenario, GenSettings(), url)
    async with driver.running():
        await fleet.create_schedule(driver)  # committed; its acknowledgement lost
        assert await driver.settle(lambda: fleet.ticks_started(driver, 1), FIRST_BUDGET)
        await fleet.create_schedule(driver)  # the retry finds the schedule past that tick
        assert await driver.settle(lambda: fleet.ticks_started(driver, 2), FIRST_BUDGET)
        await fleet.pause_schedule(driver)
        records = await driver.statuses()
        ticks = sorted(r.key for r in records.values() if r.key.startswith("schedule:"))
        assert len(ticks) == 2
        assert await fleet.check(driver, records) == []


class _Claims:
    """A store that answers ``claim_due`` with nothing."""

    url = "stub://"

    async def claim_due(self, **kwargs: Any) -> list[Any]:
        return []


async def test_a_second_stall_before_the_first_is_carried_out_freezes_no_other_process() -> None:
    """Two processes' calls hit stall faults before the driver carried out the first: only
    the process the driver is asked to freeze (and will thaw) is frozen. The second request
    used to overwrite the first, whose process stayed frozen for good while the driver thought
    it ran: with two code versions, its version's workflows were never run again (a
    grpc+sqlite run: 'expected COMPLETED, got WAITING', a signal stored and never received)."""
    injector = Injector({0: "stall", 1: "stall"})
    world = World(FakeClock(), {})
    processes = (Process(1, version="v1"), Process(2, version="v2"))
    stores = [
        FaultyStore(
            cast(Any, _Claims()), injector, p, world, client=False, server_time=lambda: None
        )
        for p in processes
    ]
    calls = [asyncio.create_task(s.claim_due(owner=f"p{i}")) for i, s in enumerate(stores)]
    await _until(lambda: injector.calls == 2)
    requested = injector.stall_requested
    assert requested is not None
    assert [p for p in processes if p.stalled is not None] == [requested]
    assert requested.stalled is not None
    requested.stalled.set()  # the driver's thaw
    assert await asyncio.wait_for(asyncio.gather(*calls), 10.0) == [[], []]


class _HeldEnds:
    """Wraps every store a driver opens: a workflow's end waits for ``release``, and a purge
    that reaches the database waits for that end to commit first."""

    def __init__(self) -> None:
        self.ending = asyncio.Event()
        self.release = asyncio.Event()
        self.ended = asyncio.Event()
        self.purge_reached = asyncio.Event()

    def wrap(self, inner: Any) -> Any:
        held = self

        class Held:
            def __getattr__(self, name: str) -> Any:
                return getattr(inner, name)

            async def finish_workflow(self, *args: Any, **kwargs: Any) -> Any:
                held.ending.set()
                await held.release.wait()
                try:
                    return await inner.finish_workflow(*args, **kwargs)
                finally:
                    held.ended.set()

            async def purge_ended(self, **kwargs: Any) -> Any:
                held.purge_reached.set()
                await held.ended.wait()
                return await inner.purge_ended(**kwargs)

        return Held()


async def test_a_run_whose_end_commits_as_a_purge_begins_is_remembered(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An end is stamped with the time the engine decided it: one clock jump woke an activity
    at t=5 and the purger at t=30, and the workflow's end (``ended_at`` 5) committed after the
    observer had read the run as RUNNING, just before the purge (cutoff 29) deleted it, as
    retention should. The observer had not remembered it: 'run ... was created but cannot be
    read' (a purge-block soak, once in about 1,900 SQLite programs). A purge now waits for the
    ends in flight before the observer looks (``purging.Gate``)."""
    held = _HeldEnds()
    monkeypatch.setattr(driver_module, "open_store", lambda *a, **k: held.wrap(open_store(*a, **k)))
    top = TopLevel("wf0", Program("w0", "none", (Act("w0.a1", sync=False, delay=5.0),)), ())
    driver = Driver(Scenario((top,), FaultPlan()), GenSettings(purge=True), db_url)
    async with driver.running():
        start = driver.clock.now()
        await driver.start(top)
        await driver.wait_idle()  # the activity sleeps its 5 s
        await driver.clock.advance(5.0)
        await asyncio.wait_for(held.ending.wait(), 10.0)  # its end, stamped t=5, in flight
        jump = asyncio.create_task(driver.clock.advance(45.0))  # the purger wakes at t=30
        gate = driver.world.purge_gate
        assert gate is not None
        await _until(lambda: gate.purge_waiting or held.purge_reached.is_set())
        held.release.set()
        await jump
        await driver.wait_idle()
        run_id = driver.top_runs["wf0"]
        assert driver.observer is not None
        assert await driver.observer.list_workflows(status=None, limit=10) == []  # purged
        records = await driver.statuses()
    assert records[run_id].status is sw.WorkflowStatus.COMPLETED
    assert records[run_id].ended_at == start + 5.0 + (driver.server_offset or 0.0)


async def _nothing() -> None:
    return None


def test_a_key_is_shared_across_a_purge_by_one_call_of_each_run_only() -> None:
    """A run under a key a purge freed reuses the purged run's key space (docs/retention.md),
    and when it takes another path a call number names another call: its "undo a3" got the key
    of the purged run's a5 (a SQLite soak, seed 2048778592, reported as a key shared by two
    calls). The check allows one call per run, each earlier run purged; not two calls of one
    run, nor runs of two keys, nor a run that was not purged."""
    world = World(FakeClock(), {})
    for run_id, key in (("r1", "k"), ("r2", "k"), ("r3", "other")):
        world.created(run_id, key, None, "p")
    world.purge_gate = purging.Gate(_nothing)
    driver = cast(Any, type("D", (), {"world": world})())
    across = {("r1", "a5", False), ("r2", "a3", True)}
    assert not purging.reused_after_purge(driver, across)  # r1 not purged
    world.purge_gate.purged.add("r1")
    assert purging.reused_after_purge(driver, across)
    assert not purging.reused_after_purge(driver, {*across, ("r2", "a5", False)})
    assert not purging.reused_after_purge(driver, {("r1", "a5", False), ("r3", "a3", True)})
    assert not purging.reused_after_purge(driver, {("r1", "a5", False), ("r1", "a3", True)})


def test_a_run_expected_suspended_stands_so_while_recovery_retries_it() -> None:
    """Recovery runs a SUSPENDED run again after a backoff (at most 300 s here); one whose
    activity always exhausts its retries (three attempts of 120 s) suspends again. Two ticks of
    a schedule doing that, out of phase, were never SUSPENDED at the same idle moment: the
    final settle spent its 1,500 jumps and the check found one RUNNING (a SQLite soak, seed
    559024096: 'expected SUSPENDED, got RUNNING error=…RetriesExhausted'). A run that has been
    suspended and is RUNNING again stands where a SUSPENDED expectation says; one never
    suspended does not, nor one expected to end otherwise."""
    suspended = model.Expect(frozenset({model.SUSPENDED}))
    assert suspended.holds("SUSPENDED", 1)
    assert suspended.holds("RUNNING", 1)
    assert suspended.holds("RUNNING", 3)
    assert not suspended.holds("RUNNING", 0)
    assert not suspended.holds("COMPLETED", 1)
    assert not model.Expect(frozenset({"COMPLETED"}), result=[]).holds("RUNNING", 1)
    waiting = model.Expect(frozenset({model.WAITING}))
    assert not waiting.holds("RUNNING", 1)


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_a_repeated_dedupe_id_after_a_purge_deleted_the_run_is_not_reported(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """The first send of a dedupe id ended the run; a purge deleted it before the repeat,
    which is then told there is no such workflow: the purge took the dedupe id with the run
    (a grpc+postgres soak, seed 2903082007: "sent twice with dedupe id 'w0.r1-1': False then
    'ended'", after a crash and a lost acknowledgement moved the clock past the retention)."""
    url = request.getfixturevalue(f"{backend}_url")
    top = TopLevel("wf0", Program("w0", "none", (Receive("w0.r1", None),)), signals=())
    driver = Driver(Scenario(workflows=(top,), faults=FaultPlan()), GenSettings(), url)
    async with driver.running():
        await driver.start(top)
        assert await driver.settle(driver.first_phase_done, FIRST_BUDGET)
        real = driver.client
        calls = 0

        async def ended() -> bool:
            return all(r.status.ended for r in (await driver.statuses()).values())

        async def client(op: Callable[[sw.Manager], Any], **kwargs: Any) -> Any:
            nonlocal calls
            answer = await real(op, **kwargs)
            calls += 1
            if calls == 1:  # between the two sends: the run ends and is purged
                assert await driver.settle(ended, FIRST_BUDGET)
                assert driver.observer is not None
                await driver.observer.purge_ended(before=2e9, statuses=None, limit=10)
            return answer

        driver.client = client  # type: ignore[method-assign]
        await driver.send(top, "w0.r1", True, 1)
        assert calls == 2
        assert driver.problems == []


def _execution(seq: int, end: int, label: str = "a1", process: int = 1) -> Execution:
    return Execution(seq, process, "run", "1", label, "k", 1, False, "ok", end)


def test_the_queue_check_counts_an_attempt_until_a_lease_passed_while_it_ran() -> None:
    """Two attempts of a queue of one at once are reported; an attempt stops counting when a
    lease passes while it runs (its process froze or died, or the clock passed a lease in one
    step: docs/limits.md, a holder that stops renewing loses its slot), so the attempt a
    process admitted after that is not reported; attempts of other activities do not count."""
    world = World(FakeClock(), {})
    plan = Plan(concurrency=1, queued=frozenset({"a1"}))
    world.executions = [_execution(1, 5), _execution(3, 8, process=2), _execution(2, 9, "a2")]
    assert queues.over_concurrency(plan, world) == [
        "queue gen-q (concurrency 1) ran 2: a1 #1 in p1, a1 #1 in p2"
    ]
    world.lease_losses = [2]
    assert queues.over_concurrency(plan, world) == []
    world.lease_losses = [6]  # after the second began: too late to excuse it
    assert queues.over_concurrency(plan, world) != []
    assert queues.over_concurrency(Plan(concurrency=2, queued=frozenset({"a1"})), world) == []


async def test_a_debounced_burst_runs_under_the_codec(sqlite_url: str) -> None:
    """A debounced start seals its arguments for its burst (the run it joins is found by the
    store), not for its run: the harness opens them at that place. It opened them only at the
    run's (``PayloadError``), so scenarios with a burst ran without the codec."""
    settings = GenSettings()
    assert settings.codec
    top = next(
        t
        for t in (
            TopLevel(f"wf{i}", Program(f"w{i}", "none", (Patch(f"w{i}.p1"),)), signals=())
            for i in range(100)
        )
        if flows.decoys(settings, t)
    )
    driver = Driver(Scenario(workflows=(top,), faults=FaultPlan()), settings, sqlite_url)
    async with driver.running():
        await driver.start(top)
        assert await driver.settle(driver.all_as_expected, FINAL_BUDGET)
        records = await driver.statuses()
    assert driver.bursts == 1 and driver.problems == []
    (run,) = records.values()
    assert run.status is sw.WorkflowStatus.COMPLETED
    assert [info.program for info in driver.world.runs.values()] == [top.program.label]


class _Turns:
    """The driver's looks (a settle's check of its runs, a fork round), counted: the engine
    held until the driver has looked once more."""

    def __init__(self) -> None:
        self.count = 0
        self._event = asyncio.Event()

    def take(self) -> None:
        self.count += 1
        self._event.set()
        self._event = asyncio.Event()

    async def next(self) -> None:
        seen = self.count
        while self.count == seen:
            await asyncio.wait_for(self._event.wait(), 30.0)


@pytest.mark.parametrize("torn", [False, True])
async def test_a_settle_does_not_end_while_a_run_ahead_in_a_line_is_due(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, torn: bool
) -> None:
    """wf0 and wf1 share a line, wf1 behind wf0 (debounced: due at t+3000). wf0 waits for its
    child; the client cancels the child, whose end wakes wf0 (due now), which then ends
    CANCELLED; its expectation also allows WAITING (the request may come too late). Between
    the child's end and wf0's, everything stands as expected (wf1 PENDING behind a live wf0):
    a settle that looked then stopped there; the fork of wf0 found it not ended, and the check,
    which read wf0 once it had ended, found wf1 PENDING where the model says SUSPENDED (the
    CI-size SQLite run, seed 20260512, once on a loaded machine: 'wf1 [w1, run cce48ec0]:
    expected SUSPENDED, got PENDING'). Here the engine waits for the driver's next look right
    after the child's end commits and, until the last fork round, right before wf0's end; the
    check waits for wf0's end. ``torn``: the look reads wf0 (WAITING, not woken yet), then the
    child's end commits, then the look reads the child ended (the runs are read one by one)."""
    root = Path(__file__).resolve().parents[1] / "data" / "generative"
    text = (root / "line_behind_a_woken_parent.json").read_text()
    scenario = Scenario.from_json(json.loads(text))
    turns = _Turns()
    child_ending, wf0_read = asyncio.Event(), asyncio.Event()
    child_ended, parent_ended, forked = asyncio.Event(), asyncio.Event(), asyncio.Event()
    call, all_as_expected, statuses = FaultyStore._call, Driver.all_as_expected, Driver.statuses
    fork_all, check = forks.fork_all, invariants.check

    async def holding_call(self: FaultyStore, name: str, *rest: Any) -> Any:
        info = self._world.runs.get(rest[1][0]) if name == "finish_workflow" else None
        parent = info is not None and info.key == "wf0" and child_ended.is_set()
        if parent and not parent_ended.is_set() and not forked.is_set():
            await turns.next()
        child = info is not None and info.parent_key == "wf0" and not child_ended.is_set()
        if child and torn:
            child_ending.set()  # the child's end waits for the driver's read of wf0
            await asyncio.wait_for(wf0_read.wait(), 30.0)
        result = await call(self, name, *rest)
        if parent:
            parent_ended.set()
        if child:
            child_ended.set()
            await turns.next()
        return result

    async def reading(self: Driver) -> dict[str, Any]:
        observer = self.observer
        if not child_ending.is_set() or wf0_read.is_set() or observer is None:
            return await statuses(self)
        get_run = observer.get_run

        async def hooked(run_id: str) -> Any:
            record = await get_run(run_id)
            if record is not None and record.key == "wf0" and not wf0_read.is_set():
                wf0_read.set()  # the child's end commits now, before the next read
                await asyncio.wait_for(child_ended.wait(), 30.0)
            return record

        monkeypatch.setattr(observer, "get_run", hooked)
        try:
            return await statuses(self)
        finally:
            monkeypatch.setattr(observer, "get_run", get_run)

    async def looking(self: Driver) -> bool:
        result = await all_as_expected(self)
        turns.take()
        return result

    async def forking(driver: Driver, *, last: bool) -> bool:
        result = await fork_all(driver, last=last)
        if last:
            forked.set()
        turns.take()
        return result

    async def checking(driver: Driver) -> list[str]:
        await asyncio.wait_for(parent_ended.wait(), 30.0)
        return await check(driver)

    monkeypatch.setattr(FaultyStore, "_call", holding_call)
    monkeypatch.setattr(Driver, "statuses", reading)
    monkeypatch.setattr(Driver, "all_as_expected", looking)
    monkeypatch.setattr(forks, "fork_all", forking)
    monkeypatch.setattr(invariants, "check", checking)
    # As the scenario was found: without the queue's blocks (they draw a queue for it, whose
    # store calls are fault targets) and, as a scenario with a burst then ran, without the
    # codec, so its fault lands on the same call.
    settings = GenSettings().enabled(
        activity_queue=False, activity_priority=False, registered_priorities=False, codec=False
    )
    report = await run_scenario(scenario, settings, sqlite_url)
    assert child_ended.is_set() and parent_ended.is_set() and wf0_read.is_set() == torn
    assert not report.problems, report.problems


async def test_the_driver_is_not_idle_while_store_calls_begin_and_end_between_its_looks() -> None:
    """A store call is a thread's work; the driver's ``wait_idle`` looks between sleeps (one in
    four of 1 ms, longer on a busy machine), and one short call can begin and end inside such a
    sleep: a process working through such calls was never seen in flight, and five quiet looks
    let a settle look at the runs while the engine was still on its way (the way the CI-size
    SQLite run, on a machine at load 8, stopped between a child's end and its parent's). A
    call begun since the last look counts as work. Here calls begin and end between looks
    (never in flight when looked at), one every two turns of the loop (about as far apart as
    the calls of a process, SQLite, after a child's end: two or three turns), two thousand of
    them: the driver waits them out."""
    driver = Driver(Scenario(workflows=(), faults=FaultPlan()), GenSettings(), "sqlite://")
    store = types.SimpleNamespace(inflight=0, began=0, process=types.SimpleNamespace(stalled=None))
    driver._stores[0] = cast(FaultyStore, store)

    async def calls() -> None:
        for _ in range(2000):
            store.began += 1  # began and ended before the next look
            await asyncio.sleep(0)  # the engine's steps between two calls
            await asyncio.sleep(0)

    working = asyncio.ensure_future(calls())
    try:
        await driver.wait_idle()
        assert working.done()
    finally:
        working.cancel()
