"""The ``purge`` building block: every process runs background retention with a tiny age.

Each process's Manager purges, every ``INTERVAL`` virtual seconds, what ended more than ``AGE``
seconds ago: runs disappear from the database soon after they end, while other runs may still
read them (a parent its child, a workflow that attached to a child under a shared key). The
promise checked: a live workflow never loses an outcome it reads. A reader whose child was
purged under it would stay SUSPENDED with ``WorkflowNotFound`` (or end otherwise than the model
says: the outcome check reports that too).

The checks read every run's end and steps after the fact, and a purge deletes them: just before
each purge the observer remembers every ended run as it stands (an ended run's record and steps
no longer change), and reads a purged run from what it remembered. A run the database lost
without it being remembered had not ended: that is a live run purged, and ``Driver.statuses``
reports it ("was created but cannot be read").

That holds only if no end commits between the observer's look and the purge's delete. An end
is stamped with the time the engine decided it, not the time it commits: one FakeClock jump can
wake an activity at t=5 and a purger at t=30, and the workflow's end (``ended_at`` 5) commit
after the observer read the run as RUNNING, yet before the purge (cutoff 29) deleted it, which
is what retention should do with a run that ended 25 s before. The harness, not the engine,
lost that run (a soak found it once in about 1,900 SQLite programs; its replay failed 1 time in
40; ``test_harness.py`` holds the end to make it happen every time). So ``Gate`` keeps purges
and the store writes that can end a run apart: a purge waits for those in flight, and those
that come meanwhile wait for the purge. Not covered: a write whose caller was cancelled (a
closing process's) commits after its call has left the gate. A closing SQLite store finishes
its queued writes before it closes, and the driver moves the clock only once the process has
closed, so such an end cannot be older than a later purge's cutoff; through a server the write
might land a moment after the close.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sagaway.store import Store
from sagaway.store.records import StepRecord, WorkflowRecord
from sagaway.testing import FakeClock

if TYPE_CHECKING:
    from tests.generative.driver import Driver

AGE = 1.0
"""``Manager(retention=...)``: virtual seconds after its end a run may be purged."""
INTERVAL = 30.0
"""``Manager(retention_interval=...)``: virtual seconds between a process's purges.

The first purge comes one interval after a process starts, then every interval: at the times
programs' timers (30 s, 3600 s) and slow activities (120 s) end, so a purge often runs in the
same instant as the workflow that reads what it deletes."""

PURGER_TASK = "sagaway-retention"
"""The name of the task a Manager's background purger runs in (``RetentionPurger.start``)."""


class Clock(FakeClock):
    """The driver's FakeClock, which knows the deadlines only purgers wait for.

    A purger wakes every ``INTERVAL``; a settle that stopped at each of those wake-ups (to look
    at every run) made a CI-size SQLite run take twice the CPU. The driver jumps over a deadline
    only purgers wait for (``purges_only``): ``advance`` still wakes them on the way, in order,
    and they purge as the clock reaches the next deadline that anything else waits for. A purge
    due in the same instant as a timer still runs in that instant."""

    def __init__(self) -> None:
        super().__init__()
        self._purger_sleeps: Counter[float] = Counter()

    async def sleep(self, seconds: float) -> None:
        task = asyncio.current_task()
        if task is None or task.get_name() != PURGER_TASK or seconds <= 0:
            await super().sleep(seconds)
            return
        deadline = self.now() + seconds
        self._purger_sleeps[deadline] += 1
        try:
            await super().sleep(seconds)
        finally:
            self._purger_sleeps[deadline] -= 1
            if not self._purger_sleeps[deadline]:
                del self._purger_sleeps[deadline]

    def purges_only(self, deadline: float) -> bool:
        """Whether only purgers wait for ``deadline`` (one of ``pending()``'s)."""
        waiting = sum(1 for d, _ in self.pending() if d == deadline)
        return 0 < waiting <= self._purger_sleeps.get(deadline, 0)


ENDS = frozenset({"finish_workflow", "end_workflow", "create_workflow"})
"""Store writes that can end a run: a workflow's own end, a cancel or terminate by request,
and a start with ``TERMINATE_EXISTING`` (the run it replaces ends TERMINATED)."""


