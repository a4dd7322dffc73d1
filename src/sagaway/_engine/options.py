"""The engine's settings: one frozen record, checked once, read by the Manager and the Engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from sagaway import serialization
from sagaway._engine import audit, versions
from sagaway.registry import Queue


@dataclasses.dataclass(frozen=True, slots=True)
class EngineOptions:
    """How the engine of one Manager behaves (see ``Manager`` for what each setting means)."""

    recovery_interval: float = 10.0
    lease_timeout: float = 30.0
    poll_interval: float = 1.0
    activity_threads: int = 32
    payload_limit: int = serialization.DEFAULT_PAYLOAD_LIMIT
    marshaler: serialization.ErrorMarshaler = dataclasses.field(
        default_factory=serialization.DefaultErrorMarshaler
    )
    queues: Mapping[str, Queue] = dataclasses.field(default_factory=dict)
    code_version: str | None = None
    """The version of the application code: recorded on every execution created here."""
    unavailable_timeout: float = 30.0
    """Seconds a client call rides through an outage of the database or the Engine Server
    before ``EngineUnavailable`` (0: at once; see ``_engine.outages``)."""
    deadline_grace: float = 5.0
    """Seconds an activity attempt may run past its workflow's deadline before it is cancelled
    (see docs/cancellation.md)."""
    audit: str = "operator"
    """What goes in the audit trail: the operator verbs (``operator``), or also every start
    and signal made outside a workflow (``all``: the command line and the console)."""

    def __post_init__(self) -> None:
        for label, value in (
            ("recovery_interval", self.recovery_interval),
            ("lease_timeout", self.lease_timeout),
            ("poll_interval", self.poll_interval),
            ("deadline_grace", self.deadline_grace),
        ):
            if not value > 0:
                raise ValueError(f"{label} must be > 0 seconds, got {value!r}")
        budget = self.unavailable_timeout
        if isinstance(budget, bool) or not isinstance(budget, (int, float)):
            raise TypeError(
                f"unavailable_timeout must be a number of seconds, not {type(budget).__name__}"
            )
        if not 0 <= budget < float("inf"):
            raise ValueError(
                f"unavailable_timeout must be a finite number of seconds >= 0, got {budget!r}"
            )
        if self.activity_threads < 1:
            raise ValueError("activity_threads must be >= 1")
        if self.payload_limit < 1024:
            raise ValueError("payload_limit must be at least 1024 bytes")
        if not isinstance(self.marshaler, serialization.ErrorMarshaler):
            raise TypeError(
                "error_marshaler must implement marshal_completable_error(err) -> bytes | None "
                "and unmarshal_completable_error(data) -> BaseException"
            )
        if self.code_version is not None:
            versions.check_code_version(self.code_version)
        audit.check_mode(self.audit)
        for name, queue in self.queues.items():
            if not isinstance(queue, Queue):
                raise TypeError(f"queues[{name!r}] must be a sagaway.Queue")


def check_deadline(deadline: float | None, name: str = "deadline") -> None:
    """A workflow's deadline must be a positive number of seconds from its start (or None);
    ``name``: what the caller calls it."""
    if deadline is None:
        return
    if isinstance(deadline, bool) or not isinstance(deadline, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(deadline).__name__}")
    if not deadline > 0 or deadline == float("inf"):
        raise ValueError(f"{name} must be a positive, finite number of seconds, not {deadline!r}")
