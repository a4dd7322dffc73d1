"""Runs one scenario: processes (Managers on one database), the client's actions, the faults.

Time is a FakeClock. The driver lets the system run until nothing can happen before the clock
moves (no store call in flight, no synchronous activity handed to a thread pool and not done),
then jumps the clock to the next deadline (plus an overshoot when the plan delays wake-ups),
until every run stands where the model says or the time budget is spent. Restarts, crashes and
stalls requested by the faulty store are carried out between jumps.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import logging
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar
from unittest import mock

import sagaway as sw
import sagaway.manager
from sagaway import codecs
from sagaway.codecs import CodecStore
from sagaway.store import Store, open_store
from sagaway.store.records import WorkflowRecord
from sagaway.testing import time_skipping_manager
from tests.generative import fleet, flows, forks, model, purging, queues, talking
from tests.generative.faults import FaultyStore, Injector
from tests.generative.handover import recording_handovers
from tests.generative.program import (
    Act,
    Child,
    Program,
    Scenario,
    TopLevel,
    shared_key,
    to_json,
    walk,
)
from tests.generative.settings import GenSettings
from tests.generative.world import InjectedDbError, Process, ProcessDead, RunInfo, World, install

T = TypeVar("T")

LEASE = 600.0
POLL = 600.0
CODEC = codecs.Chain([codecs.Compress(), codecs.Encrypt(keys=[bytes(range(32))])])
"""What every process seals its payloads with (``settings.codec``): a fixed test key."""
RECOVERY = 10.0
FIRST_BUDGET = 1800.0
FINAL_BUDGET = 2 * 86400.0
MAX_JUMPS = 3000
"""Clock jumps a scenario may make in all (a bound for runs that never settle: one that reaches
what the model expects returns earlier). A suspended run retrying for good (a schedule's tick
whose activity exhausts its retries) stops the clock every few seconds; with a debounced
burst starting 3,000 s late, a PostgreSQL scenario that settles after about 1,500 jumps was
cut off at 1,500 and reported WAITING (seed 1694450899)."""
CLOSE_TIMEOUT = 30.0
"""Real seconds ``Manager.close()`` may take."""
IDLE_TIMEOUT = 60.0
"""Real seconds a store call or activity may take before the run is declared hung."""
STALL_JUMPS = 4
"""Clock jumps a stalled process stays frozen (its lease expires at the first)."""


@dataclasses.dataclass(eq=False)
class _Live:
    process: Process
    manager: sw.Manager
    store: FaultyStore
    client: contextlib.AbstractAsyncContextManager[sw.Manager] | None = None
    """The ``manager.connect()`` context of a client process (kept open by this reference)."""

    async def close(self) -> None:
        if self.client is not None:
            await self.client.__aexit__(None, None, None)
        else:
            await self.manager.close()


class Driver:
    """One scenario's processes, client, clock and record."""

    def __init__(self, scenario: Scenario, settings: GenSettings, url: str) -> None:
        self.scenario = scenario
        self.settings = settings
        self.queue_plan = queues.plan(settings, scenario)
        self.unprioritised: list[str] = []
        """Top-level runs started without a priority (``queues.registered_priority``)."""
        self.url = url
        self.clock = purging.Clock()
        self.programs: dict[str, Program] = {}
        acts: dict[str, Act] = {}
        programs = [top.program for top in scenario.workflows]
        programs += [scenario.scheduled] if scenario.scheduled is not None else []
        for program in programs:
            self.programs[program.label] = program
            for node in walk(program.body):
                if isinstance(node, Act):
                    acts[node.label] = node
                elif isinstance(node, Child):
                    self.programs[node.program.label] = node.program
        self.world = World(self.clock, acts)
        self.deadlined = {t.program.label for t in scenario.workflows if t.timeout is not None}
        """Programs of top-level workflows started with a deadline."""
        self.injector = Injector(dict(scenario.faults.faults))
        self.live: list[_Live] = []
        self.client_live: _Live | None = None
        self.other_client: _Live | None = None
        """With two code versions and a separate client: the client of the second version."""
        self.process_versions: dict[int, str | None] = {}
        """Each process's code version, by number (``fleet.py``)."""
        """The schedule's first tick (``fleet.py``)."""
        self.forked: list[forks.Forked] = []
        """The forks the client asked for (``forks.py``)."""
        self.separate_client = any(k == "stall" for _, k in scenario.faults.faults)
        self._opening: tuple[Process, bool] | None = None
        self._stores: dict[int, FaultyStore] = {}
        self.server_offset: float | None = None
        """The database server's clock minus the FakeClock (None: the store has no clock of its
        own, as SQLite), read once when the driver starts (``server_time``)."""
        self._numbers = itertools.count(1)
        self.observer: Store | None = None
        self.sent: dict[str, set[str]] = {}
        self.updates: list[tuple[str, str, str, str]] = []
        """Updates sent (``talking``): run id, key, label, the good request's update id."""
        self.answered = 0
        """Of those, answered by the end (``talking.check``)."""
        self.paused = 0
        """Top-level runs paused and resumed (``talking``)."""
        """run id -> receive labels whose signal was sent to it."""
        self.top_runs: dict[str, str] = {}
        """top-level key -> its current run id."""
        self.lines: dict[str, list[str]] = {}
        """ordering key -> the top-level runs started with it, in start order (``flows``)."""
        self.bursts = 0
        """Top-level starts made as a debounced burst (``flows``)."""
        self.flows: dict[str, dict[str, Any]] = {}
        """top-level run id -> the priority and fairness options it was started with."""
        self.frozen: tuple[Process, int] | None = None
        self.jumps = 0
        self.settled = False
        """Whether the last settle reached the expected end (the runner's final one)."""
        self.delayed = 0
        """Clock jumps that went past the next deadline (delayed wake-ups)."""
        self.idle_violations: dict[str, str] = {}
        self.overshoots = itertools.cycle(scenario.faults.overshoot or (0.0,))
        self.processes_opened = 0
        self.problems: list[str] = []
        """Broken promises seen while running (the invariants add theirs at the end)."""

    # ------------------------------------------------------------------ processes

    def _open_store(self, url: str, *, create: bool = True, token: str | None = None) -> Any:
        assert self._opening is not None
        process, client = self._opening
        inner = open_store(url, create=create, token=token)
        store = FaultyStore(
            inner, self.injector, process, self.world, client=client, server_time=self.server_time
        )
        self._stores[process.number] = store
        return store

    def server_time(self) -> float | None:
        """The database server's clock as the simulated processes read it: its offset from the
        FakeClock is read once, then it moves with the FakeClock, as a real server's clock
        moves with real time. (Read again by each process, the offsets would differ by every
        jump of the FakeClock between two processes' starts: processes that disagree on the
        time by more than a lease, which no deployment has, each taking the other's leases for
        expired.)"""
        return None if self.server_offset is None else self.clock.now() + self.server_offset

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Driver]:
        # Injected faults make the engine log tracebacks by design; keep the output readable.
        engine_log = logging.getLogger("sagaway")
        level = engine_log.level
        engine_log.setLevel(logging.CRITICAL)
        try:  # restored however the run ends: later tests read the engine's log
            with (
                mock.patch.object(sagaway.manager, "open_store", self._open_store),
                recording_handovers(self.world),
            ):
                self.observer = open_store(self.url)
                if self.settings.codec:
                    self.observer = CodecStore(self.observer, CODEC)
                await self.observer.open()
                if self.settings.purge:
                    remembering = purging.Remembering(self.observer)
                    self.observer = remembering
                    self.world.purge_gate = purging.Gate(self._before_purge)
                server = await self.observer.server_time()
                self.server_offset = None if server is None else server - self.clock.now()
                try:
                    for version in fleet.first_versions(self.scenario):
                        await self.open_process(version)
                    if self.separate_client:
                        versions = fleet.first_versions(self.scenario)
                        first = Process(0, version=versions[0])
                        self.client_live = await self._open(first, client=True)
                        if len(versions) > 1:
                            other = Process(-1, version=versions[1])
                            self.other_client = await self._open(other, client=True)
                    yield self
                finally:
                    await self.close_all()
                    await self.observer.close()
        finally:
            engine_log.setLevel(level)

    async def _open(self, process: Process, *, client: bool = False) -> _Live:
        manager = time_skipping_manager(
            self.url,
            self.clock,
            lease_timeout=LEASE,
            poll_interval=POLL,
            recovery_interval=RECOVERY,
            concurrency=self.scenario.faults.concurrency,
            codec=CODEC if self.settings.codec else None,
            version=process.version,
            run_versions=None if process.version is None else {process.version},
            **purging.manager_options(self.settings.purge),
            **self.queue_plan.manager_options(),
        )
        self.process_versions[process.number] = process.version
        install(manager, self.world, process, self.queue_plan)
        self._opening = (process, client)
        connection = None
        if client:
            connection = manager.connect()
            await connection.__aenter__()
        else:
            await manager.__aenter__()
            self.processes_opened += 1
        # On PostgreSQL the engine takes its times from the server's clock (server_time); the
        # record's times are in that clock.
        process.offset = self.server_offset or 0.0
        return _Live(process, manager, self._stores[process.number], connection)

    async def _before_purge(self) -> None:
        assert isinstance(self.observer, purging.Remembering)
        current = await self.discover()
        await self.observer.remember_ended(list(self.world.runs), current)

    async def _forgotten(self, run_id: str, answer: bool | str) -> bool:
        """Whether a send's "ended" answer is a purge's: ``run_id`` is gone from the database,
        its signals and their dedupe ids with it (docs/retention.md). A purge that commits
        while the send runs gives "has ended" (the run was read before it), else
        ``WorkflowNotFound``."""
        if answer != "ended" or not isinstance(self.observer, purging.Remembering):
            return False
        return await self.observer.gone(run_id)

    def _purged(self, exc: Exception) -> bool:
        """Whether ``exc`` is a client call's answer about a key the purge freed."""
        return self.settings.purge and isinstance(exc, sw.WorkflowNotFound)

    async def open_process(self, version: str | None = None) -> _Live:
        live = await self._open(Process(next(self._numbers), version=version))
        self.live.append(live)
        return live

    async def close_all(self) -> None:
        if self.frozen is not None:
            self._unfreeze()
        clients = [c for c in (self.client_live, self.other_client) if c is not None]
        everyone = [*self.live, *clients]
        for live in everyone:
            live.process.dead = True  # no more faults, no more effects: we are shutting down
            if live.process.stalled is not None:
                live.process.stalled.set()
                live.process.stalled = None
        for live in everyone:
            with contextlib.suppress(Exception):
                await self._close(live)
        self.live = []
        self.client_live = self.other_client = None

    async def _close(self, live: _Live) -> None:
        """Close a process's Manager; one that does not return in time is a finding."""
        live.process.closing = True  # nothing to freeze it while it closes
        task = asyncio.ensure_future(live.close())
        done, _ = await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)
        if not done:
            self.problems.append(
                f"closing process {live.process.number}'s Manager did not return within "
                f"{CLOSE_TIMEOUT:.0f} s (tasks: {_stuck_tasks()})"
            )
            return
        task.result()

    async def _replace(self, live: _Live, *, hard: bool) -> None:
        self.live.remove(live)
        if hard:
            live.process.dead = True
        if self.frozen is not None and self.frozen[0] is live.process:
            self._unfreeze()  # it crashed (or restarts) while frozen: its calls end now
        elif live.process.stalled is not None:
            live.process.stalled.set()
            live.process.stalled = None
        await self._close(live)
        await self.open_process(live.process.version)
        if hard:
            # Nothing released the dead process's leases: they expire.
            queues.lease_passed(self.world)
            await self.clock.advance(LEASE + 1.0)

    def _unfreeze(self) -> None:
        assert self.frozen is not None
        process, _ = self.frozen
        self.frozen = None
        if process.stalled is not None:
            process.stalled.set()
            process.stalled = None

    async def handle_requests(self) -> bool:
        """Carry out crashes, restarts and stalls the faulty stores asked for; True if any."""
        acted = False
        for live in list(self.live):
            if live.process.dead:
                await self._replace(live, hard=True)
                acted = True
        requested = self.injector.restart_requested
        if requested is not None:
            self.injector.restart_requested = None
            for live in list(self.live):
                if live.process is requested and not requested.dead:
                    await self._replace(live, hard=False)
                    acted = True
        stalled = self.injector.stall_requested
        if stalled is not None:
            self.injector.stall_requested = None
            if stalled.number == 0 or stalled.dead or self.frozen is not None:
                if stalled.stalled is not None:
                    stalled.stalled.set()
                    stalled.stalled = None
            else:
                others = [x for x in self.live if x.process is not stalled]
                if not [x for x in others if x.process.version == stalled.version]:
                    # the process that takes the work over (one of its version)
                    await self.open_process(stalled.version)
                self.frozen = (stalled, self.jumps)
                queues.lease_passed(self.world)
                await self.clock.advance(LEASE + 1.0)
            acted = True
        return acted

    # ------------------------------------------------------------------ client

    async def client(
        self, op: Callable[[sw.Manager], Awaitable[T]], *, version: str | None = None
    ) -> T:
        """Run a client call, retrying it after injected errors as an application would;
        ``version``: in a process of that code version (what it starts records it)."""
        for _ in range(30):
            await self.handle_requests()
            live = self._caller(version)
            try:
                return await op(live.manager)
            except (InjectedDbError, ProcessDead):
                await self.wait_idle()
        raise AssertionError("a client call failed 30 times in a row")

    def _caller(self, version: str | None) -> _Live:
        clients = [c for c in (self.client_live, self.other_client) if c is not None]
        if version is None:
            return clients[0] if clients else self.live[-1]
        if clients:
            return next(c for c in clients if c.process.version == version)
        return next(x for x in reversed(self.live) if x.process.version == version)

    async def start(self, top: TopLevel, *, replace: bool = False) -> None:
        on_conflict = sw.OnConflict.TERMINATE_EXISTING if replace else sw.OnConflict.ATTACH
        before = set(self.world.runs)
        call_args = (to_json(top.program), top.key)

        line = _ordering_key_of(top.key) if self.settings.ordered_starts else None
        line = flows.SHARED_LINE if flows.shared(self) else line
        decoys = 0 if replace else flows.decoys(self.settings, top)
        flow = flows.flow_of(self.settings, top)
        options = {"deadline": top.timeout, "ordering_key": line, **flow}

        async def op(manager: sw.Manager) -> str | None:
            # A retried TERMINATE_EXISTING whose first try committed must not replace again.
            mine = [r for r in self.world.runs if r not in before and self._is_top(r, top.key)]
            if replace and mine:
                return mine[0]
            if decoys:
                return await flows.burst(self, manager, top, decoys, options)
            try:
                handle = await manager.workflow("interp", *call_args).execute(
                    idempotency_key=top.key, on_conflict=on_conflict, **options
                )
            except sw.WorkflowAlreadyExists:
                return None  # it had ended: nothing to replace
            return handle.run_id

        version = fleet.top_version(self.scenario, self.scenario.workflows.index(top))
        run_id = await self.client(op, version=version)
        if run_id is not None:
            self.top_runs[top.key] = run_id
            self.sent.setdefault(run_id, set())
            flows.started_with(self, run_id, flow)
            if not flow:
                self.unprioritised.append(run_id)
            if line is not None:
                flows.joined(self, line, run_id)

    def _is_top(self, run_id: str, key: str) -> bool:
        info = self.world.runs[run_id]
        return info.key == key and info.parent_key is None

    async def send(self, top: TopLevel, label: str, dup: bool, round_: int) -> None:
        if label in talking.update_labels(top):
            await talking.send(self, top, label, dup, round_)
            return
        run_id = self.top_runs[top.key]
        dedupe = f"{label}-{round_}" if dup else None
        outcomes: list[bool | str] = []
        for _ in range(2 if dup else 1):

            async def op(manager: sw.Manager) -> bool | str:
                try:
                    return await manager.signal(label).send(
                        top.key, f"sig:{label}", dedupe_id=dedupe
                    )
                except sw.SagawayError as exc:
                    if "has ended" not in str(exc) and not self._purged(exc):
                        raise
                    return "ended"  # not delivered, as documented (or ended and purged)

            outcomes.append(await self.client(op))
        # The repeat of a dedupe id is "already sent" whenever the first send stored it, even
        # if that signal ended the run meanwhile; "has ended" only if nothing was stored, or
        # if a purge deleted the run (and its dedupe ids) between the two.
        expected = "ended" if outcomes[0] == "ended" else False
        if dup and outcomes[1] != expected and not await self._forgotten(run_id, outcomes[1]):
            self.problems.append(
                f"signal {label!r} to {top.key} sent twice with dedupe id {dedupe!r}: "
                f"{outcomes[0]!r} then {outcomes[1]!r}"
            )
        self.sent[run_id].add(label)

    async def end(self, key: str, cancel: bool) -> None:
        async def op(manager: sw.Manager) -> None:
            try:
                if cancel:
                    await manager.get_workflow(key).cancel()
                else:
                    await manager.terminate(key)
            except sw.WorkflowNotFound as exc:
                if not self._purged(exc):
                    raise  # else it had ended, and was purged: nothing to end

        await self.client(op)

    # ------------------------------------------------------------------ time

    def _began(self) -> int:
        return sum(s.began for s in self._stores.values() if s.process.stalled is None)

    def _busy(self) -> bool:
        # A frozen process's calls wait for the thaw: they are not work in progress.
        if any(s.inflight for s in self._stores.values() if s.process.stalled is None):
            return True
        return self.world.busy()

    async def wait_idle(self) -> None:
        """Until nothing runs: no store call in flight, none begun since the last look, and no
        synchronous activity, five looks in a row (a store call is a thread's work: it can
        take a while on a busy machine; and one can begin and end while the loop sleeps
        between two looks, longer than asked on a busy machine)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + IDLE_TIMEOUT
        quiet = spins = 0
        began = self._began()
        while loop.time() < deadline:
            spins += 1
            await asyncio.sleep(0 if spins % 4 else 0.001)
            seen, began = began, self._began()
            quiet = 0 if self._busy() or began != seen else quiet + 1
            if quiet >= 5:
                return
        calls = {n: +store.calls_in_flight for n, store in self._stores.items() if store.inflight}
        raise AssertionError(
            "the engine never went idle: store calls in flight by process "
            f"{calls}, synchronous activities running: {self.world.sync_running}"
        )

    async def settle(self, done: Callable[[], Awaitable[bool]], budget: float) -> bool:
        """Run until ``done()`` holds at an idle moment, or ``budget`` virtual seconds pass."""
        start = self.clock.now()
        while True:
            await self.wait_idle()
            if await self.handle_requests():
                continue
            if self.frozen is not None and self.jumps - self.frozen[1] >= STALL_JUMPS:
                self._unfreeze()
                continue
            pending = self.clock.pending()
            if pending and pending[0][0] <= self.clock.now():
                await self.clock.advance(0)  # overdue sleepers (registered during a jump) wake
                continue
            if await done():
                if self.frozen is not None:
                    self._unfreeze()
                    continue
                return True
            if self.settings.idle_slot_check and self.frozen is None:
                await self.check_idle_slots()
            if self.clock.now() - start > budget or self.jumps > MAX_JUMPS:
                if self.frozen is not None:
                    self._unfreeze()
                    continue
                return False
            if not pending:
                return False
            overshoot = next(self.overshoots)
            self.delayed += overshoot > 0
            # Not to a deadline only purgers wait for: they wake on the way (purging.Clock).
            stops = [d for d, _ in pending if not self.clock.purges_only(d)] or [pending[0][0]]
            jump = max(stops[0] - self.clock.now(), 0.0) + overshoot
            self.jumps += 1
            await self.clock.advance(jump)

    # ------------------------------------------------------------------ observations

    def live_owners(self) -> set[str]:
        return {x.process.owner for x in self.live if x.process.owner and not x.process.dead}

    async def check_idle_slots(self) -> None:
        """Nothing can happen until the clock moves: a RUNNING workflow holds a worker slot,
        so it must be doing something (an activity, a retry backoff, a short in-process
        sleep), not only waiting. Seen twice, a while apart, to be sure it is not a thread's
        result still on its way to the event loop."""
        suspects = await self._slot_holders()
        if not suspects:
            return
        await asyncio.sleep(0.05)
        await self.wait_idle()
        again = await self._slot_holders()
        for run_id, what in again.items():
            if suspects.get(run_id) == what:
                self.idle_violations[run_id] = what

    async def _slot_holders(self) -> dict[str, str]:
        assert self.observer is not None
        await self.discover()
        found = {}
        for record in await self.observer.list_workflows(
            status=sw.WorkflowStatus.RUNNING, limit=1000
        ):
            if record.run_id in self.idle_violations:
                continue
            live = next((x for x in self.live if x.process.owner == record.lease_owner), None)
            owner = None if live is None else live.process
            if live is None or owner is None or owner.dead:
                continue  # a dead owner's lease runs out; checked at the end
            worker = live.manager.worker
            held = worker is not None and any(
                state.run_id == record.run_id and state.holds_slot for state in worker.executions()
            )
            if not held:
                # Several branches all waiting in the worker give the slot back but keep the
                # lease until one of the waits ends (a workflow unloads with one wait left).
                continue
            program = self.world.runs[record.run_id].program
            if not self.world.interpreting.get((owner.number, program)):
                continue  # claimed but not run (a lost acknowledgement): its lease runs out
            if self.world.executing.get(record.run_id, 0):
                continue
            now = self.clock.now() + owner.offset
            steps = await self.observer.load_steps(record.run_id)
            if any(s.status is sw.StepStatus.RETRYING for s in steps):
                continue
            if any(
                s.kind is sw.StepKind.SLEEP and s.ended_at is not None and s.ended_at - now <= 1
                for s in steps
            ):
                continue
            last = max(steps, key=lambda s: (s.started_at, s.call_id), default=None)
            what = "nothing recorded" if last is None else f"{last.kind.value} {last.name}"
            found[record.run_id] = (
                f"run {record.run_id[-8:]} ({record.key}) holds a worker slot while only "
                f"waiting; last step: {what} ({len(steps)} steps)"
            )
        return found

    async def discover(self) -> list[WorkflowRecord]:
        """Learn runs whose creation the faulty store did not see complete (its caller was
        cancelled while the insert committed, as a closing process's are); the current
        executions, as listed."""
        assert self.observer is not None
        current = await self.observer.list_workflows(status=None, limit=10_000)
        for record in current:
            if record.run_id not in self.world.runs:
                program = json.loads(record.args)["program"]["label"]
                self.world.created(record.run_id, record.key, record.parent_key, program)
        return current

    async def statuses(self) -> dict[str, Any]:
        assert self.observer is not None
        await self.discover()
        out = {}
        # A copy: runs created while a read awaits (a workflow starting a child) would change
        # the dict under the loop; they are read at the next look.
        for run_id in list(self.world.runs):
            record = await self.observer.get_run(run_id)
            assert record is not None, f"run {run_id} was created but cannot be read"
            out[run_id] = record
            if record.cancel_reason is not None:
                # A request that committed although its caller never heard back (a parent's
                # request to its child, cancelled with the parent) reached the run all the same.
                self.world.cancel_requested.add(run_id)
        return out

    def _children(self, info: RunInfo) -> list[RunInfo]:
        world = self.world
        program = self.programs[info.program]
        # Waited for under a key shared with another top-level workflow, whichever created it,
        # or under a key the program chose (``child-<label>``): the same for a run that
        # replaced an earlier one of a workflow above it, whose run may have created it.
        nodes = [n for n in walk(program.body) if isinstance(n, Child)]
        shared = {shared_key(n.program) for n in nodes if n.key == "shared"}
        shared |= {f"child-{n.label}" for n in nodes if n.key == "user"}
        return [
            child
            for child in world.runs.values()
            if (
                child.parent_key == info.key
                # this run's children: a replaced run's default-keyed children (in its own key
                # space) are not; a child under a key the program chose is shared
                and (child.seq > info.seq or child.key in world.chosen_keys)
            )
            or child.key in shared
        ] + forks.source_children(self, info)

    def _descendants(self, info: RunInfo) -> list[RunInfo]:
        found: dict[str, RunInfo] = {}
        todo = [info]
        while todo:
            for child in self._children(todo.pop()):
                if child.run_id not in found and child.run_id != info.run_id:
                    found[child.run_id] = child
                    todo.append(child)
        return list(found.values())

    def expectation(self, run_id: str, records: dict[str, Any] | None = None) -> model.Expect:
        """How the run must stand; with ``records`` (every run's), PENDING while a run ahead
        of it in its line has not ended."""
        world = self.world
        info = world.runs[run_id]
        by_request = world.ended_by_request.get(run_id)
        if run_id in world.replaced or by_request == "TERMINATED":
            return model.Expect(frozenset({"TERMINATED"}), compensated=None)
        if by_request == "CANCELLED":
            return model.Expect(frozenset({"CANCELLED"}), compensated=None)
        if records is not None and flows.blocked(self, run_id, records):
            return model.Expect(frozenset({"PENDING"}))
        program = self.programs[info.program]
        # Its whole tree: a cancelled grandchild ends its parent CANCELLED, and that one's.
        children = self._descendants(info)
        ended = frozenset(
            c.program for c in children if world.ended_by_request.get(c.run_id) == "CANCELLED"
        )
        # A cancel request is cooperative: it may come too late to change anything.
        maybe = frozenset(c.program for c in children if c.run_id in world.cancel_requested)
        signals = frozenset(self.sent.get(run_id, ()))
        want = model.expect(program, model.Env(signals, ended))
        if maybe - ended:
            other = model.expect(program, model.Env(signals, ended | maybe))
            want = model.either(want, other)
        deadline = info.parent_key is None and info.program in self.deadlined
        if run_id in world.cancel_requested or deadline:
            want = model.cancellable(want, never_lost=self.settings.cancel_never_lost)
        return want

    async def all_as_expected(self) -> bool:
        records = await self.statuses()
        if not await self._as_expected(records):
            return False
        if self.lines and any(r.status is sw.WorkflowStatus.PENDING for r in records.values()):
            # The runs are read one at a time: a run ahead in a line may have been read before
            # a child it waits for ended (read later), which woke it. Read again: it is due,
            # running or ended now.
            return await self._as_expected(await self.statuses())
        return True

    async def _as_expected(self, records: dict[str, Any]) -> bool:
        server = self.server_time()
        now = self.clock.now() if server is None else server
        for run_id, record in records.items():
            want = self.expectation(run_id, records)
            if not want.holds(record.status.value, record.suspend_count):
                return False
            if record.status is sw.WorkflowStatus.PENDING and flows.ahead_due(
                self, run_id, records, now
            ):
                return False  # the run ahead of it in its line is about to move
        # A call waiting in the queue's line is work still to do: settled only once none is.
        return not await queues.waiting(self, records)

    async def first_phase_done(self) -> bool:
        records = await self.statuses()
        return all(
            records[r].status not in (sw.WorkflowStatus.RUNNING, sw.WorkflowStatus.PENDING)
            for r in self.top_runs.values()
        )


def _stuck_tasks() -> str:
    """Where every other task of the loop waits (its chain of awaits, innermost last), for a
    report of a hang."""
    lines = []
    for task in asyncio.all_tasks():
        if task is asyncio.current_task():
            continue
        lines.append(f"{task.get_name()} at {_awaits(task.get_coro())}")
    return "; ".join(sorted(lines, key=lambda line: not line.startswith("sagaway"))[:16])


def _awaits(coro: object) -> str:
    """``f@file:line > g@file:line ...`` down a suspended coroutine's chain of awaits."""
    where = []
    while coro is not None and len(where) < 12:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        name = frame.f_code.co_filename.rsplit("/", 1)[-1]
        where.append(f"{frame.f_code.co_name}@{name}:{frame.f_lineno}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return " > ".join(where) or "?"


def _ordering_key_of(key: str) -> str | None:
    """A line of one for two starts in three, drawn from the key: the others are dispatched
    where they are started when nothing else keeps them PENDING."""
    return f"line/{key}" if zlib.crc32(key.encode()) // 7 % 3 else None
