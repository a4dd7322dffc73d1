"""The audit trail through the Manager, on SQLite, PostgreSQL and the Engine Server in front of
each: every operator verb leaves one entry with who, what, when and why; an application's
everyday starts and signals leave none unless asked; entries outlive manual and background
purges; a refused action, a bad reason and an interrupted purge are handled as documented."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

import sagaway as sw
from sagaway.principals import Principal, current_principal, local_actor, set_current_principal
from sagaway.testing import FakeClock

S = sw.WorkflowStatus
SERVER_CALLER = "anonymous@127.0.0.1"
"""Who the tests' Engine Servers (no token) say a caller is."""


class Boom(RuntimeError):
    pass


def build(db_url: str, **options: Any) -> sw.Manager:
    options.setdefault("poll_interval", 0.05)
    options.setdefault("recovery_interval", 3600.0)  # a suspended run waits for `retry`
    m = sw.Manager(db_url, **options)
    state = {"fail": True}

    @m.register_workflow(name="waits")
    async def waits() -> Any:
        return await m.signal("go").receive()

    @m.register_workflow(name="flaky")
    async def flaky() -> str:
        await m.activity(step_one).execute_get()
        if state["fail"]:
            state["fail"] = False
            raise Boom("first run fails")
        return "done"

    @m.register_activity(name="step_one")
    async def step_one() -> int:
        return 1

    @m.register_workflow(name="parent")
    async def parent() -> Any:
        return await m.workflow("waits").execute_get()

    return m


def expect_who(db_url: str, entry: sw.AuditEntry, on_behalf_of: str | None = None) -> None:
    """Embedded: this process's local actor. Through a server: the server's name for the
    caller, and this process's name for itself only as the claim."""
    if db_url.startswith("grpc"):
        assert entry.actor == SERVER_CALLER
        assert entry.on_behalf_of == (on_behalf_of or local_actor())
    else:
        assert (entry.actor, entry.on_behalf_of) == (local_actor(), on_behalf_of)


async def status_is(status: S, handle: sw.WorkflowHandle[Any]) -> None:
    async def poll() -> None:
        while True:
            if await handle.status() is status:
                return
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), 20)


@pytest.fixture
def acting_as() -> Iterator[Any]:
    """Set the current principal for the test (restored after)."""
    previous = current_principal()
    yield lambda name: set_current_principal(Principal(name))
    set_current_principal(previous)


async def test_every_operator_verb_leaves_one_entry(db_url: str) -> None:
    before = time.time()
    m = build(db_url)
    async with m:
        cancelled = await m.workflow("waits").execute(idempotency_key="c-1")
        await status_is(S.WAITING, cancelled)
        assert await cancelled.cancel("customer asked")
        await status_is(S.CANCELLED, cancelled)
        stuck = await m.workflow("waits").execute(idempotency_key="t-1")
        assert await m.terminate("t-1", "stuck for a week")
        flaky = await m.workflow("flaky").execute(idempotency_key="r-1")
        await status_is(S.SUSPENDED, flaky)
        assert await m.retry("r-1", reason="bug fixed")
        assert await flaky.result(timeout=20) == "done"
        forked = await m.fork("r-1", from_step=2, new_key="r-1-again", reason="replay step 2")
        assert await forked.result(timeout=20) == "done"
        await m.schedule("nightly", "waits", "0 3 * * *", reason="nightly job")
        await m.pause_schedule("nightly", reason="maintenance")
        await m.resume_schedule("nightly")
        manual = await m.trigger_schedule("nightly", reason="run it now")
        await m.delete_schedule("nightly", reason="not needed")
        assert await m.purge(3600, reason="nothing that old") == 0
        trail = list(reversed(await m.audit_log()))
        described = {
            key: (await m.get_workflow(key).describe()).audit
            for key in ("c-1", "t-1", "r-1", "r-1-again", manual.key)
        }
    assert [(e.action, e.target, e.reason) for e in trail] == [
        ("cancel", "c-1", "customer asked"),
        ("terminate", "t-1", "stuck for a week"),
        ("retry", "r-1", "bug fixed"),
        ("fork", "r-1-again", "replay step 2"),
        ("schedule.put", "nightly", "nightly job"),
        ("schedule.pause", "nightly", "maintenance"),
        ("schedule.resume", "nightly", None),
        ("schedule.trigger", manual.key, "run it now"),
        ("schedule.delete", "nightly", "not needed"),
        ("purge", None, "nothing that old"),
    ]
    for entry in trail:
        expect_who(db_url, entry)
        assert before - 5 <= entry.at <= time.time() + 5
    assert [e.seq for e in trail] == sorted(e.seq for e in trail)
    fork = trail[3]
    assert fork.details["source_key"] == "r-1" and fork.details["from_step"] == 2
    assert trail[-1].details["deleted"] == 0 and trail[-1].details["older_than"] == 3600
    assert trail[7].details == {"schedule": "nightly"}
    # describe() lists each workflow's own entries, oldest first.
    assert [e.action for e in described["c-1"]] == ["cancel"]
    assert [e.action for e in described["t-1"]] == ["terminate"]
    assert [e.action for e in described["r-1"]] == ["retry"]
    assert [e.action for e in described["r-1-again"]] == ["fork"]
    assert [e.action for e in described[manual.key]] == ["schedule.trigger"]
    assert stuck.key == "t-1"


