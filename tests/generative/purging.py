"""The ``purge`` building block: every process runs background retention with a tiny age.

Each process's Manager purges, every ``INTERVAL`` virtual seconds, what ended more than ``AGE``
seconds ago: runs disappear from the database soon after they end, while other runs may still
read them (a parent its child, a workflow that attached to a child under a shared key). The
promise checked: a live workflow never loses an outcome it reads. A reader whose child was
purged under it would stay SUSPENDED with ``WorkflowNotFound`` (or end otherwise than the model
says: the outcome check reports that too).

The checks read every run's end and steps after the fact, and a purge deletes them: just before
each purge the observer remembers every ended run as it stands (an ended run's record and steps
no longer change, and a run that ends after that moment ended after the cutoff, so the purge
keeps it), and reads a purged run from what it remembered. A run the database lost without it
being remembered had not ended: that is a live run purged, and ``Driver.statuses`` reports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sagaway.store import Store
from sagaway.store.records import StepRecord, WorkflowRecord

if TYPE_CHECKING:
    from tests.generative.driver import Driver

AGE = 1.0
"""``Manager(retention=...)``: virtual seconds after its end a run may be purged."""
INTERVAL = 30.0
"""``Manager(retention_interval=...)``: virtual seconds between a process's purges.

The first purge comes one interval after a process starts, then every interval: at the times
programs' timers (30 s, 3600 s) and slow activities (120 s) end, so a purge often runs in the
same instant as the workflow that reads what it deletes."""


def manager_options(enabled: bool) -> dict[str, Any]:
    return {"retention": AGE, "retention_interval": INTERVAL} if enabled else {}


class Remembering:
    """The driver's observer store, which remembers ended runs before a purge deletes them."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.remembered: dict[str, tuple[WorkflowRecord, list[StepRecord]]] = {}
        self.purges = 0
        """Purge calls the processes made (each remembered what had ended first)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def remember_ended(self, run_ids: list[str]) -> None:
        """Called by a process's store just before it purges."""
        self.purges += 1
        for run_id in run_ids:
            if run_id in self.remembered:
                continue
            record = await self._inner.get_run(run_id)
            if record is not None and record.status.ended:
                self.remembered[run_id] = (record, await self._inner.load_steps(run_id))

    async def get_run(self, run_id: str) -> WorkflowRecord | None:
        record = await self._inner.get_run(run_id)
        if record is None and run_id in self.remembered:
            return self.remembered[run_id][0]
        return record

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        steps = await self._inner.load_steps(run_id)
        if not steps and run_id in self.remembered:
            return list(self.remembered[run_id][1])
        return steps


def lost_outcomes(driver: Driver, records: dict[str, Any]) -> list[str]:
    """No run waits for, or was suspended on, an outcome the purge took away."""
    out = []
    for run_id, record in records.items():
        if record.status.ended or not record.error:
            continue
        if "WorkflowNotFound" in record.error or "no workflow with key" in record.error:
            info = driver.world.runs[run_id]
            out.append(
                f"{info.key} [{info.program}, run {run_id[:8]}] lost an outcome it reads "
                f"({record.status.value}): {record.error[:300]}"
            )
    return out


def reused_after_purge(driver: Driver, calls: set[tuple[str, str, bool]]) -> bool:
    """Whether the runs of calls sharing an idempotency key are runs of one workflow key, each
    created after the one before was purged: a purged key is free, and a start under it runs
    again in the same key space (docs/retention.md), so its activities get the same keys."""
    assert isinstance(driver.observer, Remembering)
    runs = sorted({run_id for run_id, _, _ in calls}, key=lambda r: driver.world.runs[r].seq)
    if len(runs) < 2 or len({driver.world.runs[r].key for r in runs}) > 1:
        return False
    if len({(label, comp) for _, label, comp in calls}) > 1:
        return False  # two different calls of the program
    return all(r in driver.observer.remembered for r in runs[:-1])
