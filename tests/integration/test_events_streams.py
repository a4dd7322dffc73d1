"""Events, streams and search attributes through the Manager, on SQLite, PostgreSQL and the
Engine Server in front of each: a reader follows a stream while the workflow writes it (each
write gated by the reader's signal, so no timing decides the test) and stops at the end; it
resumes from an offset without gap or duplicate; ``get_event`` waits for a key, times out, and
says when the workflow ended without it; a workflow resumed after a failure publishes nothing
twice; search attributes are typed and filter ``list_workflows``."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest

import sagaway as sw
from tests.store_helpers import raw_sql

UTC = datetime.UTC
WHEN = datetime.datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def build(db_url: str, **options: Any) -> sw.Manager:
    options.setdefault("poll_interval", 0.05)
    options.setdefault("recovery_interval", 0.1)
    m = sw.Manager(db_url, **options)
    state = {"fail": True}

    @m.register_workflow(name="writer")
    async def writer(n: int) -> str:
        await sw.set_event("phase", "writing")
        for i in range(n):
            await sw.write_stream("tokens", f"t{i}")
            if i < n - 1:
                await m.signal("next").receive()
        await sw.set_event("phase", "done")
        return "ok"

    @m.register_workflow(name="approval")
    async def approval() -> None:
        decision = await m.signal("go").receive()
        if decision:
            await sw.set_event("approved", decision)

    @m.register_workflow(name="flaky")
    async def flaky() -> int:
        await sw.write_stream("progress", 1, 2)
        await sw.set_event("phase", "half")
        if state["fail"]:
            state["fail"] = False
            raise RuntimeError("crash after publishing")  # suspended, then run again
        await sw.write_stream("progress", 3)
        return 3

    @m.register_workflow(name="order")
    async def order(customer: str, amount: float, region: str) -> None:
        await sw.set_search_attributes(customer=customer, amount=amount, region="pending")
        await sw.set_search_attributes(region=region, vip=amount > 100, placed=WHEN, items=3)

    return m


async def test_a_reader_follows_a_stream_until_the_workflow_ends(db_url: str) -> None:
    m = build(db_url)
    async with m:
        handle = await m.workflow("writer", 3).execute(idempotency_key="w-1")
        seen = []
        async for item in handle.read_stream("tokens", timeout=60):
            seen.append((item.offset, item.value))
            if len(seen) < 3:  # the workflow writes the next item once told to
                await m.signal("next").send("w-1", None, dedupe_id=f"n{len(seen)}")
        assert seen == [(0, "t0"), (1, "t1"), (2, "t2")]
        assert await handle.result(timeout=20) == "ok"
        # Resumed from an offset: the rest, nothing before it, nothing twice.
        rest = [i.value async for i in handle.read_stream("tokens", offset=1)]
        assert rest == ["t1", "t2"]
        assert [i.value async for i in handle.read_stream("tokens", offset=3)] == []
        log = [(o.seq, o.kind, o.name, o.value) async for o in handle.outputs()]
        assert log == [
            (1, "event", "phase", "writing"),
            (2, "stream", "tokens", "t0"),
            (3, "stream", "tokens", "t1"),
            (4, "stream", "tokens", "t2"),
            (5, "event", "phase", "done"),
        ]
        assert [o.seq async for o in handle.outputs(after=3)] == [4, 5]
        assert await handle.get_event("phase") == "done"


async def test_get_event_waits_for_its_key(db_url: str) -> None:
    m = build(db_url)
    async with m:
        handle = await m.workflow("approval").execute(idempotency_key="a-1")
        with pytest.raises(TimeoutError):
            await handle.get_event("approved", timeout=0.2)
        waiting = asyncio.create_task(handle.get_event("approved", timeout=60))
        await m.signal("go").send("a-1", "by alice", dedupe_id="go")
        assert await waiting == "by alice"
        refused = await m.workflow("approval").execute(idempotency_key="a-2")
        waiting = asyncio.create_task(refused.get_event("approved", timeout=60))
        await m.signal("go").send("a-2", None, dedupe_id="go")
        with pytest.raises(sw.EventNotSet):
            await waiting


async def test_a_resumed_workflow_publishes_nothing_twice(db_url: str) -> None:
    m = build(db_url)
    async with m:
        handle = await m.workflow("flaky").execute(idempotency_key="f-1")
        assert await handle.result(timeout=30) == 3
        items = [(i.offset, i.value) async for i in handle.read_stream("progress")]
        assert items == [(0, 1), (1, 2), (2, 3)]
        assert [o.name async for o in handle.outputs()] == [
            "progress",
            "progress",
            "phase",
            "progress",
        ]


async def test_search_attributes_are_typed_and_filter_listings(db_url: str) -> None:
    m = build(db_url)
    async with m:
        for key, customer, amount, region in (
            ("o-1", "4711", 120.5, "eu"),
            ("o-2", "4712", 80.0, "eu"),
            ("o-3", "4711", 9.0, "us"),
        ):
            await m.workflow("order", customer, amount, region).execute_wait(idempotency_key=key)
        assert await m.get_workflow("o-1").search_attributes() == {
            "customer": "4711",
            "amount": 120.5,
            "region": "eu",
            "vip": True,
            "placed": WHEN,
            "items": 3,
        }

        async def keys(where: Any, **kw: Any) -> list[str]:
            return [d.key for d in await m.list_workflows(where=where, **kw)]

        assert await keys({"customer": "4711"}) == ["o-3", "o-1"]  # newest first
        assert await keys("customer=4711") == ["o-3", "o-1"]
        assert await keys(["customer=4711", "region=eu"]) == ["o-1"]
        assert await keys("amount>=80") == ["o-2", "o-1"]
        assert await keys(["vip=true"]) == ["o-1"]
        assert await keys("placed>=2026-12-05T00:00:00+00:00") == ["o-3", "o-2", "o-1"]
        assert await keys({"region": "eu"}, limit=1) == ["o-2"]
        assert await keys("region=pending") == []  # replaced by the second call
        with pytest.raises(ValueError):
            await keys("customer")


async def test_publishing_outside_a_workflow_is_refused(db_url: str) -> None:
    m = build(db_url)
    async with m:
        with pytest.raises(sw.SagawayError, match="workflow code"):
            await sw.set_event("phase", 1)
        with pytest.raises(sw.SagawayError, match="workflow code"):
            await sw.write_stream("s", 1)
        with pytest.raises(sw.SagawayError, match="workflow code"):
            await sw.set_search_attributes(a=1)


async def test_a_reader_elsewhere_is_woken_by_the_published_notice(db_url: str) -> None:
    """A reader in another Manager (another process, as far as the store knows) that polls only
    hourly: each item it reads after the first reached it by a notice (PostgreSQL's trigger,
    the Engine Server's Watch), since the workflow writes it only once told to by the reader."""
    if db_url == "sqlite" or db_url.startswith("sqlite:"):
        pytest.skip("several processes on one SQLite file have no notices: readers poll")
    worker = build(db_url)
    async with worker, sw.Manager(db_url, poll_interval=3600.0).connect() as reader:
        await worker.workflow("writer", 3).execute(idempotency_key="w-elsewhere")
        seen = []
        async for item in reader.get_workflow("w-elsewhere").read_stream("tokens", timeout=60):
            seen.append(item.value)
            if len(seen) < 3:
                await reader.signal("next").send("w-elsewhere", None, dedupe_id=str(len(seen)))
        assert seen == ["t0", "t1", "t2"]


@pytest.mark.direct_db  # reads the table behind the store's back
async def test_published_values_are_sealed_at_rest_with_a_codec(db_url: str) -> None:
    """With an encrypting codec, events and stream items are stored sealed (bound to their
    run, kind and name) and read back in clear; search attributes stay clear (filtered by)."""
    key = sw.codecs.Encrypt.generate_key()
    m = build(db_url, codec=[sw.codecs.Encrypt(keys=[key])])
    async with m:
        handle = await m.workflow("flaky").execute(idempotency_key="sealed")
        assert await handle.result(timeout=30) == 3
        assert [i.value async for i in handle.read_stream("progress")] == [1, 2, 3]
        assert await handle.get_event("phase") == "half"
    stored = [v for (v,) in raw_sql(db_url, "SELECT value FROM outputs")]
    assert len(stored) == 4
    assert all(v.startswith('{"$sagaway_codec":') for v in stored), stored  # the envelope
