"""Updates: validated, synchronous, durable requests into a running workflow (four backends).

A validator's refusal leaves no step in the history, only the rejected request; an accepted
update is the signal step of its acceptance and the ``update`` step of its answer; the same
update id is applied once and answered again; update-with-start starts the workflow first.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

import sagaway as sw


@dataclasses.dataclass
class Approval:
    approver: str
    amount: int


class TooLate(sw.CompletableError):
    """Approvals are closed."""


def define(manager: sw.Manager, applied: list[str]) -> Any:
    @manager.register_activity
    async def record_approval(approval: Approval) -> str:
        applied.append(approval.approver)
        return f"approved by {approval.approver}"

    def check(approval: Approval) -> None:
        if approval.amount > 1000:
            raise ValueError(f"amount {approval.amount} is over the limit of 1000")

    @manager.register_workflow(name="order")
    async def order(order_id: str) -> list[str]:
        answers: list[str] = []

        async def approve(approval: Approval) -> str:
            if approval.approver == "late":
                raise TooLate("approvals are closed")
            return await manager.activity(record_approval, approval).execute_get()

        while len(answers) < 2:
            try:
                answers.append(await manager.update("approve").handle(approve, validator=check))
            except TooLate:
                answers.append("late")
        return answers

    return order


def make_manager(db_url: str) -> sw.Manager:
    return sw.Manager(db_url, poll_interval=0.05)


async def test_update_accepted_rejected_and_answered_once(db_url: str) -> None:
    applied: list[str] = []
    manager = make_manager(db_url)
    order = define(manager, applied)
    async with manager:
        handle = await manager.workflow(order, "o-1").execute(idempotency_key="o-1")
        with pytest.raises(sw.UpdateRejected) as rejected:
            await handle.update("approve", Approval("ann", 5000), update_id="u-0", timeout=10)
        assert "over the limit" in rejected.value.reason
        result = await handle.update("approve", Approval("bob", 10), update_id="u-1", timeout=10)
        assert result.result == "approved by bob" and result.update_id == "u-1"
        # The same update id again: applied once, answered with the same result.
        again = await handle.update("approve", Approval("bob", 10), update_id="u-1", timeout=10)
        assert again.result == "approved by bob"
        assert applied == ["bob"]
        with pytest.raises(TooLate):
            await handle.update("approve", Approval("late", 1), update_id="u-2", timeout=10)
        assert await handle.result(timeout=10) == ["approved by bob", "late"]
        # Answered again after the end, from the history.
        after = await handle.update("approve", Approval("bob", 10), update_id="u-1", timeout=10)
        assert after.result == "approved by bob"
        description = await handle.describe()
    kinds = [(s.kind, s.name) for s in description.steps]
    # The rejected update left no step: acceptance (signal) + activity + answer, twice-ish.
    assert (sw.StepKind.UPDATE, "approve:u-1") in kinds
    assert not any("u-0" in name for _, name in kinds)
    rejected_signals = [s for s in description.signals if s.state == "rejected"]
    assert len(rejected_signals) == 1 and "over the limit" in (rejected_signals[0].rejected or "")
    assert applied == ["bob"]


async def test_update_with_start(db_url: str) -> None:
    applied: list[str] = []
    manager = make_manager(db_url)
    order = define(manager, applied)
    async with manager:
        first = await manager.workflow(order, "o-2").update_with_start(
            "approve", Approval("cy", 1), idempotency_key="o-2", update_id="a", timeout=10
        )
        # Again with the same key and id: no second workflow, no second effect.
        second = await manager.workflow(order, "o-2").update_with_start(
            "approve", Approval("cy", 1), idempotency_key="o-2", update_id="a", timeout=10
        )
        assert first.result == second.result == "approved by cy"
        assert applied == ["cy"]
        listed = await manager.list_workflows(key_prefix="o-2")
        assert len(listed) == 1


async def test_update_misuse(db_url: str) -> None:
    manager = make_manager(db_url)
    define(manager, [])
    async with manager:
        with pytest.raises(sw.WorkflowNotFound):
            await manager.update("approve").send("nobody", {}, timeout=1)
        with pytest.raises(sw.SagawayError, match="inside a workflow"):
            await manager.update("approve").handle(lambda p: p)
        with pytest.raises(ValueError):
            manager.update("")


async def test_update_times_out_while_pending(db_url: str) -> None:
    manager = make_manager(db_url)

    @manager.register_workflow
    async def idle() -> None:
        await manager.signal("never").receive(timeout=3600)

    async with manager:
        handle = await manager.workflow(idle).execute(idempotency_key="idle")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(handle.update("approve", 1, timeout=0.3), 10)


async def test_sync_client_update_and_pause(db_url: str) -> None:
    applied: list[str] = []
    manager = make_manager(db_url)
    define(manager, applied)
    async with manager:
        await manager.workflow("order", "o-9").execute(idempotency_key="o-9")

        def call() -> tuple[Any, bool, bool]:
            with sw.SyncClient(db_url) as client:
                handle = client.get_workflow("o-9")
                answer = handle.update("approve", {"approver": "dee", "amount": 3}, timeout=10)
                return answer.result, handle.pause(), handle.resume()

        assert await asyncio.to_thread(call) == ("approved by dee", True, True)
    assert applied == ["dee"]