async def test_everyday_starts_and_signals_are_not_audited_unless_asked(db_url: str) -> None:
    m = build(db_url)
    async with m:
        plain = await m.workflow("waits").execute(idempotency_key="plain")
        await m.signal("go").send("plain", 1)
        assert await plain.result(timeout=20) == 1
        parent = await m.workflow("parent").execute(idempotency_key="parent")
        await status_is(S.WAITING, parent)
        assert await m.audit_log() == []  # no start, signal or child start recorded
        asked = await m.workflow("waits").execute(idempotency_key="asked", reason="ticket 42")
        await m.signal("go").send("asked", 2, reason="approved by phone")
        assert await asked.result(timeout=20) == 2
        # A refused operator action (the workflow had ended) leaves no entry either.
        assert not await m.cancel("asked", "too late")
        assert not await m.terminate("plain", "too late")
        assert not await m.retry("plain")
        trail = await m.audit_log()
    assert [(e.action, e.target, e.reason) for e in reversed(trail)] == [
        ("start", "asked", "ticket 42"),
        ("signal", "asked", "approved by phone"),
    ]
    assert trail[0].details == {"signal": "go"}


async def test_a_manager_made_to_audit_all_records_every_start_and_signal(db_url: str) -> None:
    m = build(db_url, audit="all")
    async with m:
        handle = await m.workflow("waits").execute(idempotency_key="w")
        await m.signal("go").send("w", "x", dedupe_id="d-1")
        assert await m.signal("go").send("w", "x", dedupe_id="d-1") is False  # a repeat
        assert await handle.result(timeout=20) == "x"
        attached = await m.workflow("waits").execute(idempotency_key="w")  # joins: no entry
        assert attached.key == "w"
        by_name = await m.start_by_name("waits", {}, idempotency_key="n", reason="by name")
        trail = list(reversed(await m.audit_log()))
    assert [(e.action, e.target, e.reason) for e in trail] == [
        ("start", "w", None),
        ("signal", "w", None),
        ("start", "n", "by name"),
    ]
    assert trail[1].details == {"dedupe_id": "d-1", "signal": "go"}
    assert by_name.key == "n"


async def test_the_current_principal_is_recorded_as_on_behalf_of(
    db_url: str, acting_as: Any
) -> None:
    m = build(db_url)
    async with m:
        await m.workflow("waits").execute(idempotency_key="p")
        acting_as("alice")
        assert await m.terminate("p", "alice says so")
        [entry] = await m.audit_log(actor="alice")
    expect_who(db_url, entry, on_behalf_of="alice")
    assert entry.who == f"alice (via {entry.actor})"


