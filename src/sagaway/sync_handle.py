"""``SyncWorkflowHandle``: a workflow execution for synchronous code, from ``SyncClient``
(``sagaway.sync`` re-exports it). Each method hands the async handle's call to the client's
loop thread and waits for its outcome."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar, Unpack

from sagaway.states import WorkflowStatus
from sagaway.updates import UpdateOptions, UpdateResult
from sagaway.workflow import WorkflowDescription, WorkflowHandle

R = TypeVar("R")
T = TypeVar("T")

DEFAULT_CALL_TIMEOUT = 60.0
"""Seconds a blocking call other than a result wait may take (opening, starting, signalling)."""


class Caller(Protocol):
    """What a handle uses of its ``SyncClient``: running a call on the client's loop thread."""

    call_timeout: float | None

    def _call(self, make: Callable[[], Awaitable[T]]) -> T: ...

    def _call_within(self, make: Callable[[], Awaitable[T]], limit: float | None) -> T: ...


class SyncWorkflowHandle(Generic[R]):
    """A workflow execution, for synchronous code (from ``SyncClient``)."""

    def __init__(self, client: Caller, handle: WorkflowHandle[R]) -> None:
        self._client = client
        self._handle = handle

    def __repr__(self) -> str:
        return f"SyncWorkflowHandle(key={self.key!r})"

    @property
    def key(self) -> str:
        return self._handle.key

    @property
    def run_id(self) -> str | None:
        """The execution this handle was started for (None: whatever is current under key)."""
        return self._handle.run_id

    def result(self, timeout: float | None = None) -> R:
        """Wait until the workflow ends: its result, or its error raised (see
        ``WorkflowHandle.result``); ``TimeoutError`` after ``timeout`` seconds."""
        handle = self._handle
        call_timeout = self._client.call_timeout
        # The engine bounds the wait; the margin only covers the hand-over between threads.
        wait = None if timeout is None else timeout + (call_timeout or DEFAULT_CALL_TIMEOUT)
        return self._client._call_within(lambda: handle.result(timeout), wait)

    def status(self) -> WorkflowStatus:
        handle = self._handle
        return self._client._call(handle.status)

    def describe(self) -> WorkflowDescription:
        """The execution with its steps, attempts, errors and signals."""
        handle = self._handle
        return self._client._call(handle.describe)

    def cancel(self, reason: str = "cancelled by request") -> bool:
        """Ask the workflow to cancel (it compensates); False if it had already ended."""
        handle = self._handle
        return self._client._call(lambda: handle.cancel(reason))

    def update(
        self, name: str, payload: Any = None, **options: Unpack[UpdateOptions]
    ) -> UpdateResult:
        """Send update ``name`` and wait for the workflow's answer (``WorkflowHandle.update``);
        ``sw.UpdateRejected`` with the validator's reason."""
        handle = self._handle
        timeout = options.get("timeout")
        wait = None if timeout is None else timeout + (self._client.call_timeout or 0.0) + 5.0
        return self._client._call_within(lambda: handle.update(name, payload, **options), wait)

    def pause(self, reason: str = "paused by request") -> bool:
        """Pause the workflow (``WorkflowHandle.pause``); False if it has ended."""
        handle = self._handle
        return self._client._call(lambda: handle.pause(reason))

    def resume(self, reason: str = "resumed by request") -> bool:
        """Resume a paused workflow; False if it was not paused."""
        handle = self._handle
        return self._client._call(lambda: handle.resume(reason))
