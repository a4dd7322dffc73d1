"""Fork on SQLite and PostgreSQL: a workflow that failed at step 3 because of a bug, forked from
step 3 once the bug is fixed, completes without running steps 1-2 again; gathers before the step,
children, compensations, live sources, bad steps and taken keys."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

import sagaway as sw
from tests.integration import fork_app


@pytest.fixture
async def manager(db_url: str) -> AsyncIterator[sw.Manager]:
    fork_app.reset()
    m = fork_app.build(db_url)
    async with m:
        yield m


async def _reaches(m: sw.Manager, key: str, status: sw.WorkflowStatus) -> None:
    deadline = time.monotonic() + 10
    while await m.get_workflow(key).status() is not status:
        assert time.monotonic() < deadline, f"{key} never became {status.value}"
        await asyncio.sleep(0.02)


async def _failed_at_step_3(m: sw.Manager, workflow: str = "pipeline") -> None:
    with pytest.raises(fork_app.LabelBug):
        await m.workflow(workflow, 7).execute_get(idempotency_key="order-7")


async def test_fork_from_the_failed_step_completes_without_rerunning_earlier_steps(
    manager: sw.Manager,
) -> None:
    """The issue's acceptance test."""
    await _failed_at_step_3(manager)
    source = await manager.get_workflow("order-7").describe()
    assert source.status is sw.WorkflowStatus.FAILED
    assert [(s.call_id, s.status) for s in source.steps] == [
        ("1", sw.StepStatus.COMPLETED),
        ("2", sw.StepStatus.COMPLETED),
        ("3", sw.StepStatus.FAILED),
    ]
    fork_app.BUG["on"] = False  # the fix is deployed

    handle = await manager.fork("order-7", from_step=3, new_key="order-7-fixed")
    assert handle.key == "order-7-fixed"
    assert await handle.result(timeout=10) == "shipped-paid-stock-7"

    # Steps 1-2 ran once in all (in the source); step 3 ran again.
    assert fork_app.calls == {"reserve": 1, "charge": 1, "ship": 2}
    forked = await handle.describe()
    assert forked.status is sw.WorkflowStatus.COMPLETED and forked.parent_key is None
    assert [(s.call_id, s.name, s.status) for s in forked.steps] == [
        ("1", "reserve", sw.StepStatus.COMPLETED),
        ("2", "charge", sw.StepStatus.COMPLETED),
        ("3", "ship", sw.StepStatus.COMPLETED),
    ]
    # The kept steps are the source's records, times included.
    for kept, original in zip(forked.steps[:2], source.steps[:2], strict=True):
        assert (kept.started_at, kept.ended_at, kept.attempts) == (
            original.started_at,
            original.ended_at,
            original.attempts,
        )
    # Step 3 ran under a new idempotency key: one that names the fork's run.
    first, second = fork_app.idempotency_keys["ship"]
    assert first == "order-7/3"
    assert second.startswith("order-7-fixed@") and second.endswith("/3")
    # The source is untouched.
    after = await manager.get_workflow("order-7").describe()
    assert after.status is sw.WorkflowStatus.FAILED and len(after.steps) == 3


async def test_fork_after_compensations_is_refused_unless_forced(
    manager: sw.Manager, caplog: pytest.LogCaptureFixture
) -> None:
    """The source's refund and release undid what its steps 1-2 did: a fork from step 3 that
    reused them would ship against a refunded payment. Refused, naming them, unless forced."""
    await _failed_at_step_3(manager, "saga_pipeline")
    source = await manager.get_workflow("order-7").describe()
    assert [(s.call_id, s.kind, s.name) for s in source.steps][2:] == [
        ("3", sw.StepKind.ACTIVITY, "ship"),
        ("4", sw.StepKind.COMPENSATION, "refund"),
        ("5", sw.StepKind.COMPENSATION, "release"),
    ]
    fork_app.BUG["on"] = False
    for attempt in (
        manager.plan_fork("order-7", from_step=3),
        manager.fork("order-7", from_step=3, new_key="order-7-fixed"),
        manager.fork("order-7", from_step=2, new_key="order-7-fixed"),
    ):
        with pytest.raises(sw.ForkRefused) as refused:
            await attempt
        assert refused.value.key == "order-7" and refused.value.compensations == ("4", "5")
    message = str(refused.value)
    assert message.startswith(
        "workflow 'order-7' ran compensations that a fork from step 2 drops: "
        "step 4 refund (COMPLETED), step 5 release (COMPLETED); they may have undone what "
        "step 1 did"
    )
    assert "force=True" in message and "\n" not in message
    with pytest.raises(sw.WorkflowNotFound):  # nothing was created
        await manager.get_workflow("order-7-fixed").status()

    plan = await manager.plan_fork("order-7", from_step=3, force=True)
    assert plan.kept == ("1", "2") and plan.compensated == ("4", "5")
    handle = await manager.fork("order-7", from_step=3, new_key="order-7-fixed", force=True)
    assert "fork forced: workflow 'order-7' ran compensations" in caplog.text
    assert await handle.result(timeout=10) == "shipped-paid-stock-7"
    # The source's compensations ran once (in the source); the fork ran none.
    assert fork_app.calls == {"reserve": 1, "charge": 1, "ship": 2, "refund": 1, "release": 1}
    assert [s.kind for s in (await handle.describe()).steps] == [sw.StepKind.ACTIVITY] * 3

    # From step 1 nothing they undid is kept: the whole saga runs again, unrefused.
    again = await manager.fork("order-7", from_step=1, new_key="order-7-again")
    assert await again.result(timeout=10) == "shipped-paid-stock-7"
    assert fork_app.calls["charge"] == 2
    # Kept, the compensations are replayed as the source recorded them: nothing to refuse.
    assert (await manager.plan_fork("order-7", from_step=6)).compensated == ()


