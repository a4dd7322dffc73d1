"""Workflow and step states, and what a start does on a key in use.

A leaf: it imports nothing of the package, so the stores, the engine and the public API can
all share these names without depending on one another.
"""

from __future__ import annotations

import enum
from collections.abc import Collection


class WorkflowStatus(enum.StrEnum):
    """Where a workflow execution stands. A paused workflow keeps its status (its
    ``describe().paused`` says it is held; docs/pause.md)."""

    PENDING = "PENDING"
    """Started, not yet picked up by a worker."""
    RUNNING = "RUNNING"
    """A worker owns it and runs it."""
    WAITING = "WAITING"
    """Waiting for a signal or a timer; no worker holds it."""
    SUSPENDED = "SUSPENDED"
    """Stopped by an incompletable error; the Recovery Worker retries it later."""
    COMPLETED = "COMPLETED"
    """Returned a result."""
    FAILED = "FAILED"
    """Ended by a completable (business) error."""
    CANCELLED = "CANCELLED"
    """Cancelled on request."""
    TERMINATED = "TERMINATED"
    """Replaced by a new execution (OnConflict.TERMINATE_EXISTING) or terminated by an operator."""

    @property
    def ended(self) -> bool:
        """Whether this is a final status."""
        return self in ENDED


ENDED = frozenset(
    {
        WorkflowStatus.COMPLETED,
        WorkflowStatus.FAILED,
        WorkflowStatus.CANCELLED,
        WorkflowStatus.TERMINATED,
    }
)


def ended_statuses(
    statuses: Collection[WorkflowStatus | str] | None,
) -> list[WorkflowStatus]:
    """The ended statuses named by ``statuses`` (names in any case), sorted; None: all of them.

    What may be purged: ``ValueError`` for an unknown status, a live one, or none at all.
    """
    if statuses is None:
        return sorted(ENDED)
    if isinstance(statuses, str):
        raise TypeError("statuses must be a collection of statuses, not one string")
    known = {s.value for s in WorkflowStatus}
    chosen: set[WorkflowStatus] = set()
    for status in statuses:
        name = status.value if isinstance(status, WorkflowStatus) else str(status).strip().upper()
        if name not in known:
            raise ValueError(f"unknown status {status!r}; use {', '.join(sorted(known))}")
        chosen.add(WorkflowStatus(name))
    live = sorted(s.value for s in chosen if not s.ended)
    if live:
        raise ValueError(
            f"only ended workflows can be purged ({', '.join(sorted(ENDED))}), "
            f"not {', '.join(live)}"
        )
    if not chosen:
        raise ValueError("no status given to purge")
    return sorted(chosen)


class StepStatus(enum.StrEnum):
    """Outcome of one durable call."""

    COMPLETED = "COMPLETED"
    """Returned a result, recorded."""
    FAILED = "FAILED"
    """Raised a completable error, recorded; replay raises it again."""
    RETRYING = "RETRYING"
    """Failed an attempt and will be tried again."""
    ERROR = "ERROR"
    """Failed with an incompletable error; the workflow was suspended and will run it again."""
    WAITING = "WAITING"
    """A signal receive the workflow is waiting on (``ended_at`` is its deadline)."""


class StepKind(enum.StrEnum):
    """What a durable call was."""

    ACTIVITY = "activity"
    COMPENSATION = "compensation"
    CHILD = "child"
    """Start of a child workflow (result: the child's key)."""
    CHILD_RESULT = "child_result"
    """Waiting for a child workflow's result."""
    SIGNAL = "signal"
    SLEEP = "sleep"
    PATCH = "patch"
    """A marker: this execution reached ``sw.patched(name)`` on code that has the change."""
    UPDATE = "update"
    """An update's answer: the handler's result (or completable error), named
    ``<update name>:<update id>``; its acceptance is the ``signal`` step before it."""
    PUBLISH = "publish"
    """Events, stream items or search attributes the workflow published (``sw.set_event``,
    ``sw.write_stream``, ``sw.set_search_attributes``): recorded with what it wrote, once."""
    CANCEL = "cancel"
    """Where a cancellation was delivered outside a durable call: the end of a ``Saga``
    block (name ``saga end``) or of the workflow (``workflow end``)."""


class ErrorKind(enum.StrEnum):
    """What a recorded error meant: the ``kind`` of an error record (workflow or step)."""

    COMPLETABLE = "completable"
    """A business error that ended the workflow FAILED."""
    FAILED = "failed"
    """An activity's business error, raised in the workflow (which may catch it)."""
    RETRYING = "retrying"
    """An activity attempt's retryable failure; another attempt follows."""
    ERROR = "error"
    """An activity's incompletable failure (retries exhausted included)."""
    INCOMPLETABLE = "incompletable"
    """What suspended the workflow."""
    TIMEOUT = "timeout"
    """A signal that did not arrive within its timeout."""
    CANCELLED = "cancelled"
    """The workflow (or a child it waited for) was cancelled."""
    TERMINATED = "terminated"
    """The workflow was terminated or replaced."""
    UNREADABLE = "unreadable"
    """A stored error record that could not be read back."""


class OnConflict(enum.Enum):
    """What a start does when its idempotency key is already in use."""

    ATTACH = "attach"
    """Return the existing execution (a client retry joins it). Default."""
    FAIL = "fail"
    """Raise ``WorkflowAlreadyExists``."""
    TERMINATE_EXISTING = "terminate_existing"
    """Terminate the live execution and start anew under the key."""


def statuses_named(
    status: str | Collection[str] | None,
) -> WorkflowStatus | list[WorkflowStatus] | None:
    """A status filter as given (``"FAILED"`` or ``WorkflowStatus.FAILED``, one or several)
    as statuses; ValueError names an unknown one."""
    if status is None:
        return None
    if isinstance(status, str):
        return WorkflowStatus(status)
    return [WorkflowStatus(s) for s in status]
