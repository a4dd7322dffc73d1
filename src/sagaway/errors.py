"""Sagaway's exceptions.

Errors raised by user code tell the engine what a failure means::

    Exception
     ├── CompletableError      expected business failure: the activity/workflow completes as FAILED
     ├── RetryableError        transient: retried by the activity's RetryPolicy
     ├── IncompletableError    stop without completing; the Recovery Worker retries later
     └── SagawayError          raised by the engine itself
          ├── WorkflowAlreadyExists   a start with OnConflict.FAIL found the key in use
          ├── WorkflowNotFound        no workflow has this key
          ├── NotRegistered           a function or name is not registered with the Manager
          ├── AlreadyRegistered       two functions registered under one name
          ├── NonDeterminismError     the workflow code no longer matches its recorded history
          ├── PayloadError            a payload cannot be encoded/decoded, or is too large
          ├── SignalTimeout           a signal did not arrive within its timeout
          ├── UpdateRejected          a workflow's validator refused an update (or its payload)
          ├── IdempotencyConflict     the same key was used with different arguments
          ├── ActivityTimeout         an activity attempt ran past its timeout
          ├── ActivityAborted         an activity raised a BaseException (sys.exit(), ...)
          ├── RetriesExhausted        a RetryableError persisted through every attempt
          ├── LeaseLost               another process owns the workflow now (internal fencing)
          ├── WorkflowCancelled       result() of a cancelled or terminated workflow
          ├── WorkflowNotEnded        an operation on ended workflows (fork) met a live one
          ├── ForkRefused             a fork would reuse outcomes compensations may have undone
          ├── CorruptRecord           a database row holds a value this version cannot read
          ├── EngineUnavailable       the database or Engine Server did not answer (a client
          │                           call gave up after riding through the outage)
          └── ManagerStateError       the Manager was used in the wrong lifecycle state
    BaseException
     └── Cancelled             cancelled or terminated; workflow code must not swallow it

Every other exception raised by user code counts as incompletable.
"""

from __future__ import annotations

import json
from typing import Any


class CompletableError(Exception):
    """An expected business failure; the activity or workflow completes as FAILED."""

    def __init__(self, message: str = "", code: str | None = None, **details: Any) -> None:
        super().__init__(message or (type(self).__doc__ or "").strip())
        self.message: str = message or (type(self).__doc__ or "").strip()
        self.code = code
        self.details: dict[str, Any] = dict(details)

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}" if self.code else self.message


class RetryableError(Exception):
    """A transient failure; the engine retries the activity with backoff."""


class IncompletableError(Exception):
    """A failure that must not complete the workflow; it is suspended and retried by recovery."""


class SagawayError(Exception):
    """An error raised by the Sagaway engine."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message or (type(self).__doc__ or "").strip())


class WorkflowAlreadyExists(SagawayError):
    """A workflow with this key already exists."""

    def __init__(self, key: str, status: str, message: str = "") -> None:
        super().__init__(
            message
            or f"workflow {key!r} already exists (status {status}); "
            "use OnConflict.ATTACH to join it or a new idempotency key to start another"
        )
        self.key = key
        self.status = status


class WorkflowNotFound(SagawayError):
    """No workflow has this key."""

    def __init__(self, key: str, message: str = "") -> None:
        super().__init__(message or f"no workflow with key {key!r}")
        self.key = key


class ScheduleNotFound(SagawayError):
    """No schedule has this id."""

    def __init__(self, schedule_id: str) -> None:
        super().__init__(f"no schedule with id {schedule_id!r}")
        self.schedule_id = schedule_id


class WorkflowNotEnded(SagawayError):
    """The workflow has not ended; this operation needs an ended one."""

    def __init__(self, key: str, status: str, message: str = "") -> None:
        super().__init__(message or f"workflow {key!r} has not ended (status {status})")
        self.key = key
        self.status = status


class ForkRefused(SagawayError):
    """A fork would reuse outcomes that compensations the source ran may have undone.

    ``compensations`` are the call ids of the source's compensation steps the fork drops;
    ``force=True`` (``sagaway fork --force``) forks anyway.
    """

    def __init__(
        self, key: str, from_step: int, compensations: tuple[str, ...], message: str = ""
    ) -> None:
        super().__init__(
            message
            or f"workflow {key!r} ran compensations (steps {', '.join(compensations)}) that a "
            f"fork from step {from_step} drops"
        )
        self.key = key
        self.from_step = from_step
        self.compensations = compensations


class NotRegistered(SagawayError):
    """The function or name is not registered with this Manager."""


class AlreadyRegistered(SagawayError):
    """Another function is already registered under this name."""


class NonDeterminismError(SagawayError):
    """The workflow code no longer matches the history recorded for it.

    ``call_id`` is the durable call where they part, ``recorded`` what its history holds
    there (``activity 'charge'``) and ``requested`` what the code asked for instead.
    """

    def __init__(
        self,
        message: str,
        *,
        call_id: str | None = None,
        recorded: str | None = None,
        requested: str | None = None,
    ) -> None:
        super().__init__(message)
        self.call_id = call_id
        self.recorded = recorded
        self.requested = requested


class PayloadError(SagawayError):
    """A payload cannot be serialised, deserialised, or exceeds the size limit."""


class PayloadKeyError(PayloadError):
    """A stored payload is sealed by a codec (``sagaway.codecs``) this process cannot open: its
    key id is not among the configured keys, the process's codec lacks one of the codecs that
    sealed it (the message names each), or the data was altered. ``key_id``: the payload's."""

    def __init__(self, message: str, key_id: str | None = None) -> None:
        super().__init__(message)
        self.key_id = key_id


