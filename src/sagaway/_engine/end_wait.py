"""Waiting for an execution's end: the one wait behind ``handle.result()``,
``execute_get(timeout=)``, ``SyncClient``'s results, ``sagaway start --wait`` and a parent
waiting for a child beside other work.

- **One deadline.** ``timeout`` is turned into a time on the engine's clock once, when the wait
  begins. Every later step (the first read by key, an outage, a poll, a wake-up) measures what
  is left against that time: an outage in the middle neither restarts nor extends it. Past it:
  ``TimeoutError`` (the workflow runs on).
- **One outage policy.** A read that meets ``StoreUnavailable`` is tried again, through
  ``outages.Outage`` with that same deadline: a client's wait gives up once the outage has
  lasted ``unavailable_timeout`` (``EngineUnavailable``), a workflow's (a parent waiting for
  its child) never does, since the run resumes from its records anyway.
- **Wake-ups.** An end in this process is published on the Channel; one elsewhere comes as a
  notice when the store has them (PostgreSQL, the Engine Server), with a read every
  ``poll_interval`` as a safety net; without notices (SQLite, or while they do not flow) the
  wait polls, from 20 ms up to ``poll_interval``.
"""

from __future__ import annotations

from typing import Protocol

from sagaway import errors
from sagaway._engine import outages
from sagaway._engine.recent import RecentEnds
from sagaway.channel import Channel, Watch
from sagaway.clock import wait_event_or_sleep
from sagaway.store.base import StoreUnavailable
from sagaway.store.records import WorkflowRecord

FIRST_DELAY = 0.02
"""Seconds before the second read of a wait that polls; doubled up to ``poll_interval``."""


class Engine(outages.Engine, Protocol):
    """What the wait uses of the Engine."""

    channel: Channel
    recent_ends: RecentEnds
    poll_interval: float
    notifications: bool
    end_notices: bool | None

    def runs_here(self, run_id: str) -> bool: ...

    def want_ends(self) -> None: ...


async def wait_for_end(
    engine: Engine,
    key: str,
    *,
    run_id: str | None = None,
    timeout: float | None = None,
    client: bool,
) -> WorkflowRecord:
    """The execution ``run_id`` (None: the current one under ``key``) once it has ended:
    COMPLETED, FAILED, CANCELLED or TERMINATED (SUSPENDED and WAITING are not ends).

    ``client``: the wait of an application's call, which gives up on an outage past
    ``unavailable_timeout``; else a workflow's, which waits through any outage.

    Raises:
        TimeoutError: ``timeout`` seconds after the call, whatever happened meanwhile.
        EngineUnavailable: (``client``) an outage lasted ``unavailable_timeout``.
        WorkflowNotFound: there is no such execution.
    """
    wait = _Wait(engine, key, timeout, client)
    if run_id is None:
        # Which execution: the current one under the key, read (through an outage) once.
        record = await wait.read(None)
        while record is None:
            await wait.pause(None)
            record = await wait.read(None)
        if record.status.ended:
            return record
        run_id = record.run_id
    # Watched before the next read: an end between the two is not missed.
    waiter = engine.channel.watch(run_id)
    local = engine.runs_here(run_id)
    try:
        while True:
            waiter.clear()
            ended = waiter.record or engine.recent_ends.get(run_id)
            if ended is not None:
                return ended  # ended in this process: no need to read it back
            if local and engine.runs_here(run_id):
                # Running here: its end will be published on the Channel.
                wait.status, wait.next = "RUNNING in this process", engine.poll_interval
            else:
                record = await wait.read(run_id)
                if record is not None and record.status.ended:
                    return record
            await wait.pause(waiter)
    finally:
        engine.channel.unwatch(run_id, waiter)


class _Wait:
    """The state of one wait: its deadline (fixed at the start), its outage, its next pause."""

    def __init__(self, engine: Engine, key: str, timeout: float | None, client: bool) -> None:
        self.engine = engine
        self.key = key
        self.timeout = timeout
        self.deadline = None if timeout is None else engine.clock.now() + timeout
        what = f"result of workflow {key!r}" if client else f"wait for workflow {key!r}"
        self.outage = outages.Outage(engine, what, deadline=self.deadline, forever=not client)
        self.next = 0.0
        """Seconds until the next look, unless woken first."""
        self.delay = FIRST_DELAY
        """The pause of a wait that polls: doubled after each look, up to ``poll_interval``."""
        self.status = "not read yet"
        """What the execution was at the last look (for the ``TimeoutError``)."""

    async def read(self, run_id: str | None) -> WorkflowRecord | None:
        """The execution as stored (``run_id``'s, or the current one under the key), and the
        pause before the next look; None while the store is unavailable (the outage policy:
        ``EngineUnavailable`` or ``TimeoutError`` once it has lasted too long)."""
        engine = self.engine
        began = engine.clock.now()
        try:
            if run_id is None:
                record = await engine.store.get_workflow(self.key)
            else:
                record = await engine.store.get_run(run_id)
        except StoreUnavailable as exc:
            pause = self.outage.failed(exc, began)  # logs; raises past the budget or deadline
            self.status = "unknown: the database is unavailable"
            # The read itself waited for a connection; the listener's return (or the next
            # poll) wakes us to look again (at the end of a budget at the latest).
            self.next = min(self.delay, pause)
            self.delay = min(self.delay * 2, engine.poll_interval)
            return None
        self.outage.over()
        if record is None:
            raise errors.WorkflowNotFound(self.key)
        self.status = record.status.value
        if record.status.ended or run_id is None:
            return record
        engine.want_ends()
        if engine.notifications and engine.end_notices is not False:
            # The end's notice will wake us; the read is only a safety net.
            self.next, self.delay = engine.poll_interval, FIRST_DELAY
        else:
            self.next = self.delay
            self.delay = min(self.delay * 2, engine.poll_interval)
        return record

    async def pause(self, waiter: Watch | None) -> None:
        """Until the next look: ``next`` seconds, cut short by ``waiter`` and the deadline;
        ``TimeoutError`` once the deadline has passed."""
        clock = self.engine.clock
        seconds = self.next
        if self.deadline is not None:
            left = self.deadline - clock.now()
            if left <= 0:
                raise TimeoutError(
                    f"workflow {self.key!r} did not end within {self.timeout}s "
                    f"(status {self.status})"
                )
            seconds = min(seconds, left)
        if waiter is None:
            await clock.sleep(seconds)
        else:
            await wait_event_or_sleep(waiter, clock, seconds)
