"""`sagaway show` and `sagaway list` pages on SQLite and PostgreSQL: the error of every attempt,
inputs and outputs, signals pending, delivered and rejected with the reason, the lease, human
durations and zoned times, ``--follow`` until the end (driven by the test through a signal),
pages through ``--since/--until/--after`` that show every row once, JSON validity and exit
codes; and the first-run fixes of ``signal`` and ``worker``."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import re
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import sagaway as sw
from sagaway.cli import _format
from sagaway.cli.main import cli
from tests.integration import show_app

ROOT = Path(__file__).resolve().parents[2]


async def sagaway(*args: str) -> Result:
    """Run the ``sagaway`` command (it runs its own event loop: in a thread)."""
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args))


async def _reaches(m: sw.Manager, key: str, status: sw.WorkflowStatus) -> None:
    deadline = time.monotonic() + 20
    while await m.get_workflow(key).status() is not status:
        assert time.monotonic() < deadline, f"{key} never reached {status}"
        await asyncio.sleep(0.02)


@pytest.fixture
async def shown(db_url: str) -> str:
    """Workflows whose steps were retried, completed and failed, and typed signals."""
    m = show_app.build(db_url)
    async with m:
        await m.workflow("order", "apple", qty=2).execute_get(idempotency_key="ok-1")
        with pytest.raises(show_app.OutOfStock):
            await m.workflow("order", "gone").execute_get(idempotency_key="failed-1")
        approved = await m.workflow("approve").execute(idempotency_key="approve-1")
        await m.workflow("approve").execute(idempotency_key="approve-2")
        await _reaches(m, "approve-1", sw.WorkflowStatus.WAITING)
        await _reaches(m, "approve-2", sw.WorkflowStatus.WAITING)
        await m.signal("approval").send("approve-1", {"ok": "perhaps"})  # not an Approval
        await m.signal("approval").send("approve-1", {"ok": True, "by": "ann"})
        assert await approved.result(timeout=20) == "approved by ann"
        await m.signal("later").send("approve-2", {"note": "not awaited yet"})
    return db_url


def _json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# ---------------------------------------------------------------------------- show


async def test_show_lists_every_attempts_error_of_a_failed_step(shown: str) -> None:
    data = _json(await sagaway("show", "failed-1", "--db", shown, "--json"))
    assert data["status"] == "FAILED" and data["input"] == {"item": "gone", "qty": 1}
    (step,) = data["steps"]
    assert step["status"] == "FAILED" and step["attempts"] == 3
    assert [(e["attempt"], e["type"], e["message"]) for e in step["attempt_errors"]] == [
        (1, "sagaway.errors.RetryableError", "warehouse busy (attempt 1)"),
        (2, "sagaway.errors.RetryableError", "warehouse busy (attempt 2)"),
        (3, "tests.integration.show_app.OutOfStock", "no gone left (attempt 3)"),
    ]
    assert all(isinstance(e["at"], float) and e["at_iso"] for e in step["attempt_errors"])

    result = await sagaway("show", "failed-1", "--db", shown)
    assert result.exit_code == 0, result.output
    for n in (1, 2):
        assert re.search(rf"attempt {n} .*warehouse busy \(attempt {n}\)", result.output)
    assert re.search(r"attempt 3 .*OutOfStock.*no gone left \(attempt 3\)", result.output)


async def test_show_input_outputs_and_errors_of_a_step_that_recovered(shown: str) -> None:
    data = _json(await sagaway("show", "ok-1", "--db", shown, "--json"))
    assert data["input"] == {"item": "apple", "qty": 2}
    assert data["result"] == {"reserved": {"item": "apple", "held": True}, "qty": 2}
    (step,) = data["steps"]
    assert step["status"] == "COMPLETED" and step["error"] is None
    assert step["result"] == {"item": "apple", "held": True}
    assert [e["attempt"] for e in step["attempt_errors"]] == [1, 2]
    assert data["duration"] >= 0 and data["ended_at"] >= data["created_at"]
    text = (await sagaway("show", "ok-1", "--db", shown)).output
    assert '"item": "apple"' in text and '"qty": 2' in text
    assert re.search(r"status +COMPLETED +\(after [\d.]+ (ms|s)\)", text), text


async def test_show_signals_pending_delivered_and_rejected(shown: str) -> None:
    data = _json(await sagaway("show", "approve-1", "--db", shown, "--json"))
    rejected, delivered = data["signals"]
    assert rejected["state"] == "rejected" and rejected["payload"] == {"ok": "perhaps"}
    assert "Approval" in rejected["rejected"] and rejected["delivered_to"] is None
    assert delivered["state"] == "delivered" and delivered["rejected"] is None
    assert delivered["delivered_to"] == data["steps"][0]["call_id"]
    assert data["steps"][0]["result"] == {"ok": True, "by": "ann"}
    text = (await sagaway("show", "approve-1", "--db", shown)).output
    assert "rejected" in text and "delivered" in text

    data = _json(await sagaway("show", "approve-2", "--db", shown, "--json"))
    assert [(s["name"], s["state"]) for s in data["signals"]] == [("later", "pending")]
    assert data["waiting_for"] == "signal:approval"
    (receive,) = data["steps"]
    assert receive["status"] == "WAITING" and receive["duration"] is None
    text = (await sagaway("show", "approve-2", "--db", shown)).output
    assert "pending" in text and "not received yet" in text


async def test_show_json_times_carry_epoch_and_zone(shown: str) -> None:
    data = _json(await sagaway("show", "ok-1", "--db", shown, "--json", "--utc"))
    for field in ("created_at", "updated_at", "ended_at"):
        parsed = datetime.datetime.fromisoformat(data[f"{field}_iso"])
        assert parsed.utcoffset() == datetime.timedelta(0)
        assert parsed.timestamp() == pytest.approx(data[field], abs=1e-6)
    step = data["steps"][0]
    assert datetime.datetime.fromisoformat(step["started_at_iso"]).tzinfo is not None
    text = (await sagaway("show", "ok-1", "--db", shown, "--utc")).output
    assert re.search(r"created +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC", text), text


@pytest.fixture
def kolkata() -> Iterator[None]:
    """The local zone is UTC+05:30 (restored after)."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


