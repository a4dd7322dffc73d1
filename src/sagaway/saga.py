"""Saga: compensations registered after each step, run durably in reverse order.

Compensations are activities: each is a durable call (recorded once, replayed on resume) and is
retried until it succeeds, visible in ``describe()`` while it fails. Write them idempotent and
commutative (add the reserved quantity back; never write an old value back), and safe to run for
a step that never happened.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from sagaway import errors
from sagaway._engine import cancel_points, context
from sagaway._engine.executor import current_execution


class Saga:
    """Compensations of the steps done so far, in the order they were added."""

    def __init__(self) -> None:
        self._compensations: list[
            tuple[float, Callable[..., Any] | str, tuple[Any, ...], dict[str, Any]]
        ] = []
        execution = current_execution()
        if execution is not None:
            # Hand-written until used as a block: a cancel delivered at the workflow's end
            # undoes what it holds then.
            execution.cancels.open_sagas.append(self)

    def add_compensation(self, fn: Callable[..., Any] | str, /, *args: Any, **kwargs: Any) -> None:
        """Register ``fn(*args, **kwargs)`` to undo the step just done.

        ``fn`` must be a registered activity (function or name).
        """
        execution = current_execution()
        if execution is not None:
            execution.engine.registry.activity(fn)  # unknown functions fail here, not at undo time
        # Ordered by the completion of the step just done, not by when this line runs: parallel
        # branches reach it in another order on a replay (recorded calls return at once), and
        # the compensations must run in the same order on every run.
        self._compensations.append((context.causal_completion(), fn, args, kwargs))

    @property
    def pending(self) -> int:
        """Compensations registered and not yet run."""
        return len(self._compensations)

    async def execute(self) -> None:
        """Run the compensations in reverse order of completion, each durably, each until it
        succeeds. Activities of the workflow still running in other branches (a gather whose
        other branch failed) are waited for first: a step whose outcome is unknown cannot be
        undone, and one that completes is undone before the steps that completed earlier."""
        execution = current_execution()
        if execution is None:
            raise errors.SagawayError(
                "Saga.execute() runs compensations as durable activities: call it inside a workflow"
            )
        registry = execution.engine.registry
        while True:
            # Activities still running in other branches first: their steps may complete and
            # must then be undone before the steps that completed earlier.
            await execution.settle()
            if not self._compensations:
                break
            self._compensations.sort(key=lambda entry: entry[0])  # stable: ties keep their order
            _, fn, args, kwargs = self._compensations.pop()
            defn = registry.activity(fn)
            call_id, seq = context.next_call_id()
            await execution.call_activity(
                defn,
                args,
                kwargs,
                call_id,
                seq,
                policy=defn.retry,
                timeout=defn.timeout,
                compensation=True,
            )

    compensate = execute

    async def __aenter__(self) -> Saga:
        execution = current_execution()
        if execution is not None and self in execution.cancels.open_sagas:
            execution.cancels.open_sagas.remove(self)  # a block: its own end delivers a cancel
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        execution = current_execution()
        if execution is None or execution.doomed is not None:
            return
        if exc is None:
            if self._compensations:
                # The block's end delivers a pending cancellation: its steps are undone.
                try:
                    await cancel_points.at_saga_end(execution)
                except errors.Cancelled as cancelled:
                    if execution.cancels.by_request(cancelled):
                        await self.execute()
                    raise
            return
        if isinstance(exc, Exception):
            undo = execution.engine.is_completable(exc) or isinstance(
                exc,
                errors.WorkflowCancelled,  # a child it waited for was cancelled
            )
        else:
            undo = execution.cancels.by_request(exc)  # the workflow itself was cancelled
        if undo:
            await self.execute()
