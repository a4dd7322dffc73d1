"""A purge: ended executions deleted batch by batch, then its entry in the audit trail.

Each batch is one short transaction (``Store.purge_ended``), with a pause after it as long as
it took, until a batch comes back short. The entry (who, the cutoff and statuses, how many) is
written after the last batch, through outages like a client call (its ``entry_id`` makes a
retry write it once); a purge that stops on an error writes what it deleted so far, marked
``interrupted``. A background purge (``Manager(retention=...)``) writes one only when it
deleted something: a quiet hour leaves no trace.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import math
import time
from collections.abc import AsyncIterator, Callable, Collection
from typing import Protocol

from sagaway._engine import audit, outages
from sagaway._engine.options import EngineOptions
from sagaway._engine.recent import RecentEnds
from sagaway.clock import Clock
from sagaway.states import WorkflowStatus, ended_statuses
from sagaway.store.base import Store

PACE = 1.0
"""Pause after a purge batch, relative to the time the batch took."""


class Engine(Protocol):
    """What a purge uses of the Engine (``Engine.purge`` calls it)."""

    store: Store
    clock: Clock
    options: EngineOptions
    recent_ends: RecentEnds


def as_seconds(value: datetime.timedelta | float, what: str) -> float:
    """``value`` (a timedelta or seconds) in seconds; ``ValueError`` unless finite and > 0."""
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise TypeError(f"{what} must be a datetime.timedelta or seconds, not {value!r}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{what} must be a positive duration, not {value!r}")
    return seconds


def checked_statuses(
    statuses: Collection[WorkflowStatus | str] | None, batch_size: int
) -> list[WorkflowStatus]:
    """``purge``'s statuses (ended ones only: ``ValueError`` for a live one), once its batch
    size is checked."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, not {batch_size!r}")
    return ended_statuses(statuses)


async def purge(
    engine: Engine,
    older_than: float,
    *,
    statuses: Collection[WorkflowStatus] | None,
    batch_size: int,
    dry_run: bool,
    on_batch: Callable[[int], None] | None = None,
    reason: str | None = None,
    background: bool = False,
) -> int:
    """``Engine.purge``: delete executions that ended more than ``older_than`` seconds ago,
    batch by batch (each its own short transaction), until none is left; how many
    (``dry_run``: how many would be, deleting nothing). The cutoff is fixed at the start, so
    executions ending meanwhile do not keep it going. ``on_batch(n)`` after each batch. Audited
    (a ``background`` purge when it deleted something)."""
    reason = audit.check_reason(reason)
    before = engine.clock.now() - older_than
    if dry_run:
        return await engine.store.count_purgeable(before=before, statuses=statuses)
    deleted: list[int] = []

    async def record(interrupted: bool = False) -> None:
        note = audit.note(
            "purge",
            reason,
            older_than=older_than,
            before=before,
            statuses=None if statuses is None else sorted(s.value for s in statuses),
            batch_size=batch_size,
            deleted=sum(deleted),
            background=background or None,
            interrupted=interrupted or None,
        )
        if interrupted:  # once: the error that stopped the purge is what the caller needs
            await engine.store.record_audit(note)
        else:
            await outages.ride(
                engine, "audit entry of a purge", lambda: engine.store.record_audit(note)
            )

    try:
        async for count in _batches(engine, before, statuses, batch_size):
            deleted.append(count)
            if on_batch is not None:
                on_batch(count)
    except BaseException:
        if sum(deleted):
            with contextlib.suppress(Exception):
                await record(interrupted=True)
        raise
    if sum(deleted) or not background:
        await record()
    return sum(deleted)


async def _batches(
    engine: Engine, before: float, statuses: Collection[WorkflowStatus] | None, batch_size: int
) -> AsyncIterator[int]:
    """Delete batch by batch until one comes back short: each batch's count."""
    while True:
        began = time.monotonic()
        run_ids = await engine.store.purge_ended(before=before, statuses=statuses, limit=batch_size)
        took = time.monotonic() - began
        for run_id in run_ids:
            engine.recent_ends.discard(run_id)  # a purged end is not answered from memory
        yield len(run_ids)
        if len(run_ids) < batch_size:
            return
        # Leave the database to the workers between batches, as long again as the batch took:
        # a purge takes at most about half of the write time (on SQLite one writer serves
        # everyone; measured under load, the workers' throughput kept 70% instead of 50%).
        # Real time on purpose: a pace, not a durable wait, and a test's fake clock must not
        # stall it.
        await asyncio.sleep(took * PACE)
