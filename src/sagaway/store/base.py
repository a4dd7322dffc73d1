"""The persistence contract, in domain verbs. The engine reaches storage only through it.

Every method is one database transaction. Methods that take a lease ``token`` are *fenced*: they
write only while that token still owns a RUNNING execution, and raise ``errors.LeaseLost``
otherwise, so a process that lost its lease (paused, partitioned, or its workflow was
cancelled) can never overwrite the work of the new owner.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Protocol

from sagaway._engine.states import WorkflowStatus
from sagaway.store.records import Lease, NewWorkflow, StepRecord, WorkflowRecord


@dataclasses.dataclass(frozen=True, slots=True)
class CreateResult:
    record: WorkflowRecord
    """The current execution under the key: the new one, or the one that was there."""
    created: bool
    replaced_run_id: str | None = None
    """The live execution that was terminated to make room (replace_live=True)."""


class Store(Protocol):
    """Durable storage of workflow executions and their steps."""

    url: str
    """Where the data lives (without credentials)."""

    async def open(self) -> None:
        """Connect and migrate the schema to the latest version."""
        ...

    async def close(self) -> None: ...

    async def create_workflow(
        self, new: NewWorkflow, *, now: float, lease: Lease | None, replace_live: bool
    ) -> CreateResult:
        """Insert an execution under ``new.key`` unless the key is taken.

        With a lease the execution starts RUNNING, owned by it; otherwise PENDING. When the key is
        taken by a live execution and ``replace_live`` is true, that one is TERMINATED first.
        """
        ...

    async def get_workflow(self, key: str) -> WorkflowRecord | None:
        """The current execution under ``key``."""
        ...

    async def get_run(self, run_id: str) -> WorkflowRecord | None: ...

    async def list_workflows(
        self, *, status: WorkflowStatus | None, limit: int
    ) -> list[WorkflowRecord]:
        """Current executions, newest first."""
        ...

    async def load_steps(self, run_id: str) -> list[StepRecord]: ...

    async def record_step(self, step: StepRecord, *, token: str) -> None:
        """Insert or replace the outcome of one durable call (fenced)."""
        ...

    async def finish_workflow(
        self,
        run_id: str,
        *,
        token: str,
        status: WorkflowStatus,
        result: str | None,
        error: str | None,
        now: float,
        final_step: StepRecord | None = None,
    ) -> None:
        """End an owned execution as COMPLETED or FAILED (fenced).

        ``final_step``, if given, is recorded in the same transaction.
        """
        ...

    async def suspend_workflow(
        self, run_id: str, *, token: str, error: str, now: float, next_run_at: float
    ) -> None:
        """Stop an owned execution as SUSPENDED until ``next_run_at`` (fenced)."""
        ...

    async def release_workflow(self, run_id: str, *, token: str, now: float) -> None:
        """Give up ownership so another worker takes it at once (graceful shutdown)."""
        ...

    async def renew_leases(self, tokens: Collection[str], *, expires_at: float) -> set[str]:
        """Extend leases; returns the tokens that are still owned."""
        ...

    async def claim_due(
        self,
        *,
        owner: str,
        now: float,
        lease_timeout: float,
        limit: int,
        exclude: Collection[str],
    ) -> list[tuple[WorkflowRecord, Lease]]:
        """Take ownership of executions that should run now.

        Due are: PENDING or RUNNING executions whose lease is absent or expired (a crashed
        owner), and SUSPENDED or WAITING ones whose ``next_run_at`` has come.
        """
        ...

    async def next_due(self, *, owner: str) -> float | None:
        """The earliest time another execution not owned by ``owner`` may become due."""
        ...

    async def end_workflow(
        self, run_id: str, *, status: WorkflowStatus, error: str | None, now: float
    ) -> bool:
        """End a live execution by request (CANCELLED, TERMINATED); False if already ended."""
        ...

    async def retry_now(self, run_id: str, *, now: float) -> bool:
        """Make a SUSPENDED execution due at once; False if it is not suspended."""
        ...

    async def count_by_status(self) -> dict[WorkflowStatus, int]: ...
