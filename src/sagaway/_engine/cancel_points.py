"""Where a pending cancellation is delivered outside a durable call: at the end of an
``async with sw.Saga()`` block, and at the workflow's own end.

A cancel request accepted while the workflow is live must not be lost when no durable call
follows it (it arrived during the last activity). The end of a saga block holding
compensations reads the request from the database, so a request accepted before the block
ended is delivered inside it and the block compensates; the workflow's end is checked by the
statement that ends it (``Store.finish_workflow`` refuses a COMPLETED end over a request the
run has not seen), so a request is either refused (the workflow had ended) or delivered.

A delivery here is recorded as a step of kind ``cancel`` at the next call id, as a patch
marker is: a replay that finds it there delivers the cancellation at the same point, and one
that finds another call there (or nothing, in a replay check) goes on; no call id is taken
when nothing is delivered, so histories recorded before this point existed replay unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sagaway._engine import context
from sagaway.states import StepKind

if TYPE_CHECKING:
    from sagaway._engine.execution import ExecutionBase

SAGA_END = "saga end"
WORKFLOW_END = "workflow end"


def marker_here(execution: ExecutionBase, kind: StepKind, name: str) -> tuple[str, bool | None]:
    """The call id a marker step (``kind``, ``name``: a saga's end, a patch) takes here, and
    whether the history records it there: True (the call id is taken), False (another call is
    recorded there), None (nothing is: the marker is new)."""
    execution._check_usable()
    call_id = context.peek_call_id()
    step = execution.recorded.get(call_id)
    if step is None:
        return call_id, None
    if step.kind is kind and step.name == name:
        context.next_call_id()
        return call_id, True
    return call_id, False


async def at_saga_end(execution: ExecutionBase) -> None:
    """The normal end of a saga block that holds compensations: raise ``Cancelled`` (recorded
    here) if a cancellation is pending, so the block compensates; return if none is."""
    call_id, found = marker_here(execution, StepKind.CANCEL, SAGA_END)
    if found:
        execution._replayed(call_id, StepKind.CANCEL, SAGA_END)  # raises Cancelled
    if found is not None:
        return  # another call is recorded here: it was not delivered here
    if execution.replay_only or execution.cancels.delivered:
        return
    if execution.cancels.pending() is None:
        run_id = execution.record.run_id
        requests = await execution._store_call(execution.engine.cancel_requests([run_id]))
        if run_id not in requests:
            return
        execution.cancels.deliver(requests[run_id])
    await deliver(execution, SAGA_END)


def recorded_at_end(execution: ExecutionBase) -> bool:
    """Whether the history records a cancellation delivered at the workflow's end, at the
    call id its return reaches now: a replay (after a crash that followed the delivery's
    write) delivers it there again, although the run counts the cancellation as seen and
    nothing is pending any more."""
    step = execution.recorded.get(context.peek_call_id())
    return step is not None and step.kind is StepKind.CANCEL and step.name == WORKFLOW_END


async def deliver(execution: ExecutionBase, name: str) -> None:
    """Deliver the pending cancellation at the next call id, as a ``cancel`` step ``name``:
    recorded with the next durable write (the workflow's end, or its saga's first
    compensation) and raised as ``Cancelled``."""
    call_id, _ = context.next_call_id()
    step = execution.recorded.get(call_id)
    if step is not None and step.kind is StepKind.CANCEL and step.name == name:
        execution._replayed(call_id, StepKind.CANCEL, name)  # delivered here before: raises
    now = execution.engine.clock.now()
    await execution.cancels.here(call_id, StepKind.CANCEL, name, now)
