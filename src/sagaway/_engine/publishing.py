"""Publishing from a workflow: events, stream items and search attributes, each a durable step.

A publishing call takes the next call id like any durable call. Run for the first time, it
flushes the outcomes not written yet (what it publishes may describe them), then writes its step
and what it publishes in one fenced transaction (``Store.publish``); replayed, it finds its step
and writes nothing. So a reader sees each item once, in the order the workflow made them, and a
workflow resumed after a crash neither repeats nor loses one: what it published before the crash
is recorded with its step, and what it had not published yet is published when the replay
reaches it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sagaway import events
from sagaway._engine import context
from sagaway._engine.execution import engine_code
from sagaway.states import StepKind, StepStatus
from sagaway.store.records import OutputWrite, Publication, SearchAttribute

if TYPE_CHECKING:
    from sagaway._engine.executor import Execution


@engine_code  # tasks the store creates meanwhile are not workflow branches
async def publish(
    execution: Execution,
    name: str,
    outputs: Sequence[OutputWrite] = (),
    attributes: Sequence[SearchAttribute] = (),
) -> None:
    """The durable call that publishes ``outputs`` and ``attributes`` (``name``: its step's
    name, as replays check it)."""
    execution._check_usable()
    call_id, _ = context.next_call_id()
    previous = execution._replayed(call_id, StepKind.PUBLISH, name)
    if previous is not None:  # published before this run: recorded with its step
        # Its place in completion order, as a recorded activity's: branch numbering and the
        # order of compensations are rebuilt from it on every replay.
        context.note_completion(previous.ended_at or 0.0)
        return
    await execution._before_durable_action()
    engine = execution.engine
    now = engine.clock.now()
    ended = execution.completion_time()
    step = execution._step(
        call_id, StepKind.PUBLISH, name, StepStatus.COMPLETED, started_at=now, ended_at=ended
    )
    context.note_completion(ended)
    publication = Publication(step=step, outputs=tuple(outputs), attributes=tuple(attributes))
    await execution._store_call(
        engine.store.publish(publication, token=execution.lease.token, now=now)
    )
    execution.recorded[call_id] = step
    # Readers in this process look at once; other processes hear the store's notice.
    engine.channel.publish(events.WorkflowChanged(execution.record.run_id))