async def test_fork_keeps_a_gather_that_ended_before_the_step(manager: sw.Manager) -> None:
    with pytest.raises(fork_app.LabelBug):
        await manager.workflow("gathered", 7).execute_get(idempotency_key="order-7")
    fork_app.BUG["on"] = False
    handle = await manager.fork("order-7", from_step=2, new_key="order-7-fixed")
    assert await handle.result(timeout=10) == "shipped-a:stock-7+b:stock-7"
    assert fork_app.calls == {"reserve": 1, "pack-a": 1, "pack-b": 1, "ship": 2}
    assert [s.call_id for s in (await handle.describe()).steps] == ["1", "1/1", "2/1", "2"]

    # From step 1 nothing is kept: everything runs again, under the new key's idempotency keys.
    again = await manager.fork("order-7", from_step=1, new_key="order-7-again")
    assert await again.result(timeout=10) == "shipped-a:stock-7+b:stock-7"
    assert fork_app.calls == {"reserve": 2, "pack-a": 2, "pack-b": 2, "ship": 3}
    assert fork_app.idempotency_keys["pack-a"][1].startswith("order-7-again@")


async def test_fork_from_step_1_keeps_nothing_of_a_gather_that_opened_the_saga(
    manager: sw.Manager,
) -> None:
    """The source opened with a gather (branch steps 1/1, 2/1, ended before its step 1 started),
    failed at step 1 and compensated at step 2. From step 1 nothing is kept and nothing is
    refused, as documented: the gather was kept (it ended before step 1 started) and, with the
    compensation dropped, the fork was refused, its message advising to fork from step 1
    (found by the generative test)."""
    with pytest.raises(fork_app.LabelBug):
        await manager.workflow("packed_first", 7).execute_get(idempotency_key="order-7")
    source = await manager.get_workflow("order-7").describe()
    assert [(s.call_id, s.kind) for s in source.steps] == [
        ("1/1", sw.StepKind.ACTIVITY),
        ("2/1", sw.StepKind.ACTIVITY),
        ("1", sw.StepKind.ACTIVITY),
        ("2", sw.StepKind.COMPENSATION),
    ]
    assert (await manager.plan_fork("order-7", from_step=1)).kept == ()
    fork_app.BUG["on"] = False
    handle = await manager.fork("order-7", from_step=1, new_key="order-7-again")
    assert await handle.result(timeout=10) == "shipped-a:7+b:7"
    assert fork_app.calls == {"pack-a": 2, "pack-b": 2, "ship": 2, "release": 1}


async def test_fork_keeps_a_child_or_starts_a_new_one(manager: sw.Manager) -> None:
    await _failed_at_step_3(manager, "parent")
    fork_app.BUG["on"] = False
    # From step 3: the child's start and result are kept; the child is not run again.
    handle = await manager.fork("order-7", from_step=3, new_key="fork-3")
    assert await handle.result(timeout=10) == "shipped-label-7"
    # From step 2: the start is kept, the result is read again from the same (ended) child.
    handle = await manager.fork("order-7", from_step=2, new_key="fork-2")
    assert await handle.result(timeout=10) == "shipped-label-7"
    assert fork_app.calls["print_label"] == 1
    # From step 1: a new child, under the fork's key space, the parent of which is the fork.
    handle = await manager.fork("order-7", from_step=1, new_key="fork-1")
    assert await handle.result(timeout=10) == "shipped-label-7"
    assert fork_app.calls["print_label"] == 2
    [child] = [d for d in await manager.list_workflows() if d.parent_key == "fork-1"]
    assert child.key == f"fork-1@{handle.run_id}/1" and child.status is sw.WorkflowStatus.COMPLETED
    assert [d.key for d in await manager.list_workflows() if d.parent_key] == [
        child.key,
        "order-7/1",
    ]


