"""What an activity knows about its own execution: ``sagaway.activity_info()``."""

from __future__ import annotations

import contextvars
import dataclasses

from sagaway import errors


@dataclasses.dataclass(frozen=True, slots=True)
class ActivityInfo:
    """The running activity's place in its workflow."""

    workflow_key: str
    """Idempotency key of the workflow (its business key)."""
    run_id: str
    """The workflow execution."""
    activity_name: str
    """Registered name of the activity."""
    call_id: str
    """Position of this call in the workflow, stable across replays ("3", or "2/1" in a branch)."""
    sequence: int
    """Sequence number of this call within its branch of the workflow (1-based)."""
    attempt: int
    """1 for the first attempt, 2 for the first retry, ...; counts every attempt of this call,
    across retries, recoveries and processes (a call retried after its workflow was suspended
    and recovered goes on from the last number). Use it to log, or to change course on late
    attempts; keep ``idempotency_key`` (the same for every attempt) for external systems."""
    idempotency_key: str
    """``<workflow key>/<call id>``: the same for every attempt; pass it to external systems."""
    is_compensation: bool


_current: contextvars.ContextVar[ActivityInfo | None] = contextvars.ContextVar(
    "sagaway_activity", default=None
)


def enter(info: ActivityInfo) -> contextvars.Token[ActivityInfo | None]:
    """Make ``info`` what ``activity_info()`` answers in this context (the engine, around an
    attempt); undo with ``leave``."""
    return _current.set(info)


def leave(token: contextvars.Token[ActivityInfo | None]) -> None:
    _current.reset(token)


def current() -> ActivityInfo | None:
    """The activity being executed in this context, None outside one (never raises)."""
    return _current.get()


def activity_info() -> ActivityInfo:
    """Information about the activity being executed.

    Raises:
        SagawayError: when called outside an activity.
    """
    info = _current.get()
    if info is None:
        raise errors.SagawayError(
            "activity_info() is only available inside a running activity "
            "(a function registered with @manager.register_activity, called from a workflow)"
        )
    return info