async def test_entries_outlive_manual_and_background_purges(db_url: str) -> None:
    clock = FakeClock()
    m = build(db_url, clock=clock, retention=60.0, retention_interval=3600.0)
    async with m:
        purger = m.retention_purger
        assert purger is not None
        await clock.wait_for_sleep(60.0)  # its first round comes a minute after the start
        for key in ("manual", "background"):
            handle = await m.workflow("waits").execute(idempotency_key=key)
            assert await m.terminate(key, f"{key} stop")
            await status_is(S.TERMINATED, handle)
        assert [e.action for e in (await m.get_workflow("manual").describe()).audit] == [
            "terminate"
        ]
        await clock.advance(30)
        # A manual purge of one status; the background one takes the rest, later.
        await m.purge(20, statuses=["TERMINATED"], batch_size=1, reason="manual")
        assert await m.audit_log(key="manual") != []
        with pytest.raises(sw.WorkflowNotFound):
            await m.get_workflow("manual").describe()
        purger.round_done.clear()
        await clock.advance(30.0)
        await asyncio.wait_for(purger.round_done.wait(), 10)
        assert purger.purged == 0  # nothing left that ended a minute ago: no entry for it
        trail = list(reversed(await m.audit_log()))
    assert [(e.action, e.target) for e in trail] == [
        ("terminate", "manual"),
        ("terminate", "background"),
        ("purge", None),
    ]
    assert trail[2].details["deleted"] == 2 and trail[2].details["statuses"] == ["TERMINATED"]
    assert trail[2].reason == "manual"


async def test_a_background_purge_that_deletes_records_its_entry(db_url: str) -> None:
    clock = FakeClock()
    m = build(db_url, clock=clock, retention=10.0, retention_interval=3600.0)
    async with m:
        purger = m.retention_purger
        assert purger is not None
        handle = await m.workflow("waits").execute(idempotency_key="old")
        assert await m.terminate("old", "done with it")
        await status_is(S.TERMINATED, handle)
        await clock.wait_for_sleep(60.0)
        purger.round_done.clear()
        await clock.advance(60.0)
        await asyncio.wait_for(purger.round_done.wait(), 10)
        assert purger.purged == 1
        purge, terminate = await m.audit_log()
    assert (terminate.action, terminate.target, terminate.reason) == (
        "terminate",
        "old",
        "done with it",
    )
    assert purge.action == "purge" and purge.reason is None
    assert purge.details["background"] is True and purge.details["deleted"] == 1
    expect_who(db_url, purge)


async def test_an_interrupted_purge_records_what_it_deleted(db_url: str) -> None:
    clock = FakeClock()
    m = build(db_url, clock=clock, retention=3600.0, retention_interval=3600.0)
    async with m:
        for key in ("a", "b", "c"):
            await m.workflow("waits").execute(idempotency_key=key)
            assert await m.terminate(key, "stop")
        await clock.advance(59)  # not 60: the background purge's first round stays away
        purger = m.retention_purger
        assert purger is not None
        store = purger.engine.store
        real = store.purge_ended
        calls = 0

        async def failing(**kwargs: Any) -> list[str]:
            nonlocal calls
            calls += 1
            if calls == 2:
                raise RuntimeError("disk on fire")
            return await real(**kwargs)

        store.purge_ended = failing  # type: ignore[method-assign]
        with pytest.raises(RuntimeError, match="disk on fire"):
            await m.purge(30, batch_size=1, reason="cleanup")
        store.purge_ended = real  # type: ignore[method-assign]
        [purge] = await m.audit_log(action="purge")
    assert purge.details["interrupted"] is True and purge.details["deleted"] == 1
    assert purge.reason == "cleanup"


async def test_reasons_are_bounded_and_kept_on_one_line(db_url: str) -> None:
    m = build(db_url)
    async with m:
        await m.workflow("waits").execute(idempotency_key="x")
        with pytest.raises(ValueError, match="at most 1000 characters"):
            await m.terminate("x", "y" * 1001)
        assert await m.get_workflow("x").status() is not S.TERMINATED  # nothing was done
        assert await m.terminate("x", "line one\nline two \x1b[31mred")
        [entry] = await m.audit_log()
        with pytest.raises(ValueError, match="unknown audit action 'delete'"):
            await m.audit_log(action="delete")
        with pytest.raises(ValueError, match="limit"):
            await m.audit_log(limit=0)
    assert entry.reason == "line one\\nline two \\x1b[31mred"
