"""``sw.patched`` and ``sw.deprecate_patch``: changing workflow code under running executions.

An execution's history pins the durable calls it made. New code that changes them must let
executions that already passed the changed point take the old path, and the rest the new one.
``patched(change_id)`` decides which, once per execution and point:

- the history has a marker for this change here: this execution took the new path (True);
- the history has another call here: it passed this point on old code (False), and the marker
  takes no call id, so the old calls keep theirs;
- the history ends before this point: the execution reaches it on new code now. A marker step
  is recorded (with the next durable write) and the answer is True from now on.

``deprecate_patch(change_id)``, once no execution can take the old path, stands where the
``patched`` call was: it consumes the marker an execution recorded there, and records nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sagaway._engine import context
from sagaway._engine.cancel_points import marker_here
from sagaway._engine.execution import ReplayFrontier
from sagaway.states import StepKind, StepStatus

if TYPE_CHECKING:
    from sagaway._engine.executor import Execution


def patched(execution: Execution, change_id: str) -> bool:
    """Whether this execution takes the new path of ``change_id`` here (see the module)."""
    call_id, found = marker_here(execution, StepKind.PATCH, change_id)
    if found:
        execution.replayed_ids.add(call_id)
    if found is not None:
        return found  # False: the old code's call is recorded here, the old path
    if execution.replay_only:
        raise ReplayFrontier(call_id)
    context.next_call_id()
    now = execution.engine.clock.now()
    marker = execution._step(
        call_id,
        StepKind.PATCH,
        change_id,
        StepStatus.COMPLETED,
        result="true",
        started_at=now,
        ended_at=now,
    )
    # Written with the next durable action (or the end): a crash before it replays to this
    # point with no marker and no later step, and decides True again.
    execution.recorded[call_id] = marker
    execution.unrecorded.append(marker)
    return True


def deprecate_patch(execution: Execution, change_id: str) -> None:
    """Consume the marker of ``change_id`` if this execution recorded one here."""
    execution._check_usable()
    call_id = context.peek_call_id()
    step = execution.recorded.get(call_id)
    if step is not None and step.kind is StepKind.PATCH and step.name == change_id:
        context.next_call_id()
        execution.replayed_ids.add(call_id)
