"""The Store verbs of pausing (schema v20 on SQLite, v25 on PostgreSQL): a workflow execution
held paused, and activities or activity queues whose new attempts are held back everywhere."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from sagaway.store.records import AuditNote, PausedCallRecord


class PauseVerbs(Protocol):
    """Pausing workflows, activities and activity queues."""

    async def pause_workflow(
        self, run_id: str, *, paused: bool, now: float, audit: AuditNote | None = None
    ) -> bool:
        """Pause (``paused``) or resume a live execution. A paused one is claimed by no worker;
        its owner, if any, stops it before its next durable call once it reads the pause
        (``paused_runs``) and releases its lease. Resumed, it is due as it was (now, if it
        became due meanwhile). False: it had ended (pause) or was not paused (resume). The
        ``audit`` entry is written in the same transaction, when something changed."""
        ...

    async def paused_runs(self, run_ids: Collection[str]) -> set[str]:
        """Those of ``run_ids`` that are paused (read by each worker's lease heartbeat)."""
        ...

    async def pause_calls(
        self,
        kind: str,
        name: str,
        *,
        paused: bool,
        reason: str,
        now: float,
        audit: AuditNote | None = None,
    ) -> bool:
        """Pause (``paused``) or resume the activity (``kind`` ``activity``) or activity queue
        (``queue``) ``name`` in every process. Resumed, the workflows WAITING for it are due at
        once. False: nothing changed (already paused; not paused)."""
        ...

    async def list_paused_calls(self) -> list[PausedCallRecord]:
        """Every paused activity and activity queue, by kind and name."""
        ...
