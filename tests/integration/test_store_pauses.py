"""The Store contract on every backend: pausing and resuming a workflow execution (never
claimed while paused, due as before once resumed), and paused activities and queues (a resume
wakes the workflows waiting for them). Times are explicit, so no test sleeps."""

from __future__ import annotations

import pytest

from sagaway.states import WorkflowStatus
from sagaway.store import Store
from sagaway.store.records import AuditNote, AuditQuery, PausedCallRecord
from tests.store_helpers import LEASE, T0, new, run_of, running


async def claim(store: Store, now: float, owner: str = "worker-b") -> list[str]:
    claimed = await store.claim_due(
        owner=owner, now=now, lease_timeout=LEASE, limit=10, exclude=(), queues=None
    )
    return [record.key for record, _ in claimed]


async def test_a_paused_run_is_never_claimed_and_resume_makes_it_due(store: Store) -> None:
    await store.create_workflow(new("p-1"), now=T0, lease=None, replace_live=False)
    await store.create_workflow(new("p-2"), now=T0, lease=None, replace_live=False)
    run_id = (await run_of(store, "p-1")).run_id
    note = AuditNote(entry_id="e-1", action="pause", actor="local:ops@host", reason="incident")
    assert await store.pause_workflow(run_id, paused=True, now=T0, audit=note) is True
    assert await store.pause_workflow(run_id, paused=True, now=T0) is True  # live: still paused
    assert await store.paused_runs([run_id, "other"]) == {run_id}
    assert await claim(store, T0 + 1) == ["p-2"]  # the other one only
    assert await claim(store, T0 + 10) == []  # p-2 is held; p-1 due, but paused
    assert await store.pause_workflow(run_id, paused=False, now=T0 + 2000) is True
    assert await store.pause_workflow(run_id, paused=False, now=T0 + 2000) is False
    assert await store.paused_runs([run_id]) == set()
    assert "p-1" in await claim(store, T0 + 2000)
    [entry] = await store.list_audit(AuditQuery(run_id=run_id))
    assert (entry.action, entry.reason) == ("pause", "incident")


async def test_a_running_paused_run_is_not_taken_over_after_its_lease_lapses(
    store: Store,
) -> None:
    await running(store, "r-1")
    run_id = (await run_of(store, "r-1")).run_id
    assert await store.pause_workflow(run_id, paused=True, now=T0 + 1)
    assert await claim(store, T0 + LEASE + 10) == []  # its owner died: still nobody takes it
    assert await store.pause_workflow(run_id, paused=False, now=T0 + LEASE + 20)
    assert await claim(store, T0 + LEASE + 20) == ["r-1"]


async def test_an_ended_run_cannot_be_paused(store: Store) -> None:
    held = await running(store, "e-1")
    run_id = (await run_of(store, "e-1")).run_id
    await store.finish_workflow(
        run_id, token=held.token, status=WorkflowStatus.COMPLETED, result=None, error=None, now=T0
    )
    assert await store.pause_workflow(run_id, paused=True, now=T0 + 1) is False


async def test_paused_calls_and_the_wake_on_resume(store: Store) -> None:
    held = await running(store, "w-1")
    run_id = (await run_of(store, "w-1")).run_id
    assert await store.pause_calls("activity", "charge", paused=True, reason="down", now=T0)
    assert not await store.pause_calls("activity", "charge", paused=True, reason="x", now=T0)
    assert await store.pause_calls("queue", "payments", paused=True, reason="psp", now=T0 + 1)
    assert await store.list_paused_calls() == [
        PausedCallRecord("activity", "charge", "down", T0),
        PausedCallRecord("queue", "payments", "psp", T0 + 1),
    ]
    # The workflow waits for the paused activity (as the engine makes it), far in the future.
    await store.wait_workflow(
        run_id,
        token=held.token,
        waiting_for="paused:activity:charge",
        next_run_at=T0 + 10_000,
        step=None,
        now=T0 + 2,
    )
    assert await claim(store, T0 + 3) == []
    assert await store.pause_calls("activity", "charge", paused=False, reason="up", now=T0 + 4)
    assert await claim(store, T0 + 5) == ["w-1"]  # woken by the resume
    assert not await store.pause_calls("activity", "charge", paused=False, reason="", now=T0)
    assert [p.name for p in await store.list_paused_calls()] == ["payments"]
    with pytest.raises(ValueError):
        await store.pause_calls("workflow", "x", paused=True, reason="", now=T0)