async def test_show_times_default_to_the_local_zone_with_its_offset(
    shown: str, kolkata: None
) -> None:
    text = (await sagaway("show", "ok-1", "--db", shown)).output
    assert re.search(r"created +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \+05:30", text), text
    data = _json(await sagaway("show", "ok-1", "--db", shown, "--json"))
    assert data["created_at_iso"].endswith("+05:30")


async def test_show_lease_owner_and_expiry_while_running(db_url: str) -> None:
    gate = asyncio.Event()
    m = show_app.build(db_url)

    @m.register_activity
    async def blocked() -> None:
        await gate.wait()

    @m.register_workflow(name="held")
    async def held() -> None:
        await blocked()

    async with m:
        handle = await m.workflow("held").execute(idempotency_key="held-1")
        await _reaches(m, "held-1", sw.WorkflowStatus.RUNNING)
        data = _json(await sagaway("show", "held-1", "--db", db_url, "--json"))
        text = (await sagaway("show", "held-1", "--db", db_url)).output
        gate.set()
        await handle.result(timeout=20)
    assert data["owner"] and data["lease_expires_at"] > data["created_at"]
    assert datetime.datetime.fromisoformat(data["lease_expires_at_iso"]).tzinfo is not None
    assert re.search(r"lease +held by .+, expires .+ \(in [\d.]+ s\)", text), text


