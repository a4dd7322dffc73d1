"""Runs one workflow execution to its end, a suspension, an unload or the loss of its lease.

``Execution`` puts the durable calls together (``activities``, ``waits``, on the shared state of
``execution.ExecutionBase``) and runs the workflow function, turning how it ended into the
execution's next state.
"""

from __future__ import annotations

import asyncio
import logging

from sagaway import errors, events, observe
from sagaway._engine import cancel_points, context
from sagaway._engine.activities import ActivityCalls
from sagaway._engine.execution import Unload, WorkerSlot
from sagaway._engine.waits import WaitCalls
from sagaway.states import ErrorKind, WorkflowStatus
from sagaway.store.base import CancelPending
from sagaway.store.record_copy import changed

__all__ = ["Execution", "WorkerSlot", "current_execution"]

logger = logging.getLogger(__name__)


class Execution(ActivityCalls, WaitCalls):
    """One attempt at running a workflow execution, owned through its lease."""

    async def run(self) -> None:
        """Run the workflow function to its end, a suspension, or loss of ownership."""
        record = self.record
        span = (
            observe.execution(record.name, record.key, record.run_id, record.trace_context)
            if observe.observers
            else observe.NO_SPAN
        )
        try:
            await self._run()
        except BaseException as exc:
            span.end("stopped", exc)  # shut down, or the engine failed (recovery resumes it)
            raise
        span.end(self.outcome)

    async def _run(self) -> None:
        engine = self.engine
        token = context.enter(self)
        try:
            try:
                args, kwargs = self.defn.codec.decode_args(self.record.args)
                value = await self.defn.fn(*args, **kwargs)
            except errors.Cancelled as exc:
                if self.cancels.by_request(exc):
                    await self._cancelled(exc)
                return  # else ownership lost or ended by request; the new owner carries on
            except Unload:
                await self._unloaded()
                return
            except asyncio.CancelledError:
                if self.cancel_requested:
                    return
                raise
            except Exception as exc:
                await self._raised(exc)
                return
            if self.unloading:
                # Returned although a branch unwound to wait (code swallowed the unwinding):
                # the lease is given up and nothing more may be written.
                await self._unloaded()
                return
            if self.doomed is not None:
                await self._suspend(self.doomed)
                return
            if self.cancels.pending() is not None or cancel_points.recorded_at_end(self):
                # Known here already, or delivered at the end before a crash: ends CANCELLED.
                await self._cancel_at_end()
                return
            try:
                result = self.defn.codec.encode_result(value, engine.payload_limit)
            except errors.PayloadError as exc:
                await self._suspend(exc)
                return
            try:
                await self._finish(WorkflowStatus.COMPLETED, result, None)
            except CancelPending as pending:
                # Accepted while the last steps ran, unseen: the end delivers it.
                self.cancels.deliver(pending.reason)
                await self._cancel_at_end()
        except (errors.LeaseLost, errors.Cancelled):
            self.outcome = "lease_lost"
            if observe.observers:
                observe.lease_lost(self.record.name, self.key)
            logger.info(
                "lost ownership of workflow %s; another worker continues it",
                self.key,
                extra={"action": "lease_lost", "workflow_id": self.key},
            )
        finally:
            # Whatever ended it, a branch still running now is left over (``gather`` does not
            # cancel siblings when one fails): nothing it starts could be recorded.
            self.stopped = True
            context.leave(token)

    async def _raised(self, exc: Exception) -> None:
        """The workflow function raised ``exc``: end, suspend or leave the run accordingly."""
        if self.unloading:
            # Code caught the unwinding (``gather(return_exceptions=True)``) and raised
            # something else: the wait is what counts.
            await self._unloaded()
        elif self.doomed is not None:
            await self._suspend(self.doomed)
        elif self.engine.is_completable(exc):
            await self._finish(
                WorkflowStatus.FAILED, None, self._describe(exc, ErrorKind.COMPLETABLE)
            )
        elif isinstance(exc, errors.WorkflowCancelled):
            # A child it waited for was cancelled or terminated: the parent ends too (after
            # its Saga compensated), instead of replaying that end forever.
            await self._finish(
                WorkflowStatus.CANCELLED, None, self._describe(exc, ErrorKind.CANCELLED)
            )
        else:
            await self._suspend(exc)

    async def _cancel_at_end(self) -> None:
        """The workflow returned with a cancellation pending: it is delivered at its end (a
        ``cancel`` step), and it ends CANCELLED; its result is dropped."""
        self.finishing = False  # a refused end: it ends now, as cancelled
        try:
            await cancel_points.deliver(self, cancel_points.WORKFLOW_END)
        except errors.Cancelled as exc:
            # Hand-written sagas still holding compensations are undone, newest first.
            for saga in reversed(self.cancels.open_sagas):
                if saga.pending:
                    await saga.execute()
            await self._cancelled(exc)

    async def _cancelled(self, exc: errors.Cancelled) -> None:
        """The delivered cancellation left the workflow (after its Saga compensated)."""
        if self.doomed is not None:
            await self._suspend(self.doomed)  # a compensation failed for good: not an end
            return
        error = errors.WorkflowCancelled(self.key, WorkflowStatus.CANCELLED.value, str(exc))
        await self._finish(
            WorkflowStatus.CANCELLED, None, self._describe(error, ErrorKind.CANCELLED)
        )

    async def _unloaded(self) -> None:
        """WAITING was committed with the wait, the lease given up: the wait's end re-runs it.
        Or it was paused: what finished is written and the lease given up here."""
        if self.cancels.pause_delivered:
            await self.flush()
            await self.engine.release(self.record.run_id, self.lease.token)
            self.outcome = "paused"
            logger.info(
                "workflow %s paused; it runs on when resumed",
                self.key,
                extra={"action": "workflow_paused", "workflow_id": self.key},
            )
            return
        self.outcome = "waiting"
        self.engine.channel.publish(events.WorkflowWaiting(self.record.run_id, self.key))

    async def _finish(self, status: WorkflowStatus, result: str | None, error: str | None) -> None:
        engine = self.engine
        self.finishing = True
        async with self._flush_lock:
            final_step = self.unrecorded.pop() if self.unrecorded else None
            try:
                await self._write_pending()  # more than one: parallel branches ended together
                now = engine.clock.now()
                await self._store_call(
                    engine.store.finish_workflow(
                        self.record.run_id,
                        token=self.lease.token,
                        status=status,
                        result=result,
                        error=error,
                        now=now,
                        final_step=final_step,
                        has_parent=self.record.parent_key is not None,
                        cancel_seen=self.cancels.delivered,
                    ),
                    answers=(CancelPending,),  # the end refused: delivered at the end
                )
            except BaseException:
                # Not known to be written (a cancelled write may have been aborted): the last
                # outcome stays pending, so a shutdown flush still records it. If the end did
                # commit, that fenced write is refused harmlessly.
                if final_step is not None:
                    self.unrecorded.append(final_step)
                raise
        logger.debug(
            "workflow %s %s",
            self.key,
            status.value,
            extra={"action": "workflow_ended", "workflow_id": self.key, "status": status.value},
        )
        # Only result() reads it (here, and from the recent ends, which never keep arguments).
        ended = changed(
            self.record,
            args="",
            status=status,
            result=result,
            error=error,
            ended_at=now,
            updated_at=now,
            lease_owner=None,
            lease_expires_at=None,
            next_run_at=None,
        )
        engine.remember_end(ended)
        engine.channel.publish(events.WorkflowEnded(self.record.run_id, self.key, status, ended))
        if self.record.parent_key is not None:
            # Its parent (and any other waiter) may have unloaded to wait and is due now; a
            # store without notices would leave it to the next poll.
            engine.wake_recovery()
        self.outcome = status.value.lower()
        if observe.observers:
            observe.workflow_ended(self.record.name, self.key, status.value)

    async def _suspend(self, exc: BaseException) -> None:
        engine = self.engine
        await self.flush()  # what did finish stays done
        error = self._describe(exc, ErrorKind.INCOMPLETABLE)
        now = engine.clock.now()
        delay = engine.suspend_backoff.interval(self.record.suspend_count + 1)
        await engine.store.suspend_workflow(
            self.record.run_id,
            token=self.lease.token,
            error=error,
            now=now,
            next_run_at=now + delay,
        )
        logger.warning(
            "workflow %s suspended by %s: %s; recovery retries it in %.1fs",
            self.key,
            type(exc).__name__,
            exc,
            delay,
            extra={"action": "workflow_suspended", "workflow_id": self.key},
        )
        engine.channel.publish(events.WorkflowSuspended(self.record.run_id, self.key, error))
        self.outcome = "suspended"
        if observe.observers:
            observe.workflow_suspended(self.record.name, self.key)


def current_execution() -> Execution | None:
    """The execution whose workflow code runs in this task (None outside a workflow)."""
    owner = context.current_owner()
    return owner if isinstance(owner, Execution) else None
