"""Recovery Worker: finds work that should run now and hands it to this process's Worker.

Due work is: executions started by processes without workers (PENDING), executions whose owner
died (lease expired), SUSPENDED executions whose backoff has passed, and WAITING executions whose
timer has come. It is claimed through the same atomic lease as any other execution, so several
processes can recover at once without running anything twice. The loop sleeps until the earliest
time something can become due (capped by ``poll_interval``), so a crashed process's work is taken
over as soon as its lease expires.
"""

from __future__ import annotations

import asyncio
import logging

from sagaway import observe
from sagaway._engine.engine import Engine
from sagaway._tasks import cancel_and_wait
from sagaway.store.base import PermissionDenied, StoreUnavailable
from sagaway.store.records import Lease, StepRecord, WorkflowRecord
from sagaway.worker import Worker

logger = logging.getLogger(__name__)

_BATCH = 100
_STOP_GRACE = 5.0
"""Seconds ``stop`` lets a scan under way finish: a claim it made is handed back rather than
left held until its leases expire (a database that does not answer gets no longer)."""


class RecoveryWorker:
    """Claims due executions for a Worker."""

    def __init__(self, engine: Engine, worker: Worker) -> None:
        self.engine = engine
        self.worker = worker
        self.wake = engine.recovery_wake
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._store_down = False
        """The last scan found the database unreachable (logged once per outage)."""
        self._refused = False
        """The last scan was refused by an Engine Server (logged once, until it is allowed)."""

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="sagaway-recovery")

    async def stop(self) -> None:
        # The flag ends the loop even if a driver turned the cancellation into an error.
        self._stopping = True
        self.wake.set()
        task, self._task = self._task, None
        if task is None:
            return
        # Not cancelled at once: a claim may be committing, and its leases, never handed to
        # the Worker, would keep every other process off those runs until they expire.
        try:
            await asyncio.wait({task}, timeout=_STOP_GRACE)
        finally:
            await cancel_and_wait(task)

    async def run_once(self) -> int:
        """Claim and dispatch what is due now; returns how many executions were claimed."""
        engine, worker = self.engine, self.worker
        limit = min(worker.free_slots, _BATCH)
        if limit <= 0 or not worker.accepting:
            return 0
        claimed = await engine.claim_due(
            limit=limit,
            exclude=worker.running_ids,
            queues=worker.task_queues,
            versions=worker.run_versions,
        )
        if claimed and (self._stopping or not worker.accepting):
            await self._give_back(claimed)  # the process is closing: others run them now
            return len(claimed)
        # One read for the steps of everything claimed, not one per execution. If it fails, each
        # execution reads its own when it starts (what is claimed must run, not wait for expiry).
        steps: dict[str, list[StepRecord]] | None = None
        if claimed:
            try:
                steps = await engine.load_steps_many([r.run_id for r, _ in claimed])
            except Exception:
                logger.exception("reading the steps of claimed executions failed; retrying each")
        for record, lease in claimed:
            if record.previous_owner is not None:
                if observe.observers:
                    observe.took_over(record.name, record.key, record.previous_owner)
                logger.info(
                    "taking over workflow %s from %s (its lease expired)",
                    record.key,
                    record.previous_owner,
                    extra={"action": "take_over", "workflow_id": record.key},
                )
            else:
                logger.info(
                    "resuming workflow %s (%s)",
                    record.key,
                    record.status.value,
                    extra={"action": "recover", "workflow_id": record.key},
                )
            worker.dispatch(
                record, lease, steps=None if steps is None else steps.get(record.run_id, [])
            )
        return len(claimed)

    async def _give_back(self, claimed: list[tuple[WorkflowRecord, Lease]]) -> None:
        await asyncio.gather(*(self._give_back_one(record, lease) for record, lease in claimed))

    async def _give_back_one(self, record: WorkflowRecord, lease: Lease) -> None:
        try:
            await self.engine.release(record.run_id, lease.token)
        except Exception:
            logger.warning(
                "could not give workflow %s back while closing; it runs again when its lease "
                "expires",
                record.key,
                exc_info=True,
                extra={"action": "recover", "workflow_id": record.key},
            )

    async def _loop(self) -> None:
        engine = self.engine
        while not self._stopping:
            self.wake.clear()
            self.worker.execution_left.clear()
            held_here = False
            try:
                scanned_at = engine.clock.now()
                claimed = await self.run_once()
                if claimed >= _BATCH:
                    continue
                delay = engine.poll_interval
                # With every slot taken the next due time changes nothing: the loop waits for
                # a slot to free (or the poll interval) whatever it is.
                next_due = (
                    await engine.next_due(self.worker.task_queues, self.worker.run_versions)
                    if self.worker.free_slots > 0
                    else None
                )
                if next_due is not None:
                    delay = min(delay, max(next_due - engine.clock.now(), 0.0))
                    # Due before the scan, yet nothing claimed: an execution of this process
                    # that has just committed WAITING and is unwinding. Look again when it has
                    # left, rather than spinning on it. What fell due during the scan (a dead
                    # owner's lease expiring meanwhile) is claimed by the next scan, at once.
                    held_here = claimed == 0 and next_due <= scanned_at
                if self.worker.free_slots == 0 or held_here:
                    delay = engine.poll_interval  # woken early when capacity frees
            except PermissionDenied as exc:
                # A token without the worker role: one line, not a traceback at every poll; it
                # goes on looking, so a reload of the server's tokens file that grants the role
                # puts this process to work.
                if not self._refused:
                    logger.error(
                        "recovery cannot claim work: %s; a Manager that runs workflows needs a "
                        "token with the role worker",
                        exc,
                        extra={"action": "recover"},
                    )
                self._refused = True
                delay = engine.poll_interval
            except StoreUnavailable as exc:
                # An outage: one line when it starts, not a traceback at every poll.
                if not self._store_down:
                    logger.warning(
                        "recovery paused: %s; retrying every %.1fs",
                        exc,
                        engine.poll_interval,
                        extra={"action": "recover"},
                    )
                self._store_down = True
                delay = engine.poll_interval
            except Exception:
                logger.exception("recovery scan failed; retrying", extra={"action": "recover"})
                delay = engine.poll_interval
            else:
                if self._store_down:
                    logger.warning("recovery resumed: the database answers again")
                self._store_down = self._refused = False
            await self._sleep(max(delay, 0.005), until_one_leaves=held_here)

    async def _sleep(self, seconds: float, *, until_one_leaves: bool = False) -> None:
        wakes = [
            asyncio.ensure_future(self.engine.clock.sleep(seconds)),
            asyncio.ensure_future(self.wake.wait()),
            asyncio.ensure_future(self.worker.capacity_freed.wait()),
        ]
        if until_one_leaves:
            wakes.append(asyncio.ensure_future(self.worker.execution_left.wait()))
        try:
            await asyncio.wait(wakes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in wakes:
                fut.cancel()
            self.worker.capacity_freed.clear()