async def test_show_follow_of_an_ended_workflow_exits_by_its_end(shown: str) -> None:
    result = await sagaway("show", "ok-1", "--db", shown, "--follow", "--json")
    assert result.exit_code == 0, result.output
    (first,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert first["event"] == "workflow" and first["status"] == "COMPLETED"
    result = await sagaway("show", "failed-1", "--db", shown, "--follow")
    assert result.exit_code == 1 and "FAILED" in result.output
    result = await sagaway("show", "nosuch", "--db", shown, "--follow")
    assert result.exit_code == 3


@pytest.fixture
async def manager(db_url: str) -> AsyncIterator[sw.Manager]:
    m = show_app.build(db_url)
    async with m:
        yield m


async def _follow(url: str, key: str, *extra: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sagaway", "show", key, "--db", url, "--follow", *extra,
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def _line_with(proc: asyncio.subprocess.Process, text: str, seen: list[str]) -> None:
    assert proc.stdout is not None
    while True:
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line, f"ended before {text!r}: {''.join(seen)}"
        seen.append(line)
        if text in line:
            return


async def test_follow_streams_steps_until_the_workflow_ends(
    manager: sw.Manager, db_url: str
) -> None:
    await manager.workflow("stepwise", "pear").execute(idempotency_key="follow-1")
    await _reaches(manager, "follow-1", sw.WorkflowStatus.WAITING)
    proc = await _follow(db_url, "follow-1")
    seen: list[str] = []
    # The command has read the workflow waiting (the end of the first print: the steps table).
    await _line_with(proc, "steps", seen)
    await _line_with(proc, "signal", seen)  # the receive step, WAITING
    head = len(seen)
    await manager.signal("go").send("follow-1", None)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    streamed = "".join(seen[head:]) + out.decode()
    assert re.search(r"signal go #\d+ delivered", streamed), streamed
    assert re.search(r"step \S+ reserve COMPLETED \(attempt 3\)", streamed), streamed
    assert re.search(r"status COMPLETED after ", streamed), streamed


async def test_follow_json_lines_and_exit_1_when_it_fails(manager: sw.Manager, db_url: str) -> None:
    await manager.workflow("stepwise", "pear").execute(idempotency_key="follow-2")
    await _reaches(manager, "follow-2", sw.WorkflowStatus.WAITING)
    proc = await _follow(db_url, "follow-2", "--json")
    seen: list[str] = []
    await _line_with(proc, '"event": "workflow"', seen)
    await manager.get_workflow("follow-2").cancel("stop it")
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1
    events = [json.loads(line) for line in [*seen, *out.decode().splitlines()]]
    assert events[0]["status"] == "WAITING"
    assert events[-1] == {**events[-1], "event": "status", "status": "CANCELLED", "ended": True}


# ---------------------------------------------------------------------------- list pages


@pytest.fixture
async def many(db_url: str) -> str:
    """23 PENDING workflows (no worker runs them)."""
    m = show_app.build(db_url)
    async with m.connect():
        for i in range(23):
            await m.workflow("order", f"item-{i}").execute(idempotency_key=f"w-{i:02}")
    return db_url


async def _pages(url: str, *args: str) -> tuple[list[str], int]:
    keys: list[str] = []
    pages = 0
    after: list[str] = []
    while True:
        result = await sagaway("list", "--db", url, "--json", "--limit", "5", *args, *after)
        rows = _json(result)
        pages += 1
        keys += [r["key"] for r in rows]
        hint = re.search(r"next page: --after (\S+)", result.stderr)
        if hint is None:
            assert len(rows) <= 5
            return keys, pages
        assert len(rows) == 5 and hint.group(1) == rows[-1]["cursor"]
        after = ["--after", hint.group(1)]


async def test_list_pages_show_every_row_exactly_once(many: str) -> None:
    keys, pages = await _pages(many)
    assert sorted(keys) == [f"w-{i:02}" for i in range(23)] and len(keys) == 23
    assert pages == 5
    keys, _ = await _pages(many, "--since", "1h", "--until", "2099-01-01")
    assert len(keys) == 23 and len(set(keys)) == 23
    keys, _ = await _pages(many, "--key-prefix", "w-1", "--status", "PENDING")
    assert sorted(keys) == [f"w-{i}" for i in range(10, 20)]


async def test_list_time_bounds_and_bad_input(many: str) -> None:
    assert _json(await sagaway("list", "--db", many, "--json", "--until", "2000-01-01")) == []
    assert (
        _json(await sagaway("list", "--db", many, "--json", "--since", "2099-01-01T00:00Z")) == []
    )
    now = datetime.datetime.now(datetime.UTC).isoformat()
    assert _json(await sagaway("list", "--db", many, "--json", "--since", now)) == []
    text = await sagaway("list", "--db", many, "--limit", "20")
    assert text.exit_code == 0 and "next page: --after " in text.stdout
    for args in (
        ["--since", "yesterday"],
        ["--until", "2h ago"],
        ["--after", "garbage"],
        ["--limit", "0"],
    ):
        result = await sagaway("list", "--db", many, *args)
        assert result.exit_code == 2, (args, result.output)
        assert "no workflows" not in result.output


def test_relative_times_and_durations() -> None:
    now = 1_800_000_000.0
    assert _format.parse_time("2h", utc=True, option="--since", now=now) == now - 7200
    assert _format.parse_time("3d", utc=True, option="--since", now=now) == now - 3 * 86400
    assert _format.parse_time("90s", utc=True, option="--since", now=now) == now - 90
    assert _format.parse_time("2026-12-01", utc=True, option="--since") == 1796083200.0
    aware = _format.parse_time("2026-12-01T01:00+01:00", utc=False, option="--since")
    assert aware == 1796083200.0
    assert [
        _format.duration(s)
        for s in (0.00042, 0.85, 2.31, 250, 3 * 3600 + 125, 2 * 86400 + 4 * 3600)
    ] == ["0.4 ms", "850 ms", "2.3 s", "4 min 10 s", "3 h 2 min", "2 d 4 h"]


# ---------------------------------------------------------------------------- first-run fixes


async def test_signal_says_delivery_is_checked_on_receipt(shown: str) -> None:
    args = ("--db", shown, "--wait-delivery", "0")
    result = await sagaway("signal", "approve-2", "approval", '{"ok": 1}', *args)
    assert result.exit_code == 0, result.output
    assert "sent (its payload is checked when the workflow receives it" in result.output
    assert "sagaway show approve-2" in result.output
    # Awaited, but no worker runs (the Manager of the fixture is closed): still pending.
    args = ("--db", shown, "--wait-delivery", "0.3")
    result = await sagaway("signal", "approve-2", "approval", '{"ok": 2}', *args)
    assert result.exit_code == 0 and "not received within 0.3s" in result.output
    result = await sagaway("signal", "approve-2", "approval", "{not json", "--db", shown)
    assert result.exit_code == 2 and "PAYLOAD must be JSON" in result.output
    data = _json(await sagaway("show", "approve-2", "--db", shown, "--json"))
    assert [s["state"] for s in data["signals"]] == ["pending"] * 3


async def test_signal_reports_delivery_or_rejection_when_awaited(
    manager: sw.Manager, db_url: str
) -> None:
    handle = await manager.workflow("approve").execute(idempotency_key="approve-9")
    await _reaches(manager, "approve-9", sw.WorkflowStatus.WAITING)
    args = ("--db", db_url, "--wait-delivery", "30")
    result = await sagaway("signal", "approve-9", "later", '{"a": 1}', *args)
    assert result.exit_code == 0 and "'later' sent (kept until" in result.stdout, result.output
    assert "waits for signal 'approval', not 'later'" in result.stderr  # a typo? (docs/operating)
    result = await sagaway("signal", "approve-9", "approval", '{"ok": "perhaps"}', *args)
    assert result.exit_code == 1, result.output
    assert "approve-9: signal 'approval' was rejected" in result.stderr
    assert "Approval" in result.stderr
    await _reaches(manager, "approve-9", sw.WorkflowStatus.WAITING)
    result = await sagaway("signal", "approve-9", "approval", '{"ok": true, "by": "bo"}', *args)
    assert result.exit_code == 0, result.output
    assert re.search(r"approve-9: signal 'approval' delivered \(to step \S+\)", result.output)
    assert await handle.result(timeout=20) == "approved by bo"
    result = await sagaway("signal", "approve-9", "approval", "{}", *args)
    assert result.exit_code == 1 and "ended" in result.stderr


def test_worker_refuses_a_task_queue_no_workflow_uses() -> None:
    result = CliRunner().invoke(
        cli, ["worker", "tests.integration.cli_app:manager", "--task-queues", "default,nosuch"]
    )
    assert result.exit_code == 2, result.output
    assert "'nosuch'" in result.output and "task queues are default" in result.output
