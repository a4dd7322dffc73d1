"""How an execution's activity attempts get into a cluster-wide queue (see ``cluster_limits``)
and past pauses of their activity or queue (see ``pausing``): admitted before each attempt, or
waiting for it without holding the workflow's lease."""

from __future__ import annotations

import contextlib
import uuid
from typing import TYPE_CHECKING, Protocol

from sagaway import errors
from sagaway._engine import pausing
from sagaway._engine.execution import ExecutionBase
from sagaway.clock import wait_event_or_sleep
from sagaway.states import StepKind
from sagaway.store import _pauses
from sagaway.store._queue_limits import waiting_for

if TYPE_CHECKING:
    from sagaway._engine.cluster_limits import ClusterLimit
    from sagaway.registry import ActivityDef


class _CallId(Protocol):
    @property
    def call_id(self) -> str: ...


class QueuedCall(Protocol):
    """What the line and the pause checks read of an activity call being made."""

    @property
    def defn(self) -> ActivityDef: ...
    @property
    def kind(self) -> StepKind: ...
    @property
    def info(self) -> _CallId: ...
    @property
    def started_at(self) -> float: ...
    @property
    def priority(self) -> int: ...


class QueueAdmission(ExecutionBase):
    """How an execution's activity attempts get into a cluster-wide queue."""

    async def _admitted(
        self, limit: ClusterLimit, call: QueuedCall
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """A slot of ``limit`` (the cluster limit of the call's queue) for its next attempt, to
        hold while it runs; waits (or unloads the workflow) until one is given. While it waits
        the call is in the queue's line (its run and call id, at its priority), which a replay
        after an unload or a takeover rejoins at the same place."""
        call_id = call.info.call_id
        holder = f"{self.lease.token}:{call_id}:{uuid.uuid4().hex[:8]}"
        try:
            return await self._in_line(limit, call, holder)
        except errors.Cancelled:  # it waits no more; an unload or a takeover keeps its place
            await limit.leave(self.record.run_id, call_id)
            raise

    async def _leave_line(self, defn: ActivityDef, call_id: str) -> None:
        """A call of ``defn`` cancelled before it asked again: out of its queue's line."""
        limit = self.engine.cluster_limit(defn.queue)
        if limit is not None:
            await limit.leave(self.record.run_id, call_id)

    async def _in_line(
        self, limit: ClusterLimit, call: QueuedCall, holder: str
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """``_admitted``'s loop: ask until admitted."""
        kind = call.kind
        waiter = (self.record.run_id, call.info.call_id, call.priority)
        while True:
            retry_at = await self._store_call(limit.admit(holder, waiter))
            if retry_at is None:
                return limit.holding(holder)
            # A compensation is never unloaded midway: it waits in the worker.
            if kind is StepKind.ACTIVITY and self.inflight == 1:
                await self._unload_for_queue(limit.name, retry_at)
            with self._waiting_here():
                await self.engine.clock.sleep(
                    self.cancels.until(max(retry_at - self.engine.clock.now(), 0.0))
                )
            self._check_usable()
            if kind is StepKind.ACTIVITY:
                await self.cancels.here(call.info.call_id, kind, call.defn.name, call.started_at)

    async def _unload_for_queue(self, queue: str, retry_at: float) -> None:
        """Commit WAITING until ``retry_at`` and unload (raises Unload), unless other work
        began meanwhile (then returns)."""
        await self._before_durable_action()
        if self.inflight != 1:
            return
        await self._wait(waiting_for=waiting_for(queue), next_run_at=retry_at, step=None)

    async def _past_pauses(self, call: QueuedCall) -> None:
        """Return once neither the call's activity nor its queue is paused. Held back, no
        attempt begins (none of the retry policy's is used): the workflow is unloaded if this
        call is all it does (WAITING until a resume wakes it), else this branch waits in the
        worker."""
        engine, defn, kind = self.engine, call.defn, call.kind
        while engine.paused_calls.holding(defn.name, defn.queue) is not None:
            # Read again: this process may have missed the resume that made the run due.
            await self._store_call(pausing.refresh(engine))
            held = engine.paused_calls.holding(defn.name, defn.queue)
            if held is None:
                return
            # A compensation is never unloaded midway: it waits in the worker.
            if kind is StepKind.ACTIVITY and self.inflight == 1:
                await self._before_durable_action()
                if self.inflight == 1:
                    await self._wait(
                        waiting_for=_pauses.waiting_for(*held),
                        next_run_at=engine.clock.now() + pausing.RECHECK,
                        step=None,
                    )
            with self._waiting_here():
                await wait_event_or_sleep(
                    engine.paused_calls.changed,
                    engine.clock,
                    self.cancels.until(pausing.RECHECK),
                )
            self._check_usable()
            if kind is StepKind.ACTIVITY:
                await self.cancels.here(call.info.call_id, kind, defn.name, call.started_at)
