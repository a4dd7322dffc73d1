"""Pausing: a workflow execution held still by an operator, and activities or activity queues
whose new attempts are held back in the whole cluster (an incident switch).

A paused workflow is claimed by no worker (the claim queries skip it). The process running it
learns of the pause at once when the pause is made in that process, else at its next lease
heartbeat (``heartbeat``: a third of the lease timeout), and then stops it before its next
durable call, as a wait unloads it: what finished is written, its lease and worker slot are
given up. Resumed, it is due as it was and replays to where it stopped.

A paused activity or queue is read by every process into ``PausedCalls`` (at each heartbeat,
and at once in the process that paused it). Before each attempt, an activity of a paused name
or queue waits: if it is all its workflow does, the workflow is unloaded (WAITING for
``paused:<kind>:<name>``, looked at again every ``RECHECK`` seconds, at once on resume);
beside other work, or as a compensation, it waits in the worker. The attempt is not begun, so
no attempt of the retry policy is used; attempts already running finish.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from typing import Protocol

from sagaway._engine import audit, outages
from sagaway._engine.local_runner import LocalRunner
from sagaway._engine.options import EngineOptions
from sagaway._engine.text_checks import check_name
from sagaway.clock import Clock
from sagaway.store import _pauses
from sagaway.store.base import Store
from sagaway.store.records import PausedCallRecord, WorkflowRecord

logger = logging.getLogger(__name__)

RECHECK = 30.0
"""Seconds after which a workflow held back by a paused activity looks again (a resume in
another process wakes it at once; this bounds a wake-up that was missed)."""


class Engine(Protocol):
    """What pausing uses of the Engine."""

    store: Store
    clock: Clock
    runner: LocalRunner | None
    paused_calls: PausedCalls
    options: EngineOptions

    async def get(self, key: str) -> WorkflowRecord: ...

    def wake_recovery(self) -> None: ...


class PausedCalls:
    """The activities and queues paused in the cluster, as this process last read them."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], PausedCallRecord] = {}
        self.changed = asyncio.Event()
        """Set (and replaced) when the set changes: waits held back by a pause look again."""

    def holding(self, activity: str, queue: str | None) -> tuple[str, str] | None:
        """The pause (kind, name) that holds back an attempt of ``activity`` of ``queue``."""
        if not self.records:
            return None
        if ("activity", activity) in self.records:
            return ("activity", activity)
        if queue is not None and ("queue", queue) in self.records:
            return ("queue", queue)
        return None

    def update(self, records: Collection[PausedCallRecord]) -> None:
        fresh = {(r.kind, r.name): r for r in records}
        if fresh.keys() != self.records.keys():
            self.records = fresh
            changed, self.changed = self.changed, asyncio.Event()
            changed.set()


async def pause_workflow(engine: Engine, key: str, paused: bool, reason: str) -> bool:
    """Pause or resume the current execution under ``key`` (audited); see ``Store.pause_workflow``.

    Raises WorkflowNotFound for an unknown key."""
    note = audit.note("pause" if paused else "resume", reason)
    what = f"{'pause' if paused else 'resume'} workflow {key!r}"

    async def call() -> bool:
        record = await engine.get(key)
        changed = await engine.store.pause_workflow(
            record.run_id, paused=paused, now=engine.clock.now(), audit=note
        )
        if changed and paused and engine.runner is not None:
            engine.runner.paused(record.run_id)
        return changed

    changed = await outages.ride(engine, what, call)
    if changed and not paused:
        engine.wake_recovery()
    return changed


async def pause_calls(engine: Engine, kind: str, name: str, paused: bool, reason: str) -> bool:
    """Pause or resume the activity or queue ``name`` in the cluster (audited)."""
    if kind not in _pauses.KINDS:
        raise ValueError(f"kind must be one of {', '.join(_pauses.KINDS)}, not {kind!r}")
    check_name(name, f"{kind} name")
    note = audit.note("pause" if paused else "resume", reason, **{kind: name})
    what = f"{'pause' if paused else 'resume'} {kind} {name!r}"
    changed = await outages.ride(
        engine,
        what,
        lambda: engine.store.pause_calls(
            kind, name, paused=paused, reason=reason, now=engine.clock.now(), audit=note
        ),
    )
    await refresh(engine)
    if changed and not paused:
        engine.wake_recovery()
    return changed


async def refresh(engine: Engine) -> None:
    """Read the paused activities and queues again."""
    engine.paused_calls.update(await engine.store.list_paused_calls())


async def heartbeat(engine: Engine, run_ids: Collection[str]) -> set[str]:
    """At a worker's heartbeat: read the paused calls, and which of ``run_ids`` are paused."""
    try:
        await refresh(engine)
        return await engine.store.paused_runs(run_ids) if run_ids else set()
    except Exception:
        logger.warning("could not read pauses; trying at the next heartbeat", exc_info=True)
        return set()
