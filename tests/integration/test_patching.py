"""Deploying new workflow code under running executions (SQLite, PostgreSQL, through a server):
``sw.patched`` keeps old executions on the old path, the replay check flags what would diverge,
and a divergence at run time says where and how to fix it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import sagaway as sw
from tests.integration.patches_app import build

S = sw.WorkflowStatus


async def until(manager: sw.Manager, key: str, *statuses: sw.WorkflowStatus) -> Any:
    deadline = time.monotonic() + 20
    while True:
        description = await manager.get_workflow(key).describe()
        if description.status in statuses:
            return description
        assert time.monotonic() < deadline, f"{key} is {description.status}, not {statuses}"
        await asyncio.sleep(0.02)


async def start_and_park(manager: sw.Manager, key: str, *, approve: bool = False) -> None:
    """Start ``order`` under ``key``; it waits for ``approve`` (or, approved, for ``delivered``)."""
    await manager.workflow("order", key).execute(idempotency_key=key)
    await until(manager, key, S.WAITING)
    if approve:
        await manager.signal("approve").send(key, True)
        await _until_waiting_on(manager, key, "delivered")


async def _until_waiting_on(manager: sw.Manager, key: str, signal: str) -> None:
    deadline = time.monotonic() + 20
    while True:
        d = await manager.get_workflow(key).describe()
        waiting = [s for s in d.steps if s.kind is sw.StepKind.SIGNAL and s.name == signal]
        if d.status is S.WAITING and waiting:
            return
        assert time.monotonic() < deadline, f"{key} never waited for {signal}: {d.status}"
        await asyncio.sleep(0.02)


async def test_a_v1_execution_finishes_on_v2_code_by_the_old_path_and_new_ones_take_the_new(
    db_url: str,
) -> None:
    ledger: list[str] = []
    async with build(db_url, "v1", ledger) as v1:
        await start_and_park(v1, "old-1")  # charged, waits for approval under v1 code
    async with build(db_url, "v2", ledger) as v2:
        await start_and_park(v2, "new-1")
        assert [r.verdict for r in await v2.check_replays()] == ["ok", "ok"]
        for key in ("old-1", "new-1"):
            await v2.signal("approve").send(key, True)
            await _until_waiting_on(v2, key, "delivered")
    # A restart between the marker and the end: the answer does not change.
    async with build(db_url, "v2", ledger) as v2:
        for key in ("old-1", "new-1"):
            await v2.signal("delivered").send(key, True)
            assert await v2.get_workflow(key).result(timeout=20) == "done v2"
        new_steps = (await v2.get_workflow("new-1").describe()).steps
    # old-1 had charged where v2 asks sw.patched: it kept the v1 path (charge, approval, ship).
    assert [e for e in ledger if e.endswith("old-1")] == [
        "reserve old-1",
        "charge old-1",
        "ship old-1",
    ]
    assert [e for e in ledger if e.endswith("new-1")] == [
        "reserve new-1",
        "fraud_check new-1",
        "ship new-1",
        "charge new-1",
    ]
    markers = [s for s in new_steps if s.kind is sw.StepKind.PATCH]
    assert [(m.name, m.call_id) for m in markers] == [("fraud-check", "2")]


async def test_deprecate_patch_replays_executions_that_recorded_the_marker(db_url: str) -> None:
    ledger: list[str] = []
    async with build(db_url, "v2", ledger) as v2:
        await start_and_park(v2, "marked", approve=True)  # recorded the fraud-check marker
    async with build(db_url, "v3", ledger) as v3:
        [report] = await v3.check_replays()
        assert report.verdict == "ok", report.message
        await start_and_park(v3, "fresh", approve=True)
        for key in ("marked", "fresh"):
            await v3.signal("delivered").send(key, True)
            assert await v3.get_workflow(key).result(timeout=20) == "done v3"
        fresh = (await v3.get_workflow("fresh").describe()).steps
    assert not [s for s in fresh if s.kind is sw.StepKind.PATCH]  # v3 records no marker
    assert ledger.count("fraud_check marked") == 1 and ledger.count("charge marked") == 1


@pytest.mark.parametrize(
    ("code", "call_id", "recorded", "requested"),
    [
        ("reordered", "2", "activity 'charge'", "activity 'ship'"),
        ("renamed", "2", "activity 'charge'", "activity 'bill'"),
        ("removed", "4", "activity 'ship'", "signal 'delivered'"),
        ("v2", None, None, None),  # the same change behind sw.patched: passes
    ],
)
async def test_the_replay_check_flags_what_would_diverge_and_passes_a_patched_change(
    db_url: str, code: str, call_id: str | None, recorded: str | None, requested: str | None
) -> None:
    ledger: list[str] = []
    async with build(db_url, "v1", ledger) as v1:
        await start_and_park(v1, "h-1", approve=True)  # reserve, charge, approve, ship: waits
        await start_and_park(v1, "h-2")  # reserved and charged: waits for approval
    async with build(db_url, code, ledger).connect() as new_code:
        reports = {r.key: r for r in await new_code.check_replays()}
        one = await new_code.get_workflow("h-1").check_replay()
    assert reports["h-1"] == one
    assert reports["h-2"].verdict == ("ok" if code in ("v2", "removed") else "diverged")
    if call_id is None:
        assert one.verdict == "ok", one.message
        # reserve, charge, approve, ship replayed; the wait for "delivered" is where it stops
        assert (one.replayed, one.recorded) == (4, 5)
        return
    assert one.verdict == "diverged"
    assert (one.call_id, one.recorded_call, one.requested_call) == (call_id, recorded, requested)
    assert f"durable call {call_id} was recorded as {recorded}" in one.message
    assert "sw.patched" in one.message and "sagaway fork h-1" in one.message
    assert ledger.count("ship h-1") == 1  # the check ran nothing


async def test_the_replay_check_of_ended_executions_finds_a_step_the_code_no_longer_makes(
    db_url: str,
) -> None:
    async with build(db_url, "v1") as v1:
        await start_and_park(v1, "done-1", approve=True)
        await v1.signal("delivered").send("done-1", True)
        assert await v1.get_workflow("done-1").result(timeout=20) == "done v1"
    async with build(db_url, "short").connect() as short:
        assert await short.check_replays() == []  # nothing live
        [report] = await short.check_replays(ended=True)
    assert report.verdict == "diverged" and report.status is S.COMPLETED
    assert report.recorded_call == "signal 'delivered'" and report.requested_call is None
    assert "ended without making durable call 5" in report.message


async def test_a_divergence_at_run_time_suspends_with_where_and_how_to_fix(db_url: str) -> None:
    async with build(db_url, "v1") as v1:
        await start_and_park(v1, "r-1", approve=True)
    async with build(db_url, "reordered") as reordered:
        # Replayed on code that reorders without a patch: it stops at the first changed call.
        await reordered.signal("delivered").send("r-1", True)
        description = await until(reordered, "r-1", S.SUSPENDED)
    error = description.error
    assert error is not None and error["type"].endswith("NonDeterminismError")
    assert "durable call 2 was recorded as activity 'charge'" in error["message"]
    assert "the code now calls activity 'ship'" in error["message"]
    assert "sw.patched" in error["message"] and "sagaway fork r-1" in error["message"]


async def test_an_exported_history_replays_in_a_unit_test_without_the_database(
    db_url: str, tmp_path: Any
) -> None:
    from sagaway.testing import assert_replays, replay_history

    async with build(db_url, "v1") as v1:
        await start_and_park(v1, "x-1", approve=True)
        document = await v1.get_workflow("x-1").export_history()
    assert document["sagaway_history"] == 1 and len(document["steps"]) == 5
    path = tmp_path / "x-1.json"
    import json

    path.write_text(json.dumps(document))
    ok = await replay_history(build(None, "v2"), path)
    assert ok.verdict == "ok"
    with pytest.raises(AssertionError, match="durable call 2 was recorded as activity 'charge'"):
        await assert_replays(build(None, "reordered"), path)
    await assert_replays(build(None, "v2"), path, document)


def test_patched_outside_a_workflow_and_bad_change_ids_are_refused() -> None:
    with pytest.raises(sw.SagawayError, match="call it in workflow code"):
        sw.patched("x")
    with pytest.raises(sw.SagawayError, match="in workflow code"):
        sw.deprecate_patch("x")
    for bad in ("", "  ", "a" * 201, "nul\x00"):
        with pytest.raises(ValueError, match="change id"):
            sw.patched(bad)
