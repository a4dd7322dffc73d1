"""How an execution's activity attempts get into a cluster-wide queue (see ``cluster_limits``):
admitted before each attempt, or waiting for it without holding the workflow's lease."""

from __future__ import annotations

import contextlib
import uuid
from typing import TYPE_CHECKING

from sagaway._engine.execution import ExecutionBase
from sagaway.states import StepKind
from sagaway.store._queue_limits import waiting_for

if TYPE_CHECKING:
    from sagaway._engine.cluster_limits import ClusterLimit
    from sagaway.registry import ActivityDef


class QueueAdmission(ExecutionBase):
    """How an execution's activity attempts get into a cluster-wide queue."""

    async def _admitted(
        self,
        limit: ClusterLimit,
        defn: ActivityDef,
        kind: StepKind,
        call_id: str,
        started_at: float,
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """A slot of ``limit`` (the cluster limit of ``defn``'s queue) for the next attempt, to
        hold while it runs; waits (or unloads the workflow) until one is given."""
        holder = f"{self.lease.token}:{call_id}:{uuid.uuid4().hex[:8]}"
        while True:
            retry_at = await self._store_call(limit.admit(holder))
            if retry_at is None:
                return limit.holding(holder)
            # A compensation is never unloaded midway: it waits in the worker.
            if kind is StepKind.ACTIVITY and self.inflight == 1:
                await self._unload_for_queue(limit.name, retry_at)
            with self._waiting_here():
                await self.engine.clock.sleep(
                    self.until_cancel(max(retry_at - self.engine.clock.now(), 0.0))
                )
            self._check_usable()
            if kind is StepKind.ACTIVITY:
                await self._cancel_here(call_id, kind, defn.name, started_at)

    async def _unload_for_queue(self, queue: str, retry_at: float) -> None:
        """Commit WAITING until ``retry_at`` and unload (raises Unload), unless other work
        began meanwhile (then returns)."""
        await self._before_durable_action()
        if self.inflight != 1:
            return
        await self._wait(waiting_for=waiting_for(queue), next_run_at=retry_at, step=None)