async def test_fork_refuses_to_wait_for_a_kept_child_that_has_not_ended(
    manager: sw.Manager,
) -> None:
    handle = await manager.workflow("parent", 7, slow=True).execute(idempotency_key="order-7")
    await _reaches(manager, "order-7", sw.WorkflowStatus.WAITING)
    assert await manager.terminate("order-7")
    child_key = "order-7/1"
    assert await manager.get_workflow(child_key).status() is not sw.WorkflowStatus.COMPLETED
    with pytest.raises(sw.WorkflowNotEnded, match="started child workflow 'order-7/1'"):
        await manager.fork("order-7", from_step=2, new_key="fork-2")
    with pytest.raises(sw.WorkflowNotFound):
        await manager.get_workflow("fork-2").status()
    # Once the child has ended, the fork takes its result.
    await manager.signal("printer_ready").send(child_key, "label-ok")
    await _reaches(manager, child_key, sw.WorkflowStatus.COMPLETED)
    fork_app.BUG["on"] = False
    forked = await manager.fork("order-7", from_step=2, new_key="fork-2")
    assert await forked.result(timeout=10) == "shipped-label-ok"
    assert handle.key == "order-7"


async def test_fork_of_a_live_workflow_is_refused_until_it_is_terminated(
    manager: sw.Manager,
) -> None:
    await manager.workflow("approval", 7).execute(idempotency_key="order-7")
    await _reaches(manager, "order-7", sw.WorkflowStatus.WAITING)
    with pytest.raises(sw.WorkflowNotEnded, match=r"is WAITING.*sagaway terminate order-7"):
        await manager.fork("order-7", from_step=2, new_key="order-7-b")
    with pytest.raises(sw.WorkflowNotFound):
        await manager.get_workflow("order-7-b").status()

    assert await manager.terminate("order-7")
    handle = await manager.fork("order-7", from_step=2, new_key="order-7-b")
    await _reaches(manager, "order-7-b", sw.WorkflowStatus.WAITING)
    await manager.signal("approve").send("order-7-b", "yes")
    assert await handle.result(timeout=10) == "stock-7: yes"
    assert fork_app.calls == {"reserve": 1}


async def test_fork_of_a_suspended_workflow_is_refused(manager: sw.Manager) -> None:
    await manager.workflow("broken", 7).execute(idempotency_key="order-7")
    await _reaches(manager, "order-7", sw.WorkflowStatus.SUSPENDED)
    with pytest.raises(sw.WorkflowNotEnded, match="is SUSPENDED") as caught:
        await manager.fork("order-7", from_step=1, new_key="order-7-b")
    assert (caught.value.key, caught.value.status) == ("order-7", "SUSPENDED")


async def test_fork_checks_the_step_and_the_keys(manager: sw.Manager) -> None:
    await _failed_at_step_3(manager)
    for bad in (0, -1, 5):
        with pytest.raises(ValueError, match="top-level steps are 1-3, so from_step must be 1-4"):
            await manager.fork("order-7", from_step=bad, new_key="order-7-b")
    with pytest.raises(sw.WorkflowNotFound):
        await manager.fork("nosuch", from_step=1, new_key="order-7-b")
    with pytest.raises(ValueError, match="new_key must be a non-empty string"):
        await manager.fork("order-7", from_step=1, new_key="")
    with pytest.raises(sw.WorkflowAlreadyExists, match="'order-7' already exists"):
        await manager.fork("order-7", from_step=1, new_key="order-7")
    with pytest.raises(fork_app.LabelBug):
        await manager.workflow("pipeline", 8).execute_get(idempotency_key="taken")
    with pytest.raises(sw.WorkflowAlreadyExists, match="'taken' already exists"):
        await manager.fork("order-7", from_step=1, new_key="taken")
    # None of them created anything or ran a step.
    assert {d.key for d in await manager.list_workflows()} == {"order-7", "taken"}

    # One past the last step keeps every step: the fork fails the same way, running nothing.
    calls = dict(fork_app.calls)
    handle = await manager.fork("order-7", from_step=4, new_key="order-7-replayed")
    with pytest.raises(fork_app.LabelBug, match="label printer bug"):
        await handle.result(timeout=10)
    assert fork_app.calls == calls
