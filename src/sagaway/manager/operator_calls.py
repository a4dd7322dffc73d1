"""The Manager's operator calls: cancel, terminate, retry, pause, fork, purge, replay checks, audit.

An operator's verbs on workflows (the command line and the console call them too); those that
change something are recorded in the audit trail with their ``reason``.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Collection
from typing import Any

from sagaway import listing
from sagaway._engine import history, pausing, purging, replaying
from sagaway._engine import retention as retention_mod
from sagaway._engine.audit import AuditEntry
from sagaway._engine.engine import EngineRef
from sagaway._engine.forking import ForkPlan
from sagaway._engine.replaying import ReplayReport
from sagaway.states import WorkflowStatus
from sagaway.store.records import PausedCallRecord
from sagaway.workflow import WorkflowHandle


class OperatorCalls:
    """An operator's verbs on the engine the Manager has open (``ref``)."""

    def __init__(self, ref: EngineRef) -> None:
        self._ref = ref

    async def audit_log(
        self,
        *,
        key: str | None = None,
        run_id: str | None = None,
        actor: str | None = None,
        action: str | Collection[str] | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 100,
        before: int | None = None,
    ) -> list[AuditEntry]:
        """The audit trail of operator actions, newest first, purged workflows' included:
        ``key`` (a workflow key or schedule id), ``run_id``, ``actor`` (the actor or who it
        acted for), ``action`` (one or several: ``cancel``, ``terminate``, ...), ``since`` /
        ``until`` (epoch seconds) narrow it; ``before``: the ``seq`` of the last entry of the
        previous page. See docs/security.md, "Audit trail"."""
        return await listing.audit_log(
            self._ref.require(),
            key=key,
            run_id=run_id,
            actor=actor,
            action=action,
            since=since,
            until=until,
            limit=limit,
            before=before,
        )

    async def check_replays(
        self, *, ended: bool = False, since: float | None = None
    ) -> list[ReplayReport]:
        """Replay the history of every live execution (``ended``: of the ended ones too) created
        at or after ``since`` against the code registered in this Manager, running nothing and
        writing nothing; one report per execution, ``diverged`` where the code would not replay
        it. Run it before deploying new workflow code (``sagaway replay``)."""
        statuses = frozenset(WorkflowStatus) if ended else replaying.LIVE
        return await replaying.replay_listed(self._ref.require(), statuses=statuses, since=since)

    async def replay_history(self, document: object) -> ReplayReport:
        """Replay an exported history (``handle.export_history()``, ``sagaway show KEY
        --export``) against the code registered in this Manager (open; nothing is written)."""
        record, steps = history.load(document)
        return await replaying.replay(self._ref.require(), record, steps)

    async def retry(self, key: str, *, reason: str | None = None) -> bool:
        """Make a SUSPENDED workflow due now; False if it is not suspended. Like cancel,
        terminate, fork and purge, recorded in the audit trail (who, when, ``reason``)."""
        return await self._ref.require().retry_now(key, reason)

    async def cancel(self, key: str, reason: str = "cancelled by request") -> bool:
        """Ask the workflow under ``key`` to cancel; False if it had already ended.
        Cooperative, with compensation, riding through outages: see ``WorkflowHandle.cancel``."""
        return await WorkflowHandle(self._ref, key).cancel(reason)

    async def pause(self, key: str, reason: str = "paused by operator") -> bool:
        """Pause the workflow under ``key``: see ``WorkflowHandle.pause`` (docs/pause.md)."""
        return await WorkflowHandle(self._ref, key).pause(reason)

    async def resume(self, key: str, reason: str = "resumed by operator") -> bool:
        """Resume a paused workflow; False if it was not paused (see ``WorkflowHandle.resume``)."""
        return await WorkflowHandle(self._ref, key).resume(reason)

    async def pause_activity(self, name: str, reason: str = "paused by operator") -> bool:
        """Hold back new attempts of the activity registered as ``name`` in every process
        (attempts running finish; none of a retry policy's attempts is used while it is
        paused); False if it was paused already. See docs/pause.md."""
        return await pausing.pause_calls(self._ref.require(), "activity", name, True, reason)

    async def resume_activity(self, name: str, reason: str = "resumed by operator") -> bool:
        """Let attempts of activity ``name`` start again; False if it was not paused."""
        return await pausing.pause_calls(self._ref.require(), "activity", name, False, reason)

    async def pause_queue(self, name: str, reason: str = "paused by operator") -> bool:
        """Hold back new attempts of every activity of the activity queue ``name`` (an
        activity's ``queue=``), as ``pause_activity`` does for one activity."""
        return await pausing.pause_calls(self._ref.require(), "queue", name, True, reason)

    async def resume_queue(self, name: str, reason: str = "resumed by operator") -> bool:
        """Let attempts of the activities of queue ``name`` start again; False if not paused."""
        return await pausing.pause_calls(self._ref.require(), "queue", name, False, reason)

    async def paused_calls(self) -> list[PausedCallRecord]:
        """The paused activities and queues (kind, name, reason, since when)."""
        return await self._ref.require().store.list_paused_calls()

    async def terminate(self, key: str, reason: str = "terminated by operator") -> bool:
        """End a live workflow as TERMINATED at once, without compensating; False if it had
        already ended. Reservations its steps made stay made: use ``cancel`` to undo them."""
        return await self._ref.require().end(key, WorkflowStatus.TERMINATED, reason)

    async def fork(
        self,
        key: str,
        *,
        from_step: int,
        new_key: str,
        force: bool = False,
        reason: str | None = None,
    ) -> WorkflowHandle[Any]:
        """Run the ended workflow ``key`` again under ``new_key``, from its step ``from_step``
        (``manager.fork("order-7", from_step=3, new_key="order-7-fix")`` once a bug in step 3
        is fixed). Like DBOS's fork and Temporal's reset: the new execution has the same
        workflow, arguments and task queue, and no parent. It reuses the recorded outcomes of
        the top-level steps ``1 .. from_step - 1`` (the ``#`` column of ``sagaway show``) and
        of the branch steps (``asyncio.gather``, tasks) that ended before step ``from_step``
        started; the rest runs again, under new idempotency keys. ``from_step`` one past the
        last step keeps every step (it runs on from where the source stopped). It is PENDING
        when this returns, and a Worker serving its task queue runs it; wait with ``result()``.

        Raises:
            WorkflowNotFound: no workflow has ``key``.
            WorkflowNotEnded: it has not ended (PENDING, RUNNING, WAITING, or SUSPENDED:
                terminate it first), or a kept step started a child that is still running.
            ForkRefused: the source ran compensations from ``from_step`` on, which may have
                undone the steps the fork keeps; ``force=True`` forks anyway (docs/fork.md).
            WorkflowAlreadyExists: ``new_key`` is taken.
            ValueError: ``from_step`` is out of range, or ``new_key`` is not a valid key.
        """
        engine = self._ref.require()
        record, _ = await engine.fork(
            key, from_step=from_step, new_key=new_key, force=force, reason=reason
        )
        return WorkflowHandle(self._ref, new_key, record.run_id)

    async def plan_fork(self, key: str, *, from_step: int, force: bool = False) -> ForkPlan:
        """What ``fork(key, from_step=..., force=...)`` would keep and run again; writes
        nothing. Raises what ``fork`` raises about the source and ``from_step``."""
        return await self._ref.require().plan_fork(key, from_step=from_step, force=force)

    async def purge(
        self,
        older_than: datetime.timedelta | float,
        *,
        statuses: Collection[WorkflowStatus | str] | None = None,
        batch_size: int = retention_mod.DEFAULT_BATCH,
        dry_run: bool = False,
        on_batch: Callable[[int], None] | None = None,
        reason: str | None = None,
    ) -> int:
        """Delete workflows that ended more than ``older_than`` (a ``timedelta`` or seconds)
        ago, with their steps and signals; returns how many (``dry_run``: how many would be,
        deleting nothing).

        Only ended workflows (COMPLETED, FAILED, CANCELLED, TERMINATED; ``statuses`` narrows
        that; a live status is a ``ValueError``), none a live workflow may still read. It deletes in
        batches of ``batch_size``, each one short transaction, calling ``on_batch(n)`` after
        each, so workers running at the same time are not held up. A purged key can be started
        again: it names a new execution.
        """
        return await self._ref.require().purge(
            purging.as_seconds(older_than, "older_than"),
            statuses=purging.checked_statuses(statuses, batch_size),
            batch_size=batch_size,
            dry_run=dry_run,
            on_batch=on_batch,
            reason=reason,
        )
