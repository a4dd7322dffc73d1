"""Bad input and bad rows, on SQLite and PostgreSQL: refused at the boundary, or isolated.

What the engine stores must be readable again (payloads too deep, NaN/Infinity, invalid Unicode
are refused before anything is recorded), text a database cannot hold is refused before the
database is touched, memory held for finished workflows is bounded in bytes, and one row altered
outside Sagaway affects only its own workflow.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import json
import logging
import sqlite3
import uuid
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

import pytest
from click.testing import CliRunner, Result

import sagaway as sw
from sagaway.cli.main import cli
from sagaway.errors import CorruptRecord
from sagaway.testing.internals import engine_of
from tests.grpc_server import direct_url


class Tier(enum.Enum):
    GOLD = "gold"


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int


def make_manager(db_url: str, **options: Any) -> sw.Manager:
    options.setdefault("poll_interval", 0.05)
    return sw.Manager(db_url, **options)


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def run_sql(db_url: str, sql: str, *params: Any) -> int:
    """Change rows behind Sagaway's back (``?`` placeholders); the number of rows changed."""
    db_url = direct_url(db_url)
    if db_url.startswith("sqlite:///"):
        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as conn:
            return conn.execute(sql, params).rowcount
    import psycopg

    from sagaway.store.postgres import parse_postgres_url

    conninfo, schema, _, _ = parse_postgres_url(db_url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        return conn.execute(sql.replace("?", "%s"), params).rowcount  # type: ignore[arg-type]


async def invoke_cli(args: list[str]) -> Result:
    """Run the ``sagaway`` command (it runs its own event loop: in a thread)."""
    return await asyncio.to_thread(CliRunner().invoke, cli, args)


async def wait_until(check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    """Wait for a state a worker reaches (read every 20 ms, fail after ``timeout``); the
    public API has no event for "became SUSPENDED/WAITING" to wait on instead."""
    async with asyncio.timeout(timeout):
        while not await check():  # noqa: ASYNC110 - polls a database state, see above
            await asyncio.sleep(0.02)


async def status_is(handle: sw.WorkflowHandle[Any], status: sw.WorkflowStatus) -> bool:
    return await handle.status() is status


# ------------------------------------------------------------------ payloads


async def test_too_deep_payloads_are_refused_before_anything_is_stored(db_url: str) -> None:
    manager = make_manager(db_url)

    @manager.register_activity
    async def build(depth: int) -> Any:
        return _nested(depth)

    @manager.register_workflow
    async def takes(x: Any) -> str:
        return "ran"

    @manager.register_workflow
    async def builds(depth: int) -> str:
        await build(depth)
        return "built"

    @manager.register_workflow
    async def listens() -> Any:
        return await manager.signal("deep").receive()

    async with manager:
        # Arguments: refused at the start, nothing created under the key.
        with pytest.raises(sw.PayloadError, match="nested too deeply"):
            await manager.workflow(takes, _nested(220)).execute(idempotency_key="deep-args")
        with pytest.raises(sw.WorkflowNotFound):
            await manager.get_workflow("deep-args").status()
        assert await manager.workflow(takes, _nested(150)).execute_get() == "ran"

        # An activity result: not recorded as a result that replay could never decode.
        handle = await manager.workflow(builds, 230).execute(idempotency_key="deep-result")
        await wait_until(lambda: status_is(handle, sw.WorkflowStatus.SUSPENDED))
        described = await handle.describe()
        assert described.error is not None and "nested too deeply" in described.error["message"]
        assert [s.status for s in described.steps] == [sw.StepStatus.ERROR]

        # A signal: refused at send, instead of being stored and then dropped by the receiver.
        listener = await manager.workflow(listens).execute(idempotency_key="deep-signal")
        await wait_until(lambda: status_is(listener, sw.WorkflowStatus.WAITING))
        with pytest.raises(sw.PayloadError, match="nested too deeply"):
            await manager.signal("deep").send("deep-signal", _nested(210))
        assert await manager.list_signals("deep-signal") == []
        await manager.signal("deep").send("deep-signal", _nested(190))
        assert await listener.result(timeout=10) == _nested(190)


async def test_nan_and_infinity_are_refused_not_changed(db_url: str) -> None:
    manager = make_manager(db_url)

    @manager.register_workflow
    async def echo(x: Any) -> Any:
        return x

    @manager.register_workflow
    async def infinite() -> float:
        return float("inf")

    @manager.register_workflow
    async def listens() -> Any:
        return await manager.signal("n").receive()

    async with manager:
        for value in (float("nan"), [1.0, float("-inf")], {"x": float("nan")}):
            with pytest.raises(sw.PayloadError, match="NaN or Infinity"):
                await manager.workflow(echo, value).execute()
        handle = await manager.workflow(infinite).execute(idempotency_key="inf")
        await wait_until(lambda: status_is(handle, sw.WorkflowStatus.SUSPENDED))
        described = await handle.describe()
        assert described.error is not None and "NaN or Infinity" in described.error["message"]
        listener = await manager.workflow(listens).execute(idempotency_key="nan-signal")
        with pytest.raises(sw.PayloadError, match="NaN or Infinity"):
            await manager.signal("n").send("nan-signal", float("nan"))
        await manager.signal("n").send("nan-signal", 1.5)
        assert await listener.result(timeout=10) == 1.5


CHANGED_BY_JSON = [
    {1, 2},
    frozenset({"a"}),
    b"raw",
    (1, "a"),
    datetime.datetime(2026, 1, 2, 3, 4, 5),
    datetime.date(2026, 1, 2),
    Decimal("12.30"),
    uuid.UUID(int=7),
    Tier.GOLD,
    Point(1, 2),
    {1: "int key"},
    {"nested": [1, {"at": (2, 3)}]},
]
"""Values JSON gives back as another type (list, str, dict) where the annotation is untyped."""


async def test_untyped_values_json_would_change_are_refused_typed_ones_round_trip(
    db_url: str,
) -> None:
    """With ``object``/``Any``/no annotation a set, bytes, tuple, datetime, Decimal, UUID,
    Enum, dataclass or int-keyed dict is refused with PayloadError naming where it is (before
    anything is stored, for a start; the workflow SUSPENDED, for a result); annotated with
    their types the same values come back unchanged."""
    manager = make_manager(db_url)

    @manager.register_workflow
    async def untyped(x: object) -> object:
        return x

    @manager.register_workflow
    async def bare(x):  # type: ignore[no-untyped-def]  # no annotation at all: untyped too
        return x

    @manager.register_activity
    async def stamp() -> Any:
        return datetime.datetime(2026, 1, 2)

    @manager.register_workflow
    async def stamped() -> str:
        return str(await stamp())

    @manager.register_workflow
    async def typed(
        s: set[int], b: bytes, t: tuple[int, str], d: datetime.datetime, n: Decimal, p: Point
    ) -> tuple[set[int], bytes, tuple[int, str], datetime.datetime, Decimal, Point]:
        return s, b, t, d, n, p

    async with manager:
        for workflow in (untyped, bare):
            for value in CHANGED_BY_JSON:
                with pytest.raises(sw.PayloadError, match="cannot be stored unchanged") as raised:
                    await manager.workflow(workflow, value).execute()
                assert "argument 'x' of workflow" in str(raised.value)
        with pytest.raises(sw.PayloadError, match=r"the value at x\['nested'\]\[1\]\['at'\]"):
            await manager.workflow(untyped, {"nested": [1, {"at": (2, 3)}]}).execute()
        assert await manager.list_workflows() == []  # nothing was stored
        plain = {"a": [1, 2.5, None, True, "s", {"b": []}]}
        assert await manager.workflow(untyped, plain).execute_get() == plain
        handle = await manager.workflow(stamped).execute(idempotency_key="stamped")
        await wait_until(lambda: status_is(handle, sw.WorkflowStatus.SUSPENDED))
        described = await handle.describe()
        assert described.error is not None
        assert "result of activity" in described.error["message"]
        assert "is a datetime.datetime" in described.error["message"]
        values = ({1, 2}, b"raw", (1, "a"), datetime.datetime(2026, 1, 2), Decimal("12.30"))
        got = await manager.workflow(typed, *values, Point(1, 2)).execute_get()
        assert got == (*values, Point(1, 2))
        assert [type(v) for v in got] == [set, bytes, tuple, datetime.datetime, Decimal, Point]


async def test_nul_and_lone_surrogates_are_refused_before_the_database(db_url: str) -> None:
    manager = make_manager(db_url)

    @manager.register_workflow
    async def listens() -> Any:
        return await manager.signal("ok").receive()

    @manager.register_workflow
    async def echo(text: str) -> str:
        return text

    async with manager:
        handle = await manager.workflow(listens).execute(idempotency_key="k")
        for name in ("a\x00b", "a\ud800"):
            with pytest.raises(ValueError, match="signal name"):
                await manager.signal(name).send("k", 1)
        for dedupe_id in ("id\x00", "\udfffid"):
            with pytest.raises(ValueError, match="dedupe_id"):
                await manager.signal("ok").send("k", 1, dedupe_id=dedupe_id)
        with pytest.raises(ValueError, match="idempotency_key"):
            await manager.workflow(listens).execute(idempotency_key="k\ud800")
        with pytest.raises(sw.PayloadError, match="valid Unicode"):
            await manager.signal("ok").send("k", {"text": "\ud800"})
        with pytest.raises(sw.PayloadError, match="valid Unicode"):
            await manager.workflow(echo, "a\ud800").execute()
        assert await manager.signal("ok").send("k", "fine", dedupe_id="d-1")
        assert await handle.result(timeout=10) == "fine"


# ------------------------------------------------------------------ memory


async def test_memory_for_ended_workflows_is_bounded_in_bytes(db_url: str) -> None:
    manager = make_manager(db_url)
    big = "x" * (256 * 1024)

    @manager.register_workflow
    async def echo(data: str, i: int) -> str:
        return data + str(i)

    async with manager:
        engine = engine_of(manager)
        handles = [await manager.workflow(echo, big, i).execute() for i in range(40)]
        for i, handle in enumerate(handles):
            assert await handle.result(timeout=30) == big + str(i)  # read back from the store
        held = 0
        for handle in handles:
            assert handle.run_id is not None
            record = engine.recent_ends.get(handle.run_id)
            if record is not None:
                held += len(record.args) + len(record.result or "") + len(record.error or "")
        # 40 x 512 KiB of arguments and results went through; none of it is held.
        assert held < 1024 * 1024
        small = await manager.workflow(echo, "s", 1).execute()
        assert await small.result(timeout=10) == "s1"
        assert small.run_id is not None and small.run_id in engine.recent_ends


# ------------------------------------------------------------------ corrupted rows


async def test_a_workflow_row_with_an_unknown_status_affects_only_itself(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    manager = make_manager(db_url)

    @manager.register_workflow
    async def listens() -> Any:
        return await manager.signal("go").receive()

    async with manager.connect():  # no workers: both stay PENDING
        good = await manager.workflow(listens).execute(idempotency_key="good")
        await manager.workflow(listens).execute(idempotency_key="bad")
        assert run_sql(db_url, "UPDATE workflows SET status = ? WHERE key = ?", "BOGUS", "bad")
        with caplog.at_level(logging.ERROR):
            listed = await manager.list_workflows()
            counts = await manager.count_workflows()
        assert [d.key for d in listed] == ["good"]
        assert counts == {sw.WorkflowStatus.PENDING: 1}
        if direct_url(db_url) == db_url:  # else the store, and its log, are in the server
            assert any(
                "BOGUS" in r.getMessage() and "'bad'" in r.getMessage() for r in caplog.records
            )
        assert await manager.signal("go").send("good", 1)
        with pytest.raises(CorruptRecord, match=r"'bad'.*'status' holds 'BOGUS'"):
            await manager.signal("go").send("bad", 1)
        with pytest.raises(CorruptRecord, match="BOGUS"):
            await manager.get_workflow("bad").status()
        assert await good.status() is sw.WorkflowStatus.PENDING
    result = await invoke_cli(["show", "bad", "--db", db_url])
    assert result.exit_code == 1 and "BOGUS" in result.output and "Traceback" not in result.output
    result = await invoke_cli(["list", "--db", db_url])
    assert result.exit_code == 0 and "good" in result.output


async def test_a_step_with_a_bad_kind_suspends_its_workflow_and_the_rest_runs(
    db_url: str,
) -> None:
    manager = make_manager(db_url)

    @manager.register_activity
    async def step(n: int) -> int:
        return n

    @manager.register_workflow
    async def flow(n: int) -> int:
        first = await step(n)
        more = await manager.signal("go").receive(int)
        return first + more

    async with manager:
        bad = await manager.workflow(flow, 1).execute(idempotency_key="bad")
        await wait_until(lambda: status_is(bad, sw.WorkflowStatus.WAITING))
        assert bad.run_id is not None
        assert run_sql(
            db_url,
            "UPDATE steps SET kind = ? WHERE run_id = ? AND kind = ?",
            "bogus",
            bad.run_id,
            "activity",
        )
        await manager.signal("go").send("bad", 1)  # wakes it: a worker claims it
        await wait_until(lambda: status_is(bad, sw.WorkflowStatus.SUSPENDED))
        described = await bad.describe()
        assert described.error is not None
        assert described.error["type"] == "sagaway.errors.CorruptRecord"
        assert "'bad'" in described.error["message"] and "'bogus'" in described.error["message"]
        assert described.steps == [] and "bogus" in described.problems[0]
        # Everything else keeps running.
        good = await manager.workflow(flow, 2).execute(idempotency_key="good")
        await wait_until(lambda: status_is(good, sw.WorkflowStatus.WAITING))
        await manager.signal("go").send("good", 3)
        assert await good.result(timeout=10) == 5
    result = await invoke_cli(["show", "bad", "--db", db_url])
    assert result.exit_code == 0, result.output
    assert "SUSPENDED" in result.output and "bogus" in result.output


async def test_garbage_in_a_recorded_error_is_shown_as_unreadable(db_url: str) -> None:
    manager = make_manager(db_url)

    class Declined(sw.CompletableError):
        """Declined."""

    @manager.register_activity
    async def charge() -> None:
        raise Declined("no")

    @manager.register_workflow
    async def pay() -> str:
        try:
            await charge()
        except Declined:
            return "declined"
        return "paid"

    async with manager:
        handle = await manager.workflow(pay).execute(idempotency_key="pay")
        assert await handle.result(timeout=10) == "declined"
        assert handle.run_id is not None
        assert run_sql(
            db_url, "UPDATE steps SET error = ? WHERE run_id = ?", "not json {[/x]", handle.run_id
        )
        described = await handle.describe()
    step = described.steps[0]
    assert step.error is not None and step.error["kind"] == "unreadable"
    result = await invoke_cli(["show", "pay", "--db", db_url])
    assert result.exit_code == 0, result.output
    assert "[/x]" in result.output and "COMPLETED" in result.output
    result = await invoke_cli(["show", "pay", "--db", db_url, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["steps"][0]["error"]["kind"] == "unreadable"


async def test_list_takes_statuses_by_name_and_refuses_an_unknown_one(db_url: str) -> None:
    manager = make_manager(db_url)

    @manager.register_workflow
    async def noop() -> int:
        return 1

    async with manager:
        await manager.workflow(noop).execute(idempotency_key="listed")
        handle = manager.get_workflow("listed")
        await wait_until(lambda: status_is(handle, sw.WorkflowStatus.COMPLETED))  # end written
        by_name = await manager.list_workflows(status="COMPLETED")
        by_names = await manager.list_workflows(status=["COMPLETED", "FAILED"])
        by_enum = await manager.list_workflows(status=sw.WorkflowStatus.COMPLETED)
        assert [d.key for d in by_name] == [d.key for d in by_names] == ["listed"]
        assert [d.key for d in by_enum] == ["listed"]
        with pytest.raises(ValueError, match="DONE"):
            await manager.list_workflows(status="DONE")
        with pytest.raises(ValueError, match="DONE"):
            await manager.list_workflows(status=["COMPLETED", "DONE"])
