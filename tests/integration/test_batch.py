"""Batch operations through the Manager on every backend: filters select exactly the
workflows they name, a dry run changes nothing, each action's report counts what was done and
what was refused (already ended, already requested, already sent, not suspended), and running
the same batch again does no harm."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

import sagaway as sw
from tests.integration import batch_app

S = sw.WorkflowStatus
Out = sw.BatchOutcome
F = sw.WorkflowFilter


async def wait_until(check: Callable[[], Awaitable[bool]], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def reaches(m: sw.Manager, key: str, *statuses: S) -> None:
    async def check() -> bool:
        return await m.get_workflow(key).status() in statuses

    await wait_until(check)


async def statuses(m: sw.Manager) -> dict[str, S]:
    return {d.key: d.status for d in await m.list_workflows(limit=1000)}


ORDERS = ("eu-1", "eu-2", "us-1")


async def seed(m: sw.Manager) -> None:
    """eu-1, eu-2, us-1: orders WAITING for "go" (created in that order); broken-1
    SUSPENDED; ok-1 COMPLETED."""
    for key in ORDERS:
        await m.workflow("order", key).execute(idempotency_key=key)
        await reaches(m, key, S.WAITING)
    await m.workflow("broken").execute(idempotency_key="broken-1")
    assert await m.workflow("ok").execute_get(idempotency_key="ok-1") == "ok"
    await reaches(m, "broken-1", S.SUSPENDED)


def keys(report: sw.BatchReport, outcome: Out | None = None) -> list[str]:
    return sorted(i.key for i in report.items if outcome is None or i.outcome is outcome)


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    batch_app.released.clear()


async def test_filters_select_exactly_the_named_workflows(db_url: str) -> None:
    m = batch_app.build(db_url)
    async with m:
        await seed(m)
        before = await statuses(m)

        async def selected(action: str, f: sw.WorkflowFilter) -> list[str]:
            report = await m.batch(
                action, f, dry_run=True, signal="go" if action == "signal" else None
            )
            assert report.dry_run and report.matched == len(report.items)
            return keys(report)

        assert await selected("cancel", F(key_prefix="eu-")) == ["eu-1", "eu-2"]
        assert await selected("cancel", F(name="order")) == list(ORDERS)
        # The default statuses are the live ones: broken-1 (SUSPENDED) too, not ok-1.
        assert await selected("terminate", F()) == ["broken-1", *ORDERS]
        assert await selected("retry", F()) == ["broken-1"]
        assert await selected("signal", F(name="order", key_prefix="us-")) == ["us-1"]
        assert await selected("cancel", F(statuses=frozenset({S.SUSPENDED}))) == ["broken-1"]
        assert await selected("cancel", F(name="nosuch")) == []
        created = {d.key: d.created_at for d in await m.list_workflows(limit=100)}
        window = F(since=created["eu-2"], until=created["us-1"])
        assert await selected("cancel", window) == ["eu-2"]
        assert await selected("cancel", F(since=created["eu-2"], name="order")) == ["eu-2", "us-1"]
        # Small pages select the same workflows, each once.
        report = await m.batch_cancel(F(), page_size=1, dry_run=True)
        assert keys(report) == ["broken-1", *ORDERS]
        # Ended statuses are selected when asked for, and refused as already ended.
        report = await m.batch_cancel(F(statuses=frozenset({"COMPLETED"})), dry_run=True)
        assert [(i.key, i.outcome) for i in report.items] == [("ok-1", Out.ALREADY_ENDED)]
        report = await m.batch_retry(F(statuses=frozenset({S.WAITING})), dry_run=True)
        assert report.counts()[Out.NOT_SUSPENDED] == 3 and not report.done
        # Nothing changed: no status, no cancel request, no audit entry.
        assert await statuses(m) == before
        assert [e for e in await m.audit_log() if e.action in {"cancel", "retry"}] == []


async def test_cancel_compensates_each_once_and_a_second_run_does_nothing(db_url: str) -> None:
    m = batch_app.build(db_url)
    async with m:
        await seed(m)
        seen: list[sw.BatchItem] = []
        report = await m.batch_cancel(
            F(key_prefix="eu-"), reason="provider down", on_item=seen.append
        )
        assert report.action is sw.BatchAction.CANCEL and not report.dry_run
        assert keys(report, Out.DONE) == ["eu-1", "eu-2"] and not report.refused
        assert report.counts()[Out.DONE] == 2 and sum(report.counts().values()) == 2
        assert sorted(i.key for i in seen) == ["eu-1", "eu-2"]
        for key in ("eu-1", "eu-2"):
            await reaches(m, key, S.CANCELLED)
        assert (await statuses(m))["us-1"] is S.WAITING
        assert dict(batch_app.released) == {"eu-1": 1, "eu-2": 1}
        entries = [e for e in await m.audit_log(action="cancel")]
        assert sorted(e.target for e in entries) == ["eu-1", "eu-2"]
        assert {e.reason for e in entries} == {"provider down"}
        # Again: the ended ones are no longer selected by default, or refused when asked for.
        again = await m.batch_cancel(F(key_prefix="eu-"))
        assert again.matched == 0
        again = await m.batch_cancel(F(key_prefix="eu-", statuses=frozenset(S)))
        assert keys(again, Out.ALREADY_ENDED) == ["eu-1", "eu-2"] and not again.done
        assert dict(batch_app.released) == {"eu-1": 1, "eu-2": 1}
        report = report.to_json()
        assert report["counts"]["done"] == 2 and report["filter"] == {"key_prefix": "eu-"}


async def test_a_cancel_asked_before_is_reported_already_requested(db_url: str) -> None:
    m = batch_app.build(db_url)
    async with m.connect():  # no worker: the cancel stays a request
        await m.workflow("order", "p-1").execute(idempotency_key="p-1")
        first = await m.batch_cancel(F(key_prefix="p-"))
        assert keys(first, Out.DONE) == ["p-1"]
        second = await m.batch_cancel(F(key_prefix="p-"))
        assert [(i.key, i.outcome) for i in second.items] == [("p-1", Out.ALREADY_REQUESTED)]
        assert len(await m.audit_log(action="cancel")) == 1


async def test_terminate_retry_and_signal(db_url: str) -> None:
    m = batch_app.build(db_url)
    async with m:
        await seed(m)
        report = await m.batch_terminate(F(key_prefix="us-"), reason="fraud")
        assert keys(report, Out.DONE) == ["us-1"]
        assert (await statuses(m))["us-1"] is S.TERMINATED
        assert batch_app.released["us-1"] == 0  # terminate does not compensate
        report = await m.batch_retry(F(), reason="provider is back")
        assert keys(report, Out.DONE) == ["broken-1"]
        # A signal the orders do not wait for is kept; sent again, it is already sent.
        note = await m.batch_signal(F(name="order"), "note", {"n": 1})
        assert keys(note, Out.DONE) == ["eu-1", "eu-2"]
        again = await m.batch_signal(F(name="order"), "note", {"n": 1})
        assert keys(again, Out.ALREADY_SENT) == ["eu-1", "eu-2"]
        other = await m.batch_signal(F(name="order"), "note", {"n": 1}, dedupe_id="second")
        assert keys(other, Out.DONE) == ["eu-1", "eu-2"]
        assert [s.name for s in await m.list_signals("eu-1")] == ["note", "note"]
        # "go" completes them; a batch over every status then refuses the ended ones.
        go = await m.batch_signal(F(name="order"), "go", 7)
        assert keys(go, Out.DONE) == ["eu-1", "eu-2"]
        for key in ("eu-1", "eu-2"):
            assert await m.get_workflow(key).result(timeout=15) == 7
        late = await m.batch_signal(F(name="order", statuses=frozenset(S)), "go", 8)
        assert late.counts()[Out.ALREADY_ENDED] == 3 and not late.done


async def test_rate_paces_the_calls(db_url: str) -> None:
    m = batch_app.build(db_url)
    async with m.connect():
        for i in range(4):
            await m.workflow("order", f"r-{i}").execute(idempotency_key=f"r-{i}")
        started = time.monotonic()
        report = await m.batch_cancel(F(key_prefix="r-"), rate=10.0)
        assert len(report.done) == 4
        assert time.monotonic() - started >= 0.3  # 4 calls at 10 a second: 3 gaps of 0.1 s


async def test_misuse_is_refused_before_anything_is_done(db_url: str) -> None:
    m = batch_app.build(db_url)
    async with m.connect():
        await m.workflow("order", "x-1").execute(idempotency_key="x-1")
        for call in (
            lambda: m.batch("cancel", F(), signal="go"),
            lambda: m.batch("signal", F()),
            lambda: m.batch("cancel", F(), rate=0),
            lambda: m.batch("cancel", F(), page_size=0),
            lambda: m.batch("cancel", F(), payload=1),
            lambda: m.batch("explode", F()),
        ):
            with pytest.raises(ValueError):
                await call()
        with pytest.raises(TypeError):
            await m.batch("cancel", {"name": "order"})  # type: ignore[arg-type]
        for bad in ({"statuses": frozenset({"BOGUS"})}, {"since": 2.0, "until": 1.0}):
            with pytest.raises(ValueError):
                F(**bad)  # type: ignore[arg-type]
        assert await m.get_workflow("x-1").status() is S.PENDING


async def test_the_sync_client_runs_batches(db_url: str) -> None:
    m = batch_app.build(db_url)
    async with m.connect():
        await m.workflow("order", "s-1").execute(idempotency_key="s-1")

    def go() -> tuple[sw.BatchReport, sw.BatchReport]:
        with batch_app.build(db_url).sync() as client:
            dry = client.batch("cancel", F(key_prefix="s-"), dry_run=True)
            real = client.batch(sw.BatchAction.CANCEL, F(key_prefix="s-"), reason="sync")
            return dry, real

    dry, real = await asyncio.to_thread(go)
    assert dry.dry_run and keys(dry, Out.DONE) == ["s-1"]
    assert not real.dry_run and keys(real, Out.DONE) == ["s-1"]
    async with m.connect():
        assert [e.reason for e in await m.audit_log(action="cancel")] == ["sync"]
