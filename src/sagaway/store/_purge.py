"""Retention: deleting ended executions that ended before a cutoff, in bounded batches.

Shared by both stores: which statuses may be purged (ended ones only: a live execution is never
deleted, whatever the caller asks), the parameters of the named queries ``purge_*`` and
``count_purgeable`` (the batches: ``sqlite.purge``, ``postgres.purge``).
Transactions stay short, so the workers' own writes wait for one at most that long. An ended
execution is kept while a live one may still read its end: its parent, and any live execution
whose recorded child start names its key (one that attached to it, a fork that kept the start).
"""

from __future__ import annotations

from collections.abc import Collection

from sagaway import states
from sagaway.states import WorkflowStatus
from sagaway.store.sql import queries

_Q = queries("sqlite")


def ended_statuses(statuses: Collection[WorkflowStatus] | None) -> list[str]:
    """The values of the statuses to purge (see ``states.ended_statuses``: ended ones only)."""
    return [s.value for s in states.ended_statuses(statuses)]


def check_batch(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"batch_size must be an integer >= 1, not {limit!r}")