class SignalTimeout(SagawayError):
    """The signal did not arrive within the timeout."""


class UpdateRejected(SagawayError):
    """The workflow refused the update: its validator (or the payload's type) rejected it."""

    def __init__(self, key: str, name: str, update_id: str, reason: str) -> None:
        super().__init__(f"update {name!r} ({update_id}) of workflow {key!r} rejected: {reason}")
        self.key = key
        self.name = name
        self.update_id = update_id
        self.reason = reason


class IdempotencyConflict(SagawayError):
    """The idempotency key is already used by a workflow with different arguments."""


class ActivityTimeout(SagawayError):
    """An activity attempt ran longer than its timeout."""


class ActivityAborted(SagawayError):
    """An activity raised a BaseException (SystemExit, KeyboardInterrupt, CancelledError, ...).

    Left alone it would stop the worker process (or make the workflow run again in a loop), so
    the engine records it, with the original as ``__cause__``, as the activity's incompletable
    error: the workflow is suspended and the process keeps serving the others.
    """


class RetriesExhausted(SagawayError):
    """An activity failed with a retryable error on every allowed attempt."""


class LeaseLost(SagawayError):
    """This process no longer owns the workflow execution (another took it over, or it ended)."""

    def __init__(self, run_id: str, message: str | None = None) -> None:
        """``LeaseLost(run_id)`` says "lost ownership of run <run_id>"; ``message`` replaces it."""
        super().__init__(message or f"lost ownership of run {run_id}")
        self.run_id = run_id
        """The execution whose lease was lost."""

    def __reduce__(self) -> tuple[type[LeaseLost], tuple[str, str]]:
        return type(self), (self.run_id, str(self))


class ManagerStateError(SagawayError):
    """The Manager is not in a state that allows this operation."""


class CorruptRecord(SagawayError):
    """A database row holds a value this version of Sagaway cannot read.

    Raised for that row only (the rest of the database keeps being served): ``what`` names the
    row (workflow key or run id, step call id), ``field`` the column and ``value`` what it holds.
    """

    def __init__(self, what: str, field: str, value: Any, hint: str = "") -> None:
        message = f"{what}: column {field!r} holds {value!r}, which this version cannot read"
        super().__init__(message + (f"; {hint}" if hint else ""))
        self.what = what
        self.field = field
        self.value = value


class EngineUnavailable(SagawayError):
    """The database or the Engine Server could not be reached.

    A client call (a start, a signal with a ``dedupe_id``, a cancel, ``result()``, a read of a
    workflow) that meets an outage tries again until it has lasted the Manager's
    ``unavailable_timeout`` (30 s by default), then raises this; its message says what was
    unreachable and for how long. ``waited``: seconds without an answer (None: not measured,
    the call was not tried again).
    """

    def __init__(self, message: str = "", *, waited: float | None = None) -> None:
        super().__init__(message)
        self.waited = waited


class Cancelled(BaseException):
    """The workflow was cancelled or terminated.

    Derives from BaseException so that ``except Exception`` in workflow code cannot swallow it.
    """


class WorkflowCancelled(SagawayError):
    """The workflow was cancelled or terminated before it produced a result."""

    def __init__(self, key: str, status: str, reason: str = "") -> None:
        prefix = f"workflow {key!r} ended {status}"
        if key and not reason.startswith(prefix):  # a recorded reason may be this message
            reason = prefix + (f": {reason}" if reason else "")
        super().__init__(reason)
        self.key = key
        self.status = status


def error_record(kind: str, type_name: str, message: str, **extra: str) -> str:
    """The JSON of an error as the database records it: what it meant (``kind``, an
    ``ErrorKind``), its type and message, and ``extra`` fields (traceback, marshaled data).
    The one encoder of error records: the engine and the stores write them through it."""
    return json.dumps({"kind": str(kind), "type": type_name, "message": message, **extra})