class Gate:
    """Shared by every process's store: a purge (with the observer's look just before it) and
    the writes that can end a run do not overlap. One purge at a time."""

    def __init__(self, before_purge: Callable[[], Awaitable[None]]) -> None:
        self._before_purge = before_purge
        self._purge = asyncio.Lock()
        self._open = asyncio.Event()
        self._open.set()
        self._ending = 0
        self._no_ends = asyncio.Event()
        self._no_ends.set()
        self.counts: Counter[str] = Counter()
        """Purge calls that returned, and the runs they deleted (the session's summary)."""
        self.purged: set[str] = set()
        """The run ids the purges deleted."""

    @property
    def purge_waiting(self) -> bool:
        """Whether a purge waits for an end in flight (tests synchronise on it)."""
        return not self._open.is_set() and not self._no_ends.is_set()

    @contextlib.asynccontextmanager
    async def ending(self) -> AsyncIterator[None]:
        """Around a write that can end a run (``ENDS``)."""
        while not self._open.is_set():
            await self._open.wait()
        self._ending += 1
        self._no_ends.clear()
        try:
            yield
        finally:
            self._ending -= 1
            if not self._ending:
                self._no_ends.set()

    @contextlib.asynccontextmanager
    async def purging(self) -> AsyncIterator[None]:
        """Around a purge: the ends in flight commit first, then the observer remembers what
        has ended, then the purge runs while no end can commit."""
        async with self._purge:
            self._open.clear()
            try:
                await self._no_ends.wait()
                await self._before_purge()
                yield
            finally:
                self._open.set()


def manager_options(enabled: bool) -> dict[str, Any]:
    return {"retention": AGE, "retention_interval": INTERVAL} if enabled else {}


class Remembering:
    """The driver's observer store, which remembers ended runs before a purge deletes them."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.remembered: dict[str, tuple[WorkflowRecord, list[StepRecord]]] = {}
        self.purges = 0
        """Purge calls the processes made (each remembered what had ended first)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def remember_ended(self, run_ids: list[str], current: list[WorkflowRecord]) -> None:
        """Called just before a purge; ``current``: the current executions, just listed (a run
        a start replaced is not among them: it is read alone)."""
        self.purges += 1
        listed = {record.run_id: record for record in current}
        ended = []
        for run_id in run_ids:
            if run_id in self.remembered:
                continue
            record = listed.get(run_id) or await self._inner.get_run(run_id)
            if record is not None and record.status.ended:
                ended.append(record)
        if not ended:
            return
        steps = await self._inner.load_steps_many([record.run_id for record in ended])
        for record in ended:
            self.remembered[record.run_id] = (record, steps.get(record.run_id, []))

    async def gone(self, run_id: str) -> bool:
        """Whether ``run_id`` is no longer in the database (a purge deleted it)."""
        return await self._inner.get_run(run_id) is None

    async def get_run(self, run_id: str) -> WorkflowRecord | None:
        record = await self._inner.get_run(run_id)
        if record is None and run_id in self.remembered:
            return self.remembered[run_id][0]
        return record

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        steps = await self._inner.load_steps(run_id)
        if not steps and run_id in self.remembered:
            return list(self.remembered[run_id][1])
        return steps


def lost_outcomes(driver: Driver, records: dict[str, Any]) -> list[str]:
    """No run waits for, or was suspended on, an outcome the purge took away."""
    out = []
    for run_id, record in records.items():
        if record.status.ended or not record.error:
            continue
        if "WorkflowNotFound" in record.error or "no workflow with key" in record.error:
            info = driver.world.runs[run_id]
            out.append(
                f"{info.key} [{info.program}, run {run_id[-8:]}] lost an outcome it reads "
                f"({record.status.value}): {record.error[:300]}"
            )
    return out


def reused_after_purge(driver: Driver, calls: set[tuple[str, str, bool]]) -> bool:
    """Whether the calls sharing an idempotency key are one call in each of several runs of one
    workflow key, each created after the one before was purged: a purged key is free, and a
    start under it runs again in the same key space (docs/retention.md), so its calls get the
    same keys. Not always the same calls': a run that takes another path (cancelled earlier)
    gives a call number the purged run used for another call ("undo a3" under the key of a5, a
    soak on SQLite). That is the documented cost of reusing keys after a purge: the retention
    must outlast any deduplication window of the services the activities call."""
    gate = driver.world.purge_gate
    assert gate is not None
    runs = sorted({run_id for run_id, _, _ in calls}, key=lambda r: driver.world.runs[r].seq)
    if len(runs) < 2 or len(runs) != len(calls):
        return False  # one run, or one run's two calls: a key shared within a run
    if len({driver.world.runs[r].key for r in runs}) > 1:
        return False
    return all(r in gate.purged for r in runs[:-1])


def blocks(driver: Driver) -> Counter[str]:
    """How much was purged (for the session's summary)."""
    gate = driver.world.purge_gate
    return Counter() if gate is None else Counter(gate.counts)
